#include "planner/planner_frontier_chart.h"

#include <algorithm>

#include "common/chart_style.h"

namespace kvlab::gui {

PlannerFrontierChart::PlannerFrontierChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(320, 220);
  add_title(this, tr("Throughput frontier"));
  plotLayout()->insertRow(1);
  m_subtitle = new QCPTextElement(this, QString(), QFont(font().family(), 9));
  m_subtitle->setTextColor(QColor(80, 80, 80));
  plotLayout()->addElement(1, 0, m_subtitle);
  xAxis->setLabel(tr("tokens/s per user (1 ÷ TPOT)"));
  yAxis->setLabel(tr("tokens/s per GPU (deployment ÷ GPUs)"));
  add_legend_row(this, legend, 3);
  legend->setWrap(2);  // two entries a line: the page keeps a laptop's width
  style_plot(this);
  setToolTip(
      tr("Each curve is one KV storage scheme at this context; along it the batch doubles from 1 "
         "to the largest that fits memory (the last point). Moving right, each user gets tokens "
         "faster; moving up, each GPU serves more tokens in all. A compressed cache reaches "
         "larger batches (higher), and pays with decompression work where that is slower than "
         "reading the bytes. Dashed: the TPOT target; star: the best choice under the targets."));
}

void PlannerFrontierChart::set_data(const FrontierChartData& data) {
  m_data = data;
  clearGraphs();
  clearItems();
  m_subtitle->setText(data.title);
  double max_x = 1, max_y = 1;
  for (std::size_t i = 0; i < data.curves.size(); ++i) {
    const FrontierCurve& c = data.curves[i];
    auto* g = addGraph();
    g->setObjectName(QStringLiteral("curve_graph"));
    const QColor color = planner_series_color(static_cast<int>(i));
    // The batch range in the legend: the curve's left end is the largest batch that fits.
    g->setName(c.batch.empty()
                   ? tr("%1 (nothing fits)").arg(c.scheme)
                   : tr("%1, batch %2–%3").arg(c.scheme).arg(c.batch.front()).arg(c.batch.back()));
    g->setPen(QPen(color, 2));
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, color, Qt::white, 6));
    // QCustomPlot keeps them sorted by x: the batch grows from right to left along the curve.
    QVector<double> keys, values;
    for (std::size_t k = 0; k < c.batch.size(); ++k) {
      keys << c.tokens_per_s_per_user[k];
      values << c.tokens_per_s_per_gpu[k];
      max_x = std::max(max_x, c.tokens_per_s_per_user[k]);
      max_y = std::max(max_y, c.tokens_per_s_per_gpu[k]);
    }
    g->setData(keys, values);
  }
  if (data.tpot_target_ms > 0) {
    const double x = 1000.0 / data.tpot_target_ms;
    auto* line = new QCPItemStraightLine(this);
    line->point1->setCoords(x, 0);
    line->point2->setCoords(x, 1);
    line->setPen(QPen(Qt::black, 1.2, Qt::DashLine));
    auto* label = new QCPItemText(this);
    label->position->setType(QCPItemPosition::ptPlotCoords);
    label->position->setCoords(x, max_y * 1.12);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->setPadding(QMargins(4, 0, 0, 0));
    label->setText(tr("TPOT ≤ %1 ms").arg(data.tpot_target_ms));
    max_x = std::max(max_x, x);
  }
  if (data.chosen) {
    auto* star = addGraph();
    star->setName(tr("best under the targets"));
    star->setLineStyle(QCPGraph::lsNone);
    star->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssStar, QPen(Qt::black, 2), QBrush(Qt::NoBrush), 18));
    star->addData(data.chosen->tokens_per_s_per_user, data.chosen->tokens_per_s_per_gpu);
  }
  xAxis->setRange(0, max_x * 1.15);
  yAxis->setRange(0, max_y * 1.15);
  legend->setVisible(!data.curves.empty());
  replot();
}

}  // namespace kvlab::gui
