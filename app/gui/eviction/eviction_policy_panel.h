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
  QSpinBox* value_spin() const { return m_value; }
  QComboBox* unit_combo() const { return m_unit; }
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
  // The prefill presses' options (EvictionConfig's fields of the same names).
  QSpinBox* window_spin() const { return m_window; }
  QSpinBox* pool_spin() const { return m_pool; }
  QDoubleSpinBox* beta_spin() const { return m_beta; }
  // The prefill scorers only (is_prefill_scorer), for adakv, chunkkv and think's tokens.
  QComboBox* scorer_combo() const { return m_scorer; }
  QDoubleSpinBox* safeguard_spin() const { return m_safeguard; }  // percent
  QSpinBox* chunk_spin() const { return m_chunk; }
  QDoubleSpinBox* key_channels_spin() const { return m_key_channels; }  // percent
  QCheckBox* think_tokens_check() const { return m_think_tokens; }
  QSpinBox* future_spin() const { return m_future; }
  QCheckBox* covariance_check() const { return m_covariance; }
  QCheckBox* value_norm_check() const { return m_value_norm; }
  QDoubleSpinBox* merge_t_spin() const { return m_merge_t; }
  QDoubleSpinBox* retain_spin() const { return m_retain; }
  // The policy's paper and schedule, under the policy combo.
  QLabel* about_label() const { return m_about; }
  QLabel* budget_caption() const;
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
