// A banner over a page's results that says they no longer match the controls: the view of its
// RunController's stale state (shown when any input of the watched controls changes after a
// run, hidden when a run finishes or a stored run is opened, whose settings the results are).
#pragma once

#include <QLabel>

namespace kvlab::gui {

class RunController;

class StaleMark : public QLabel {
  Q_OBJECT

 public:
  explicit StaleMark(RunController* controller, QWidget* parent = nullptr);
  // Every spin box, combo box, line edit and checkable button under `controls` that exists now
  // tells the controller when it changes.
  void watch(QWidget* controls);
  bool is_stale() const;

 private:
  RunController* m_controller;
};

}  // namespace kvlab::gui
