// Learn page (e): "what fits on my GPU?". A model and a GPU from the planner catalogues, a
// context and a batch (and how the KV cache is stored); the answer in big letters, one bar of the
// GPU's memory (weights, reserve, KV, free against the usable line), and the largest batch and
// context that fit, all from the planners' plan(). KV is allocated in pages of 16 tokens, as
// vLLM's PagedAttention does. The link opens the Planner view with the same scenario.
#pragma once

#include "learn/learn_fit_model.h"
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

  LearnLink link() const override { return m_model.link(); }
  const LearnFitModel& model() const { return m_model; }

  // Controls, for the shell (each moves the control, as a user would).
  void set_model(const QString& id);
  void set_gpu(const QString& id);
  void set_scheme(const QString& id);
  void set_context(int tokens);
  void set_batch(int batch);

 public slots:
  void recompute();  // the model takes the controls' values; the page shows its result

 private:
  void draw_chart();
  void fill_schemes_table();

  LearnFitModel m_model;
  QComboBox *m_model_combo = nullptr, *m_gpu = nullptr, *m_scheme = nullptr;
  QSpinBox *m_context = nullptr, *m_batch = nullptr;
  QLabel *m_answer = nullptr, *m_detail = nullptr, *m_error = nullptr;
  QLabel *m_max_batch = nullptr, *m_max_context = nullptr;
  QCustomPlot* m_chart = nullptr;
  QTableWidget* m_schemes_table = nullptr;
};

}  // namespace kvlab::gui
