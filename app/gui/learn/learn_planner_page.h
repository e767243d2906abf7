// Learn page (e): "what fits on my GPU?". A model and a GPU from the planner catalogues, a
// context and a batch (and how the KV cache is stored); the answer in big letters, one bar of the
// GPU's memory (weights, reserve, KV, free against the usable line), and the largest batch and
// context that fit, all from the planners' plan(). KV is allocated in pages of 16 tokens, as
// vLLM's PagedAttention does. The link opens the Planner view with the same scenario.
#pragma once

#include <vector>

#include "kvlab/planners/solvers.h"
#include "learn/learn_page.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace kvlab::gui {

class LearnPlannerPage : public LearnPage {
  Q_OBJECT

 public:
  explicit LearnPlannerPage(QWidget* parent = nullptr);

  LearnLink link() const override;

  // The scenario the controls describe and its result (none when the scenario is invalid: the
  // page then says why in error_text()).
  planners::Scenario scenario() const;
  const std::optional<planners::PlanResult>& result() const { return m_result; }
  QString error_text() const;

  void set_model(const QString& id);
  void set_gpu(const QString& id);
  void set_scheme(const QString& id);
  void set_context(int tokens);
  void set_batch(int batch);
  QComboBox* model_combo() const { return m_model; }
  QComboBox* gpu_combo() const { return m_gpu; }
  QComboBox* scheme_combo() const { return m_scheme; }
  QSpinBox* context_spin() const { return m_context; }
  QSpinBox* batch_spin() const { return m_batch; }
  QLabel* answer_label() const { return m_answer; }
  QLabel* detail_label() const { return m_detail; }
  QLabel* max_batch_label() const { return m_max_batch; }
  QLabel* max_context_label() const { return m_max_context; }
  QCustomPlot* memory_chart() const { return m_chart; }
  // The same model, GPU, context and batch under every KV storage: one row per scheme.
  QTableWidget* schemes_table() const { return m_schemes_table; }

 public slots:
  void recompute();

 private:
  void draw_chart();
  void fill_schemes_table(const planners::Scenario& s);

  std::vector<planners::ModelSpec> m_models;
  std::vector<planners::GpuSpec> m_gpus;
  std::optional<planners::PlanResult> m_result;
  QComboBox *m_model = nullptr, *m_gpu = nullptr, *m_scheme = nullptr;
  QSpinBox *m_context = nullptr, *m_batch = nullptr;
  QLabel *m_answer = nullptr, *m_detail = nullptr, *m_error = nullptr;
  QLabel *m_max_batch = nullptr, *m_max_context = nullptr;
  QCustomPlot* m_chart = nullptr;
  QTableWidget* m_schemes_table = nullptr;
};

}  // namespace kvlab::gui
