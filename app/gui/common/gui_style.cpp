#include "common/gui_style.h"

#include <QFormLayout>
#include <QLabel>
#include <QPalette>

namespace kvlab::gui::style {

void make_muted(QLabel* label) {
  QPalette muted = label->palette();
  muted.setColor(QPalette::WindowText, kMutedText);
  label->setPalette(muted);
}

QLabel* muted_label(const QString& text, QWidget* parent) {
  auto* label = new QLabel(text, parent);
  label->setWordWrap(true);
  make_muted(label);
  return label;
}

void make_error_text(QLabel* label) {
  label->setStyleSheet(QStringLiteral("color: #b00020;"));
}

void make_error_banner(QLabel* label) {
  label->setStyleSheet(QStringLiteral(
      "QLabel { color: #a01818; background: #fbe9e7; border: 1px solid #e0a09a; padding: 6px; }"));
}

QString tooltip_of(const QWidget* w) {
  if (!w) return {};
  if (!w->toolTip().isEmpty()) return w->toolTip();
  for (const QWidget* child : w->findChildren<QWidget*>()) {
    if (!child->toolTip().isEmpty()) return child->toolTip();
  }
  return {};
}

void share_with_captions(QFormLayout* form) {
  for (int row = 0; row < form->rowCount(); ++row) {
    const QLayoutItem* label_item = form->itemAt(row, QFormLayout::LabelRole);
    const QLayoutItem* field_item = form->itemAt(row, QFormLayout::FieldRole);
    if (!label_item || !field_item) continue;
    auto* label = qobject_cast<QLabel*>(label_item->widget());
    if (label && label->toolTip().isEmpty()) label->setToolTip(tooltip_of(field_item->widget()));
  }
}

}  // namespace kvlab::gui::style
