// The main window's menu bar and keyboard shortcuts:
//   File  Open source file… Ctrl+O, Open Recent ▸, Export chart… Ctrl+E,
//         Export table… Ctrl+Shift+E, Quit Ctrl+Q
//   Edit  Undo delete run Ctrl+Z, Redo Ctrl+Shift+Z
//   Run   Run the current view Ctrl+R, Cancel Esc
//   View  the six pages, Ctrl+1 … Ctrl+6
//   Runs  Recent runs ▸ (the last 10 saved), All runs
//   Help  Guides F1, Command-line reference, Methods (a page per method), About kvlab
//         (version, runs database, settings file)
#pragma once

#include <array>

#include <QObject>
#include <QString>

class QAction;
class QMenu;
class QCustomPlot;
class QTableView;
class QWidget;

namespace kvlab::gui {

class HelpBrowser;
class MainWindow;

inline constexpr int kRecentRunsShown = 10;

// The chart a person most likely means on `page`: the QCustomPlot that has (or holds) the
// keyboard focus, else the first visible one on the page (the current tab's), else null.
QCustomPlot* chart_under_focus_or_first(QWidget* page);
// The same for tables (File ▸ Export table).
QTableView* table_under_focus_or_first(QWidget* page);

class WindowActions : public QObject {
  Q_OBJECT

 public:
  // Builds the menus in `window`'s menu bar; the actions' shortcuts work anywhere in the window.
  explicit WindowActions(MainWindow* window);

  QAction* open_action() const { return m_open; }
  QAction* quit_action() const { return m_quit; }
  QAction* redo_action() const { return m_redo; }
  QAction* run_action() const { return m_run; }
  QAction* page_action(int page) const { return m_pages[static_cast<std::size_t>(page)]; }
  QAction* about_action() const { return m_about; }
  // Opens the help window (made on first use, kept open beside the main window, named "help")
  // at `topic` (HelpBrowser::show_topic).
  HelpBrowser* show_help(const QString& topic);
  // The object is named "actions", the menus "file_menu", "recent_files_menu", "edit_menu",
  // "run_menu", "view_menu", "runs_menu", "recent_runs_menu" and "help_menu", and the actions
  // "export_chart", "export_table", "undo" and "cancel", for finding them under the window.

  // Refills Open Recent from the window's list, first dropping files that no longer exist (the
  // status bar names them). Runs when the menu is about to show.
  void rebuild_recent_files_menu();
  // Refills Recent runs from the store. Runs when the menu is about to show.
  void rebuild_recent_runs_menu();
  // Names and enables Run and Cancel for the page shown (called when the page changes).
  void update_run_actions();
  // The About box's text: version, runs database, settings file, shortcuts.
  QString about_text() const;

 protected:
  // Right after a deletion (whose message promises Ctrl+Z), the window's Undo takes Ctrl+Z
  // wherever the focus is, a text field's own undo included, until the next other key or click.
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void build_file_menu();
  void build_edit_menu();
  void build_run_menu();
  void build_view_menu();
  void build_runs_menu();
  void build_help_menu();
  void open_file_dialog();
  void export_chart();
  void export_table();
  void run_current();
  void cancel_current();
  void message(const QString& text, int timeout_ms = 8000);

  MainWindow* m_window;
  QAction* m_open = nullptr;
  QAction* m_export_chart = nullptr;
  QAction* m_export_table = nullptr;
  QAction* m_quit = nullptr;
  QAction* m_undo = nullptr;
  QAction* m_redo = nullptr;
  bool m_undo_announced = false;  // a deletion was just pushed: Ctrl+Z means its Undo
  QAction* m_run = nullptr;
  QAction* m_cancel = nullptr;
  std::array<QAction*, 6> m_pages{};
  QAction* m_about = nullptr;
  HelpBrowser* m_help = nullptr;
  QMenu* m_file_menu = nullptr;
  QMenu* m_edit_menu = nullptr;
  QMenu* m_run_menu = nullptr;
  QMenu* m_view_menu = nullptr;
  QMenu* m_runs_menu = nullptr;
  QMenu* m_help_menu = nullptr;
  QMenu* m_recent_files_menu = nullptr;
  QMenu* m_recent_runs_menu = nullptr;
};

}  // namespace kvlab::gui
