#include "planner/planner_step_chart.h"

#include <algorithm>

#include "common/chart_style.h"

namespace kvlab::gui {
namespace {
constexpr double kSpacing = 0.03;  // between the bars of one part, in axis units
}  // namespace

QStringList PlannerStepChart::part_names() {
  return {tr("weights\nread"),      tr("dense\ncompute"),   tr("KV\nread"),
          tr("attention\ncompute"), tr("decom-\npression"), tr("whole\nstep")};
}

PlannerStepChart::PlannerStepChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(300, 200);
  add_title(this, tr("One decode step, per GPU (ms)"));
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const QStringList names = part_names();
  for (int i = 0; i < names.size(); ++i) ticker->addTick(i + 1, names[i]);
  xAxis->setTicker(ticker);
  xAxis->setRange(0.4, names.size() + 0.6);
  xAxis->grid()->setVisible(false);
  yAxis->setLabel(tr("milliseconds"));
  m_group = new QCPBarsGroup(this);
  m_group->setSpacingType(QCPBarsGroup::stPlotCoords);
  m_group->setSpacing(kSpacing);
  add_legend_row(this, legend, 2);
  style_plot(this);
  setToolTip(
      tr("What one decode step of the whole batch costs on one GPU, part by part. The step "
         "waits on the slower side of each half: max(weights read, dense compute) + max(KV "
         "read, attention compute, decompression), where decompression is the scheme's fused "
         "attention kernel, its arithmetic included. Compressing shrinks the KV read; "
         "decompressing takes its own time, hidden under the reads when it is faster than them."));
}

void PlannerStepChart::set_data(const std::vector<StepParts>& schemes) {
  for (QCPBars* b : m_bars) removePlottable(b);
  m_bars.clear();
  clearItems();
  double top = 0;
  for (std::size_t i = 0; i < schemes.size(); ++i) {
    const StepParts& p = schemes[i];
    const QColor color = planner_series_color(static_cast<int>(i));
    auto* bars = new QCPBars(xAxis, yAxis);
    bars->setObjectName(QStringLiteral("scheme_bars"));
    bars->setName(p.served > 0 ? tr("%1, batch %2").arg(p.scheme).arg(p.served)
                               : tr("%1 (nothing fits)").arg(p.scheme));
    bars->setBrush(color);
    bars->setPen(QPen(color.darker(130)));
    bars->setWidth(0.8 / std::max<std::size_t>(1, schemes.size()));
    bars->setBarsGroup(m_group);
    const double ms[] = {p.weights_read,      p.dense_compute, p.kv_read,
                         p.attention_compute, p.decompression, p.step};
    for (int k = 0; k < 6; ++k) {
      bars->addData(k + 1, ms[k] * 1e3);
      top = std::max(top, ms[k] * 1e3);
    }
    m_bars.push_back(bars);
  }
  // The whole step's value over its bars (the group centres n bars of width w on the key).
  const double n = static_cast<double>(m_bars.size());
  for (std::size_t i = 0; i < m_bars.size(); ++i) {
    QCPBars* b = m_bars[i];
    if (b->data()->isEmpty()) continue;
    const double step = (b->data()->end() - 1)->value;
    const double offset = (static_cast<double>(i) - (n - 1) / 2) * (b->width() + kSpacing);
    auto* label = new QCPItemText(this);
    label->position->setCoords(6 + offset, step);
    label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    label->setFont(QFont(font().family(), 8));
    label->setText(QString::number(step, 'f', step < 10 ? 2 : 1));
  }
  yAxis->setRange(0, std::max(1e-3, top * 1.18));
  legend->setVisible(!schemes.empty());
  replot();
}

}  // namespace kvlab::gui
