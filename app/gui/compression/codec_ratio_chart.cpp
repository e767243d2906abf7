#include "compression/codec_ratio_chart.h"

#include <algorithm>

#include "common/chart_style.h"

namespace kvlab::gui {

CodecRatioChart::CodecRatioChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 220);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Compression ratio by codec"));
  xAxis->setLabel(tr("layer"));
  yAxis->setLabel(tr("ratio (×)"));
  xAxis->grid()->setVisible(false);

  const std::array<QColor, kCodecCount> colors{palette::kBitPack, palette::kVarWidth,
                                               palette::kHuffman, palette::kRans};
  m_group = new QCPBarsGroup(this);
  m_group->setSpacingType(QCPBarsGroup::stAbsolute);
  m_group->setSpacing(1);
  for (int i = 0; i < kCodecCount; ++i) {
    auto* bars = new QCPBars(xAxis, yAxis);
    bars->setObjectName(QStringLiteral("codec_bars"));
    bars->setName(codec_names()[static_cast<std::size_t>(i)]);
    bars->setWidth(0.2);
    bars->setPen(QPen(colors[static_cast<std::size_t>(i)].darker(130)));
    bars->setBrush(colors[static_cast<std::size_t>(i)]);
    bars->setBarsGroup(m_group);
    bars->addToLegend(legend);
    m_bars[static_cast<std::size_t>(i)] = bars;
  }
  m_entropy = addGraph(xAxis, yAxis);
  m_entropy->setObjectName(QStringLiteral("entropy_graph"));
  m_entropy->setName(tr("at the entropy bound"));
  m_entropy->setLineStyle(QCPGraph::lsNone);
  QCPScatterStyle marker(QCPScatterStyle::ssCustom, QPen(palette::kEntropy, 2.5), Qt::NoBrush, 14);
  QPainterPath dash;
  dash.moveTo(-1, 0);
  dash.lineTo(1, 0);
  marker.setCustomPath(dash);
  m_entropy->setScatterStyle(marker);
  m_entropy->addToLegend(legend);
  add_legend_row(this, legend, 1);

  auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  xAxis->setTicker(ticker);

  style_plot(this);
  clear_data();
}

void CodecRatioChart::clear_data() {
  for (QCPBars* b : m_bars) b->data()->clear();
  m_entropy->data()->clear();
  m_title->setText(tr("Compression ratio by codec: run kvcomp with a codec"));
  xAxis->setRange(-0.5, 0.5);
  yAxis->setRange(0, 1);
  replot();
}

void CodecRatioChart::set_data(const CodecRatioData& data) {
  const QVector<double> x = to_qvector(data.layer);
  double max_ratio = 0;
  for (int i = 0; i < kCodecCount; ++i) {
    const auto& r = data.ratio[static_cast<std::size_t>(i)];
    QCPBars* bars = m_bars[static_cast<std::size_t>(i)];
    bars->setData(x, to_qvector(r), true);
    // A codec the run did not size (rANS in records from before it) is left
    // out rather than drawn at 0.
    const bool sized = std::any_of(r.begin(), r.end(), [](double v) { return v > 0; });
    bars->setVisible(sized);
    if (sized) {
      bars->addToLegend(legend);
    } else {
      bars->removeFromLegend(legend);
    }
    if (!r.empty()) max_ratio = std::max(max_ratio, *std::max_element(r.begin(), r.end()));
  }
  m_entropy->setData(x, to_qvector(data.entropy_ratio), true);
  if (!data.entropy_ratio.empty()) {
    max_ratio = std::max(max_ratio,
                         *std::max_element(data.entropy_ratio.begin(), data.entropy_ratio.end()));
  }
  // Fewer tick labels when there are many layers, so they never collide.
  auto ticker = qSharedPointerCast<QCPAxisTickerFixed>(xAxis->ticker());
  if (ticker) ticker->setTickStep(data.layer.size() > 24 ? 2.0 : 1.0);
  const double last = data.layer.empty() ? 0.0 : data.layer.back();
  xAxis->setRange(-0.6, last + 0.6);
  yAxis->setRange(0, max_ratio > 0 ? max_ratio * 1.12 : 1.0);
  m_title->setText(data.ran.isEmpty()
                       ? tr("Compression ratio by codec")
                       : tr("Compression ratio by codec (this run coded with %1)").arg(data.ran));
  replot();
}

}  // namespace kvlab::gui
