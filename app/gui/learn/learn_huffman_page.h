// Learn page (c): Huffman coding of quantization codes. One tensor (keys or values) of layer 0 of
// a synthetic llama3-8b cache is quantized by the engine's KVComp quantizer at a chosen
// rel_scale; the page counts the uint8 codes, draws their histogram with each code's Huffman
// length, builds the Huffman tree merge by merge (Step / Play / Pause / Reset), and compares bits
// per code: fixed 8-bit, the narrowest fixed width, this page's Huffman code, the engine's
// length-limited codebook and the entropy, with the bytes each saves on the tensor.
#pragma once

#include "common/playback_controls.h"
#include "learn/learn_huffman_model.h"
#include "learn/learn_huffman_tree.h"
#include "learn/learn_page.h"

class QComboBox;
class QLabel;
class QPushButton;
class QTableWidget;
class QTimer;

namespace kvlab::gui {

class CodeLengthChart;

class LearnHuffmanPage : public LearnPage {
  Q_OBJECT

 public:
  explicit LearnHuffmanPage(QWidget* parent = nullptr);

  LearnLink link() const override { return m_model.link(); }
  const LearnHuffmanModel& model() const { return m_model; }
  bool is_playing() const;

  // Controls, for the shell (each moves the control, as a user would).
  void set_rel_scale(double rel_scale);  // one of the combo's values
  void set_role(TensorRole role);

 public slots:
  void step();  // one merge of the two lightest nodes
  void play();  // merges on a timer until one tree is left
  void pause();
  void reset();  // back to the leaves, before any merge

 private:
  void recompute();
  void style_table();
  void fill_table();
  void update_step_view();

  LearnHuffmanModel m_model;
  QComboBox *m_role = nullptr, *m_rel = nullptr;
  PlaybackControls* m_playback = nullptr;
  CodeLengthChart* m_chart = nullptr;
  HuffmanTreeWidget* m_tree = nullptr;
  QTableWidget* m_table = nullptr;
  QLabel *m_headline = nullptr, *m_tree_note = nullptr, *m_step_label = nullptr;
  QLabel* m_error_label = nullptr;
};

}  // namespace kvlab::gui
