// The status-bar readout of the chart point under the mouse: the text for graphs, bars (side by
// side, with text ticks) and colour-map cells, computed from pixel positions the test gets from
// the axes, and the whole path through the main window's status bar after a real run.
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include <QMouseEvent>
#include <QStatusBar>

#include "common/chart_hover.h"
#include "common/gui_format.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "gui_test_support.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

QPointF pixel_of(QCPAbstractPlottable* p, double key, double value) {
  return p->coordsToPixels(key, value);
}

TEST(ChartHover, GraphPointNamesSeriesKeyAndValue) {
  QCustomPlot plot;
  plot.resize(400, 300);
  QCPGraph* g = plot.addGraph();
  g->setName(QStringLiteral("keys"));
  g->setData({0, 1, 2, 3}, {1.0, 2.5, 3.25, 0.125});
  plot.xAxis->setLabel(QStringLiteral("layer"));
  plot.yAxis->setLabel(QStringLiteral("ratio"));
  plot.xAxis->setRange(-0.5, 3.5);
  plot.yAxis->setRange(0, 4);
  plot.replot();

  const QPointF at = pixel_of(g, 2, 3.25);
  EXPECT_EQ(describe_chart_point(&plot, at + QPointF(3, -2)),
            QStringLiteral("keys \u2014 layer %1: %2 (ratio)")
                .arg(format_metric(2), format_metric(3.25)));
  // Far from every point: nothing.
  EXPECT_EQ(describe_chart_point(&plot, pixel_of(g, 1.5, 0.2)), QString());
  // Tokens and bytes are read as whole numbers, not decoded from "3.79e+03" (issue 43).
  EXPECT_EQ(format_metric(3790), QStringLiteral("3790"));
  EXPECT_EQ(format_metric(51'030'000), QStringLiteral("51030000"));
  EXPECT_EQ(format_metric(0.000123), QStringLiteral("0.000123"));
}

TEST(ChartHover, BarsSideBySideUseTheTextTickLabels) {
  QCustomPlot plot;
  plot.resize(500, 300);
  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  ticker->addTick(0, QStringLiteral("L0"));
  ticker->addTick(1, QStringLiteral("L1"));
  plot.xAxis->setTicker(ticker);
  auto* group = new QCPBarsGroup(&plot);
  auto* a = new QCPBars(plot.xAxis, plot.yAxis);
  auto* b = new QCPBars(plot.xAxis, plot.yAxis);
  a->setName(QStringLiteral("huffman"));
  b->setName(QStringLiteral("bitpack"));
  for (auto* bars : {a, b}) {
    bars->setWidth(0.35);
    bars->setBarsGroup(group);
  }
  a->setData({0, 1}, {5.5, 4.0});
  b->setData({0, 1}, {3.5, 2.0});
  plot.xAxis->setRange(-0.6, 1.6);
  plot.yAxis->setRange(0, 6);
  plot.replot();

  // Bars of a group sit left and right of their key, each about its width across: probe the
  // middle of each side at a height both bars of key 1 reach.
  const double w = a->width();
  const double key_px = plot.xAxis->coordToPixel(1);
  const double half_px = std::abs(plot.xAxis->coordToPixel(1 + w / 2) - key_px);
  const QPointF a1(0, plot.yAxis->coordToPixel(1.0));
  const QString left = describe_chart_point(&plot, QPointF(key_px - half_px, a1.y()));
  const QString right = describe_chart_point(&plot, QPointF(key_px + half_px, a1.y()));
  EXPECT_EQ(left, QStringLiteral("huffman \u2014 L1: %1").arg(format_metric(4.0)));
  EXPECT_EQ(right, QStringLiteral("bitpack \u2014 L1: %1").arg(format_metric(2.0)));
  // Above the shorter bar: not on it.
  EXPECT_EQ(describe_chart_point(&plot, QPointF(key_px + half_px, plot.yAxis->coordToPixel(3.0))),
            QString());
}

TEST(ChartHover, ColourMapCellGivesItsCoordinatesAndValue) {
  QCustomPlot plot;
  plot.resize(400, 300);
  auto* map = new QCPColorMap(plot.xAxis, plot.yAxis);
  map->data()->setSize(10, 5);
  map->data()->setRange(QCPRange(0, 9), QCPRange(0, 4));
  map->data()->fill(1);
  map->data()->setCell(7, 3, 4);
  plot.xAxis->setLabel(QStringLiteral("position"));
  plot.yAxis->setLabel(QStringLiteral("step"));
  plot.rescaleAxes();
  plot.replot();
  EXPECT_EQ(describe_chart_point(&plot, pixel_of(map, 7, 3)),
            QStringLiteral("position 7, step 3: 4"));
  EXPECT_EQ(describe_chart_point(&plot, pixel_of(map, 2, 1)),
            QStringLiteral("position 2, step 1: 1"));
}

TEST(ChartHover, MainWindowStatusBarShowsTheBarUnderTheMouse) {
  MainWindow window(gui_test::fresh_dir() / "runs.sqlite");
  window.resize(1280, 860);
  window.show();
  CompressionView& view = *window.compression_view();
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  view.method_panel()->set_config(gui_test::tiered_method());
  ASSERT_TRUE(view.run_and_wait(60000)) << view.last_error().toStdString();

  // The first visible chart with bars: move the mouse to the middle of its first bar's top.
  QCPBars* bars = nullptr;
  for (auto* chart : view.findChildren<QCustomPlot*>()) {
    if (!chart->isVisible()) continue;
    for (int i = 0; i < chart->plottableCount() && !bars; ++i) {
      auto* b = qobject_cast<QCPBars*>(chart->plottable(i));
      if (b && !b->data()->isEmpty() && b->data()->at(0)->value > 0) bars = b;
    }
    if (bars) break;
  }
  ASSERT_NE(bars, nullptr);
  QCustomPlot* chart = bars->parentPlot();
  const auto first = bars->data()->at(0);
  // A point inside the bar, stacked or not: scan up from the axis near the bar's key until the
  // bars' own hit test says the mouse is on this bar.
  QPointF at;
  bool inside = false;
  const double key_px = bars->keyAxis()->coordToPixel(first->key);
  const QRect area = bars->keyAxis()->axisRect()->rect();
  for (int y = area.bottom() - 1; y > area.top() && !inside; y -= 2) {
    for (int dx = -40; dx <= 40 && !inside; dx += 2) {  // bars of a group sit beside the key
      at = QPointF(key_px + dx, y);
      QVariant details;
      const double d = bars->selectTest(at, false, &details);
      inside = d >= 0 && d <= chart->selectionTolerance() &&
               details.value<QCPDataSelection>().contains(QCPDataSelection(QCPDataRange(0, 1)));
    }
  }
  ASSERT_TRUE(inside);
  QMouseEvent move(QEvent::MouseMove, at, chart->mapToGlobal(at), Qt::NoButton, Qt::NoButton,
                   Qt::NoModifier);
  QApplication::sendEvent(chart, &move);
  const QString shown = window.statusBar()->currentMessage();
  EXPECT_EQ(shown, describe_chart_point(chart, at));
  EXPECT_TRUE(shown.contains(format_metric(first->value))) << shown.toStdString();

  QEvent leave(QEvent::Leave);
  QApplication::sendEvent(chart, &leave);
  EXPECT_EQ(window.statusBar()->currentMessage(), QString());
}

}  // namespace
}  // namespace kvlab::gui
