// Learn page (f): "When does compression pay?". A model, a GPU (and how many share the model),
// a context, a number of concurrent users and one compressed scheme; live, from the planners'
// latency model: fp16 against the scheme, each decode step split into its parts (weights read,
// dense compute, KV read, attention compute, decompression) as bars, the tokens/s per GPU of
// each, and a sentence, computed from those numbers, saying which wins and why. The verdict is
// planners::advise() on one cell, as the Planner's "Should I compress?" matrix computes it.
#pragma once

#include <vector>

#include "kvlab/planners/serving.h"
#include "learn/learn_page.h"
#include "planner/planner_chart_data.h"

class QComboBox;
class QLabel;
class QSlider;

namespace kvlab::gui {

class PlannerStepChart;

class LearnPaysPage : public LearnPage {
  Q_OBJECT

 public:
  explicit LearnPaysPage(QWidget* parent = nullptr);

  LearnLink link() const override;

  // The scenario the controls describe (scheme: fp16; batch: the users), and what was computed.
  planners::Scenario scenario() const;
  std::int64_t context() const;
  int users() const;
  const planners::Scheme& compressed_scheme() const;
  // The advice for the one cell (none when the scenario is invalid: error_text() says why).
  const std::optional<planners::AdviceCell>& cell() const { return m_cell; }
  // fp16's and the compressed scheme's decode step, at the sequences each holds.
  const std::vector<StepParts>& steps() const { return m_steps; }
  QString sentence() const;
  QString error_text() const;

  void set_model(const QString& id);
  void set_gpu(const QString& id);
  void set_gpus(int tp);
  void set_scheme(const QString& id);
  // Nearest position of the sliders (powers of two; the context capped at the model's limit).
  void set_context(std::int64_t tokens);
  void set_users(int users);

  QComboBox* model_combo() const { return m_model; }
  QComboBox* gpu_combo() const { return m_gpu; }
  QComboBox* scheme_combo() const { return m_scheme; }
  QSlider* context_slider() const { return m_context; }
  QSlider* users_slider() const { return m_users; }
  QLabel* verdict_label() const { return m_verdict; }
  QLabel* sentence_label() const { return m_sentence; }
  QLabel* fp16_rate_label() const { return m_fp16_rate; }
  QLabel* compressed_rate_label() const { return m_compressed_rate; }
  PlannerStepChart* step_chart() const { return m_chart; }

 public slots:
  void recompute();

 private:
  void update_context_range();
  QString explain(const planners::AdviceCell& c) const;

  std::vector<planners::ModelSpec> m_models;
  std::vector<planners::GpuSpec> m_gpus;
  std::vector<planners::Scheme> m_schemes;  // the compressed choices
  std::vector<std::int64_t> m_contexts;     // the context slider's positions
  std::optional<planners::AdviceCell> m_cell;
  std::vector<StepParts> m_steps;
  QComboBox *m_model = nullptr, *m_gpu = nullptr, *m_tp = nullptr, *m_scheme = nullptr;
  QSlider *m_context = nullptr, *m_users = nullptr;
  QLabel *m_context_value = nullptr, *m_users_value = nullptr;
  QLabel *m_verdict = nullptr, *m_sentence = nullptr, *m_error = nullptr;
  QLabel *m_fp16_rate = nullptr, *m_compressed_rate = nullptr;
  PlannerStepChart* m_chart = nullptr;
};

}  // namespace kvlab::gui
