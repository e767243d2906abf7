// The Learn view's eviction step, driven offscreen: the chart draws the model's map (the model's
// numbers are tested alone in tests/gui/models), with the planted heavy hitters and the needle;
// Play / Pause / Step / Reset move the step; every control explains itself; the link reproduces
// the page's run in the Eviction view.
#include <qcustomplot.h>

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QSpinBox>
#include <QTest>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/playback_controls.h"
#include "eviction/eviction_map_chart.h"
#include "eviction/eviction_view.h"
#include "gui_test_support.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/sources/synthetic.h"
#include "learn/learn_eviction_page.h"
#include "learn/learn_view.h"
#include "learn_eviction_reference.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

using namespace learn_eviction;

// What the chart draws in row `step`: the colour map's cells, checked against its data.
std::vector<CellState> drawn_row(const EvictionMapChart* chart, int step) {
  std::vector<CellState> row;
  const EvictionMapData& d = chart->data();
  for (int p = 0; p < d.positions; ++p) {
    const double cell = gui_test::child<QCPColorMap>(chart, "color_map")->data()->cell(p, step);
    EXPECT_EQ(cell, d.at(step, p)) << "step " << step << ", position " << p;
    row.push_back(static_cast<CellState>(d.at(step, p)));
  }
  return row;
}

EvictionMapChart* chart_of(const LearnEvictionPage& page) {
  return page.findChild<EvictionMapChart*>();
}

TEST(LearnEvictionPage, ChartDrawsTheModelsMapAndThePlantedTokens) {
  LearnEvictionPage page;
  page.show();
  page.set_policy(EvictionPolicy::H2O);
  page.set_budget_percent(25);
  const EvictionReport want = reference(EvictionPolicy::H2O, 0.25);
  auto* chart = chart_of(page);
  ASSERT_NE(chart, nullptr);
  auto* controls = page.findChild<PlaybackControls*>();
  ASSERT_NE(controls, nullptr);
  for (int head : {0, 1}) {
    page.set_kv_head(head);
    const EvictionMap& map = want.maps[0][head];
    gui_test::child<QPushButton>(controls, "reset")->click();
    for (int s = 0; s < 10; ++s) controls->step_button()->click();
    ASSERT_EQ(page.model().current_step(), 10);
    for (int s : {0, 10, 11, kSteps - 1}) {
      const std::vector<CellState> row = drawn_row(chart, s);
      for (int p = 0; p < kContext; ++p) {
        ASSERT_EQ(row[p], s <= 10 ? map.state(s, p) : CellState::Absent) << s << " " << p;
      }
    }
    const SyntheticLandmarks marks = synthetic_landmarks(tiny_layer());
    // The map marks the planted heavy hitters on its top axis and the needle with a line.
    auto ticker = qSharedPointerDynamicCast<QCPAxisTickerText>(chart->xAxis2->ticker());
    ASSERT_TRUE(ticker);
    std::vector<int> marked;
    for (double t : ticker->ticks().keys()) marked.push_back(static_cast<int>(t));
    EXPECT_EQ(marked, marks.heavy_hitters);
    EXPECT_TRUE(gui_test::child<QCPItemStraightLine>(chart, "needle_line")->visible());
    EXPECT_EQ(gui_test::child<QCPItemStraightLine>(chart, "needle_line")->point1->key(),
              marks.needle);
  }
}

TEST(LearnEvictionPage, PlayPauseStepAndResetMoveTheStep) {
  LearnEvictionPage page;
  page.show();
  auto* controls = page.findChild<PlaybackControls*>();
  ASSERT_NE(controls, nullptr);
  EXPECT_EQ(page.model().current_step(), kSteps - 1);  // opens on the whole map
  EXPECT_FALSE(controls->step_button()->isEnabled());
  gui_test::child<QPushButton>(controls, "reset")->click();
  EXPECT_EQ(page.model().current_step(), 0);
  EXPECT_FALSE(page.is_playing());
  EXPECT_TRUE(controls->step_button()->isEnabled());
  controls->step_button()->click();
  controls->step_button()->click();
  EXPECT_EQ(page.model().current_step(), 2);

  // A control re-runs the simulation and keeps the step.
  page.set_policy(EvictionPolicy::Window);
  ASSERT_TRUE(page.model().report().has_value());
  EXPECT_EQ(page.model().report()->policy, "window");
  EXPECT_EQ(page.model().current_step(), 2);
  EXPECT_TRUE(chart_of(page)->title().contains(QStringLiteral("window")));

  gui_test::child<QTimer>(controls, "timer")->setInterval(5);
  controls->play_button()->click();
  EXPECT_TRUE(page.is_playing());
  QTest::qWait(60);
  controls->play_button()->click();  // pause
  EXPECT_FALSE(page.is_playing());
  const int paused_at = page.model().current_step();
  EXPECT_GT(paused_at, 2);
  QTest::qWait(30);
  EXPECT_EQ(page.model().current_step(), paused_at);

  page.play();
  QElapsedTimer timer;
  timer.start();
  while (page.is_playing() && timer.elapsed() < 20'000) QApplication::processEvents();
  EXPECT_FALSE(page.is_playing());
  EXPECT_EQ(page.model().current_step(), kSteps - 1);
  page.step();  // nothing after the last step
  EXPECT_EQ(page.model().current_step(), kSteps - 1);
  page.play();  // from the end, Play starts again at step 0
  EXPECT_EQ(page.model().current_step(), 0);
  EXPECT_TRUE(page.is_playing());
  page.reset();
  EXPECT_FALSE(page.is_playing());
  EXPECT_EQ(page.model().current_step(), 0);
}

TEST(LearnEvictionPage, EveryControlAndReadingHasATooltip) {
  LearnEvictionPage page;
  EXPECT_EQ(page.full_view_button()->text(), QStringLiteral("Open in the Eviction view"));
  EXPECT_TRUE(page.findChild<QLabel*>(QStringLiteral("citation"))
                  ->text()
                  .contains(QStringLiteral("arXiv:2309.17453")));
  EXPECT_TRUE(page.findChild<QLabel*>(QStringLiteral("citation"))
                  ->text()
                  .contains(QStringLiteral("arXiv:2306.14048")));
  std::string missing;
  for (QWidget* w : page.findChildren<QWidget*>()) {
    auto* label = qobject_cast<QLabel*>(w);
    const bool control = qobject_cast<QAbstractButton*>(w) || qobject_cast<QComboBox*>(w) ||
                         qobject_cast<QAbstractSpinBox*>(w);
    if ((control || (label && label->buddy())) && w->toolTip().trimmed().isEmpty()) {
      missing += std::string(" ") + w->metaObject()->className();
    }
  }
  std::vector<QWidget*> readouts{chart_of(page)};
  for (const char* name : {"step", "kept", "sinks", "mix", "mass", "landmarks"}) {
    readouts.push_back(page.findChild<QLabel*>(QString::fromLatin1(name)));
  }
  for (QWidget* w : readouts) {
    ASSERT_NE(w, nullptr);
    if (w->toolTip().trimmed().isEmpty()) missing += " readout";
  }
  EXPECT_TRUE(missing.empty()) << "without a tooltip:" << missing;
}

TEST(LearnEvictionPage, MainWindowRunsTheLinkInTheEvictionView) {
  MainWindow window(gui_test::fresh_dir() / "runs.sqlite");
  window.show();
  LearnView* learn = window.learn_view();
  const int index = learn->index_of(QStringLiteral("learn-eviction"));
  ASSERT_GE(index, 0);
  auto* page = qobject_cast<LearnEvictionPage*>(learn->page(index));
  ASSERT_NE(page, nullptr);
  page->set_policy(EvictionPolicy::Streaming);
  page->set_budget_percent(30);
  window.show_page(Page::Learn);
  page->full_view_button()->click();
  EXPECT_EQ(window.current_page(), Page::Eviction);
  ASSERT_TRUE(window.eviction_view()->wait_until_done(120'000));
  const auto& run = window.eviction_view()->model()->report();
  ASSERT_TRUE(run.has_value()) << window.eviction_view()->last_error().toStdString();
  EXPECT_EQ(run->policy, "streaming");
  EXPECT_EQ(run->tokens, kContext);
  EXPECT_EQ(run->steps, kSteps);
  const EvictionReport want = reference(EvictionPolicy::Streaming, 0.30);
  ASSERT_EQ(run->maps.size(), 1u);
  for (int h = 0; h < 2; ++h) EXPECT_EQ(run->maps[0][h].cells, want.maps[0][h].cells) << h;
}

}  // namespace
}  // namespace kvlab::gui
