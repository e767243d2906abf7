// A page for a view that is not in this version yet: what it will do, said plainly.
#pragma once

#include <QStringList>
#include <QWidget>

namespace kvlab::gui {

class PlaceholderPage : public QWidget {
  Q_OBJECT

 public:
  // `plans` become a bulleted list under the summary.
  PlaceholderPage(const QString& title, const QString& summary, const QStringList& plans,
                  QWidget* parent = nullptr);
};

}  // namespace kvlab::gui
