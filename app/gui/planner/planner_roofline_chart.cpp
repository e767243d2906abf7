#include "planner/planner_roofline_chart.h"

#include <algorithm>
#include <cmath>

#include "common/chart_style.h"

namespace kvlab::gui {

PlannerRooflineChart::PlannerRooflineChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(320, 220);
  add_title(this, tr("Roofline of one GPU"));
  plotLayout()->insertRow(1);
  m_subtitle = new QCPTextElement(this, QString(), QFont(font().family(), 9));
  m_subtitle->setTextColor(QColor(80, 80, 80));
  plotLayout()->addElement(1, 0, m_subtitle);
  for (QCPAxis* axis : {xAxis, yAxis}) {
    axis->setScaleType(QCPAxis::stLogarithmic);
    auto ticker = QSharedPointer<QCPAxisTickerLog>::create();
    ticker->setSubTickCount(8);
    axis->setTicker(ticker);
    axis->setNumberFormat(QStringLiteral("gb"));
  }
  xAxis->setLabel(tr("arithmetic intensity (FLOP per byte read)"));
  yAxis->setLabel(tr("TFLOP/s per GPU"));
  add_legend_row(this, legend, 3);
  legend->setWrap(4);
  style_plot(this);
  setToolTip(
      tr("Log-log. The roof is what one GPU can attain at an intensity: memory-bound on the "
         "slope (intensity × bandwidth × efficiency), compute-bound on the flat part (bf16 "
         "peak × compute efficiency). Each point is one scheme's decode step for the batch at "
         "this context: the model's FLOPs (the same for every scheme) over the bytes it reads, and "
         "the FLOP/s it achieves over the whole step. Compressing reads fewer bytes (the point "
         "moves right); decompressing takes time but is not the model's maths, so a point well "
         "under the roof waits on something else, such as decompression (its label says what). "
         "Hollow: the batch does not fit in memory."));
}

void PlannerRooflineChart::set_data(const RooflineData& data) {
  m_data = data;
  clearGraphs();
  clearItems();
  m_subtitle->setText(data.peak_tflops > 0 ? tr("%1\nroof: min(%2 TFLOP/s, %3 TB/s × intensity)")
                                                 .arg(data.title)
                                                 .arg(data.peak_tflops, 0, 'f', 0)
                                                 .arg(data.bandwidth_tbs, 0, 'f', 2)
                                           : data.title);
  double lo_x = data.ridge() > 0 ? data.ridge() : 1, hi_x = lo_x;
  double lo_y = data.peak_tflops > 0 ? data.peak_tflops : 1, hi_y = lo_y;
  for (const auto& p : data.points) {
    if (p.intensity <= 0 || p.tflops <= 0) continue;
    lo_x = std::min(lo_x, p.intensity);
    hi_x = std::max(hi_x, p.intensity);
    lo_y = std::min(lo_y, p.tflops);
    hi_y = std::max(hi_y, p.tflops);
  }
  lo_x /= 4, hi_x *= 4, lo_y /= 4, hi_y *= 2;

  m_roof = addGraph();
  m_roof->setObjectName(QStringLiteral("roof_graph"));
  m_roof->setName(tr("roof"));
  m_roof->setPen(QPen(Qt::black, 2));
  if (data.bandwidth_tbs > 0 && data.peak_tflops > 0) {
    m_roof->addData(lo_x, data.roof(lo_x));
    m_roof->addData(data.ridge(), data.roof(data.ridge()));
    m_roof->addData(hi_x, data.roof(hi_x));
    auto* ridge = new QCPItemText(this);
    ridge->position->setCoords(data.ridge(), data.peak_tflops);
    ridge->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    ridge->setPadding(QMargins(0, 0, 0, 4));
    ridge->setColor(QColor(80, 80, 80));
    ridge->setText(tr("ridge %1 FLOP/B").arg(data.ridge(), 0, 'f', 0));
  }
  // Schemes at (nearly) the same point share one label ("fp8, int8").
  std::vector<bool> labelled(data.points.size(), false);
  for (std::size_t i = 0; i < data.points.size(); ++i) {
    const RooflinePoint& p = data.points[i];
    const QColor color = planner_series_color(static_cast<int>(i));
    auto* g = addGraph();
    g->setObjectName(QStringLiteral("point_graph"));
    g->setName(p.fits ? p.scheme : tr("%1 (does not fit)").arg(p.scheme));
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(color, 2),
                                       p.fits ? QBrush(color) : QBrush(Qt::white), 11));
    if (p.intensity > 0 && p.tflops > 0) g->addData(p.intensity, p.tflops);
    if (labelled[i] || p.intensity <= 0 || p.tflops <= 0) continue;
    QStringList names{p.scheme};
    for (std::size_t k = i + 1; k < data.points.size(); ++k) {
      const RooflinePoint& q = data.points[k];
      if (std::abs(std::log(q.intensity / p.intensity)) < 0.03 &&
          std::abs(std::log(q.tflops / p.tflops)) < 0.03) {
        names << q.scheme;
        labelled[k] = true;
      }
    }
    auto* label = new QCPItemText(this);
    label->position->setCoords(p.intensity, p.tflops);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->setPadding(QMargins(8, 4, 0, 0));
    label->setColor(color.darker(130));
    label->setText(names.join(QStringLiteral(", ")));
  }
  xAxis->setRange(lo_x, hi_x);
  yAxis->setRange(lo_y, hi_y);
  legend->setVisible(true);
  replot();
}

}  // namespace kvlab::gui
