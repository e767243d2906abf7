// The Runs page model alone, over a real SQLite store: reading the runs, tags and notes,
// opening a run onto its page's signal, and deleting with undo and redo (the same id back, the
// whole run as it was).
#include <gtest/gtest.h>

#include <QSignalSpy>
#include <QUndoStack>

#include "gui_test_support.h"
#include "kvlab/store/run_records.h"
#include "runs/runs_model.h"

namespace kvlab::gui {
namespace {

TEST(RunsModel, ReadsTagsOpensDeletesAndUndoes) {
  auto store =
      std::make_shared<RunsStore>(RunsStore::open(gui_test::fresh_dir() / "runs.sqlite").value());
  const CompressionReport report =
      gui_test::engine_report(gui_test::tiny_source(), gui_test::tiered_method());
  const std::int64_t first = store->save_run(compression_run(report, {}, nullptr)).value();
  const std::int64_t second = store->save_run(compression_run(report, {}, nullptr)).value();
  RunsModel model(store);
  QSignalSpy errors(&model, &RunsModel::error);
  ASSERT_TRUE(model.refresh());
  EXPECT_EQ(model.table()->rowCount(), 2);
  EXPECT_EQ(model.refresh_count(), 1);
  EXPECT_TRUE(model.summary().startsWith("2 runs in ")) << model.summary().toStdString();

  ASSERT_TRUE(model.set_tags_and_note(first, QStringLiteral(" baseline ,, long "), "a note"));
  const auto& entry =
      model.table()->entries()[static_cast<std::size_t>(model.table()->row_of(first))];
  EXPECT_EQ(entry.tags, "baseline, long");
  EXPECT_EQ(entry.notes, "a note");
  model.filter()->set_search(QStringLiteral("baseline"));
  EXPECT_TRUE(model.summary().startsWith("1 of 2 runs in ")) << model.summary().toStdString();
  model.filter()->set_search(QString());

  QSignalSpy opened(&model, &RunsModel::compression_run_opened);
  ASSERT_TRUE(model.open_run(second));
  ASSERT_EQ(opened.count(), 1);
  EXPECT_DOUBLE_EQ(opened.at(0).at(0).value<CompressionReport>().ratio, report.ratio);
  EXPECT_TRUE(
      opened.at(0).at(1).toString().startsWith(QStringLiteral("stored run #%1").arg(second)));
  EXPECT_FALSE(model.open_run(999));
  EXPECT_EQ(errors.count(), 1);

  QSignalSpy restored(&model, &RunsModel::run_restored);
  ASSERT_TRUE(model.delete_run(first));
  EXPECT_EQ(model.table()->row_of(first), -1);
  ASSERT_EQ(model.undo_stack()->count(), 1);
  model.undo_stack()->undo();
  ASSERT_EQ(restored.count(), 1);
  EXPECT_EQ(restored.at(0).at(0).toLongLong(), first);
  ASSERT_GE(model.table()->row_of(first), 0);
  auto back = store->load_run(first);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->tags, "baseline, long") << "the whole run comes back";
  model.undo_stack()->redo();
  EXPECT_EQ(model.table()->row_of(first), -1);
  EXPECT_FALSE(store->load_run(first).ok());
}

TEST(RunsModel, WithoutAStoreEveryCommandSaysNo) {
  RunsModel model(nullptr);
  EXPECT_FALSE(model.refresh());
  EXPECT_FALSE(model.open_run(1));
  EXPECT_FALSE(model.delete_run(1));
  EXPECT_FALSE(model.set_tags_and_note(1, "a", "b"));
  EXPECT_EQ(model.summary(), QString());
}

}  // namespace
}  // namespace kvlab::gui
