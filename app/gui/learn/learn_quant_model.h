// The model of Learn step (b): one layer of the synthetic llama3-8b cache (keys with outlier
// channels), quantized three ways at 2, 4 or 8 bits with min/max (asymmetric) scales:
//  - per-tensor: one minimum and step for the whole layer tensor (computed here: the engine has
//    no asymmetric per-tensor mode);
//  - per-channel: one per channel over groups of G tokens (the engine's KIVI quantizer, key mode);
//  - per-token: one per token over groups of G channels (the engine's KIVI quantizer, value mode).
// For each grouping and tensor it computes the MSE, the relative error and the attention-output
// error it causes, which grouping does best, the conclusion read off them (keys favour
// per-channel and values per-token: KIVI, Liu et al. 2024, Sec. 3), one token's vectors for the
// charts and the link to the Compression view.
#pragma once

#include <array>
#include <vector>

#include <QString>

#include "kvlab/engine/quant/quantizer.h"
#include "kvlab/engine/sources/synthetic.h"
#include "learn/learn_link.h"

namespace kvlab::gui {

class LearnQuantModel {
 public:
  enum class Grouping { PerTensor = 0, PerChannel, PerToken };
  static constexpr int kGroupings = 3;
  static constexpr int kContext = 256;       // tokens: a multiple of every group size offered
  static QString grouping_name(Grouping g);  // "per-tensor", "per-channel", "per-token"

  struct Errors {
    double mse = 0;
    double rel_error = 0;        // sqrt(sum (x - x_hat)^2 / sum x^2)
    double attention_error = 0;  // relative error of the attention output (the other tensor exact)
  };

  // Layer 0 of the seeded llama3-8b source at 2 bits, G = 32.
  LearnQuantModel();

  // The layer, and the method the engine runs for the grouped modes.
  const SyntheticConfig& source() const { return m_source; }
  MethodConfig method() const;
  int bits() const { return m_bits; }
  int group_size() const { return m_group; }
  int heads() const;
  int dim() const;
  // Empty when the source could not be generated or a quantizer failed.
  const QString& error_text() const { return m_error; }

  // 2, 4 or 8 bits; G = 32, 64 or 128. Other values are refused (false).
  bool set_bits(int bits);
  bool set_group_size(int group);

  // [tokens][heads][dim] floats: the layer's tensor and its reconstruction under a grouping.
  const std::vector<float>& original(TensorRole role) const;
  const std::vector<float>& reconstructed(TensorRole role, Grouping g) const;
  const Errors& errors(TensorRole role, Grouping g) const;
  // The grouping with the lowest attention-output error for `role`.
  Grouping best(TensorRole role) const;
  // The table: rows are groupings, columns keys' MSE, rel. error, attention error, then the
  // same for the values; value(g, column) and the row with the lowest value of each column.
  static constexpr int kColumns = 6;
  double value(Grouping g, int column) const;
  Grouping best_in_column(int column) const;
  // "At 4 bits, G = 32: keys do best per-channel ...", rich text read off the attention errors.
  QString conclusion() const;

  // One token's vector of one head over channels [first, last): the original and each
  // grouping's reconstruction, as the charts draw them. quarter: -1 for all channels, 0..3 for
  // a quarter of the head.
  struct Vector {
    int first = 0, last = 0;
    std::vector<float> original;
    std::array<std::vector<float>, kGroupings> reconstructed;
  };
  Vector vector(TensorRole role, int token, int head, int quarter) const;

  // Min/max affine quantization with one range for all of `x`: step = (max - min) / (2^bits - 1),
  // code = round((x - min) / step), x_hat = min + code * step (the rule of the engine's groups).
  static std::vector<float> per_tensor_round_trip(const std::vector<float>& x, int bits);

  // KIVI (or the INT8 tier at 8 bits) at these bits and G on the same synthetic layer.
  LearnLink link() const;

 private:
  struct RoleData {
    std::vector<float> original;
    std::array<std::vector<float>, kGroupings> reconstructed;
    std::array<Errors, kGroupings> errors;
  };
  void generate();
  void recompute();
  RoleData& data(TensorRole role) { return m_data[role == TensorRole::Key ? 0 : 1]; }
  const RoleData& data(TensorRole role) const { return m_data[role == TensorRole::Key ? 0 : 1]; }

  SyntheticConfig m_source;
  KvCache m_cache;
  std::vector<float> m_queries;
  std::array<RoleData, 2> m_data;
  int m_bits = 2, m_group = 32;
  QString m_error;
};

}  // namespace kvlab::gui
