// The model of Learn step (d), eviction: a small synthetic cache (preset "tiny", one layer, 160
// tokens of which the last 64 are decode steps) runs through the engine's eviction simulation
// under one policy: a sliding window, StreamingLLM (attention sinks + window, Xiao et al. 2024),
// H2O (heavy hitters by accumulated attention + recent tokens, Zhang et al. 2023), or the full
// cache for reference. It holds the decode step shown now and says, at that step, how many
// entries one KV head keeps, how many of them are sinks, which planted tokens survive and how
// much of the full cache's attention falls on what is kept; the map has the rows after the step
// marked absent.
#pragma once

#include <optional>

#include <QString>

#include "eviction/eviction_chart_data.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/sources/synthetic.h"
#include "learn/learn_link.h"

namespace kvlab::gui {

class LearnEvictionModel {
 public:
  static constexpr int kContext = 160;
  static constexpr int kSteps = 64;               // the last 64 tokens arrive one per step
  static constexpr int kSinks = 4;                // StreamingLLM's 4 initial tokens (Sec. 3.2)
  static constexpr double kRecentFraction = 0.5;  // H2O splits its budget evenly (Sec. 5)
  static constexpr int kMinBudget = 5, kMaxBudget = 90;  // percent of the tokens

  // H2O at 25 %, KV head 0, every step shown (the last step current).
  LearnEvictionModel();

  // The cache simulated and the policy run.
  const SyntheticConfig& source() const { return m_source; }
  const SyntheticLandmarks& landmarks() const { return m_landmarks; }
  EvictionConfig config() const;
  EvictionPolicy policy() const { return m_policy; }
  int budget_percent() const { return m_budget; }
  int kv_heads() const;
  int kv_head() const { return m_head; }
  // Empty unless the source could not be generated or the simulation failed.
  const QString& error_text() const { return m_error; }
  // The engine's report for config(); none after an error.
  const std::optional<EvictionReport>& report() const { return m_report; }

  // A new policy or budget simulates again (the step kept where it can be); the head is clamped.
  void set_policy(EvictionPolicy policy);
  void set_budget_percent(int percent);  // clamped to kMinBudget .. kMaxBudget
  void set_kv_head(int head);

  // The decode step shown last: 0 .. step_count() - 1.
  int current_step() const { return m_step; }
  int step_count() const { return m_report ? m_report->steps : 0; }
  bool at_end() const { return m_step + 1 >= step_count(); }
  void step();   // one decode step further, up to the last
  void reset();  // back to step 0

  // The eviction map of kv_head() with the steps after the current one absent.
  std::optional<EvictionMapData> map_data() const;
  // The labels at the current step, rich text (empty without a report).
  struct StepTexts {
    QString step, kept, sinks, mix, mass, landmarks;
  };
  StepTexts texts() const;

  // This policy and budget on the same synthetic cache in the Eviction view.
  LearnLink link() const;

 private:
  void simulate();

  SyntheticConfig m_source;
  SyntheticLandmarks m_landmarks;
  KvCache m_cache;
  EvictionPolicy m_policy = EvictionPolicy::H2O;
  int m_budget = 25, m_head = 0, m_step = kSteps - 1;
  std::optional<EvictionReport> m_report;
  QString m_error;
};

}  // namespace kvlab::gui
