// The model of Learn step (c), Huffman coding of quantization codes: one tensor (keys or values)
// of layer 0 of a synthetic llama3-8b cache is quantized by the engine's KVComp quantizer at a
// chosen rel_scale; the model counts the uint8 codes, gives each its length in the textbook
// Huffman code (huffman_steps.h), records the tree merge by merge with the merge shown now, and
// compares bits per code: fixed 8-bit, the narrowest fixed width, this Huffman code, the engine's
// length-limited codebook and the entropy, with the bytes each saves on the tensor.
#pragma once

#include <cstdint>
#include <vector>

#include <QString>
#include <QStringList>

#include "common/chart_data.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/quant/quantizer.h"
#include "kvlab/engine/sources/synthetic.h"
#include "learn/huffman_steps.h"
#include "learn/learn_link.h"

namespace kvlab::gui {

class LearnHuffmanModel {
 public:
  // The tree shows at most this many leaves: the most frequent codes, the rest as one "other".
  static constexpr int kMaxTreeLeaves = 24;
  static constexpr int kContext = 256;  // tokens of the layer (the quantization step's layer)
  // The rel. scales offered (KVComp's step = rel_scale × (max − min) of a unit).
  static const std::vector<double>& rel_scales();

  // Average bits per code of each way to store the tensor's codes.
  struct BitsPerCode {
    double fixed8 = 8;    // one byte per code, as the quantizer writes them
    int fixed_width = 0;  // bits that hold the largest code that occurs
    double huffman = 0;   // this Huffman code: sum count * length / codes
    double engine = 0;    // the engine's codebook (<= 12 bits, escape), same average
    double entropy = 0;   // order-0 Shannon entropy of the histogram
  };

  // The keys at rel. scale 0.1.
  LearnHuffmanModel();

  // Settings: the source layer, and the KVComp method (rel_scale, Huffman codec) it runs.
  const SyntheticConfig& source() const { return m_source; }
  MethodConfig method() const;
  double rel_scale() const { return m_rel_scale; }
  TensorRole role() const { return m_role; }
  bool set_rel_scale(double rel_scale);  // false unless one of rel_scales()
  void set_role(TensorRole role);
  // Empty unless the source, the quantizer or the engine's codebook failed.
  const QString& error_text() const { return m_error; }

  const CodeCounts& histogram() const { return m_counts; }
  std::uint64_t code_count() const { return m_codes; }
  int distinct_codes() const;
  // This Huffman code's length per code value (0: the value does not occur).
  const std::vector<int>& lengths() const { return m_lengths; }
  const HuffmanCodebook& engine_codebook() const { return m_book; }
  const BitsPerCode& bits() const { return m_bits; }
  // The histogram with each code's length, as the chart draws it.
  CodeLengthData chart_data() const;

  // The table: one row per way to store the codes (8-bit, w-bit fixed, Huffman, engine, entropy),
  // columns bits per code, tensor size, saved vs 8-bit, saved vs w-bit.
  static constexpr int kRows = 5, kColumns = 4, kHuffmanRow = 2;
  QStringList row_names() const;
  QStringList row_cells(int row) const;
  // "Huffman stores these N codes in B bits each on average: ...", rich text.
  QString headline() const;

  // The tree built step by step: over every code that occurs, or over the kMaxTreeLeaves - 1
  // most frequent and one "other" leaf (other_codes() > 0) when more occur.
  const HuffmanSteps& tree() const { return m_steps; }
  int other_codes() const { return m_steps.other_codes(); }
  // What the tree shows: every code as a leaf, or the most frequent and one "other".
  QString tree_note() const;
  int merge_step() const { return m_merges; }
  int step_count() const { return m_steps.merge_count(); }
  bool at_end() const { return m_merges >= step_count(); }
  void step();                // one merge of the two lightest roots
  void reset();               // back to the leaves, before any merge
  QString step_text() const;  // "Merge 3 of 12"

  // KVComp at this rel. scale with the Huffman codec on the same synthetic layer.
  LearnLink link() const;

 private:
  void recompute();

  SyntheticConfig m_source;
  KvCache m_cache;
  double m_rel_scale = 0.1;
  TensorRole m_role = TensorRole::Key;
  CodeCounts m_counts{};
  std::uint64_t m_codes = 0;
  std::vector<int> m_lengths;
  HuffmanCodebook m_book;
  BitsPerCode m_bits;
  HuffmanSteps m_steps;
  int m_merges = 0;
  QString m_error;
};

}  // namespace kvlab::gui
