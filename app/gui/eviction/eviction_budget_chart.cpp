#include "eviction/eviction_budget_chart.h"

#include <algorithm>

#include "common/chart_style.h"

namespace kvlab::gui {

namespace {

QSharedPointer<QCPAxisTickerFixed> integer_ticker() {
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  return ticker;
}

// Pale yellow (few tokens kept) through teal to dark blue (many), readable in grey too.
QCPColorGradient tokens_gradient() {
  QCPColorGradient g;
  g.clearColorStops();
  g.setColorStopAt(0.0, QColor(250, 245, 190));
  g.setColorStopAt(0.5, QColor(65, 182, 196));
  g.setColorStopAt(1.0, QColor(35, 50, 140));
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  return g;
}

}  // namespace

EvictionBudgetChart::EvictionBudgetChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 300);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Prompt tokens kept per layer and KV head"));

  QCPAxisRect* bars = axisRect();
  bars->axis(QCPAxis::atLeft)->setLabel(tr("prompt tokens"));
  bars->axis(QCPAxis::atBottom)->setTicker(integer_ticker());
  m_budget = new QCPBars(bars->axis(QCPAxis::atBottom), bars->axis(QCPAxis::atLeft));
  m_budget->setObjectName(QStringLiteral("budget_bars"));
  m_budget->setName(tr("layer budget"));
  m_budget->setPen(QPen(QColor(90, 90, 90), 1.2));
  m_budget->setBrush(QColor(0, 0, 0, 18));
  m_budget->setWidth(0.8);
  m_budget->addToLegend(legend);
  m_kept = new QCPBars(bars->axis(QCPAxis::atBottom), bars->axis(QCPAxis::atLeft));
  m_kept->setObjectName(QStringLiteral("kept_bars"));
  m_kept->setName(tr("kept, mean over KV heads"));
  m_kept->setPen(QPen(palette::kRatio.darker(130)));
  m_kept->setBrush(palette::kRatio);
  m_kept->setWidth(0.5);
  m_kept->addToLegend(legend);

  m_heads_rect = new QCPAxisRect(this);
  plotLayout()->addElement(plotLayout()->rowCount(), 0, m_heads_rect);
  m_heads_rect->axis(QCPAxis::atBottom)->setLabel(tr("layer"));
  m_heads_rect->axis(QCPAxis::atLeft)->setLabel(tr("KV head"));
  m_heads_rect->axis(QCPAxis::atBottom)->setTicker(integer_ticker());
  m_heads_rect->axis(QCPAxis::atLeft)->setTicker(integer_ticker());
  m_heads_rect->axis(QCPAxis::atLeft)->setRangeReversed(true);  // head 0 on top
  m_map =
      new QCPColorMap(m_heads_rect->axis(QCPAxis::atBottom), m_heads_rect->axis(QCPAxis::atLeft));
  m_map->setObjectName(QStringLiteral("color_map"));
  m_map->setInterpolate(false);
  m_map->setTightBoundary(true);
  m_scale = new QCPColorScale(this);
  m_scale->setType(QCPAxis::atRight);
  m_scale->setLabel(tr("tokens kept"));
  m_scale->setBarWidth(10);
  plotLayout()->addElement(plotLayout()->rowCount() - 1, 1, m_scale);
  m_map->setColorScale(m_scale);
  m_map->setGradient(tokens_gradient());
  // The bars and the map share their left edge, so layer n sits above layer n.
  auto* margins = new QCPMarginGroup(this);
  bars->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
  m_heads_rect->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
  m_scale->setMarginGroup(QCP::msTop | QCP::msBottom, new QCPMarginGroup(this));
  add_legend_row(this, legend, 2);  // between the bars and the map
  style_plot(this);
  clear_data(tr("Run a prefill policy (snapkv, pyramidkv, adakv, …) to see its budgets"));
}

void EvictionBudgetChart::clear_data(const QString& message) {
  m_data = {};
  m_budget->data()->clear();
  m_kept->data()->clear();
  m_map->data()->clear();
  m_map->setVisible(false);
  m_title->setText(message);
  rescaleAxes();
  replot();
}

void EvictionBudgetChart::set_data(const EvictionBudgetData& data) {
  if (data.empty()) {
    clear_data(tr("This run keeps no prompt budget apart: a prefill policy does"));
    return;
  }
  m_data = data;
  QVector<double> x, budget, kept;
  double top = 0;
  for (int l = 0; l < data.layers; ++l) {
    x << l;
    budget << data.layer_budget[static_cast<std::size_t>(l)];
    kept << data.layer_kept[static_cast<std::size_t>(l)];
    top = std::max({top, budget.back(), kept.back()});
  }
  m_budget->setData(x, budget, true);
  m_kept->setData(x, kept, true);
  QCPAxisRect* bars = axisRect();
  bars->axis(QCPAxis::atBottom)->setRange(-0.5, data.layers - 0.5);
  bars->axis(QCPAxis::atLeft)->setRange(0, top > 0 ? top * 1.1 : 1.0);

  m_map->data()->setSize(data.layers, data.kv_heads);
  m_map->data()->setRange(QCPRange(0, data.layers - 1), QCPRange(0, data.kv_heads - 1));
  double lo = data.head_kept.front(), hi = lo;
  for (int l = 0; l < data.layers; ++l) {
    for (int h = 0; h < data.kv_heads; ++h) {
      const double v = data.head(l, h);
      m_map->data()->setCell(l, h, v);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  m_map->setDataRange(QCPRange(lo, hi > lo ? hi : lo + 1));
  m_map->setVisible(true);
  m_heads_rect->axis(QCPAxis::atBottom)->setRange(-0.5, data.layers - 0.5);
  m_heads_rect->axis(QCPAxis::atLeft)->setRange(-0.5, data.kv_heads - 0.5);
  m_title->setText(data.title);
  replot();
}

}  // namespace kvlab::gui
