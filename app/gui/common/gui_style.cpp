#include "common/gui_style.h"

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

}  // namespace kvlab::gui::style
