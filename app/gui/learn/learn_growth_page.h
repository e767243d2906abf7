// Learn page (a): the KV cache growing token by token during decoding. A model from the planner
// catalogue, a prompt filled at once (prefill), then decode steps that each append tokens;
// Play / Pause / Step drive them. The chart draws KV bytes against tokens for fp16 and one
// compressed scheme as they grow; the formula below is the planner's own (explain_kv), with the
// current numbers in it. The link opens the Planner with the model and the current context.
#pragma once

#include <cstdint>
#include <vector>

#include "common/playback_controls.h"
#include "kvlab/planners/kv_memory.h"
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

  LearnLink link() const override;

  // The page's state, as the chart and labels show it.
  const planners::ModelSpec& model() const;
  const planners::Scheme& compressed_scheme() const { return m_scheme; }
  std::int64_t tokens() const { return m_tokens; }
  std::uint64_t fp16_bytes() const;        // KV bytes of one sequence at tokens() in fp16
  std::uint64_t compressed_bytes() const;  // the same under compressed_scheme()
  bool is_playing() const;

  // Controls, for tests and the shell.
  void set_model(const QString& id);
  void set_scheme(const QString& id);
  void set_prompt(int tokens);
  void set_target(int tokens);
  void set_step_tokens(int tokens);
  QComboBox* model_combo() const { return m_model; }
  QComboBox* scheme_combo() const { return m_scheme_combo; }
  QSpinBox* prompt_spin() const { return m_prompt; }
  QSpinBox* target_spin() const { return m_target; }
  QSpinBox* step_spin() const { return m_step_tokens; }
  PlaybackControls* playback() const { return m_playback; }
  QPushButton* play_button() const { return m_playback->play_button(); }
  QPushButton* step_button() const { return m_playback->step_button(); }
  QPushButton* reset_button() const { return m_playback->reset_button(); }
  QCustomPlot* chart() const { return m_chart; }
  QLabel* headline_label() const { return m_headline; }
  QPlainTextEdit* formula_text() const { return m_formula; }

 public slots:
  void step();   // one decode step: tokens += step size, up to the target
  void reset();  // back to the prompt (the cache right after prefill)
  void play();   // steps on a timer until the target
  void pause();

 private:
  void on_settings_changed();
  void update_view();
  void draw_chart();
  planners::Deployment deployment() const;

  std::vector<planners::ModelSpec> m_models;
  planners::Scheme m_fp16, m_scheme;
  std::int64_t m_tokens = 0;
  QComboBox *m_model = nullptr, *m_scheme_combo = nullptr;
  QSpinBox *m_prompt = nullptr, *m_target = nullptr, *m_step_tokens = nullptr;
  PlaybackControls* m_playback = nullptr;
  QCustomPlot* m_chart = nullptr;
  QLabel* m_headline = nullptr;
  QLabel* m_error = nullptr;
  QPlainTextEdit* m_formula = nullptr;
};

}  // namespace kvlab::gui
