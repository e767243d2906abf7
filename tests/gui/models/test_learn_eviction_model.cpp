// Learn step (d)'s model alone: the map it reveals step by step equals the engine's own
// EvictionMap from a simulation this test runs itself; the window, StreamingLLM and H2O rules
// hold on the cells (newest tokens counted by hand, sinks at every step, the budget kept); the
// texts show this test's per-step numbers; the link carries the settings.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/gui_format.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/sources/synthetic.h"
#include "learn/learn_eviction_model.h"
#include "learn_eviction_reference.h"

namespace kvlab::gui {
namespace {

using namespace learn_eviction;

// Row `step` of the model's map of its current KV head.
std::vector<CellState> model_row(const LearnEvictionModel& model, int step) {
  std::vector<CellState> row;
  const auto d = model.map_data();
  EXPECT_TRUE(d.has_value());
  if (!d) return row;
  for (int p = 0; p < d->positions; ++p) row.push_back(static_cast<CellState>(d->at(step, p)));
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

void go_to_step(LearnEvictionModel& model, int step) {
  model.reset();
  for (int s = 0; s < step; ++s) model.step();
  ASSERT_EQ(model.current_step(), step);
}

TEST(LearnEvictionModel, MapEqualsTheEnginesMapUpToTheCurrentStep) {
  LearnEvictionModel page;
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
      const auto data = page.map_data();
      ASSERT_TRUE(data.has_value());
      ASSERT_EQ(data->steps, kSteps);
      ASSERT_EQ(data->positions, kContext);
      for (int s = 0; s < kSteps; ++s) {
        const std::vector<CellState> row = model_row(page, s);
        for (int p = 0; p < kContext; ++p) {
          const CellState want = s <= n ? map.state(s, p) : CellState::Absent;
          ASSERT_EQ(row[p], want) << "head " << head << ", after " << n << " steps, row " << s
                                  << ", position " << p;
        }
      }
    }
  }
}

TEST(LearnEvictionModel, WindowKeepsTheNewestBudgetTokens) {
  LearnEvictionModel page;
  page.set_policy(EvictionPolicy::Window);
  page.set_budget_percent(25);
  const EvictionReport want = reference(EvictionPolicy::Window, 0.25);
  for (int s : {0, 1, 30, kSteps - 1}) {
    go_to_step(page, s);
    const int context = kPrompt + s + 1;
    const int budget = budget_at(0.25, context);
    const std::vector<CellState> row = model_row(page, s);
    for (int p = 0; p < kContext; ++p) {
      const CellState expected = p >= context            ? CellState::Absent
                                 : p >= context - budget ? CellState::Kept
                                                         : CellState::Evicted;
      EXPECT_EQ(row[p], expected) << "step " << s << ", position " << p;
    }
    const EvictionStep& st = want.layers[0].steps[s];
    EXPECT_EQ(st.kept, budget);
    EXPECT_TRUE(page.texts().kept.contains(QStringLiteral("<b>%1</b>").arg(budget)))
        << page.texts().kept.toStdString();
    EXPECT_TRUE(page.texts().mass.contains(
        QStringLiteral("<b>%1</b>").arg(format_percent(st.attention_mass_retained))))
        << page.texts().mass.toStdString();
    EXPECT_TRUE(page.texts().sinks.contains(QStringLiteral("<b>0</b>")));
    EXPECT_TRUE(page.texts().step.contains(QStringLiteral("%1 tokens").arg(context)));
  }
}

TEST(LearnEvictionModel, StreamingKeepsTheSinksAtEveryStep) {
  LearnEvictionModel page;
  page.set_policy(EvictionPolicy::Streaming);
  page.set_budget_percent(20);
  const EvictionReport want = reference(EvictionPolicy::Streaming, 0.2);
  page.reset();
  for (int s = 0; s < kSteps; ++s) {
    ASSERT_EQ(page.current_step(), s);
    const int context = kPrompt + s + 1;
    const int budget = budget_at(0.2, context);
    const std::vector<CellState> row = model_row(page, s);
    for (int p = 0; p < 4; ++p) EXPECT_EQ(row[p], CellState::Sink) << "step " << s;
    // The rest of the budget: the newest tokens.
    std::vector<int> expected{0, 1, 2, 3};
    for (int p = context - (budget - 4); p < context; ++p) expected.push_back(p);
    EXPECT_EQ(kept_positions(row), expected) << "step " << s;
    EXPECT_TRUE(page.texts().sinks.contains(QStringLiteral("<b>4</b>")))
        << page.texts().sinks.toStdString();
    EXPECT_TRUE(page.texts().kept.contains(
        QStringLiteral("<b>%1</b>").arg(std::lround(want.layers[0].steps[s].kept))));
    EXPECT_TRUE(page.texts().mass.contains(
        format_percent(want.layers[0].steps[s].attention_mass_retained)));
    page.step();  // what the timer does
  }
  EXPECT_EQ(page.current_step(), kSteps - 1);
}

TEST(LearnEvictionModel, H2OKeepsTheBudgetAndThePlantedHeavyHitters) {
  LearnEvictionModel page;
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
      const std::vector<int> kept = kept_positions(model_row(page, s));
      ASSERT_EQ(static_cast<int>(kept.size()), budget) << "step " << s;
      // The newest half of the budget is always there.
      const int recent = static_cast<int>(std::floor(0.5 * budget));
      for (int p = context - recent; p < context; ++p) {
        EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), p)) << s << " " << p;
      }
      EXPECT_TRUE(page.texts().mass.contains(
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
    EXPECT_TRUE(page.texts().landmarks.contains(
        QStringLiteral("<b>%1</b> of %1").arg(marks.heavy_hitters.size())))
        << page.texts().landmarks.toStdString();
    const bool needle_kept = map.state(kSteps - 1, marks.needle) == CellState::Kept;
    EXPECT_TRUE(page.texts().landmarks.contains(
        QStringLiteral("needle (token %1): <b>%2</b>")
            .arg(marks.needle)
            .arg(needle_kept ? QStringLiteral("kept") : QStringLiteral("evicted"))));
  }
  EXPECT_GT(want.layers[0].steps.back().attention_mass_retained,
            window.layers[0].steps.back().attention_mass_retained);
}

TEST(LearnEvictionModel, LinkCarriesTheSettings) {
  LearnEvictionModel page;
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
}

}  // namespace
}  // namespace kvlab::gui
