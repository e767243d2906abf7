#include "eviction/minicache_chart.h"

#include <algorithm>

#include "common/chart_style.h"

namespace kvlab::gui {

namespace {

const QColor kMerged{80, 120, 200};  // the eviction map's "merged" colour

}  // namespace

MiniCacheChart::MiniCacheChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 240);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Merged layers"));
  xAxis->setLabel(tr("layer"));
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  xAxis->setTicker(ticker);
  yAxis2->setVisible(true);
  yAxis2->setLabel(tr("share retained unmerged"));
  yAxis2->setLabelColor(palette::kValue.darker(120));

  m_full = new QCPBars(xAxis, yAxis);
  m_full->setObjectName(QStringLiteral("full_bars"));
  m_full->setName(tr("full cache"));
  m_full->setPen(QPen(QColor(90, 90, 90), 1.2));
  m_full->setBrush(QColor(0, 0, 0, 18));
  m_full->setWidth(0.8);
  m_full->addToLegend(legend);
  m_merged = new QCPBars(xAxis, yAxis);
  m_merged->setObjectName(QStringLiteral("merged_bars"));
  m_merged->setName(tr("held, merged layer"));
  m_merged->setPen(QPen(kMerged.darker(130)));
  m_merged->setBrush(kMerged);
  m_merged->setWidth(0.5);
  m_merged->addToLegend(legend);
  m_own = new QCPBars(xAxis, yAxis);
  m_own->setObjectName(QStringLiteral("own_bars"));
  m_own->setName(tr("held, own layer"));
  m_own->setPen(QPen(palette::kRatio.darker(130)));
  m_own->setBrush(palette::kRatio);
  m_own->setWidth(0.5);
  m_own->addToLegend(legend);
  m_retained = addGraph(xAxis, yAxis2);
  m_retained->setObjectName(QStringLiteral("retained_graph"));
  m_retained->setName(tr("retained unmerged"));
  m_retained->setLineStyle(QCPGraph::lsNone);
  m_retained->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssDiamond, palette::kValue.darker(110), palette::kValue, 9));
  m_retained->addToLegend(legend);
  add_legend_row(this, legend, plotLayout()->rowCount());
  style_plot(this);
  clear_data(tr("Run minicache to see which layers it merges"));
}

void MiniCacheChart::clear_data(const QString& message) {
  m_data = {};
  for (QCPBars* b : {m_full, m_merged, m_own}) b->data()->clear();
  m_retained->data()->clear();
  for (QCPAbstractItem* item : m_pairs) removeItem(item);
  m_pairs.clear();
  m_title->setText(message);
  xAxis->setRange(0, 1);
  yAxis->setRange(0, 1);
  yAxis2->setRange(0, 1);
  replot();
}

void MiniCacheChart::set_data(const MiniCacheData& data) {
  if (data.empty()) {
    clear_data(tr("This run merged no layers: minicache does"));
    return;
  }
  clear_data({});
  m_data = data;
  double top = 0;
  for (double b : data.full_memory_bytes) top = std::max(top, b);
  for (double b : data.memory_bytes) top = std::max(top, b);
  const ByteUnit unit = byte_unit_for(top);
  const int n = static_cast<int>(data.layer_ids.size());
  for (int l = 0; l < n; ++l) {
    const auto i = static_cast<std::size_t>(l);
    m_full->addData(l, data.full_memory_bytes[i] / unit.bytes);
    const bool merged = data.partner[i] >= 0;
    (merged ? m_merged : m_own)->addData(l, data.memory_bytes[i] / unit.bytes);
    if (merged) m_retained->addData(l, data.retained[i]);
    // A bracket over each pair, drawn once from its lower layer.
    if (merged && data.partner[i] > l) {
      const double y = data.full_memory_bytes[i] / unit.bytes * 1.06;
      auto* line = new QCPItemLine(this);
      line->setPen(QPen(kMerged, 2));
      line->start->setCoords(l - 0.3, y);
      line->end->setCoords(data.partner[i] + 0.3, y);
      auto* text = new QCPItemText(this);
      text->setText(tr("%1↔%2").arg(data.layer_ids[i]).arg(data.layer_ids[data.partner[i]]));
      text->setColor(kMerged.darker(120));
      text->setFont(QFont(font().family(), 8));
      text->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
      text->position->setCoords((l + data.partner[i]) / 2.0, y);
      m_pairs.push_back(line);
      m_pairs.push_back(text);
    }
  }
  yAxis->setLabel(tr("memory at the last step (%1)").arg(unit.name));
  xAxis->setRange(-0.6, n - 0.4);
  yAxis->setRange(0, top > 0 ? top / unit.bytes * 1.2 : 1.0);
  yAxis2->setRange(0, 1.05);
  m_title->setText(data.title);
  replot();
}

}  // namespace kvlab::gui
