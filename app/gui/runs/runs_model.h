// The Runs page's model (QtCore and QtGui's undo stack, no widget): every run in the store as
// the table model and its search / kind filter (runs_table_model.h), read again on refresh();
// tags and notes; opening a run (the page that shows it is told through a signal); deleting a run
// with undo (DeleteRunCommand puts it back with the same id until the window closes). The page's
// widgets (runs_view.h) show the table, the selection, the comparison and the dialogs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <QObject>
#include <QString>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/store/runs_store.h"
#include "runs/runs_table_model.h"

class QUndoStack;

namespace kvlab::gui {

class RunsModel : public QObject {
  Q_OBJECT

 public:
  // `store` may be null: no runs, and every command says so.
  explicit RunsModel(std::shared_ptr<RunsStore> store, QObject* parent = nullptr);

  RunsStore* store() const { return m_store.get(); }
  RunsTableModel* table() const { return m_table; }
  RunsFilterModel* filter() const { return m_filter; }
  // Deletions, for Edit ▸ Undo / Redo.
  QUndoStack* undo_stack() const { return m_undo; }

  // Reads every run from the store again; false with error() when it cannot.
  bool refresh();
  // Times the store has been read.
  int refresh_count() const { return m_refreshes; }
  // "12 runs in PATH", "3 of 12 runs in PATH" when filtered.
  QString summary() const;

  // Loads the run and emits the signal of the page that shows it; false with error() when it
  // cannot be shown.
  bool open_run(std::int64_t id);
  // Stores the run's tags (comma-separated, trimmed) and note.
  bool set_tags_and_note(std::int64_t id, const QString& tags, const QString& note);
  // Deletes, and pushes the deletion onto the undo stack (the whole run is read first; a run
  // that cannot be read is still deleted, without undo, and the message says so).
  bool delete_run(std::int64_t id);
  // The undo stack's commands: puts a deleted run back (same id, everything as it was); deletes
  // it again.
  bool restore_deleted_run(const RunRecord& record);
  bool erase_run(std::int64_t id);

 signals:
  // The runs were read again.
  void refreshed();
  // A deleted run is back: the page selects it.
  void run_restored(qint64 id);
  void compression_run_opened(const kvlab::CompressionReport& report, const QString& origin);
  // An eviction run, and the run it was compared with when there was one.
  void eviction_run_opened(const kvlab::EvictionReport& report,
                           const std::optional<kvlab::EvictionReport>& compare,
                           const QString& origin);
  // A quality run: the Quality page shows it among the runs of its model and text.
  void quality_run_opened(qint64 id);
  // A saved planner scenario: its params, to restore the Planner page's controls.
  void plan_run_opened(const nlohmann::json& params);
  void status_message(const QString& text, int timeout_ms);
  // Something the person must read: what could not be done, and why.
  void error(const QString& message);

 private:
  bool fail(const QString& message);
  bool open_eviction_run(std::int64_t id, const QString& origin);

  std::shared_ptr<RunsStore> m_store;
  RunsTableModel* m_table;
  RunsFilterModel* m_filter;
  QUndoStack* m_undo;
  int m_refreshes = 0;
};

}  // namespace kvlab::gui
