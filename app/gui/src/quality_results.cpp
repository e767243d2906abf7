#include "kvlab/gui/quality_results.h"

#include <algorithm>

#include <QAbstractItemView>
#include <QHeaderView>
#include <QTableWidget>

#include "kvlab/gui/explain.h"
#include "kvlab/gui/gui_format.h"
#include "kvlab/gui/quality_configs.h"

namespace kvlab::gui {

namespace {

QTableWidgetItem* cell(const QString& text, Qt::Alignment align = Qt::AlignRight) {
  auto* it = new QTableWidgetItem(text);
  it->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  it->setTextAlignment(align | Qt::AlignVCenter);
  return it;
}

}  // namespace

ParetoAxes quality_pareto_axes(QualityX x, QualityY y) {
  return {x == QualityX::Ratio ? Better::Higher : Better::Lower,
          y == QualityY::Agreement ? Better::Higher : Better::Lower};
}

double quality_x(const QualityPoint& p, QualityX x) {
  return x == QualityX::Ratio ? p.memory_ratio() : p.memory_bits_per_value();
}

double quality_y(const QualityPoint& p, QualityY y) {
  switch (y) {
    case QualityY::PerplexityChange:
      return 100.0 * p.perplexity_change;
    case QualityY::Agreement:
      return 100.0 * p.next_token_agreement;
    case QualityY::Kl:
      return p.kl_mean;
  }
  return 0;
}

QString quality_x_label(QualityX x) {
  return x == QualityX::Ratio
             ? QObject::tr("memory ratio vs fp16 (×; eviction: divided by the kept fraction)")
             : QObject::tr("bits per value held (eviction: times the kept fraction)");
}

QString quality_y_label(QualityY y) {
  switch (y) {
    case QualityY::PerplexityChange:
      return QObject::tr("perplexity change vs exact (%)");
    case QualityY::Agreement:
      return QObject::tr("greedy next-token agreement (%)");
    case QualityY::Kl:
      return QObject::tr("mean KL(exact ‖ compressed), nats");
  }
  return {};
}

std::vector<bool> quality_frontier(const std::vector<QualityPoint>& points, QualityX x,
                                   QualityY y) {
  std::vector<ParetoPoint> xy;
  for (const QualityPoint& p : points) xy.push_back({quality_x(p, x), quality_y(p, y)});
  std::vector<bool> on(points.size(), false);
  for (int i : pareto_frontier(xy, quality_pareto_axes(x, y)))
    on[static_cast<std::size_t>(i)] = true;
  return on;
}

QualityChartData quality_chart_data(const std::vector<QualityPoint>& points, QualityX x, QualityY y,
                                    const QString& title, bool log_y) {
  QualityChartData data;
  data.title = title;
  data.x_label = quality_x_label(x);
  data.y_label = quality_y_label(y);
  const std::vector<bool> on = quality_frontier(points, x, y);
  std::vector<ParetoPoint> xy;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const QualityPoint& p = points[i];
    data.points.push_back(
        {quality_x(p, x), quality_y(p, y), quality_short_name(p.method), static_cast<bool>(on[i])});
    xy.push_back({data.points.back().x, data.points.back().y});
  }
  std::vector<ParetoPoint> frontier;
  for (int i : pareto_frontier(xy, quality_pareto_axes(x, y))) {
    frontier.push_back(xy[static_cast<std::size_t>(i)]);
  }
  data.staircase = pareto_staircase(frontier, quality_pareto_axes(x, y));
  data.log_y = log_y && !data.points.empty() &&
               std::all_of(data.points.begin(), data.points.end(),
                           [](const QualityChartPoint& p) { return p.y > 0; });
  if (data.log_y) data.y_label += QObject::tr(", log scale");
  return data;
}

QString quality_point_summary(const QualityPoint& p) {
  const QString name = quality_short_name(p.method);
  const QString method = QString::fromStdString(p.method);
  QString kept;
  if (p.kept_fraction < 1)
    kept = QObject::tr(", %1 of tokens kept").arg(format_percent(p.kept_fraction));
  return QObject::tr(
             "%1%2, run #%3: %4 (%5 bits/value%6), perplexity %7 → %8 (%9), next-token "
             "agreement %10, KL %11 nats")
      .arg(name, name == method ? QString() : QStringLiteral(" (%1)").arg(method))
      .arg(p.run_id)
      .arg(format_ratio(p.memory_ratio()), format_bits_per_value(p.memory_bits_per_value()), kept,
           QString::number(p.perplexity_exact, 'f', 3), QString::number(p.perplexity, 'f', 3),
           format_signed_percent(p.perplexity_change), format_percent(p.next_token_agreement),
           format_metric(p.kl_mean));
}

void init_quality_table(QTableWidget* table) {
  table->setColumnCount(kQualityColumnCount);
  table->setHorizontalHeaderLabels(
      {QObject::tr("Run"), QObject::tr("Configuration"), QObject::tr("Ratio"),
       QObject::tr("Bits/value"), QObject::tr("Kept"), QObject::tr("Perplexity"),
       QObject::tr("Δ perplexity"), QObject::tr("Next-token agreement"), QObject::tr("KL (nats)"),
       QObject::tr("Pareto"), QObject::tr("Time")});
  // Same order as the labels above (kQualityRun … kQualitySeconds).
  explain::set_header_tooltips(
      table, {explain::quality_run(), explain::quality_configuration(), explain::quality_ratio(),
              explain::quality_bits(), explain::kept_fraction(), explain::perplexity(),
              explain::perplexity_change(), explain::next_token_agreement(), explain::quality_kl(),
              explain::pareto(), explain::quality_seconds()});
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setSelectionMode(QAbstractItemView::SingleSelection);
  table->setAlternatingRowColors(true);
  table->verticalHeader()->setVisible(false);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  // Readable names first: the configuration keeps a width of its own (its full label is in the
  // tooltip) and the table scrolls sideways in a narrow window rather than squeeze it to "…".
  table->horizontalHeader()->setSectionResizeMode(kQualityConfiguration, QHeaderView::Interactive);
  table->setColumnWidth(kQualityConfiguration, 150);
  table->horizontalHeader()->setStretchLastSection(true);
  table->horizontalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
}

void fill_quality_table(QTableWidget* table, const std::vector<QualityPoint>& points,
                        const std::vector<bool>& frontier) {
  table->setRowCount(0);
  table->setRowCount(static_cast<int>(points.size()));
  for (int row = 0; row < static_cast<int>(points.size()); ++row) {
    const QualityPoint& p = points[static_cast<std::size_t>(row)];
    auto* id = cell(QString::number(p.run_id));
    id->setData(Qt::UserRole, static_cast<qlonglong>(p.run_id));
    table->setItem(row, kQualityRun, id);
    auto* name = cell(quality_short_name(p.method), Qt::AlignLeft);
    name->setToolTip(QString::fromStdString(p.method));
    table->setItem(row, kQualityConfiguration, name);
    table->setItem(row, kQualityRatio, cell(format_ratio(p.memory_ratio())));
    table->setItem(row, kQualityBits, cell(format_bits_per_value(p.memory_bits_per_value())));
    table->setItem(row, kQualityKept, cell(format_percent(p.kept_fraction)));
    table->setItem(row, kQualityPerplexity,
                   cell(QStringLiteral("%1 → %2").arg(QString::number(p.perplexity_exact, 'f', 3),
                                                      QString::number(p.perplexity, 'f', 3))));
    table->setItem(row, kQualityPerplexityChange, cell(format_signed_percent(p.perplexity_change)));
    table->setItem(row, kQualityAgreement, cell(format_percent(p.next_token_agreement)));
    table->setItem(row, kQualityKl, cell(format_metric(p.kl_mean)));
    const bool on =
        row < static_cast<int>(frontier.size()) && frontier[static_cast<std::size_t>(row)];
    table->setItem(row, kQualityPareto,
                   cell(on ? QStringLiteral("✓") : QString(), Qt::AlignHCenter));
    table->setItem(row, kQualitySeconds, cell(format_seconds(p.seconds)));
  }
}

}  // namespace kvlab::gui
