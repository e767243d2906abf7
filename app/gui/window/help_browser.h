// Help in the app: the guides (docs/GUIDES.md), the command-line reference (docs/CLI.md, made
// from the CLI's own --help) and a page per compression method (method_page(), the text
// `kvlab methods ID` prints), in one window with the topics on the left.
#pragma once

#include <QDialog>
#include <QString>

class QListWidget;
class QTextBrowser;

namespace kvlab::gui {

class HelpBrowser : public QDialog {
  Q_OBJECT

 public:
  explicit HelpBrowser(QWidget* parent = nullptr);

  // Topics: "guides", "cli", or "method:ID" (a method id, as `kvlab methods` lists them).
  // False when there is no such topic.
  bool show_topic(const QString& topic);
  QString current_topic() const;
  // The topic list is named "topics", the text "text", for finding them.

 private:
  void on_topic_changed();

  QListWidget* m_topics = nullptr;
  QTextBrowser* m_text = nullptr;
};

}  // namespace kvlab::gui
