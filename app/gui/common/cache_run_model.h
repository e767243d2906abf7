// What the Compression and Eviction page models share: a job over a cache that stays in memory
// while only the method (or policy) changes, run through one RunController, each success saved
// to the runs store. QtCore only. Each page model adds its job, its reports and how it saves them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include <QObject>
#include <QString>

#include "common/source_spec.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/store/runs_store.h"

namespace kvlab::gui {

class RunController;
class WorkerRunner;

class CacheRunModel : public QObject {
  Q_OBJECT

 public:
  RunController* run_controller() const { return m_run; }
  const QString& last_error() const;
  std::int64_t last_saved_run_id() const { return m_last_saved_id; }
  // Whether the last successful run reused the cache in memory (only the method changed).
  bool last_run_reused_cache() const { return m_last_reused_cache; }
  virtual bool would_reuse_cache(const SourceSpec& source) const = 0;
  // What the next run of `source` does with the cache, and what the last run did.
  QString cache_note(const SourceSpec& source) const;
  QString cache_note_after_run() const;

 signals:
  void status_message(const QString& text, int timeout_ms);
  // Something the person must read (a failed run, a run that could not be saved).
  void error(const QString& message);
  void run_saved(qint64 id);

 protected:
  // `what_changes`: "method" or "policy", the setting whose change keeps the cache.
  CacheRunModel(std::shared_ptr<RunsStore> store, const QString& what_changes, QObject* parent);
  // The page model's runner, made in its constructor: the run controller follows it.
  void set_runner(WorkerRunner* runner);
  // Starts a run with `launch` (the runner's start), saying whether it reuses the cache and then
  // `status` in the status bar; false when a run is going.
  bool start(const std::function<bool()>& launch, const SourceSpec& source, const QString& status);
  // The runner's outcomes.
  void succeeded(bool reused_cache);
  void failed(const QString& message, bool cancelled);
  // Saves with `save` (no store: shown but not saved); `done` says what the run found and is
  // followed by ", saved as run #N".
  void save(const QString& done, const std::function<Result<std::int64_t>(RunsStore&)>& save);

 private:
  std::shared_ptr<RunsStore> m_store;
  RunController* m_run = nullptr;
  QString m_what_changes;
  std::int64_t m_last_saved_id = 0;
  bool m_last_reused_cache = false;
};

}  // namespace kvlab::gui
