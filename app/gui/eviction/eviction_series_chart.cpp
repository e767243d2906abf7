#include "eviction/eviction_series_chart.h"

#include <algorithm>

#include "common/chart_style.h"

namespace kvlab::gui {

EvictionSeriesChart::EvictionSeriesChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 200);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Attention kept over decode steps"));
  xAxis->setLabel(tr("decode step"));
  yAxis->setLabel(tr("attention mass retained"));
  yAxis2->setVisible(true);
  yAxis2->setLabel(tr("attn-output rel. error"));
  yAxis->setLabelColor(palette::kRatio.darker(120));
  yAxis2->setLabelColor(palette::kError);

  for (int i = 0; i < kMaxSeries; ++i) {
    const Qt::PenStyle style = i == 0 ? Qt::SolidLine : Qt::DashLine;
    m_mass[i] = addGraph(xAxis, yAxis);
    m_mass[i]->setPen(QPen(palette::kRatio, 2, style));
    m_error[i] = addGraph(xAxis, yAxis2);
    m_error[i]->setPen(QPen(palette::kError, 2, style));
    const QString prefix = i == 0 ? QString() : QStringLiteral("compared_");
    m_mass[i]->setObjectName(prefix + QStringLiteral("mass_graph"));
    m_error[i]->setObjectName(prefix + QStringLiteral("error_graph"));
  }
  m_needle_marker = add_vertical_marker(this, tr("needle query"), palette::kNeedle,
                                        Qt::AlignRight | Qt::AlignTop);
  m_needle = m_needle_marker.line;
  m_needle->setObjectName(QStringLiteral("needle_marker"));
  m_needle_label = m_needle_marker.label;
  m_needle_label->setObjectName(QStringLiteral("needle_marker_label"));
  add_legend_row(this, legend, plotLayout()->rowCount());
  legend->setWrap(2);  // one line per policy: its mass, then its error
  style_plot(this);
  clear_data();
}

void EvictionSeriesChart::clear_data() {
  m_data.clear();
  for (int i = 0; i < kMaxSeries; ++i) {
    m_mass[i]->data()->clear();
    m_error[i]->data()->clear();
    m_mass[i]->removeFromLegend(legend);
    m_error[i]->removeFromLegend(legend);
  }
  m_title->setText(tr("Attention kept over decode steps"));
  m_needle->setVisible(false);
  m_needle_label->setVisible(false);
  xAxis->setRange(0, 1);
  yAxis->setRange(0, 1.05);
  yAxis2->setRange(0, 1);
  replot();
}

void EvictionSeriesChart::set_data(const std::vector<EvictionSeriesData>& series,
                                   const QString& scope) {
  clear_data();
  m_data.assign(series.begin(), series.begin() + std::min<std::size_t>(series.size(), kMaxSeries));
  double max_step = 1, max_error = 0;
  for (std::size_t i = 0; i < m_data.size(); ++i) {
    const EvictionSeriesData& d = m_data[i];
    const QVector<double> x(d.step.begin(), d.step.end());
    m_mass[i]->setData(x, QVector<double>(d.mass_retained.begin(), d.mass_retained.end()), true);
    m_error[i]->setData(x, QVector<double>(d.rel_error.begin(), d.rel_error.end()), true);
    m_mass[i]->setName(tr("%1: mass retained").arg(d.label));
    m_error[i]->setName(tr("%1: rel. error").arg(d.label));
    m_mass[i]->addToLegend(legend);
    m_error[i]->addToLegend(legend);
    if (!d.step.empty()) max_step = std::max(max_step, d.step.back());
    for (double e : d.rel_error) max_error = std::max(max_error, e);
  }
  if (!m_data.empty() && m_data.front().last_step_is_needle && !m_data.front().step.empty()) {
    const double last = m_data.front().step.back();
    place_vertical_marker(m_needle_marker, last, last - 0.2);
  }
  xAxis->setRange(0, max_step);
  yAxis2->setRange(0, max_error > 0 ? max_error * 1.1 : 1.0);
  m_title->setText(tr("Attention kept over decode steps (%1)").arg(scope));
  replot();
}

}  // namespace kvlab::gui
