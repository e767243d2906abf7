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
