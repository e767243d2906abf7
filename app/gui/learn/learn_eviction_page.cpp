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

// One layer of the tiny preset (2 KV heads of 16 channels, 2 query heads each): 160 columns ×
// 64 rows read well on the map, and the whole simulation takes a few milliseconds.
constexpr int kContext = 160;
constexpr int kSteps = 64;  // the last 64 tokens arrive one per decode step
constexpr std::uint64_t kSeed = 1;
constexpr int kSinks = 4;                // StreamingLLM keeps 4 initial tokens (their Sec. 3.2)
constexpr double kRecentFraction = 0.5;  // H2O splits its budget evenly (their Sec. 5)
constexpr int kTickMs = 110;
const QColor kHeavyHitter{230, 140, 40};

QString explanation() {
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

QString range_text(int first, int last) {
  return first == last ? QString::number(first) : QStringLiteral("%1–%2").arg(first).arg(last);
}

// A mean over KV heads: a whole number under the policies of this page, shown as one.
QString count_text(double n) {
  const double r = std::round(n);
  return std::abs(n - r) < 1e-9 ? QLocale().toString(static_cast<qlonglong>(r))
                                : QLocale().toString(n, 'f', 1);
}

}  // namespace

LearnEvictionPage::LearnEvictionPage(QWidget* parent)
    : LearnPage(tr("Eviction: sinks, window, heavy hitters"), explanation(),
                QStringLiteral("Xiao et al., \"Efficient Streaming Language Models with Attention "
                               "Sinks\", ICLR 2024 (arXiv:2309.17453); Zhang et al., \"H2O: "
                               "Heavy-Hitter Oracle for Efficient Generative Inference of Large "
                               "Language Models\", NeurIPS 2023 (arXiv:2306.14048)"),
                tr("Open in the Eviction view"), parent) {
  full_view_button()->setToolTip(
      tr("Run this policy and budget on the same synthetic cache in the Eviction view, with "
         "every layer, head and option there"));
  m_source.preset = "tiny";
  m_source.layers = 1;
  m_source.context = kContext;
  m_source.seed = kSeed;
  m_source.queries = kSteps;  // one query per decode step, as the Eviction view generates it
  m_landmarks = synthetic_landmarks(m_source);

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
  m_budget->setRange(5, 90);
  m_budget->setSingleStep(5);
  m_budget->setValue(25);
  m_budget->setSuffix(tr(" % of tokens"));
  m_budget->setToolTip(
      tr("Entries each KV head may keep, as a share of the tokens the sequence has at that "
         "step (rounded); after every decode step the cache is cut back to it"));
  m_head = new IntField;
  m_head->setRange(0, 0);
  m_head->setToolTip(
      tr("Which KV head's map and counts to show: each KV head keeps its own entries, chosen "
         "from the attention of its own group of query heads"));
  for (auto* s : {m_budget, m_head}) s->setKeyboardTracking(false);

  m_playback =
      new PlaybackControls({tr("Decode step after step to the last one; press again to pause"),
                            tr("Decode one more step: one token arrives, then the policy evicts"),
                            tr("Back to decode step 0, the first token after the prompt")},
                           kTickMs);
  m_playback->set_at_end([this] { return m_step + 1 >= step_count(); });
  m_playback->set_can_play([this] { return m_report.has_value(); });

  auto* form = new QFormLayout;
  add_form_row(form, tr("Policy"), m_policy);
  add_form_row(form, tr("Budget"), m_budget);
  add_form_row(form, tr("KV head"), m_head);
  auto* about = new QLabel(tr("One layer of a synthetic \"tiny\" cache, seed %1: %2 tokens × 2 KV "
                              "heads × 16 channels. The first %3 are the prompt; the last %4 "
                              "arrive one per decode step, each with its own query.")
                               .arg(kSeed)
                               .arg(kContext)
                               .arg(kContext - kSteps)
                               .arg(kSteps));
  about->setWordWrap(true);
  about->setToolTip(
      tr("The engine's seeded synthetic generator, with a sink planted at token 0 and %1 "
         "heavy hitters; the Eviction view gets the same source from the button below")
          .arg(m_landmarks.heavy_hitters.size()));

  const auto readout = [](const QString& tip) {
    auto* label = new QLabel;
    label->setWordWrap(true);
    label->setTextFormat(Qt::RichText);
    label->setToolTip(tip);
    return label;
  };
  m_step_label = readout(
      tr("The decode step shown last: its token arrives, every query head attends over what "
         "is kept, then the policy evicts down to the budget"));
  m_kept_label = readout(
      tr("Entries kept after this step's eviction (the engine's per-step count, a mean over the "
         "layer's KV heads, which all keep the same number under these policies), out of the "
         "tokens so far, and the budget at this length"));
  m_sinks_label =
      readout(tr("How many kept entries are attention sinks: the first tokens StreamingLLM never "
                 "evicts (black cells), counted on this KV head's map"));
  m_mix_label = readout(
      tr("What the kept entries are, read off this KV head's map: sinks, the newest tokens (the "
         "window) and, for H2O, older tokens kept for their accumulated attention"));
  m_mass_label = readout(
      tr("Of the attention the full cache would give at this step (softmax over every token so "
         "far), the share that falls on tokens still kept: the engine's per-step number, a mean "
         "over the step's query heads and the layer's KV heads"));
  m_landmarks_label = readout(
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
  for (int t : m_landmarks.heavy_hitters) ticker->addTick(t, QStringLiteral("▼"));
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

  auto cache = generate_synthetic(m_source);
  if (cache) {
    m_cache = std::move(cache).value();
    m_head->setMaximum(m_cache.shape.kv_heads - 1);
  } else {
    m_error = tr("Synthetic source: %1").arg(QString::fromStdString(cache.message()));
  }
  m_step = kSteps - 1;  // the page opens on the whole map; Play starts again from step 0
  {
    const QSignalBlocker block(m_policy);
    set_policy(EvictionPolicy::H2O);
  }
  simulate();
}

EvictionConfig LearnEvictionPage::config() const {
  EvictionConfig c;
  c.policy = static_cast<EvictionPolicy>(m_policy->currentData().toInt());
  c.budget = Budget{m_budget->value() / 100.0, true};
  c.steps = kSteps;
  c.sinks = kSinks;
  c.recent_fraction = kRecentFraction;
  c.needle = m_landmarks.needle;  // as the Eviction view sets it for a synthetic source
  return c;
}

int LearnEvictionPage::kv_head() const {
  return m_head->value();
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
  m_report.reset();
  if (!m_cache.layers.empty()) {  // else m_error says why the source failed
    auto report = simulate_eviction(m_cache, config());
    if (report) {
      m_report = std::move(report).value();
      m_error.clear();
    } else {
      m_error = tr("Eviction: %1").arg(QString::fromStdString(report.message()));
    }
  }
  m_error_label->setText(m_error);
  if (!m_report) m_chart->clear_data(m_error);
  m_step = std::clamp(m_step, 0, std::max(0, step_count() - 1));
  show_step();
}

void LearnEvictionPage::step() {
  if (m_step + 1 >= step_count()) return;
  ++m_step;
  show_step();
}

void LearnEvictionPage::reset() {
  pause();
  m_step = 0;
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
  m_playback->step_button()->setEnabled(m_report && m_step + 1 < step_count());
  if (!m_report) {
    for (QLabel* l : {m_step_label, m_kept_label, m_sinks_label, m_mix_label, m_mass_label,
                      m_landmarks_label}) {
      l->clear();
    }
    return;
  }
  draw_map();
  update_labels();
}

void LearnEvictionPage::draw_map() {
  EvictionMapData d = eviction_map_data(*m_report, 0, kv_head());
  for (int s = m_step + 1; s < d.steps; ++s) {
    std::fill_n(d.cells.begin() + static_cast<std::ptrdiff_t>(s) * d.positions, d.positions,
                static_cast<std::uint8_t>(CellState::Absent));
  }
  d.title = tr("%1 · KV head %2 · step %3")
                .arg(QString::fromStdString(m_report->label))
                .arg(kv_head())
                .arg(m_step);
  m_chart->set_data(d);
}

void LearnEvictionPage::update_labels() {
  const EvictionConfig& c = m_report->config;
  const EvictionStep& st = m_report->layers.front().steps[static_cast<std::size_t>(m_step)];
  const EvictionMap& map = m_report->maps.front()[static_cast<std::size_t>(kv_head())];
  const int context = st.context;
  m_step_label->setText(tr("Decode step <b>%1</b> (last: %2) · token %3 arrives · %4 tokens so far")
                            .arg(m_step)
                            .arg(step_count() - 1)
                            .arg(context - 1)
                            .arg(context));

  std::vector<int> kept, sinks;  // positions, ascending
  for (int p = 0; p < context; ++p) {
    const CellState s = map.state(m_step, p);
    if (s == CellState::Sink) sinks.push_back(p);
    if (s == CellState::Kept || s == CellState::Sink) kept.push_back(p);
  }
  const bool full = c.policy == EvictionPolicy::Full;
  const int budget = full ? context : c.budget.tokens_at(context);
  m_kept_label->setText(
      tr("Kept: <b>%1</b> of %2 tokens (budget %3)")
          .arg(count_text(st.kept))
          .arg(context)
          .arg(full ? tr("all") : tr("%1 → %2").arg(format_percent(c.budget.value)).arg(budget)));
  m_sinks_label->setText(sinks.empty() ? tr("Sinks: <b>0</b> (this policy protects no token)")
                                       : tr("Sinks: <b>%1</b> (tokens %2, never evicted)")
                                             .arg(sinks.size())
                                             .arg(range_text(sinks.front(), sinks.back())));

  // The newest entries: the window, or for H2O its recent share of the budget.
  std::vector<int> rest;
  std::set_difference(kept.begin(), kept.end(), sinks.begin(), sinks.end(),
                      std::back_inserter(rest));
  QString mix;
  if (full) {
    mix = tr("every token so far (0–%1)").arg(context - 1);
  } else if (c.policy == EvictionPolicy::H2O) {
    const auto recent =
        std::min(rest.size(), static_cast<std::size_t>(std::floor(c.recent_fraction * budget)));
    const std::size_t heavy = rest.size() - recent;
    mix = recent == 0 ? tr("%1 kept for their accumulated attention").arg(heavy)
                      : tr("the newest %1 (tokens %2) + <b>%3</b> older ones kept for their "
                           "accumulated attention")
                            .arg(recent)
                            .arg(range_text(rest[rest.size() - recent], rest.back()))
                            .arg(heavy);
  } else if (!rest.empty()) {
    mix = tr("%1the newest %2 (tokens %3)")
              .arg(sinks.empty() ? QString() : tr("%1 sinks + ").arg(sinks.size()))
              .arg(rest.size())
              .arg(range_text(rest.front(), rest.back()));
  }
  m_mix_label->setText(tr("Kept entries: %1").arg(mix));
  m_mass_label->setText(
      tr("Attention mass retained: <b>%1</b>").arg(format_percent(st.attention_mass_retained)));

  const auto is_kept = [&](int p) { return std::binary_search(kept.begin(), kept.end(), p); };
  int arrived = 0, heavy_kept = 0;
  for (int t : m_landmarks.heavy_hitters) {
    if (t >= context) continue;
    ++arrived;
    heavy_kept += is_kept(t);
  }
  m_landmarks_label->setText(
      tr("Planted sink (token %1): <b>%2</b> · heavy hitters kept: <b>%3</b> of %4 · needle "
         "(token %5): <b>%6</b>")
          .arg(m_landmarks.sink)
          .arg(is_kept(m_landmarks.sink) ? tr("kept") : tr("evicted"))
          .arg(heavy_kept)
          .arg(arrived)
          .arg(m_landmarks.needle)
          .arg(is_kept(m_landmarks.needle) ? tr("kept") : tr("evicted")));
}

LearnLink LearnEvictionPage::link() const {
  LearnLink link;
  link.target = LearnLink::Target::Eviction;
  link.source = m_source;
  link.eviction = config();
  return link;
}

}  // namespace kvlab::gui
