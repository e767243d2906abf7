#include "runs/runs_comparison.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <qcustomplot.h>
#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "common/chart_style.h"
#include "common/gui_format.h"
#include "kvlab/store/run_records.h"

namespace kvlab::gui {

namespace {

using nlohmann::json;

// Per-layer metrics the run kinds store, by dotted key inside each layer object.
const std::pair<const char*, const char*> kLayerMetrics[] = {
    {"ratio", "ratio vs fp16"},
    {"bits_per_value", "bits per value"},
    {"error.attn_output_rel_error", "attention output rel. error"},
    {"attn_output_rel_error", "attention output rel. error"},
    {"error.mse", "MSE"},
    {"attention_mass_retained", "attention mass retained"}};
// Per-step columns of an eviction run's per_step object.
const std::pair<const char*, const char*> kStepMetrics[] = {
    {"attention_mass_retained", "attention mass retained"},
    {"attn_output_rel_error", "attention output rel. error"},
    {"kept_tokens", "kept tokens"},
    {"memory_bytes", "memory (bytes)"}};

const json* at_path(const json& j, const std::string& path) {
  const json* p = &j;
  std::size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (!p->is_object()) return nullptr;
    const auto it = p->find(part);
    if (it == p->end()) return nullptr;
    p = &*it;
    if (dot == std::string::npos) return p;
    start = dot + 1;
  }
}

std::vector<double> layer_curve(const RunRecord& run, const char* key) {
  std::vector<double> out;
  const json* layers = at_path(run.metrics, "per_layer");
  if (!layers || !layers->is_array()) return out;
  for (const json& layer : *layers) {
    const json* v = at_path(layer, key);
    out.push_back(v && v->is_number() ? v->get<double>() : NAN);
  }
  if (std::none_of(out.begin(), out.end(), [](double x) { return std::isfinite(x); })) out.clear();
  return out;
}

std::vector<double> step_curve(const RunRecord& run, const char* key) {
  std::vector<double> out;
  const json* column = at_path(run.metrics, std::string("per_step.") + key);
  if (!column || !column->is_array()) return out;
  for (const json& v : *column) out.push_back(v.is_number() ? v.get<double>() : NAN);
  return out;
}

template <class Specs, class Curve>
std::vector<ComparedSeries> series_of(const std::vector<RunRecord>& runs, const Specs& specs,
                                      Curve curve) {
  std::vector<ComparedSeries> out;
  for (const auto& [key, name] : specs) {
    ComparedSeries s{QString::fromUtf8(name), {}};
    bool any = false;
    for (const RunRecord& run : runs) {
      s.curves.push_back(curve(run, key));
      any = any || !s.curves.back().empty();
    }
    if (!any) continue;
    // Two keys with one name (compression's and eviction's error): merge run by run.
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const ComparedSeries& o) { return o.name == s.name; });
    if (same == out.end()) {
      out.push_back(std::move(s));
      continue;
    }
    for (std::size_t r = 0; r < runs.size(); ++r) {
      if (same->curves[r].empty()) same->curves[r] = std::move(s.curves[r]);
    }
  }
  return out;
}

// Scalar leaves of a JSON object as dotted keys.
void flatten(const json& j, const std::string& prefix, std::map<std::string, QString>& out) {
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) {
      flatten(*it, key, out);
    } else if (it->is_string()) {
      out[key] = QString::fromStdString(it->get<std::string>());
    } else if (!it->is_array()) {
      out[key] = QString::fromStdString(it->dump());
    }
  }
}

QString run_name(const RunRecord& run) {
  return QStringLiteral("#%1 %2").arg(run.id).arg(method_and_label(run.method, run.label));
}

constexpr int kLegendChars = 60;

const QColor kRunColours[] = {{78, 121, 167},  {242, 142, 43}, {89, 161, 79},   {225, 87, 89},
                              {118, 183, 178}, {237, 201, 72}, {176, 122, 161}, {156, 117, 95}};

}  // namespace

RunsComparison compare_runs(const std::vector<RunRecord>& runs) {
  RunsComparison c;
  for (const RunRecord& run : runs) c.runs.push_back(run_name(run));
  c.per_layer = series_of(runs, kLayerMetrics, layer_curve);
  c.per_step = series_of(runs, kStepMetrics, step_curve);

  // Every metric any run has, first by the first run's reading order, then the next run's new
  // ones (runs of different kinds list different metrics).
  std::vector<std::vector<RunMetric>> metrics;
  for (const RunRecord& run : runs) metrics.push_back(run_metrics(run));
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (const RunMetric& m : metrics[r]) {
      const QString name = QString::fromStdString(m.name);
      if (std::find(c.measured.begin(), c.measured.end(), name) != c.measured.end()) continue;
      c.measured.push_back(name);
      std::vector<QString> values;
      for (const auto& of_run : metrics) {
        const auto it = std::find_if(of_run.begin(), of_run.end(),
                                     [&](const RunMetric& x) { return x.name == m.name; });
        values.push_back(it == of_run.end() ? QString() : QString::fromStdString(it->text()));
      }
      c.measured_values.push_back(std::move(values));
    }
  }

  std::vector<std::map<std::string, QString>> params(runs.size());
  std::set<std::string> keys;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    params[r]["kind"] = QString::fromStdString(runs[r].kind);
    params[r]["source"] = QString::fromStdString(runs[r].source);
    params[r]["method"] = QString::fromStdString(runs[r].method);
    if (const auto context = run_row(runs[r]).context) {
      params[r]["context"] = QString::number(*context, 'f', 0);
    }
    flatten(runs[r].params, "", params[r]);
    for (const auto& [key, value] : params[r]) keys.insert(key);
  }
  for (const std::string& key : keys) {
    std::vector<QString> values;
    for (auto& p : params) values.push_back(p.count(key) ? p[key] : QString());
    if (std::all_of(values.begin(), values.end(), [&](const QString& v) { return v == values[0]; }))
      continue;
    c.differing.push_back(QString::fromStdString(key));
    c.values.push_back(std::move(values));
  }
  return c;
}

RunsComparePanel::RunsComparePanel(QWidget* parent) : QWidget(parent) {
  m_hint =
      new QLabel(tr("Select two or more runs (Ctrl- or Shift-click) to compare them here."), this);
  m_hint->setWordWrap(true);
  m_layer_metric = new QComboBox(this);
  m_layer_metric->setObjectName(QStringLiteral("layer_metric"));
  m_layer_metric->setToolTip(tr("Which per-layer curve to overlay"));
  m_step_metric = new QComboBox(this);
  m_step_metric->setObjectName(QStringLiteral("step_metric"));
  m_step_metric->setToolTip(tr("Which per-step curve to overlay (eviction runs)"));
  m_layer_plot = new QCustomPlot(this);
  m_layer_plot->setObjectName(QStringLiteral("layer_plot"));
  m_step_plot = new QCustomPlot(this);
  m_step_plot->setObjectName(QStringLiteral("step_plot"));
  for (QCustomPlot* plot : {m_layer_plot, m_step_plot}) {
    plot->setMinimumSize(320, 220);
    style_plot(plot);
    // Below the axes, one run a line: a legend never covers a curve.
    add_legend_row(plot, plot->legend, 1);
    plot->legend->setWrap(1);
  }
  m_differences = new QTableWidget(this);
  m_differences->setObjectName(QStringLiteral("differences"));
  m_differences->setMinimumHeight(90);
  m_differences->setMaximumHeight(180);  // the charts take the rest
  m_differences->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_differences->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_differences->setToolTip(
      tr("The parameters in which the selected runs differ, then what each measured (bold)"));

  auto* layer_box = new QVBoxLayout;
  layer_box->addWidget(m_layer_metric);
  layer_box->addWidget(m_layer_plot, 1);
  auto* step_box = new QVBoxLayout;
  step_box->addWidget(m_step_metric);
  step_box->addWidget(m_step_plot, 1);
  auto* charts = new QHBoxLayout;
  charts->addLayout(layer_box, 1);
  charts->addLayout(step_box, 1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_hint);
  layout->addLayout(charts, 1);
  layout->addWidget(m_differences);

  connect(m_layer_metric, &QComboBox::currentIndexChanged, this,
          [this](int i) { draw(m_layer_plot, m_comparison.per_layer, i, tr("layer")); });
  connect(m_step_metric, &QComboBox::currentIndexChanged, this,
          [this](int i) { draw(m_step_plot, m_comparison.per_step, i, tr("decode step")); });
  clear();
}

void RunsComparePanel::clear() {
  set_comparison({});
}

void RunsComparePanel::set_comparison(const RunsComparison& comparison) {
  m_comparison = comparison;
  // One run shows its own curves (selecting one run used to show nothing); two or more share
  // the axes, with the parameters in which they differ.
  const bool shown = !comparison.runs.empty();
  m_hint->setText(
      comparison.runs.size() >= 2
          ? tr("%1 runs compared: curves on shared axes where they have them, the "
               "parameters in which they differ, and what each measured.")
                .arg(comparison.runs.size())
      : shown ? tr("%1: its numbers and its curves. Select more runs (Ctrl- or Shift-click) to "
                   "compare them; double-click to open it on its page.")
                    .arg(comparison.runs.front())
              : tr("Select a run to see its curves, or two or more (Ctrl- or "
                   "Shift-click) to compare them here."));
  for (auto [box, series] : {std::pair{m_layer_metric, &m_comparison.per_layer},
                             std::pair{m_step_metric, &m_comparison.per_step}}) {
    const QSignalBlocker block(box);
    const QString keep = box->currentText();
    box->clear();
    for (const ComparedSeries& s : *series) box->addItem(s.name);
    const int again = box->findText(keep);
    box->setCurrentIndex(again >= 0 ? again : 0);
    box->setEnabled(shown && !series->empty());
  }
  // A chart with nothing to draw is not shown (compression runs have no decode steps): empty
  // axes read as a broken chart.
  const bool steps = !m_comparison.per_step.empty();
  m_step_plot->setVisible(steps);
  m_step_metric->setVisible(steps);
  // Runs with no curves at all (a generate or plan run) leave the page to their numbers.
  const bool layers = !m_comparison.per_layer.empty() || !shown;
  m_layer_plot->setVisible(layers);
  m_layer_metric->setVisible(layers);
  m_differences->setMaximumHeight(layers || steps ? 180 : QWIDGETSIZE_MAX);
  draw(m_layer_plot, shown ? m_comparison.per_layer : std::vector<ComparedSeries>{},
       m_layer_metric->currentIndex(), tr("layer"));
  draw(m_step_plot, shown ? m_comparison.per_step : std::vector<ComparedSeries>{},
       m_step_metric->currentIndex(), tr("decode step"));

  m_differences->clear();
  const std::size_t measured = comparison.measured.size();
  m_differences->setRowCount(shown ? static_cast<int>(measured + comparison.differing.size()) : 0);
  m_differences->setColumnCount(shown ? static_cast<int>(comparison.runs.size()) : 0);
  if (!shown) return;
  QStringList headers;
  for (const QString& name : comparison.runs) headers << name;
  m_differences->setHorizontalHeaderLabels(headers);
  // The parameters that differ first (what changed), then what each run measured (bold).
  const std::size_t params = comparison.differing.size();
  QStringList rows;
  for (const QString& key : comparison.differing) rows << key;
  for (const QString& name : comparison.measured) rows << name;
  m_differences->setVerticalHeaderLabels(rows);
  for (std::size_t p = 0; p < params; ++p) {
    for (std::size_t r = 0; r < comparison.values[p].size(); ++r) {
      m_differences->setItem(static_cast<int>(p), static_cast<int>(r),
                             new QTableWidgetItem(comparison.values[p][r]));
    }
  }
  QFont bold = m_differences->font();
  bold.setBold(true);
  for (std::size_t p = 0; p < measured; ++p) {
    const int row = static_cast<int>(params + p);
    m_differences->verticalHeaderItem(row)->setFont(bold);
    for (std::size_t r = 0; r < comparison.measured_values[p].size(); ++r) {
      auto* item = new QTableWidgetItem(comparison.measured_values[p][r]);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      m_differences->setItem(row, static_cast<int>(r), item);
    }
  }
}

void RunsComparePanel::draw(QCustomPlot* plot, const std::vector<ComparedSeries>& series, int which,
                            const QString& x_label) {
  plot->clearGraphs();
  plot->xAxis->setLabel(x_label);
  if (which < 0 || which >= static_cast<int>(series.size())) {
    plot->yAxis->setLabel(QString());
    plot->legend->setVisible(false);
    plot->replot();
    return;
  }
  const ComparedSeries& s = series[static_cast<std::size_t>(which)];
  plot->yAxis->setLabel(s.name);
  for (std::size_t r = 0; r < s.curves.size(); ++r) {
    if (s.curves[r].empty()) continue;
    QCPGraph* g = plot->addGraph();
    QString name = r < m_comparison.runs.size() ? m_comparison.runs[r] : QString();
    if (name.size() > kLegendChars) name = name.left(kLegendChars - 1) + QChar(0x2026);
    g->setName(name);
    g->setPen(QPen(kRunColours[r % std::size(kRunColours)], 2));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
    QVector<double> x, y;
    for (std::size_t i = 0; i < s.curves[r].size(); ++i) {
      if (!std::isfinite(s.curves[r][i])) continue;
      x << static_cast<double>(i);
      y << s.curves[r][i];
    }
    g->setData(x, y, true);
  }
  plot->legend->setVisible(plot->graphCount() > 0);
  plot->rescaleAxes();
  plot->yAxis->scaleRange(1.1, plot->yAxis->range().center());
  plot->replot();
}

}  // namespace kvlab::gui
