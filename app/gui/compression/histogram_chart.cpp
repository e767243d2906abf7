#include "compression/histogram_chart.h"

#include <algorithm>

#include "common/chart_style.h"
#include "common/gui_format.h"

namespace kvlab::gui {

HistogramChart::HistogramChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 220);
  m_title = add_title(this, tr("Quantized codes"));
  xAxis->setLabel(tr("code"));
  yAxis->setLabel(tr("count"));
  xAxis->grid()->setVisible(false);
  auto y_ticker = QSharedPointer<QCPAxisTicker>::create();
  yAxis->setNumberFormat(QStringLiteral("gb"));  // 1.5·10⁴ rather than 15000.0
  yAxis->setTicker(y_ticker);

  m_bars = new QCPBars(xAxis, yAxis);
  m_bars->setObjectName(QStringLiteral("bars"));
  m_bars->setName(tr("count"));
  m_bars->setWidth(0.8);
  m_bars->setPen(QPen(palette::kCodes.darker(130)));
  m_bars->setBrush(palette::kCodes);
  style_plot(this);
  clear_data(tr("Run a method to see its codes"));
}

void HistogramChart::clear_data(const QString& message) {
  m_bars->data()->clear();
  m_title->setText(message);
  xAxis->setRange(-0.5, 3.5);
  yAxis->setRange(0, 1);
  replot();
}

void HistogramChart::set_histogram(const HistogramData& h, const QString& title) {
  QVector<double> x, y;
  double max_count = 0;
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    x.push_back(static_cast<double>(i));
    y.push_back(static_cast<double>(h.counts[i]));
    max_count = std::max(max_count, y.back());
  }
  m_bars->setData(x, y, true);
  // Wide codes (256 bins) often use a narrow band (KVComp's error-bounded steps): zoom to the
  // codes that occur, keeping a tick per code when few are shown.
  const int bins = static_cast<int>(h.counts.size());
  int first = 0, last = std::max(bins - 1, 0);
  if (bins > 16) {
    while (first < last && h.counts[first] == 0) ++first;
    while (last > first && h.counts[last] == 0) --last;
    first = std::max(0, first - 1);
    last = std::min(bins - 1, last + 1);
  }
  const int span = last - first + 1;
  auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
  ticker->setTickStep(span <= 16 ? 1.0 : span <= 40 ? 2.0 : span <= 80 ? 8.0 : 32.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
  xAxis->setTicker(ticker);
  xAxis->setRange(first - 0.7, last + 0.7);
  m_bars->setWidth(span <= 64 ? 0.8 : 1.0);
  yAxis->setRange(0, max_count > 0 ? max_count * 1.1 : 1.0);
  m_title->setText(title);
  replot();
}

}  // namespace kvlab::gui
