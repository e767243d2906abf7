// Desktop integration, driven as a person would: settings that survive a new window (in a
// temporary QSettings folder, never the user's), files dropped on the window opening in the
// right page, menu shortcuts typed with QTest, the Help menu, and every page fitting a laptop
// window. Deleting, undoing and reopening runs are in test_desktop_runs.cpp.
#include "desktop_test_support.h"

namespace kvlab::gui {
namespace {

using namespace desktop_test;  // NOLINT: the fixture and its helpers

TEST_F(Desktop, TheTestFilesAreRealInputsOfTheEngineAndThePlanner) {
  for (const QString& file : {m_npy, m_safetensors}) {
    auto loaded = load_cache_file(file.toStdString());
    ASSERT_TRUE(loaded.ok()) << loaded.message();
    EXPECT_EQ(loaded->layers.size(), m_cache.layers.size());
    EXPECT_EQ(loaded->layers[1].value.at(5, 1, 3), m_cache.layers[1].value.at(5, 1, 3));
  }
  auto model = planners::import_hf_config_file(m_config.toStdString());
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_EQ(model->layers, 16);
  EXPECT_EQ(model->kv_heads, 8);
}

// Issue 43: a window remembered on a larger screen comes back whole on this one.
TEST(FitOnScreen, ALargerWindowIsShrunkAndMovedIn) {
  const QRect screen(0, 0, 1024, 700);
  EXPECT_EQ(fit_on_screen(QRect(100, 50, 1280, 800), screen, QSize()), screen);
  EXPECT_EQ(fit_on_screen(QRect(600, 400, 800, 500), screen, QSize()), QRect(224, 200, 800, 500));
  EXPECT_EQ(fit_on_screen(QRect(-50, -20, 400, 300), screen, QSize()), QRect(0, 0, 400, 300));
  EXPECT_EQ(fit_on_screen(QRect(10, 10, 300, 200), screen, QSize()), QRect(10, 10, 300, 200));
  // Never below the window's minimum, and then its top-left corner stays on the screen.
  EXPECT_EQ(fit_on_screen(QRect(0, 0, 2000, 2000), screen, QSize(1100, 720)),
            QRect(0, 0, 1100, 720));
}

TEST_F(Desktop, AWindowRememberedOnALargerScreenComesBackOnThisOne) {
  {
    MainWindow w(db());
    w.restore_settings();
    w.show();
    w.setGeometry(300, 200, 1280, 1000);  // larger than this 800 × 800 screen, and off its edge
    QApplication::processEvents();
    w.close();
  }
  MainWindow w(db());
  w.restore_settings();
  w.show();
  QApplication::processEvents();
  const QRect screen = w.screen()->availableGeometry();
  EXPECT_TRUE(screen.contains(w.frameGeometry()))
      << w.frameGeometry().x() << "," << w.frameGeometry().y() << " " << w.frameGeometry().width()
      << "x" << w.frameGeometry().height();
}

TEST_F(Desktop, SettingsSurviveANewWindow) {
  QSize size;  // a size no window starts with: a little over the smallest the layout allows
  {
    MainWindow w(db());
    w.restore_settings();
    w.show();
    // A size no window starts with, that fits the screen (a larger one is brought back to it).
    size = w.screen()->availableGeometry().size() - QSize(37, 41);
    w.resize(size);
    ASSERT_TRUE(w.open_file(m_npy));
    ASSERT_TRUE(w.open_file(m_config));
    w.show_page(Page::Runs);
    QApplication::processEvents();
    w.close();
  }
  ASSERT_TRUE(QFile::exists(settings_file_path()));
  const QByteArray saved = [&] {
    QFile f(settings_file_path());
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }();

  {
    MainWindow w(db());
    w.restore_settings();
    w.show();
    QApplication::processEvents();
    EXPECT_EQ(w.size(), size);
    EXPECT_EQ(w.current_page(), Page::Runs);
    EXPECT_EQ(w.recent_files(), QStringList({m_config, m_npy}));  // newest first
    WindowActions* actions = gui_test::child<WindowActions>(&w, "actions");
    actions->rebuild_recent_files_menu();
    const QStringList texts = menu_texts(gui_test::child<QMenu>(&w, "recent_files_menu"));
    ASSERT_GE(texts.size(), 2);
    EXPECT_EQ(texts[0], QStringLiteral("&1  config.json"));
    EXPECT_EQ(texts[1], QStringLiteral("&2  tiny.npy"));
    // The View menu shows the restored page as the checked one.
    EXPECT_TRUE(actions->page_action(static_cast<int>(Page::Runs))->isChecked());
  }

  // A window that never called restore_settings() (tests, --screenshot) starts from the defaults
  // and leaves the saved settings alone when it closes.
  {
    MainWindow w(db());
    w.show();
    QApplication::processEvents();
    EXPECT_NE(w.size(), size);
    EXPECT_EQ(w.current_page(), Page::Compression);
    EXPECT_TRUE(w.recent_files().isEmpty());
    w.show_page(Page::Learn);
    w.open_file(m_safetensors);
    w.close();
  }
  QFile f(settings_file_path());
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  EXPECT_EQ(f.readAll(), saved);
}

TEST_F(Desktop, OpenRecentDropsFilesThatAreGoneAndSaysWhich) {
  MainWindow w(db());
  w.restore_settings();
  ASSERT_TRUE(w.open_file(m_npy));
  ASSERT_TRUE(w.open_file(m_safetensors));
  ASSERT_TRUE(QFile::remove(m_npy));
  gui_test::child<WindowActions>(&w, "actions")->rebuild_recent_files_menu();
  EXPECT_EQ(w.recent_files(), QStringList({m_safetensors}));
  EXPECT_TRUE(w.statusBar()->currentMessage().contains("tiny.npy"))
      << w.statusBar()->currentMessage().toStdString();
  const QStringList texts = menu_texts(gui_test::child<QMenu>(&w, "recent_files_menu"));
  EXPECT_EQ(texts.size(), 2);  // the file and "Clear list"
  EXPECT_EQ(load_window_settings().recent_files, QStringList({m_safetensors}));  // saved at once
  // Opening a vanished file (an old menu entry) says so and forgets it too.
  EXPECT_FALSE(w.open_file(m_npy));
  EXPECT_TRUE(w.statusBar()->currentMessage().contains("no such file"));
}

TEST_F(Desktop, DroppingKvFilesMakesThemTheCompressionSource) {
  MainWindow w(db());
  w.show();
  // The .npy lands on the Planner page's body, the .safetensors on a line edit of the source
  // panel (which would otherwise paste the URL as text).
  w.show_page(Page::Planner);
  DropResult r = drop_files(w.planner_view(), {m_npy});
  EXPECT_TRUE(r.enter_accepted);
  EXPECT_TRUE(r.drop_accepted);
  EXPECT_EQ(w.current_page(), Page::Compression);
  SourceSpec spec = w.compression_view()->source_panel()->spec();
  EXPECT_EQ(spec.kind, SourceSpec::Kind::File);
  EXPECT_EQ(spec.file, m_npy);

  auto* line_edit = w.compression_view()->source_panel()->findChild<QLineEdit*>();
  ASSERT_NE(line_edit, nullptr);
  r = drop_files(line_edit, {m_safetensors});
  EXPECT_TRUE(r.drop_accepted);
  spec = w.compression_view()->source_panel()->spec();
  EXPECT_EQ(spec.kind, SourceSpec::Kind::File);
  EXPECT_EQ(spec.file, m_safetensors);
  EXPECT_EQ(w.recent_files(), QStringList({m_safetensors, m_npy}));

  // The dropped file is really what runs: the same ratio as the engine on the same tensors.
  w.compression_view()->method_panel()->set_config(gui_test::tiered_method());
  ASSERT_TRUE(w.compression_view()->run_and_wait(60'000))
      << w.compression_view()->last_error().toStdString();
  auto loaded = load_cache_file(m_safetensors.toStdString());
  ASSERT_TRUE(loaded.ok());
  auto expected = compress_cache(*loaded, gui_test::tiered_method());
  ASSERT_TRUE(expected.ok());
  EXPECT_DOUBLE_EQ(w.compression_view()->model()->report()->ratio, expected->ratio);
}

TEST_F(Desktop, DroppingAConfigJsonImportsTheModelIntoThePlanner) {
  MainWindow w(db());
  w.show();
  const DropResult r = drop_files(&w, {m_config});
  EXPECT_TRUE(r.drop_accepted);
  EXPECT_EQ(w.current_page(), Page::Planner);
  auto expected = planners::import_hf_config_file(m_config.toStdString());
  ASSERT_TRUE(expected.ok()) << expected.message();
  const planners::Scenario s = w.planner_view()->scenario();
  EXPECT_EQ(s.model.id, expected->id);
  EXPECT_EQ(s.model.layers, 16);
  EXPECT_EQ(s.model.kv_heads, 8);
  EXPECT_EQ(s.model.head_dim, 64);
  EXPECT_TRUE(w.statusBar()->currentMessage().contains("Imported"))
      << w.statusBar()->currentMessage().toStdString();

  // A .json that is not a model config is refused with its name.
  std::ofstream(m_dir / "broken.json") << "{";
  w.show_page(Page::Runs);
  EXPECT_FALSE(w.open_file(qpath(m_dir / "broken.json")));
  EXPECT_EQ(w.current_page(), Page::Planner);  // where the error is shown in full
  EXPECT_TRUE(w.statusBar()->currentMessage().contains("broken.json"));
  EXPECT_EQ(w.recent_files(), QStringList({m_config}));
}

TEST_F(Desktop, UnknownFilesGetAMessageAndSeveralOpenTheFirstUsable) {
  MainWindow w(db());
  w.show();
  w.show_page(Page::Eviction);
  const SourceSpec before = w.compression_view()->source_panel()->spec();
  DropResult r = drop_files(&w, {m_notes});
  EXPECT_TRUE(r.enter_accepted);  // taken, so the person sees why it does not open
  const QString message = w.statusBar()->currentMessage();
  EXPECT_TRUE(message.contains("notes.txt")) << message.toStdString();
  EXPECT_TRUE(message.contains(".safetensors") && message.contains("config.json"))
      << message.toStdString();
  EXPECT_EQ(w.current_page(), Page::Eviction);
  EXPECT_EQ(w.compression_view()->source_panel()->spec().kind, before.kind);
  EXPECT_TRUE(w.recent_files().isEmpty());

  r = drop_files(&w, {m_notes, m_npy, m_config});
  EXPECT_TRUE(r.drop_accepted);
  EXPECT_EQ(w.current_page(), Page::Compression);
  EXPECT_EQ(w.compression_view()->source_panel()->spec().file, m_npy);
  EXPECT_EQ(w.recent_files(), QStringList({m_npy}));  // the config was not opened
  EXPECT_TRUE(w.statusBar()->currentMessage().contains("first usable of the 3 files"))
      << w.statusBar()->currentMessage().toStdString();
}

TEST_F(Desktop, ShortcutsSwitchPagesRunAndCancel) {
  MainWindow w(db());
  w.show();
  w.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
  const std::pair<Qt::Key, Page> keys[] = {
      {Qt::Key_2, Page::Eviction}, {Qt::Key_4, Page::Planner}, {Qt::Key_6, Page::Learn},
      {Qt::Key_5, Page::Runs},     {Qt::Key_3, Page::Quality}, {Qt::Key_1, Page::Compression}};
  for (const auto& [key, page] : keys) {
    QTest::keyClick(&w, key, Qt::ControlModifier);
    EXPECT_EQ(w.current_page(), page) << "Ctrl+" << (key - Qt::Key_0);
  }
  // The Planner computes as it is edited: nothing to run there.
  QTest::keyClick(&w, Qt::Key_4, Qt::ControlModifier);
  EXPECT_FALSE(gui_test::child<WindowActions>(&w, "actions")->run_action()->isEnabled());
  QTest::keyClick(&w, Qt::Key_1, Qt::ControlModifier);
  ASSERT_TRUE(gui_test::child<WindowActions>(&w, "actions")->run_action()->isEnabled());

  CompressionView& view = *w.compression_view();
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  view.method_panel()->set_config(gui_test::tiered_method());
  QTest::keyClick(&w, Qt::Key_R, Qt::ControlModifier);
  EXPECT_TRUE(view.is_running());
  EXPECT_TRUE(gui_test::child<QAction>(&w, "cancel")->isEnabled());  // follows the page's button
  ASSERT_TRUE(view.wait_until_done(60'000));
  ASSERT_TRUE(view.model()->report().has_value()) << view.last_error().toStdString();
  EXPECT_GT(view.model()->last_saved_run_id(), 0);
  const auto expected = gui_test::engine_report(gui_test::tiny_source(), gui_test::tiered_method());
  EXPECT_DOUBLE_EQ(view.model()->report()->ratio, expected.ratio);
  EXPECT_FALSE(gui_test::child<QAction>(&w, "cancel")->isEnabled());

  // Esc cancels a run that takes a while (a full-size synthetic model).
  SyntheticConfig big;
  big.preset = "llama3-8b";
  big.context = 1024;
  view.source_panel()->set_synthetic(big);
  const std::int64_t saved_before = view.model()->last_saved_run_id();
  QTest::keyClick(&w, Qt::Key_R, Qt::ControlModifier);
  ASSERT_TRUE(view.is_running());
  QTest::keyClick(&w, Qt::Key_Escape);
  ASSERT_TRUE(view.wait_until_done(60'000));
  EXPECT_EQ(view.model()->last_saved_run_id(), saved_before);  // a cancelled run is not saved
  EXPECT_TRUE(w.statusBar()->currentMessage().contains("cancelled"))
      << w.statusBar()->currentMessage().toStdString();
}

// Pictures of the window with each menu open, for looking at the menus (not a check): written
// only when KVLAB_DESKTOP_SHOTS names a folder.
TEST_F(Desktop, MenuPictures) {
  const QString out = qEnvironmentVariable("KVLAB_DESKTOP_SHOTS");
  if (out.isEmpty()) GTEST_SKIP() << "set KVLAB_DESKTOP_SHOTS=DIR to write the pictures";
  QDir().mkpath(out);
  MainWindow w(db());
  w.show();
  CompressionView& view = *w.compression_view();
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  view.method_panel()->set_config(gui_test::tiered_method());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(view.run_and_wait(60'000));
  ASSERT_TRUE(w.open_file(m_config));
  ASSERT_TRUE(w.open_file(m_npy));
  w.runs_view()->set_auto_confirm(true);
  ASSERT_TRUE(w.runs_view()->delete_run(view.model()->last_saved_run_id()));
  w.show_page(Page::Compression);
  QApplication::processEvents();
  ASSERT_TRUE(w.grab().save(QDir(out).filePath("window.png")));

  WindowActions& a = *gui_test::child<WindowActions>(&w, "actions");
  a.rebuild_recent_files_menu();
  a.rebuild_recent_runs_menu();
  a.update_run_actions();
  const auto menu = [&](const char* name) { return gui_test::child<QMenu>(&w, name); };
  const std::pair<QMenu*, QMenu*> menus[] = {{menu("file_menu"), menu("recent_files_menu")},
                                             {menu("edit_menu"), nullptr},
                                             {menu("run_menu"), nullptr},
                                             {menu("view_menu"), nullptr},
                                             {menu("runs_menu"), menu("recent_runs_menu")},
                                             {menu("help_menu"), nullptr}};
  for (const auto& [menu, sub] : menus) {
    const QRect title = w.menuBar()->actionGeometry(menu->menuAction());
    const QPoint at = w.menuBar()->mapTo(&w, title.bottomLeft());
    menu->popup(w.mapToGlobal(at));
    QApplication::processEvents();
    QPixmap picture = w.grab();
    QPainter painter(&picture);
    const QPixmap menu_picture = menu->grab();
    painter.drawPixmap(at, menu_picture);
    if (sub) {
      const QRect row = menu->actionGeometry(sub->menuAction());
      sub->popup(w.mapToGlobal(at + QPoint(menu_picture.width(), row.top())));
      QApplication::processEvents();
      painter.drawPixmap(at + QPoint(menu_picture.width() - 4, row.top()), sub->grab());
      sub->hide();
    }
    painter.end();
    QString name = menu->title().remove('&').toLower();
    ASSERT_TRUE(picture.save(QDir(out).filePath("menu-" + name + ".png")));
    menu->hide();
  }
  // Help ▸ About, built as QMessageBox::about() builds it, without its modal loop.
  QMessageBox about(QMessageBox::Information, QStringLiteral("About kvlab"), a.about_text(),
                    QMessageBox::Ok, &w);
  about.setIconPixmap(QApplication::windowIcon().pixmap(64));
  about.show();
  QApplication::processEvents();
  ASSERT_TRUE(about.grab().save(QDir(out).filePath("about.png")));
}

// The laptop sizes of issue 18: no page needs more width than the window gives it (before this,
// Compression, Eviction, Quality, Planner and Learn scrolled sideways at 1024 × 700).
TEST_F(Desktop, EveryPageFitsALaptopWindowWithoutScrollingSideways) {
  for (const QSize size : {QSize(1280, 720), QSize(1024, 700)}) {
    MainWindow w(db());
    w.show();
    w.resize(size);
    QApplication::processEvents();
    EXPECT_EQ(pages_wider_than_window(w), QStringList()) << size.width() << " x " << size.height();
    // At 1024 the Learn page gives the list of steps' width to the step shown; Previous and
    // Next still lead through it.
    w.show_page(Page::Learn);
    QApplication::processEvents();
    EXPECT_EQ(w.learn_view()->findChild<QWidget*>(QStringLiteral("steps"))->isVisible(),
              size.width() >= 1280);
    EXPECT_TRUE(w.learn_view()->findChild<QWidget*>(QStringLiteral("next"))->isVisible());
  }
}

TEST(ChartPair, SideBySideWhenBothFitTabsWhenNotAndOneChartAlone) {
  auto* first = new QWidget;
  auto* second = new QWidget;
  first->setMinimumWidth(300);
  second->setMinimumWidth(300);
  ChartPair pair(first, QStringLiteral("First"), second, QStringLiteral("Second"));
  EXPECT_EQ(pair.minimumSizeHint().width(), 300);  // a narrow page can always hold it
  pair.show();
  pair.resize(700, 400);
  QApplication::processEvents();
  EXPECT_FALSE(pair.tabbed());
  EXPECT_TRUE(first->isVisible());
  EXPECT_TRUE(second->isVisible());
  EXPECT_GT(second->x(), first->x());  // in one row

  pair.resize(500, 400);
  QApplication::processEvents();
  ASSERT_TRUE(pair.tabbed());
  auto* tabs = pair.findChild<QTabWidget*>();
  ASSERT_NE(tabs, nullptr);
  EXPECT_EQ(tabs->tabText(0), QStringLiteral("First"));
  EXPECT_EQ(tabs->tabText(1), QStringLiteral("Second"));
  EXPECT_EQ(tabs->currentWidget(), first);
  pair.set_titles(QStringLiteral("h2o"), QStringLiteral("window"));
  EXPECT_EQ(tabs->tabText(1), QStringLiteral("window"));

  // Without the second chart the first fits alone: no tab bar, the second hidden.
  pair.set_second_shown(false);
  QApplication::processEvents();
  EXPECT_FALSE(pair.tabbed());
  EXPECT_TRUE(first->isVisible());
  EXPECT_FALSE(second->isVisible());
  pair.set_second_shown(true);
  QApplication::processEvents();
  EXPECT_TRUE(pair.tabbed());

  pair.resize(800, 400);
  QApplication::processEvents();
  EXPECT_FALSE(pair.tabbed());
  EXPECT_TRUE(second->isVisible());
}

// Issue 43, item 6: Help has the guides (F1), the CLI reference and a page per method, the same
// text `kvlab methods ID` prints; reached from the menu as a person would.
TEST_F(Desktop, HelpMenuOpensTheGuidesTheCliReferenceAndAPagePerMethod) {
  MainWindow w(db());
  w.show();
  QAction* guides = nullptr;
  QAction* cli = nullptr;
  QAction* methods = nullptr;
  for (QAction* action : gui_test::child<QMenu>(&w, "help_menu")->actions()) {
    if (action->text() == QStringLiteral("&Guides")) guides = action;
    if (action->text() == QStringLiteral("&Command-line reference")) cli = action;
    if (action->text().startsWith(QStringLiteral("&Methods"))) methods = action;
  }
  ASSERT_NE(guides, nullptr);
  ASSERT_NE(cli, nullptr);
  ASSERT_NE(methods, nullptr);
  EXPECT_EQ(guides->shortcut(), QKeySequence(QKeySequence::HelpContents));
  w.activateWindow();
  ASSERT_TRUE(QTest::qWaitForWindowActive(&w));
  QTest::keyClick(&w, Qt::Key_F1);
  QApplication::processEvents();
  HelpBrowser* help = w.findChild<HelpBrowser*>(QStringLiteral("help"));
  ASSERT_NE(help, nullptr) << "F1 opens the help";
  EXPECT_TRUE(help->isVisible());
  auto* browser = gui_test::child<QTextBrowser>(help, "text");
  EXPECT_EQ(help->current_topic(), QStringLiteral("guides"));
  EXPECT_TRUE(browser->toPlainText().contains(QStringLiteral("Three short walks through kvlab")));
  cli->trigger();
  EXPECT_EQ(help->current_topic(), QStringLiteral("cli"));
  EXPECT_TRUE(browser->toPlainText().contains(QStringLiteral("kvlab compress")));
  methods->trigger();
  EXPECT_EQ(gui_test::child<QListWidget>(help, "topics")->count(),
            2 + static_cast<int>(method_ids().size()));
  // Every method's page carries what the engine says of it.
  for (const auto id : method_ids()) {
    const MethodKind kind = parse_method(id).value();
    ASSERT_TRUE(
        help->show_topic(QStringLiteral("method:") + QString::fromLatin1(id.data(), id.size())));
    const QString text = browser->toPlainText();
    EXPECT_TRUE(text.contains(QString::fromStdString(std::string(method_reference(kind)))))
        << id << ": " << text.toStdString();
    EXPECT_TRUE(text.contains(QString::fromStdString(std::string(method_when_to_use(kind))))) << id;
  }
  help->show_topic(QStringLiteral("method:kivi"));
  ASSERT_TRUE(help->grab().save(QDir(m_dir.string().c_str()).filePath(QStringLiteral("help.png"))));
}

}  // namespace
}  // namespace kvlab::gui
