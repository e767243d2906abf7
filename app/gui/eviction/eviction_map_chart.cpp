#include "eviction/eviction_map_chart.h"

#include "common/chart_style.h"

namespace kvlab::gui {

namespace {

// A gradient of exactly kCellStateCount levels, so state i (data range 0..4) gets colour i.
QCPColorGradient state_gradient() {
  QCPColorGradient g;
  g.clearColorStops();
  const auto& colors = cell_state_colors();
  for (int i = 0; i < kCellStateCount; ++i) {
    g.setColorStopAt(static_cast<double>(i) / (kCellStateCount - 1), colors[i]);
  }
  g.setLevelCount(kCellStateCount);
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  return g;
}

}  // namespace

const std::array<QColor, kCellStateCount>& cell_state_colors() {
  static const std::array<QColor, kCellStateCount> colors{
      QColor(245, 245, 245),  // absent: not generated yet
      QColor(60, 150, 90),    // kept
      QColor(215, 90, 70),    // evicted
      QColor(80, 120, 200),   // merged into a neighbour
      QColor(30, 30, 30),     // sink (never evicted)
  };
  return colors;
}

const std::array<QString, kCellStateCount>& cell_state_names() {
  static const std::array<QString, kCellStateCount> names{
      QObject::tr("not yet arrived"), QObject::tr("kept"), QObject::tr("evicted"),
      QObject::tr("merged"), QObject::tr("sink")};
  return names;
}

EvictionMapChart::EvictionMapChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(320, 240);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Eviction map"));
  xAxis->setLabel(tr("token position"));
  yAxis->setLabel(tr("decode step"));
  yAxis->setRangeReversed(true);  // step 0 on top: time runs down the page

  m_map = new QCPColorMap(xAxis, yAxis);
  m_map->setObjectName(QStringLiteral("color_map"));
  m_map->setGradient(state_gradient());
  m_map->setDataRange(QCPRange(0, kCellStateCount - 1));
  m_map->setInterpolate(false);
  m_map->setTightBoundary(true);

  // Legend: one empty bar plottable per state, drawn as a filled swatch.
  for (int i = 1; i < kCellStateCount; ++i) {
    auto* swatch = new QCPBars(xAxis, yAxis);
    swatch->setName(cell_state_names()[i]);
    swatch->setBrush(cell_state_colors()[i]);
    swatch->setPen(QPen(cell_state_colors()[i].darker(130)));
    swatch->addToLegend(legend);
  }
  auto* absent = new QCPBars(xAxis, yAxis);
  absent->setName(cell_state_names()[0]);
  absent->setBrush(cell_state_colors()[0]);
  absent->setPen(QPen(QColor(170, 170, 170)));
  absent->addToLegend(legend);
  add_legend_row(this, legend, plotLayout()->rowCount());
  legend->setWrap(3);  // two short lines fit a map half the page wide
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);  // re-lays the items out
  for (int i = 0; i < legend->itemCount(); ++i) {  // room below the text for the descenders
    if (QCPAbstractLegendItem* item = legend->item(i)) item->setMargins(QMargins(8, 2, 8, 6));
  }

  m_needle_marker =
      add_vertical_marker(this, tr("needle"), palette::kNeedle, Qt::AlignLeft | Qt::AlignTop);
  m_needle = m_needle_marker.line;
  m_needle->setObjectName(QStringLiteral("needle_line"));
  m_needle_label = m_needle_marker.label;

  pan_and_ctrl_wheel_zoom(this);
  axisRect()->setRangeDrag(Qt::Horizontal | Qt::Vertical);
  axisRect()->setRangeZoom(Qt::Horizontal | Qt::Vertical);
  style_plot(this);
  clear_data(tr("Run a policy to see which tokens it keeps"));
}

void EvictionMapChart::clear_data(const QString& message) {
  m_data = {};
  m_map->data()->clear();
  m_map->setVisible(false);
  m_needle->setVisible(false);
  m_needle_label->setVisible(false);
  m_title->setText(message);
  xAxis->setRange(0, 1);
  yAxis->setRange(0, 1);
  replot();
}

void EvictionMapChart::set_data(const EvictionMapData& data) {
  if (data.steps <= 0 || data.positions <= 0) {
    clear_data(tr("No eviction map for this layer and head"));
    return;
  }
  m_data = data;
  // Cell centres at integer positions and steps.
  m_map->data()->setSize(data.positions, data.steps);
  m_map->data()->setRange(QCPRange(0, data.positions - 1), QCPRange(0, data.steps - 1));
  for (int s = 0; s < data.steps; ++s) {
    for (int p = 0; p < data.positions; ++p) m_map->data()->setCell(p, s, data.at(s, p));
  }
  m_map->setDataRange(QCPRange(0, kCellStateCount - 1));
  m_map->setVisible(true);
  const bool needle = data.needle && *data.needle >= 0 && *data.needle < data.positions;
  m_needle->setVisible(needle);
  m_needle_label->setVisible(needle);
  if (needle) place_vertical_marker(m_needle_marker, *data.needle, *data.needle + 0.5);
  m_title->setText(data.title);
  reset_zoom();
}

void EvictionMapChart::reset_zoom() {
  if (m_data.positions > 0) {
    xAxis->setRange(-0.5, m_data.positions - 0.5);
    yAxis->setRange(-0.5, m_data.steps - 0.5);
  }
  replot();
}

}  // namespace kvlab::gui
