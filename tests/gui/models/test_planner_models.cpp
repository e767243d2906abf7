// The Planner page's models alone, over hand-made planner results: the results table (each
// column's text, "does not fit" for a batch that does not decode, pinned rows, the scheme as the
// row header) and the advice grid (cell text, verdict colour, the reason and quality cost), each
// under QAbstractItemModelTester.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <QAbstractItemModelTester>
#include <QBrush>

#include "planner/planner_advice_model.h"
#include "planner/planner_table_model.h"

namespace kvlab::gui {
namespace {

PlannerTableModel::Row row_of(const char* id, bool fits) {
  PlannerTableModel::Row row;
  row.scheme.id = id;
  row.scheme.label = id;
  planners::PlanResult& r = row.result;
  r.kv_bytes_per_token_model = 131072;  // Llama-3-8B in fp16: 32 × 8 × 128 × 2 × 2 bytes
  r.kv_bytes_per_sequence_per_gpu = 1ull << 30;
  r.kv_bytes_batch_per_gpu = 8ull << 30;
  r.kv_bytes_batch_deployment = 32ull << 30;
  r.fits = fits;
  r.max_batch = fits ? 12 : 5;
  r.max_context = 98304;
  r.min_gpus = 2;
  r.min_tp = 2;
  r.min_pp = 1;
  r.ttft_s = 1.5;
  r.tpot_s = 0.0234;
  r.tokens_per_s_per_user = 42.7349;
  r.tokens_per_s_per_gpu = 341.87;
  r.tokens_per_s_deployment = 1367.5;
  r.latency.step.bound_by = "KV read";
  return row;
}

TEST(PlannerTableModel, ShowsEachColumnAndSaysWhenABatchDoesNotDecode) {
  PlannerTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  auto pinned = row_of("fp16", true);
  pinned.pinned = true;
  model.set_rows({row_of("kivi2", true), row_of("fp8", false), pinned}, "8K × 16");
  ASSERT_EQ(model.rowCount(), 3);
  ASSERT_EQ(model.columnCount(), kPlannerColumnCount);
  const auto cell = [&](int row, int column) { return model.index(row, column).data().toString(); };
  EXPECT_EQ(cell(0, kPlannerScheme), "kivi2");
  EXPECT_EQ(cell(0, kPlannerFits), "yes");
  EXPECT_EQ(cell(0, kPlannerTpot), "23 ms");
  EXPECT_EQ(cell(0, kPlannerTtft), "1.50 s");
  EXPECT_EQ(cell(0, kPlannerTokensPerUser), "42.7");
  EXPECT_EQ(cell(0, kPlannerTokensPerGpu), "342");
  EXPECT_EQ(cell(0, kPlannerTokensDeployment), "1368");
  EXPECT_EQ(cell(0, kPlannerMaxBatch), "12");
  EXPECT_EQ(cell(0, kPlannerMaxContext), "98304");
  EXPECT_EQ(cell(0, kPlannerFewestGpus), "2 (TP 2 × PP 1)");
  EXPECT_EQ(cell(0, kPlannerBytesPerToken), "131072");
  EXPECT_EQ(cell(0, kPlannerPerSequence), "1.0 GiB");
  EXPECT_EQ(cell(0, kPlannerBatch), "8.0 GiB");
  EXPECT_EQ(cell(0, kPlannerBatchDeployment), "32.0 GiB");
  EXPECT_EQ(cell(0, kPlannerWaitsOn), "KV read (memory-bound)");
  EXPECT_FALSE(model.index(0, kPlannerTpot).data(Qt::ToolTipRole).isValid());
  // A batch that does not fit: no step time or tokens/s, and the tooltip says how many fit.
  EXPECT_EQ(cell(1, kPlannerFits), "no");
  for (int column : {kPlannerTpot, kPlannerTokensPerUser, kPlannerTokensPerGpu,
                     kPlannerTokensDeployment, kPlannerWaitsOn}) {
    EXPECT_EQ(cell(1, column), "does not fit") << column;
    EXPECT_TRUE(model.index(1, column).data(Qt::ToolTipRole).toString().contains("at most 5"));
  }
  EXPECT_EQ(cell(1, kPlannerTtft), "1.50 s") << "the prefill still has a time";
  EXPECT_NE(model.index(0, kPlannerFits).data(Qt::ForegroundRole).value<QBrush>().color(),
            model.index(1, kPlannerFits).data(Qt::ForegroundRole).value<QBrush>().color());
  // The pinned row names the scenario it came from; the scheme heads each row.
  EXPECT_EQ(cell(2, kPlannerScheme), "pinned: 8K × 16 · fp16");
  EXPECT_TRUE(model.index(2, 0).data(Qt::BackgroundRole).isValid());
  EXPECT_FALSE(model.index(0, 0).data(Qt::BackgroundRole).isValid());
  for (int row = 0; row < 3; ++row) {
    EXPECT_EQ(model.headerData(row, Qt::Vertical).toString(), cell(row, kPlannerScheme));
  }
  for (int c = 0; c < kPlannerColumnCount; ++c) {
    EXPECT_FALSE(model.headerData(c, Qt::Horizontal).toString().isEmpty()) << c;
    EXPECT_FALSE(model.headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty()) << c;
  }
  EXPECT_EQ(PlannerTableModel::millis(INFINITY), "∞");
  EXPECT_EQ(PlannerTableModel::millis(0.0042), "4.20 ms");
  model.set_rows({}, {});
  EXPECT_EQ(model.rowCount(), 0);
}

planners::AdviceCell advice_cell(std::int64_t context, int users, int recommended,
                                 double fp8_gain) {
  planners::AdviceCell c;
  c.context = context;
  c.concurrency = users;
  c.recommended = recommended;
  c.outcomes.resize(2);
  c.outcomes[1].gain = fp8_gain;
  c.verdict = recommended < 0    ? "nothing fits"
              : recommended == 0 ? "don't compress"
                                 : "compress: fp8";
  c.reason = "reason " + std::to_string(context) + "/" + std::to_string(users);
  return c;
}

TEST(PlannerAdviceModel, ShowsTheVerdictTheGainAndWhy) {
  PlannerAdviceModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  planners::Advice advice;
  advice.scheme_ids = {"fp16", "fp8"};
  advice.scheme_labels = {"fp16", "FP8"};
  advice.contexts = {2048, 32768};
  advice.concurrencies = {1, 64};
  advice.quality = {"", "+0.40 % perplexity ± 0.12"};
  advice.cells = {advice_cell(2048, 1, 0, -0.05), advice_cell(2048, 64, 1, 0.584),
                  advice_cell(32768, 1, 1, INFINITY), advice_cell(32768, 64, -1, 0)};
  model.set_advice(advice);
  ASSERT_EQ(model.rowCount(), 2);
  ASSERT_EQ(model.columnCount(), 2);
  const auto cell = [&](int row, int column) { return model.index(row, column).data().toString(); };
  EXPECT_EQ(cell(0, 0), "fp16");
  EXPECT_EQ(cell(0, 1), "fp8 +58%");
  EXPECT_EQ(cell(1, 0), "fp8 (fp16: none)");
  EXPECT_EQ(cell(1, 1), "nothing fits");
  EXPECT_EQ(model.headerData(1, Qt::Vertical).toString(), "32,768 tokens");
  EXPECT_EQ(model.headerData(1, Qt::Horizontal).toString(), "64 users");
  const auto background = [&](int row, int column) {
    return model.index(row, column).data(Qt::BackgroundRole).value<QBrush>().color();
  };
  EXPECT_EQ(background(0, 0), PlannerAdviceModel::dont_compress_color());
  EXPECT_EQ(background(0, 1), PlannerAdviceModel::compress_color());
  EXPECT_EQ(background(1, 1), PlannerAdviceModel::nothing_fits_color());
  EXPECT_EQ(model.index(0, 1).data(PlannerAdviceModel::kVerdictRole).toString(), "compress: fp8");
  const QString tip = model.index(0, 1).data(Qt::ToolTipRole).toString();
  EXPECT_EQ(tip, "reason 2048/64\n\nQuality cost of fp8: +0.40 % perplexity ± 0.12.");
  EXPECT_TRUE(model.index(0, 0)
                  .data(Qt::ToolTipRole)
                  .toString()
                  .contains("no stored quality run of this model"));
  EXPECT_EQ(model.index(1, 1).data(Qt::ToolTipRole).toString(), "reason 32768/64");
  EXPECT_EQ(model.cell(1, 0)->context, 32768);
  EXPECT_EQ(model.cell(2, 0), nullptr);
  model.set_advice({});
  EXPECT_EQ(model.rowCount(), 0);
}

}  // namespace
}  // namespace kvlab::gui
