// What kvlab-gui remembers between launches, kept with QSettings (organisation "kvlab",
// application "kvlab": ~/.config/kvlab/kvlab.conf on Linux): the window's geometry and state,
// the page it showed, and the recently opened files. The --screenshot mode neither reads nor
// writes them, so its pictures do not depend on the last session.
#pragma once

#include <QByteArray>
#include <QRect>
#include <QString>
#include <QStringList>

namespace kvlab::gui {

struct WindowSettings {
  QByteArray geometry;  // QWidget::saveGeometry()
  QByteArray state;     // QMainWindow::saveState()
  QString page;         // page_file_name(): "compression", "planner", ...
  QStringList recent_files;
};

// Missing keys read as empty.
WindowSettings load_window_settings();
void save_window_settings(const WindowSettings& settings);
// Only the recent files (written as soon as the list changes, not only at exit).
void save_recent_files(const QStringList& files);
// Forgets everything kvlab-gui saved (--reset-settings).
void clear_settings();
// The file QSettings reads and writes.
QString settings_file_path();

// A window geometry `frame` (frame included) made to lie on the screen area `available`: no
// larger than it (nor smaller than `minimum`), moved in from any edge it crosses. A window
// remembered from a larger screen comes back whole on a smaller one.
QRect fit_on_screen(const QRect& frame, const QRect& available, const QSize& minimum);

}  // namespace kvlab::gui
