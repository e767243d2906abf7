// The Run / Cancel buttons, the progress bar and the stage line under a page's controls: the view
// of a page's RunController (run_controller.h), one widget for the Compression, Eviction and
// Quality pages. The page decides what Run means and which of its controls a run locks.
#pragma once

#include <QString>
#include <QWidget>

class QLabel;
class QProgressBar;
class QPushButton;

namespace kvlab::gui {

class RunController;

struct RunShellTexts {
  QString run_tooltip;       // what Run does on this page
  QString cancel_tooltip;    // what Cancel keeps and what it drops
  QString progress_tooltip;  // what the bar counts
};

class RunShell : public QWidget {
  Q_OBJECT

 public:
  RunShell(const RunShellTexts& texts, RunController* controller, QWidget* parent = nullptr);

  QPushButton* run_button() const { return m_run; }
  QPushButton* cancel_button() const { return m_cancel; }
  QProgressBar* progress_bar() const { return m_progress; }
  // The stage under the progress bar is named "stage", for finding it.

 signals:
  void run_requested();

 private:
  void show_progress(int percent, const QString& stage);
  void set_running(bool running);

  QPushButton* m_run;
  QPushButton* m_cancel;
  QProgressBar* m_progress;
  QLabel* m_stage;
};

}  // namespace kvlab::gui
