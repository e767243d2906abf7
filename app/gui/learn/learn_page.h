// One page of the Learn view: a heading, a short explanation, the paper it comes from, the live
// part (built by each page on the real engine), and a button that opens the full view with the
// page's current settings. Pages emit open_full_view; the main window applies the link.
#pragma once

#include <string>
#include <vector>

#include <QComboBox>
#include <QString>
#include <QWidget>

#include "learn/learn_link.h"

class QFormLayout;
class QLabel;
class QPushButton;
class QVBoxLayout;

namespace kvlab::gui {

// Adds a row "caption: field" to `form`; the caption gets the field's tooltip, so hovering either
// explains the control (set the field's tooltip first).
void add_form_row(QFormLayout* form, const QString& caption, QWidget* field);

// A combo box of catalogue entries (models or GPUs): each one's name shown, its id as data.
template <class T>
QComboBox* catalog_combo(const std::vector<T>& items) {
  auto* combo = new QComboBox;
  for (const T& item : items) {
    combo->addItem(QString::fromStdString(item.name), QString::fromStdString(item.id));
  }
  return combo;
}
// A combo box of planner schemes: each one's label shown, its id as data.
QComboBox* scheme_combo(const std::vector<std::string>& ids);

class LearnPage : public QWidget {
  Q_OBJECT

 public:
  // `explanation_html`: two to four short paragraphs (rich text). `citation`: the paper, as
  // "Authors, Title, Venue Year (arXiv:NNNN.NNNNN)". `full_view_label`: the button's text,
  // e.g. "Open in the Compression view".
  LearnPage(const QString& title, const QString& explanation_html, const QString& citation,
            const QString& full_view_label, QWidget* parent = nullptr);

  const QString& title() const { return m_title; }
  // Where the page's live content goes (below the explanation).
  QVBoxLayout* body() const { return m_body; }
  QPushButton* full_view_button() const { return m_full_view; }

  // The link for the page's current settings; the button emits open_full_view with it.
  virtual LearnLink link() const = 0;

 signals:
  void open_full_view(const kvlab::gui::LearnLink& link);

 private:
  QString m_title;
  QLabel* m_explanation = nullptr;
  QLabel* m_citation = nullptr;
  QPushButton* m_full_view = nullptr;
  QVBoxLayout* m_body = nullptr;
};

}  // namespace kvlab::gui
