#include "window/main_window.h"

#include <QApplication>
#include <QHBoxLayout>
#include <QListWidget>
#include <QScreen>
#include <QScrollArea>
#include <QStackedWidget>
#include <QStatusBar>

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

}  // namespace kvlab::gui
