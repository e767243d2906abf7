// Learn page (d): eviction. The model (learn_eviction_model.h) runs a small synthetic cache
// through the engine's eviction simulation under one policy (window, StreamingLLM, H2O or the
// full cache). The eviction map of one KV head is revealed one decode step at a time (Play / Pause
// / Step / Reset); the labels say, at the current step, how many entries are kept, how many of
// them are sinks, which planted tokens survive, and how much of the full cache's attention falls
// on what is kept. The page opens with every step shown; Reset goes back to step 0.
#pragma once

#include "common/playback_controls.h"
#include "learn/learn_eviction_model.h"
#include "learn/learn_page.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSpinBox;
class QTimer;

namespace kvlab::gui {

class EvictionMapChart;

class LearnEvictionPage : public LearnPage {
  Q_OBJECT

 public:
  explicit LearnEvictionPage(QWidget* parent = nullptr);

  LearnLink link() const override { return m_model.link(); }
  const LearnEvictionModel& model() const { return m_model; }
  bool is_playing() const;

  // Controls, for the shell (each moves the control, as a user would).
  void set_policy(EvictionPolicy policy);
  void set_budget_percent(int percent);
  void set_kv_head(int head);

 public slots:
  void step();   // one decode step further, up to the last
  void reset();  // back to step 0 (and pause)
  void play();   // steps on the timer to the last step (from step 0 when already there)
  void pause();
  void tick();  // what the timer does: one step, and pause at the last

 private:
  void simulate();  // the model takes the policy and budget; the page shows its report
  void show_step();

  LearnEvictionModel m_model;
  QComboBox* m_policy = nullptr;
  QSpinBox *m_budget = nullptr, *m_head = nullptr;
  PlaybackControls* m_playback = nullptr;
  EvictionMapChart* m_chart = nullptr;
  QLabel *m_step_label = nullptr, *m_kept_label = nullptr, *m_sinks_label = nullptr;
  QLabel *m_mix_label = nullptr, *m_mass_label = nullptr, *m_landmarks_label = nullptr;
  QLabel* m_error_label = nullptr;
};

}  // namespace kvlab::gui
