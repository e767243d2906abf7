// The Eviction page with the prefill presses: the panel offers each policy with its paper,
// schedule and its own options, and its settings round-trip through the runs store's JSON; every
// policy draws its eviction map; SnapKV, PyramidKV, Ada-KV, ThinK and MiniCache fill the tabs
// made for them (checked against the engine's own report); the needle query is marked.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QSpinBox>
#include <QTabWidget>

#include "common/source_panel.h"
#include "eviction/eviction_budget_chart.h"
#include "eviction/eviction_channel_chart.h"
#include "eviction/eviction_map_chart.h"
#include "eviction/eviction_metrics_panel.h"
#include "eviction/eviction_policy_panel.h"
#include "eviction/eviction_runner.h"
#include "eviction/eviction_series_chart.h"
#include "eviction/eviction_view.h"
#include "eviction/minicache_chart.h"
#include "gui_test_support.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/eviction/eviction_json.h"

namespace kvlab::gui {
namespace {

using gui_test::engine_eviction_report;
using gui_test::tiny_source;

constexpr int kTimeoutMs = 60'000;
constexpr int kSteps = 16;

SyntheticConfig source(int layers) {
  SyntheticConfig s = tiny_source();
  s.layers = layers;
  return s;
}

EvictionConfig press(EvictionPolicy p, double budget_fraction) {
  EvictionConfig c;
  c.policy = p;
  c.budget = Budget{budget_fraction, true};
  c.steps = kSteps;
  c.window = 8;
  c.pool = 3;
  return c;
}

void run_view(EvictionView& view, const SyntheticConfig& synthetic, const EvictionConfig& config) {
  view.source_panel()->set_synthetic(synthetic);
  view.policy_panel()->set_config(config);
  view.policy_panel()->set_compare(std::nullopt);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  ASSERT_TRUE(view.model()->report());
}

// The values drawn by a QCPBars or QCPGraph, in key order.
template <typename Plottable>
std::vector<double> bar_values(const Plottable* plottable) {
  std::vector<double> out;
  for (auto it = plottable->data()->constBegin(); it != plottable->data()->constEnd(); ++it) {
    out.push_back(it->value);
  }
  return out;
}

int evicted_at_step0(const EvictionMapChart& chart) {
  const EvictionMapData& d = chart.data();
  int n = 0;
  for (int p = 0; p < d.positions; ++p) {
    n += d.at(0, p) == static_cast<std::uint8_t>(CellState::Evicted);
  }
  return n;
}

TEST(EvictionPolicyPanel, OffersEveryPolicyWithItsPaperScheduleAndOptions) {
  EvictionPolicyPanel panel;
  panel.show();
  auto* policy = gui_test::child<QComboBox>(&panel, "policy");
  auto* about = gui_test::child<QLabel>(&panel, "about");
  auto* unit = gui_test::child<QComboBox>(gui_test::child<BudgetEdit>(&panel, "budget"), "unit");
  auto* scorer = gui_test::child<QComboBox>(&panel, "scorer");
  auto* think_tokens = gui_test::child<QCheckBox>(&panel, "think_tokens");
  EXPECT_EQ(policy->count(), static_cast<int>(eviction_policy_ids().size()));
  const auto pick = [&](const char* id) {
    policy->setCurrentText(QString::fromLatin1(id));
    ASSERT_EQ(policy->currentText(), QString::fromLatin1(id));
  };
  const auto shown = [&](const char* field) { return gui_test::field_shown(panel, field); };

  pick("snapkv");
  EXPECT_TRUE(about->text().contains(QStringLiteral("SnapKV (Li et al. 2024)")));
  EXPECT_TRUE(about->text().contains(QStringLiteral("once, when the prefill ends")));
  EXPECT_EQ(gui_test::child<QLabel>(&panel, "budget_caption")->text(),
            QStringLiteral("Budget of the prompt"));
  EXPECT_EQ(unit->itemText(1), QStringLiteral("% of prompt"));
  EXPECT_TRUE(shown("window") && shown("pool"));
  EXPECT_FALSE(shown("beta") || shown("scorer") || shown("sinks") || shown("recent_fraction"));

  pick("tova");
  EXPECT_TRUE(about->text().contains(QStringLiteral("after every decode step")));
  EXPECT_EQ(gui_test::child<QLabel>(&panel, "budget_caption")->text(), QStringLiteral("Budget"));
  EXPECT_EQ(unit->itemText(1), QStringLiteral("% of context"));
  EXPECT_FALSE(shown("window") || shown("pool"));

  pick("pyramidkv");
  EXPECT_TRUE(shown("beta") && shown("window"));

  // Ada-KV wraps a scorer: only the prefill scorers are offered, and the scorer's options show.
  pick("adakv");
  EXPECT_TRUE(shown("scorer") && shown("safeguard"));
  ASSERT_EQ(scorer->count(), 5);
  for (int i = 0; i < scorer->count(); ++i) {
    const auto p = parse_eviction_policy(scorer->itemText(i).toStdString());
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(is_prefill_scorer(*p)) << scorer->itemText(i).toStdString();
  }
  scorer->setCurrentText(QStringLiteral("pyramidkv"));
  EXPECT_TRUE(shown("beta") && shown("pool"));
  scorer->setCurrentText(QStringLiteral("knorm"));
  EXPECT_FALSE(shown("beta") || shown("pool") || shown("window"));
  scorer->setCurrentText(QStringLiteral("expected-attention"));
  EXPECT_TRUE(shown("future") && shown("covariance"));

  pick("chunkkv");
  EXPECT_TRUE(shown("chunk") && shown("scorer"));
  EXPECT_FALSE(shown("safeguard"));

  // ThinK prunes channels; its token budget and scorer only with "also drop tokens".
  pick("think");
  think_tokens->setChecked(false);
  EXPECT_TRUE(shown("key_channels") && shown("think_tokens"));
  EXPECT_FALSE(shown("budget") || shown("scorer"));
  think_tokens->setChecked(true);
  EXPECT_TRUE(shown("budget") && shown("scorer"));

  pick("expected-attention");
  EXPECT_TRUE(shown("future") && shown("covariance") && shown("value_norm") && shown("sinks"));
  EXPECT_FALSE(shown("pool"));

  pick("minicache");
  EXPECT_TRUE(shown("merge_t") && shown("retain"));
  EXPECT_FALSE(shown("budget") || shown("key_channels"));
}

TEST(EvictionPolicyPanel, PressOptionsRoundTripThroughTheStoredJson) {
  EvictionConfig c;
  c.policy = EvictionPolicy::ThinK;
  c.budget = Budget{0.3, true};
  c.steps = 24;
  c.window = 12;
  c.pool = 7;
  c.pyramid_beta = 8;
  c.scorer = EvictionPolicy::KeyDiff;
  c.think_tokens = true;
  c.ada_safeguard = 0.35;
  c.chunk = 6;
  c.key_channels = 0.25;
  c.future = 256;
  c.covariance = false;
  c.value_norm = false;
  c.merge_t = 0.4;
  c.retain = 0.1;
  c.sinks = 2;

  EvictionPolicyPanel panel;
  panel.set_config(c);
  const EvictionConfig back = panel.config();
  EXPECT_EQ(eviction_params_json(back), eviction_params_json(c));
  EXPECT_EQ(back.scorer, EvictionPolicy::KeyDiff);
  EXPECT_DOUBLE_EQ(back.key_channels, 0.25);
  EXPECT_FALSE(back.covariance);

  // As the view stores it and a stored run gives it back to a fresh panel.
  auto parsed = eviction_config_from_json(eviction_params_json(back));
  ASSERT_TRUE(parsed.ok()) << parsed.message();
  EvictionPolicyPanel reopened;
  reopened.set_config(*parsed);
  EXPECT_EQ(eviction_params_json(reopened.config()), eviction_params_json(c));
  auto* reopened_scorer = gui_test::child<QComboBox>(&reopened, "scorer");
  EXPECT_EQ(reopened_scorer->currentText(), QStringLiteral("keydiff"));
  EXPECT_TRUE(gui_test::child<QCheckBox>(&reopened, "think_tokens")->isChecked());
  EXPECT_TRUE(reopened.is_field_visible(reopened_scorer));
}

TEST(EvictionView, EveryPolicyDrawsItsMap) {
  EvictionView view(nullptr);
  view.resize(1300, 900);
  view.show();
  const SyntheticConfig synthetic = source(4);
  for (auto id : eviction_policy_ids()) {
    const auto policy = parse_eviction_policy(id);
    ASSERT_TRUE(policy.ok());
    SCOPED_TRACE(std::string(id));
    EvictionConfig c = press(*policy, 0.25);
    c.think_tokens = true;
    run_view(view, synthetic, c);
    const EvictionReport& report = *view.model()->report();
    EXPECT_EQ(view.map_chart()->data().positions, report.tokens);
    EXPECT_EQ(view.map_chart()->data().steps, kSteps);
    EXPECT_FALSE(gui_test::child<QLabel>(&view, "error")->isVisible());
    // A prefill press that drops tokens has dropped them when the prefill ended: step 0.
    const bool drops = eviction_schedule(*policy) == EvictionSchedule::Prefill &&
                       *policy != EvictionPolicy::MiniCache;
    if (drops) {
      EXPECT_GT(evicted_at_step0(*view.map_chart()), 0);
    }
    EXPECT_EQ(view.chart_tabs()->isTabVisible(EvictionView::kBudgetTab), drops);
  }
}

TEST(EvictionView, PyramidAndAdaKvBudgetsAreTheEngines) {
  const SyntheticConfig synthetic = source(4);
  EvictionView view(nullptr);
  view.resize(1300, 900);
  view.show();

  const EvictionConfig pyramid = press(EvictionPolicy::PyramidKV, 0.5);
  const EvictionReport expected = engine_eviction_report(synthetic, pyramid);
  run_view(view, synthetic, pyramid);
  ASSERT_TRUE(view.chart_tabs()->isTabVisible(EvictionView::kBudgetTab));
  EXPECT_FALSE(view.chart_tabs()->isTabVisible(EvictionView::kChannelTab));
  EXPECT_FALSE(view.chart_tabs()->isTabVisible(EvictionView::kMiniCacheTab));
  const EvictionBudgetChart& chart = *gui_test::child<EvictionBudgetChart>(&view, "budgets");
  ASSERT_EQ(chart.data().layers, 4);
  ASSERT_EQ(chart.data().kv_heads, 2);
  const auto budgets = bar_values(gui_test::child<QCPBars>(&chart, "budget_bars"));
  ASSERT_EQ(budgets.size(), 4u);
  for (int l = 0; l < 4; ++l) {
    EXPECT_EQ(budgets[l], expected.layers[l].budget_tokens - kSteps) << "layer " << l;
  }
  // The pyramid: the bottom layer keeps more of the prompt than the top one.
  EXPECT_GT(budgets.front(), budgets.back());
  QCPColorMapData* cells = gui_test::child<QCPColorMap>(&chart, "color_map")->data();
  ASSERT_EQ(cells->keySize(), 4);
  ASSERT_EQ(cells->valueSize(), 2);
  for (int l = 0; l < 4; ++l) {
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(cells->cell(l, h), expected.layers[l].heads[h].prompt_kept)
          << "layer " << l << " head " << h;
    }
  }

  // Ada-KV spreads a layer's budget over its heads: the heat map shows each head's own.
  EvictionConfig ada = press(EvictionPolicy::AdaKV, 0.25);
  ada.scorer = EvictionPolicy::SnapKV;
  const EvictionReport ada_expected = engine_eviction_report(synthetic, ada);
  run_view(view, synthetic, ada);
  cells = gui_test::child<QCPColorMap>(gui_test::child<EvictionBudgetChart>(&view, "budgets"),
                                       "color_map")
              ->data();
  bool spread = false;
  for (int l = 0; l < 4; ++l) {
    const auto& heads = ada_expected.layers[l].heads;
    spread = spread || heads[0].prompt_kept != heads[1].prompt_kept;
    for (int h = 0; h < 2; ++h) EXPECT_EQ(cells->cell(l, h), heads[h].prompt_kept);
  }
  EXPECT_TRUE(spread) << "Ada-KV gave every head the same budget on this source";
}

TEST(EvictionView, SnapKvMarksTheNeedleQuery) {
  const SyntheticConfig synthetic = source(2);
  const EvictionConfig snap = press(EvictionPolicy::SnapKV, 0.25);
  const EvictionReport expected = engine_eviction_report(synthetic, snap);
  ASSERT_TRUE(expected.mass_without_needle_step && expected.rel_error_without_needle_step);
  EvictionView view(nullptr);
  view.resize(1300, 900);
  view.show();
  auto* metrics = gui_test::child<EvictionMetricsPanel>(&view, "metrics");
  run_view(view, synthetic, snap);
  EXPECT_GT(evicted_at_step0(*view.map_chart()), 0);
  const EvictionSeriesChart& series = *gui_test::child<EvictionSeriesChart>(&view, "series");
  ASSERT_TRUE(gui_test::child<QCPItemStraightLine>(&series, "needle_marker")->visible());
  EXPECT_DOUBLE_EQ(
      gui_test::child<QCPItemStraightLine>(&series, "needle_marker")->point1->coords().x(),
      kSteps - 1);
  EXPECT_EQ(gui_test::child<QCPItemText>(&series, "needle_marker_label")->text(),
            QStringLiteral("needle query"));
  // The numbers of ordinary decoding beside (eviction_metrics_text.h; what the texts say is
  // tested in tests/gui/models/test_eviction_metrics_text.cpp).
  const EvictionMetricTexts all = eviction_metric_texts(eviction_summary(expected, -1));
  EXPECT_EQ(gui_test::child<QLabel>(metrics, "mass_retained")->text(),
            all[EvictionMetric::MassRetained]);
  EXPECT_EQ(gui_test::child<QLabel>(metrics, "rel_error")->text(), all[EvictionMetric::RelError]);
  EXPECT_TRUE(all[EvictionMetric::MassRetained].contains(QStringLiteral("needle")));
  // Over one layer there is no such total: the plain number.
  gui_test::child<QComboBox>(&view, "scope")->setCurrentIndex(1);
  const int layer = gui_test::child<QSpinBox>(&view, "layer")->value();
  EXPECT_EQ(gui_test::child<QLabel>(metrics, "mass_retained")->text(),
            eviction_metric_texts(eviction_summary(expected, layer))[EvictionMetric::MassRetained]);
  EXPECT_FALSE(
      gui_test::child<QLabel>(metrics, "mass_retained")->text().contains(QStringLiteral("needle")));
}

TEST(EvictionView, ThinkChannelMapIsTheEngines) {
  const SyntheticConfig synthetic = source(2);
  EvictionConfig think = press(EvictionPolicy::ThinK, 0.25);
  think.key_channels = 0.5;
  const EvictionReport expected = engine_eviction_report(synthetic, think);
  EvictionView view(nullptr);
  view.resize(1300, 900);
  view.show();
  run_view(view, synthetic, think);
  ASSERT_TRUE(view.chart_tabs()->isTabVisible(EvictionView::kChannelTab));
  const EvictionChannelChart& chart = *gui_test::child<EvictionChannelChart>(&view, "channels");
  ASSERT_EQ(chart.data().rows, 4);  // 2 layers × 2 KV heads
  ASSERT_EQ(chart.data().dim, 16);
  QCPColorMapData* cells = gui_test::child<QCPColorMap>(&chart, "color_map")->data();
  ASSERT_EQ(cells->keySize(), 16);
  ASSERT_EQ(cells->valueSize(), 4);
  int kept = 0;
  for (int l = 0; l < 2; ++l) {
    for (int h = 0; h < 2; ++h) {
      const auto& mask = expected.layers[l].channel_masks[h];
      for (int c = 0; c < 16; ++c) {
        EXPECT_EQ(cells->cell(c, l * 2 + h), mask[c]) << l << "/" << h << "/" << c;
        kept += mask[c];
      }
    }
  }
  EXPECT_EQ(kept, 4 * 8);  // half of each head's channels
  EXPECT_TRUE(chart.title().contains(QStringLiteral("8 of 16")));
}

TEST(EvictionView, MiniCacheShowsItsMergedPairs) {
  const SyntheticConfig synthetic = source(4);  // layers 2 and 3 are merged
  const EvictionConfig mini = press(EvictionPolicy::MiniCache, 0.25);
  const EvictionReport expected = engine_eviction_report(synthetic, mini);
  EvictionView view(nullptr);
  view.resize(1300, 900);
  view.show();
  run_view(view, synthetic, mini);
  ASSERT_TRUE(view.chart_tabs()->isTabVisible(EvictionView::kMiniCacheTab));
  EXPECT_FALSE(view.chart_tabs()->isTabVisible(EvictionView::kChannelTab));
  const MiniCacheChart& chart = *gui_test::child<MiniCacheChart>(&view, "minicache");
  EXPECT_EQ(chart.data().partner, (std::vector<int>{-1, -1, 3, 2}));
  EXPECT_EQ(chart.pair_marks(), 1);
  EXPECT_EQ(bar_values(gui_test::child<QCPBars>(&chart, "merged_bars")).size(), 2u);
  EXPECT_EQ(bar_values(gui_test::child<QCPBars>(&chart, "own_bars")).size(), 2u);
  EXPECT_EQ(bar_values(gui_test::child<QCPBars>(&chart, "full_bars")).size(), 4u);
  const std::vector<double> retained =
      bar_values(gui_test::child<QCPGraph>(&chart, "retained_graph"));
  ASSERT_EQ(retained.size(), 2u);
  EXPECT_DOUBLE_EQ(retained[0], expected.layers[2].retained);
  EXPECT_DOUBLE_EQ(retained[1], expected.layers[3].retained);
  // Merged layers hold less than the full cache; the bars are in the chart's byte unit.
  const auto merged = bar_values(gui_test::child<QCPBars>(&chart, "merged_bars"));
  const auto full = bar_values(gui_test::child<QCPBars>(&chart, "full_bars"));
  EXPECT_LT(merged[0], full[2]);
}

}  // namespace
}  // namespace kvlab::gui
