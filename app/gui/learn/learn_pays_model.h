// The model of Learn step (f), "when does compression pay?": a model, a GPU (and how many share
// the model by tensor parallelism), a context, a number of concurrent users and one compressed
// scheme. From the planners' latency model it computes fp16 against the scheme: the verdict
// (planners::advise() on one cell, as the Planner's "Should I compress?" matrix does), each
// decode step split into its parts, the tokens/s per GPU of each, a sentence built from those
// numbers saying which wins and why, and the link to the Planner view.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <QString>

#include "kvlab/planners/serving.h"
#include "learn/learn_link.h"
#include "planner/planner_chart_data.h"

namespace kvlab::gui {

class LearnPaysModel {
 public:
  static constexpr int kMaxUsersLog2 = 10;  // 1 to 1,024 users
  static constexpr double kMinGain = 0.10;  // as `kvlab plan advise` and the Planner's matrix
  // The compressed schemes offered, as planner scheme ids.
  static const std::vector<std::string>& scheme_ids();
  static const std::vector<int>& tp_choices();  // 1, 2, 4, 8

  // llama-3-8b on h100-sxm, TP 1, kivi2, 8192 tokens, 32 users.
  LearnPaysModel();

  const std::vector<planners::ModelSpec>& models() const { return m_models; }
  const std::vector<planners::GpuSpec>& gpus() const { return m_gpus; }
  int model_index() const { return m_model; }
  int gpu_index() const { return m_gpu; }
  int tp() const { return m_tp; }
  int scheme_index() const { return m_scheme; }

  // Settings. The contexts offered are powers of two from 512 up to the model's limit, and the
  // users powers of two from 1 to 1,024: set_context and set_users take the nearest.
  bool set_model(const std::string& id);
  void set_model(int index);  // keeps the nearest context the new model offers
  bool set_gpu(const std::string& id);
  void set_gpu(int index);
  bool set_tp(int tp);
  bool set_scheme(const std::string& id);
  void set_scheme(int index);
  void set_context(std::int64_t tokens);
  void set_context_index(int index);
  void set_users(int users);
  void set_users_log2(int log2);

  const std::vector<std::int64_t>& contexts() const { return m_contexts; }
  int context_index() const { return m_context; }
  int users_log2() const { return m_users; }
  std::int64_t context() const;
  int users() const { return 1 << m_users; }
  const planners::Scheme& compressed_scheme() const;
  // The scenario: fp16, the users as the batch.
  planners::Scenario scenario() const;

  // The advice for the one cell (none when the scenario is invalid: error_text() says why).
  const std::optional<planners::AdviceCell>& cell() const { return m_cell; }
  const QString& error_text() const { return m_error; }
  // fp16's and the compressed scheme's decode step, at the sequences each holds.
  const std::vector<StepParts>& steps() const { return m_steps; }
  // "Don't compress", "Compress with kivi2", "Nothing fits" ("—" without a cell).
  QString verdict() const;
  // The numbers behind the verdict, in words (empty without a cell).
  QString sentence() const;
  // Rich text for fp16 (0) or the compressed scheme (1): tokens/s per GPU and users held.
  QString rate_text(int k) const;

  LearnLink link() const;

 private:
  void recompute();
  void update_contexts(std::int64_t keep);

  std::vector<planners::ModelSpec> m_models;
  std::vector<planners::GpuSpec> m_gpus;
  std::vector<planners::Scheme> m_schemes;  // the compressed choices
  std::vector<std::int64_t> m_contexts;
  int m_model = 0, m_gpu = 0, m_tp = 1, m_scheme = 0, m_context = 0, m_users = 5;
  std::optional<planners::AdviceCell> m_cell;
  std::vector<StepParts> m_steps;
  QString m_error;
};

}  // namespace kvlab::gui
