#include "quality/quality_chart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <optional>

#include "common/chart_hover.h"
#include "common/chart_style.h"

namespace kvlab::gui {

namespace {

constexpr double kHitRadiusPx = 9;
constexpr int kLabelGapPx = 8;

// The range of `values` with room around them (and `extra_high` more above the highest).
QCPRange padded_range(const std::vector<double>& values, double extra_high) {
  if (values.empty()) return {0, 1};
  const auto [lo_it, hi_it] = std::minmax_element(values.begin(), values.end());
  double lo = *lo_it, hi = *hi_it;
  double span = hi - lo;
  if (span <= 0) span = std::max(std::abs(hi) * 0.2, 0.01);
  return {lo - 0.08 * span, hi + (0.08 + extra_high) * span};
}

// The same on a logarithmic axis: room as factors. Every value must be positive.
QCPRange padded_log_range(const std::vector<double>& values) {
  if (values.empty()) return {0.1, 10};
  const auto [lo_it, hi_it] = std::minmax_element(values.begin(), values.end());
  const double factor = std::max(1.3, std::pow(*hi_it / *lo_it, 0.08));
  return {*lo_it / factor, *hi_it * factor};
}

// Where a label may go around its point: pixel offset and which corner of the text sits there.
struct Placement {
  QPointF offset;
  Qt::Alignment align;
};

const std::array<Placement, 8> kPlacements{{
    {{kLabelGapPx, 0}, Qt::AlignLeft | Qt::AlignVCenter},
    {{0, -kLabelGapPx}, Qt::AlignHCenter | Qt::AlignBottom},
    {{0, kLabelGapPx}, Qt::AlignHCenter | Qt::AlignTop},
    {{-kLabelGapPx, 0}, Qt::AlignRight | Qt::AlignVCenter},
    {{kLabelGapPx - 2, -kLabelGapPx}, Qt::AlignLeft | Qt::AlignBottom},
    {{kLabelGapPx - 2, kLabelGapPx}, Qt::AlignLeft | Qt::AlignTop},
    {{-kLabelGapPx + 2, -kLabelGapPx}, Qt::AlignRight | Qt::AlignBottom},
    {{-kLabelGapPx + 2, kLabelGapPx}, Qt::AlignRight | Qt::AlignTop},
}};

QRectF text_rect(const QPointF& anchor, const QSizeF& size, Qt::Alignment align) {
  double left = anchor.x(), top = anchor.y();
  if (align & Qt::AlignRight) left -= size.width();
  if (align & Qt::AlignHCenter) left -= size.width() / 2;
  if (align & Qt::AlignBottom) top -= size.height();
  if (align & Qt::AlignVCenter) top -= size.height() / 2;
  return {left, top, size.width(), size.height()};
}

}  // namespace

QualityChart::QualityChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(420, 260);
  setAutoAddPlottableToLegend(false);
  setMouseTracking(true);
  setProperty(kOwnHoverProperty, true);  // point_hovered: the Quality page words its points
  m_title = add_title(this, tr("Quality against compression"));

  m_steps = new QCPCurve(xAxis, yAxis);  // first, so the points are drawn over it
  m_steps->setObjectName(QStringLiteral("step_line"));
  m_steps->setPen(QPen(palette::kRatio, 2));
  m_steps->setName(tr("Pareto frontier"));
  m_dominated = addGraph();
  m_dominated->setObjectName(QStringLiteral("dominated_graph"));
  m_dominated->setLineStyle(QCPGraph::lsNone);
  m_dominated->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(palette::kKey, 1.6), Qt::white, 9));
  m_dominated->setName(tr("dominated"));
  m_frontier = addGraph();
  m_frontier->setObjectName(QStringLiteral("frontier_graph"));
  m_frontier->setLineStyle(QCPGraph::lsNone);
  m_frontier->setScatterStyle(QCPScatterStyle(
      QCPScatterStyle::ssDisc, QPen(palette::kRatio.darker(130), 1.2), palette::kRatio, 10));
  m_frontier->setName(tr("Pareto-optimal"));
  m_highlight = addGraph();
  m_highlight->setLineStyle(QCPGraph::lsNone);
  m_highlight->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(QColor(30, 30, 30), 1.6), Qt::NoBrush, 18));
  m_steps->addToLegend(legend);
  m_frontier->addToLegend(legend);
  m_dominated->addToLegend(legend);
  add_legend_row(this, legend, plotLayout()->rowCount());

  m_message = new QCPItemText(this);
  m_message->position->setType(QCPItemPosition::ptAxisRectRatio);
  m_message->position->setCoords(0.5, 0.5);
  m_message->setColor(QColor(110, 110, 110));
  m_linear_ticker = yAxis->ticker();
  m_log_ticker.reset(new QCPAxisTickerLog);
  pan_and_ctrl_wheel_zoom(this);
  style_plot(this);
  connect(this, &QCustomPlot::afterLayout, this, &QualityChart::place_labels);
  clear_data(tr("No quality runs yet: choose a model and configurations, then Run"));
}

void QualityChart::clear_data(const QString& message) {
  m_data = {};
  m_dominated->data()->clear();
  m_frontier->data()->clear();
  m_highlight->data()->clear();
  m_steps->data()->clear();
  for (QCPItemText* label : m_labels) removeItem(label);
  m_labels.clear();
  for (QCPItemLine* bar : m_error_bars) removeItem(bar);
  m_error_bars.clear();
  m_message->setText(message);
  m_message->setVisible(true);
  m_title->setText(tr("Quality against compression"));
  yAxis->setScaleType(QCPAxis::stLinear);
  yAxis->setTicker(m_linear_ticker);
  xAxis->setRange(0, 1);
  yAxis->setRange(0, 1);
  replot();
}

void QualityChart::set_data(const QualityChartData& data) {
  clear_data(QString());
  m_data = data;
  m_message->setVisible(false);
  m_title->setText(data.title);
  yAxis->setScaleType(data.log_y ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  yAxis->setTicker(data.log_y ? QSharedPointer<QCPAxisTicker>(m_log_ticker) : m_linear_ticker);
  xAxis->setLabel(data.x_label);
  yAxis->setLabel(data.y_label);
  std::vector<double> xs, ys;
  QFont font = this->font();
  font.setPointSize(9);
  for (const QualityChartPoint& p : data.points) {
    (p.frontier ? m_frontier : m_dominated)->addData(p.x, p.y);
    xs.push_back(p.x);
    ys.push_back(p.y);
    auto* label = new QCPItemText(this);
    label->setText(p.label);
    label->setFont(font);
    label->setColor(p.frontier ? palette::kRatio.darker(160) : QColor(60, 60, 60));
    label->position->setCoords(p.x, p.y);
    m_labels.push_back(label);
    if (std::isfinite(p.y_low) && std::isfinite(p.y_high)) {
      // A log axis has no zero: an interval reaching it is drawn down to a tenth of the point.
      const double low = data.log_y && p.y_low <= 0 ? p.y / 10 : p.y_low;
      auto* bar = new QCPItemLine(this);
      bar->start->setCoords(p.x, low);
      bar->end->setCoords(p.x, p.y_high);
      bar->setPen(QPen(QColor(90, 90, 90), 1.2));
      bar->setHead(QCPLineEnding(QCPLineEnding::esBar, 7));
      bar->setTail(QCPLineEnding(QCPLineEnding::esBar, 7));
      m_error_bars.push_back(bar);
    }
  }
  QVector<double> sx, sy;
  for (const ParetoPoint& p : data.staircase) {
    sx << p.x;
    sy << p.y;
  }
  m_steps->setData(sx, sy);
  if (data.points.empty()) m_message->setVisible(true);
  reset_zoom();
}

void QualityChart::reset_zoom() {
  std::vector<double> xs, ys;
  for (const QualityChartPoint& p : m_data.points) {
    xs.push_back(p.x);
    ys.push_back(p.y);
  }
  xAxis->setRange(padded_range(xs, 0.12));  // room on the right for the labels
  yAxis->setRange(m_data.log_y ? padded_log_range(ys) : padded_range(ys, 0.05));
  replot();
}

void QualityChart::set_highlight(int index) {
  m_highlight->data()->clear();
  if (index >= 0 && index < point_count()) {
    const QualityChartPoint& p = m_data.points[static_cast<std::size_t>(index)];
    m_highlight->addData(p.x, p.y);
  }
  replot(QCustomPlot::rpQueuedReplot);
}

QRectF QualityChart::label_rect(int index) const {
  if (index < 0 || index >= static_cast<int>(m_labels.size())) return {};
  const QCPItemText* label = m_labels[static_cast<std::size_t>(index)];
  if (!label->visible()) return {};
  const QSizeF size = QFontMetricsF(label->font()).boundingRect(label->text()).size();
  return text_rect(label->position->pixelPosition(), size, label->positionAlignment());
}

QString QualityChart::label_text(int index) const {
  if (index < 0 || index >= static_cast<int>(m_labels.size())) return {};
  return m_labels[static_cast<std::size_t>(index)]->text();
}

QPointF QualityChart::point_pixel(int index) const {
  const QualityChartPoint& p = m_data.points[static_cast<std::size_t>(index)];
  return {xAxis->coordToPixel(p.x), yAxis->coordToPixel(p.y)};
}

int QualityChart::point_at(const QPointF& pixel) const {
  int best = -1;
  double best_distance = kHitRadiusPx;
  for (int i = 0; i < point_count(); ++i) {
    const double d = QLineF(point_pixel(i), pixel).length();
    if (d <= best_distance) {
      best = i;
      best_distance = d;
    }
  }
  return best;
}

// Each label takes the first place around its point that covers no other label or point and
// stays inside the axis rect, trying a ring close to the point, then farther ones; points are
// labelled left to right. A label with no free place anywhere is hidden rather than drawn over
// another (the point still names itself under the mouse, and the table lists it).
void QualityChart::place_labels() {
  if (m_labels.empty()) return;
  constexpr double kRings[] = {1.0, 2.2, 3.4};
  const QRectF area = axisRect()->rect();
  std::vector<QRectF> taken;
  for (int i = 0; i < point_count(); ++i) {
    const QPointF c = point_pixel(i);
    taken.emplace_back(c.x() - 5, c.y() - 5, 10, 10);
  }
  std::vector<int> order(m_labels.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [this](int a, int b) {
    return m_data.points[static_cast<std::size_t>(a)].x <
           m_data.points[static_cast<std::size_t>(b)].x;
  });
  for (int i : order) {
    QCPItemText* label = m_labels[static_cast<std::size_t>(i)];
    const QSizeF size = QFontMetricsF(label->font()).boundingRect(label->text()).size();
    const QPointF c = point_pixel(i);
    std::optional<std::pair<QPointF, Qt::Alignment>> chosen;
    for (const double ring : kRings) {
      for (const Placement& p : kPlacements) {
        const QPointF anchor = c + p.offset * ring;
        const QRectF r = text_rect(anchor, size, p.align);
        if (!area.contains(r)) continue;
        if (std::any_of(taken.begin(), taken.end(),
                        [&](const QRectF& t) { return t.intersects(r); })) {
          continue;
        }
        chosen.emplace(anchor, p.align);
        break;
      }
      if (chosen) break;
    }
    label->setVisible(chosen.has_value());
    if (!chosen) continue;
    label->setPositionAlignment(chosen->second);
    label->position->setPixelPosition(chosen->first);
    taken.push_back(text_rect(chosen->first, size, chosen->second));
  }
}

void QualityChart::mouseMoveEvent(QMouseEvent* event) {
  QCustomPlot::mouseMoveEvent(event);
  const int index = point_at(event->position());
  setCursor(index >= 0 ? Qt::PointingHandCursor : Qt::ArrowCursor);
  if (index != m_hovered) {
    m_hovered = index;
    emit point_hovered(index);
  }
}

void QualityChart::leaveEvent(QEvent* event) {
  QCustomPlot::leaveEvent(event);
  if (m_hovered != -1) {
    m_hovered = -1;
    emit point_hovered(-1);
  }
}

}  // namespace kvlab::gui
