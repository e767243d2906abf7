// The Runs page's model over a real SQLite store (issue 18, part 4; issues 43 and 48): the table
// and its proxy under QAbstractItemModelTester while runs load, what each cell shows for each
// kind of run, sources by their file name, the method written once, and a perplexity change with
// its standard error.
#include <gtest/gtest.h>

#include <QAbstractItemModelTester>

#include "runs/runs_model.h"
#include "runs_test_support.h"

namespace kvlab::gui {
namespace {

using gui_test::compression_of;

// The row of run `id` in the model's filtered, sorted view, and the text of one of its cells.
int row_of(const RunsModel& model, std::int64_t id) {
  const int source_row = model.table()->row_of(id);
  if (source_row < 0) return -1;
  return model.filter()->mapFromSource(model.table()->index(source_row, 0)).row();
}

QString cell_text(const RunsModel& model, int row, int column) {
  return model.filter()->index(row, column).data().toString();
}

TEST(RunsModel, TheModelPassesTheModelTesterAndShowsEachRunsNumbers) {
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  RunsModel model(p.store);
  QAbstractItemModelTester tester(model.table(),
                                  QAbstractItemModelTester::FailureReportingMode::Fatal);
  QAbstractItemModelTester proxy_tester(model.filter(),
                                        QAbstractItemModelTester::FailureReportingMode::Fatal);
  ASSERT_TRUE(model.refresh());
  ASSERT_EQ(model.filter()->rowCount(), 3);

  // The quality run with eviction: memory 16 / 3.5 / 0.2 = 22.86x, 0.7 bits; no attention
  // error of its own; its perplexity change and KL as the Quality page writes them.
  const int q = row_of(model, p.quality);
  ASSERT_GE(q, 0);
  EXPECT_EQ(cell_text(model, q, RunsTableModel::kRatio), QStringLiteral("22.86×"));
  EXPECT_EQ(cell_text(model, q, RunsTableModel::kBits), QStringLiteral("0.70"));
  EXPECT_EQ(cell_text(model, q, RunsTableModel::kError), QString());
  EXPECT_EQ(cell_text(model, q, RunsTableModel::kPerplexityChange), QStringLiteral("+721 %"));
  EXPECT_EQ(cell_text(model, q, RunsTableModel::kKl), QStringLiteral("0.0125 nats"));
  EXPECT_EQ(cell_text(model, q, RunsTableModel::kContext), QStringLiteral("1024"));

  // The two compression runs differ by their context, which the page now shows.
  EXPECT_EQ(cell_text(model, row_of(model, p.kivi2), RunsTableModel::kContext),
            QStringLiteral("96"));
  EXPECT_EQ(cell_text(model, row_of(model, p.kivi4), RunsTableModel::kContext),
            QStringLiteral("128"));
  const auto kivi4 = p.store->load_run(p.kivi4).value();
  EXPECT_EQ(cell_text(model, row_of(model, p.kivi4), RunsTableModel::kRatio),
            QString::fromStdString(
                format_metric_value(kivi4.metrics["ratio"].get<double>(), MetricFormat::Ratio)));

  // Sorting by ratio puts the quality run (largest) first when descending.
  model.filter()->sort(RunsTableModel::kRatio, Qt::DescendingOrder);
  EXPECT_EQ(cell_text(model, 0, RunsTableModel::kId), QString::number(p.quality));
}

// Issue 43: the source column shows a model or file by its name (its tooltip has the whole
// path), and a label that already holds the method is not written after it again.
TEST(RunsModel, SourcesByTheirFileNameAndTheMethodOnce) {
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  NewRun labelled = compression_of(2, 64);
  labelled.source = "model:/home/someone/.cache/kvlab/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  labelled.label = labelled.method + " (second try)";
  const std::int64_t id = p.store->save_run(labelled).value();
  RunsModel model(p.store);
  ASSERT_TRUE(model.refresh());
  const int row = row_of(model, id);
  ASSERT_GE(row, 0);
  EXPECT_EQ(cell_text(model, row, RunsTableModel::kSource),
            QStringLiteral("model:SmolLM2-135M-Instruct.Q4_1.gguf"));
  EXPECT_EQ(cell_text(model, row, RunsTableModel::kMethod), QString::fromStdString(labelled.label));
  const QString tip =
      model.filter()->index(row, RunsTableModel::kSource).data(Qt::ToolTipRole).toString();
  EXPECT_TRUE(tip.contains(QString::fromStdString(labelled.source))) << tip.toStdString();
}

// Issue 48: a quality run's perplexity change is shown with its standard error.
TEST(RunsModel, APerplexityChangeComesWithItsStandardError) {
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  QualityReport report = test::kivi2_with_h2o_at_20_percent();
  report.perplexity_change_se = 0.0123;
  QualityConfig config;
  config.eviction = EvictionConfig{};
  const std::int64_t id =
      p.store->save_run(quality_run(report, config, {"smollm2.gguf", "file:text.txt", 1024, ""}))
          .value();
  RunsModel model(p.store);
  ASSERT_TRUE(model.refresh());
  EXPECT_EQ(cell_text(model, row_of(model, id), RunsTableModel::kPerplexityChange),
            QStringLiteral("+721 % ± 1.23"));
  EXPECT_EQ(cell_text(model, row_of(model, p.quality), RunsTableModel::kPerplexityChange),
            QStringLiteral("+721 %"))
      << "a run stored without one shows none";
}

}  // namespace
}  // namespace kvlab::gui
