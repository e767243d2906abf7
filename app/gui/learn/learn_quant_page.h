// Learn page (b): one layer of the synthetic llama3-8b cache (keys with outlier channels),
// quantized three ways at 2, 4 or 8 bits with min/max (asymmetric) scales:
//  - per-tensor: one minimum and step for the whole layer tensor (computed on this page: the
//    engine has no asymmetric per-tensor mode);
//  - per-channel: one per channel over groups of G tokens (the engine's KIVI quantizer, key mode);
//  - per-token: one per token over groups of G channels (the engine's KIVI quantizer, value mode).
// The charts show one key vector and one value vector with their three reconstructions; the
// table gives each grouping's MSE, relative error and the attention-output error it causes, so
// keys favour per-channel and values per-token (KIVI, Liu et al. 2024, Sec. 3).
#pragma once

#include <array>
#include <vector>

#include "kvlab/engine/quant/quantizer.h"
#include "kvlab/engine/sources/synthetic.h"
#include "learn/learn_page.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace kvlab::gui {

class LearnQuantPage : public LearnPage {
  Q_OBJECT

 public:
  enum class Grouping { PerTensor = 0, PerChannel, PerToken };
  static constexpr int kGroupings = 3;
  static QString grouping_name(Grouping g);  // "per-tensor", "per-channel", "per-token"

  struct Errors {
    double mse = 0;
    double rel_error = 0;        // sqrt(sum (x - x_hat)^2 / sum x^2)
    double attention_error = 0;  // relative error of the attention output (the other tensor exact)
  };

  explicit LearnQuantPage(QWidget* parent = nullptr);

  LearnLink link() const override;

  // The layer the page quantizes, and the method the engine runs for the grouped modes.
  const SyntheticConfig& source() const { return m_source; }
  MethodConfig method() const;
  int bits() const;
  int group_size() const;
  int token() const;
  int head() const;
  // Empty when the source could not be generated (the page then shows why).
  QString error_text() const;

  // [tokens][heads][dim] floats: the layer's tensor and its reconstruction under a grouping.
  const std::vector<float>& original(TensorRole role) const;
  const std::vector<float>& reconstructed(TensorRole role, Grouping g) const;
  const Errors& errors(TensorRole role, Grouping g) const;

  // Min/max affine quantization with one range for all of `x`: step = (max - min) / (2^bits - 1),
  // code = round((x - min) / step), x_hat = min + code * step (the rule of the engine's groups).
  static std::vector<float> per_tensor_round_trip(const std::vector<float>& x, int bits);

  void set_bits(int bits);
  void set_group_size(int group);
  void set_token(int token);
  void set_head(int head);
  QComboBox* bits_combo() const { return m_bits; }
  QComboBox* group_combo() const { return m_group; }
  QSpinBox* token_spin() const { return m_token; }
  QSpinBox* head_spin() const { return m_head; }
  // Which channels the charts show: all, or one quarter of the head (the key outliers sit in
  // the last quarter, on low-frequency RoPE pairs).
  QComboBox* channels_combo() const { return m_channels; }
  QCustomPlot* key_chart() const { return m_key_chart; }
  QCustomPlot* value_chart() const { return m_value_chart; }
  QTableWidget* table() const { return m_table; }
  QLabel* conclusion_label() const { return m_conclusion; }

 private:
  struct RoleData {
    std::vector<float> original;
    std::array<std::vector<float>, kGroupings> reconstructed;
    std::array<Errors, kGroupings> errors;
  };

  void generate();
  void recompute();
  void fill_table();
  void draw_charts();
  void style_table();
  void draw_vector(QCustomPlot* plot, TensorRole role);
  RoleData& data(TensorRole role) { return m_data[role == TensorRole::Key ? 0 : 1]; }
  const RoleData& data(TensorRole role) const { return m_data[role == TensorRole::Key ? 0 : 1]; }

  SyntheticConfig m_source;
  KvCache m_cache;
  std::vector<float> m_queries;
  std::array<RoleData, 2> m_data;
  QString m_error;
  QComboBox *m_bits = nullptr, *m_group = nullptr, *m_channels = nullptr;
  QSpinBox *m_token = nullptr, *m_head = nullptr;
  QCustomPlot *m_key_chart = nullptr, *m_value_chart = nullptr;
  QTableWidget* m_table = nullptr;
  QLabel *m_conclusion = nullptr, *m_error_label = nullptr;
};

}  // namespace kvlab::gui
