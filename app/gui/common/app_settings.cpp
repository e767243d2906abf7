#include "common/app_settings.h"

#include <memory>

#include <QSettings>

namespace kvlab::gui {

namespace {

constexpr const char* kGeometry = "window/geometry";
constexpr const char* kState = "window/state";
constexpr const char* kPage = "window/page";
constexpr const char* kRecentFiles = "files/recent";

// QSettings can be neither copied nor moved. Native format is an INI file on Linux; tests point
// it at a temporary folder with QSettings::setPath.
std::unique_ptr<QSettings> open_settings() {
  return std::make_unique<QSettings>(QSettings::NativeFormat, QSettings::UserScope,
                                     QStringLiteral("kvlab"), QStringLiteral("kvlab"));
}

}  // namespace

WindowSettings load_window_settings() {
  const auto s = open_settings();
  WindowSettings out;
  out.geometry = s->value(kGeometry).toByteArray();
  out.state = s->value(kState).toByteArray();
  out.page = s->value(kPage).toString();
  out.recent_files = s->value(kRecentFiles).toStringList();
  return out;
}

void save_window_settings(const WindowSettings& settings) {
  const auto s = open_settings();
  s->setValue(kGeometry, settings.geometry);
  s->setValue(kState, settings.state);
  s->setValue(kPage, settings.page);
  s->setValue(kRecentFiles, settings.recent_files);
}

void save_recent_files(const QStringList& files) {
  open_settings()->setValue(kRecentFiles, files);
}

void clear_settings() {
  open_settings()->clear();
}

QString settings_file_path() {
  return open_settings()->fileName();
}

QRect fit_on_screen(const QRect& frame, const QRect& available, const QSize& minimum) {
  if (!available.isValid()) return frame;
  const QSize size = frame.size().boundedTo(available.size()).expandedTo(minimum);
  QRect out(frame.topLeft(), size);
  // In from the right and bottom first, so a window larger than the screen keeps its top-left
  // corner (title bar, menus) on it.
  if (out.right() > available.right()) out.moveRight(available.right());
  if (out.bottom() > available.bottom()) out.moveBottom(available.bottom());
  if (out.left() < available.left()) out.moveLeft(available.left());
  if (out.top() < available.top()) out.moveTop(available.top());
  return out;
}

}  // namespace kvlab::gui
