// The Runs page's models alone: the table over stored run summaries (each kind's numbers in its
// columns, the short source, ± on a quality run's perplexity change) and the proxy that filters
// by kind and words and sorts numbers as numbers, each under QAbstractItemModelTester.
#include <gtest/gtest.h>

#include <vector>

#include <QAbstractItemModelTester>

#include "common/gui_format.h"
#include "runs/runs_table_model.h"

namespace kvlab::gui {
namespace {

RunSummary summary(std::int64_t id, const char* kind, const char* source, const char* method,
                   nlohmann::json metrics) {
  RunSummary run;
  run.id = id;
  run.created_at = "2026-11-28T12:00:00.000Z";
  run.kind = kind;
  run.source = source;
  run.method = method;
  run.metrics = std::move(metrics);
  return run;
}

// Newest first, as the store lists them.
std::vector<RunSummary> stored_runs() {
  std::vector<RunSummary> runs;
  runs.push_back(summary(4, "quality", "model:/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                         "kivi-2 G=32 R=128",
                         {{"tokens", 2048},
                          {"windows", 2},
                          {"ratio", 4.0},
                          {"bits_per_value", 4.0},
                          {"perplexity_change", 0.0123},
                          {"perplexity_change_se", 0.0045},
                          {"kl_mean", 0.0321}}));
  runs.back().tags = "baseline";
  runs.push_back(summary(3, "eviction", "synthetic:tiny", "h2o",
                         {{"tokens", 512},
                          {"memory_ratio", 2.0},
                          {"needle_retained", 0.75},
                          {"attn_output_rel_error", 0.05}}));
  runs.push_back(summary(2, "compression", "file:/data/caches/layer0.safetensors", "int8",
                         {{"tokens", 96},
                          {"ratio", 1.9},
                          {"bits_per_value", 8.42},
                          {"error", {{"attn_output_rel_error", 0.0012}}}}));
  runs.back().notes = "before the fix";
  runs.push_back(summary(1, "plan", "planner", "fp16", {{"context", 8192}}));
  return runs;
}

TEST(RunsTableModel, ShowsEachKindsNumbersInItsColumns) {
  RunsTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.set_runs(stored_runs());
  ASSERT_EQ(model.rowCount(), 4);
  ASSERT_EQ(model.columnCount(), RunsTableModel::kColumnCount);
  const auto cell = [&](int row, int column) { return model.index(row, column).data().toString(); };
  // The quality run: window of 2048 / 2 + 1 tokens, ratio and bits as stored, Δ ppl ± its SE.
  EXPECT_EQ(cell(0, RunsTableModel::kId), "4");
  EXPECT_EQ(cell(0, RunsTableModel::kKind), "quality");
  EXPECT_EQ(cell(0, RunsTableModel::kSource), "model:SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(model.index(0, RunsTableModel::kSource).data(kFullTextRole).toString(),
            "model:/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(cell(0, RunsTableModel::kContext), "1025");
  EXPECT_EQ(cell(0, RunsTableModel::kRatio), "4.00×");
  EXPECT_EQ(cell(0, RunsTableModel::kBits), "4.00");
  EXPECT_EQ(cell(0, RunsTableModel::kPerplexityChange), "+1.23 % ± 0.45");
  EXPECT_EQ(cell(0, RunsTableModel::kKl), "0.0321 nats");
  EXPECT_EQ(cell(0, RunsTableModel::kTags), "baseline");
  // The eviction run: memory ratio 2 is 8 bits a value; the needle kept by 75 % of heads.
  EXPECT_EQ(cell(1, RunsTableModel::kRatio), "2.00×");
  EXPECT_EQ(cell(1, RunsTableModel::kBits), "8.00");
  EXPECT_EQ(cell(1, RunsTableModel::kNeedle), "75 %");
  EXPECT_EQ(cell(1, RunsTableModel::kPerplexityChange), "");
  // The compression run: its attention-output error; the note only in the tooltip.
  EXPECT_EQ(cell(2, RunsTableModel::kSource), "file:layer0.safetensors");
  EXPECT_EQ(cell(2, RunsTableModel::kError), "0.0012");
  EXPECT_TRUE(model.index(2, 0).data(Qt::ToolTipRole).toString().contains("Note: before the fix"));
  // The plan run: only its context.
  EXPECT_EQ(cell(3, RunsTableModel::kContext), "8192");
  EXPECT_EQ(cell(3, RunsTableModel::kRatio), "");
  EXPECT_EQ(model.index(3, RunsTableModel::kMethod).data(RunsTableModel::kIdRole).toLongLong(), 1);
  EXPECT_EQ(model.row_of(2), 2);
  EXPECT_EQ(model.row_of(99), -1);
  for (int c = 0; c < RunsTableModel::kColumnCount; ++c) {
    EXPECT_FALSE(model.headerData(c, Qt::Horizontal).toString().isEmpty()) << c;
    EXPECT_FALSE(model.headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty()) << c;
  }
  model.set_runs({});
  EXPECT_EQ(model.rowCount(), 0);
}

TEST(RunsFilterModel, FiltersByKindAndWordsAndSortsNumbersAsNumbers) {
  RunsTableModel runs;
  RunsFilterModel filter;
  filter.setSourceModel(&runs);
  QAbstractItemModelTester tester(&filter, QAbstractItemModelTester::FailureReportingMode::Fatal);
  runs.set_runs(stored_runs());
  const auto ids = [&] {
    std::vector<qlonglong> out;
    for (int row = 0; row < filter.rowCount(); ++row) {
      out.push_back(filter.index(row, 0).data(RunsTableModel::kIdRole).toLongLong());
    }
    return out;
  };
  EXPECT_EQ(ids(), (std::vector<qlonglong>{4, 3, 2, 1}));
  filter.set_kind(RunKind::Eviction);
  EXPECT_EQ(ids(), (std::vector<qlonglong>{3}));
  filter.set_kind(std::nullopt);
  filter.set_search(QStringLiteral("BEFORE fix"));  // words of the note, any case, any order
  EXPECT_EQ(ids(), (std::vector<qlonglong>{2}));
  filter.set_search(QStringLiteral("smollm2 baseline"));
  EXPECT_EQ(ids(), (std::vector<qlonglong>{4}));
  filter.set_search(QString());
  // Ratio ascending: 1.9 before 2 before 4 (as text "4.00×" < "1.90×" would not be); runs
  // without a ratio last.
  filter.sort(RunsTableModel::kRatio, Qt::AscendingOrder);
  EXPECT_EQ(ids(), (std::vector<qlonglong>{2, 3, 4, 1}));
  filter.sort(RunsTableModel::kRatio, Qt::DescendingOrder);
  EXPECT_EQ(ids(), (std::vector<qlonglong>{4, 3, 2, 1}));
  // Context: 96 < 512 < 1025 < 8192 as numbers ("96" sorts after "8192" as text).
  filter.sort(RunsTableModel::kContext, Qt::AscendingOrder);
  EXPECT_EQ(ids(), (std::vector<qlonglong>{2, 3, 4, 1}));
}

}  // namespace
}  // namespace kvlab::gui
