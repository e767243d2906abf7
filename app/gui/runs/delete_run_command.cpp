#include "runs/delete_run_command.h"

#include <QCoreApplication>

#include "runs/runs_model.h"

namespace kvlab::gui {

namespace {

constexpr int kLabelChars = 40;  // keeps the Edit menu narrow

}  // namespace

QString delete_run_text(const RunSummary& run) {
  QString label = QString::fromStdString(run.label).simplified();
  if (label.size() > kLabelChars) label = label.left(kLabelChars - 1) + QChar(0x2026);
  if (label.isEmpty()) return QCoreApplication::translate("kvlab", "delete run #%1").arg(run.id);
  return QCoreApplication::translate("kvlab", "delete run #%1 \u201c%2\u201d")
      .arg(run.id)
      .arg(label);
}

QKeySequence undo_shortcut() {
  return QKeySequence(Qt::CTRL | Qt::Key_Z);
}

DeleteRunCommand::DeleteRunCommand(RunsModel* runs, RunRecord record)
    : QUndoCommand(delete_run_text(record)), m_runs(runs), m_record(std::move(record)) {}

void DeleteRunCommand::undo() {
  // A run that cannot go back (its id was given to a newer run) leaves the stack, with the
  // reason shown by the page.
  if (!m_runs->restore_deleted_run(m_record)) setObsolete(true);
}

void DeleteRunCommand::redo() {
  if (m_first_redo) {
    m_first_redo = false;
    return;
  }
  if (!m_runs->erase_run(m_record.id)) setObsolete(true);
}

}  // namespace kvlab::gui
