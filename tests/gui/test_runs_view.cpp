// The Runs page as a comparison tool (issue 18, part 4; the models alone are in
// tests/gui/models): an export with whole sources, search and kind filter, tags and notes,
// two runs overlaid with the parameters that differ, and runs saved by another process appearing
// by themselves.
#include <gtest/gtest.h>

#include <QLabel>

#include <cstdlib>

#include <qcustomplot.h>
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLineEdit>
#include <QProcess>
#include <QTableWidget>

#include "common/chart_export.h"
#include "gui_test_support.h"
#include "kvlab/store/run_records.h"
#include "runs/runs_view.h"
#include "runs_test_support.h"

namespace kvlab::gui {
namespace {

using gui_test::compression_of;
using gui_test::fresh_dir;

bool wait_for(const std::function<bool()>& done, int ms) {
  QElapsedTimer timer;
  timer.start();
  while (!done() && timer.elapsed() < ms) QApplication::processEvents(QEventLoop::AllEvents, 20);
  return done();
}

TEST(RunsPage, AnExportHasTheWholeSource) {
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  NewRun labelled = compression_of(2, 64);
  labelled.source = "model:/home/someone/.cache/kvlab/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  p.store->save_run(labelled).value();
  RunsView view(p.store, QString());
  view.refresh();
  const QString csv = table_to_csv(view.table());
  EXPECT_TRUE(csv.contains(QString::fromStdString(labelled.source))) << csv.toStdString();
}

TEST(RunsPage, SearchKindFilterAndTags) {
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  RunsView view(p.store, QString());
  auto* kind = gui_test::child<QComboBox>(&view, "kind");
  kind->setCurrentIndex(kind->findText(QStringLiteral("quality")));
  EXPECT_EQ(view.row_count(), 1);
  kind->setCurrentIndex(0);
  EXPECT_EQ(view.row_count(), 3);

  ASSERT_TRUE(view.model()->set_tags_and_note(p.kivi4, QStringLiteral(" baseline ,, long "),
                                              QStringLiteral("the one to beat")));
  EXPECT_EQ(p.store->load_run(p.kivi4)->tags, "baseline, long");
  EXPECT_EQ(view.cell_text(view.row_of(p.kivi4), RunsTableModel::kTags),
            QStringLiteral("baseline, long"));
  auto* search = gui_test::child<QLineEdit>(&view, "search");
  search->setText(QStringLiteral("BASELINE"));
  ASSERT_EQ(view.row_count(), 1);
  EXPECT_EQ(view.cell_text(0, RunsTableModel::kId), QString::number(p.kivi4));
  search->setText(QStringLiteral("beat"));  // the note is searched too
  EXPECT_EQ(view.row_count(), 1);
  search->setText(QStringLiteral("nothing-like-this"));
  EXPECT_EQ(view.row_count(), 0);
  search->clear();
  EXPECT_EQ(view.row_count(), 3);
}

TEST(RunsPage, TwoRunsOverlaidWithTheParametersThatDiffer) {
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  RunsView view(p.store, QString());
  view.resize(1100, 800);
  view.show();
  view.select_runs({p.kivi2, p.kivi4});
  RunsComparePanel* panel = gui_test::child<RunsComparePanel>(&view, "compare");
  auto* layer_plot = gui_test::child<QCustomPlot>(panel, "layer_plot");
  auto* differences = gui_test::child<QTableWidget>(panel, "differences");
  // One curve per run over the tiny preset's layers, on one plot.
  const int layers = static_cast<int>(p.store->load_run(p.kivi2)->metrics["per_layer"].size());
  ASSERT_EQ(layer_plot->graphCount(), 2);
  EXPECT_EQ(layer_plot->graph(0)->data()->size(), layers);
  EXPECT_EQ(layer_plot->graph(1)->data()->size(), layers);
  EXPECT_EQ(gui_test::child<QComboBox>(panel, "layer_metric")->currentText(),
            QStringLiteral("ratio vs fp16"));
  // They differ in bits and context, and not in the source kind.
  QStringList differing;
  for (int r = 0; r < differences->rowCount(); ++r) {
    differing << differences->verticalHeaderItem(r)->text();
  }
  EXPECT_TRUE(differing.contains(QStringLiteral("bits"))) << differing.join(", ").toStdString();
  EXPECT_TRUE(differing.contains(QStringLiteral("context")));
  EXPECT_FALSE(differing.contains(QStringLiteral("kind")));
  const int bits_row = static_cast<int>(differing.indexOf(QStringLiteral("bits")));
  QStringList bits;
  for (int c = 0; c < differences->columnCount(); ++c) {
    bits << differences->item(bits_row, c)->text();
  }
  EXPECT_TRUE(bits.contains(QStringLiteral("2")) && bits.contains(QStringLiteral("4")));
  // Compression runs have no decode steps: no empty step chart beside the layer chart.
  EXPECT_TRUE(layer_plot->isVisible());
  EXPECT_FALSE(gui_test::child<QCustomPlot>(panel, "step_plot")->isVisible());

  view.select_runs({p.kivi2});  // one run: its own curve (issue 43: it showed nothing)
  EXPECT_EQ(layer_plot->graphCount(), 1);
  bool said = false;
  for (const QLabel* label : panel->findChildren<QLabel*>()) {
    said = said || label->text().contains(QStringLiteral("its curves"));
  }
  EXPECT_TRUE(said) << "the panel says what it shows for one run";
  view.select_runs({});
  EXPECT_EQ(layer_plot->graphCount(), 0);
}

// kvlab generate --save (issue 47): a generate run lists under its own kind with the tokens it
// held, its ratio and bits, and two of them compare with the settings that differ.
TEST(RunsPage, GenerateRunsListUnderTheirKind) {
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  // What `kvlab generate --json --compare` prints, as it printed it for two caches.
  const auto result = [](const char* label, double bytes) {
    return nlohmann::json{
        {"model", "SmolLM2-135M-Instruct.Q4_1.gguf"},
        {"prompt_tokens", 8128},
        {"generated_ids", std::vector<int>(64, 7)},
        {"generated", "the text"},
        {"decode_steps", 63},
        {"prefill_tokens_per_second", 124.1},
        {"decode_tokens_per_second", 27.1},
        {"threads", 2},
        {"cache", {{"method", label}, {"bytes", bytes}, {"fp16_bytes", 188743680.0}}},
        {"peak_resident_bytes", 524000000},
        {"fp16", {{"decode_tokens_per_second", 29.2}, {"peak_resident_bytes", 658800000}}},
        {"greedy_tokens_agreeing", 12},
        {"decode_speed_vs_fp16", 0.93}};
  };
  MethodConfig q4;
  q4.kind = MethodKind::Q4_0;
  MethodConfig kivi;
  kivi.kind = MethodKind::Kivi;
  kivi.bits = 4;
  nlohmann::json a = result("q4_0", 53084160.0), b = result("kivi-4 G=32 R=128", 61005824.0);
  a["cache"]["ratio"] = 188743680.0 / 53084160.0;
  b["cache"]["ratio"] = 188743680.0 / 61005824.0;
  const std::int64_t ida = p.store->save_run(generate_run(a, q4)).value();
  const std::int64_t idb = p.store->save_run(generate_run(b, kivi)).value();
  RunsView view(p.store, QString());
  view.resize(1400, 800);
  view.show();
  view.refresh();
  auto* kind = gui_test::child<QComboBox>(&view, "kind");
  kind->setCurrentIndex(kind->findText(QStringLiteral("generate")));
  ASSERT_EQ(view.row_count(), 2);
  const int row = view.row_of(ida);
  EXPECT_EQ(view.cell_text(row, RunsTableModel::kContext), QStringLiteral("8191"));
  EXPECT_EQ(view.cell_text(row, RunsTableModel::kRatio), QStringLiteral("3.56×"));
  EXPECT_EQ(view.cell_text(row, RunsTableModel::kBits), QStringLiteral("4.50"));
  view.select_runs({ida, idb});
  auto* differences = gui_test::child<QTableWidget>(
      gui_test::child<RunsComparePanel>(&view, "compare"), "differences");
  QStringList differing;
  for (int r = 0; r < differences->rowCount(); ++r) {
    differing << differences->verticalHeaderItem(r)->text();
  }
  EXPECT_TRUE(differing.contains(QStringLiteral("method"))) << differing.join(", ").toStdString();
  // What each measured, side by side: the numbers kvlab generate printed.
  const int speed = static_cast<int>(differing.indexOf(QStringLiteral("decode speed vs fp16")));
  ASSERT_GE(speed, 0) << differing.join(", ").toStdString();
  EXPECT_EQ(differences->item(speed, 0)->text(), QStringLiteral("0.93×"));
  const int held = static_cast<int>(differing.indexOf(QStringLiteral("cache held")));
  ASSERT_GE(held, 0);
  EXPECT_NE(differences->item(held, 0)->text(), differences->item(held, 1)->text());
  // No curves in such runs: no empty chart either.
  EXPECT_FALSE(gui_test::child<QCustomPlot>(&view, "layer_plot")->isVisible());
  if (const char* shots = std::getenv("KVLAB_SCREENSHOT_DIR"); shots && *shots) {
    QApplication::processEvents();
    view.grab().save(QString::fromUtf8(shots) + QStringLiteral("/runs-generate.png"));
  }
}

TEST(RunsPage, RunsSavedByAnotherProcessAppearByThemselves) {
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  RunsView view(p.store, QString());
  ASSERT_EQ(view.row_count(), 3);
  const int before = view.model()->refresh_count();
  QProcess cli;
  cli.start(
      QStringLiteral(KVLAB_CLI_PATH),
      {"compress", "--source", "synthetic:tiny", "--context", "64", "--method", "int8", "--save",
       "--label", "from the command line", "--db", QString::fromStdString(p.db.string())});
  ASSERT_TRUE(cli.waitForFinished(60000));
  ASSERT_EQ(cli.exitCode(), 0) << cli.readAllStandardError().toStdString();
  // No call to refresh(): the page watches the file.
  EXPECT_TRUE(wait_for([&] { return view.row_count() == 4; }, 10000));
  EXPECT_GT(view.model()->refresh_count(), before);
  auto* search = gui_test::child<QLineEdit>(&view, "search");
  EXPECT_EQ(search->text(), QString());
  search->setText(QStringLiteral("command line"));
  EXPECT_EQ(view.row_count(), 1);
  // Reading does not feed the watcher back into itself: it settles.
  const int settled = view.model()->refresh_count();
  wait_for([] { return false; }, 1000);
  EXPECT_LE(view.model()->refresh_count(), settled + 1);
}

TEST(RunsPage, ARunHoldingBytesThatAreNotUtf8ListsAndOpens) {
  // A database written by an older kvlab or edited outside it: the label and source of a run
  // set to raw bytes behind kvlab's back (issue 42). The page lists it with U+FFFD for each bad
  // byte and opens it.
  gui_test::ThreeRuns p = gui_test::store_with_three_runs();
  const std::string edit =
      "python3 -c \"import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('UPDATE runs "
      "SET label=CAST(X\\'78FF79\\' AS TEXT), source=CAST(X\\'66696C653AC3\\' AS TEXT) "
      "WHERE id=" +
      std::to_string(p.kivi2) + "'); c.commit()\" " + p.db.string();
  ASSERT_EQ(std::system(edit.c_str()), 0) << edit;
  RunsView view(p.store, QString());
  view.refresh();
  ASSERT_EQ(view.row_count(), 3);
  const int row = view.row_of(p.kivi2);
  ASSERT_GE(row, 0);
  EXPECT_EQ(view.cell_text(row, RunsTableModel::kSource), QStringLiteral("file:\uFFFD"));
  EXPECT_TRUE(view.cell_text(row, RunsTableModel::kMethod).contains(QStringLiteral("x\uFFFDy")))
      << view.cell_text(row, RunsTableModel::kMethod).toStdString();
  EXPECT_TRUE(view.open_run(p.kivi2));
}

}  // namespace
}  // namespace kvlab::gui
