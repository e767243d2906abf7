#include "eviction/eviction_policy_panel.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "common/explain.h"
#include "common/gui_style.h"
#include "common/number_fields.h"

namespace kvlab::gui {

namespace {

constexpr int kMaxTokens = 1 << 20;

// What the policy does, in one line; the paper comes from the engine (eviction_policy_reference).
QString what_it_does(EvictionPolicy p) {
  using P = EvictionPolicy;
  switch (p) {
    case P::Full:
      return QObject::tr("Keeps every token: the reference, run through the same code.");
    case P::Window:
      return QObject::tr("The newest budget tokens only.");
    case P::Streaming:
      return QObject::tr("The first few tokens (attention sinks) plus the newest ones.");
    case P::H2O:
      return QObject::tr(
          "A recent share of the budget, the rest the heavy hitters by attention accumulated "
          "over all steps.");
    case P::Threshold:
      return QObject::tr(
          "After a grace period, drop tokens whose mean attention falls below threshold × "
          "uniform.");
    case P::Importance:
      return QObject::tr("Weighted mean attention and recency; BOS is never evicted.");
    case P::Merge:
      return QObject::tr(
          "H2O's victims merged into the most similar kept neighbour (key cosine) instead of "
          "dropped.");
    case P::TOVA:
      return QObject::tr("The entry the current query attends to least leaves at each step.");
    case P::SnapKV:
      return QObject::tr(
          "Scores each prompt token by the attention of the last prompt queries (the "
          "observation window), pooled over neighbours; keeps the best and the window.");
    case P::PyramidKV:
      return QObject::tr(
          "SnapKV's scores with budgets falling with depth: the top layer keeps budget ÷ beta, "
          "the total stays the same.");
    case P::KNorm:
      return QObject::tr("Keeps the keys with the lowest L2 norm; needs no attention.");
    case P::KeyDiff:
      return QObject::tr("Keeps the keys least similar to the mean key direction.");
    case P::ExpectedAttention:
      return QObject::tr(
          "The attention future queries are expected to pay, from the window's query mean and "
          "covariance turned by RoPE, times the value norm.");
    case P::AdaKV:
      return QObject::tr(
          "A scorer's scores, with each layer's budget spread over its heads by where the "
          "scores concentrate.");
    case P::ChunkKV:
      return QObject::tr(
          "Whole chunks of tokens by a scorer's summed scores, the same for every "
          "head.");
    case P::ThinK:
      return QObject::tr(
          "Prunes the prompt keys' channels by query-key channel importance (optionally also "
          "the tokens, by a scorer).");
    case P::MiniCache:
      return QObject::tr(
          "Adjacent layers of the upper half share each prompt token's direction (SLERP), "
          "keeping their own norms; outliers stay unmerged.");
  }
  return {};
}

QString text_of(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<int>(s.size()));
}

QString about(EvictionPolicy p) {
  const QString when = eviction_schedule(p) == EvictionSchedule::Prefill
                           ? QObject::tr("decides once, when the prefill ends")
                           : QObject::tr("decides after every decode step");
  return QObject::tr("%1\n%2 · %3")
      .arg(what_it_does(p), text_of(eviction_policy_reference(p)), when);
}

QComboBox* make_policy_combo(QWidget* parent) {
  auto* combo = new QComboBox(parent);
  for (auto id : eviction_policy_ids()) {
    const auto policy = parse_eviction_policy(id);
    if (!policy) continue;
    combo->addItem(text_of(id), static_cast<int>(*policy));
    combo->setItemData(
        combo->count() - 1,
        QObject::tr("%1 (%2)").arg(text_of(eviction_policy_reference(*policy)),
                                   text_of(eviction_schedule_id(eviction_schedule(*policy)))),
        Qt::ToolTipRole);
  }
  return combo;
}

QComboBox* make_scorer_combo(QWidget* parent) {
  auto* combo = new QComboBox(parent);
  for (auto id : eviction_policy_ids()) {
    const auto policy = parse_eviction_policy(id);
    if (!policy || !is_prefill_scorer(*policy)) continue;
    combo->addItem(text_of(id), static_cast<int>(*policy));
    combo->setItemData(combo->count() - 1, text_of(eviction_policy_reference(*policy)),
                       Qt::ToolTipRole);
  }
  return combo;
}

QCheckBox* make_check(QWidget* parent, const QString& text, bool checked, const QString& tip) {
  auto* check = new QCheckBox(text, parent);
  check->setChecked(checked);
  check->setToolTip(tip);
  return check;
}

EvictionPolicy policy_of(const QComboBox* combo) {
  return static_cast<EvictionPolicy>(combo->currentData().toInt());
}

void select_policy(QComboBox* combo, EvictionPolicy p) {
  combo->setCurrentIndex(std::max(0, combo->findData(static_cast<int>(p))));
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
  m_value->setObjectName(QStringLiteral("value"));
  m_unit = new QComboBox(this);
  m_unit->setObjectName(QStringLiteral("unit"));
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

void BudgetEdit::set_of_prompt(bool prompt) {
  m_unit->setItemText(1, prompt ? tr("% of prompt") : tr("% of context"));
  m_value->setToolTip(
      prompt ? tr("Prompt tokens each KV head (of every layer) may keep when the prefill ends: a "
                  "token count, or a percentage of the prompt; every decoded token is kept too")
             : tr("Entries each KV head (of every layer) may keep: a token count, or a percentage "
                  "of the tokens the sequence has at each step"));
  m_unit->setToolTip(prompt ? tr("A token count, or a share of the prompt's tokens")
                            : tr("A token count, or a share of the tokens the sequence has at "
                                 "each step"));
  setToolTip(m_value->toolTip());
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
  m_window = make_spin(policy_group, 1, 65536, d.window,
                       tr("Observation window: the last prompt queries whose attention scores the "
                          "prompt (SnapKV); on a synthetic source, its decode-time queries but "
                          "the last"));
  m_pool = make_spin(policy_group, 1, 255, d.pool,
                     tr("Average pooling width over positions, odd: a kept token brings its "
                        "neighbours' scores along (SnapKV)"));
  m_pool->setSingleStep(2);
  m_beta = make_double(policy_group, 1, 1e6, d.pyramid_beta, 1,
                       tr("PyramidKV: the bottom layer keeps the most, the top layer budget ÷ "
                          "beta, the total the same as a flat budget"));
  m_scorer = make_scorer_combo(policy_group);
  select_policy(m_scorer, d.scorer);
  m_scorer->setToolTip(
      tr("Whose per-position scores select the tokens: one of the prefill "
         "scorers"));
  m_safeguard = make_double(policy_group, 0, 100, 100 * d.ada_safeguard, 0,
                            tr("Ada-KV: each head keeps at least this share of the layer's "
                               "per-head budget, however its scores concentrate"));
  m_safeguard->setSuffix(tr(" %"));
  m_chunk = make_spin(policy_group, 1, 65536, d.chunk,
                      tr("ChunkKV: tokens per chunk; chunks are kept or dropped whole"));
  m_key_channels = make_double(policy_group, 0.1, 100, 100 * d.key_channels, 1,
                               tr("ThinK: share of each head's key channels kept, by query-key "
                                  "channel importance; values keep every channel"));
  m_key_channels->setSuffix(tr(" %"));
  m_think_tokens = make_check(policy_group, tr("Also drop tokens"), d.think_tokens,
                              tr("ThinK: besides pruning key channels, keep only the budget's "
                                 "prompt tokens, chosen by the scorer"));
  m_future = make_spin(policy_group, 1, 1000000, d.future,
                       tr("Expected Attention: future positions the expected query is averaged "
                          "over (RoPE turns it further at each)"));
  m_covariance = make_check(policy_group, tr("Query covariance"), d.covariance,
                            tr("Expected Attention: include the query covariance term of the "
                               "expected softmax score"));
  m_value_norm = make_check(policy_group, tr("Times value norm"), d.value_norm,
                            tr("Expected Attention: weigh each score by the norm of the token's "
                               "value"));
  m_merge_t = make_double(policy_group, 0, 1, d.merge_t, 2,
                          tr("MiniCache: SLERP interpolation weight between the two adjacent "
                             "layers' directions"));
  m_retain = make_double(policy_group, 0, 1, d.retain, 3,
                         tr("MiniCache: tokens in this top share of the angular-distance range "
                            "between the layers stay unmerged"));
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
  m_form->addRow(tr("Key channels"), m_key_channels);
  m_form->addRow(QString(), m_think_tokens);
  m_form->addRow(tr("Scorer"), m_scorer);
  m_form->addRow(tr("Obs. window"), m_window);
  m_form->addRow(tr("Pool"), m_pool);
  m_form->addRow(tr("Beta"), m_beta);
  m_form->addRow(tr("Safeguard"), m_safeguard);
  m_form->addRow(tr("Chunk"), m_chunk);
  m_form->addRow(tr("Future"), m_future);
  m_form->addRow(QString(), m_covariance);
  m_form->addRow(QString(), m_value_norm);
  m_form->addRow(tr("Merge t"), m_merge_t);
  m_form->addRow(tr("Retain"), m_retain);
  m_form->addRow(tr("Quantize kept"), m_quant);
  style::share_with_captions(m_form);

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
  style::share_with_captions(compare_form);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(policy_group);
  layout->addWidget(m_compare_group);

  select_policy(m_policy, d.policy);
  connect(m_policy, &QComboBox::currentIndexChanged, this, [this] {
    update_visible_fields();
    emit changed();
  });
  for (QSpinBox* s :
       {m_steps, m_sinks, m_recent, m_merge_window, m_window, m_pool, m_chunk, m_future}) {
    connect(s, &QSpinBox::valueChanged, this, &EvictionPolicyPanel::changed);
  }
  for (QDoubleSpinBox* s :
       {m_recent_fraction, m_threshold, m_w_attention, m_w_recency, m_merge_similarity, m_beta,
        m_safeguard, m_key_channels, m_merge_t, m_retain}) {
    connect(s, &QDoubleSpinBox::valueChanged, this, &EvictionPolicyPanel::changed);
  }
  for (QComboBox* c : {m_quant, m_compare_policy}) {
    connect(c, &QComboBox::currentIndexChanged, this, &EvictionPolicyPanel::changed);
  }
  for (QCheckBox* c : {m_covariance, m_value_norm}) {
    connect(c, &QCheckBox::toggled, this, &EvictionPolicyPanel::changed);
  }
  // The scorer and ThinK's token option change which options apply.
  connect(m_scorer, &QComboBox::currentIndexChanged, this, [this] {
    update_visible_fields();
    emit changed();
  });
  connect(m_think_tokens, &QCheckBox::toggled, this, [this] {
    update_visible_fields();
    emit changed();
  });
  for (BudgetEdit* b : {m_budget, m_compare_budget}) {
    connect(b, &BudgetEdit::changed, this, &EvictionPolicyPanel::changed);
  }
  connect(m_compare_group, &QGroupBox::toggled, this, &EvictionPolicyPanel::changed);

  // Each field named after its EvictionConfig field, for finding it (tests, accessibility).
  const std::pair<QWidget*, const char*> names[] = {{m_policy, "policy"},
                                                    {m_about, "about"},
                                                    {budget_caption(), "budget_caption"},
                                                    {m_budget, "budget"},
                                                    {m_steps, "steps"},
                                                    {m_sinks, "sinks"},
                                                    {m_recent_fraction, "recent_fraction"},
                                                    {m_recent, "recent"},
                                                    {m_threshold, "threshold"},
                                                    {m_w_attention, "w_attention"},
                                                    {m_w_recency, "w_recency"},
                                                    {m_merge_similarity, "merge_similarity"},
                                                    {m_merge_window, "merge_window"},
                                                    {m_window, "window"},
                                                    {m_pool, "pool"},
                                                    {m_beta, "beta"},
                                                    {m_scorer, "scorer"},
                                                    {m_safeguard, "safeguard"},
                                                    {m_chunk, "chunk"},
                                                    {m_key_channels, "key_channels"},
                                                    {m_think_tokens, "think_tokens"},
                                                    {m_future, "future"},
                                                    {m_covariance, "covariance"},
                                                    {m_value_norm, "value_norm"},
                                                    {m_merge_t, "merge_t"},
                                                    {m_retain, "retain"},
                                                    {m_quant, "quant"},
                                                    {m_compare_group, "compare"},
                                                    {m_compare_policy, "compare_policy"},
                                                    {m_compare_budget, "compare_budget"}};
  for (const auto& [field, name] : names) field->setObjectName(QLatin1String(name));
  update_visible_fields();
}

bool EvictionPolicyPanel::is_field_visible(QWidget* field) const {
  int row = -1;
  QFormLayout::ItemRole role{};
  m_form->getWidgetPosition(field, &row, &role);
  return row >= 0 && m_form->isRowVisible(row);
}

QLabel* EvictionPolicyPanel::budget_caption() const {
  return qobject_cast<QLabel*>(m_form->labelForField(m_budget));
}

void EvictionPolicyPanel::update_visible_fields() {
  const EvictionConfig c = config();
  const EvictionPolicy p = c.policy;
  const EvictionPolicy by = scoring_policy(c);  // the scorer of adakv, chunkkv, think's tokens
  using P = EvictionPolicy;
  const bool prefill = eviction_schedule(p) == EvictionSchedule::Prefill;
  const bool snap_like = by == P::SnapKV || by == P::PyramidKV;
  const bool expected = by == P::ExpectedAttention;
  m_form->setRowVisible(m_budget,
                        p != P::Full && p != P::MiniCache && (p != P::ThinK || c.think_tokens));
  m_form->setRowVisible(m_sinks, p == P::Streaming || expected);
  m_form->setRowVisible(m_recent_fraction, p == P::H2O || p == P::Merge);
  m_form->setRowVisible(m_recent, p == P::Threshold);
  m_form->setRowVisible(m_threshold, p == P::Threshold);
  m_form->setRowVisible(m_w_attention, p == P::Importance);
  m_form->setRowVisible(m_w_recency, p == P::Importance);
  m_form->setRowVisible(m_merge_similarity, p == P::Merge);
  m_form->setRowVisible(m_merge_window, p == P::Merge);
  m_form->setRowVisible(m_key_channels, p == P::ThinK);
  m_form->setRowVisible(m_think_tokens, p == P::ThinK);
  m_form->setRowVisible(m_scorer, wraps_scorer(c));
  m_form->setRowVisible(m_window, needs_window(c));
  m_form->setRowVisible(m_pool, snap_like);
  m_form->setRowVisible(m_beta, by == P::PyramidKV);
  m_form->setRowVisible(m_safeguard, p == P::AdaKV);
  m_form->setRowVisible(m_chunk, p == P::ChunkKV);
  m_form->setRowVisible(m_future, expected);
  m_form->setRowVisible(m_covariance, expected);
  m_form->setRowVisible(m_value_norm, expected);
  m_form->setRowVisible(m_merge_t, p == P::MiniCache);
  m_form->setRowVisible(m_retain, p == P::MiniCache);
  m_budget->set_of_prompt(prefill);
  if (QLabel* caption = budget_caption()) {
    caption->setText(prefill ? tr("Budget of the prompt") : tr("Budget"));
    caption->setToolTip(m_budget->toolTip());
  }
  m_about->setText(about(p));
  m_about->setToolTip(prefill ? tr("A prefill press: it compresses the prompt once, when the "
                                   "prefill ends, and keeps every token decoded after it")
                              : tr("A decode policy: it cuts every KV head to its budget after "
                                   "each decode step"));
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
  c.window = m_window->value();
  c.pool = m_pool->value();
  c.pyramid_beta = m_beta->value();
  c.scorer = policy_of(m_scorer);
  c.think_tokens = m_think_tokens->isChecked();
  c.ada_safeguard = m_safeguard->value() / 100.0;
  c.chunk = m_chunk->value();
  c.key_channels = m_key_channels->value() / 100.0;
  c.future = m_future->value();
  c.covariance = m_covariance->isChecked();
  c.value_norm = m_value_norm->isChecked();
  c.merge_t = m_merge_t->value();
  c.retain = m_retain->value();
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
  m_window->setValue(c.window);
  m_pool->setValue(c.pool);
  m_beta->setValue(c.pyramid_beta);
  select_policy(m_scorer, c.scorer);
  m_think_tokens->setChecked(c.think_tokens);
  m_safeguard->setValue(100.0 * c.ada_safeguard);
  m_chunk->setValue(c.chunk);
  m_key_channels->setValue(100.0 * c.key_channels);
  m_future->setValue(c.future);
  m_covariance->setChecked(c.covariance);
  m_value_norm->setChecked(c.value_norm);
  m_merge_t->setValue(c.merge_t);
  m_retain->setValue(c.retain);
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
