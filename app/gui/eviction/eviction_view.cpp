#include "eviction/eviction_view.h"

#include <utility>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QTabWidget>
#include <QVBoxLayout>

#include "common/chart_pair.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/layer_picker.h"
#include "common/run_controller.h"
#include "common/run_shell.h"
#include "common/source_panel.h"
#include "common/stale_mark.h"
#include "eviction/eviction_budget_chart.h"
#include "eviction/eviction_channel_chart.h"
#include "eviction/eviction_chart_data.h"
#include "eviction/eviction_map_chart.h"
#include "eviction/eviction_metrics_panel.h"
#include "eviction/eviction_policy_panel.h"
#include "eviction/eviction_press_data.h"
#include "eviction/eviction_runner.h"
#include "eviction/eviction_runs.h"
#include "eviction/eviction_series_chart.h"
#include "eviction/minicache_chart.h"

namespace kvlab::gui {

namespace {

constexpr int kControlsWidth = 360;

}  // namespace

EvictionView::EvictionView(std::shared_ptr<RunsStore> store, QWidget* parent) : QWidget(parent) {
  m_model = new EvictionModel(std::move(store), this);
  m_run = m_model->run_controller();
  connect(m_run, &RunController::running_changed, this, &EvictionView::set_running);
  auto* splitter = new QSplitter(Qt::Horizontal, this);
  QWidget* controls = build_controls();
  splitter->addWidget(controls);
  splitter->addWidget(build_results());
  m_stale->watch(controls);
  splitter->setStretchFactor(0, 0);
  splitter->setStretchFactor(1, 1);
  splitter->setChildrenCollapsible(false);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(splitter);
  // Names for finding the parts (tests, accessibility tools).
  const std::pair<QWidget*, const char*> names[] = {
      {m_stale, "stale"},       {m_error, "error"},
      {m_metrics, "metrics"},   {m_picker, "picker"},
      {m_scope, "scope"},       {m_reset_zoom, "reset_zoom"},
      {m_map, "map"},           {m_compare_map, "compare_map"},
      {m_series, "series"},     {m_budgets, "budgets"},
      {m_channels, "channels"}, {m_minicache, "minicache"}};
  for (const auto& [part, name] : names) part->setObjectName(QLatin1String(name));

  connect(m_model, &EvictionModel::reports_shown, this, &EvictionView::reports_shown);
  connect(m_model, &EvictionModel::status_message, this, &EvictionView::status_message);
  connect(m_model, &EvictionModel::run_saved, this, &EvictionView::run_saved);
  connect(m_model, &EvictionModel::error, this, &EvictionView::show_error);
  connect(m_shell, &RunShell::run_requested, this, [this] { run(); });
  const auto update_note = [this] {
    const auto job = make_eviction_job(m_source->spec(), m_policy->config(), std::nullopt);
    m_cache_note->setText(m_model->cache_note(job.source));
  };
  connect(m_source, &SourcePanel::changed, this, update_note);
  connect(m_policy, &EvictionPolicyPanel::changed, this, update_note);
  connect(m_picker, &LayerPicker::changed, this, [this] { redraw(); });
  connect(m_scope, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
  connect(m_reset_zoom, &QPushButton::clicked, this, [this] {
    m_map->reset_zoom();
    m_compare_map->reset_zoom();
  });
  connect(m_map->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { sync_zoom(m_map, m_compare_map); });
  connect(m_map->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { sync_zoom(m_map, m_compare_map); });
  connect(m_compare_map->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { sync_zoom(m_compare_map, m_map); });
  connect(m_compare_map->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { sync_zoom(m_compare_map, m_map); });
  set_running(false);
}

EvictionView::~EvictionView() = default;

QWidget* EvictionView::build_controls() {
  auto* controls = new QWidget;
  m_source = new SourcePanel(controls);
  m_policy = new EvictionPolicyPanel(controls);
  m_shell = new RunShell(
      {tr("Simulate decoding: the last tokens of the cache arrive one per step, the policy cuts "
          "each KV head down to its budget, and attention over what is kept is compared with the "
          "full cache; the run is saved"),
       tr("Stop the simulation; nothing is saved"), tr("How far the simulation has got")},
      m_run, controls);
  m_cache_note = style::muted_label(tr("The cache will be generated or loaded on Run."), controls);
  auto* note = style::muted_label(
      tr("A synthetic source gets one decode-time query per step; its planted needle is marked "
         "on the maps."),
      controls);

  auto* layout = new QVBoxLayout(controls);
  layout->setContentsMargins(0, 0, 6, 0);
  layout->addWidget(m_source);
  layout->addWidget(m_policy);
  layout->addWidget(m_shell);
  layout->addWidget(m_cache_note);
  layout->addWidget(note);
  layout->addStretch(1);

  auto* scroll = new QScrollArea;  // scrolls rather than clips when the window is short
  scroll->setWidget(controls);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setMinimumWidth(kControlsWidth);
  scroll->setMaximumWidth(kControlsWidth + 120);
  return scroll;
}

QWidget* EvictionView::build_results() {
  auto* results = new QWidget;
  m_stale = new StaleMark(m_run, results);
  m_error = new QLabel(results);
  m_error->setWordWrap(true);
  m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
  style::make_error_banner(m_error);
  m_error->setVisible(false);
  m_metrics = new EvictionMetricsPanel(results);

  m_picker = new LayerPicker(tr("KV head"), {QStringLiteral("0")}, results);
  m_picker->set_tooltips(tr("Layer whose eviction map is shown"),
                         tr("Every KV head keeps its own set of tokens: the map shows this "
                            "one's"));
  m_scope = new QComboBox(results);
  m_scope->addItem(tr("all layers"));
  m_scope->addItem(tr("the selected layer"));
  m_scope->setToolTip(
      tr("What the curves and the numbers cover: means over every layer, or the layer whose map "
         "is shown"));
  auto* scope_label = new QLabel(tr("Curves and numbers over"), results);
  scope_label->setBuddy(m_scope);
  scope_label->setToolTip(m_scope->toolTip());
  m_reset_zoom = new QPushButton(tr("Reset zoom"), results);
  m_reset_zoom->setToolTip(tr("Show the whole map again (drag pans, the wheel zooms)"));
  // Two short rows rather than one that makes the page wider than a laptop's window.
  auto* map_row = new QHBoxLayout;
  map_row->addWidget(m_picker);
  map_row->addStretch(1);
  map_row->addWidget(m_reset_zoom);
  auto* scope_row = new QHBoxLayout;
  scope_row->addWidget(scope_label);
  scope_row->addWidget(m_scope);
  scope_row->addStretch(1);
  auto* selectors = new QVBoxLayout;
  selectors->setSpacing(4);
  selectors->addLayout(scope_row);
  selectors->addLayout(map_row);

  m_map = new EvictionMapChart;
  m_compare_map = new EvictionMapChart;
  m_series = new EvictionSeriesChart;
  m_maps = new ChartPair(m_map, tr("Policy"), m_compare_map, tr("Compared policy"));
  m_maps->set_second_shown(false);
  auto* maps = m_maps;
  m_budgets = new EvictionBudgetChart;
  m_channels = new EvictionChannelChart;
  m_minicache = new MiniCacheChart;
  m_tabs = new QTabWidget;
  m_tabs->setDocumentMode(true);
  m_tabs->addTab(m_series, tr("Over the steps"));
  m_tabs->addTab(m_budgets, tr("Budgets per layer and head"));
  m_tabs->addTab(m_channels, tr("Key channels"));
  m_tabs->addTab(m_minicache, tr("Merged layers"));
  m_tabs->setTabToolTip(kStepsTab, tr("Attention mass retained and attention-output error at "
                                      "each decode step"));
  m_tabs->setTabToolTip(kBudgetTab,
                        tr("A prefill press: the prompt tokens each layer's budget allows and "
                           "those each KV head kept (PyramidKV's pyramid, Ada-KV's spread)"));
  m_tabs->setTabToolTip(kChannelTab,
                        tr("ThinK: the key channels each layer and KV head keeps for the prompt"));
  m_tabs->setTabToolTip(kMiniCacheTab, tr("MiniCache: the layers that share their tokens' "
                                          "directions, and the memory each layer holds"));
  auto* vertical = new QSplitter(Qt::Vertical);
  vertical->addWidget(maps);
  vertical->addWidget(m_tabs);
  vertical->setChildrenCollapsible(false);
  vertical->setStretchFactor(0, 3);
  vertical->setStretchFactor(1, 2);
  vertical->setSizes({420, 300});
  for (int tab : {kBudgetTab, kChannelTab, kMiniCacheTab}) m_tabs->setTabVisible(tab, false);

  auto* layout = new QVBoxLayout(results);
  layout->setContentsMargins(6, 0, 0, 0);
  layout->addWidget(m_stale);
  layout->addWidget(m_error);
  layout->addWidget(m_metrics);
  layout->addLayout(selectors);
  layout->addWidget(vertical, 1);
  return results;
}

void EvictionView::set_running(bool running) {
  m_source->setEnabled(!running);
  m_policy->setEnabled(!running);
}

bool EvictionView::is_running() const {
  return m_run->running();
}

EvictionJob EvictionView::job() const {
  return make_eviction_job(m_source->spec(), m_policy->config(), m_policy->compare_config());
}

bool EvictionView::run() {
  if (!m_model->run(job())) return false;
  m_error->setVisible(false);
  return true;
}

void EvictionView::cancel() {
  m_run->cancel();
}

bool EvictionView::run_and_wait(int timeout_ms) {
  return m_run->run_and_wait([this] { return run(); }, timeout_ms);
}

bool EvictionView::wait_until_done(int timeout_ms) {
  return m_run->wait_until_done(timeout_ms);
}

const QString& EvictionView::last_error() const {
  return m_model->last_error();
}

void EvictionView::show_error(const QString& engine_message) {
  const QString message = in_gui_terms(engine_message);
  m_error->setText(message);
  m_error->setVisible(true);
  emit status_message(message, 0);
}

void EvictionView::show_reports(const EvictionReport& report,
                                const std::optional<EvictionReport>& compare,
                                const QString& origin) {
  m_model->show_reports(report, compare, origin);
}

void EvictionView::reports_shown() {
  const EvictionReport& report = *m_model->report();
  if (m_model->fresh()) m_cache_note->setText(m_model->cache_note_after_run());
  m_error->setVisible(false);
  const int layers = static_cast<int>(report.maps.size());
  const int heads = layers > 0 ? static_cast<int>(report.maps.front().size()) : 0;
  QStringList head_names;
  for (int h = 0; h < heads; ++h) head_names << QString::number(h);
  m_picker->set_layer_count(layers);
  m_picker->set_choices(head_names);
  m_maps->set_second_shown(m_model->compare().has_value());
  draw_press_tabs();
  redraw();
  m_map->reset_zoom();
  m_compare_map->reset_zoom();
}

void EvictionView::select(int layer, int kv_head) {
  m_picker->select(layer, kv_head);
  redraw();
}

void EvictionView::set_all_layers(bool all) {
  m_scope->setCurrentIndex(all ? 0 : 1);  // redraws through the signal
  redraw();
}

void EvictionView::redraw() {
  if (!m_model->report()) return;
  const int layer = m_picker->layer();
  const int head = m_picker->choice();
  const int scope = m_scope->currentIndex() == 0 ? -1 : layer;
  // Keep the zoom across layer and head changes: both maps have the same shape.
  const QCPRange x = m_map->xAxis->range(), y = m_map->yAxis->range();
  const bool had_map = m_map->data().positions > 0;
  m_map->set_data(eviction_map_data(*m_model->report(), layer, head));
  std::vector<EvictionSeriesData> series{eviction_series_data(*m_model->report(), scope)};
  std::optional<EvictionSummary> second;
  if (m_model->compare()) {
    m_compare_map->set_data(eviction_map_data(*m_model->compare(), layer, head));
    series.push_back(eviction_series_data(*m_model->compare(), scope));
    second = eviction_summary(*m_model->compare(), scope);
  } else {
    m_compare_map->clear_data(tr("Tick \"Compare with\" to run a second policy"));
  }
  if (had_map) {
    m_map->xAxis->setRange(x);
    m_map->yAxis->setRange(y);
    m_map->replot();
  }
  const QString scope_text = scope < 0 ? tr("all layers") : tr("layer %1").arg(layer);
  m_series->set_data(series, scope_text);
  const EvictionSummary first = eviction_summary(*m_model->report(), scope);
  m_maps->set_titles(first.label, second ? second->label : tr("Compared policy"));
  m_metrics->set_summaries(first, second, m_model->origin());
}

void EvictionView::draw_press_tabs() {
  const EvictionBudgetData budgets = eviction_budget_data(*m_model->report());
  const EvictionChannelData channels = eviction_channel_data(*m_model->report());
  const MiniCacheData merged = minicache_data(*m_model->report());
  m_budgets->set_data(budgets);
  m_channels->set_data(channels);
  m_minicache->set_data(merged);
  m_tabs->setTabVisible(kBudgetTab, !budgets.empty());
  m_tabs->setTabVisible(kChannelTab, !channels.empty());
  m_tabs->setTabVisible(kMiniCacheTab, !merged.empty());
  if (!m_tabs->isTabVisible(m_tabs->currentIndex())) m_tabs->setCurrentIndex(kStepsTab);
}

void EvictionView::sync_zoom(EvictionMapChart* from, EvictionMapChart* to) {
  if (m_syncing_zoom || !to->isVisible() || to->data().positions != from->data().positions) {
    return;
  }
  m_syncing_zoom = true;
  to->xAxis->setRange(from->xAxis->range());
  to->yAxis->setRange(from->yAxis->range());
  to->replot(QCustomPlot::rpQueuedReplot);
  m_syncing_zoom = false;
}

}  // namespace kvlab::gui
