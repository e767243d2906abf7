#include "window/screenshots.h"

#include <array>
#include <functional>
#include <optional>
#include <tuple>

#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QPixmap>
#include <QScrollArea>
#include <QScrollBar>

#include <QTabWidget>

#include "common/playback_controls.h"
#include "compression/compression_view.h"
#include "eviction/eviction_policy_panel.h"
#include "eviction/eviction_runner.h"
#include "eviction/eviction_view.h"
#include "kvlab/engine/sources/synthetic.h"
#include "learn/learn_view.h"
#include "quality/generate_panel.h"
#include "quality/quality_view.h"
#include "quality/retrieval_chart.h"
#include "runs/runs_view.h"
#include "window/main_window.h"

namespace kvlab::gui {

namespace {

// One window of stories260K's 512 positions: each configuration takes well under a second.
constexpr int kQualitySampleTokens = 511;
constexpr int kQualityTimeoutMs = 120'000;

// The tiny real model the project's tests use: $KVLAB_MODELS_DIR/stories260K, else
// shared/models/stories260K in a folder above the program or the working directory.
QString find_stories260k() {
  const QString relative = QStringLiteral("stories260K/stories260K.bin");
  const QString env = qEnvironmentVariable("KVLAB_MODELS_DIR");
  if (!env.isEmpty() && QFileInfo::exists(QDir(env).filePath(relative))) {
    return QDir(env).filePath(relative);
  }
  for (QString start : {QCoreApplication::applicationDirPath(), QDir::currentPath()}) {
    for (QDir dir(start);;) {
      const QString candidate = dir.filePath(QStringLiteral("shared/models/") + relative);
      if (QFileInfo::exists(candidate)) return QFileInfo(candidate).absoluteFilePath();
      if (!dir.cdUp()) break;
    }
  }
  return {};
}

// The Quality page with something on it: when it shows no runs and stories260K is found, a few
// configurations measured on one window of the model's own text (stored like any run).
void prepare_quality_page(MainWindow& window) {
  QualityView* view = window.quality_view();
  if (!view->model()->points().empty() || view->is_running()) return;
  const QString model = find_stories260k();
  if (model.isEmpty()) return;
  view->set_model_path(model);
  view->set_sampled_text(kQualitySampleTokens, 1);
  if (!view->model()->points().empty()) return;  // stored runs of this model and text
  view->set_checked({QStringLiteral("int8"), QStringLiteral("int4"), QStringLiteral("kivi-4"),
                     QStringLiteral("kivi-2"), QStringLiteral("fp8-e4m3"),
                     QStringLiteral("kvcomp-0.05"), QStringLiteral("h2o-50"),
                     QStringLiteral("streaming-50")});
  view->run_and_wait(kQualityTimeoutMs);
}

// A prefill press simulated on a small synthetic cache (8 layers of llama3-8b's shape, 512
// tokens, 64 decode steps): shown, not saved, so the screenshots leave no runs behind.
std::optional<EvictionReport> press_report(EvictionPolicy policy) {
  SourceSpec source;
  source.synthetic.preset = "llama3-8b";
  source.synthetic.layers = 8;
  source.synthetic.context = 512;
  EvictionConfig config;
  config.policy = policy;
  config.scorer = EvictionPolicy::PyramidKV;  // adakv: the pyramid and the spread over heads
  config.budget = Budget{0.25, true};
  config.steps = 64;
  const EvictionJob job = make_eviction_job(source, config, std::nullopt);
  auto cache = generate_synthetic(job.source.synthetic);
  if (!cache) return std::nullopt;
  auto report = simulate_eviction(*cache, job.policy);
  if (!report) return std::nullopt;
  return std::move(report).value();
}

// The Eviction page's press tabs (and the needle query marked on the curves), each on the run
// that has its data; the page's own run is put back afterwards.
bool grab_press_tabs(MainWindow& window, const std::function<bool(const QString&)>& grab_to) {
  EvictionView* view = window.eviction_view();
  const auto before = view->model()->report();
  const auto before_compare = view->model()->compare();
  window.show_page(Page::Eviction);
  auto* scroll = qobject_cast<QScrollArea*>(
      window.page_widget(Page::Eviction)->parentWidget()->parentWidget());
  const std::array<std::tuple<EvictionPolicy, int, const char*>, 4> shots{{
      {EvictionPolicy::AdaKV, EvictionView::kStepsTab, "eviction-needle-query"},
      {EvictionPolicy::AdaKV, EvictionView::kBudgetTab, "eviction-budgets"},
      {EvictionPolicy::ThinK, EvictionView::kChannelTab, "eviction-channels"},
      {EvictionPolicy::MiniCache, EvictionView::kMiniCacheTab, "eviction-minicache"},
  }};
  bool ok = true;
  for (const auto& [policy, tab, name] : shots) {
    const auto report = press_report(policy);
    if (!report) continue;
    view->policy_panel()->set_config(report->config);
    view->show_reports(*report, std::nullopt, QObject::tr("computed for the screenshot"));
    view->chart_tabs()->setCurrentIndex(tab);
    // Scrolled to the bottom, where the tabs are, when the window is shorter than the page.
    if (scroll) scroll->verticalScrollBar()->setValue(scroll->verticalScrollBar()->maximum());
    if (!(ok = grab_to(QString::fromLatin1(name)))) break;
  }
  if (scroll) scroll->verticalScrollBar()->setValue(0);
  view->chart_tabs()->setCurrentIndex(EvictionView::kStepsTab);
  if (before) view->show_reports(*before, before_compare, QObject::tr("as before"));
  return ok;
}

// The Runs page comparing something: its two newest runs of one kind, overlaid.
void prepare_runs_page(MainWindow& window) {
  RunsView* runs = window.runs_view();
  runs->refresh();
  std::vector<std::int64_t> pair;
  for (const RunKind kind : {RunKind::Compression, RunKind::Eviction}) {
    pair.clear();
    for (const auto& entry : runs->model()->table()->entries()) {
      if (run_kind_from_id(entry.row.kind) == kind) pair.push_back(entry.row.id);
      if (pair.size() == 2) break;
    }
    if (pair.size() == 2) break;
  }
  if (pair.size() == 2) runs->select_runs(pair);
}

}  // namespace

QStringList save_page_screenshots(MainWindow& window, const QString& dir, QString* error) {
  QStringList written;
  if (!QDir().mkpath(dir)) {
    if (error) *error = QObject::tr("%1: cannot create the folder").arg(dir);
    return written;
  }
  const Page before = window.current_page();
  const auto grab_to = [&](const QString& name) {
    QApplication::processEvents();
    QApplication::processEvents();
    const QString path = QDir(dir).filePath(name + QStringLiteral(".png"));
    if (!window.grab().save(path)) {
      if (error) *error = QObject::tr("%1: cannot write the image").arg(path);
      return false;
    }
    written << path;
    return true;
  };
  for (int i = 0; i < kPageCount; ++i) {
    const auto page = static_cast<Page>(i);
    if (page == Page::Quality) prepare_quality_page(window);
    if (page == Page::Runs) prepare_runs_page(window);
    window.show_page(page);
    if (!grab_to(page_file_name(page))) return written;
  }
  // The Compression page's Key channels tab: the default run's layer 0 keys before and after a
  // rotation.
  QTabWidget* lower = window.compression_view()->lower_tabs();
  const int lower_before = lower->currentIndex();
  window.show_page(Page::Compression);
  lower->setCurrentIndex(CompressionView::kKeyChannelTab);
  // Scrolled to the bottom, where the tab is, when the window is shorter than the page.
  auto* scroll = qobject_cast<QScrollArea*>(
      window.page_widget(Page::Compression)->parentWidget()->parentWidget());
  const int scrolled_before = scroll ? scroll->verticalScrollBar()->value() : 0;
  if (scroll) scroll->verticalScrollBar()->setValue(scroll->verticalScrollBar()->maximum());
  if (!grab_to(QStringLiteral("compression-channels"))) return written;
  if (scroll) scroll->verticalScrollBar()->setValue(scrolled_before);
  lower->setCurrentIndex(lower_before);
  if (!grab_press_tabs(window, grab_to)) return written;
  // The Quality page's passkey-retrieval tab.
  window.show_page(Page::Quality);
  QTabWidget* quality_tabs = window.quality_view()->chart_tabs();
  const int quality_before = quality_tabs->currentIndex();
  quality_tabs->setCurrentIndex(QualityView::kRetrievalTab);
  if (!grab_to(QStringLiteral("quality-retrieval"))) return written;
  // The Generate tab, with stories260K continuing a story from fp16 and three compressed caches.
  quality_tabs->setCurrentIndex(QualityView::kGenerateTab);
  if (!find_stories260k().isEmpty()) {
    GeneratePanel* generate = window.quality_view()->generate_panel();
    window.quality_view()->set_model_path(find_stories260k());
    generate->set_prompt(QStringLiteral("Once upon a time, there was a little girl named Lily."));
    generate->set_tokens(120);
    generate->set_checked({QStringLiteral("kvcomp + huffman"), QStringLiteral("kivi-2"),
                           QStringLiteral("int4"), QStringLiteral("int8")});
    if (generate->generate()) generate->wait_until_done(kQualityTimeoutMs);
  }
  if (!grab_to(QStringLiteral("quality-generate"))) return written;
  quality_tabs->setCurrentIndex(quality_before);
  // Every step of the Learn page: learn-growth.png, learn-quant.png, ...; a step that plays
  // (the cache growing, the Huffman merges, eviction) is shown played to its end, where its
  // chart has the most to show.
  LearnView* learn = window.learn_view();
  const int learn_before = learn->current_index();
  window.show_page(Page::Learn);
  for (int i = 0; i < learn->page_count(); ++i) {
    learn->show_index(i);
    if (auto* playback = learn->page(i)->findChild<PlaybackControls*>()) playback->run_to_end();
    if (!grab_to(learn->page_file_name(i))) return written;
  }
  learn->show_index(learn_before);
  window.show_page(before);
  return written;
}

QStringList pages_wider_than_window(MainWindow& window) {
  QStringList wide;
  const Page before = window.current_page();
  for (int i = 0; i < kPageCount; ++i) {
    const auto page = static_cast<Page>(i);
    window.show_page(page);
    QApplication::processEvents();
    QApplication::processEvents();
    QWidget* widget = window.page_widget(page);
    // A page sits in a QScrollArea's viewport (main_window.cpp).
    auto* scroll = qobject_cast<QScrollArea*>(widget->parentWidget()->parentWidget());
    if (scroll == nullptr || scroll->horizontalScrollBar()->maximum() == 0) continue;
    wide << QObject::tr("%1: needs %2 px, has %3")
                .arg(page_file_name(page))
                .arg(widget->minimumSizeHint().width())
                .arg(scroll->viewport()->width());
  }
  window.show_page(before);
  return wide;
}

}  // namespace kvlab::gui
