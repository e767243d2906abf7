// The Planner page model alone: every checked scheme planned as plan() plans it here, the table
// (its latency columns per GPU and per deployment) with pinned rows, eviction caps on the schemes,
// the advice computed again only when what it rests on changes, and a scenario saved as a plan run
// in a real SQLite store.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>
#include <QBrush>
#include <QSignalSpy>

#include "common/gui_format.h"
#include "gui_test_support.h"
#include "planner/planner_advice_model.h"
#include "planner/planner_model.h"
#include "planner/planner_table_model.h"
#include "planner_test_support.h"

namespace kvlab::gui {
namespace {

using gui_test::expected;
using gui_test::header;
using gui_test::scenario_of;

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

TEST(PlannerModel, LatencyColumnsShowWhatThePlannerComputesPerGpuAndPerDeployment) {
  PlannerModel model(nullptr);
  QAbstractItemModelTester tester(model.table(),
                                  QAbstractItemModelTester::FailureReportingMode::Fatal);
  PlannerInputs in = inputs_for(model, {"fp16", "kivi2"}, 8192, 16);
  in.scenario.model = planners::find_model("llama-3-70b").value();
  in.scenario.deployment.tp = 4;
  model.recompute(in);
  ASSERT_EQ(model.results().size(), 2u) << model.error().toStdString();
  const QAbstractItemModel* t = model.table();
  EXPECT_EQ(header(t, kPlannerBytesPerToken), "KV B/token\n(whole model)");
  EXPECT_EQ(header(t, kPlannerPerSequence), "KV per sequence\n(per GPU)");
  EXPECT_EQ(header(t, kPlannerBatch), "KV batch\n(per GPU)");
  EXPECT_EQ(header(t, kPlannerBatchDeployment), "KV batch\n(deployment)");
  EXPECT_EQ(header(t, kPlannerTtft), "TTFT");
  EXPECT_EQ(header(t, kPlannerTpot), "TPOT");
  EXPECT_EQ(header(t, kPlannerTokensPerUser), "tok/s\nper user");
  EXPECT_EQ(header(t, kPlannerTokensPerGpu), "tok/s\nper GPU");
  EXPECT_EQ(header(t, kPlannerTokensDeployment), "tok/s\n(deployment)");
  EXPECT_EQ(header(t, kPlannerWaitsOn), "decode step\nwaits on");
  for (int c = 0; c < t->columnCount(); ++c) {
    EXPECT_FALSE(t->headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty()) << c;
  }
  const auto cell = [t](int row, int column) { return t->index(row, column).data().toString(); };
  for (int row = 0; row < 2; ++row) {
    const auto r = expected("llama-3-70b", "h100-sxm", row == 0 ? "fp16" : "kivi2", 8192, 16, 4);
    EXPECT_EQ(cell(row, kPlannerTtft), PlannerTableModel::millis(r.ttft_s));
    EXPECT_EQ(cell(row, kPlannerTpot), PlannerTableModel::millis(r.tpot_s));
    EXPECT_EQ(cell(row, kPlannerTokensPerUser), QString::number(r.tokens_per_s_per_user, 'f', 1));
    EXPECT_EQ(cell(row, kPlannerTokensPerGpu), QString::number(r.tokens_per_s_per_gpu, 'f', 0));
    EXPECT_EQ(cell(row, kPlannerTokensDeployment),
              QString::number(r.tokens_per_s_deployment, 'f', 0));
    EXPECT_EQ(cell(row, kPlannerBatchDeployment),
              format_byte_count(static_cast<double>(r.kv_bytes_batch_deployment)));
    EXPECT_TRUE(
        cell(row, kPlannerWaitsOn).startsWith(QString::fromStdString(r.latency.step.bound_by)))
        << cell(row, kPlannerWaitsOn).toStdString();
    // Four GPUs: the deployment's tokens/s and KV are four times one GPU's.
    EXPECT_NEAR(r.tokens_per_s_deployment, 4 * r.tokens_per_s_per_gpu,
                1e-6 * r.tokens_per_s_deployment);
    EXPECT_EQ(r.kv_bytes_batch_deployment, 4 * r.kv_bytes_batch_per_gpu);
    EXPECT_GT(r.tpot_s, 0);
  }
  EXPECT_NE(cell(0, kPlannerTpot), cell(1, kPlannerTpot));  // the schemes' steps differ
  // Halving the compute efficiency slows the compute-bound prefill.
  const QString ttft = cell(0, kPlannerTtft);
  in.scenario.compute_efficiency = 0.3;
  model.recompute(in);
  auto slow = scenario_of("llama-3-70b", "h100-sxm", "fp16", 8192, 16, 4);
  slow.compute_efficiency = 0.3;
  EXPECT_EQ(cell(0, kPlannerTtft), PlannerTableModel::millis(planners::plan(slow)->ttft_s));
  EXPECT_NE(cell(0, kPlannerTtft), ttft);
}

TEST(PlannerModel, AdviceMatrixSaysWhenToCompressAndWhy) {
  PlannerModel model(nullptr);
  // The grid weighs the checked schemes at the usual contexts and users plus the page's own
  // (here already among them).
  PlannerInputs in =
      inputs_for(model, {"fp16", "fp8", "int8", "kivi4", "kivi2", "kvcomp"}, 8192, 8);
  in.scenario.model = planners::find_model("llama-3-70b").value();
  in.scenario.deployment.tp = 4;
  model.recompute(in);
  ASSERT_TRUE(model.advice().has_value()) << model.advice_error().toStdString();
  PlannerAdviceModel advice_model;
  PlannerAdviceModel* m = &advice_model;
  QAbstractItemModelTester tester(m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  m->set_advice(*model.advice());
  EXPECT_TRUE(model.advice_question().contains("Llama-3-70B"))
      << model.advice_question().toStdString();
  EXPECT_TRUE(model.advice_question().contains("TP 4"));

  // The same advice computed here: the CLI's defaults, contexts up to the model's 8,192 tokens.
  planners::AdviceSpec spec;
  spec.base = scenario_of("llama-3-70b", "h100-sxm", "fp16", 8192, 1, 4);
  for (const char* id : {"fp16", "fp8", "int8", "kivi4", "kivi2", "kvcomp"}) {
    spec.schemes.push_back(planners::parse_scheme(id).value());
  }
  spec.contexts = {2048, 8192};
  spec.concurrencies = {1, 8, 32, 128, 512};
  const auto want = planners::advise(spec).value();
  ASSERT_EQ(m->rowCount(), 2);
  ASSERT_EQ(m->columnCount(), 5);
  EXPECT_EQ(m->headerData(0, Qt::Vertical).toString(), "2,048 tokens");
  EXPECT_EQ(m->headerData(4, Qt::Horizontal).toString(), "512 users");
  bool dont = false, compress = false;
  for (int row = 0; row < 2; ++row) {
    for (int col = 0; col < 5; ++col) {
      const auto& c = want.cells[static_cast<std::size_t>(row * 5 + col)];
      const QModelIndex i = m->index(row, col);
      EXPECT_EQ(i.data(PlannerAdviceModel::kVerdictRole).toString().toStdString(), c.verdict);
      const QString tip = i.data(Qt::ToolTipRole).toString();
      EXPECT_EQ(tip.section("\n\n", 0, 0).toStdString(), c.reason);
      EXPECT_TRUE(tip.contains("Quality cost of")) << tip.toStdString();
      EXPECT_EQ(i.data().toString(), PlannerAdviceModel::cell_text(want, c));
      const QColor bg = i.data(Qt::BackgroundRole).value<QBrush>().color();
      if (c.verdict == "don't compress") {
        dont = true;
        EXPECT_EQ(bg, PlannerAdviceModel::dont_compress_color());
        EXPECT_EQ(i.data().toString(), "fp16");
      } else if (c.verdict.rfind("compress: ", 0) == 0) {
        compress = true;
        EXPECT_EQ(bg, PlannerAdviceModel::compress_color());
        EXPECT_TRUE(i.data().toString().contains('+')) << i.data().toString().toStdString();
      }
    }
  }
  EXPECT_TRUE(dont);
  EXPECT_TRUE(compress);
  // One user of 2,048 tokens: fp16 (the weights dominate); 512 users of 8,192: compress.
  EXPECT_EQ(m->index(0, 0).data().toString(), "fp16");
  EXPECT_EQ(m->index(1, 4).data(PlannerAdviceModel::kVerdictRole).toString().left(9), "compress:");

  // The gain a scheme must bring is a control: at 0 % more cells say compress.
  int compress_cells = 0;
  for (const auto& c : want.cells) compress_cells += c.recommended > 0 ? 1 : 0;
  in.advice_min_gain = 0.0;
  model.recompute(in);
  m->set_advice(*model.advice());
  int now = 0;
  for (int row = 0; row < 2; ++row) {
    for (int col = 0; col < 5; ++col) now += m->cell(row, col)->recommended > 0 ? 1 : 0;
  }
  EXPECT_GE(now, compress_cells);
  // A quality limit: with no runs database no compressed scheme has a measured quality, so none
  // may be recommended, and the tooltips say which faster ones were left out.
  in.advice_max_perplexity_change = 0.01;
  model.recompute(in);
  m->set_advice(*model.advice());
  for (int row = 0; row < 2; ++row) {
    for (int col = 0; col < 5; ++col) EXPECT_LE(m->cell(row, col)->recommended, 0);
  }
  EXPECT_TRUE(m->index(1, 4).data(Qt::ToolTipRole).toString().contains("over the quality limit"))
      << m->index(1, 4).data(Qt::ToolTipRole).toString().toStdString();
  in.advice_max_perplexity_change.reset();
  model.recompute(in);
  m->set_advice(*model.advice());
  EXPECT_EQ(m->index(1, 4).data(PlannerAdviceModel::kVerdictRole).toString().left(9), "compress:");
  // A single GPU cannot hold the 70B weights: every cell says nothing fits, in red.
  in.scenario.deployment.tp = 1;
  model.recompute(in);
  ASSERT_TRUE(model.advice().has_value()) << model.advice_error().toStdString();
  m->set_advice(*model.advice());
  EXPECT_EQ(m->index(0, 0).data(PlannerAdviceModel::kVerdictRole).toString(), "nothing fits");
  EXPECT_EQ(m->index(0, 0).data(Qt::BackgroundRole).value<QBrush>().color(),
            PlannerAdviceModel::nothing_fits_color());
}

}  // namespace
}  // namespace kvlab::gui
