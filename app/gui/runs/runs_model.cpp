#include "runs/runs_model.h"

#include <utility>

#include <QRegularExpression>
#include <QUndoStack>

#include "common/gui_format.h"
#include "common/gui_style.h"
#include "eviction/eviction_runs.h"
#include "kvlab/engine/io/report_json.h"
#include "kvlab/store/run_records.h"
#include "runs/delete_run_command.h"

namespace kvlab::gui {

RunsModel::RunsModel(std::shared_ptr<RunsStore> store, QObject* parent)
    : QObject(parent),
      m_store(std::move(store)),
      m_table(new RunsTableModel(this)),
      m_filter(new RunsFilterModel(this)),
      m_undo(new QUndoStack(this)) {
  m_filter->setSourceModel(m_table);
}

bool RunsModel::fail(const QString& message) {
  emit error(message);
  return false;
}

bool RunsModel::refresh() {
  if (!m_store) return false;
  auto runs = m_store->list_runs(-1);
  if (!runs) return fail(QString::fromStdString(runs.message()));
  m_table->set_runs(*runs);
  ++m_refreshes;
  emit refreshed();
  return true;
}

QString RunsModel::summary() const {
  if (!m_store) return {};
  const int all = m_table->rowCount();
  const int shown = m_filter->rowCount();
  const QString path = QString::fromStdString(m_store->path().string());
  QString text = all == 1 ? tr("1 run in %1").arg(path) : tr("%1 runs in %2").arg(all).arg(path);
  if (shown != all) text = tr("%1 of %2").arg(shown).arg(text);
  return text;
}

bool RunsModel::set_tags_and_note(std::int64_t id, const QString& tags, const QString& note) {
  if (!m_store) return false;
  const QString cleaned =
      tags.split(QLatin1Char(','), Qt::SkipEmptyParts)
          .replaceInStrings(QRegularExpression(QStringLiteral("^\\s+|\\s+$")), QString())
          .join(QStringLiteral(", "));
  if (auto s = m_store->set_tags(id, cleaned.toStdString()); !s) {
    return fail(QString::fromStdString(s.message()));
  }
  if (auto s = m_store->set_notes(id, note.toStdString()); !s) {
    return fail(QString::fromStdString(s.message()));
  }
  refresh();
  emit status_message(tr("Run %1: tags and note saved").arg(id), style::kStatusTimeoutMs);
  return true;
}

bool RunsModel::open_run(std::int64_t id) {
  if (!m_store) return false;
  auto record = m_store->load_run(id);
  if (!record) return fail(QString::fromStdString(record.message()));
  const QString origin =
      tr("stored run #%1 from %2").arg(id).arg(format_local_time(record->created_at));
  const std::optional<RunKind> kind = run_kind_from_id(record->kind);
  if (kind == RunKind::Eviction) return open_eviction_run(id, origin);
  if (kind == RunKind::Quality) {
    emit quality_run_opened(id);
    return true;
  }
  if (kind == RunKind::Plan) {
    emit plan_run_opened(record->params);
    emit status_message(tr("Opened planner scenario #%1").arg(id), style::kStatusTimeoutMs);
    return true;
  }
  if (kind != RunKind::Compression) {
    return fail(tr("Run %1 is a %2 run; compression, eviction, quality and plan runs open.")
                    .arg(id)
                    .arg(QString::fromStdString(record->kind)));
  }
  const auto hist = record->artifacts.find(kHistogramsArtifact);
  auto report =
      report_from_json(record->metrics, hist != record->artifacts.end() ? &hist->second : nullptr);
  if (!report) {
    return fail(
        tr("Run %1 cannot be shown: %2").arg(id).arg(QString::fromStdString(report.message())));
  }
  emit compression_run_opened(*report, origin);
  emit status_message(tr("Opened run #%1 (redrawn from the stored data)").arg(id),
                      style::kStatusTimeoutMs);
  return true;
}

bool RunsModel::open_eviction_run(std::int64_t id, const QString& origin) {
  auto stored = load_eviction_run(*m_store, id);
  if (!stored) {
    return fail(
        tr("Run %1 cannot be shown: %2").arg(id).arg(QString::fromStdString(stored.message())));
  }
  const QString shown =
      stored->compare_id ? origin + tr(", compared with run #%1").arg(stored->compare_id) : origin;
  emit eviction_run_opened(stored->report, stored->compare, shown);
  emit status_message(tr("Opened eviction run #%1 (redrawn from the stored data)").arg(id),
                      style::kStatusTimeoutMs);
  return true;
}

bool RunsModel::delete_run(std::int64_t id) {
  if (!m_store) return false;
  // Read the whole run first: it is what Undo puts back.
  auto record = m_store->load_run(id);
  if (auto s = m_store->delete_run(id); !s) return fail(QString::fromStdString(s.message()));
  refresh();
  if (!record) {
    emit status_message(tr("Run %1 deleted; it could not be read, so it cannot be undone: %2")
                            .arg(id)
                            .arg(QString::fromStdString(record.message())),
                        0);
    return true;
  }
  m_undo->push(new DeleteRunCommand(this, std::move(*record)));
  const QString undo_key = undo_shortcut().toString(QKeySequence::NativeText);
  emit status_message(tr("Run %1 deleted — %2 to undo").arg(id).arg(undo_key),
                      style::kStatusTimeoutMs);
  return true;
}

bool RunsModel::restore_deleted_run(const RunRecord& record) {
  if (!m_store) return false;
  if (auto s = m_store->restore_run(record); !s) {
    return fail(tr("Run %1 cannot be put back: %2")
                    .arg(record.id)
                    .arg(QString::fromStdString(s.message())));
  }
  refresh();
  emit run_restored(record.id);
  emit status_message(tr("Run %1 restored").arg(record.id), style::kStatusTimeoutMs);
  return true;
}

bool RunsModel::erase_run(std::int64_t id) {
  if (!m_store) return false;
  if (auto s = m_store->delete_run(id); !s) return fail(QString::fromStdString(s.message()));
  refresh();
  emit status_message(tr("Run %1 deleted again").arg(id), style::kStatusTimeoutMs);
  return true;
}

}  // namespace kvlab::gui
