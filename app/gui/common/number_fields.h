// Spin boxes that refuse a number outside their range out loud. Qt's own spin boxes swallow
// the keystroke that would leave the range, or clamp the number when the field loses focus, so
// "10000000" typed into a context field silently became its maximum. These accept the typing,
// and when the number is out of range they keep the last good value, mark the field and say
// why in a tooltip beside it and through refused(). A typed value takes effect on Enter or when
// the field loses focus (arrows and the wheel still step at once), so typing a long number
// never commits its prefixes on the way.
#pragma once

#include <QDoubleSpinBox>
#include <QSpinBox>
#include <QValidator>

namespace kvlab::gui {

// "Context: 10000000 is above the largest allowed, 1048576; it stays at 4096."
QString out_of_range_message(const QString& field, const QString& typed, const QString& lowest,
                             const QString& highest, const QString& kept);

class IntField : public QSpinBox {
  Q_OBJECT

 public:
  explicit IntField(QWidget* parent = nullptr);
  // The message of the last refusal; empty once a good value is entered.
  const QString& refusal() const { return m_refusal; }

  // Public (protected in Qt's spin boxes) so the field can check what is being typed.
  QValidator::State validate(QString& input, int& pos) const override;
  void fixup(QString& input) const override;

 signals:
  void refused(const QString& message);

 private:
  mutable QString m_refusal;
};

class RealField : public QDoubleSpinBox {
  Q_OBJECT

 public:
  explicit RealField(QWidget* parent = nullptr);
  const QString& refusal() const { return m_refusal; }

  // Public (protected in Qt's spin boxes) so the field can check what is being typed.
  QValidator::State validate(QString& input, int& pos) const override;
  void fixup(QString& input) const override;

 signals:
  void refused(const QString& message);

 private:
  mutable QString m_refusal;
};

}  // namespace kvlab::gui
