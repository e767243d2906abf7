// Undo of deleting a run on the Runs page: the command keeps the whole run as it was loaded just
// before the delete, and undo puts it back in the store with the same id (RunsStore::restore_run).
#pragma once

#include <cstdint>

#include <QKeySequence>
#include <QUndoCommand>

#include "kvlab/store/runs_store.h"

namespace kvlab::gui {

class RunsModel;

class DeleteRunCommand : public QUndoCommand {
 public:
  // Pushed after the run was deleted: the first redo() (QUndoStack::push calls it) does nothing.
  DeleteRunCommand(RunsModel* runs, RunRecord record);

  void undo() override;
  void redo() override;

  std::int64_t run_id() const { return m_record.id; }
  const RunRecord& record() const { return m_record; }

 private:
  RunsModel* m_runs;
  RunRecord m_record;
  bool m_first_redo = true;
};

// "delete run #12 “kivi 2-bit g32”": the command's text; Edit ▸ Undo prefixes it with "Undo".
QString delete_run_text(const RunSummary& run);
// Edit ▸ Undo's key, Ctrl+Z, which the Runs page names in its messages.
QKeySequence undo_shortcut();

}  // namespace kvlab::gui
