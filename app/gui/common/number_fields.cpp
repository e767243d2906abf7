#include "common/number_fields.h"

#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QRegularExpression>
#include <QToolTip>

namespace kvlab::gui {

namespace {

// The field's name as a person reads it: its accessible name, else its own tooltip's first
// sentence (the tooltip without a refusal in front).
QString field_name(const QAbstractSpinBox* box) {
  if (!box->accessibleName().isEmpty()) return box->accessibleName();
  // The label a form puts beside it.
  if (const QWidget* parent = box->parentWidget()) {
    for (const QFormLayout* form : parent->findChildren<QFormLayout*>()) {
      if (const auto* label = qobject_cast<const QLabel*>(
              form->labelForField(const_cast<QAbstractSpinBox*>(box)))) {
        return label->text().remove(QLatin1Char('&'));
      }
    }
  }
  const QString tip = box->property("plain_tooltip").toString();
  const qsizetype end = tip.indexOf(QRegularExpression(QStringLiteral("[.:;(\\n]")));
  const QString first = (end > 0 ? tip.left(end) : tip).trimmed();
  return first.isEmpty() || first.size() > 40 ? QObject::tr("This field") : first;
}

// The typed text without prefix, suffix and group separators.
QString bare(const QAbstractSpinBox* box, const QString& prefix, const QString& suffix,
             QString text) {
  if (!prefix.isEmpty() && text.startsWith(prefix)) text.remove(0, prefix.size());
  if (!suffix.isEmpty() && text.endsWith(suffix)) text.chop(suffix.size());
  text.remove(box->locale().groupSeparator());
  return text.trimmed();
}

void show_refusal(QAbstractSpinBox* box, const QString& message) {
  box->setProperty("refused", !message.isEmpty());
  box->setStyleSheet(message.isEmpty() ? QString()
                                       : QStringLiteral("QAbstractSpinBox { border: 2px solid "
                                                        "#c83737; }"));
  box->setToolTip(message.isEmpty() ? box->property("plain_tooltip").toString()
                                    : message + QStringLiteral("\n\n") +
                                          box->property("plain_tooltip").toString());
  if (!message.isEmpty() && box->isVisible()) {
    QToolTip::showText(box->mapToGlobal(QPoint(0, box->height())), message, box);
  }
}

// Runs after the event loop, so the spin box has put the kept value back first.
template <class Box>
void refuse_later(Box* box, const QString& message) {
  QMetaObject::invokeMethod(
      box,
      [box, message] {
        show_refusal(box, message);
        emit box->refused(message);
      },
      Qt::QueuedConnection);
}

// Typing that makes the field valid again takes the mark away. (Not valueChanged: Enter emits it
// for the value the refusal kept, too.) Values commit on Enter or when the field loses focus,
// not at every keystroke: typing 10000000 must not pass through 1000 and keep that.
template <class Box>
void set_up(Box* box, QLineEdit* edit, QString& refusal) {
  box->setKeyboardTracking(false);
  QObject::connect(edit, &QLineEdit::textEdited, box, [box, edit, &refusal] {
    if (refusal.isEmpty()) return;
    QString text = edit->text();
    int pos = 0;
    if (box->validate(text, pos) != QValidator::Acceptable) return;
    refusal.clear();
    show_refusal(box, QString());
  });
}

}  // namespace

QString out_of_range_message(const QString& field, const QString& typed, const QString& lowest,
                             const QString& highest, const QString& kept) {
  return QObject::tr("%1: %2 is outside what this field takes (%3 to %4); it stays at %5.")
      .arg(field, typed, lowest, highest, kept);
}

IntField::IntField(QWidget* parent) : QSpinBox(parent) {
  set_up(this, lineEdit(), m_refusal);
}

QValidator::State IntField::validate(QString& input, int& pos) const {
  const QValidator::State state = QSpinBox::validate(input, pos);
  if (state != QValidator::Invalid) return state;
  // A whole number out of range may still be typed; fixup() refuses it out loud.
  bool ok = false;
  bare(this, prefix(), suffix(), input).toLongLong(&ok);
  return ok ? QValidator::Intermediate : QValidator::Invalid;
}

void IntField::fixup(QString& input) const {
  bool ok = false;
  const QString typed = bare(this, prefix(), suffix(), input);
  const qlonglong n = typed.toLongLong(&ok);
  if (!ok || (n >= minimum() && n <= maximum())) {
    QSpinBox::fixup(input);
    return;
  }
  auto* self = const_cast<IntField*>(this);
  // While no refusal shows, the tooltip is the field's own: keep it to put back later.
  if (m_refusal.isEmpty()) self->setProperty("plain_tooltip", toolTip());
  m_refusal = out_of_range_message(field_name(this), typed, QString::number(minimum()),
                                   QString::number(maximum()), QString::number(value()));
  refuse_later(self, m_refusal);
  // Leaving the input as typed makes the spin box put its last good value back.
}

RealField::RealField(QWidget* parent) : QDoubleSpinBox(parent) {
  set_up(this, lineEdit(), m_refusal);
}

QValidator::State RealField::validate(QString& input, int& pos) const {
  const QValidator::State state = QDoubleSpinBox::validate(input, pos);
  if (state != QValidator::Invalid) return state;
  bool ok = false;
  locale().toDouble(bare(this, prefix(), suffix(), input), &ok);
  return ok ? QValidator::Intermediate : QValidator::Invalid;
}

void RealField::fixup(QString& input) const {
  bool ok = false;
  const QString typed = bare(this, prefix(), suffix(), input);
  const double x = locale().toDouble(typed, &ok);
  if (!ok || (x >= minimum() && x <= maximum())) {
    QDoubleSpinBox::fixup(input);
    return;
  }
  auto* self = const_cast<RealField*>(this);
  // While no refusal shows, the tooltip is the field's own: keep it to put back later.
  if (m_refusal.isEmpty()) self->setProperty("plain_tooltip", toolTip());
  m_refusal = out_of_range_message(field_name(this), typed, textFromValue(minimum()),
                                   textFromValue(maximum()), textFromValue(value()));
  refuse_later(self, m_refusal);
}

}  // namespace kvlab::gui
