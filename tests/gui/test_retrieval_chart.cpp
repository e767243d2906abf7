// The Quality page's "passkey retrieval against budget" chart, drawn from needle runs written
// into a real SQLite runs store with the store's own needle_run(): one line per policy, the
// presses run before the question apart (dashed), the full cache as a reference, other models'
// runs left out, and new runs shown when the view reads the store again.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>

#include <QApplication>
#include <QTabWidget>

#include "gui_test_support.h"
#include "kvlab/store/run_records.h"
#include "kvlab/store/runs_store.h"
#include "plot_test_support.h"
#include "quality/quality_view.h"
#include "quality/retrieval_chart.h"

namespace kvlab::gui {
namespace {

const std::string kModel = "/models/smollm2-135m.gguf";

// A needle run as `kvlab quality --needle --save` stores it.
void save_needle(RunsStore& store, const std::string& model, std::optional<EvictionPolicy> policy,
                 double budget, double accuracy, bool press_before_question = false) {
  NeedleConfig config;
  config.press_before_question = press_before_question;
  NeedleReport report;
  report.press_before_question = press_before_question;
  report.accuracy = accuracy;
  report.cells.push_back({1024, 0.5, 10, static_cast<int>(accuracy * 10), "42"});
  if (policy) {
    EvictionConfig e;
    e.policy = *policy;
    e.budget = Budget{budget, true};
    config.eviction = e;
    report.policy_label = eviction_label(e);
  }
  auto id = store.save_run(needle_run(report, config, model));
  ASSERT_TRUE(id.ok()) << id.message();
}

std::vector<std::pair<double, double>> points(const QCPGraph* g) {
  std::vector<std::pair<double, double>> out;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
    out.emplace_back(it->key, it->value);
  }
  return out;
}

const QCPGraph* line_named(const RetrievalChart& chart, const QString& name) {
  return gui_test::plottable_in_legend<QCPGraph>(&chart, "policy_line", name);
}

// The lines drawn, one per policy (and per press placement).
std::size_t line_count(const RetrievalChart& chart) {
  return gui_test::plottables<QCPGraph>(&chart, "policy_line").size();
}

TEST(QualityView, RetrievalChartDrawsOneLinePerPolicyFromNeedleRuns) {
  const auto dir = gui_test::fresh_dir();
  auto opened = RunsStore::open(dir / "runs.sqlite");
  ASSERT_TRUE(opened.ok()) << opened.message();
  auto store = std::make_shared<RunsStore>(std::move(opened).value());
  save_needle(*store, kModel, std::nullopt, 1.0, 1.0);  // the full cache
  save_needle(*store, kModel, EvictionPolicy::SnapKV, 0.5, 0.9);
  save_needle(*store, kModel, EvictionPolicy::SnapKV, 0.1, 0.4);
  save_needle(*store, kModel, EvictionPolicy::SnapKV, 0.25, 0.7);
  save_needle(*store, kModel, EvictionPolicy::SnapKV, 0.25, 0.2, true);
  save_needle(*store, kModel, EvictionPolicy::SnapKV, 0.5, 0.3, true);
  save_needle(*store, kModel, EvictionPolicy::H2O, 0.25, 0.5);
  save_needle(*store, kModel, EvictionPolicy::H2O, 0.5, 0.6);
  save_needle(*store, "/models/other.gguf", EvictionPolicy::TOVA, 0.5, 0.1);  // not this model
  // A repeat: the newest run of a policy and budget is the one drawn.
  save_needle(*store, kModel, EvictionPolicy::SnapKV, 0.5, 0.8);

  QualityView view(store);
  view.resize(1300, 900);
  view.set_model_path(QString::fromStdString(kModel));
  view.show();
  view.chart_tabs()->setCurrentIndex(QualityView::kRetrievalTab);
  view.reload_from_store();
  const RetrievalChart& chart = *gui_test::child<RetrievalChart>(&view, "retrieval");
  ASSERT_EQ(line_count(chart), 3u);
  const QCPGraph* snap = line_named(chart, QStringLiteral("snapkv"));
  const QCPGraph* pressed =
      line_named(chart, QStringLiteral("snapkv, pressed before the question"));
  const QCPGraph* h2o = line_named(chart, QStringLiteral("h2o"));
  ASSERT_TRUE(snap && pressed && h2o);
  using P = std::vector<std::pair<double, double>>;
  EXPECT_EQ(points(snap), (P{{0.1, 0.4}, {0.25, 0.7}, {0.5, 0.8}}));
  EXPECT_EQ(points(pressed), (P{{0.25, 0.2}, {0.5, 0.3}}));
  EXPECT_EQ(points(h2o), (P{{0.25, 0.5}, {0.5, 0.6}}));
  EXPECT_EQ(pressed->pen().style(), Qt::DashLine);
  EXPECT_EQ(snap->pen().style(), Qt::SolidLine);
  EXPECT_EQ(pressed->pen().color(), snap->pen().color());  // one colour per policy
  EXPECT_NE(h2o->pen().color(), snap->pen().color());
  ASSERT_TRUE(gui_test::child<QCPItemStraightLine>(&chart, "full_line")->visible());
  EXPECT_DOUBLE_EQ(gui_test::child<QCPItemStraightLine>(&chart, "full_line")->point1->coords().y(),
                   1.0);
  EXPECT_TRUE(chart.title().contains(QStringLiteral("smollm2-135m.gguf")));

  // A run saved meanwhile (by the CLI) shows when the view reads the store again.
  save_needle(*store, kModel, EvictionPolicy::H2O, 0.1, 0.25);
  view.reload_from_store();
  const QCPGraph* h2o_again = line_named(chart, QStringLiteral("h2o"));
  ASSERT_TRUE(h2o_again);
  EXPECT_EQ(points(h2o_again), (P{{0.1, 0.25}, {0.25, 0.5}, {0.5, 0.6}}));

  if (const char* shots = std::getenv("KVLAB_SCREENSHOT_DIR"); shots && *shots) {
    for (int i = 0; i < 3; ++i) QApplication::processEvents();
    const QString path = QString::fromUtf8(shots) + QStringLiteral("/quality-retrieval-test.png");
    EXPECT_TRUE(view.grab().save(path));
    std::cout << "screenshot: " << path.toStdString() << "\n";
  }
}

// ThinK keeps every token and a share of the key channels: that share is its x, and its name
// says so. MiniCache keeps every token and has no budget: one point at 100 %, not at the
// budget field it ignores.
TEST(QualityView, RetrievalChartPlacesThinKByKeyChannelsAndMiniCacheAtEveryToken) {
  const auto dir = gui_test::fresh_dir();
  auto opened = RunsStore::open(dir / "runs.sqlite");
  ASSERT_TRUE(opened.ok()) << opened.message();
  auto store = std::make_shared<RunsStore>(std::move(opened).value());
  for (double channels : {0.25, 0.5}) {
    NeedleConfig config;
    EvictionConfig e;
    e.policy = EvictionPolicy::ThinK;
    e.budget = Budget{0.1, true};  // not used by ThinK without --think-tokens
    e.key_channels = channels;
    config.eviction = e;
    NeedleReport report;
    report.accuracy = channels;
    report.policy_label = eviction_label(e);
    ASSERT_TRUE(store->save_run(needle_run(report, config, kModel)).ok());
  }
  NeedleConfig config;
  EvictionConfig e;
  e.policy = EvictionPolicy::MiniCache;
  e.budget = Budget{0.25, true};
  config.eviction = e;
  NeedleReport report;
  report.accuracy = 0.2;
  report.policy_label = eviction_label(e);
  ASSERT_TRUE(store->save_run(needle_run(report, config, kModel)).ok());

  QualityView view(store);
  view.set_model_path(QString::fromStdString(kModel));
  view.show();
  view.reload_from_store();
  const RetrievalChart& chart = *gui_test::child<RetrievalChart>(&view, "retrieval");
  ASSERT_EQ(line_count(chart), 2u);
  const QCPGraph* think = line_named(chart, QStringLiteral("think (x: key channels kept)"));
  const QCPGraph* mini = line_named(chart, QStringLiteral("minicache (no token budget: at 100 %)"));
  ASSERT_TRUE(think && mini);
  using P = std::vector<std::pair<double, double>>;
  EXPECT_EQ(points(think), (P{{0.25, 0.25}, {0.5, 0.5}}));
  EXPECT_EQ(points(mini), (P{{1.0, 0.2}}));
}

TEST(QualityView, RetrievalChartSaysWhenThereAreNoNeedleRuns) {
  const auto dir = gui_test::fresh_dir();
  auto opened = RunsStore::open(dir / "runs.sqlite");
  ASSERT_TRUE(opened.ok()) << opened.message();
  auto store = std::make_shared<RunsStore>(std::move(opened).value());
  QualityView view(store);
  view.show();
  auto* retrieval = gui_test::child<RetrievalChart>(&view, "retrieval");
  view.reload_from_store();
  EXPECT_EQ(line_count(*retrieval), 0u);
  EXPECT_FALSE(gui_test::child<QCPItemStraightLine>(retrieval, "full_line")->visible());
  EXPECT_TRUE(retrieval->title().contains(QStringLiteral("--needle")));
}

}  // namespace
}  // namespace kvlab::gui
