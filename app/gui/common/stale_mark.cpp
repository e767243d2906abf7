#include "common/stale_mark.h"

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLineEdit>
#include <QSpinBox>

namespace kvlab::gui {

StaleMark::StaleMark(QWidget* parent) : QLabel(parent) {
  setText(
      tr("Stale: the settings changed after this run. The charts show the last run; press "
         "Run (Ctrl+R) to see the new settings."));
  setWordWrap(true);
  setStyleSheet(QStringLiteral(
      "QLabel { background: #fff4c2; color: #5a4500; border: 1px solid #e0c060; padding: 4px; }"));
  setToolTip(tr("The results below were computed with other settings than the ones shown now"));
  hide();
}

void StaleMark::watch(QWidget* controls) {
  for (auto* spin : controls->findChildren<QSpinBox*>()) {
    connect(spin, &QSpinBox::valueChanged, this, &StaleMark::input_changed);
  }
  for (auto* spin : controls->findChildren<QDoubleSpinBox*>()) {
    connect(spin, &QDoubleSpinBox::valueChanged, this, &StaleMark::input_changed);
  }
  for (auto* box : controls->findChildren<QComboBox*>()) {
    connect(box, &QComboBox::currentIndexChanged, this, &StaleMark::input_changed);
  }
  for (auto* edit : controls->findChildren<QLineEdit*>()) {
    if (qobject_cast<QAbstractSpinBox*>(edit->parentWidget())) continue;  // a spin box's own
    if (qobject_cast<QComboBox*>(edit->parentWidget())) continue;
    connect(edit, &QLineEdit::textChanged, this, &StaleMark::input_changed);
  }
  for (auto* button : controls->findChildren<QAbstractButton*>()) {
    if (button->isCheckable())
      connect(button, &QAbstractButton::toggled, this, &StaleMark::input_changed);
  }
}

void StaleMark::set_fresh() {
  m_has_results = true;
  m_stale = false;
  hide();
}

void StaleMark::clear() {
  m_has_results = false;
  m_stale = false;
  hide();
}

void StaleMark::input_changed() {
  if (!m_has_results || m_stale) return;
  m_stale = true;
  show();
}

}  // namespace kvlab::gui
