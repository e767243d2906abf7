// The kvlab window: a navigation list on the left (Compression, Eviction, Quality, Planner, Runs,
// Learn), the pages in a stack, and a status bar. Owns the runs store connection the pages share.
#pragma once

#include <filesystem>
#include <memory>

#include <QMainWindow>
#include <QString>

#include "kvlab/store/runs_store.h"

class QListWidget;
class QStackedWidget;

namespace kvlab::gui {

class CompressionView;
class EvictionView;
class PlannerView;
class QualityView;
class RunsView;

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
  // on a first launch, the default run (synthetic llama3-8b) started in the background.
  bool open_latest_or_run_default();

  void show_page(Page page);
  Page current_page() const;
  QWidget* page_widget(Page page) const;

  CompressionView* compression_view() const { return m_compression; }
  EvictionView* eviction_view() const { return m_eviction; }
  QualityView* quality_view() const { return m_quality; }
  PlannerView* planner_view() const { return m_planner; }
  RunsView* runs_view() const { return m_runs; }
  const QString& store_error() const { return m_store_error; }

 private:
  std::shared_ptr<RunsStore> m_store;
  QString m_store_error;
  QListWidget* m_nav = nullptr;
  QStackedWidget* m_stack = nullptr;
  CompressionView* m_compression = nullptr;
  EvictionView* m_eviction = nullptr;
  QualityView* m_quality = nullptr;
  PlannerView* m_planner = nullptr;
  RunsView* m_runs = nullptr;
};

}  // namespace kvlab::gui
