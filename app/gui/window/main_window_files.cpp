// MainWindow: opening files (File ▸ Open, Open Recent, drops) and the settings kept between
// launches.
#include <QAction>
#include <QCloseEvent>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QMimeData>
#include <QPushButton>
#include <QScreen>
#include <QShowEvent>
#include <QStatusBar>
#include <QUrl>

#include "common/app_settings.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "eviction/eviction_view.h"
#include "planner/planner_view.h"
#include "quality/quality_view.h"
#include "window/main_window.h"
#include "window/window_actions.h"

namespace kvlab::gui {

namespace {

constexpr int kMessageMs = 10'000;

QString quoted_name(const QString& path) {
  return QStringLiteral("\u201c%1\u201d").arg(QFileInfo(path).fileName());
}

// A folder counts as KV tensors when it holds .npy files (one per tensor), as the source panel
// reads it.
OpenedFileKind kind_of(const QFileInfo& info) {
  if (info.isDir()) {
    return QDir(info.absoluteFilePath()).entryList({QStringLiteral("*.npy")}, QDir::Files).isEmpty()
               ? OpenedFileKind::Unknown
               : OpenedFileKind::KvTensors;
  }
  return classify_opened_file(info.fileName());
}

// The local files a drag carries; empty when it carries anything else (text, web links).
QStringList local_files(const QMimeData* mime) {
  QStringList files;
  if (!mime || !mime->hasUrls()) return files;
  for (const QUrl& url : mime->urls()) {
    if (!url.isLocalFile()) return {};
    files << url.toLocalFile();
  }
  return files;
}

}  // namespace

bool MainWindow::open_file(const QString& path) {
  const QFileInfo info(path);
  if (!info.exists()) {
    statusBar()->showMessage(
        tr("%1 cannot be opened: there is no such file (%2)").arg(quoted_name(path), path),
        kMessageMs);
    if (m_recent.remove(path)) recent_files_changed();
    return false;
  }
  const QString absolute = info.absoluteFilePath();
  switch (kind_of(info)) {
    case OpenedFileKind::KvTensors:
      m_compression->source_panel()->set_file(absolute);
      show_page(Page::Compression);
      statusBar()->showMessage(
          tr("%1 is the Compression source now; %2 runs it")
              .arg(quoted_name(path),
                   window_actions()->run_action()->shortcut().toString(QKeySequence::NativeText)),
          kMessageMs);
      break;
    case OpenedFileKind::ModelConfig:
      show_page(Page::Planner);
      if (!m_planner->import_config(absolute)) {
        statusBar()->showMessage(
            tr("%1 was not imported: %2").arg(quoted_name(path), m_planner->error_text()),
            kMessageMs);
        return false;
      }
      break;  // the Planner says what it imported
    case OpenedFileKind::Unknown:
      statusBar()->showMessage(tr("%1 is not a file kvlab opens: it opens %2")
                                   .arg(quoted_name(path), accepted_files_text()),
                               kMessageMs);
      return false;
  }
  m_recent.add(absolute);
  recent_files_changed();
  return true;
}

bool MainWindow::open_files(const QStringList& paths) {
  for (int i = 0; i < paths.size(); ++i) {
    const QFileInfo info(paths[i]);
    if (!info.exists() || kind_of(info) == OpenedFileKind::Unknown) continue;
    if (!open_file(paths[i])) return false;
    if (paths.size() > 1) {
      statusBar()->showMessage(
          tr("Opened %1, the first usable of the %2 files dropped (one file opens at a time)")
              .arg(quoted_name(paths[i]))
              .arg(paths.size()),
          kMessageMs);
    }
    return true;
  }
  if (paths.size() == 1) return open_file(paths.front());
  QStringList names;
  for (const QString& p : paths) names << QFileInfo(p).fileName();
  statusBar()->showMessage(tr("None of the dropped files can be opened (%1): kvlab opens %2")
                               .arg(names.join(QStringLiteral(", ")), accepted_files_text()),
                           kMessageMs);
  return false;
}

QStringList MainWindow::forget_missing_recent_files() {
  const QStringList missing = m_recent.remove_missing();
  if (!missing.isEmpty()) recent_files_changed();
  return missing;
}

void MainWindow::clear_recent_files() {
  m_recent.clear();
  recent_files_changed();
}

void MainWindow::recent_files_changed() {
  if (m_settings_enabled) save_recent_files(m_recent.paths());
}

void MainWindow::restore_settings() {
  m_settings_enabled = true;
  const WindowSettings s = load_window_settings();
  if (!s.geometry.isEmpty()) {
    restoreGeometry(s.geometry);
    fit_on_screen_now();
    m_fit_when_shown = true;  // again once the frame's own size is known
  }
  if (!s.state.isEmpty()) restoreState(s.state);
  for (int i = 0; i < kPageCount; ++i) {
    if (page_file_name(static_cast<Page>(i)) != s.page) continue;
    m_restored_page = static_cast<Page>(i);
    show_page(*m_restored_page);
  }
  m_recent.set(s.recent_files);
}

void MainWindow::fit_on_screen_now() {
  const QScreen* screen = this->screen();
  if (!screen) return;
  const QRect frame = frameGeometry();
  const QRect fitted = fit_on_screen(frame, screen->availableGeometry(), minimumSize());
  if (fitted == frame) return;
  const QSize extra = frame.size() - size();  // the window frame's own size
  resize(fitted.size() - extra);
  move(fitted.topLeft());
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  if (m_fit_when_shown) {
    m_fit_when_shown = false;
    fit_on_screen_now();
  }
}

void MainWindow::save_settings() const {
  if (!m_settings_enabled) return;
  save_window_settings(
      {saveGeometry(), saveState(), page_file_name(current_page()), m_recent.paths()});
}

void MainWindow::closeEvent(QCloseEvent* event) {
  save_settings();
  QMainWindow::closeEvent(event);
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  switch (event->type()) {
    case QEvent::DragEnter:
    case QEvent::DragMove:
    case QEvent::Drop: {
      auto* widget = qobject_cast<QWidget*>(watched);
      if (!widget || widget->window() != this) break;
      auto* drop = static_cast<QDropEvent*>(event);
      const QStringList files = local_files(drop->mimeData());
      if (files.isEmpty()) break;  // text and links go to the widget as usual
      // Every local file is taken, so an unsupported one gets a message rather than a refusal.
      drop->acceptProposedAction();
      if (event->type() == QEvent::Drop) open_files(files);
      return true;
    }
    case QEvent::EnabledChange:
      // The page's Cancel button is enabled while it runs: Run ▸ Cancel (Esc) follows it.
      if (m_actions &&
          (watched == m_compression->cancel_button() || watched == m_eviction->cancel_button() ||
           watched == m_quality->cancel_button())) {
        m_actions->update_run_actions();
      }
      break;
    default:
      break;
  }
  return QMainWindow::eventFilter(watched, event);
}

}  // namespace kvlab::gui
