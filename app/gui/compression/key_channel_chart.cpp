#include "compression/key_channel_chart.h"

#include <algorithm>

#include "common/chart_style.h"

namespace kvlab::gui {

KeyChannelChart::KeyChannelChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 220);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Key channel magnitudes"));
  xAxis->setLabel(tr("channel within the head"));
  yAxis->setLabel(tr("max |k| over tokens"));

  m_before = addGraph(xAxis, yAxis);
  m_before->setObjectName(QStringLiteral("before_graph"));
  m_before->setLineStyle(QCPGraph::lsStepCenter);
  m_before->setPen(QPen(palette::kKey, 1.2));
  QColor fill = palette::kKey;
  fill.setAlpha(70);
  m_before->setBrush(fill);
  m_before->addToLegend(legend);
  m_after = addGraph(xAxis, yAxis);
  m_after->setObjectName(QStringLiteral("after_graph"));
  m_after->setLineStyle(QCPGraph::lsLine);
  m_after->setPen(QPen(palette::kRatio, 2.0));
  m_after->addToLegend(legend);
  add_legend_row(this, legend, 1);

  style_plot(this);
  clear_data(tr("Key channels: run to see them"));
}

QString KeyChannelChart::title() const {
  return m_title->text();
}

void KeyChannelChart::clear_data(const QString& why) {
  m_before->data()->clear();
  m_after->data()->clear();
  m_before->setName(tr("unrotated"));
  m_after->setName(tr("rotated"));
  m_title->setText(why);
  xAxis->setRange(0, 1);
  yAxis->setRange(0, 1);
  replot();
}

void KeyChannelChart::set_data(const KeyChannelSeries& series) {
  const QVector<double> x = to_qvector(series.channel);
  m_before->setData(x, to_qvector(series.before), true);
  m_after->setData(x, to_qvector(series.after), true);
  m_before->setName(series.before_name);
  m_after->setName(series.after_name);
  m_title->setText(series.title);
  double top = 0;
  for (const auto* v : {&series.before, &series.after}) {
    if (!v->empty()) top = std::max(top, *std::max_element(v->begin(), v->end()));
  }
  const double last = series.channel.empty() ? 1.0 : series.channel.back();
  xAxis->setRange(-0.5, last + 0.5);
  yAxis->setRange(0, top > 0 ? top * 1.08 : 1.0);
  replot();
}

}  // namespace kvlab::gui
