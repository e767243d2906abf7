#include "kvlab/gui/eviction_policy_panel.h"

#include <cmath>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "kvlab/gui/explain.h"
#include "kvlab/gui/gui_style.h"
#include "kvlab/gui/number_fields.h"

namespace kvlab::gui {

namespace {

constexpr int kMaxTokens = 1 << 20;

QString about(EvictionPolicy p) {
  switch (p) {
    case EvictionPolicy::Full:
      return QObject::tr("Keeps every token: the reference, run through the same code.");
    case EvictionPolicy::Window:
      return QObject::tr("Sliding window: the newest budget tokens.");
    case EvictionPolicy::Streaming:
      return QObject::tr(
          "StreamingLLM (Xiao et al. 2024): the first few tokens (attention sinks) plus the "
          "newest ones.");
    case EvictionPolicy::H2O:
      return QObject::tr(
          "H2O (Zhang et al. 2023): a recent share of the budget, the rest the heavy hitters by "
          "attention accumulated over all steps.");
    case EvictionPolicy::Threshold:
      return QObject::tr(
          "Attention-threshold pruning (after Scissorhands): after a grace period, drop tokens "
          "whose mean attention falls below threshold × uniform.");
    case EvictionPolicy::Importance:
      return QObject::tr(
          "Importance score: weighted mean attention and recency; BOS is never evicted (as "
          "FastGen protects special tokens).");
    case EvictionPolicy::Merge:
      return QObject::tr(
          "H2O's victims merged into the most similar kept neighbour (key cosine) instead of "
          "dropped, as CaM / D2O do.");
  }
  return {};
}

QComboBox* make_policy_combo(QWidget* parent) {
  auto* combo = new QComboBox(parent);
  for (auto id : eviction_policy_ids()) {
    const auto policy = parse_eviction_policy(id);
    combo->addItem(QString::fromUtf8(id.data(), static_cast<int>(id.size())),
                   policy ? static_cast<int>(*policy) : 0);
  }
  return combo;
}

EvictionPolicy policy_of(const QComboBox* combo) {
  return static_cast<EvictionPolicy>(combo->currentData().toInt());
}

void select_policy(QComboBox* combo, EvictionPolicy p) {
  const auto id = eviction_policy_id(p);
  combo->setCurrentText(QString::fromUtf8(id.data(), static_cast<int>(id.size())));
}

QSpinBox* make_spin(QWidget* parent, int lo, int hi, int value, const QString& tip) {
  auto* spin = new IntField(parent);
  spin->setRange(lo, hi);
  spin->setValue(value);
  spin->setToolTip(tip);
  return spin;
}

QDoubleSpinBox* make_double(QWidget* parent, double lo, double hi, double value, int decimals,
                            const QString& tip) {
  auto* spin = new RealField(parent);
  spin->setRange(lo, hi);
  spin->setDecimals(decimals);
  spin->setSingleStep(std::pow(10.0, 1 - decimals));
  spin->setValue(value);
  spin->setToolTip(tip);
  return spin;
}

}  // namespace

BudgetEdit::BudgetEdit(QWidget* parent) : QWidget(parent) {
  m_value = new IntField(this);
  m_value->setToolTip(
      tr("Entries each KV head (of every layer) may keep: a token count, or a percentage of the "
         "tokens the sequence has at each step"));
  m_unit = new QComboBox(this);
  m_unit->addItem(tr("tokens"));
  m_unit->addItem(tr("% of context"));
  m_unit->setToolTip(tr("A token count, or a share of the tokens the sequence has at each step"));
  setToolTip(m_value->toolTip());
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_value, 1);
  layout->addWidget(m_unit);
  connect(m_unit, &QComboBox::currentIndexChanged, this, [this](int unit) {
    m_value->setRange(1, unit == 1 ? 100 : kMaxTokens);
    emit changed();
  });
  connect(m_value, &QSpinBox::valueChanged, this, &BudgetEdit::changed);
  set_budget(Budget{});
}

Budget BudgetEdit::budget() const {
  Budget b;
  b.fraction = m_unit->currentIndex() == 1;
  b.value = b.fraction ? m_value->value() / 100.0 : m_value->value();
  return b;
}

void BudgetEdit::set_budget(const Budget& budget) {
  m_unit->setCurrentIndex(budget.fraction ? 1 : 0);
  m_value->setRange(1, budget.fraction ? 100 : kMaxTokens);
  m_value->setValue(
      static_cast<int>(std::lround(budget.fraction ? 100.0 * budget.value : budget.value)));
}

EvictionPolicyPanel::EvictionPolicyPanel(QWidget* parent) : QWidget(parent) {
  const EvictionConfig d;
  auto* policy_group = new QGroupBox(tr("Policy"), this);
  m_policy = make_policy_combo(policy_group);
  m_policy->setToolTip(
      tr("Which tokens each KV head keeps as decoding goes on; only the options it uses are shown "
         "below"));
  m_about = new QLabel(policy_group);
  m_about->setWordWrap(true);
  style::make_muted(m_about);
  m_budget = new BudgetEdit(policy_group);
  m_steps = make_spin(policy_group, 1, 16000, d.steps,
                      tr("Decode steps: the last tokens of the cache arrive one per step"));
  m_sinks = make_spin(policy_group, 0, 1024, d.sinks,
                      tr("The first tokens, always kept as attention sinks; the rest of the "
                         "budget goes to the newest tokens"));
  m_recent_fraction = make_double(policy_group, 0, 100, 100 * d.recent_fraction, 0,
                                  tr("Share of the budget kept for the newest tokens; the rest "
                                     "holds the heavy hitters by accumulated attention"));
  m_recent_fraction->setSuffix(tr(" %"));
  m_recent = make_spin(policy_group, 0, 16000, d.recent,
                       tr("Steps of grace before a new token may be dropped"));
  m_threshold = make_double(policy_group, 0, 1000, d.threshold, 3,
                            tr("After the grace steps, drop a token whose mean received attention "
                               "falls below this × uniform (1 ÷ kept entries)"));
  m_w_attention = make_double(policy_group, -100, 100, d.w_attention, 2,
                              tr("score = this × mean received attention ÷ uniform + recency "
                                 "weight × (1 − age ÷ context); the lowest score is evicted"));
  m_w_recency = make_double(policy_group, -100, 100, d.w_recency, 2,
                            tr("Weight of recency (1 − age / context)"));
  m_merge_similarity = make_double(policy_group, -1, 1, d.merge_similarity, 2,
                                   tr("Least key cosine similarity to merge instead of drop"));
  m_merge_window = make_spin(policy_group, 1, 4096, d.merge_window,
                             tr("Kept neighbours searched on each side for a merge partner"));
  m_quant = new QComboBox(policy_group);
  m_quant->addItem(tr("none"));
  for (auto id : method_ids()) {
    m_quant->addItem(QString::fromUtf8(id.data(), static_cast<int>(id.size())));
  }
  m_quant->setToolTip(
      tr("Hold the kept tokens quantized with this method (its default parameters): attention "
         "reads them dequantized and memory counts the method's measured bytes per token"));

  m_form = new QFormLayout(policy_group);
  m_form->addRow(tr("Policy"), m_policy);
  m_form->addRow(QString(), m_about);
  m_form->addRow(tr("Budget"), m_budget);
  m_form->addRow(tr("Decode steps"), m_steps);
  m_form->addRow(tr("Sinks"), m_sinks);
  m_form->addRow(tr("Recent share"), m_recent_fraction);
  m_form->addRow(tr("Grace steps"), m_recent);
  m_form->addRow(tr("Threshold"), m_threshold);
  m_form->addRow(tr("Attention weight"), m_w_attention);
  m_form->addRow(tr("Recency weight"), m_w_recency);
  m_form->addRow(tr("Merge similarity"), m_merge_similarity);
  m_form->addRow(tr("Merge window"), m_merge_window);
  m_form->addRow(tr("Quantize kept"), m_quant);
  explain::share_with_captions(m_form);

  m_compare_group = new QGroupBox(tr("Compare with"), this);
  m_compare_group->setCheckable(true);
  m_compare_group->setChecked(false);
  m_compare_group->setToolTip(
      tr("Run a second policy on the same data (same options) and show both side by side"));
  m_compare_policy = make_policy_combo(m_compare_group);
  m_compare_policy->setToolTip(
      tr("The second policy, run on the same cache with the same steps and options"));
  select_policy(m_compare_policy, EvictionPolicy::Window);
  m_compare_budget = new BudgetEdit(m_compare_group);
  auto* compare_form = new QFormLayout(m_compare_group);
  compare_form->addRow(tr("Policy"), m_compare_policy);
  compare_form->addRow(tr("Budget"), m_compare_budget);
  explain::share_with_captions(compare_form);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(policy_group);
  layout->addWidget(m_compare_group);

  select_policy(m_policy, d.policy);
  connect(m_policy, &QComboBox::currentIndexChanged, this, [this] {
    update_visible_fields();
    emit changed();
  });
  for (QSpinBox* s : {m_steps, m_sinks, m_recent, m_merge_window}) {
    connect(s, &QSpinBox::valueChanged, this, &EvictionPolicyPanel::changed);
  }
  for (QDoubleSpinBox* s :
       {m_recent_fraction, m_threshold, m_w_attention, m_w_recency, m_merge_similarity}) {
    connect(s, &QDoubleSpinBox::valueChanged, this, &EvictionPolicyPanel::changed);
  }
  for (QComboBox* c : {m_quant, m_compare_policy}) {
    connect(c, &QComboBox::currentIndexChanged, this, &EvictionPolicyPanel::changed);
  }
  for (BudgetEdit* b : {m_budget, m_compare_budget}) {
    connect(b, &BudgetEdit::changed, this, &EvictionPolicyPanel::changed);
  }
  connect(m_compare_group, &QGroupBox::toggled, this, &EvictionPolicyPanel::changed);
  update_visible_fields();
}

bool EvictionPolicyPanel::is_field_visible(QWidget* field) const {
  int row = -1;
  QFormLayout::ItemRole role{};
  m_form->getWidgetPosition(field, &row, &role);
  return row >= 0 && m_form->isRowVisible(row);
}

void EvictionPolicyPanel::update_visible_fields() {
  const EvictionPolicy p = policy_of(m_policy);
  using P = EvictionPolicy;
  m_form->setRowVisible(m_budget, p != P::Full);
  m_form->setRowVisible(m_sinks, p == P::Streaming);
  m_form->setRowVisible(m_recent_fraction, p == P::H2O || p == P::Merge);
  m_form->setRowVisible(m_recent, p == P::Threshold);
  m_form->setRowVisible(m_threshold, p == P::Threshold);
  m_form->setRowVisible(m_w_attention, p == P::Importance);
  m_form->setRowVisible(m_w_recency, p == P::Importance);
  m_form->setRowVisible(m_merge_similarity, p == P::Merge);
  m_form->setRowVisible(m_merge_window, p == P::Merge);
  m_about->setText(about(p));
}

EvictionConfig EvictionPolicyPanel::config() const {
  EvictionConfig c;
  c.policy = policy_of(m_policy);
  c.budget = m_budget->budget();
  c.steps = m_steps->value();
  c.sinks = m_sinks->value();
  c.recent_fraction = m_recent_fraction->value() / 100.0;
  c.recent = m_recent->value();
  c.threshold = m_threshold->value();
  c.w_attention = m_w_attention->value();
  c.w_recency = m_w_recency->value();
  c.merge_similarity = m_merge_similarity->value();
  c.merge_window = m_merge_window->value();
  if (m_quant->currentIndex() > 0) {
    if (auto kind = parse_method(m_quant->currentText().toStdString())) {
      MethodConfig q;
      q.kind = *kind;
      c.quant = q;
    }
  }
  return c;
}

std::optional<EvictionConfig> EvictionPolicyPanel::compare_config() const {
  if (!m_compare_group->isChecked()) return std::nullopt;
  EvictionConfig c = config();
  c.policy = policy_of(m_compare_policy);
  c.budget = m_compare_budget->budget();
  return c;
}

void EvictionPolicyPanel::set_config(const EvictionConfig& c) {
  select_policy(m_policy, c.policy);
  m_budget->set_budget(c.budget);
  m_steps->setValue(c.steps);
  m_sinks->setValue(c.sinks);
  m_recent_fraction->setValue(100.0 * c.recent_fraction);
  m_recent->setValue(c.recent);
  m_threshold->setValue(c.threshold);
  m_w_attention->setValue(c.w_attention);
  m_w_recency->setValue(c.w_recency);
  m_merge_similarity->setValue(c.merge_similarity);
  m_merge_window->setValue(c.merge_window);
  if (c.quant) {
    const auto id = method_id(c.quant->kind);
    m_quant->setCurrentText(QString::fromUtf8(id.data(), static_cast<int>(id.size())));
  } else {
    m_quant->setCurrentIndex(0);
  }
}

void EvictionPolicyPanel::set_compare(const std::optional<EvictionConfig>& compare) {
  m_compare_group->setChecked(compare.has_value());
  if (!compare) return;
  select_policy(m_compare_policy, compare->policy);
  m_compare_budget->set_budget(compare->budget);
}

}  // namespace kvlab::gui
