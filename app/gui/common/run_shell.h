// The Run / Cancel buttons, the progress bar and the stage line under a page's controls: one
// widget for the Compression, Eviction and Quality pages, which each connect it to their worker
// (worker_runner.h). The page decides what Run means and which of its controls a run locks.
#pragma once

#include <QElapsedTimer>
#include <QString>
#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;

namespace kvlab::gui {

struct RunShellTexts {
  QString run_tooltip;       // what Run does on this page
  QString cancel_tooltip;    // what Cancel keeps and what it drops
  QString progress_tooltip;  // what the bar counts
};

class RunShell : public QWidget {
  Q_OBJECT

 public:
  explicit RunShell(const RunShellTexts& texts, QWidget* parent = nullptr);

  // A run started: the bar at 0, `stage` shown, Run disabled and Cancel enabled.
  void started(const QString& stage);
  // The worker's progress; after a few seconds the stage line adds an estimate of the time left
  // ("about 40 s left"), from the time so far and the share done.
  void progress(int percent, const QString& stage);
  // Cancel was pressed; the worker has not stopped yet: "Cancelling…" stays until it has.
  void cancelling();
  // "about 40 s left" for a run `percent` done after `elapsed_ms`; empty while too early to say.
  static QString time_left(int percent, qint64 elapsed_ms);
  // The run ended: the bar full when it succeeded, empty otherwise; Run enabled again.
  void finished(bool succeeded);
  bool running() const { return m_running; }

  QPushButton* run_button() const { return m_run; }
  QPushButton* cancel_button() const { return m_cancel; }
  QProgressBar* progress_bar() const { return m_progress; }
  QLabel* stage_label() const { return m_stage; }

 signals:
  void run_requested();
  void cancel_requested();

 private:
  void set_running(bool running);

  QPushButton* m_run;
  QPushButton* m_cancel;
  QProgressBar* m_progress;
  QLabel* m_stage;
  bool m_running = false;
  bool m_cancelling = false;
  QElapsedTimer m_clock;
};

}  // namespace kvlab::gui
