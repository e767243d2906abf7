// The main window: the page list and the pages, their signals wired together, opening files
// (File ▸ Open, Open Recent, drops) and the settings kept between launches.
#include "window/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QListWidget>
#include <QMimeData>
#include <QPushButton>
#include <QScreen>
#include <QScrollArea>
#include <QShowEvent>
#include <QStackedWidget>
#include <QStatusBar>
#include <QUrl>

#include "common/app_settings.h"
#include "common/chart_export.h"
#include "common/chart_hover.h"
#include "common/gui_style.h"
#include "common/model_capture_form.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "eviction/eviction_policy_panel.h"
#include "eviction/eviction_view.h"
#include "learn/learn_view.h"
#include "planner/planner_view.h"
#include "quality/quality_view.h"
#include "runs/runs_view.h"
#include "window/window_actions.h"

namespace kvlab::gui {

namespace {

struct PageInfo {
  const char* title;
  const char* file_name;
};

constexpr PageInfo kPages[kPageCount] = {
    {"Compression", "compression"}, {"Eviction", "eviction"}, {"Quality", "quality"},
    {"Planner", "planner"},         {"Runs", "runs"},         {"Learn", "learn"},
};

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

QString page_file_name(Page page) {
  return QString::fromLatin1(kPages[static_cast<int>(page)].file_name);
}

MainWindow::MainWindow(const std::filesystem::path& db_path, QWidget* parent)
    : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("kvlab"));

  auto opened = RunsStore::open(db_path);
  if (opened) {
    m_store = std::make_shared<RunsStore>(std::move(opened).value());
  } else {
    m_store_error = QString::fromStdString(opened.message());
  }

  m_compression = new CompressionView(m_store);
  m_eviction = new EvictionView(m_store);
  m_quality = new QualityView(m_store);
  m_planner = new PlannerView(m_store);
  m_runs = new RunsView(m_store, m_store_error);
  m_learn = new LearnView;

  m_nav = new QListWidget;
  m_stack = new QStackedWidget;
  for (int i = 0; i < kPageCount; ++i) m_nav->addItem(tr(kPages[i].title));
  // Each page scrolls when the window is narrower or lower than the page needs (a laptop
  // screen), instead of forcing the window to the widest page's size.
  m_pages = {m_compression, m_eviction, m_quality, m_planner, m_runs, m_learn};
  for (QWidget* page : m_pages) {
    auto* scroll = new QScrollArea;
    scroll->setWidget(page);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    m_stack->addWidget(scroll);
  }

  QFont nav_font = m_nav->font();
  nav_font.setPointSize(nav_font.pointSize() + 1);
  m_nav->setFont(nav_font);
  m_nav->setFixedWidth(150);
  m_nav->setSpacing(3);

  auto* central = new QWidget;
  auto* layout = new QHBoxLayout(central);
  layout->setContentsMargins(6, 6, 6, 0);
  layout->addWidget(m_nav);
  layout->addWidget(m_stack, 1);
  setCentralWidget(central);

  connect(m_nav, &QListWidget::currentRowChanged, m_stack, &QStackedWidget::setCurrentIndex);
  connect(m_stack, &QStackedWidget::currentChanged, this, [this](int index) {
    if (static_cast<Page>(index) == Page::Runs) m_runs->refresh();
  });
  const auto show_message = [this](const QString& text, int timeout_ms) {
    statusBar()->showMessage(text, timeout_ms);
  };
  connect(m_compression, &CompressionView::status_message, this, show_message);
  connect(m_eviction, &EvictionView::status_message, this, show_message);
  connect(m_runs, &RunsView::status_message, this, show_message);
  connect(m_compression, &CompressionView::run_saved, m_runs, &RunsView::refresh);
  // A model captured on the Compression page is the Quality page's model too, unless the person
  // chose another there.
  ModelCaptureForm* capture = m_compression->source_panel()->model_capture();
  connect(capture, &ModelCaptureForm::captured_changed, this,
          [this, capture] { m_quality->offer_model_path(capture->captured_model()); });
  connect(m_eviction, &EvictionView::run_saved, m_runs, &RunsView::refresh);
  connect(m_quality, &QualityView::status_message, this, show_message);
  connect(m_quality, &QualityView::run_saved, m_runs, &RunsView::refresh);
  connect(m_runs->model(), &RunsModel::quality_run_opened, this, [this](qint64 id) {
    if (m_quality->show_stored_run(id)) show_page(Page::Quality);
  });
  connect(m_planner, &PlannerView::status_message, this, show_message);
  connect(m_planner, &PlannerView::run_saved, m_runs, &RunsView::refresh);
  connect(m_runs->model(), &RunsModel::plan_run_opened, this, [this](const nlohmann::json& params) {
    m_planner->restore(params);
    show_page(Page::Planner);
  });
  connect(m_runs->model(), &RunsModel::compression_run_opened, this,
          [this](const CompressionReport& report, const QString& origin) {
            m_compression->show_stored_run(report, origin);
            show_page(Page::Compression);
          });
  connect(m_runs->model(), &RunsModel::eviction_run_opened, this,
          [this](const EvictionReport& report, const std::optional<EvictionReport>& compare,
                 const QString& origin) {
            m_eviction->show_reports(report, compare, origin);
            show_page(Page::Eviction);
          });

  connect(m_learn, &LearnView::open_full_view, this, &MainWindow::open_learn_link);

  // Desktop integration: menus and shortcuts, drops of files anywhere on the window.
  m_actions = new WindowActions(this);
  install_export_menus(this);  // right-click Export on every chart and table
  // The point under the mouse on any chart, in the status bar; cleared when the mouse leaves it
  // unless another message has replaced it meanwhile.
  install_hover_readout(this, [this](const QString& text) {
    if (!text.isEmpty()) {
      statusBar()->showMessage(text);
      m_hover_text = text;
    } else if (statusBar()->currentMessage() == m_hover_text) {
      statusBar()->clearMessage();
    }
  });
  connect(m_stack, &QStackedWidget::currentChanged, m_actions, &WindowActions::update_run_actions);
  setAcceptDrops(true);
  qApp->installEventFilter(this);

  // Wide enough for the widest page without a scroll bar, as far as the screen allows.
  QSize size = preferred_size();
  if (const QScreen* s = screen()) size = size.boundedTo(s->availableGeometry().size());
  resize(size);

  m_nav->setCurrentRow(0);
  if (m_store) {
    statusBar()->showMessage(
        tr("Runs database: %1").arg(QString::fromStdString(m_store->path().string())),
        style::kStatusTimeoutMs);
  } else {
    statusBar()->showMessage(tr("Runs will not be saved: %1").arg(m_store_error));
  }
}

MainWindow::~MainWindow() = default;

bool MainWindow::open_latest_or_run_default() {
  const bool ok = [this] {
    if (m_store) {
      auto runs = m_store->list_runs(-1);
      if (runs) {
        for (const auto& run : *runs) {  // newest first
          if (run_kind_from_id(run.kind) == RunKind::Compression) return m_runs->open_run(run.id);
        }
      }
    }
    return m_compression->run();
  }();
  // Opening a run shows its page; a page brought back from the settings stays in front.
  if (m_restored_page) show_page(*m_restored_page);
  return ok;
}

void MainWindow::open_learn_link(const LearnLink& link) {
  switch (link.target) {
    case LearnLink::Target::Compression:
      if (link.source) m_compression->source_panel()->set_synthetic(*link.source);
      if (link.method) m_compression->method_panel()->set_config(*link.method);
      if (link.run) m_compression->run();
      show_page(Page::Compression);
      break;
    case LearnLink::Target::Eviction:
      if (link.source) m_eviction->source_panel()->set_synthetic(*link.source);
      if (link.eviction) m_eviction->policy_panel()->set_config(*link.eviction);
      if (link.run) m_eviction->run();
      show_page(Page::Eviction);
      break;
    case LearnLink::Target::Planner:
      if (link.planner) m_planner->restore(*link.planner);
      show_page(Page::Planner);
      break;
  }
}

void MainWindow::show_page(Page page) {
  m_nav->setCurrentRow(static_cast<int>(page));
}

Page MainWindow::current_page() const {
  return static_cast<Page>(m_stack->currentIndex());
}

QWidget* MainWindow::page_widget(Page page) const {
  return m_pages[static_cast<std::size_t>(page)];
}

QSize MainWindow::preferred_size() const {
  int width = 0, height = 0;
  for (const QWidget* page : m_pages) {
    width = std::max(width, page->minimumSizeHint().width());
    height = std::max(height, page->minimumSizeHint().height());
  }
  const int frame = m_nav->width() + 24;  // the navigation list and the layout's margins
  return QSize(std::max(1400, width + frame), std::max(900, height + 80));
}

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
                   m_actions->run_action()->shortcut().toString(QKeySequence::NativeText)),
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
