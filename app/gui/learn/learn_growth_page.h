// Learn page (a): the KV cache growing token by token during decoding. A model from the planner
// catalogue, a prompt filled at once (prefill), then decode steps that each append tokens;
// Play / Pause / Step drive them. The chart draws KV bytes against tokens for fp16 and one
// compressed scheme as they grow; the formula below is the planner's own (explain_kv), with the
// current numbers in it. The link opens the Planner with the model and the current context.
#pragma once

#include <cstdint>
#include <vector>

#include "common/playback_controls.h"
#include "learn/learn_growth_model.h"
#include "learn/learn_page.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace kvlab::gui {

class LearnGrowthPage : public LearnPage {
  Q_OBJECT

 public:
  explicit LearnGrowthPage(QWidget* parent = nullptr);

  LearnLink link() const override { return m_model.link(); }
  // The settings, the tokens in the cache and everything computed from them.
  const LearnGrowthModel& model() const { return m_model; }
  bool is_playing() const;

  // Controls, for the shell and screenshots (each moves the control, as a user would).
  void set_model(const QString& id);
  void set_scheme(const QString& id);
  void set_prompt(int tokens);
  void set_target(int tokens);
  void set_step_tokens(int tokens);

 public slots:
  void step();   // one decode step: tokens += step size, up to the target
  void reset();  // back to the prompt (the cache right after prefill)
  void play();   // steps on a timer until the target
  void pause();

 private:
  void sync_controls();  // the controls show the model's settings (clamped there)
  void update_view();
  void draw_chart();

  LearnGrowthModel m_model;
  QComboBox *m_model_combo = nullptr, *m_scheme_combo = nullptr;
  QSpinBox *m_prompt = nullptr, *m_target = nullptr, *m_step_tokens = nullptr;
  PlaybackControls* m_playback = nullptr;
  QCustomPlot* m_chart = nullptr;
  QLabel* m_headline = nullptr;
  QLabel* m_error = nullptr;
  QPlainTextEdit* m_formula = nullptr;
};

}  // namespace kvlab::gui
