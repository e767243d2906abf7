// Learn page (c): Huffman coding of quantization codes. One tensor (keys or values) of layer 0 of
// a synthetic llama3-8b cache is quantized by the engine's KVComp quantizer at a chosen
// rel_scale; the page counts the uint8 codes, draws their histogram with each code's Huffman
// length, builds the Huffman tree merge by merge (Step / Play / Pause / Reset), and compares bits
// per code: fixed 8-bit, the narrowest fixed width, this page's Huffman code, the engine's
// length-limited codebook and the entropy, with the bytes each saves on the tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "common/playback_controls.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/quant/quantizer.h"
#include "kvlab/engine/sources/synthetic.h"
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
  // The tree shows at most this many leaves: the most frequent codes, the rest as one "other".
  static constexpr int kMaxTreeLeaves = 24;

  // Average bits per code of each way to store the tensor's codes.
  struct BitsPerCode {
    double fixed8 = 8;    // one byte per code, as the quantizer writes them
    int fixed_width = 0;  // bits that hold the largest code that occurs
    double huffman = 0;   // this page's Huffman code: sum count * length / codes
    double engine = 0;    // the engine's codebook (<= 12 bits, escape), same average
    double entropy = 0;   // order-0 Shannon entropy of the histogram
  };

  explicit LearnHuffmanPage(QWidget* parent = nullptr);

  LearnLink link() const override;

  // Settings: the source layer, and the KVComp method (rel_scale, Huffman codec) it runs.
  const SyntheticConfig& source() const { return m_source; }
  MethodConfig method() const;
  double rel_scale() const;
  TensorRole role() const;
  void set_rel_scale(double rel_scale);  // one of the combo's values
  void set_role(TensorRole role);
  // Empty unless the source or the quantizer failed (the page then says why).
  QString error_text() const { return m_error; }

  // What the page computed for the current settings.
  const CodeCounts& histogram() const { return m_counts; }
  std::uint64_t code_count() const { return m_codes; }
  int distinct_codes() const;
  // This page's Huffman code length per code value (0: the value does not occur).
  const std::vector<int>& lengths() const { return m_lengths; }
  const HuffmanCodebook& engine_codebook() const { return m_book; }
  const BitsPerCode& bits() const { return m_bits; }
  // The tree built step by step: over every code that occurs, or over the kMaxTreeLeaves - 1
  // most frequent and one "other" leaf (other_codes() > 0) when more occur.
  const HuffmanSteps& tree() const { return m_steps; }
  int other_codes() const { return m_steps.other_codes(); }
  int merge_step() const;
  int step_count() const { return m_steps.merge_count(); }
  bool is_playing() const;

  QComboBox* role_combo() const { return m_role; }
  QComboBox* rel_scale_combo() const { return m_rel; }
  PlaybackControls* playback() const { return m_playback; }
  QPushButton* play_button() const { return m_playback->play_button(); }
  QPushButton* step_button() const { return m_playback->step_button(); }
  QPushButton* reset_button() const { return m_playback->reset_button(); }
  // The histogram (bars) with each code's length in this page's Huffman code (red).
  CodeLengthChart* chart() const { return m_chart; }
  HuffmanTreeWidget* tree_widget() const { return m_tree; }
  QTableWidget* table() const { return m_table; }
  QLabel* headline_label() const { return m_headline; }
  QLabel* tree_note_label() const { return m_tree_note; }

 public slots:
  void step();  // one merge of the two lightest nodes
  void play();  // merges on a timer until one tree is left
  void pause();
  void reset();  // back to the leaves, before any merge

 private:
  void recompute();
  void style_table();
  void fill_table();
  void draw_chart();
  void update_step_view();

  SyntheticConfig m_source;
  KvCache m_cache;
  CodeCounts m_counts{};
  std::uint64_t m_codes = 0;
  std::vector<int> m_lengths;
  HuffmanCodebook m_book;
  BitsPerCode m_bits;
  HuffmanSteps m_steps;
  QString m_error;
  QComboBox *m_role = nullptr, *m_rel = nullptr;
  PlaybackControls* m_playback = nullptr;
  CodeLengthChart* m_chart = nullptr;
  HuffmanTreeWidget* m_tree = nullptr;
  QTableWidget* m_table = nullptr;
  QLabel *m_headline = nullptr, *m_tree_note = nullptr, *m_step_label = nullptr;
  QLabel* m_error_label = nullptr;
};

}  // namespace kvlab::gui
