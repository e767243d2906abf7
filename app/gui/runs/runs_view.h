// The Runs page: every run in the store, newest first, as a table model (runs_table_model.h)
// that can be searched, filtered by kind and sorted by any column; tags and a note per run;
// two or more selected runs overlaid on shared axes with the parameters that differ
// (runs_comparison.h). The database file is watched, so runs another process saves appear by
// themselves. Open redraws a compression or eviction
// run's charts from its stored JSON (no recomputation), or shows a quality run on the Quality page;
// Delete asks first (unless auto-confirm is set, for scripts and tests) and can be undone
// (undo_stack(): Edit ▸ Undo puts the run back with the same id, until the window closes).
// Export… saves the selected runs as an HTML report (one run, or a comparison of several), JSON
// or CSV (run_files.h). What is stored and done is the page model's (runs_model.h); this is the
// widgets over it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <QString>
#include <QWidget>

#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/store/runs_store.h"
#include "runs/runs_comparison.h"
#include "runs/runs_model.h"

class QComboBox;
class QFileSystemWatcher;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableView;
class QTimer;

namespace kvlab::gui {

class RunsView : public QWidget {
  Q_OBJECT

 public:
  // `store` may be null; `store_error` then says why, and the page shows it.
  RunsView(std::shared_ptr<RunsStore> store, const QString& store_error, QWidget* parent = nullptr);

  void refresh();
  // Opens the run on its page (RunsModel::open_run); false with the reason shown.
  bool open_run(std::int64_t id);
  // Asks for confirmation unless auto-confirm is on, then deletes.
  bool delete_run(std::int64_t id);
  // Deletes without asking (RunsModel::delete_run: with undo) and gives the table the focus.
  bool delete_run_confirmed(std::int64_t id);
  void set_auto_confirm(bool on) { m_auto_confirm = on; }

  // What the page stores and does: the runs, tags, opening, deleting and its undo stack.
  RunsModel* model() const { return m_runs; }

  QTableView* table() const { return m_table; }
  // The search field is named "search", the kind filter "kind", the Export button "export" and
  // the comparison of the selected runs "compare", for finding them.
  // Rows shown (after the search and kind filter), and the text of a shown cell
  // (RunsTableModel::Column).
  int row_count() const;
  QString cell_text(int row, int column) const;
  // Shown row of run `id`, or -1.
  int row_of(std::int64_t id) const;
  std::int64_t selected_run_id() const;                // the first selected; 0 when none
  std::vector<std::int64_t> selected_run_ids() const;  // in the table's order
  void select_runs(const std::vector<std::int64_t>& ids);
  // Saves the selected runs to `path` (format by suffix, see save_runs); empty on success, else
  // the message. export_selected_dialog() asks for the file first and shows a failure.
  QString export_selected(const QString& path);
  void export_selected_dialog();

 signals:
  void status_message(const QString& text, int timeout_ms);

 private:
  void on_selection_changed();
  void edit_tags_dialog();
  void update_summary();
  void update_buttons();
  void select_row_only(int row);
  void report_error(const QString& message);

  RunsModel* m_runs = nullptr;
  RunsFilterModel* m_filter = nullptr;        // the model's
  std::vector<std::int64_t> m_keep_selected;  // across a refresh
  QTableView* m_table = nullptr;
  RunsComparePanel* m_compare = nullptr;
  QLineEdit* m_search = nullptr;
  QComboBox* m_kind = nullptr;
  QLabel* m_summary = nullptr;
  QFileSystemWatcher* m_watcher = nullptr;
  QTimer* m_watch_timer = nullptr;
  QPushButton* m_refresh = nullptr;
  QPushButton* m_open = nullptr;
  QPushButton* m_tags = nullptr;
  QPushButton* m_delete = nullptr;
  QPushButton* m_export = nullptr;
  bool m_auto_confirm = false;
};

}  // namespace kvlab::gui
