// The Eviction view's settings: the policy, its budget (tokens or % of context), the decode
// steps, the policy's own options (shown only for the chosen policy), optional quantization of
// the kept tokens, and a second policy with its own budget to compare with (same options).
#pragma once

#include <optional>

#include <QWidget>

#include "kvlab/engine/eviction/eviction.h"

class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QGroupBox;
class QLabel;
class QSpinBox;

namespace kvlab::gui {

// A budget: a number and "tokens" | "% of context".
class BudgetEdit : public QWidget {
  Q_OBJECT

 public:
  explicit BudgetEdit(QWidget* parent = nullptr);
  Budget budget() const;
  void set_budget(const Budget& budget);
  QSpinBox* value_spin() const { return m_value; }
  QComboBox* unit_combo() const { return m_unit; }

 signals:
  void changed();

 private:
  QSpinBox* m_value = nullptr;
  QComboBox* m_unit = nullptr;  // 0: tokens, 1: % of context
};

class EvictionPolicyPanel : public QWidget {
  Q_OBJECT

 public:
  explicit EvictionPolicyPanel(QWidget* parent = nullptr);

  // The first policy (no needle: the view sets it from the source).
  EvictionConfig config() const;
  // The policy to compare with: config() with the second policy and budget; none when off.
  std::optional<EvictionConfig> compare_config() const;
  void set_config(const EvictionConfig& config);
  void set_compare(const std::optional<EvictionConfig>& compare);

  QComboBox* policy_combo() const { return m_policy; }
  BudgetEdit* budget_edit() const { return m_budget; }
  QSpinBox* steps_spin() const { return m_steps; }
  QSpinBox* sinks_spin() const { return m_sinks; }
  QDoubleSpinBox* recent_fraction_spin() const { return m_recent_fraction; }
  QSpinBox* recent_spin() const { return m_recent; }
  QDoubleSpinBox* threshold_spin() const { return m_threshold; }
  QDoubleSpinBox* w_attention_spin() const { return m_w_attention; }
  QDoubleSpinBox* w_recency_spin() const { return m_w_recency; }
  QDoubleSpinBox* merge_similarity_spin() const { return m_merge_similarity; }
  QSpinBox* merge_window_spin() const { return m_merge_window; }
  // "none", then the method ids (each with its default parameters).
  QComboBox* quant_combo() const { return m_quant; }
  QGroupBox* compare_group() const { return m_compare_group; }
  QComboBox* compare_policy_combo() const { return m_compare_policy; }
  BudgetEdit* compare_budget_edit() const { return m_compare_budget; }
  // Whether the row holding `field` is shown, for tests.
  bool is_field_visible(QWidget* field) const;

 signals:
  void changed();

 private:
  void update_visible_fields();

  QFormLayout* m_form = nullptr;
  QComboBox* m_policy = nullptr;
  QLabel* m_about = nullptr;
  BudgetEdit* m_budget = nullptr;
  QSpinBox* m_steps = nullptr;
  QSpinBox* m_sinks = nullptr;
  QDoubleSpinBox* m_recent_fraction = nullptr;
  QSpinBox* m_recent = nullptr;
  QDoubleSpinBox* m_threshold = nullptr;
  QDoubleSpinBox* m_w_attention = nullptr;
  QDoubleSpinBox* m_w_recency = nullptr;
  QDoubleSpinBox* m_merge_similarity = nullptr;
  QSpinBox* m_merge_window = nullptr;
  QComboBox* m_quant = nullptr;
  QGroupBox* m_compare_group = nullptr;
  QComboBox* m_compare_policy = nullptr;
  BudgetEdit* m_compare_budget = nullptr;
};

}  // namespace kvlab::gui
