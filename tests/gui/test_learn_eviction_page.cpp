// The Learn view's eviction step, driven offscreen: the map it reveals step by step equals the
// engine's own EvictionMap from a simulation this test runs itself; the window, StreamingLLM and
// H2O rules hold on the cells drawn (newest tokens counted by hand, sinks at every step, the
// budget kept); the labels show this test's per-step numbers; Play / Pause / Step / Reset move
// the step; the link reproduces the page's run in the Eviction view.
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

#include "common/gui_format.h"
#include "eviction/eviction_map_chart.h"
#include "eviction/eviction_view.h"
#include "gui_test_support.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/sources/synthetic.h"
#include "learn/learn_eviction_page.h"
#include "learn/learn_view.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

constexpr int kContext = 160, kSteps = 64, kPrompt = kContext - kSteps;

// The page's cache, written out here: preset tiny, one layer, 160 tokens, one query per step.
SyntheticConfig tiny_layer() {
  SyntheticConfig c;
  c.preset = "tiny";
  c.layers = 1;
  c.context = kContext;
  c.seed = 1;
  c.queries = kSteps;
  return c;
}

EvictionConfig policy(EvictionPolicy p, double budget) {
  EvictionConfig c;
  c.policy = p;
  c.budget = Budget{budget, true};
  c.steps = kSteps;
  c.sinks = 4;
  c.recent_fraction = 0.5;
  return c;
}

EvictionReport reference(EvictionPolicy p, double budget) {
  auto cache = generate_synthetic(tiny_layer());
  EXPECT_TRUE(cache.ok()) << cache.message();
  auto report = simulate_eviction(*cache, policy(p, budget));
  EXPECT_TRUE(report.ok()) << report.message();
  return *report;
}

// What the chart draws in row `step`: the colour map's cells, checked against its data.
std::vector<CellState> drawn_row(const EvictionMapChart* chart, int step) {
  std::vector<CellState> row;
  const EvictionMapData& d = chart->data();
  for (int p = 0; p < d.positions; ++p) {
    const double cell = chart->color_map()->data()->cell(p, step);
    EXPECT_EQ(cell, d.at(step, p)) << "step " << step << ", position " << p;
    row.push_back(static_cast<CellState>(d.at(step, p)));
  }
  return row;
}

std::vector<int> kept_positions(const std::vector<CellState>& row) {
  std::vector<int> kept;
  for (int p = 0; p < static_cast<int>(row.size()); ++p) {
    if (row[p] == CellState::Kept || row[p] == CellState::Sink) kept.push_back(p);
  }
  return kept;
}

int budget_at(double fraction, int context) {
  return static_cast<int>(std::lround(fraction * context));
}

void go_to_step(LearnEvictionPage& page, int step) {
  page.reset_button()->click();
  for (int s = 0; s < step; ++s) page.step_button()->click();
  ASSERT_EQ(page.current_step(), step);
}

TEST(LearnEvictionPage, MapEqualsTheEnginesMapUpToTheCurrentStep) {
  LearnEvictionPage page;
  page.show();
  ASSERT_TRUE(page.error_text().isEmpty()) << page.error_text().toStdString();
  EXPECT_EQ(page.source().preset, "tiny");
  EXPECT_EQ(page.source().context, kContext);
  EXPECT_EQ(page.step_count(), kSteps);
  page.set_policy(EvictionPolicy::H2O);
  page.set_budget_percent(25);
  const EvictionReport want = reference(EvictionPolicy::H2O, 0.25);
  for (int head : {0, 1}) {
    page.set_kv_head(head);
    const EvictionMap& map = want.maps[0][head];
    for (int n : {0, 10, 37}) {
      go_to_step(page, n);
      ASSERT_EQ(page.chart()->data().steps, kSteps);
      ASSERT_EQ(page.chart()->data().positions, kContext);
      for (int s = 0; s < kSteps; ++s) {
        const std::vector<CellState> row = drawn_row(page.chart(), s);
        for (int p = 0; p < kContext; ++p) {
          const CellState want = s <= n ? map.state(s, p) : CellState::Absent;
          ASSERT_EQ(row[p], want) << "head " << head << ", after " << n << " steps, row " << s
                                  << ", position " << p;
        }
      }
    }
  }
}

TEST(LearnEvictionPage, WindowKeepsTheNewestBudgetTokens) {
  LearnEvictionPage page;
  page.set_policy(EvictionPolicy::Window);
  page.set_budget_percent(25);
  const EvictionReport want = reference(EvictionPolicy::Window, 0.25);
  for (int s : {0, 1, 30, kSteps - 1}) {
    go_to_step(page, s);
    const int context = kPrompt + s + 1;
    const int budget = budget_at(0.25, context);
    const std::vector<CellState> row = drawn_row(page.chart(), s);
    for (int p = 0; p < kContext; ++p) {
      const CellState expected = p >= context            ? CellState::Absent
                                 : p >= context - budget ? CellState::Kept
                                                         : CellState::Evicted;
      EXPECT_EQ(row[p], expected) << "step " << s << ", position " << p;
    }
    const EvictionStep& st = want.layers[0].steps[s];
    EXPECT_EQ(st.kept, budget);
    EXPECT_TRUE(page.kept_label()->text().contains(QStringLiteral("<b>%1</b>").arg(budget)))
        << page.kept_label()->text().toStdString();
    EXPECT_TRUE(page.mass_label()->text().contains(
        QStringLiteral("<b>%1</b>").arg(format_percent(st.attention_mass_retained))))
        << page.mass_label()->text().toStdString();
    EXPECT_TRUE(page.sinks_label()->text().contains(QStringLiteral("<b>0</b>")));
    EXPECT_TRUE(page.step_label()->text().contains(QStringLiteral("%1 tokens").arg(context)));
  }
}

TEST(LearnEvictionPage, StreamingKeepsTheSinksAtEveryStep) {
  LearnEvictionPage page;
  page.set_policy(EvictionPolicy::Streaming);
  page.set_budget_percent(20);
  const EvictionReport want = reference(EvictionPolicy::Streaming, 0.2);
  page.reset();
  for (int s = 0; s < kSteps; ++s) {
    ASSERT_EQ(page.current_step(), s);
    const int context = kPrompt + s + 1;
    const int budget = budget_at(0.2, context);
    const std::vector<CellState> row = drawn_row(page.chart(), s);
    for (int p = 0; p < 4; ++p) EXPECT_EQ(row[p], CellState::Sink) << "step " << s;
    // The rest of the budget: the newest tokens.
    std::vector<int> expected{0, 1, 2, 3};
    for (int p = context - (budget - 4); p < context; ++p) expected.push_back(p);
    EXPECT_EQ(kept_positions(row), expected) << "step " << s;
    EXPECT_TRUE(page.sinks_label()->text().contains(QStringLiteral("<b>4</b>")))
        << page.sinks_label()->text().toStdString();
    EXPECT_TRUE(page.kept_label()->text().contains(
        QStringLiteral("<b>%1</b>").arg(std::lround(want.layers[0].steps[s].kept))));
    EXPECT_TRUE(page.mass_label()->text().contains(
        format_percent(want.layers[0].steps[s].attention_mass_retained)));
    page.tick();  // what the timer does
  }
  EXPECT_EQ(page.current_step(), kSteps - 1);
}

TEST(LearnEvictionPage, H2OKeepsTheBudgetAndThePlantedHeavyHitters) {
  LearnEvictionPage page;
  page.set_policy(EvictionPolicy::H2O);
  page.set_budget_percent(25);
  const EvictionReport want = reference(EvictionPolicy::H2O, 0.25);
  const EvictionReport window = reference(EvictionPolicy::Window, 0.25);
  for (int head : {0, 1}) {
    page.set_kv_head(head);
    page.reset();
    for (int s = 0; s < kSteps; ++s, page.step()) {
      const int context = kPrompt + s + 1;
      const int budget = budget_at(0.25, context);
      const std::vector<int> kept = kept_positions(drawn_row(page.chart(), s));
      ASSERT_EQ(static_cast<int>(kept.size()), budget) << "step " << s;
      // The newest half of the budget is always there.
      const int recent = static_cast<int>(std::floor(0.5 * budget));
      for (int p = context - recent; p < context; ++p) {
        EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), p)) << s << " " << p;
      }
      EXPECT_TRUE(page.mass_label()->text().contains(
          format_percent(want.layers[0].steps[s].attention_mass_retained)));
    }
    // At the last step H2O still holds the planted sink and every planted heavy hitter; the
    // window of the same budget has lost the older ones, and retains less attention.
    const SyntheticLandmarks marks = synthetic_landmarks(tiny_layer());
    const EvictionMap& map = want.maps[0][head];
    EXPECT_EQ(map.state(kSteps - 1, marks.sink), CellState::Kept);
    for (int t : marks.heavy_hitters) {
      EXPECT_EQ(map.state(kSteps - 1, t), CellState::Kept) << "heavy hitter " << t;
    }
    EXPECT_TRUE(page.landmarks_label()->text().contains(
        QStringLiteral("<b>%1</b> of %1").arg(marks.heavy_hitters.size())))
        << page.landmarks_label()->text().toStdString();
    const bool needle_kept = map.state(kSteps - 1, marks.needle) == CellState::Kept;
    EXPECT_TRUE(page.landmarks_label()->text().contains(
        QStringLiteral("needle (token %1): <b>%2</b>")
            .arg(marks.needle)
            .arg(needle_kept ? QStringLiteral("kept") : QStringLiteral("evicted"))));
    // The map marks the planted heavy hitters on its top axis and the needle with a line.
    auto ticker = qSharedPointerDynamicCast<QCPAxisTickerText>(page.chart()->xAxis2->ticker());
    ASSERT_TRUE(ticker);
    std::vector<int> marked;
    for (double t : ticker->ticks().keys()) marked.push_back(static_cast<int>(t));
    EXPECT_EQ(marked, marks.heavy_hitters);
    EXPECT_TRUE(page.chart()->needle_line()->visible());
    EXPECT_EQ(page.chart()->needle_line()->point1->key(), marks.needle);
  }
  EXPECT_GT(want.layers[0].steps.back().attention_mass_retained,
            window.layers[0].steps.back().attention_mass_retained);
}

TEST(LearnEvictionPage, PlayPauseStepAndResetMoveTheStep) {
  LearnEvictionPage page;
  page.show();
  EXPECT_EQ(page.current_step(), kSteps - 1);  // opens on the whole map
  EXPECT_FALSE(page.step_button()->isEnabled());
  page.reset_button()->click();
  EXPECT_EQ(page.current_step(), 0);
  EXPECT_FALSE(page.is_playing());
  EXPECT_TRUE(page.step_button()->isEnabled());
  page.step_button()->click();
  page.step_button()->click();
  EXPECT_EQ(page.current_step(), 2);

  // A control re-runs the simulation and keeps the step.
  page.set_policy(EvictionPolicy::Window);
  ASSERT_TRUE(page.report().has_value());
  EXPECT_EQ(page.report()->policy, "window");
  EXPECT_EQ(page.current_step(), 2);
  EXPECT_TRUE(page.chart()->title().contains(QStringLiteral("window")));

  page.timer()->setInterval(5);
  page.play_button()->click();
  EXPECT_TRUE(page.is_playing());
  QTest::qWait(60);
  page.play_button()->click();  // pause
  EXPECT_FALSE(page.is_playing());
  const int paused_at = page.current_step();
  EXPECT_GT(paused_at, 2);
  QTest::qWait(30);
  EXPECT_EQ(page.current_step(), paused_at);

  page.play();
  QElapsedTimer timer;
  timer.start();
  while (page.is_playing() && timer.elapsed() < 20'000) QApplication::processEvents();
  EXPECT_FALSE(page.is_playing());
  EXPECT_EQ(page.current_step(), kSteps - 1);
  page.step();  // nothing after the last step
  EXPECT_EQ(page.current_step(), kSteps - 1);
  page.play();  // from the end, Play starts again at step 0
  EXPECT_EQ(page.current_step(), 0);
  EXPECT_TRUE(page.is_playing());
  page.reset();
  EXPECT_FALSE(page.is_playing());
  EXPECT_EQ(page.current_step(), 0);
}

TEST(LearnEvictionPage, LinkCarriesTheSettingsAndEveryControlHasATooltip) {
  LearnEvictionPage page;
  page.set_policy(EvictionPolicy::Streaming);
  page.set_budget_percent(40);
  const LearnLink link = page.link();
  EXPECT_EQ(link.target, LearnLink::Target::Eviction);
  ASSERT_TRUE(link.source && link.eviction);
  EXPECT_EQ(link.source->preset, "tiny");
  EXPECT_EQ(link.source->layers, 1);
  EXPECT_EQ(link.source->context, kContext);
  EXPECT_EQ(link.eviction->policy, EvictionPolicy::Streaming);
  EXPECT_TRUE(link.eviction->budget.fraction);
  EXPECT_DOUBLE_EQ(link.eviction->budget.value, 0.40);
  EXPECT_EQ(link.eviction->steps, kSteps);
  EXPECT_EQ(link.eviction->sinks, 4);
  const EvictionReport want = reference(EvictionPolicy::Streaming, 0.40);
  ASSERT_TRUE(page.report().has_value());
  EXPECT_EQ(page.report()->maps[0][1].cells, want.maps[0][1].cells);

  EXPECT_EQ(page.full_view_button()->text(), QStringLiteral("Open in the Eviction view"));
  EXPECT_TRUE(page.citation_label()->text().contains(QStringLiteral("arXiv:2309.17453")));
  EXPECT_TRUE(page.citation_label()->text().contains(QStringLiteral("arXiv:2306.14048")));
  std::string missing;
  for (QWidget* w : page.findChildren<QWidget*>()) {
    auto* label = qobject_cast<QLabel*>(w);
    const bool control = qobject_cast<QAbstractButton*>(w) || qobject_cast<QComboBox*>(w) ||
                         qobject_cast<QAbstractSpinBox*>(w);
    if ((control || (label && label->buddy())) && w->toolTip().trimmed().isEmpty()) {
      missing += std::string(" ") + w->metaObject()->className();
    }
  }
  const std::vector<QWidget*> readouts{page.chart(),          page.step_label(), page.kept_label(),
                                       page.sinks_label(),    page.mix_label(),  page.mass_label(),
                                       page.landmarks_label()};
  for (QWidget* w : readouts) {
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
