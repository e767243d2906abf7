// The Planner page's two charts: one GPU's memory per scheme, and KV memory against context.
#include <qcustomplot.h>

#include <cmath>

#include "common/chart_style.h"
#include "planner/planner_chart_data.h"
#include "planner/planner_view.h"

namespace kvlab::gui {
namespace {

const QColor kWeights{120, 120, 120};
const QColor kKv{52, 101, 164};
const QColor kKvOver{200, 55, 55};
const QColor kReserve{230, 170, 60};
const QColor kFree{200, 225, 200};

QCPBars* stacked(QCustomPlot* plot, const QString& name, const QColor& color, QCPBars* below) {
  auto* b = new QCPBars(plot->xAxis, plot->yAxis);
  b->setName(name);
  b->setBrush(color);
  b->setPen(QPen(color.darker(130)));
  b->setWidth(0.6);
  if (below) b->moveAbove(below);
  return b;
}

}  // namespace

void PlannerView::draw_memory_chart() {
  QCustomPlot* p = m_memory_chart;
  p->clearPlottables();
  p->clearItems();
  const double gib = 1024.0 * 1024 * 1024;
  auto* weights = stacked(p, tr("weights"), kWeights, nullptr);
  auto* reserve = stacked(p, tr("reserve"), kReserve, weights);
  auto* kv = stacked(p, tr("KV cache (fits)"), kKv, reserve);
  auto* over = stacked(p, tr("KV cache (does not fit)"), kKvOver, kv);
  auto* free = stacked(p, tr("free"), kFree, over);
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  double top = 0, capacity = 0;
  for (std::size_t i = 0; i < m_plan->results().size(); ++i) {
    const auto& r = m_plan->results()[i];
    const double x = static_cast<double>(i);
    weights->addData(x, r.weights_bytes_per_gpu / gib);
    reserve->addData(x, r.reserve_bytes / gib);
    (r.fits ? kv : over)->addData(x, r.kv_bytes_batch_per_gpu / gib);
    const double used =
        r.weights_bytes_per_gpu + r.reserve_bytes + static_cast<double>(r.kv_bytes_batch_per_gpu);
    free->addData(x, std::max(0.0, r.usable_bytes - used) / gib);
    ticker->addTick(
        x, QString::fromStdString(m_plan->shown_schemes()[i].label).replace(" + ", "\n+ "));
    top = std::max(top, std::max(used, static_cast<double>(r.usable_bytes)) / gib);
    capacity = r.usable_bytes / gib;
  }
  p->xAxis->setTicker(ticker);
  p->xAxis->setRange(-0.6, std::max<double>(1.0, m_plan->results().size()) - 0.4);
  p->yAxis->setLabel(tr("GiB on one GPU"));
  p->yAxis->setRange(0, std::max(1.0, top * 1.1));
  if (!m_plan->results().empty()) {
    auto* line = new QCPItemStraightLine(p);
    line->point1->setCoords(0, capacity);
    line->point2->setCoords(1, capacity);
    line->setPen(QPen(Qt::black, 1.5, Qt::DashLine));
    auto* label = new QCPItemText(p);
    label->position->setCoords(-0.55, capacity);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setText(tr("usable: %1 GiB").arg(capacity, 0, 'f', 1));
  }
  p->legend->setVisible(true);
  p->replot();
}

void PlannerView::draw_context_chart() {
  QCustomPlot* p = m_context_chart;
  p->clearGraphs();
  p->clearItems();
  if (m_plan->results().empty()) {
    p->replot();
    return;
  }
  const planners::Scenario& base = m_plan->scenario();
  const double gib = 1024.0 * 1024 * 1024;
  const double max_ctx = base.model.max_context;
  const double min_ctx = std::min(512.0, max_ctx);
  double top = m_plan->results().front().kv_capacity_bytes / gib;
  for (std::size_t i = 0; i < m_plan->shown_schemes().size(); ++i) {
    auto* g = p->addGraph();
    g->setName(QString::fromStdString(m_plan->shown_schemes()[i].label));
    g->setPen(QPen(planner_series_color(static_cast<int>(i)), 2));
    for (int k = 0; k <= 48; ++k) {
      const double ctx = std::round(min_ctx * std::pow(max_ctx / min_ctx, k / 48.0));
      const double bytes =
          planners::kv_bytes_per_sequence(base.model, m_plan->shown_schemes()[i], base.deployment,
                                          static_cast<std::int64_t>(ctx)) *
          static_cast<double>(base.batch);
      g->addData(ctx, bytes / gib);
      top = std::max(top, bytes / gib);
    }
  }
  auto* cap = p->addGraph();
  cap->setName(tr("KV capacity at this batch"));
  cap->setPen(QPen(Qt::black, 1.5, Qt::DashLine));
  cap->addData(min_ctx, m_plan->results().front().kv_capacity_bytes / gib);
  cap->addData(max_ctx, m_plan->results().front().kv_capacity_bytes / gib);
  p->xAxis->setScaleType(QCPAxis::stLogarithmic);
  p->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  p->xAxis->setRange(min_ctx, max_ctx);
  p->xAxis->setLabel(tr("context (tokens per sequence)"));
  p->yAxis->setLabel(tr("KV GiB for the batch, one GPU"));
  p->yAxis->setRange(0, top * 1.1);
  p->legend->setVisible(true);
  p->replot();
}

}  // namespace kvlab::gui
