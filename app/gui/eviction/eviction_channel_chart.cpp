#include "eviction/eviction_channel_chart.h"

#include "common/chart_style.h"

namespace kvlab::gui {

namespace {

const QColor kPruned{240, 190, 180};
const QColor kKept{60, 150, 90};

QCPColorGradient kept_gradient() {
  QCPColorGradient g;
  g.clearColorStops();
  g.setColorStopAt(0, kPruned);
  g.setColorStopAt(1, kKept);
  g.setLevelCount(2);
  return g;
}

QCPBars* swatch(QCustomPlot* plot, const QString& name, const QColor& color) {
  auto* bars = new QCPBars(plot->xAxis, plot->yAxis);
  bars->setName(name);
  bars->setBrush(color);
  bars->setPen(QPen(color.darker(130)));
  bars->addToLegend(plot->legend);
  return bars;
}

}  // namespace

EvictionChannelChart::EvictionChannelChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 240);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Key channels kept"));
  xAxis->setLabel(tr("key channel within the head"));
  yAxis->setLabel(tr("layer (one row per KV head)"));
  yAxis->setRangeReversed(true);  // layer 0 on top
  m_map = new QCPColorMap(xAxis, yAxis);
  m_map->setObjectName(QStringLiteral("color_map"));
  m_map->setGradient(kept_gradient());
  m_map->setDataRange(QCPRange(0, 1));
  m_map->setInterpolate(false);
  m_map->setTightBoundary(true);
  swatch(this, tr("kept"), kKept);
  swatch(this, tr("pruned"), kPruned);
  add_legend_row(this, legend, plotLayout()->rowCount());
  pan_and_ctrl_wheel_zoom(this);
  style_plot(this);
  clear_data(tr("Run think to see which key channels it keeps"));
}

void EvictionChannelChart::clear_data(const QString& message) {
  m_data = {};
  m_map->data()->clear();
  m_map->setVisible(false);
  m_title->setText(message);
  xAxis->setRange(0, 1);
  yAxis->setRange(0, 1);
  replot();
}

void EvictionChannelChart::set_data(const EvictionChannelData& data) {
  if (data.empty()) {
    clear_data(tr("This run pruned no key channels: think does"));
    return;
  }
  m_data = data;
  m_map->data()->setSize(data.dim, data.rows);
  m_map->data()->setRange(QCPRange(0, data.dim - 1), QCPRange(0, data.rows - 1));
  for (int r = 0; r < data.rows; ++r) {
    for (int c = 0; c < data.dim; ++c) m_map->data()->setCell(c, r, data.at(r, c) ? 1.0 : 0.0);
  }
  m_map->setVisible(true);
  // One labelled tick per layer, at its first head's row.
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  const int every = data.rows > 48 ? (data.rows + 23) / 24 : 1;  // at most ~24 labels
  int labelled = 0;
  for (int r = 0; r < data.rows; ++r) {
    if (data.row_head[static_cast<std::size_t>(r)] != 0) continue;
    if (labelled++ % every == 0) ticker->addTick(r, QString::number(data.row_layer[r]));
  }
  yAxis->setTicker(ticker);
  xAxis->setRange(-0.5, data.dim - 0.5);
  yAxis->setRange(-0.5, data.rows - 0.5);
  m_title->setText(data.title);
  replot();
}

}  // namespace kvlab::gui
