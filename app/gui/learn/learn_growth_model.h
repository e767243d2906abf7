// The model of Learn step (a), the KV cache growing token by token during decoding: a model from
// the planner catalogue, a prompt filled at once (prefill), then decode steps that each append
// tokens up to a target. It holds the settings and the tokens in the cache, and computes what
// the page shows from the planners: KV bytes of one sequence in fp16 and under one compressed
// scheme (kv_bytes_per_sequence, no paging), the headline, the planner's own formula
// (explain_kv) with the current numbers, the chart's lines and the link to the Planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <QString>

#include "kvlab/planners/kv_memory.h"
#include "learn/learn_link.h"

namespace kvlab::gui {

class LearnGrowthModel {
 public:
  // The compressed schemes offered beside fp16, as planner scheme ids.
  static const std::vector<std::string>& scheme_ids();

  // llama-3-8b, kivi2, a 512-token prompt, decoding to 8192 tokens, 64 tokens per step.
  LearnGrowthModel();

  const std::vector<planners::ModelSpec>& models() const { return m_models; }
  int model_index() const { return m_model; }
  const planners::ModelSpec& model() const { return m_models[static_cast<std::size_t>(m_model)]; }
  const planners::Scheme& fp16_scheme() const { return m_fp16; }
  const planners::Scheme& compressed_scheme() const { return m_scheme; }
  int prompt() const { return m_prompt; }
  int target() const { return m_target; }
  int step_tokens() const { return m_step_tokens; }
  std::int64_t tokens() const { return m_tokens; }
  bool at_end() const { return m_tokens >= m_target; }

  // Settings. A model or target change keeps the tokens within the new target (never below the
  // prompt); the target is clamped to 1 .. the model's context; a new prompt resets.
  void set_model(int index);
  bool set_model(const std::string& id);   // false: not in the catalogue
  bool set_scheme(const std::string& id);  // false: not one of scheme_ids()
  void set_prompt(int tokens);
  void set_target(int tokens);
  void set_step_tokens(int tokens);

  void step();   // one decode step: tokens += step tokens, up to the target
  void reset();  // back to the prompt (the cache right after prefill)

  std::uint64_t fp16_bytes() const;        // KV bytes of one sequence at tokens() in fp16
  std::uint64_t compressed_bytes() const;  // the same under compressed_scheme()
  std::uint64_t bytes_at(const planners::Scheme& scheme, std::int64_t tokens) const;

  // Rich text: tokens held (prompt + decoded), the bytes under each scheme, what a token adds.
  QString headline() const;
  // The planner's formula for fp16 and the compressed scheme, with the current numbers.
  QString formula() const;
  // Non-empty when the prompt is longer than the target (the cache then does not grow).
  QString error_text() const;

  // The chart: for fp16 and the compressed scheme, KV bytes against tokens from 0 to
  // chart_end(), sampled at kChartPoints + 1 tokens; `done` up to the tokens now (ending at
  // them), `ahead` beyond.
  static constexpr int kChartPoints = 240;
  struct Line {
    const planners::Scheme* scheme = nullptr;
    std::vector<std::int64_t> done_tokens, ahead_tokens;
    std::vector<double> done_bytes, ahead_bytes;
    double now_bytes = 0;
  };
  std::int64_t chart_end() const { return std::max<std::int64_t>(m_target, m_tokens); }
  std::vector<Line> lines() const;

  // The Planner with this model, the tokens now as the context, fp16 and the compressed scheme.
  LearnLink link() const;

 private:
  planners::Deployment deployment() const;
  void settings_changed();

  std::vector<planners::ModelSpec> m_models;
  planners::Scheme m_fp16, m_scheme;
  int m_model = 0;
  int m_prompt = 512, m_target = 8192, m_step_tokens = 64;
  std::int64_t m_tokens = 0;
};

}  // namespace kvlab::gui
