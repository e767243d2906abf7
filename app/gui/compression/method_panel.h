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

  // Whether the row holding `field` is shown, for tests. The fields are named after
  // MethodConfig's (objectName "method", "bits", "group_size", "rotation", ...) and the method's
  // description and reference is the label "about".
  bool is_field_visible(QWidget* field) const;

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
