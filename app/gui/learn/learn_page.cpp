#include "learn/learn_page.h"

#include "kvlab/planners/catalog.h"

#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>
#include "common/gui_style.h"

namespace kvlab::gui {

QComboBox* scheme_combo(const std::vector<std::string>& ids) {
  auto* combo = new QComboBox;
  for (const std::string& id : ids) {
    combo->addItem(QString::fromStdString(planners::parse_scheme(id).value().label),
                   QString::fromStdString(id));
  }
  return combo;
}

void add_form_row(QFormLayout* form, const QString& caption, QWidget* field) {
  auto* label = new QLabel(caption);
  label->setToolTip(field->toolTip());
  label->setBuddy(field);
  form->addRow(label, field);
}

LearnPage::LearnPage(const QString& title, const QString& explanation_html, const QString& citation,
                     const QString& full_view_label, QWidget* parent)
    : QWidget(parent), m_title(title) {
  auto* heading = new QLabel(title, this);
  QFont heading_font = heading->font();
  heading_font.setPointSize(heading_font.pointSize() + 5);
  heading_font.setBold(true);
  heading->setFont(heading_font);

  m_explanation = new QLabel(explanation_html, this);
  m_explanation->setTextFormat(Qt::RichText);
  m_explanation->setWordWrap(true);
  m_explanation->setTextInteractionFlags(Qt::TextBrowserInteraction);
  m_explanation->setOpenExternalLinks(true);

  m_citation = new QLabel(tr("Source: %1").arg(citation.toHtmlEscaped()), this);
  m_citation->setObjectName(QStringLiteral("citation"));
  m_citation->setTextFormat(Qt::RichText);
  m_citation->setWordWrap(true);
  m_citation->setTextInteractionFlags(Qt::TextSelectableByMouse);
  style::make_muted(m_citation);

  m_full_view = new QPushButton(full_view_label, this);
  m_full_view->setToolTip(
      tr("Open the full view with this page's settings and run it there, with every option"));
  connect(m_full_view, &QPushButton::clicked, this, [this] { emit open_full_view(link()); });

  auto* footer = new QHBoxLayout;
  footer->addWidget(m_citation, 1);
  footer->addWidget(m_full_view, 0, Qt::AlignRight | Qt::AlignVCenter);

  m_body = new QVBoxLayout;
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(16, 12, 16, 12);
  layout->addWidget(heading);
  layout->addWidget(m_explanation);
  layout->addLayout(m_body, 1);
  layout->addLayout(footer);
}

}  // namespace kvlab::gui
