// Desktop integration of stored runs, driven as a person would: Edit ▸ Undo putting a deleted
// run back in the store and the Runs table exactly as it was (whatever held the focus), the
// Runs menu's recent runs, Export Chart, and Delete asking first.
#include "desktop_test_support.h"

namespace kvlab::gui {
namespace {

using namespace desktop_test;  // NOLINT: the fixture and its helpers

TEST_F(Desktop, UndoPutsADeletedRunBackExactly) {
  MainWindow w(db());
  w.show();
  w.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
  CompressionView& view = *w.compression_view();
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  view.method_panel()->set_config(gui_test::tiered_method());
  ASSERT_TRUE(view.run_and_wait(60'000)) << view.last_error().toStdString();
  const std::int64_t first = view.model()->last_saved_run_id();
  ASSERT_TRUE(view.run_and_wait(60'000)) << view.last_error().toStdString();
  const std::int64_t id = view.model()->last_saved_run_id();
  ASSERT_GT(id, first);
  RunsStore& store = *w.store();
  ASSERT_TRUE(store.set_notes(first, "the one to keep").ok());

  RunsView& runs = *w.runs_view();
  runs.set_auto_confirm(true);
  QTest::keyClick(&w, Qt::Key_5, Qt::ControlModifier);
  const int row = runs.row_of(first);
  ASSERT_GE(row, 0);
  const QStringList cells = row_texts(runs, row);
  auto before = store.load_run(first);
  ASSERT_TRUE(before.ok()) << before.message();

  ASSERT_TRUE(runs.delete_run(first));
  EXPECT_FALSE(store.load_run(first).ok());
  EXPECT_EQ(runs.row_of(first), -1);
  EXPECT_EQ(w.statusBar()->currentMessage(),
            QStringLiteral("Run %1 deleted \u2014 Ctrl+Z to undo").arg(first));
  QAction* undo = gui_test::child<QAction>(&w, "undo");
  EXPECT_TRUE(undo->isEnabled());
  EXPECT_TRUE(undo->text().contains(QStringLiteral("delete run #%1").arg(first)))
      << undo->text().toStdString();
  EXPECT_TRUE(undo->text().contains(QString::fromStdString(before->label)))
      << undo->text().toStdString() << " / " << before->label;

  runs.table()->setFocus();
  QTest::keyClick(runs.table(), Qt::Key_Z, Qt::ControlModifier);
  auto after = store.load_run(first);
  ASSERT_TRUE(after.ok()) << after.message();
  EXPECT_EQ(after->id, before->id);
  EXPECT_EQ(after->created_at, before->created_at);
  EXPECT_EQ(after->kind, before->kind);
  EXPECT_EQ(after->source, before->source);
  EXPECT_EQ(after->method, before->method);
  EXPECT_EQ(after->label, before->label);
  EXPECT_EQ(after->notes, "the one to keep");
  EXPECT_EQ(after->params, before->params);
  EXPECT_EQ(after->metrics, before->metrics);
  EXPECT_EQ(after->artifacts, before->artifacts);
  const int back = runs.row_of(first);
  ASSERT_EQ(back, row);  // same place in the newest-first table
  EXPECT_EQ(row_texts(runs, back), cells);
  EXPECT_EQ(runs.selected_run_id(), first);
  EXPECT_FALSE(undo->isEnabled());
  // And it opens as before.
  ASSERT_TRUE(runs.open_run(first));
  EXPECT_EQ(w.current_page(), Page::Compression);

  // Redo deletes it again; Undo brings it back again.
  QTest::keyClick(&w, Qt::Key_Z, Qt::ControlModifier | Qt::ShiftModifier);
  EXPECT_FALSE(store.load_run(first).ok());
  QTest::keyClick(&w, Qt::Key_Z, Qt::ControlModifier);
  ASSERT_TRUE(store.load_run(first).ok());

  // The newest run's id goes to the next run saved after it is deleted: Undo then explains
  // why it cannot put it back, and the newer run stays.
  ASSERT_TRUE(runs.delete_run_confirmed(id));
  ASSERT_TRUE(view.run_and_wait(60'000));
  ASSERT_EQ(view.model()->last_saved_run_id(), id);
  const std::string newer_created = store.load_run(id)->created_at;
  gui_test::child<QAction>(&w, "undo")->trigger();
  EXPECT_TRUE(
      w.statusBar()->currentMessage().contains(QStringLiteral("Run %1 cannot be put back").arg(id)))
      << w.statusBar()->currentMessage().toStdString();
  EXPECT_EQ(runs.model()->undo_stack()->count(),
            0);  // the command that cannot be undone is dropped
  EXPECT_EQ(store.load_run(id)->created_at, newer_created);
}

TEST_F(Desktop, CtrlZRightAfterTheDeleteButtonUndoesWhereverTheFocusWent) {
  // The person clicks Delete…, reads "Run N deleted — Ctrl+Z to undo" and presses Ctrl+Z at
  // once: the key goes to whatever has the focus then, not to a widget the test picks.
  MainWindow w(db());
  w.show();
  w.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
  CompressionView& view = *w.compression_view();
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  view.method_panel()->set_config(gui_test::tiered_method());
  ASSERT_TRUE(view.run_and_wait(60'000)) << view.last_error().toStdString();
  const std::int64_t id = view.model()->last_saved_run_id();
  RunsView& runs = *w.runs_view();
  QTest::keyClick(&w, Qt::Key_5, Qt::ControlModifier);
  const int row = runs.row_of(id);
  ASSERT_GE(row, 0);
  runs.select_runs({id});
  // The confirmation is the real question box, answered Yes with the keyboard.
  bool answered = false;
  QTimer::singleShot(200, [&] {
    if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
      box->button(QMessageBox::Yes)->click();
      answered = true;
    }
  });
  QPushButton* remove = nullptr;
  for (QPushButton* b : runs.findChildren<QPushButton*>()) {
    if (b->text() == QStringLiteral("Delete…")) remove = b;
  }
  ASSERT_NE(remove, nullptr);
  ASSERT_TRUE(remove->isEnabled());
  remove->setFocus();
  QTest::mouseClick(remove, Qt::LeftButton);
  ASSERT_TRUE(answered);
  ASSERT_FALSE(w.store()->load_run(id).ok());
  // The window manager makes the window active again once the question box is gone; Qt then
  // gives the focus back as it does after a modal dialog.
  w.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
  // Where the key goes: the focus widget, or the window itself when nothing has the focus.
  QWidget* focus = QApplication::focusWidget() ? QApplication::focusWidget() : &w;
  QTest::keyClick(focus, Qt::Key_Z, Qt::ControlModifier);
  EXPECT_TRUE(w.store()->load_run(id).ok())
      << "Ctrl+Z went to " << focus->metaObject()->className() << " and did not undo";

  // Deleted again, and the focus then in the search field, whose own Ctrl+Z undoes typing: the
  // key still undoes the deletion the status bar announced.
  runs.select_runs({id});
  ASSERT_TRUE(runs.delete_run_confirmed(id));
  auto* search = gui_test::child<QLineEdit>(&runs, "search");
  search->setFocus();
  ASSERT_TRUE(search->hasFocus());
  QTest::keyClick(search, Qt::Key_Z, Qt::ControlModifier);
  EXPECT_TRUE(w.store()->load_run(id).ok()) << "the search field took Ctrl+Z";
  // Once the person does something else, Ctrl+Z in the field is the field's again.
  QTest::keyClick(search, Qt::Key_A);
  QTest::keyClick(search, Qt::Key_Z, Qt::ControlModifier);
  EXPECT_EQ(search->text(), QString());
}

TEST_F(Desktop, RecentRunsOpenFromTheRunsMenuAndKeepTheRestoredPage) {
  MainWindow w(db());
  CompressionView& view = *w.compression_view();
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  view.method_panel()->set_config(gui_test::tiered_method());
  ASSERT_TRUE(view.run_and_wait(60'000)) << view.last_error().toStdString();
  const std::int64_t id = view.model()->last_saved_run_id();

  WindowActions& actions = *gui_test::child<WindowActions>(&w, "actions");
  actions.rebuild_recent_runs_menu();
  const QList<QAction*> entries = gui_test::child<QMenu>(&w, "recent_runs_menu")->actions();
  ASSERT_EQ(entries.size(), 1);
  EXPECT_TRUE(entries[0]->text().startsWith(QStringLiteral("#%1  compression").arg(id)))
      << entries[0]->text().toStdString();
  w.show_page(Page::Learn);
  entries[0]->trigger();
  EXPECT_EQ(w.current_page(), Page::Compression);

  // At start the newest run is redrawn behind the page the settings brought back.
  save_window_settings({{}, {}, QStringLiteral("planner"), {}});
  MainWindow next(db());
  next.restore_settings();
  ASSERT_TRUE(next.open_latest_or_run_default());
  EXPECT_EQ(next.current_page(), Page::Planner);
  EXPECT_FALSE(next.compression_view()->is_running());  // opened from the store, not recomputed
  ASSERT_TRUE(next.compression_view()->model()->report().has_value());
  EXPECT_EQ(next.compression_view()->model()->report()->ratio, view.model()->report()->ratio);

  const QString about = actions.about_text();
  EXPECT_TRUE(about.contains(qpath(db()))) << about.toStdString();
}

TEST_F(Desktop, ExportChartTakesTheFocusedChartElseThePagesFirst) {
  MainWindow w(db());
  w.show();
  w.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
  QWidget* page = w.page_widget(Page::Compression);
  const auto charts = page->findChildren<QCustomPlot*>();
  QCustomPlot* first_visible = nullptr;
  for (QCustomPlot* c : charts) {
    if (c->isVisible()) {
      first_visible = c;
      break;
    }
  }
  ASSERT_NE(first_visible, nullptr);
  w.compression_view()->run_button()->setFocus();
  EXPECT_EQ(chart_under_focus_or_first(page), first_visible);
  QCustomPlot* layer_chart = gui_test::child<LayerChart>(w.compression_view(), "layers");
  ASSERT_NE(layer_chart, first_visible);
  layer_chart->setFocusPolicy(Qt::ClickFocus);
  layer_chart->setFocus();
  EXPECT_EQ(chart_under_focus_or_first(page), layer_chart);
  // The Runs page has a table, no chart.
  EXPECT_EQ(chart_under_focus_or_first(w.page_widget(Page::Runs)), nullptr);
  EXPECT_EQ(gui_test::child<QAction>(&w, "export_chart")->shortcut(),
            QKeySequence(Qt::CTRL | Qt::Key_E));
}

TEST_F(Desktop, DeleteAsksFirstAndSaysItCanBeUndone) {
  MainWindow w(db());
  w.show();
  CompressionView& view = *w.compression_view();
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  view.method_panel()->set_config(gui_test::tiered_method());
  ASSERT_TRUE(view.run_and_wait(60'000)) << view.last_error().toStdString();
  const std::int64_t id = view.model()->last_saved_run_id();
  w.show_page(Page::Runs);
  // The question is modal: answer it from a timer, as a person would click.
  for (const auto answer : {QMessageBox::No, QMessageBox::Yes}) {
    QString asked;
    QTimer::singleShot(100, &w, [&] {
      auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
      if (!box) return;
      asked = box->text();
      const QString out = qEnvironmentVariable("KVLAB_DESKTOP_SHOTS");
      if (!out.isEmpty()) box->grab().save(QDir(out).filePath("delete-question.png"));
      box->button(answer)->click();
    });
    const bool deleted = w.runs_view()->delete_run(id);
    EXPECT_TRUE(asked.contains(QStringLiteral("Delete run #%1").arg(id))) << asked.toStdString();
    EXPECT_TRUE(asked.contains("Ctrl+Z")) << asked.toStdString();
    EXPECT_EQ(deleted, answer == QMessageBox::Yes);
    EXPECT_EQ(w.store()->load_run(id).ok(), answer == QMessageBox::No);
  }
}

}  // namespace
}  // namespace kvlab::gui
