// The Eviction page as a person uses it: run a policy (and one to compare with) on a tiny
// synthetic cache, read the maps, curves and numbers against the engine's own report, switch
// layer and head, find the run in the store, reopen it, and get an error (not a crash) on bad
// input.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QGroupBox>
#include <QLabel>
#include <QSpinBox>

#include "common/layer_picker.h"
#include "common/source_panel.h"
#include "eviction/eviction_map_chart.h"
#include "eviction/eviction_metrics_panel.h"
#include "eviction/eviction_policy_panel.h"
#include "eviction/eviction_runner.h"
#include "eviction/eviction_series_chart.h"
#include "eviction/eviction_view.h"
#include "gui_test_support.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/eviction/eviction_json.h"
#include "kvlab/store/runs_store.h"
#include "runs/runs_view.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

using gui_test::fresh_dir;
using gui_test::tiny_source;

constexpr int kTimeoutMs = 60'000;
constexpr int kSteps = 16;

EvictionConfig policy(EvictionPolicy p, double budget_fraction) {
  EvictionConfig c;
  c.policy = p;
  c.budget = Budget{budget_fraction, true};
  c.steps = kSteps;
  return c;
}

// The engine's reports for the job the view runs, computed here without the widgets.
struct EngineRun {
  EvictionReport report;
  std::optional<EvictionReport> compare;
};

EngineRun engine_run(const EvictionConfig& first, const std::optional<EvictionConfig>& second) {
  SourceSpec source;
  source.synthetic = tiny_source();
  const EvictionJob job = make_eviction_job(source, first, second);
  EXPECT_EQ(job.source.synthetic.queries, kSteps);
  auto cache = generate_synthetic(job.source.synthetic);
  EXPECT_TRUE(cache.ok()) << cache.message();
  auto report = simulate_eviction(*cache, job.policy);
  EXPECT_TRUE(report.ok()) << report.message();
  EngineRun out{*report, std::nullopt};
  if (job.compare) {
    auto compare = simulate_eviction(*cache, *job.compare);
    EXPECT_TRUE(compare.ok()) << compare.message();
    out.compare = *compare;
  }
  return out;
}

// The Results labels of one column (`prefix` "" or "compared_") show the model's texts for
// `summary` (eviction_metrics_text.h; what they say is tested in
// tests/gui/models/test_eviction_metrics_text.cpp).
void expect_metric_labels(const EvictionMetricsPanel& panel, const std::string& prefix,
                          const EvictionSummary& summary) {
  constexpr std::array<const char*, kEvictionMetricCount> kLabels{
      "policy",    "kept",   "memory",          "memory_ratio", "mass_retained",
      "rel_error", "cosine", "needle_retained", "needle_top_k"};
  const EvictionMetricTexts texts = eviction_metric_texts(summary);
  for (int m = 0; m < kEvictionMetricCount; ++m) {
    const std::string name = prefix + kLabels[m];
    EXPECT_EQ(gui_test::child<QLabel>(&panel, name.c_str())->text(), texts.values[m]) << name;
  }
}

void set_up(EvictionView& view, const EvictionConfig& first,
            const std::optional<EvictionConfig>& second) {
  view.source_panel()->set_synthetic(tiny_source());
  view.policy_panel()->set_config(first);
  view.policy_panel()->set_compare(second);
}

// Every cell of the chart's colour map is the engine map's state at (step, position).
void expect_cells(const EvictionMapChart& chart, const EvictionMap& map) {
  QCPColorMapData* data = gui_test::child<QCPColorMap>(&chart, "color_map")
                              ->data();  // cell() is not const in QCustomPlot
  ASSERT_EQ(data->keySize(), map.positions);
  ASSERT_EQ(data->valueSize(), map.steps);
  int mismatches = 0;
  for (int s = 0; s < map.steps; ++s) {
    for (int p = 0; p < map.positions; ++p) {
      const auto want = static_cast<double>(map.state(s, p));
      if (data->cell(p, s) != want && ++mismatches <= 5) {
        ADD_FAILURE() << "step " << s << " position " << p << ": drawn " << data->cell(p, s)
                      << ", engine " << want;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

std::vector<double> drawn_values(const QCPGraph* graph) {
  std::vector<double> out;
  for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it) {
    out.push_back(it->value);
  }
  return out;
}

void expect_series(const QCPGraph* graph, const std::vector<EvictionStep>& steps, bool mass) {
  const auto drawn = drawn_values(graph);
  ASSERT_EQ(drawn.size(), steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const double want = mass ? steps[i].attention_mass_retained : steps[i].attn_output_rel_error;
    EXPECT_NEAR(drawn[i], want, 1e-12) << "step " << i;
  }
}

TEST(EvictionView, MapsCurvesAndNumbersAreTheEngines) {
  const auto first = policy(EvictionPolicy::H2O, 0.25);
  const auto engine = engine_run(first, std::nullopt);
  const auto& expected = engine.report;
  ASSERT_EQ(expected.maps.size(), 2u);
  ASSERT_EQ(expected.maps[0].size(), 2u);

  EvictionView view(nullptr);
  view.resize(1300, 900);
  view.show();
  auto* picker = gui_test::child<LayerPicker>(&view, "picker");
  auto* scope = gui_test::child<QComboBox>(&view, "scope");
  auto* metrics = gui_test::child<EvictionMetricsPanel>(&view, "metrics");
  auto* series_chart = gui_test::child<EvictionSeriesChart>(&view, "series");
  set_up(view, first, std::nullopt);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  ASSERT_TRUE(view.model()->report());
  EXPECT_FALSE(gui_test::child<EvictionMapChart>(&view, "compare_map")->isVisible());
  EXPECT_FALSE(gui_test::child<QLabel>(&view, "error")->isVisible());

  // Layer 0, head 0 first; then every other layer and head, picked through the selectors.
  EXPECT_EQ(gui_test::child<QSpinBox>(picker, "layer")->maximum(), 1);
  EXPECT_EQ(gui_test::child<QComboBox>(picker, "choice")->count(), 2);
  expect_cells(*view.map_chart(), expected.maps[0][0]);
  for (int layer = 0; layer < 2; ++layer) {
    for (int head = 0; head < 2; ++head) {
      gui_test::child<QSpinBox>(picker, "layer")->setValue(layer);
      gui_test::child<QComboBox>(picker, "choice")->setCurrentIndex(head);
      SCOPED_TRACE(::testing::Message() << "layer " << layer << " head " << head);
      expect_cells(*view.map_chart(), expected.maps[layer][head]);
      EXPECT_TRUE(view.map_chart()->title().contains(
          QStringLiteral("layer %1, KV head %2").arg(layer).arg(head)));
    }
  }

  // The needle line sits on the planted needle.
  const int needle = synthetic_landmarks(tiny_source()).needle;
  ASSERT_EQ(view.model()->report()->config.needle, needle);
  EXPECT_TRUE(gui_test::child<QCPItemStraightLine>(view.map_chart(), "needle_line")->visible());
  EXPECT_DOUBLE_EQ(
      gui_test::child<QCPItemStraightLine>(view.map_chart(), "needle_line")->point1->coords().x(),
      needle);
  EXPECT_DOUBLE_EQ(
      gui_test::child<QCPItemStraightLine>(view.map_chart(), "needle_line")->point2->coords().x(),
      needle);

  // Curves over all layers, then over the selected layer (1).
  expect_series(gui_test::child<QCPGraph>(series_chart, "mass_graph"), expected.steps_total, true);
  expect_series(gui_test::child<QCPGraph>(series_chart, "error_graph"), expected.steps_total,
                false);
  EXPECT_TRUE(drawn_values(gui_test::child<QCPGraph>(series_chart, "compared_mass_graph")).empty());
  scope->setCurrentIndex(1);
  expect_series(gui_test::child<QCPGraph>(series_chart, "mass_graph"), expected.layers[1].steps,
                true);
  EXPECT_TRUE(series_chart->title().contains(QStringLiteral("layer 1")));
  expect_metric_labels(*metrics, "", eviction_summary(expected, 1));
  scope->setCurrentIndex(0);
  expect_metric_labels(*metrics, "", eviction_summary(expected, -1));
  EXPECT_TRUE(gui_test::child<QLabel>(metrics, "compared_policy")->text().isEmpty());

  // Zoom, then reset.
  view.map_chart()->xAxis->setRange(10, 20);
  gui_test::child<QPushButton>(&view, "reset_zoom")->click();
  EXPECT_DOUBLE_EQ(view.map_chart()->xAxis->range().lower, -0.5);
  EXPECT_DOUBLE_EQ(view.map_chart()->xAxis->range().upper, expected.tokens - 0.5);
}

TEST(EvictionView, ComparedPolicySideBySide) {
  const auto first = policy(EvictionPolicy::H2O, 0.25);
  const auto second = policy(EvictionPolicy::Window, 0.25);
  const auto engine = engine_run(first, second);
  ASSERT_TRUE(engine.compare);

  EvictionView view(nullptr);
  view.resize(1300, 900);
  view.show();
  auto* compare_map = gui_test::child<EvictionMapChart>(&view, "compare_map");
  auto* metrics = gui_test::child<EvictionMetricsPanel>(&view, "metrics");
  auto* series_chart = gui_test::child<EvictionSeriesChart>(&view, "series");
  set_up(view, first, second);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  ASSERT_TRUE(view.model()->compare());
  EXPECT_TRUE(compare_map->isVisible());
  view.select(1, 1);
  expect_cells(*view.map_chart(), engine.report.maps[1][1]);
  expect_cells(*compare_map, engine.compare->maps[1][1]);
  expect_series(gui_test::child<QCPGraph>(series_chart, "compared_mass_graph"),
                engine.compare->steps_total, true);
  expect_series(gui_test::child<QCPGraph>(series_chart, "compared_error_graph"),
                engine.compare->steps_total, false);
  expect_metric_labels(*metrics, "", eviction_summary(engine.report, -1));
  expect_metric_labels(*metrics, "compared_", eviction_summary(*engine.compare, -1));

  // Zooming one map zooms the other.
  view.map_chart()->xAxis->setRange(20, 40);
  EXPECT_DOUBLE_EQ(compare_map->xAxis->range().lower, 20);
  EXPECT_DOUBLE_EQ(compare_map->xAxis->range().upper, 40);
}

TEST(EvictionView, RunIsSavedAndReopensWithTheSameNumbers) {
  const auto dir = fresh_dir();
  MainWindow window(dir / "runs.sqlite");
  window.show();
  EvictionView& view = *window.eviction_view();
  auto* metrics_panel = gui_test::child<EvictionMetricsPanel>(&view, "metrics");
  set_up(view, policy(EvictionPolicy::Streaming, 0.3), policy(EvictionPolicy::H2O, 0.2));
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  const std::int64_t id = view.model()->last_saved_run_id();
  ASSERT_GT(id, 0);
  const EvictionReport fresh = *view.model()->report();
  const EvictionReport fresh_compare = *view.model()->compare();
  const QString kept = gui_test::child<QLabel>(metrics_panel, "kept")->text();
  const QString error = gui_test::child<QLabel>(metrics_panel, "compared_rel_error")->text();
  EXPECT_FALSE(kept.isEmpty() || error.isEmpty());

  {  // In the store: two eviction runs, the first policy linked to the compared one.
    auto store = RunsStore::open(dir / "runs.sqlite");
    ASSERT_TRUE(store.ok()) << store.message();
    auto record = store->load_run(id);
    ASSERT_TRUE(record.ok()) << record.message();
    EXPECT_EQ(record->kind, "eviction");
    EXPECT_EQ(record->method, "streaming");
    EXPECT_EQ(record->label, fresh.label);
    EXPECT_EQ(record->params, eviction_params_json(fresh.config));
    EXPECT_EQ(record->metrics, eviction_report_to_json(fresh));
    EXPECT_TRUE(record->artifacts.count("eviction_map"));
    auto runs = store->list_runs(-1);
    ASSERT_TRUE(runs.ok());
    EXPECT_EQ(runs->size(), 2u);
  }

  // Show something else, then reopen from the Runs page: the same numbers, no recomputation.
  set_up(view, policy(EvictionPolicy::Window, 0.5), std::nullopt);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  ASSERT_FALSE(view.model()->compare());
  window.show_page(Page::Runs);
  RunsView& runs = *window.runs_view();
  ASSERT_GE(runs.row_of(id), 0);
  ASSERT_TRUE(runs.open_run(id));
  EXPECT_EQ(window.current_page(), Page::Eviction);
  ASSERT_TRUE(view.model()->report() && view.model()->compare());
  EXPECT_EQ(view.model()->report()->label, fresh.label);
  EXPECT_EQ(view.model()->compare()->label, fresh_compare.label);
  EXPECT_EQ(gui_test::child<QLabel>(metrics_panel, "kept")->text(), kept);
  EXPECT_EQ(gui_test::child<QLabel>(metrics_panel, "compared_rel_error")->text(), error);
  EXPECT_TRUE(gui_test::child<QLabel>(metrics_panel, "heading")
                  ->text()
                  .contains(QStringLiteral("stored run #%1").arg(id)));
  EXPECT_EQ(view.model()->report()->config.needle, fresh.config.needle);
  view.select(1, 0);
  expect_cells(*view.map_chart(), fresh.maps[1][0]);
  expect_cells(*gui_test::child<EvictionMapChart>(&view, "compare_map"), fresh_compare.maps[1][0]);
  expect_series(gui_test::child<QCPGraph>(gui_test::child<EvictionSeriesChart>(&view, "series"),
                                          "mass_graph"),
                fresh.steps_total, true);
  EXPECT_DOUBLE_EQ(
      gui_test::child<QCPItemStraightLine>(view.map_chart(), "needle_line")->point1->coords().x(),
      *fresh.config.needle);
}

TEST(EvictionView, BadInputShowsAnErrorInsteadOfCrashing) {
  const auto dir = fresh_dir();
  auto store = RunsStore::open(dir / "runs.sqlite");
  ASSERT_TRUE(store.ok()) << store.message();
  auto shared = std::make_shared<RunsStore>(std::move(store).value());
  EvictionView view(shared);
  view.show();
  auto* error_label = gui_test::child<QLabel>(&view, "error");
  auto bad = policy(EvictionPolicy::H2O, 0.25);
  bad.steps = tiny_source().context;  // steps >= context
  set_up(view, bad, std::nullopt);
  EXPECT_FALSE(view.run_and_wait(kTimeoutMs));
  EXPECT_TRUE(error_label->isVisible());
  EXPECT_TRUE(error_label->text().contains(QStringLiteral("steps")))
      << error_label->text().toStdString();
  EXPECT_FALSE(view.model()->report());
  EXPECT_EQ(view.model()->last_saved_run_id(), 0);
  EXPECT_TRUE(view.run_button()->isEnabled());
  auto runs = shared->list_runs(-1);
  ASSERT_TRUE(runs.ok());
  EXPECT_TRUE(runs->empty());

  // A good run afterwards clears the message.
  set_up(view, policy(EvictionPolicy::H2O, 0.25), std::nullopt);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  EXPECT_FALSE(error_label->isVisible());
}

TEST(EvictionPolicyPanel, ShowsOnlyThePolicysOptions) {
  EvictionPolicyPanel panel;
  panel.show();
  auto* policy = gui_test::child<QComboBox>(&panel, "policy");
  auto* budget = gui_test::child<BudgetEdit>(&panel, "budget");
  const auto shown = [&](const char* field) { return gui_test::field_shown(panel, field); };
  const auto pick = [&](const char* id) {
    policy->setCurrentText(QString::fromLatin1(id));
    return std::array<bool, 6>{shown("sinks"),       shown("recent_fraction"),  shown("threshold"),
                               shown("w_attention"), shown("merge_similarity"), shown("budget")};
  };
  using V = std::array<bool, 6>;
  EXPECT_EQ(pick("streaming"), (V{true, false, false, false, false, true}));
  EXPECT_EQ(pick("h2o"), (V{false, true, false, false, false, true}));
  EXPECT_EQ(pick("threshold"), (V{false, false, true, false, false, true}));
  EXPECT_EQ(pick("importance"), (V{false, false, false, true, false, true}));
  EXPECT_EQ(pick("merge"), (V{false, true, false, false, true, true}));
  EXPECT_EQ(pick("full"), (V{false, false, false, false, false, false}));

  // The budget in tokens or % of context, and quantization of the kept tokens.
  policy->setCurrentText(QStringLiteral("h2o"));
  gui_test::child<QComboBox>(budget, "unit")->setCurrentIndex(0);
  gui_test::child<QSpinBox>(budget, "value")->setValue(200);
  gui_test::child<QComboBox>(&panel, "quant")->setCurrentText(QStringLiteral("int8"));
  const EvictionConfig c = panel.config();
  EXPECT_EQ(c.policy, EvictionPolicy::H2O);
  EXPECT_FALSE(c.budget.fraction);
  EXPECT_EQ(c.budget.value, 200);
  ASSERT_TRUE(c.quant);
  EXPECT_EQ(c.quant->kind, MethodKind::Int8);
  EXPECT_FALSE(panel.compare_config());
  gui_test::child<QGroupBox>(&panel, "compare")->setChecked(true);
  gui_test::child<QComboBox>(&panel, "compare_policy")->setCurrentText(QStringLiteral("streaming"));
  const auto compare = panel.compare_config();
  ASSERT_TRUE(compare);
  EXPECT_EQ(compare->policy, EvictionPolicy::Streaming);
  EXPECT_TRUE(compare->budget.fraction);
  EXPECT_EQ(compare->quant->kind, MethodKind::Int8);
}

}  // namespace
}  // namespace kvlab::gui
