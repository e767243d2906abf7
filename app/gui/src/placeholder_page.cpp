#include "kvlab/gui/placeholder_page.h"

#include <QLabel>
#include <QVBoxLayout>

namespace kvlab::gui {

PlaceholderPage::PlaceholderPage(const QString& title, const QString& summary,
                                 const QStringList& plans, QWidget* parent)
    : QWidget(parent) {
  auto* heading = new QLabel(title, this);
  QFont heading_font = heading->font();
  heading_font.setPointSize(heading_font.pointSize() + 6);
  heading_font.setBold(true);
  heading->setFont(heading_font);

  QString body = QStringLiteral("<p>%1</p><ul>").arg(summary.toHtmlEscaped());
  for (const QString& plan : plans) {
    body += QStringLiteral("<li style='margin-bottom:4px'>%1</li>").arg(plan.toHtmlEscaped());
  }
  body += QStringLiteral("</ul><p><i>%1</i></p>")
              .arg(tr("This view arrives in a later version of kvlab. Nothing on this page is "
                      "computed yet; the Compression and Runs views work today.")
                       .toHtmlEscaped());
  auto* text = new QLabel(body, this);
  text->setWordWrap(true);
  text->setTextFormat(Qt::RichText);
  text->setMaximumWidth(820);
  text->setAlignment(Qt::AlignLeft | Qt::AlignTop);
  QFont text_font = text->font();
  text_font.setPointSize(text_font.pointSize() + 1);
  text->setFont(text_font);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(32, 28, 32, 28);
  layout->addWidget(heading);
  layout->addSpacing(8);
  layout->addWidget(text);
  layout->addStretch(1);
}

}  // namespace kvlab::gui
