// One run lifecycle for every page that runs work (Compression, Eviction, Quality): start,
// progress with an estimate of the time left, cancel ("Cancelling…" until the worker has
// stopped), wait, succeeded or failed, and whether the results on show still match the controls
// (stale). QtCore only: the page's widgets show what it says (RunShell: buttons, bar and stage
// line; StaleMark: the banner), and its runner (worker_runner.h) does the work.
#pragma once

#include <functional>

#include <QElapsedTimer>
#include <QObject>
#include <QString>

namespace kvlab::gui {

class WorkerRunner;

class RunController : public QObject {
  Q_OBJECT

 public:
  explicit RunController(WorkerRunner* runner, QObject* parent = nullptr);

  // Starts a run: `launch` starts the page's job on the runner and is false when it did not
  // (one is running). The bar goes to 0 and `first_stage` is shown until the worker reports.
  bool start(const std::function<bool()>& launch, const QString& first_stage);
  // An error outside the run itself (the page refused to start on incomplete input, or could not
  // save what the run computed): it becomes the last error; nothing else changes.
  void note_error(const QString& message);
  // Asks the worker to stop; the stage says "Cancelling…" until it has.
  void cancel();
  bool running() const { return m_running; }
  bool cancelling() const { return m_cancelling; }

  // The page's handlers of its runner's signals say how the run ended.
  void succeeded();
  void failed(const QString& message, bool cancelled);

  // Starts with `run` (the page's own run(), which checks its input) and processes events until
  // the run has ended; past `timeout_ms` the run is cancelled and counts as failed. True when it
  // succeeded.
  bool run_and_wait(const std::function<bool()>& run, int timeout_ms);
  // Processes events until the running run (if any) has ended; true when none is running.
  bool wait_until_done(int timeout_ms);
  bool last_ok() const { return m_last_ok; }
  const QString& last_error() const { return m_last_error; }

  int percent() const { return m_percent; }
  // The stage line: the worker's stage and, after a few seconds, the time left; "Cancelling…"
  // after a cancel; empty when no run is going.
  const QString& stage_text() const { return m_stage; }
  // "about 40 s left" for a run `percent` done after `elapsed_ms`; empty while too early to say.
  static QString time_left(int percent, qint64 elapsed_ms);

  // The results on show were computed with the controls as they are (a run finished, or a
  // stored run was opened with its settings).
  void results_shown();
  // No results are on show: nothing can be stale.
  void results_cleared();
  // A control changed: results on show no longer match it.
  void input_changed();
  bool stale() const { return m_stale; }

 signals:
  void running_changed(bool running);
  void progress_changed(int percent, const QString& stage);
  void ended(bool succeeded);
  void stale_changed(bool stale);

 private:
  void on_progress(int percent, const QString& stage);
  void end(bool succeeded);
  void set_stale(bool stale);

  WorkerRunner* m_runner;
  QElapsedTimer m_clock;
  QString m_stage;
  QString m_last_error;
  int m_percent = 0;
  bool m_running = false;
  bool m_cancelling = false;
  bool m_last_ok = false;
  bool m_has_results = false;
  bool m_stale = false;
};

}  // namespace kvlab::gui
