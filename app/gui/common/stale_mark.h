// A banner over a page's results that says they no longer match the controls: shown when any
// input of the watched controls changes after a run, hidden when a run finishes (or a stored run
// is opened, whose settings the results are). What the page shows is what it computed.
#pragma once

#include <QLabel>

namespace kvlab::gui {

class StaleMark : public QLabel {
  Q_OBJECT

 public:
  explicit StaleMark(QWidget* parent = nullptr);
  // Every spin box, combo box, line edit and checkable button under `controls`, now and later
  // added ones that exist when this is called.
  void watch(QWidget* controls);
  // The results shown now match the controls (a run finished).
  void set_fresh();
  // No results are shown: nothing can be stale.
  void clear();
  bool is_stale() const { return m_stale; }

 private:
  void input_changed();

  bool m_has_results = false;
  bool m_stale = false;
};

}  // namespace kvlab::gui
