// The Planner page against plan() computed here for the same scenario: the table, the memory
// bars, the formula, recomputation on every change, config.json import, saving and reopening a
// scenario from a real SQLite store, and the recompute time.
#include <qcustomplot.h>
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QTableView>
#include <fstream>

#include "gui_test_support.h"
#include "kvlab/gui/main_window.h"
#include "kvlab/gui/planner_table_model.h"
#include "kvlab/gui/planner_view.h"
#include "kvlab/gui/runs_view.h"

namespace kvlab::gui {
namespace {

planners::PlanResult expected(const char* model, const char* gpu, const char* scheme, int context,
                              int batch) {
  planners::Scenario s;
  s.model = planners::find_model(model).value();
  s.gpu = planners::find_gpu(gpu).value();
  s.scheme = planners::parse_scheme(scheme).value();
  s.context = context;
  s.batch = batch;
  return planners::plan(s).value();
}

TEST(PlannerView, ShowsWhatThePlannerComputes) {
  PlannerView view(nullptr);
  view.set_model("llama-3-8b");
  view.set_gpu("h100-sxm");
  view.set_context(8192);
  view.set_batch(64);
  view.set_schemes({"fp16", "kivi2"});
  ASSERT_EQ(view.results().size(), 2u) << view.error_text().toStdString();
  const auto fp16 = expected("llama-3-8b", "h100-sxm", "fp16", 8192, 64);
  const auto kivi = expected("llama-3-8b", "h100-sxm", "kivi2", 8192, 64);
  QAbstractItemModelTester tester(view.table_model(),
                                  QAbstractItemModelTester::FailureReportingMode::Fatal);
  const QAbstractItemModel* t = view.table()->model();
  ASSERT_EQ(t, view.table_model());
  const auto cell = [t](int row, int column) { return t->index(row, column).data().toString(); };
  ASSERT_EQ(t->rowCount(), 2);
  EXPECT_EQ(cell(0, kPlannerFits), fp16.fits ? "yes" : "no");
  EXPECT_FALSE(fp16.fits);  // 64 × 1 GiB does not fit next to 16 GB of weights
  EXPECT_EQ(cell(0, kPlannerMaxBatch).toLongLong(), fp16.max_batch);
  EXPECT_EQ(cell(0, kPlannerMaxContext).toLongLong(), fp16.max_context);
  EXPECT_EQ(cell(1, kPlannerMaxBatch).toLongLong(), kivi.max_batch);
  EXPECT_EQ(cell(1, kPlannerFits), "yes");
  EXPECT_EQ(view.formula()->toPlainText().toStdString(), fp16.formula);
  // The memory bars: the KV of a batch that does not fit is drawn in the "does not fit" series.
  auto* chart = view.memory_chart();
  QCPBars* over = nullptr;
  QCPBars* fits = nullptr;
  for (int i = 0; i < chart->plottableCount(); ++i) {
    auto* b = qobject_cast<QCPBars*>(chart->plottable(i));
    if (b && b->name().contains("does not fit")) over = b;
    if (b && b->name().contains("(fits)")) fits = b;
  }
  ASSERT_TRUE(over && fits);
  ASSERT_EQ(over->data()->size(), 1);
  EXPECT_NEAR(over->data()->begin()->value, fp16.kv_bytes_batch_per_gpu / double(1ull << 30), 1e-9);
  ASSERT_EQ(fits->data()->size(), 1);
  EXPECT_NEAR(fits->data()->begin()->value, kivi.kv_bytes_batch_per_gpu / double(1ull << 30), 1e-9);
  // A change recomputes at once.
  view.set_batch(8);
  EXPECT_EQ(cell(0, kPlannerFits), "yes");
  EXPECT_EQ(view.results()[0].kv_bytes_batch_per_gpu,
            expected("llama-3-8b", "h100-sxm", "fp16", 8192, 8).kv_bytes_batch_per_gpu);
  // Well under a frame.
  EXPECT_GT(view.last_recompute_ms(), 0.0);
  EXPECT_LT(view.last_recompute_ms(), 16.0);
  EXPECT_TRUE(view.timing_label()->text().contains("recomputed in"));
  // An impossible scenario shows an error, not a crash.
  view.set_context(100000);
  EXPECT_TRUE(view.results().empty());
  EXPECT_TRUE(view.error_text().contains("limit of 8192")) << view.error_text().toStdString();
}

TEST(PlannerView, ImportSaveReopenAndPin) {
  const auto dir = gui_test::fresh_dir();
  std::ofstream(dir / "config.json")
      << R"({"model_type": "llama", "num_hidden_layers": 16, "num_attention_heads": 32,
             "num_key_value_heads": 8, "hidden_size": 2048, "intermediate_size": 8192,
             "vocab_size": 128256, "max_position_embeddings": 131072, "head_dim": 64})";
  MainWindow window(dir / "runs.sqlite");
  PlannerView& view = *window.planner_view();
  ASSERT_TRUE(view.import_config(QString::fromStdString((dir / "config.json").string())))
      << view.error_text().toStdString();
  EXPECT_EQ(view.scenario().model.layers, 16);  // the imported model is selected
  view.set_gpu("l40s");
  view.set_context(65536);
  view.set_batch(4);
  view.set_schemes({"fp8", "int4"});
  ASSERT_EQ(view.results().size(), 2u) << view.error_text().toStdString();
  const auto saved_numbers = view.results()[1].kv_bytes_batch_per_gpu;
  const std::int64_t id = view.save();
  ASSERT_GT(id, 0) << view.error_text().toStdString();
  view.pin();
  ASSERT_EQ(view.table_model()->rowCount(), 4);  // two schemes and their pinned copies
  EXPECT_TRUE(
      view.table_model()->index(2, kPlannerScheme).data().toString().startsWith("pinned: "));
  EXPECT_EQ(view.table_model()->index(3, kPlannerBatch).data().toString(),
            view.table_model()->index(1, kPlannerBatch).data().toString());
  // Something else, then reopen the stored scenario from the Runs page.
  view.set_model("llama-2-7b");
  view.set_context(1024);
  ASSERT_TRUE(window.runs_view()->open_run(id));
  EXPECT_EQ(window.current_page(), Page::Planner);
  EXPECT_EQ(view.scenario().model.layers, 16);
  EXPECT_EQ(view.scenario().context, 65536);
  EXPECT_EQ(view.scenario().gpu.id, "l40s");
  ASSERT_EQ(view.results().size(), 2u);
  EXPECT_EQ(view.results()[1].kv_bytes_batch_per_gpu, saved_numbers);
  // The imported model stays in the store for the next session.
  PlannerView again(std::make_shared<RunsStore>(RunsStore::open(dir / "runs.sqlite").value()));
  again.set_model(QString::fromStdString(view.scenario().model.id));
  EXPECT_EQ(again.scenario().model.layers, 16);
  // A broken config.json is refused with its name.
  std::ofstream(dir / "bad.json") << "{";
  EXPECT_FALSE(view.import_config(QString::fromStdString((dir / "bad.json").string())));
  EXPECT_TRUE(view.error_text().contains("bad.json"));
}

}  // namespace
}  // namespace kvlab::gui
