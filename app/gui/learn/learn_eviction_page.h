// Learn page (d): eviction. A small synthetic cache (preset "tiny", one layer, 160 tokens of
// which the last 64 are decode steps) runs through the engine's eviction simulation under one
// policy: a sliding window, StreamingLLM (attention sinks + window, Xiao et al. 2024), H2O (heavy
// hitters by accumulated attention + recent tokens, Zhang et al. 2023), or the full cache for
// reference. The eviction map of one KV head is revealed one decode step at a time (Play / Pause
// / Step / Reset); the labels say, at the current step, how many entries are kept, how many of
// them are sinks, which planted tokens survive, and how much of the full cache's attention falls
// on what is kept. The page opens with every step shown; Reset goes back to step 0.
#pragma once

#include <optional>
#include <vector>

#include "common/playback_controls.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/sources/synthetic.h"
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

  LearnLink link() const override;

  // The cache the page simulates and the policy it runs (the controls' current settings).
  const SyntheticConfig& source() const { return m_source; }
  EvictionConfig config() const;
  // Empty when the source could not be generated or the simulation failed (the page says why).
  const QString& error_text() const { return m_error; }
  // The engine's report for config(); none after an error.
  const std::optional<EvictionReport>& report() const { return m_report; }

  // The decode step shown last: 0 .. step_count() - 1. Rows after it are drawn as absent.
  int current_step() const { return m_step; }
  int step_count() const { return m_report ? m_report->steps : 0; }
  int kv_head() const;
  bool is_playing() const;

  // Controls, for tests and the shell.
  void set_policy(EvictionPolicy policy);
  void set_budget_percent(int percent);
  void set_kv_head(int head);
  QComboBox* policy_combo() const { return m_policy; }
  QSpinBox* budget_spin() const { return m_budget; }
  QSpinBox* head_spin() const { return m_head; }
  PlaybackControls* playback() const { return m_playback; }
  QPushButton* play_button() const { return m_playback->play_button(); }
  QPushButton* step_button() const { return m_playback->step_button(); }
  QPushButton* reset_button() const { return m_playback->reset_button(); }
  QTimer* timer() const { return m_playback->timer(); }
  EvictionMapChart* chart() const { return m_chart; }
  QLabel* step_label() const { return m_step_label; }
  QLabel* kept_label() const { return m_kept_label; }
  QLabel* sinks_label() const { return m_sinks_label; }
  QLabel* mix_label() const { return m_mix_label; }
  QLabel* mass_label() const { return m_mass_label; }
  QLabel* landmarks_label() const { return m_landmarks_label; }

 public slots:
  void step();   // one decode step further, up to the last
  void reset();  // back to step 0 (and pause)
  void play();   // steps on the timer to the last step (from step 0 when already there)
  void pause();
  void tick();  // what the timer does: one step, and pause at the last

 private:
  void simulate();
  void show_step();
  void draw_map();
  void update_labels();

  SyntheticConfig m_source;
  SyntheticLandmarks m_landmarks;
  KvCache m_cache;
  std::optional<EvictionReport> m_report;
  QString m_error;
  int m_step = 0;
  QComboBox* m_policy = nullptr;
  QSpinBox *m_budget = nullptr, *m_head = nullptr;
  PlaybackControls* m_playback = nullptr;
  EvictionMapChart* m_chart = nullptr;
  QLabel *m_step_label = nullptr, *m_kept_label = nullptr, *m_sinks_label = nullptr;
  QLabel *m_mix_label = nullptr, *m_mass_label = nullptr, *m_landmarks_label = nullptr;
  QLabel* m_error_label = nullptr;
};

}  // namespace kvlab::gui
