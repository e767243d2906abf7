// Learn page (b): quantization groupings. The model (learn_quant_model.h) quantizes one layer
// of the synthetic llama3-8b cache per tensor, per channel and per token; the page's charts show
// one key vector and one value vector with their three reconstructions, and the table each
// grouping's MSE, relative error and the attention-output error it causes, the best of each
// column in green, so keys favour per-channel and values per-token (KIVI, Liu et al. 2024).
#pragma once

#include "learn/learn_page.h"
#include "learn/learn_quant_model.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace kvlab::gui {

class LearnQuantPage : public LearnPage {
  Q_OBJECT

 public:
  explicit LearnQuantPage(QWidget* parent = nullptr);

  LearnLink link() const override { return m_model.link(); }
  const LearnQuantModel& model() const { return m_model; }

  // Controls, for the shell (each moves the control, as a user would).
  void set_bits(int bits);
  void set_group_size(int group);
  void set_token(int token);
  void set_head(int head);

 private:
  void recompute();
  void fill_table();
  void draw_charts();
  void style_table();
  void draw_vector(QCustomPlot* plot, TensorRole role);

  LearnQuantModel m_model;
  QComboBox *m_bits = nullptr, *m_group = nullptr, *m_channels = nullptr;
  QSpinBox *m_token = nullptr, *m_head = nullptr;
  QCustomPlot *m_key_chart = nullptr, *m_value_chart = nullptr;
  QTableWidget* m_table = nullptr;
  QLabel *m_conclusion = nullptr, *m_error_label = nullptr;
};

}  // namespace kvlab::gui
