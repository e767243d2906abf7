#include "learn/learn_eviction_page.h"

#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>

#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/number_fields.h"
#include "eviction/eviction_chart_data.h"
#include "eviction/eviction_map_chart.h"

namespace kvlab::gui {
namespace {

constexpr int kContext = LearnEvictionModel::kContext;
constexpr int kSteps = LearnEvictionModel::kSteps;
constexpr int kSinks = LearnEvictionModel::kSinks;
constexpr int kEvictionTickMs = 110;
const QColor kHeavyHitter{230, 140, 40};

QString eviction_explanation() {
  const QString text = QObject::tr(
      "<p>A cache that keeps every token grows without end. <b>Eviction</b> holds each KV head "
      "to a <b>budget</b> of entries and drops the rest for good; a policy is the rule for "
      "which stay. The map is one KV head while decoding: a row per decode step (time runs "
      "down), a column per token, each cell what the cache holds after that step.</p>"
      "<p>A <b>sliding window</b> keeps only the newest tokens: a green band along the "
      "diagonal. But models pour much of their attention onto the first tokens, whatever they "
      "say: <b>attention sinks</b>. Losing them hurts, so <b>StreamingLLM</b> keeps the first "
      "%1 tokens for ever (black) plus the window.</p>"
      "<p>A few <b>heavy hitters</b> take most of the attention at every step. <b>H2O</b> keeps "
      "half its budget for the newest tokens and the rest for the tokens with the most "
      "attention accumulated so far, so their columns stay green (▼ marks the ones planted in "
      "this synthetic cache). Press <b>Play</b> and compare the attention each policy "
      "retains.</p>"
      "<p>The last query is a <i>needle</i> search: it looks for one token (dashed line) that "
      "no earlier query cared about. A policy that dropped it cannot get it back, and the "
      "attention retained collapses: eviction bets that the past predicts the future.</p>");
  return text.arg(kSinks);
}

}  // namespace

LearnEvictionPage::LearnEvictionPage(QWidget* parent)
    : LearnPage(tr("Eviction: sinks, window, heavy hitters"), eviction_explanation(),
                QStringLiteral("Xiao et al., \"Efficient Streaming Language Models with Attention "
                               "Sinks\", ICLR 2024 (arXiv:2309.17453); Zhang et al., \"H2O: "
                               "Heavy-Hitter Oracle for Efficient Generative Inference of Large "
                               "Language Models\", NeurIPS 2023 (arXiv:2306.14048)"),
                tr("Open in the Eviction view"), parent) {
  full_view_button()->setToolTip(
      tr("Run this policy and budget on the same synthetic cache in the Eviction view, with "
         "every layer, head and option there"));
  m_policy = new QComboBox;
  const std::pair<EvictionPolicy, QString> policies[] = {
      {EvictionPolicy::Window, tr("window (newest tokens)")},
      {EvictionPolicy::Streaming, tr("streaming (sinks + window)")},
      {EvictionPolicy::H2O, tr("h2o (heavy hitters + recent)")},
      {EvictionPolicy::Full, tr("full (keep everything)")}};
  for (const auto& [p, name] : policies) m_policy->addItem(name, static_cast<int>(p));
  m_policy->setToolTip(
      tr("The rule that decides what stays. window: the newest tokens only; streaming: the "
         "first %1 tokens (attention sinks) plus the newest; h2o: the newest half of the budget "
         "plus the tokens with the most attention accumulated over all steps so far; full: every "
         "token (the reference)")
          .arg(kSinks));
  m_budget = new IntField;
  m_budget->setRange(LearnEvictionModel::kMinBudget, LearnEvictionModel::kMaxBudget);
  m_budget->setSingleStep(5);
  m_budget->setValue(m_model.budget_percent());
  m_budget->setSuffix(tr(" % of tokens"));
  m_budget->setToolTip(
      tr("Entries each KV head may keep, as a share of the tokens the sequence has at that "
         "step (rounded); after every decode step the cache is cut back to it"));
  m_head = new IntField;
  m_head->setRange(0, m_model.kv_heads() - 1);
  m_head->setToolTip(
      tr("Which KV head's map and counts to show: each KV head keeps its own entries, chosen "
         "from the attention of its own group of query heads"));
  for (auto* s : {m_budget, m_head}) s->setKeyboardTracking(false);

  m_playback =
      new PlaybackControls({tr("Decode step after step to the last one; press again to pause"),
                            tr("Decode one more step: one token arrives, then the policy evicts"),
                            tr("Back to decode step 0, the first token after the prompt")},
                           kEvictionTickMs);
  m_playback->set_at_end([this] { return m_model.at_end(); });
  m_playback->set_can_play([this] { return m_model.report().has_value(); });

  auto* form = new QFormLayout;
  add_form_row(form, tr("Policy"), m_policy);
  add_form_row(form, tr("Budget"), m_budget);
  add_form_row(form, tr("KV head"), m_head);
  auto* about = new QLabel(tr("One layer of a synthetic \"tiny\" cache, seed %1: %2 tokens × 2 KV "
                              "heads × 16 channels. The first %3 are the prompt; the last %4 "
                              "arrive one per decode step, each with its own query.")
                               .arg(m_model.source().seed)
                               .arg(kContext)
                               .arg(kContext - kSteps)
                               .arg(kSteps));
  about->setWordWrap(true);
  about->setToolTip(
      tr("The engine's seeded synthetic generator, with a sink planted at token 0 and %1 "
         "heavy hitters; the Eviction view gets the same source from the button below")
          .arg(m_model.landmarks().heavy_hitters.size()));

  const auto readout = [](const QString& name, const QString& tip) {
    auto* label = new QLabel;
    label->setObjectName(name);
    label->setWordWrap(true);
    label->setTextFormat(Qt::RichText);
    label->setToolTip(tip);
    return label;
  };
  m_step_label = readout(
      QStringLiteral("step"),
      tr("The decode step shown last: its token arrives, every query head attends over what "
         "is kept, then the policy evicts down to the budget"));
  m_kept_label = readout(
      QStringLiteral("kept"),
      tr("Entries kept after this step's eviction (the engine's per-step count, a mean over the "
         "layer's KV heads, which all keep the same number under these policies), out of the "
         "tokens so far, and the budget at this length"));
  m_sinks_label =
      readout(QStringLiteral("sinks"),
              tr("How many kept entries are attention sinks: the first tokens StreamingLLM never "
                 "evicts (black cells), counted on this KV head's map"));
  m_mix_label = readout(
      QStringLiteral("mix"),
      tr("What the kept entries are, read off this KV head's map: sinks, the newest tokens (the "
         "window) and, for H2O, older tokens kept for their accumulated attention"));
  m_mass_label = readout(
      QStringLiteral("mass"),
      tr("Of the attention the full cache would give at this step (softmax over every token so "
         "far), the share that falls on tokens still kept: the engine's per-step number, a mean "
         "over the step's query heads and the layer's KV heads"));
  m_landmarks_label = readout(
      QStringLiteral("landmarks"),
      tr("Whether the tokens the synthetic generator planted are still kept at this step, on "
         "this KV head: the sink at token 0, the heavy hitters (▼ on the map) that have "
         "arrived, and the needle only the last query looks for (dashed line)"));
  m_error_label = new QLabel;
  m_error_label->setWordWrap(true);
  style::make_error_text(m_error_label);

  auto* controls = new QVBoxLayout;
  controls->addLayout(form);
  controls->addWidget(m_playback);
  controls->addWidget(about);
  controls->addSpacing(6);
  for (QLabel* l : {m_step_label, m_kept_label, m_sinks_label, m_mix_label, m_mass_label,
                    m_landmarks_label, m_error_label}) {
    controls->addWidget(l);
  }
  controls->addStretch(1);
  auto* controls_box = new QWidget;
  controls_box->setLayout(controls);
  controls_box->setFixedWidth(320);

  m_chart = new EvictionMapChart;
  m_chart->setMinimumHeight(300);
  m_chart->setToolTip(
      tr("One KV head's eviction map from the engine's simulation: x the token position, y the "
         "decode step (time runs down). A cell is what the cache holds of that token after that "
         "step's eviction: kept, evicted, a sink, or not yet arrived; rows after the current "
         "step stay blank until the steps get there. ▼ marks the planted heavy hitters, the dashed "
         "line the needle"));
  // The top axis marks the planted heavy hitters, following the map's x range.
  QCPAxis* top = m_chart->xAxis2;
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  for (int t : m_model.landmarks().heavy_hitters) ticker->addTick(t, QStringLiteral("▼"));
  top->setTicker(ticker);
  top->setVisible(true);
  top->setTicks(true);  // QCustomPlot draws tick labels only with ticks on: zero-length ones
  top->setTickLength(0, 0);
  top->setSubTicks(false);
  top->setTickLabels(true);
  top->setTickLabelColor(kHeavyHitter.darker(115));
  top->setBasePen(Qt::NoPen);
  top->grid()->setVisible(false);
  top->setLabel(tr("▼ heavy hitters planted in the cache"));
  top->setLabelColor(kHeavyHitter.darker(130));
  top->setLabelPadding(2);
  // Nothing on this page merges: the legend leaves that state out and fits one line.
  for (int i = 0; i < m_chart->plottableCount(); ++i) {
    QCPAbstractPlottable* item = m_chart->plottable(i);
    if (item->name() == cell_state_names()[static_cast<int>(CellState::Merged)]) {
      item->removeFromLegend();
    }
  }
  m_chart->legend->setWrap(kCellStateCount);
  m_chart->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
  connect(m_chart->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), top,
          qOverload<const QCPRange&>(&QCPAxis::setRange));

  auto* row = new QHBoxLayout;
  row->addWidget(controls_box);
  row->addWidget(m_chart, 1);
  body()->addLayout(row, 1);

  connect(m_policy, &QComboBox::currentIndexChanged, this, &LearnEvictionPage::simulate);
  connect(m_budget, &QSpinBox::valueChanged, this, &LearnEvictionPage::simulate);
  connect(m_head, &QSpinBox::valueChanged, this, &LearnEvictionPage::show_step);
  connect(m_playback, &PlaybackControls::step_requested, this, &LearnEvictionPage::step);
  connect(m_playback, &PlaybackControls::reset_requested, this, &LearnEvictionPage::reset);

  {
    const QSignalBlocker block(m_policy);
    set_policy(m_model.policy());
  }
  simulate();
}

bool LearnEvictionPage::is_playing() const {
  return m_playback->is_playing();
}

void LearnEvictionPage::set_policy(EvictionPolicy policy) {
  const int i = m_policy->findData(static_cast<int>(policy));
  if (i >= 0) m_policy->setCurrentIndex(i);
}

void LearnEvictionPage::set_budget_percent(int percent) {
  m_budget->setValue(percent);
}

void LearnEvictionPage::set_kv_head(int head) {
  m_head->setValue(head);
}

void LearnEvictionPage::simulate() {
  m_model.set_policy(static_cast<EvictionPolicy>(m_policy->currentData().toInt()));
  m_model.set_budget_percent(m_budget->value());
  m_error_label->setText(m_model.error_text());
  if (!m_model.report()) m_chart->clear_data(m_model.error_text());
  show_step();
}

void LearnEvictionPage::step() {
  m_model.step();
  show_step();
}

void LearnEvictionPage::reset() {
  pause();
  m_model.reset();
  show_step();
}

void LearnEvictionPage::play() {
  m_playback->play();
}

void LearnEvictionPage::pause() {
  m_playback->pause();
}

void LearnEvictionPage::tick() {
  m_playback->tick();
}

void LearnEvictionPage::show_step() {
  m_model.set_kv_head(m_head->value());
  m_playback->step_button()->setEnabled(m_model.report() && !m_model.at_end());
  const auto map = m_model.map_data();
  if (map) m_chart->set_data(*map);
  const LearnEvictionModel::StepTexts t = m_model.texts();
  m_step_label->setText(t.step);
  m_kept_label->setText(t.kept);
  m_sinks_label->setText(t.sinks);
  m_mix_label->setText(t.mix);
  m_mass_label->setText(t.mass);
  m_landmarks_label->setText(t.landmarks);
}

}  // namespace kvlab::gui
