#include "compression/layer_chart.h"

#include <algorithm>

#include "common/chart_style.h"

namespace kvlab::gui {

namespace {

double max_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

QCPGraph* make_line(QCustomPlot* plot, QCPAxis* x, QCPAxis* y, const QString& name,
                    const QColor& color, QCPScatterStyle::ScatterShape shape) {
  QCPGraph* g = plot->addGraph(x, y);
  g->setName(name);
  g->setPen(QPen(color, 2));
  g->setScatterStyle(QCPScatterStyle(shape, color, Qt::white, 6));
  return g;
}

}  // namespace

LayerChart::LayerChart(QWidget* parent) : QCustomPlot(parent) {
  // Two panes, each tall enough for its axis titles and a few ticks that do not overlap (at
  // 260 px each pane was some 60 px and the right axis printed its ticks over each other); the
  // page scrolls rather than squeeze it.
  setMinimumSize(320, 400);
  setAutoAddPlottableToLegend(false);
  plotLayout()->clear();  // two panes of our own instead of the default axis rect

  QFont title_font = font();
  title_font.setPointSize(11);
  title_font.setBold(true);
  plotLayout()->addElement(0, 0,
                           new QCPTextElement(this, tr("Per-layer error and ratio"), title_font));

  m_error_rect = new QCPAxisRect(this);
  m_ratio_rect = new QCPAxisRect(this);
  plotLayout()->addElement(1, 0, m_error_rect);
  plotLayout()->addElement(2, 0, m_ratio_rect);
  // A legend under the title, so it never hides a curve; two entries a line, so it fits the
  // chart's narrowest width too.
  legend = new QCPLegend;
  add_legend_row(this, legend, 1);
  legend->setWrap(2);
  plotLayout()->setRowStretchFactor(2, 3);
  plotLayout()->setRowStretchFactor(3, 2);

  // Both panes keep their left edges aligned so the layer axes line up.
  auto* margins = new QCPMarginGroup(this);
  m_error_rect->setMarginGroup(QCP::msLeft | QCP::msRight, margins);
  m_ratio_rect->setMarginGroup(QCP::msLeft | QCP::msRight, margins);

  QCPAxis* ex = m_error_rect->axis(QCPAxis::atBottom);
  QCPAxis* ey = m_error_rect->axis(QCPAxis::atLeft);
  QCPAxis* ey2 = m_error_rect->axis(QCPAxis::atRight);
  ey2->setVisible(true);
  ey->setLabel(tr("attn-out rel. error"));
  ey2->setLabel(tr("MSE"));
  ey->setLabelColor(palette::kError);
  ey2->setLabelColor(palette::kMse);
  ex->setTickLabels(false);
  for (QCPAxis* y : {ey, ey2}) {
    auto few = QSharedPointer<QCPAxisTicker>::create();
    few->setTickCount(4);
    y->setTicker(few);
  }

  QCPAxis* rx = m_ratio_rect->axis(QCPAxis::atBottom);
  QCPAxis* ry = m_ratio_rect->axis(QCPAxis::atLeft);
  rx->setLabel(tr("layer"));
  ry->setLabel(tr("ratio (×)"));
  ry->setLabelColor(palette::kRatio.darker(120));
  auto ratio_ticker = QSharedPointer<QCPAxisTicker>::create();
  ratio_ticker->setTickCount(3);
  ry->setTicker(ratio_ticker);
  connect(rx, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), ex,
          qOverload<const QCPRange&>(&QCPAxis::setRange));

  for (QCPAxis* x : {ex, rx}) {
    auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
    ticker->setTickStep(1.0);
    ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
    x->setTicker(ticker);
  }

  m_rel_error = make_line(this, ex, ey, tr("attn-out error (left)"), palette::kError,
                          QCPScatterStyle::ssCircle);
  m_rel_error->setObjectName(QStringLiteral("rel_error_graph"));
  m_mse = make_line(this, ex, ey2, tr("MSE (right)"), palette::kMse, QCPScatterStyle::ssSquare);
  m_mse->setObjectName(QStringLiteral("mse_graph"));
  m_mse->setPen(QPen(palette::kMse, 1.5, Qt::DashLine));

  m_ratio = new QCPBars(rx, ry);
  m_ratio->setObjectName(QStringLiteral("ratio_bars"));
  m_ratio->setName(tr("ratio (below)"));
  m_ratio->setWidth(0.6);
  m_ratio->setPen(QPen(palette::kRatio.darker(130)));
  m_ratio->setBrush(palette::kRatio);

  m_rel_error->addToLegend(legend);
  m_mse->addToLegend(legend);
  m_ratio->addToLegend(legend);

  style_plot(this);
  clear_data();
}

void LayerChart::clear_data() {
  m_rel_error->data()->clear();
  m_mse->data()->clear();
  m_ratio->data()->clear();
  m_ratio_rect->axis(QCPAxis::atBottom)->setRange(-0.5, 0.5);
  replot();
}

void LayerChart::set_data(const LayerSeriesData& data) {
  const QVector<double> x = to_qvector(data.layer);
  m_rel_error->setData(x, to_qvector(data.attn_output_rel_error), true);
  m_mse->setData(x, to_qvector(data.mse), true);
  m_ratio->setData(x, to_qvector(data.ratio), true);

  const double last = data.layer.empty() ? 0.0 : data.layer.back();
  m_ratio_rect->axis(QCPAxis::atBottom)->setRange(-0.6, last + 0.6);
  const auto upper = [](double m) { return m > 0 ? m * 1.15 : 1.0; };
  m_error_rect->axis(QCPAxis::atLeft)->setRange(0, upper(max_of(data.attn_output_rel_error)));
  m_error_rect->axis(QCPAxis::atRight)->setRange(0, upper(max_of(data.mse)));
  m_ratio_rect->axis(QCPAxis::atLeft)->setRange(0, upper(max_of(data.ratio)));
  replot();
}

}  // namespace kvlab::gui
