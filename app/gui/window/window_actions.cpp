#include "window/window_actions.h"

#include <utility>
#include "kvlab/engine/quant/method.h"

#include <qcustomplot.h>
#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QKeyEvent>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QStatusBar>
#include <QTableView>
#include <QUndoStack>

#include "common/app_settings.h"
#include "common/chart_export.h"
#include "common/gui_format.h"
#include "common/run_kinds.h"
#include "compression/compression_view.h"
#include "eviction/eviction_view.h"
#include "quality/quality_view.h"
#include "runs/delete_run_command.h"
#include "runs/runs_view.h"
#include "window/help_browser.h"
#include "window/main_window.h"
#include "window/recent_files.h"

namespace kvlab::gui {

static_assert(kPageCount == 6, "View menu: one Ctrl+digit per page");

namespace {

QString native(const QKeySequence& keys) {
  return keys.toString(QKeySequence::NativeText);
}

// "#12  compression · kivi · llama3-8b · 2024-05-01 12:00"
QString recent_run_text(const RunSummary& run) {
  QString what = QString::fromStdString(run.label).simplified();
  if (what.isEmpty()) what = QString::fromStdString(run.method);
  if (what.size() > 48) what = what.left(47) + QChar(0x2026);
  return QStringLiteral("#%1  %2 \u00b7 %3 \u00b7 %4")
      .arg(run.id)
      .arg(QString::fromStdString(run.kind), what, format_local_time(run.created_at, false));
}

}  // namespace

namespace {

template <class Widget>
Widget* under_focus_or_first(QWidget* page) {
  if (!page) return nullptr;
  for (QWidget* w = QApplication::focusWidget(); w; w = w->parentWidget()) {
    if (auto* found = qobject_cast<Widget*>(w); found && page->isAncestorOf(found)) return found;
  }
  for (auto* found : page->findChildren<Widget*>()) {
    if (found->isVisible()) return found;
  }
  return nullptr;
}

}  // namespace

QCustomPlot* chart_under_focus_or_first(QWidget* page) {
  return under_focus_or_first<QCustomPlot>(page);
}

QTableView* table_under_focus_or_first(QWidget* page) {
  return under_focus_or_first<QTableView>(page);
}

WindowActions::WindowActions(MainWindow* window) : QObject(window), m_window(window) {
  build_file_menu();
  build_edit_menu();
  build_run_menu();
  build_view_menu();
  build_runs_menu();
  build_help_menu();
  // Names for finding them (tests, accessibility tools).
  const std::pair<QObject*, const char*> names[] = {{this, "actions"},
                                                    {m_file_menu, "file_menu"},
                                                    {m_recent_files_menu, "recent_files_menu"},
                                                    {m_export_chart, "export_chart"},
                                                    {m_export_table, "export_table"},
                                                    {m_edit_menu, "edit_menu"},
                                                    {m_undo, "undo"},
                                                    {m_run_menu, "run_menu"},
                                                    {m_cancel, "cancel"},
                                                    {m_view_menu, "view_menu"},
                                                    {m_runs_menu, "runs_menu"},
                                                    {m_recent_runs_menu, "recent_runs_menu"},
                                                    {m_help_menu, "help_menu"}};
  for (const auto& [object, name] : names) object->setObjectName(QLatin1String(name));
  update_run_actions();
  qApp->installEventFilter(this);
}

bool WindowActions::eventFilter(QObject* watched, QEvent* event) {
  if (!m_undo_announced) return QObject::eventFilter(watched, event);
  switch (event->type()) {
    case QEvent::ShortcutOverride:
      // Swallowed before a line edit can claim it: the shortcut map then gives Ctrl+Z to Undo.
      if (static_cast<QKeyEvent*>(event)->matches(QKeySequence::Undo) && m_undo->isEnabled()) {
        return true;
      }
      break;
    case QEvent::KeyPress: {
      const auto* key = static_cast<QKeyEvent*>(event);
      const bool modifier_only = key->key() == Qt::Key_Control || key->key() == Qt::Key_Shift ||
                                 key->key() == Qt::Key_Alt || key->key() == Qt::Key_Meta;
      if (!modifier_only && !key->matches(QKeySequence::Undo)) m_undo_announced = false;
      break;
    }
    case QEvent::MouseButtonPress:
      m_undo_announced = false;
      break;
    default:
      break;
  }
  return QObject::eventFilter(watched, event);
}

void WindowActions::message(const QString& text, int timeout_ms) {
  m_window->statusBar()->showMessage(text, timeout_ms);
}

void WindowActions::build_file_menu() {
  m_file_menu = m_window->menuBar()->addMenu(tr("&File"));
  m_open =
      m_file_menu->addAction(tr("&Open source file\u2026"), this, &WindowActions::open_file_dialog);
  m_open->setShortcut(QKeySequence::Open);
  m_open->setStatusTip(tr("Open %1").arg(accepted_files_text()));
  m_recent_files_menu = m_file_menu->addMenu(tr("Open &Recent"));
  connect(m_recent_files_menu, &QMenu::aboutToShow, this,
          &WindowActions::rebuild_recent_files_menu);
  m_file_menu->addSeparator();
  m_export_chart =
      m_file_menu->addAction(tr("&Export chart\u2026"), this, &WindowActions::export_chart);
  m_export_chart->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  m_export_chart->setStatusTip(
      tr("Save the chart with the keyboard focus (else the page's first) as PNG, SVG or PDF"));
  m_export_table =
      m_file_menu->addAction(tr("Export &table\u2026"), this, &WindowActions::export_table);
  m_export_table->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E));
  m_export_table->setStatusTip(
      tr("Save the table with the keyboard focus (else the page's first) as CSV or JSON"));
  m_file_menu->addSeparator();
  m_quit = m_file_menu->addAction(tr("&Quit"), m_window, &QWidget::close);
  m_quit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Q));
  m_quit->setMenuRole(QAction::QuitRole);
  rebuild_recent_files_menu();
}

void WindowActions::build_edit_menu() {
  m_edit_menu = m_window->menuBar()->addMenu(tr("&Edit"));
  QUndoStack* stack = m_window->runs_view()->model()->undo_stack();
  m_undo = stack->createUndoAction(this, tr("Undo"));
  // A new command (a deletion) is what the status bar's "Ctrl+Z to undo" refers to; Undo itself
  // ends that promise.
  connect(stack, &QUndoStack::indexChanged, this,
          [this, stack](int index) { m_undo_announced = index > 0 && index == stack->count(); });
  m_undo->setShortcut(undo_shortcut());
  m_redo = stack->createRedoAction(this, tr("Redo"));
  m_redo->setShortcuts(
      {QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Z), QKeySequence(Qt::CTRL | Qt::Key_Y)});
  m_edit_menu->addAction(m_undo);
  m_edit_menu->addAction(m_redo);
}

void WindowActions::build_run_menu() {
  m_run_menu = m_window->menuBar()->addMenu(tr("&Run"));
  m_run = m_run_menu->addAction(tr("&Run"), this, &WindowActions::run_current);
  m_run->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  m_cancel = m_run_menu->addAction(tr("&Cancel"), this, &WindowActions::cancel_current);
  m_cancel->setShortcut(QKeySequence(Qt::Key_Escape));
  // Cancel follows the page's own Cancel button (MainWindow::eventFilter), which the page's Run
  // button and this action both enable; the page shown is checked again when the menu opens.
  connect(m_run_menu, &QMenu::aboutToShow, this, &WindowActions::update_run_actions);
}

void WindowActions::build_view_menu() {
  m_view_menu = m_window->menuBar()->addMenu(tr("&View"));
  auto* group = new QActionGroup(this);
  for (int i = 0; i < kPageCount; ++i) {
    const auto page = static_cast<Page>(i);
    QString title = page_file_name(page);
    title[0] = title[0].toUpper();
    auto* action = m_view_menu->addAction(title);
    action->setCheckable(true);
    action->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
    action->setActionGroup(group);
    connect(action, &QAction::triggered, m_window, [this, page] { m_window->show_page(page); });
    m_pages[static_cast<std::size_t>(i)] = action;
  }
}

void WindowActions::build_runs_menu() {
  m_runs_menu = m_window->menuBar()->addMenu(tr("R&uns"));
  m_recent_runs_menu = m_runs_menu->addMenu(tr("&Recent runs"));
  connect(m_recent_runs_menu, &QMenu::aboutToShow, this, &WindowActions::rebuild_recent_runs_menu);
  // View ▸ Runs (Ctrl+5) is the same page; one action per shortcut, so none here.
  m_runs_menu->addAction(tr("&All runs (the Runs page)"), m_window,
                         [this] { m_window->show_page(Page::Runs); });
  rebuild_recent_runs_menu();
}

void WindowActions::build_help_menu() {
  m_help_menu = m_window->menuBar()->addMenu(tr("&Help"));
  QAction* guides =
      m_help_menu->addAction(tr("&Guides"), this, [this] { show_help(QStringLiteral("guides")); });
  guides->setShortcut(QKeySequence::HelpContents);
  m_help_menu->addAction(tr("&Command-line reference"), this,
                         [this] { show_help(QStringLiteral("cli")); });
  m_help_menu->addAction(tr("&Methods: what each stores and when to use it"), this, [this] {
    const std::string_view first = method_ids().front();
    show_help(QStringLiteral("method:") + QString::fromUtf8(first.data(), first.size()));
  });
  m_help_menu->addSeparator();
  m_about = m_help_menu->addAction(tr("&About kvlab"), this, [this] {
    QMessageBox::about(m_window, tr("About kvlab"), about_text());
  });
  m_about->setMenuRole(QAction::AboutRole);
}

HelpBrowser* WindowActions::show_help(const QString& topic) {
  if (!m_help) {
    m_help = new HelpBrowser(m_window);
    m_help->setObjectName(QStringLiteral("help"));
  }
  m_help->show_topic(topic);
  m_help->show();
  m_help->raise();
  return m_help;
}

void WindowActions::rebuild_recent_files_menu() {
  const QStringList missing = m_window->forget_missing_recent_files();
  if (!missing.isEmpty()) {
    QStringList names;
    for (const QString& p : missing) names << QFileInfo(p).fileName();
    message(
        tr("Removed from Open Recent (no longer there): %1").arg(names.join(QStringLiteral(", "))));
  }
  m_recent_files_menu->clear();
  const QStringList files = m_window->recent_files();
  for (int i = 0; i < files.size(); ++i) {
    const QString& path = files[i];
    // &1 … &9, then 1&0: a keyboard accelerator for each entry.
    const QString number = i < 9 ? QStringLiteral("&%1").arg(i + 1) : QStringLiteral("1&0");
    auto* action = m_recent_files_menu->addAction(
        QStringLiteral("%1  %2").arg(number, QFileInfo(path).fileName()), m_window,
        [this, path] { m_window->open_file(path); });
    action->setStatusTip(path);
    action->setToolTip(path);
  }
  if (files.isEmpty()) {
    m_recent_files_menu->addAction(tr("No recent files"))->setEnabled(false);
  } else {
    m_recent_files_menu->addSeparator();
    m_recent_files_menu->addAction(tr("&Clear list"), m_window,
                                   [this] { m_window->clear_recent_files(); });
  }
}

void WindowActions::rebuild_recent_runs_menu() {
  m_recent_runs_menu->clear();
  const auto& store = m_window->store();
  if (!store) {
    m_recent_runs_menu->addAction(tr("No runs database"))->setEnabled(false);
    return;
  }
  auto runs = store->list_runs(kRecentRunsShown);
  if (!runs) {
    m_recent_runs_menu->addAction(tr("The runs cannot be listed"))->setEnabled(false);
    message(QString::fromStdString(runs.message()), 0);
    return;
  }
  for (const RunSummary& run : *runs) {
    const std::int64_t id = run.id;
    auto* action = m_recent_runs_menu->addAction(
        recent_run_text(run), m_window, [this, id] { m_window->runs_view()->open_run(id); });
    action->setEnabled(opens_on_a_page(run.kind));
  }
  if (runs->empty()) m_recent_runs_menu->addAction(tr("No saved runs yet"))->setEnabled(false);
}

void WindowActions::update_run_actions() {
  const Page page = m_window->current_page();
  if (auto* a = m_pages[static_cast<std::size_t>(page)]) a->setChecked(true);
  bool can_run = true;
  bool running = false;  // the page's own Cancel button is enabled while it runs
  switch (page) {
    case Page::Compression:
      m_run->setText(tr("&Run compression"));
      running = m_window->compression_view()->cancel_button()->isEnabled();
      break;
    case Page::Eviction:
      m_run->setText(tr("&Run eviction simulation"));
      running = m_window->eviction_view()->cancel_button()->isEnabled();
      break;
    case Page::Quality:
      m_run->setText(tr("&Run quality measurement"));
      running = m_window->quality_view()->cancel_button()->isEnabled();
      break;
    case Page::Planner:
      m_run->setText(tr("&Run (the Planner recomputes as you edit)"));
      can_run = false;
      break;
    default:
      m_run->setText(tr("&Run (nothing to run on this page)"));
      can_run = false;
      break;
  }
  m_run->setEnabled(can_run);
  m_cancel->setEnabled(can_run && running);
}

void WindowActions::run_current() {
  bool started = false;
  switch (m_window->current_page()) {
    case Page::Compression:
      started = m_window->compression_view()->run();
      break;
    case Page::Eviction:
      started = m_window->eviction_view()->run();
      break;
    case Page::Quality:
      started = m_window->quality_view()->run();
      break;
    default:
      return;
  }
  // Otherwise the page said why (bad input), or a run is going: say how to stop it.
  if (!started && m_cancel->isEnabled()) {
    message(
        tr("A run is already going on this page; %1 cancels it").arg(native(m_cancel->shortcut())));
  }
}

void WindowActions::cancel_current() {
  switch (m_window->current_page()) {
    case Page::Compression:
      if (m_window->compression_view()->is_running()) m_window->compression_view()->cancel();
      break;
    case Page::Eviction:
      if (m_window->eviction_view()->is_running()) m_window->eviction_view()->cancel();
      break;
    case Page::Quality:
      if (m_window->quality_view()->is_running()) m_window->quality_view()->cancel();
      break;
    default:
      break;
  }
}

void WindowActions::open_file_dialog() {
  const QStringList recent = m_window->recent_files();
  const QString start = recent.isEmpty() ? QString() : QFileInfo(recent.front()).absolutePath();
  const QString path = QFileDialog::getOpenFileName(m_window, tr("Open a source file"), start,
                                                    open_file_dialog_filter());
  if (!path.isEmpty()) m_window->open_file(path);
}

void WindowActions::export_chart() {
  QCustomPlot* chart = chart_under_focus_or_first(m_window->page_widget(m_window->current_page()));
  if (!chart) {
    message(tr("This page has no chart to export"));
    return;
  }
  export_chart_dialog(chart, m_window);
}

void WindowActions::export_table() {
  QTableView* table = table_under_focus_or_first(m_window->page_widget(m_window->current_page()));
  if (!table) {
    message(tr("This page has no table to export"));
    return;
  }
  export_table_dialog(table, m_window);
}

QString WindowActions::about_text() const {
  QString version = QApplication::applicationVersion();
  if (version.isEmpty()) version = tr("(version not set)");
  const auto& store = m_window->store();
  const QString db = store ? QString::fromStdString(store->path().string())
                           : tr("none (%1)").arg(m_window->store_error());
  const QString settings =
      m_window->settings_enabled() ? settings_file_path() : tr("not used in this session");
  return tr("<h3>kvlab %1</h3>"
            "<p>A desktop lab and capacity planner for LLM key/value-cache compression.</p>"
            "<p><b>Runs database:</b> %2<br><b>Settings:</b> %3</p>"
            "<p><b>Shortcuts:</b> %4 open a file, %5 run, Esc cancel, %6 export a chart, "
            "%7 export a table, %8 undo a deleted run, Ctrl+1\u2026Ctrl+6 pages. KV files and "
            "config.json can be dropped on the window.</p>")
      .arg(version.toHtmlEscaped(), db.toHtmlEscaped(), settings.toHtmlEscaped(),
           native(m_open->shortcut()), native(m_run->shortcut()),
           native(m_export_chart->shortcut()), native(m_export_table->shortcut()),
           native(m_undo->shortcut()));
}

}  // namespace kvlab::gui
