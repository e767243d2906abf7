#include "common/cache_run_model.h"

#include <utility>

#include "common/gui_style.h"
#include "common/run_controller.h"
#include "common/worker_runner.h"

namespace kvlab::gui {

CacheRunModel::CacheRunModel(std::shared_ptr<RunsStore> store, const QString& what_changes,
                             QObject* parent)
    : QObject(parent), m_store(std::move(store)), m_what_changes(what_changes) {}

void CacheRunModel::set_runner(WorkerRunner* runner) {
  m_run = new RunController(runner, this);
}

const QString& CacheRunModel::last_error() const {
  return m_run->last_error();
}

QString CacheRunModel::cache_note(const SourceSpec& source) const {
  return would_reuse_cache(source) ? tr("The cache in memory will be reused.")
                                   : tr("The cache will be generated or loaded on Run.");
}

QString CacheRunModel::cache_note_after_run() const {
  return m_last_reused_cache
             ? tr("Reused the cache in memory (only the %1 changed).").arg(m_what_changes)
             : tr("Cache kept in memory: changing only the %1 will not regenerate it.")
                   .arg(m_what_changes);
}

bool CacheRunModel::start(const std::function<bool()>& launch, const SourceSpec& source,
                          const QString& status) {
  if (!m_run->start(launch, would_reuse_cache(source) ? tr("Reusing the cache in memory")
                                                      : tr("Preparing the cache"))) {
    return false;
  }
  emit status_message(status, 0);
  return true;
}

void CacheRunModel::succeeded(bool reused_cache) {
  m_run->succeeded();
  m_last_reused_cache = reused_cache;
}

void CacheRunModel::failed(const QString& message, bool cancelled) {
  m_run->failed(message, cancelled);
  if (cancelled) {
    emit status_message(tr("Run cancelled."), style::kStatusTimeoutMs);
    return;
  }
  emit error(tr("The run failed: %1").arg(message));
}

void CacheRunModel::save(const QString& done,
                         const std::function<Result<std::int64_t>(RunsStore&)>& save) {
  if (!m_store) {
    emit status_message(done + tr(" (not saved: no runs database)"), style::kStatusTimeoutMs);
    return;
  }
  auto id = save(*m_store);
  if (!id) {
    m_run->note_error(QString::fromStdString(id.message()));
    emit error(tr("The run was computed but could not be saved: %1").arg(m_run->last_error()));
    return;
  }
  m_last_saved_id = *id;
  emit status_message(done + tr(", saved as run #%1").arg(*id), style::kStatusTimeoutMs);
  emit run_saved(*id);
}

}  // namespace kvlab::gui
