// What the Quality page draws from its runs: the chart's points on the chosen axes with the
// Pareto frontier marked, the table of every run's numbers, and the one-line summary shown when
// a point is hovered.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <QAbstractTableModel>
#include <QString>

#include "quality/pareto.h"
#include "quality/quality_runs.h"

namespace kvlab::gui {

// What the Quality chart draws (quality_chart.h), in plain values.
struct QualityChartPoint {
  double x = 0, y = 0;
  QString label;  // drawn next to the point: "KIVI-2"
  bool frontier = false;
  // The 95% interval of y, drawn as an error bar; NaN: none known.
  double y_low = std::numeric_limits<double>::quiet_NaN();
  double y_high = std::numeric_limits<double>::quiet_NaN();
};

struct QualityChartData {
  QString title, x_label, y_label;
  std::vector<QualityChartPoint> points;
  std::vector<ParetoPoint> staircase;  // the frontier's step line
  // A logarithmic y axis (only when every y is positive): one bad configuration (INT4 on a
  // tiny model: +800 % perplexity) would otherwise flatten the rest onto the x axis.
  bool log_y = false;
};

enum class QualityX { Ratio, BitsPerValue };
enum class QualityY { PerplexityChange, Agreement, Kl };

// Which way each axis is better: a higher ratio, fewer bits, a smaller perplexity change, more
// agreement, a smaller KL.
ParetoAxes quality_pareto_axes(QualityX x, QualityY y);
// Eviction counts in memory: the ratio is divided by the kept fraction, bits multiplied by it.
double quality_x(const QualityPoint& p, QualityX x);
// Perplexity change and agreement in percent, KL in nats.
// The 95% interval of quality_y: ± 1.96 standard errors, or Wilson's interval for agreement;
// NaN, NaN for a run stored without them.
// For each point off the frontier: true when a frontier point at least as good in x is better in
// y only within noise (their 95% intervals of y overlap), so the two are not ranked.
std::vector<bool> quality_within_noise(const std::vector<QualityPoint>& points, QualityX x,
                                       QualityY y, const std::vector<bool>& frontier);
std::pair<double, double> quality_y_interval(const QualityPoint& p, QualityY y);
double quality_y(const QualityPoint& p, QualityY y);
QString quality_x_label(QualityX x);
QString quality_y_label(QualityY y);

// Whether each point is on the Pareto frontier of the chosen axes.
std::vector<bool> quality_frontier(const std::vector<QualityPoint>& points, QualityX x, QualityY y);
// With `log_y`, the y axis is logarithmic when every point's y is positive.
QualityChartData quality_chart_data(const std::vector<QualityPoint>& points, QualityX x, QualityY y,
                                    const QString& title, bool log_y = false);

// "KIVI-2 (kivi-2 G=32 R=128), run #12: 4.57× (3.50 bits/value), perplexity 3.21 → 3.27
// (+1.8 %), next-token agreement 97.3 %, KL 0.0123 nats"
QString quality_point_summary(const QualityPoint& p);

enum QualityColumn {
  kQualityRun,
  kQualityConfiguration,
  kQualityRatio,
  kQualityBits,
  kQualityKept,
  kQualityPerplexity,
  kQualityPerplexityChange,
  kQualityAgreement,
  kQualityKl,
  kQualityPareto,
  kQualitySeconds,
  kQualityColumnCount
};
// The Quality page's table over its points: one row per point, in the points' order, the
// columns above; Qt::UserRole of any cell is the row's run id.
class QualityTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  using QAbstractTableModel::QAbstractTableModel;

  // `within_noise`: quality_within_noise(); the Pareto column says so instead of nothing.
  void set_points(std::vector<QualityPoint> points, std::vector<bool> frontier,
                  std::vector<bool> within_noise = {});
  // The row showing run `id`, or -1.
  int row_of_run(std::int64_t id) const;
  std::int64_t run_at(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QString text(const QualityPoint& p, int row, int column) const;

  std::vector<QualityPoint> m_points;
  std::vector<bool> m_frontier;
  std::vector<bool> m_within_noise;
};

}  // namespace kvlab::gui
