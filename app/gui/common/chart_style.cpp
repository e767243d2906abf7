#include "common/chart_style.h"

#include <array>

#include <qcustomplot.h>

#include <QAbstractScrollArea>
#include <QCoreApplication>
#include <QWheelEvent>

namespace kvlab::gui {

QColor palette::series(std::size_t i) {
  static const std::array<QColor, kSeriesColors> colors{
      QColor(52, 101, 164), QColor(230, 140, 40), QColor(60, 150, 90),  QColor(200, 55, 55),
      QColor(120, 80, 170), QColor(140, 90, 60),  QColor(210, 90, 170), QColor(150, 160, 40),
      QColor(40, 170, 190), QColor(90, 130, 200), QColor(180, 120, 40)};
  return colors[i % colors.size()];
}

namespace {

void style_axis(QCPAxis* axis) {
  QFont label_font = axis->labelFont();
  label_font.setPointSize(10);
  axis->setLabelFont(label_font);
  QFont tick_font = axis->tickLabelFont();
  tick_font.setPointSize(9);
  axis->setTickLabelFont(tick_font);
  axis->grid()->setPen(QPen(QColor(225, 225, 225), 1, Qt::SolidLine));
  axis->grid()->setSubGridVisible(false);
  axis->setBasePen(QPen(QColor(120, 120, 120)));
  axis->setTickPen(QPen(QColor(120, 120, 120)));
  axis->setSubTickPen(QPen(QColor(160, 160, 160)));
}

}  // namespace

void style_axis_rect(QCPAxisRect* rect) {
  for (QCPAxis* axis : rect->axes()) style_axis(axis);
}

void style_plot(QCustomPlot* plot) {
  plot->setBackground(Qt::white);
  plot->setAntialiasedElements(QCP::aeAll);
  for (QCPAxisRect* rect : plot->axisRects()) style_axis_rect(rect);
}

namespace {

// The wheel without Ctrl goes to the scroll area around the chart, as if the chart were not there.
class WheelToPage : public QObject {
 public:
  using QObject::QObject;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() != QEvent::Wheel) return false;
    auto* wheel = static_cast<QWheelEvent*>(event);
    if (wheel->modifiers() & Qt::ControlModifier) return false;  // the chart zooms
    auto* chart = static_cast<QWidget*>(watched);
    QWidget* up = chart->parentWidget();
    while (up && !qobject_cast<QAbstractScrollArea*>(up)) up = up->parentWidget();
    if (auto* area = qobject_cast<QAbstractScrollArea*>(up)) {
      QWidget* viewport = area->viewport();
      const QPointF at = viewport->mapFromGlobal(wheel->globalPosition());
      QWheelEvent copy(at, wheel->globalPosition(), wheel->pixelDelta(), wheel->angleDelta(),
                       wheel->buttons(), wheel->modifiers(), wheel->phase(), wheel->inverted());
      QCoreApplication::sendEvent(viewport, &copy);
    }
    return true;  // not zoomed
  }
};

}  // namespace

void pan_and_ctrl_wheel_zoom(QCustomPlot* plot) {
  plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot->installEventFilter(new WheelToPage(plot));
}

QCPTextElement* add_title(QCustomPlot* plot, const QString& text) {
  plot->plotLayout()->insertRow(0);
  QFont font = plot->font();
  font.setPointSize(11);
  font.setBold(true);
  auto* title = new QCPTextElement(plot, text, font);
  plot->plotLayout()->addElement(0, 0, title);
  return title;
}

void add_legend_row(QCustomPlot* plot, QCPLegend* legend, int row) {
  if (legend->layout()) legend->layout()->take(legend);
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  legend->setBorderPen(Qt::NoPen);
  legend->setBrush(Qt::NoBrush);
  legend->setFont(QFont(plot->font().family(), 9));
  legend->setIconSize(18, 10);
  legend->setColumnSpacing(14);
  legend->setMargins(QMargins(2, 2, 2, 4));
  legend->setVisible(true);

  // Empty elements either side with equal stretch centre the legend in its row.
  auto* line = new QCPLayoutGrid;
  plot->plotLayout()->insertRow(row);
  plot->plotLayout()->addElement(row, 0, line);
  plot->plotLayout()->setRowStretchFactor(row, 0.001);
  line->addElement(0, 0, new QCPLayoutElement(plot));
  line->addElement(0, 1, legend);
  line->addElement(0, 2, new QCPLayoutElement(plot));
  line->setColumnStretchFactor(0, 1);
  line->setColumnStretchFactor(1, 0.001);
  line->setColumnStretchFactor(2, 1);
  legend->setLayer(QStringLiteral("legend"));
}

VerticalMarker add_vertical_marker(QCustomPlot* plot, const QString& text, const QColor& color,
                                   Qt::Alignment label_alignment) {
  VerticalMarker m;
  m.line = new QCPItemStraightLine(plot);
  m.line->setPen(QPen(color, 1.5, Qt::DashLine));
  m.line->setClipToAxisRect(true);
  m.label = new QCPItemText(plot);
  m.label->setText(text);
  m.label->setColor(color);
  m.label->setFont(QFont(plot->font().family(), 9, QFont::Bold));
  m.label->setBrush(QColor(255, 255, 255, 210));
  m.label->setPositionAlignment(label_alignment);
  m.label->position->setTypeX(QCPItemPosition::ptPlotCoords);
  m.label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
  m.label->setClipToAxisRect(true);
  m.line->setVisible(false);
  m.label->setVisible(false);
  return m;
}

void place_vertical_marker(const VerticalMarker& marker, double x, double label_x) {
  marker.line->point1->setCoords(x, 0);
  marker.line->point2->setCoords(x, 1);
  marker.label->position->setCoords(label_x, 0.02);
  marker.line->setVisible(true);
  marker.label->setVisible(true);
}

ByteUnit byte_unit_for(double max_bytes) {
  static const std::array<const char*, 4> kNames{"B", "KiB", "MiB", "GiB"};
  ByteUnit unit{1.0, QString::fromLatin1(kNames[0])};
  for (std::size_t i = 1; i < kNames.size() && max_bytes >= 1024.0 * unit.bytes; ++i) {
    unit = {unit.bytes * 1024.0, QString::fromLatin1(kNames[i])};
  }
  return unit;
}

}  // namespace kvlab::gui
