#include "kvlab/gui/screenshots.h"

#include <QApplication>
#include <QDir>
#include <QPixmap>

#include "kvlab/gui/main_window.h"

namespace kvlab::gui {

QStringList save_page_screenshots(MainWindow& window, const QString& dir, QString* error) {
  QStringList written;
  if (!QDir().mkpath(dir)) {
    if (error) *error = QObject::tr("%1: cannot create the folder").arg(dir);
    return written;
  }
  const Page before = window.current_page();
  for (int i = 0; i < kPageCount; ++i) {
    const auto page = static_cast<Page>(i);
    window.show_page(page);
    QApplication::processEvents();
    QApplication::processEvents();
    const QString path = QDir(dir).filePath(page_file_name(page) + QStringLiteral(".png"));
    if (!window.grab().save(path)) {
      if (error) *error = QObject::tr("%1: cannot write the image").arg(path);
      return written;
    }
    written << path;
  }
  window.show_page(before);
  return written;
}

}  // namespace kvlab::gui
