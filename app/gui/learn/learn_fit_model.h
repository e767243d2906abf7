// The model of Learn step (e), "what fits on my GPU?": a model and a GPU from the planner
// catalogues, a context, a batch and how the KV cache is stored. It computes the planners'
// plan() for that scenario (KV in pages of 16 tokens, as vLLM's PagedAttention allocates it):
// whether it fits, the sum behind the answer, the largest batch and the longest context that fit,
// one GPU's memory split into weights, reserve, KV and free, the same scenario under every KV
// storage, and the link to the Planner view.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <QString>
#include <QStringList>

#include "kvlab/planners/solvers.h"
#include "learn/learn_link.h"

namespace kvlab::gui {

class LearnFitModel {
 public:
  // The KV storages offered, as planner scheme ids (the table's rows, in order).
  static const std::vector<std::string>& scheme_ids();

  // llama-3-8b on one h100-sxm, fp16, 8192 tokens, batch 32.
  LearnFitModel();

  const std::vector<planners::ModelSpec>& models() const { return m_models; }
  const std::vector<planners::GpuSpec>& gpus() const { return m_gpus; }
  int model_index() const { return m_model; }
  int gpu_index() const { return m_gpu; }

  // Settings; ids not in the catalogues are refused (false). The context is clamped to 1 .. the
  // model's context length, the batch to at least 1.
  bool set_model(const std::string& id);
  void set_model(int index);
  bool set_gpu(const std::string& id);
  void set_gpu(int index);
  bool set_scheme(const std::string& id);
  void set_context(std::int64_t tokens);
  void set_batch(std::int64_t batch);

  planners::Scenario scenario() const;
  // None when the scenario is invalid: error_text() says why.
  const std::optional<planners::PlanResult>& result() const { return m_result; }
  const QString& error_text() const { return m_error; }

  // "✔ Fits" or "✘ Does not fit" ("—" without a result).
  QString answer() const;
  // Rich text: weights + reserve + KV = used of usable (and when the weights alone leave no room).
  QString detail() const;
  QString max_batch_text() const;    // "Largest batch at N tokens" and the number, rich text
  QString max_context_text() const;  // "Longest context at batch B" and the number
  // One GPU's memory as stacked parts (empty without a result).
  struct Part {
    QString name;
    double bytes = 0;
    enum class Kind { Weights, Reserve, Kv, KvOver, Free } kind = Kind::Weights;
  };
  std::vector<Part> memory_parts() const;
  // One row per scheme_ids() entry: label, KV of the batch, fits, largest batch, longest context
  // (label and the planner's message when that plan fails). fits: none when it failed.
  struct SchemeRow {
    QStringList cells;
    std::optional<bool> fits;
    bool current = false;
  };
  std::vector<SchemeRow> scheme_rows() const;

  LearnLink link() const;

 private:
  void recompute();
  std::int64_t clamped_context(std::int64_t tokens) const;  // 1 .. the model's context length

  std::vector<planners::ModelSpec> m_models;
  std::vector<planners::GpuSpec> m_gpus;
  int m_model = 0, m_gpu = 0;
  std::string m_scheme = "fp16";
  std::int64_t m_context = 8192, m_batch = 32;
  std::optional<planners::PlanResult> m_result;
  QString m_error;
};

}  // namespace kvlab::gui
