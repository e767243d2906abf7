// The compression method and its parameters; only the fields that matter for the chosen method
// are shown (KIVI: bits, group size, residual; FP8: per-head scale; age-tiered: group size,
// residual, INT8 tokens, old bits; KVComp: block size, relative scale, entropy codec).
#pragma once

#include <QGroupBox>

#include "kvlab/engine/quant/method.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QLabel;
class QSpinBox;

namespace kvlab::gui {

class MethodPanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit MethodPanel(QWidget* parent = nullptr);

  MethodConfig config() const;
  void set_config(const MethodConfig& config);

  QComboBox* method_combo() const { return m_method; }
  // Whether the row holding `field` is shown, for tests.
  bool is_field_visible(QWidget* field) const;
  QComboBox* bits_combo() const { return m_bits; }
  QSpinBox* group_size_spin() const { return m_group_size; }
  QSpinBox* residual_spin() const { return m_residual; }
  QCheckBox* per_head_check() const { return m_per_head; }
  QSpinBox* int8_tokens_spin() const { return m_int8_tokens; }
  QComboBox* old_bits_combo() const { return m_old_bits; }
  QSpinBox* block_size_spin() const { return m_block_size; }
  QDoubleSpinBox* rel_scale_spin() const { return m_rel_scale; }
  // none, bitpack, varwidth, huffman (item data: -1 for none, else the CodecKind).
  QComboBox* codec_combo() const { return m_codec; }

 signals:
  void changed();

 private:
  void update_visible_fields();

  QFormLayout* m_form = nullptr;
  QComboBox* m_method = nullptr;
  QLabel* m_about = nullptr;
  QComboBox* m_bits = nullptr;
  QSpinBox* m_group_size = nullptr;
  QSpinBox* m_residual = nullptr;
  QCheckBox* m_per_head = nullptr;
  QSpinBox* m_int8_tokens = nullptr;
  QComboBox* m_old_bits = nullptr;
  QSpinBox* m_block_size = nullptr;
  QDoubleSpinBox* m_rel_scale = nullptr;
  QComboBox* m_codec = nullptr;
};

}  // namespace kvlab::gui
