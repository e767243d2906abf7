// The kvlab window: a menu bar (WindowActions), a navigation list on the left (Compression,
// Eviction, Quality, Planner, Runs, Learn), the pages in a stack, and a status bar. Owns the runs
// store connection the pages share. Files dropped on it open as File ▸ Open does; with
// restore_settings() it remembers its geometry, page and recent files between launches.
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <optional>

#include <QMainWindow>
#include <QSize>
#include <QString>
#include <QStringList>

#include "kvlab/store/runs_store.h"
#include "window/recent_files.h"

class QListWidget;
class QStackedWidget;

namespace kvlab::gui {

class CompressionView;
class EvictionView;
class LearnView;
struct LearnLink;
class PlannerView;
class QualityView;
class RunsView;
class WindowActions;

enum class Page { Compression = 0, Eviction, Quality, Planner, Runs, Learn };
inline constexpr int kPageCount = 6;
// "compression", "eviction", ... (screenshot file names).
QString page_file_name(Page page);

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  // Opens (creating when missing) the runs database at `db_path`; when that fails the window
  // still works, runs are not saved, and the status bar and Runs page say why.
  explicit MainWindow(const std::filesystem::path& db_path, QWidget* parent = nullptr);
  ~MainWindow() override;

  // What a person sees at start: the newest stored compression run, redrawn from the store, or,
  // on a first launch, the default run (synthetic llama3-8b) started in the background. Shows
  // the Compression page, unless restore_settings() brought back another page.
  bool open_latest_or_run_default();

  void show_page(Page page);
  // The size at which every page fits without scrolling (at least 1400 × 900); a new window
  // takes it, bounded by the screen's available area. The screenshots use it as it is.
  QSize preferred_size() const;
  Page current_page() const;
  QWidget* page_widget(Page page) const;

  CompressionView* compression_view() const { return m_compression; }
  EvictionView* eviction_view() const { return m_eviction; }
  QualityView* quality_view() const { return m_quality; }
  PlannerView* planner_view() const { return m_planner; }
  RunsView* runs_view() const { return m_runs; }
  LearnView* learn_view() const { return m_learn; }
  const QString& store_error() const { return m_store_error; }
  const std::shared_ptr<RunsStore>& store() const { return m_store; }

  // Puts a Learn page's settings in place in the view it names (source, method, policy or
  // planner scenario), starts the run when the link asks for one, and shows that view.
  void open_learn_link(const LearnLink& link);

  // --- files, drops and settings ---
  // Opens a file as File ▸ Open and a drop do: KV tensors (.safetensors, .npy, .npz) become the
  // Compression page's file source, a config.json an imported model on the Planner page; the
  // page is shown and the file joins Open Recent. False, with a status-bar message naming the
  // file and the problem, for a missing file, another type, or a config that does not import.
  bool open_file(const QString& path);
  // Opens the first of `paths` that has an accepted type (a drop of several files); the message
  // says which was opened and which were skipped. False when none could be opened.
  bool open_files(const QStringList& paths);
  QStringList recent_files() const { return m_recent.paths(); }
  // Drops the entries whose file is gone; returns them.
  QStringList forget_missing_recent_files();
  void clear_recent_files();
  // Reads the saved geometry, window state, page and recent files (QSettings "kvlab"/"kvlab"),
  // and from then on saves them: recent files when they change, the rest when the window
  // closes. Without this call (tests, --screenshot) settings are neither read nor written.
  void restore_settings();
  void save_settings() const;
  bool settings_enabled() const { return m_settings_enabled; }

 protected:
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;
  // Drags of local files anywhere on the window (line edits included) come here.
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void recent_files_changed();
  // Moves and shrinks the window onto its screen when it is not wholly on it (fit_on_screen).
  void fit_on_screen_now();
  std::shared_ptr<RunsStore> m_store;
  QString m_store_error;
  QListWidget* m_nav = nullptr;
  QStackedWidget* m_stack = nullptr;
  CompressionView* m_compression = nullptr;
  EvictionView* m_eviction = nullptr;
  QualityView* m_quality = nullptr;
  PlannerView* m_planner = nullptr;
  RunsView* m_runs = nullptr;
  LearnView* m_learn = nullptr;
  std::array<QWidget*, kPageCount> m_pages{};  // the views, in Page order (each in a scroll area)
  WindowActions* m_actions = nullptr;
  RecentFiles m_recent;
  bool m_settings_enabled = false;
  bool m_fit_when_shown = false;  // a restored geometry is fitted to the screen once shown
  std::optional<Page> m_restored_page;
  QString m_hover_text;  // the chart point the status bar shows, if it still does
};

}  // namespace kvlab::gui
