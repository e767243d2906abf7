// The compression method and its parameters; only the fields that matter for the chosen method
// are shown (KIVI: bits, group size, residual, parameter dtype; FP8: per-head scale, calibration
// tokens; age-tiered: group size, residual, INT8 tokens, old bits; KVComp: block size, relative
// scale, entropy codec; llama.cpp's block types: their Hadamard rotation; KVQuant: bits, levels,
// outliers; TurboQuant: bits, QJL, its rotation). Every method takes a rotation before the
// quantizer, with its seed and whether values are rotated too.
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
  // The method's one-line description and its reference.
  QLabel* about_label() const { return m_about; }
  // Whether the row holding `field` is shown, for tests.
  bool is_field_visible(QWidget* field) const;
  // The method's bit widths (kivi 2, 4; kvquant 2, 3, 4; turboquant 1 to 4; item data: bits).
  QComboBox* bits_combo() const { return m_bits; }
  QSpinBox* group_size_spin() const { return m_group_size; }
  QSpinBox* residual_spin() const { return m_residual; }
  // f16, bf16, f32 (item data: the DType); the method's reference is marked and chosen first.
  QComboBox* param_dtype_combo() const { return m_param_dtype; }
  QCheckBox* per_head_check() const { return m_per_head; }
  QSpinBox* calib_tokens_spin() const { return m_calib_tokens; }
  QSpinBox* int8_tokens_spin() const { return m_int8_tokens; }
  QComboBox* old_bits_combo() const { return m_old_bits; }
  QSpinBox* block_size_spin() const { return m_block_size; }
  QDoubleSpinBox* rel_scale_spin() const { return m_rel_scale; }
  // none, bitpack, varwidth, huffman (item data: -1 for none, else the CodecKind).
  QComboBox* codec_combo() const { return m_codec; }
  QCheckBox* llama_rotation_check() const { return m_llama_rotation; }
  // k-means, NormalFloat (item data: true for NormalFloat).
  QComboBox* levels_combo() const { return m_levels; }
  QDoubleSpinBox* outliers_spin() const { return m_outliers; }
  QCheckBox* pre_rope_check() const { return m_pre_rope; }
  QCheckBox* qjl_check() const { return m_qjl; }
  // none, hadamard, orthogonal; TurboQuant: hadamard, orthogonal (item data: the RotationKind).
  QComboBox* rotation_combo() const { return m_rotation; }
  QSpinBox* rotation_seed_spin() const { return m_rotation_seed; }
  QCheckBox* rotate_values_check() const { return m_rotate_values; }

 signals:
  void changed();

 private:
  void build_fields();
  void update_visible_fields();
  // Refills the combos whose choices depend on the method, keeping a choice that still exists.
  void refill_method_choices(MethodKind kind);

  QFormLayout* m_form = nullptr;
  QComboBox* m_method = nullptr;
  QLabel* m_about = nullptr;
  QComboBox* m_bits = nullptr;
  QSpinBox* m_group_size = nullptr;
  QSpinBox* m_residual = nullptr;
  QComboBox* m_param_dtype = nullptr;
  QCheckBox* m_per_head = nullptr;
  QSpinBox* m_calib_tokens = nullptr;
  QSpinBox* m_int8_tokens = nullptr;
  QComboBox* m_old_bits = nullptr;
  QSpinBox* m_block_size = nullptr;
  QDoubleSpinBox* m_rel_scale = nullptr;
  QComboBox* m_codec = nullptr;
  QCheckBox* m_llama_rotation = nullptr;
  QComboBox* m_levels = nullptr;
  QDoubleSpinBox* m_outliers = nullptr;
  QCheckBox* m_pre_rope = nullptr;
  QCheckBox* m_qjl = nullptr;
  QComboBox* m_rotation = nullptr;
  QSpinBox* m_rotation_seed = nullptr;
  QCheckBox* m_rotate_values = nullptr;
  MethodKind m_choices_for = MethodKind::Int8;  // the method the combos were filled for
};

}  // namespace kvlab::gui
