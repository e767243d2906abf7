#include "quality/quality_results.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/explain.h"
#include "common/gui_format.h"
#include "kvlab/engine/core/interval.h"
#include "quality/quality_configs.h"

namespace kvlab::gui {

ParetoAxes quality_pareto_axes(QualityX x, QualityY y) {
  return {x == QualityX::Ratio ? Better::Higher : Better::Lower,
          y == QualityY::Agreement ? Better::Higher : Better::Lower};
}

double quality_x(const QualityPoint& p, QualityX x) {
  return x == QualityX::Ratio ? p.memory_ratio() : p.memory_bits_per_value();
}

std::vector<bool> quality_within_noise(const std::vector<QualityPoint>& points, QualityX x,
                                       QualityY y, const std::vector<bool>& frontier) {
  const ParetoAxes axes = quality_pareto_axes(x, y);
  const auto at_least_as_good = [&](double a, double b) {  // in x
    return axes.x == Better::Higher ? a >= b : a <= b;
  };
  std::vector<bool> out(points.size(), false);
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i < frontier.size() && frontier[i]) continue;
    const auto [lo_i, hi_i] = quality_y_interval(points[i], y);
    if (!std::isfinite(lo_i) || !std::isfinite(hi_i)) continue;
    for (std::size_t j = 0; j < points.size() && j < frontier.size(); ++j) {
      if (!frontier[j] || !at_least_as_good(quality_x(points[j], x), quality_x(points[i], x))) {
        continue;
      }
      const auto [lo_j, hi_j] = quality_y_interval(points[j], y);
      if (std::isfinite(lo_j) && std::isfinite(hi_j) && lo_i <= hi_j && lo_j <= hi_i) {
        out[i] = true;
        break;
      }
    }
  }
  return out;
}

std::pair<double, double> quality_y_interval(const QualityPoint& p, QualityY y) {
  constexpr double z = kZ95;
  switch (y) {
    case QualityY::PerplexityChange:
      return {100.0 * (p.perplexity_change - z * p.perplexity_change_se),
              100.0 * (p.perplexity_change + z * p.perplexity_change_se)};
    case QualityY::Agreement:
      return {100.0 * p.agreement_low, 100.0 * p.agreement_high};
    case QualityY::Kl:
      return {p.kl_mean - z * p.kl_mean_se, p.kl_mean + z * p.kl_mean_se};
  }
  return {NAN, NAN};
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
    const auto [low, high] = quality_y_interval(p, y);
    data.points.push_back({quality_x(p, x), quality_y(p, y), quality_short_name(p.method),
                           static_cast<bool>(on[i]), low, high});
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
  if (std::any_of(data.points.begin(), data.points.end(),
                  [](const QualityChartPoint& p) { return std::isfinite(p.y_low); })) {
    data.y_label += QObject::tr("; bars: 95% intervals");
  }
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

void QualityTableModel::set_points(std::vector<QualityPoint> points, std::vector<bool> frontier,
                                   std::vector<bool> within_noise) {
  beginResetModel();
  m_points = std::move(points);
  m_frontier = std::move(frontier);
  m_frontier.resize(m_points.size(), false);
  m_within_noise = std::move(within_noise);
  m_within_noise.resize(m_points.size(), false);
  endResetModel();
}

int QualityTableModel::row_of_run(std::int64_t id) const {
  for (std::size_t i = 0; i < m_points.size(); ++i) {
    if (m_points[i].run_id == id) return static_cast<int>(i);
  }
  return -1;
}

std::int64_t QualityTableModel::run_at(int row) const {
  if (row < 0 || row >= rowCount()) return 0;
  return m_points[static_cast<std::size_t>(row)].run_id;
}

int QualityTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_points.size());
}

int QualityTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kQualityColumnCount;
}

QString QualityTableModel::text(const QualityPoint& p, int row, int column) const {
  switch (column) {
    case kQualityRun:
      return QString::number(p.run_id);
    case kQualityConfiguration:
      return quality_short_name(p.method);
    case kQualityRatio:
      return format_ratio(p.memory_ratio());
    case kQualityBits:
      return format_bits_per_value(p.memory_bits_per_value());
    case kQualityKept:
      return format_percent(p.kept_fraction);
    case kQualityPerplexity:
      return QStringLiteral("%1 → %2").arg(QString::number(p.perplexity_exact, 'f', 3),
                                           QString::number(p.perplexity, 'f', 3));
    case kQualityPerplexityChange:  // ± one standard error, in percentage points
      return std::isfinite(p.perplexity_change_se)
                 ? tr("%1 ± %2").arg(format_signed_percent(p.perplexity_change),
                                     QString::number(100 * p.perplexity_change_se, 'f', 2))
                 : format_signed_percent(p.perplexity_change);
    case kQualityAgreement:  // with its 95% interval
      return std::isfinite(p.agreement_low)
                 ? tr("%1 (%2–%3)")
                       .arg(format_percent(p.next_token_agreement),
                            QString::number(100 * p.agreement_low, 'f', 1),
                            QString::number(100 * p.agreement_high, 'f', 1))
                 : format_percent(p.next_token_agreement);
    case kQualityKl:
      return std::isfinite(p.kl_mean_se)
                 ? tr("%1 ± %2").arg(format_metric(p.kl_mean), format_metric(p.kl_mean_se))
                 : format_metric(p.kl_mean);
    case kQualityPareto:
      if (m_frontier[static_cast<std::size_t>(row)]) return QStringLiteral("✓");
      // Beaten on the chart, but not beyond the 95% intervals: not a ranking.
      return m_within_noise[static_cast<std::size_t>(row)] ? tr("within noise") : QString();
    case kQualitySeconds:
      return format_seconds(p.seconds);
    default:
      return {};
  }
}

QVariant QualityTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kQualityColumnCount)
    return {};
  const QualityPoint& p = m_points[static_cast<std::size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return text(p, index.row(), index.column());
    case Qt::ToolTipRole:
      if (index.column() == kQualityConfiguration) return QString::fromStdString(p.method);
      return {};
    case Qt::TextAlignmentRole: {
      const Qt::Alignment h = index.column() == kQualityConfiguration ? Qt::AlignLeft
                              : index.column() == kQualityPareto      ? Qt::AlignHCenter
                                                                      : Qt::AlignRight;
      return QVariant::fromValue(h | Qt::AlignVCenter);
    }
    case Qt::UserRole:
      return static_cast<qlonglong>(p.run_id);
    default:
      return {};
  }
}

QVariant QualityTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= kQualityColumnCount) return {};
  // Same order as QualityColumn.
  static const std::array<const char*, kQualityColumnCount> kNames{
      "Run",          "Configuration",        "Ratio",     "Bits/value", "Kept", "Perplexity",
      "Δ perplexity", "Next-token agreement", "KL (nats)", "Pareto",     "Time"};
  using Tip = QString (*)();
  static const std::array<Tip, kQualityColumnCount> kTips{
      explain::quality_run,       explain::quality_configuration,
      explain::quality_ratio,     explain::quality_bits,
      explain::kept_fraction,     explain::perplexity,
      explain::perplexity_change, explain::next_token_agreement,
      explain::quality_kl,        explain::pareto,
      explain::quality_seconds};
  if (role == Qt::DisplayRole) return tr(kNames[static_cast<std::size_t>(section)]);
  if (role == Qt::ToolTipRole) return kTips[static_cast<std::size_t>(section)]();
  return {};
}

}  // namespace kvlab::gui
