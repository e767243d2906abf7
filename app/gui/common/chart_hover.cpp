#include "common/chart_hover.h"

#include <qcustomplot.h>

#include <cmath>
#include <limits>

#include <QApplication>
#include <QEvent>
#include <QMouseEvent>

#include "common/gui_format.h"

namespace kvlab::gui {
namespace {

// The axis label without its unit part in parentheses is still the clearest name for a value.
QString axis_name(const QCPAxis* axis) {
  return axis ? axis->label().simplified() : QString();
}

// The key as the axis shows it: a text tick's label when the key sits on one, else the number.
QString key_text(const QCPAxis* axis, double key) {
  if (axis) {
    if (auto text = qSharedPointerDynamicCast<QCPAxisTickerText>(axis->ticker())) {
      const auto& ticks = text->ticks();
      const auto it = ticks.find(key);
      if (it != ticks.end() && !it.value().isEmpty()) return it.value().simplified();
    }
  }
  return format_metric(key);
}

QString describe(const QString& series, const QCPAxis* key_axis, const QCPAxis* value_axis,
                 double key, double value) {
  const QString key_name = axis_name(key_axis);
  const QString value_name = axis_name(value_axis);
  QString where = key_text(key_axis, key);
  if (!key_name.isEmpty() && where == format_metric(key))
    where = key_name + QLatin1Char(' ') + where;
  QString text = series.isEmpty() ? where : series + QStringLiteral(" \u2014 ") + where;
  text += QStringLiteral(": ") + format_metric(value);
  if (!value_name.isEmpty()) text += QStringLiteral(" (") + value_name + QLatin1Char(')');
  return text;
}

// Nearest point of a graph by pixel distance.
bool nearest_graph_point(QCPGraph* g, QPointF pixel, double* best, QString* text) {
  bool found = false;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
    if (std::isnan(it->value)) continue;
    const QPointF p = g->coordsToPixels(it->key, it->value);
    const double d = std::hypot(p.x() - pixel.x(), p.y() - pixel.y());
    if (d < *best) {
      *best = d;
      *text = describe(g->name(), g->keyAxis(), g->valueAxis(), it->key, it->value);
      found = true;
    }
  }
  return found;
}

// The bar whose rectangle holds the pixel, side-by-side groups and stacks included (QCPBars'
// own hit test: it knows the group offsets and the stacking).
bool bar_under(QCPBars* bars, QPointF pixel, double* best, QString* text) {
  QVariant details;
  const double d = bars->selectTest(pixel, false, &details);
  if (d < 0 || d > bars->parentPlot()->selectionTolerance()) return false;
  const QCPDataSelection hit = details.value<QCPDataSelection>();
  if (hit.isEmpty()) return false;
  const auto it = bars->data()->at(hit.dataRange().begin());
  *best = 0;
  *text = describe(bars->name(), bars->keyAxis(), bars->valueAxis(), it->key, it->value);
  return true;
}

bool cell_under(QCPColorMap* map, QPointF pixel, double* best, QString* text) {
  double key = 0, value = 0;
  map->pixelsToCoords(pixel, key, value);
  int ki = 0, vi = 0;
  QCPColorMapData* data = map->data();
  if (!data->keyRange().contains(key) || !data->valueRange().contains(value)) return false;
  data->coordToCell(key, value, &ki, &vi);
  if (ki < 0 || vi < 0 || ki >= data->keySize() || vi >= data->valueSize()) return false;
  double cell_key = 0, cell_value = 0;
  data->cellToCoord(ki, vi, &cell_key, &cell_value);
  const QString key_name = axis_name(map->keyAxis()), value_name = axis_name(map->valueAxis());
  *best = 0;
  *text = QStringLiteral("%1 %2, %3 %4: %5")
              .arg(key_name.isEmpty() ? QStringLiteral("x") : key_name)
              .arg(std::lround(cell_key))
              .arg(value_name.isEmpty() ? QStringLiteral("y") : value_name)
              .arg(std::lround(cell_value))
              .arg(format_metric(data->cell(ki, vi)));
  if (!map->name().isEmpty()) *text = map->name() + QStringLiteral(" \u2014 ") + *text;
  return true;
}

// One filter for the whole application, so charts made after the window report too: it turns on
// mouse tracking as a chart under the root is polished, then words the point under the mouse.
class HoverFilter : public QObject {
 public:
  HoverFilter(QWidget* root, std::function<void(const QString&)> show)
      : QObject(root), m_root(root), m_show(std::move(show)) {}

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    const auto type = event->type();
    if (type != QEvent::MouseMove && type != QEvent::Leave && type != QEvent::Polish) return false;
    auto* chart = qobject_cast<QCustomPlot*>(watched);
    if (!chart || chart->property(kOwnHoverProperty).toBool() || !m_root->isAncestorOf(chart)) {
      return false;
    }
    if (type == QEvent::Polish) {
      chart->setMouseTracking(true);
    } else if (type == QEvent::MouseMove) {
      update(describe_chart_point(chart, static_cast<QMouseEvent*>(event)->position()));
    } else {
      update(QString());
    }
    return false;
  }

 private:
  void update(const QString& text) {
    if (text == m_last) return;
    m_last = text;
    m_show(text);
  }

  QWidget* m_root;
  std::function<void(const QString&)> m_show;
  QString m_last;
};

}  // namespace

QString describe_chart_point(QCustomPlot* chart, QPointF pixel) {
  if (!chart) return {};
  double best = kHoverRadiusPx;
  QString text;
  for (int i = 0; i < chart->plottableCount(); ++i) {
    QCPAbstractPlottable* p = chart->plottable(i);
    if (!p->visible() || !p->keyAxis() || !p->valueAxis()) continue;
    if (!p->keyAxis()->axisRect()->rect().contains(pixel.toPoint())) continue;
    if (auto* g = qobject_cast<QCPGraph*>(p)) {
      nearest_graph_point(g, pixel, &best, &text);
    } else if (auto* bars = qobject_cast<QCPBars*>(p)) {
      if (bar_under(bars, pixel, &best, &text)) return text;
    } else if (auto* map = qobject_cast<QCPColorMap*>(p)) {
      if (cell_under(map, pixel, &best, &text)) return text;
    }
  }
  return text;
}

void install_hover_readout(QWidget* root, const std::function<void(const QString&)>& show) {
  for (QCustomPlot* chart : root->findChildren<QCustomPlot*>()) {  // polished already
    if (!chart->property(kOwnHoverProperty).toBool()) chart->setMouseTracking(true);
  }
  qApp->installEventFilter(new HoverFilter(root, show));
}

}  // namespace kvlab::gui
