#include "common/stale_mark.h"

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>

#include "common/run_controller.h"

namespace kvlab::gui {

StaleMark::StaleMark(RunController* controller, QWidget* parent)
    : QLabel(parent), m_controller(controller) {
  setText(
      tr("Stale: the settings changed after this run. The charts show the last run; press "
         "Run (Ctrl+R) to see the new settings."));
  setWordWrap(true);
  setStyleSheet(QStringLiteral(
      "QLabel { background: #fff4c2; color: #5a4500; border: 1px solid #e0c060; padding: 4px; }"));
  setToolTip(tr("The results below were computed with other settings than the ones shown now"));
  setVisible(m_controller->stale());
  connect(m_controller, &RunController::stale_changed, this, &StaleMark::setVisible);
}

bool StaleMark::is_stale() const {
  return m_controller->stale();
}

void StaleMark::watch(QWidget* controls) {
  for (auto* spin : controls->findChildren<QSpinBox*>()) {
    connect(spin, &QSpinBox::valueChanged, m_controller, &RunController::input_changed);
  }
  for (auto* spin : controls->findChildren<QDoubleSpinBox*>()) {
    connect(spin, &QDoubleSpinBox::valueChanged, m_controller, &RunController::input_changed);
  }
  for (auto* box : controls->findChildren<QComboBox*>()) {
    connect(box, &QComboBox::currentIndexChanged, m_controller, &RunController::input_changed);
  }
  for (auto* edit : controls->findChildren<QLineEdit*>()) {
    if (qobject_cast<QAbstractSpinBox*>(edit->parentWidget())) continue;  // a spin box's own
    if (qobject_cast<QComboBox*>(edit->parentWidget())) continue;
    connect(edit, &QLineEdit::textChanged, m_controller, &RunController::input_changed);
  }
  for (auto* button : controls->findChildren<QAbstractButton*>()) {
    if (button->isCheckable())
      connect(button, &QAbstractButton::toggled, m_controller, &RunController::input_changed);
  }
}

}  // namespace kvlab::gui
