// The Eviction view's settings: the policy (with the paper it follows and when it decides: after
// every decode step, or once when the prefill ends), its budget (tokens, or % of the context for
// a decode policy and of the prompt for a prefill press), the decode steps, the policy's own
// options (shown only for the chosen policy and the scorer it wraps), optional quantization of
// the kept tokens, and a second policy with its own budget to compare with (same options).
#pragma once

#include <optional>

#include <QWidget>

#include "kvlab/engine/eviction/eviction.h"

class QCheckBox;
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
  // A prefill policy's fraction is of the prompt's tokens, a decode policy's of the context.
  void set_of_prompt(bool prompt);

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

  // Whether the row holding `field` is shown, for tests. The fields are named after
  // EvictionConfig's (objectName "policy", "budget", "scorer", ...; a BudgetEdit's "value" and
  // "unit"; the budget's caption "budget_caption").
  bool is_field_visible(QWidget* field) const;

 signals:
  void changed();

 private:
  QLabel* budget_caption() const;
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
  QSpinBox* m_window = nullptr;
  QSpinBox* m_pool = nullptr;
  QDoubleSpinBox* m_beta = nullptr;
  QComboBox* m_scorer = nullptr;
  QDoubleSpinBox* m_safeguard = nullptr;
  QSpinBox* m_chunk = nullptr;
  QDoubleSpinBox* m_key_channels = nullptr;
  QCheckBox* m_think_tokens = nullptr;
  QSpinBox* m_future = nullptr;
  QCheckBox* m_covariance = nullptr;
  QCheckBox* m_value_norm = nullptr;
  QDoubleSpinBox* m_merge_t = nullptr;
  QDoubleSpinBox* m_retain = nullptr;
  QComboBox* m_quant = nullptr;
  QGroupBox* m_compare_group = nullptr;
  QComboBox* m_compare_policy = nullptr;
  BudgetEdit* m_compare_budget = nullptr;
};

}  // namespace kvlab::gui
