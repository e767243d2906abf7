#include "window/help_browser.h"

#include <QFile>
#include <QHBoxLayout>
#include <QListWidget>
#include <QSplitter>
#include <QTextBrowser>

#include "kvlab/engine/quant/method_about.h"

// The resources of a static library are registered by hand, at global scope.
static void init_docs_resource() {
  Q_INIT_RESOURCE(docs);
}

namespace kvlab::gui {
namespace {

QString utf8(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

QString resource_text(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return QObject::tr("(%1 is missing from this build)").arg(path);
  return QString::fromUtf8(f.readAll());
}

// method_page() as Markdown: its first line a heading, its paragraphs as they are.
QString method_markdown(MethodKind kind) {
  QString page = utf8(method_page(kind));
  const qsizetype end = page.indexOf(QLatin1Char('\n'));
  return QStringLiteral("# ") + page.left(end) + page.mid(end);
}

}  // namespace

HelpBrowser::HelpBrowser(QWidget* parent) : QDialog(parent) {
  init_docs_resource();
  setWindowTitle(tr("kvlab help"));
  m_topics = new QListWidget(this);
  m_topics->setObjectName(QStringLiteral("topics"));
  const auto add = [this](const QString& text, const QString& topic) {
    auto* item = new QListWidgetItem(text, m_topics);
    item->setData(Qt::UserRole, topic);
  };
  add(tr("Guides"), QStringLiteral("guides"));
  add(tr("Command-line reference"), QStringLiteral("cli"));
  for (const std::string_view id : method_ids()) {
    add(tr("Method: %1").arg(utf8(id)), QStringLiteral("method:") + utf8(id));
  }
  m_topics->setToolTip(tr("The guides, the kvlab command's reference, and a page per method"));
  m_text = new QTextBrowser(this);
  m_text->setObjectName(QStringLiteral("text"));
  m_text->setOpenExternalLinks(true);
  auto* split = new QSplitter(this);
  split->addWidget(m_topics);
  split->addWidget(m_text);
  split->setStretchFactor(1, 1);
  split->setSizes({220, 680});
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(split);
  resize(960, 680);
  connect(m_topics, &QListWidget::currentRowChanged, this, &HelpBrowser::on_topic_changed);
  m_topics->setCurrentRow(0);
}

bool HelpBrowser::show_topic(const QString& topic) {
  for (int i = 0; i < m_topics->count(); ++i) {
    if (m_topics->item(i)->data(Qt::UserRole).toString() == topic) {
      m_topics->setCurrentRow(i);
      return true;
    }
  }
  return false;
}

QString HelpBrowser::current_topic() const {
  const QListWidgetItem* item = m_topics->currentItem();
  return item ? item->data(Qt::UserRole).toString() : QString();
}

void HelpBrowser::on_topic_changed() {
  const QString topic = current_topic();
  if (topic == QStringLiteral("guides")) {
    m_text->setMarkdown(resource_text(QStringLiteral(":/docs/GUIDES.md")));
  } else if (topic == QStringLiteral("cli")) {
    m_text->setMarkdown(resource_text(QStringLiteral(":/docs/CLI.md")));
  } else if (topic.startsWith(QStringLiteral("method:"))) {
    const auto kind = parse_method(topic.mid(7).toStdString());
    if (kind) m_text->setMarkdown(method_markdown(*kind));
  }
}

}  // namespace kvlab::gui
