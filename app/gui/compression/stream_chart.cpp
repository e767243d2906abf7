#include "compression/stream_chart.h"

#include <algorithm>

namespace kvlab::gui {

namespace {

const QColor kBuffer{230, 140, 40};  // fp16 buffer: orange, like values elsewhere

QVector<double> scaled(const std::vector<double>& v, double unit) {
  QVector<double> out;
  out.reserve(static_cast<int>(v.size()));
  for (double x : v) out.push_back(x / unit);
  return out;
}

}  // namespace

StreamChart::StreamChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 220);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Memory over decode steps"));
  // The run's settings on their own line, so the title stays short enough to fit.
  plotLayout()->insertRow(1);
  m_subtitle = new QCPTextElement(this, QString(), QFont(font().family(), 9));
  m_subtitle->setTextColor(QColor(80, 80, 80));
  plotLayout()->addElement(1, 0, m_subtitle);
  xAxis->setLabel(tr("decode step (tokens after the prefill)"));
  yAxis->setLabel(tr("bytes"));

  // The total (compressed + buffer) is drawn first and filled in the buffer colour; the
  // compressed part is drawn over it, so the visible orange band is the buffer alone.
  m_total = addGraph(xAxis, yAxis);
  m_total->setObjectName(QStringLiteral("total_graph"));
  m_total->setName(tr("fp16 buffer"));
  m_total->setPen(QPen(kBuffer.darker(120), 1.5));
  m_total->setBrush(QColor(kBuffer.red(), kBuffer.green(), kBuffer.blue(), 150));
  m_total->addToLegend(legend);
  m_compressed = addGraph(xAxis, yAxis);
  m_compressed->setObjectName(QStringLiteral("compressed_graph"));
  m_compressed->setName(tr("compressed (payload + metadata + codebooks + params)"));
  m_compressed->setPen(QPen(palette::kHuffman.darker(130), 1.5));
  m_compressed->setBrush(palette::kHuffman);
  m_compressed->addToLegend(legend);
  m_fp16 = addGraph(xAxis, yAxis);
  m_fp16->setObjectName(QStringLiteral("fp16_graph"));
  m_fp16->setName(tr("fp16 cache"));
  QPen dashed(palette::kEntropy, 1.5);
  dashed.setStyle(Qt::DashLine);
  m_fp16->setPen(dashed);
  m_fp16->addToLegend(legend);
  add_legend_row(this, legend, 2);

  style_plot(this);
  clear_data();
}

void StreamChart::clear_data() {
  m_data = {};
  m_unit = {};
  for (QCPGraph* g : {m_total, m_compressed, m_fp16}) g->data()->clear();
  m_title->setText(tr("Memory over decode steps"));
  m_subtitle->setText(tr("run kvcomp with huffman, rans or bitpack to see the streaming cache"));
  yAxis->setLabel(tr("bytes"));
  xAxis->setRange(0, 1);
  yAxis->setRange(0, 1);
  replot();
}

void StreamChart::set_data(const StreamSeriesData& data) {
  m_data = data;
  std::vector<double> total(data.compressed.size());
  for (std::size_t i = 0; i < total.size(); ++i) {
    total[i] = data.compressed[i] + (i < data.buffer.size() ? data.buffer[i] : 0.0);
  }
  const auto largest = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  const double max_bytes = std::max(largest(total), largest(data.fp16));
  m_unit = byte_unit_for(max_bytes);
  const QVector<double> x(data.step.begin(), data.step.end());
  m_total->setData(x, scaled(total, m_unit.bytes), true);
  m_compressed->setData(x, scaled(data.compressed, m_unit.bytes), true);
  m_fp16->setData(x, scaled(data.fp16, m_unit.bytes), true);
  yAxis->setLabel(m_unit.name);
  xAxis->setRange(0, data.step.empty() ? 1.0 : std::max(1.0, data.step.back()));
  yAxis->setRange(0, max_bytes > 0 ? max_bytes / m_unit.bytes * 1.08 : 1.0);
  QString title = tr("Memory over decode steps");
  m_subtitle->setText(data.note);
  if (!total.empty() && total.back() > 0 && !data.fp16.empty()) {
    title += tr(": %1× smaller than fp16 at the last step")
                 .arg(data.fp16.back() / total.back(), 0, 'f', 2);
  }
  m_title->setText(title);
  replot();
}

}  // namespace kvlab::gui
