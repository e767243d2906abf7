// The mechanism every long GUI job shares: one worker thread at a time, progress posted to the
// UI thread through queued calls, cancel() making the engine's ProgressFn return false, and the
// job's result handed back on the UI thread. CompressionRunner and EvictionRunner build on it.
#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include <QObject>
#include <QString>

#include "kvlab/engine/core/progress.h"

namespace kvlab::gui {

class WorkerRunner : public QObject {
  Q_OBJECT

 public:
  explicit WorkerRunner(QObject* parent = nullptr);
  ~WorkerRunner() override;  // cancels a running job and waits for its thread

  void cancel() { m_cancel = true; }
  bool busy() const { return m_busy; }
  // Spins an event loop until the running job has finished (its signals delivered) or the
  // timeout passes; true when no job is running any more.
  bool wait_until_done(int timeout_ms);

 signals:
  void progress(int percent, const QString& stage);
  void finished();

 protected:
  // What the worker hands back: run on the UI thread once the thread has been joined.
  using Completion = std::function<void()>;
  // Runs `work` on a new thread; false (and nothing happens) while a job is running. `work`
  // must not touch the derived object: it only computes and returns its completion.
  bool launch(std::function<Completion()> work);
  // Maps the engine's fraction of one stage onto [base, base + span] of the whole job and posts
  // it only when the percentage or the stage changes (the engine may call often).
  ProgressFn progress_fn(double base, double span);

 private:
  void complete(const Completion& completion);

  std::thread m_thread;
  std::atomic<bool> m_cancel{false};
  bool m_busy = false;
};

}  // namespace kvlab::gui
