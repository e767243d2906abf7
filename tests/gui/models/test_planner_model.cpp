// The Planner page model alone: every checked scheme planned as plan() plans it here, the table
// with pinned rows, eviction caps on the schemes, the advice computed again only when what it
// rests on changes, and a scenario saved as a plan run in a real SQLite store.
#include <gtest/gtest.h>

#include <QSignalSpy>

#include "gui_test_support.h"
#include "planner/planner_model.h"
#include "planner/planner_table_model.h"

namespace kvlab::gui {
namespace {

PlannerInputs inputs_for(const PlannerModel& model, const QStringList& ids, int context,
                         int batch) {
  PlannerInputs in;
  in.schemes = model.schemes_for(ids, QStringLiteral("none"));
  in.scenario.model = planners::find_model("llama-3-8b").value();
  in.scenario.gpu = planners::find_gpu("h100-sxm").value();
  in.scenario.scheme = in.schemes.front();
  in.scenario.context = context;
  in.scenario.batch = batch;
  in.advice_min_gain = 0.1;
  return in;
}

TEST(PlannerModel, PlansEverySchemePinsAndAdvisesOnlyWhenItMatters) {
  PlannerModel model(nullptr);
  QSignalSpy recomputed(&model, &PlannerModel::recomputed);
  PlannerInputs in = inputs_for(model, {"fp16", "kivi2"}, 8192, 16);
  model.recompute(in);
  ASSERT_EQ(recomputed.count(), 1);
  ASSERT_EQ(model.results().size(), 2u) << model.error().toStdString();
  for (std::size_t i = 0; i < 2; ++i) {
    planners::Scenario s = in.scenario;
    s.scheme = in.schemes[i];
    s.rates = model.rates_for(s.gpu);
    const auto want = planners::plan(s).value();
    EXPECT_EQ(model.results()[i].kv_bytes_batch_per_gpu, want.kv_bytes_batch_per_gpu) << i;
    EXPECT_EQ(model.results()[i].max_batch, want.max_batch) << i;
    EXPECT_DOUBLE_EQ(model.results()[i].tpot_s, want.tpot_s) << i;
  }
  EXPECT_EQ(model.table()->rowCount(), 2);
  EXPECT_TRUE(model.error().isEmpty());
  EXPECT_EQ(model.slo_text(),
            "No targets: set a TTFT or TPOT target to pick the best scheme and batch.");
  ASSERT_TRUE(model.advice().has_value()) << model.advice_error().toStdString();
  const int version = model.advice_version();
  EXPECT_TRUE(model.advice_question().contains("Llama-3-8B"));

  // Pinned: the rows stay beside the next scenario's.
  model.pin();
  in.scenario.batch = 32;
  model.recompute(in);
  EXPECT_EQ(model.table()->rowCount(), 4);
  EXPECT_TRUE(model.table()->index(2, kPlannerScheme).data().toString().startsWith("pinned: "));
  EXPECT_EQ(model.advice_version(), version + 1) << "a new batch is a new column of advice";
  in.ttft_target_ms = 2000;  // the targets do not touch the advice
  model.recompute(in);
  EXPECT_EQ(model.advice_version(), version + 1);
  EXPECT_TRUE(model.slo_text().startsWith("Best under the targets: "))
      << model.slo_text().toStdString();

  // No scheme: no results, and why.
  in.schemes.clear();
  model.recompute(in);
  EXPECT_TRUE(model.results().empty());
  EXPECT_EQ(model.error(), "Check at least one scheme.");
}

// Under a TPOT target, the sentence on the best scheme and batch is the planner's own choice.
TEST(PlannerModel, BestUnderTheTargetsIsThePlannersChoice) {
  PlannerModel model(nullptr);
  PlannerInputs in = inputs_for(model, {"fp16", "fp8", "kivi2"}, 8192, 8);
  in.tpot_target_ms = 40;
  model.recompute(in);
  ASSERT_TRUE(model.slo_choice().has_value());
  planners::Scenario base = in.scenario;
  base.rates = model.rates_for(base.gpu);
  const auto want = planners::best_under_slo(base, in.schemes, {0, 40}).value();
  EXPECT_TRUE(want.found);
  EXPECT_EQ(model.slo_choice()->scheme, want.scheme);
  EXPECT_EQ(model.slo_text(), "Best under the targets: " + QString::fromStdString(want.reason));
}

TEST(PlannerModel, SchemesTakeTheEvictionCap) {
  PlannerModel model(nullptr);
  const auto schemes = model.schemes_for({"fp16", "kivi2", "nonsense"}, "25%");
  ASSERT_EQ(schemes.size(), 2u) << "an unknown id is left out";
  EXPECT_EQ(schemes[0].id, "fp16+evict:25%");
  ASSERT_TRUE(schemes[1].evict_fraction.has_value());
  EXPECT_DOUBLE_EQ(*schemes[1].evict_fraction, 0.25);
}

TEST(PlannerModel, SavesAScenarioAsAPlanRunAndAddsGpus) {
  auto store =
      std::make_shared<RunsStore>(RunsStore::open(gui_test::fresh_dir() / "runs.sqlite").value());
  PlannerModel model(store);
  EXPECT_FALSE(model.save({}).ok()) << "nothing computed yet";
  model.recompute(inputs_for(model, {"fp16", "fp8"}, 4096, 8));
  PlanRunContext context;
  context.scheme_ids = {"fp16", "fp8"};
  auto id = model.save(context);
  ASSERT_TRUE(id.ok()) << id.message();
  auto run = store->load_run(*id);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->kind, "plan");
  EXPECT_EQ(run->params.at("context").get<int>(), 4096);

  planners::GpuSpec bad;
  bad.id = "broken";
  EXPECT_FALSE(model.add_gpu(bad).ok());
  planners::GpuSpec mine;
  mine.id = mine.name = "my-gpu";
  mine.memory_bytes = 48ull << 30;
  mine.bandwidth_gbs = 960;
  mine.memory_stated = "48 GiB";
  mine.user = true;
  QSignalSpy catalogues(&model, &PlannerModel::catalogues_changed);
  ASSERT_TRUE(model.add_gpu(mine).ok());
  EXPECT_EQ(catalogues.count(), 1);
  EXPECT_EQ(model.gpus().back().id, "my-gpu");
  PlannerModel again(store);
  EXPECT_EQ(again.gpus().back().id, "my-gpu") << "kept in the store";
}

}  // namespace
}  // namespace kvlab::gui
