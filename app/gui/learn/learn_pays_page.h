// Learn page (f): "When does compression pay?". A model, a GPU (and how many share the model),
// a context, a number of concurrent users and one compressed scheme; live, from the planners'
// latency model: fp16 against the scheme, each decode step split into its parts (weights read,
// dense compute, KV read, attention compute, decompression) as bars, the tokens/s per GPU of
// each, and a sentence, computed from those numbers, saying which wins and why. The verdict is
// planners::advise() on one cell, as the Planner's "Should I compress?" matrix computes it.
#pragma once

#include "learn/learn_page.h"
#include "learn/learn_pays_model.h"

class QComboBox;
class QLabel;
class QSlider;

namespace kvlab::gui {

class PlannerStepChart;

class LearnPaysPage : public LearnPage {
  Q_OBJECT

 public:
  explicit LearnPaysPage(QWidget* parent = nullptr);

  LearnLink link() const override { return m_model.link(); }
  const LearnPaysModel& model() const { return m_model; }

  // Controls, for the shell (each moves the control, as a user would).
  void set_model(const QString& id);
  void set_gpu(const QString& id);
  void set_gpus(int tp);
  void set_scheme(const QString& id);
  // Nearest position of the sliders (powers of two; the context capped at the model's limit).
  void set_context(std::int64_t tokens);
  void set_users(int users);

 private:
  void sync_sliders();  // the sliders show the model's context and users
  void update_view();

  LearnPaysModel m_model;
  QComboBox *m_model_combo = nullptr, *m_gpu = nullptr, *m_tp = nullptr, *m_scheme = nullptr;
  QSlider *m_context = nullptr, *m_users = nullptr;
  QLabel *m_context_value = nullptr, *m_users_value = nullptr;
  QLabel *m_verdict = nullptr, *m_sentence = nullptr, *m_error = nullptr;
  QLabel *m_fp16_rate = nullptr, *m_compressed_rate = nullptr;
  PlannerStepChart* m_chart = nullptr;
};

}  // namespace kvlab::gui
