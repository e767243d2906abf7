// kvlab-gui [options] [FILE...]: the desktop lab. FILE (as the .desktop file's %F passes it) opens
// as File > Open does. With --screenshot it runs the default compression (synthetic llama3-8b,
// 1024 tokens, KIVI) and the default eviction comparison (H2O 25% against a 25% window, 64
// decode steps), saves a PNG of every page and of every Learn step, then runs KVComp with
// Huffman coding and saves the Compression page's codec charts and its memory over decode
// steps, every chart tab of the Planner page, and the Eviction page zoomed in on one layer's
// needle. The screenshot mode neither reads nor writes the saved settings, so its pictures do
// not depend on the last session, and saves its runs into a temporary database, never the user's.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QIcon>
#include <QStringList>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTimer>

#include "common/app_settings.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "eviction/eviction_map_chart.h"
#include "eviction/eviction_policy_panel.h"
#include "eviction/eviction_view.h"
#include "kvlab/app/backends.h"
#include "kvlab/engine/core/process_memory.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"
#include "kvlab/store/runs_store.h"
#include "planner/planner_view.h"
#include "window/main_window.h"
#include "window/screenshots.h"

namespace {

constexpr const char* kVersion = "0.1.0";

constexpr const char* kUsage =
    "usage: kvlab-gui [--db PATH] [--no-settings | --reset-settings] [FILE...]\n"
    "       kvlab-gui --screenshot DIR [--screenshot-size WxH]\n"
    "\n"
    "The kvlab desktop lab: compress a KV cache with a method and see what it costs and keeps.\n"
    "\n"
    "FILE opens as File > Open does: KV tensors (.safetensors, .npy, .npz, or a folder of\n"
    ".npy files) become the Compression page's source; a Hugging Face config.json or a .gguf\n"
    "file is imported into the Planner. With several, the first that can be opened. Files can\n"
    "also be dropped on the window.\n"
    "\n"
    "options:\n"
    "  --db PATH          runs database (default: $KVLAB_DB, else\n"
    "                     $XDG_DATA_HOME/kvlab/runs.sqlite, else "
    "~/.local/share/kvlab/runs.sqlite)\n"
    "  --no-settings      neither read nor save the settings below for this session\n"
    "  --reset-settings   forget the saved settings, then start with the default layout\n"
    "  --screenshot DIR   in a temporary runs database (never yours), run the default\n"
    "                     compression (synthetic llama3-8b, 1024 tokens, kivi)\n"
    "                     and eviction (h2o 25% vs window 25%, 64 steps), save a PNG of every\n"
    "                     page, DIR/{compression,eviction,quality,planner,runs,learn}.png, and of\n"
    "                     every Learn step, DIR/learn-*.png; then run kvcomp + huffman and save\n"
    "                     DIR/compression-codec.png, DIR/compression-codec-ratio.png,\n"
    "                     DIR/compression-stream.png (memory over decode steps), each chart\n"
    "                     tab of the Planner, DIR/planner-{memory,context,frontier,roofline,\n"
    "                     advice}.png, and DIR/eviction-needle.png (one layer, zoomed on the\n"
    "                     needle), and exit.\n"
    "                     When the stories260K model is found ($KVLAB_MODELS_DIR, or\n"
    "                     shared/models above the program or the working folder) and the\n"
    "                     Quality page has no runs, quality.png first measures a few methods\n"
    "                     on it (saved as runs). The Runs page is shown with its two newest\n"
    "                     compression runs compared. Settings are neither read nor written.\n"
    "  --screenshot-size WxH  the window's size for the screenshots (default: the size where\n"
    "                     every page fits), e.g. 1280x720 or 1024x700 to see a laptop's screen\n"
    "  -h, --help         show this help\n"
    "  --version          show the version\n"
    "\n"
    "Settings: the window's size and position, the page shown and the recently opened files\n"
    "are kept between launches in ~/.config/kvlab/kvlab.conf (Help > About shows the file).\n"
    "\n"
    "Shortcuts: Ctrl+O open a file, Ctrl+R run the current page (Compression, Eviction,\n"
    "Quality), Esc cancel the run, Ctrl+E export the chart with the keyboard focus (else the\n"
    "page's first) as PNG, SVG or PDF, Ctrl+Shift+E export the table the same way as CSV or\n"
    "JSON, Ctrl+Z undo deleting a run (Ctrl+Shift+Z redo), Ctrl+1 ... Ctrl+6 show\n"
    "Compression, Eviction, Quality, Planner, Runs, Learn, Ctrl+Q quit. A right click on any\n"
    "chart or table offers the same export.\n"
    "\n"
    "Without a display (no DISPLAY or WAYLAND_DISPLAY, QT_QPA_PLATFORM unset) it renders\n"
    "offscreen and writes the screenshots to ./kvlab-screenshots.\n";

// Layers of the screenshot run: the full 32 of llama3-8b at 1024 tokens takes a few seconds
// on a laptop core, quick enough to show the real per-layer picture.
constexpr int kScreenshotLayers = 0;
constexpr int kScreenshotContext = 1024;

struct Options {
  std::optional<std::filesystem::path> db;
  std::optional<QString> screenshot_dir;
  std::optional<QSize> screenshot_size;
  bool no_settings = false;
  bool reset_settings = false;
  QStringList files;
};

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

// Parses before QApplication exists (the platform must be chosen first). Exits on --help and
// on bad arguments.
Options parse(int argc, char** argv) {
  Options o;
  bool only_files = false;  // after "--"
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (only_files || arg == "--") {
      if (only_files) o.files << QString::fromLocal8Bit(argv[i]);
      only_files = true;
      continue;
    }
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kvlab-gui: %s needs a value\n%s", argv[i], kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--version") {
      std::printf("kvlab-gui %s\n", kVersion);
      std::exit(0);
    } else if (arg == "--db") {
      o.db = value();
    } else if (arg == "--screenshot") {
      o.screenshot_dir = QString::fromLocal8Bit(value());
    } else if (arg == "--screenshot-size") {
      const char* text = value();
      int w = 0, h = 0;
      char end = 0;
      if (std::sscanf(text, "%dx%d%c", &w, &h, &end) != 2 || w < 320 || h < 240 || w > 10000 ||
          h > 10000) {
        std::fprintf(stderr,
                     "kvlab-gui: --screenshot-size '%s': expected WIDTHxHEIGHT in pixels, "
                     "e.g. 1280x720 (320x240 to 10000x10000)\n",
                     text);
        std::exit(2);
      }
      o.screenshot_size = QSize(w, h);
    } else if (arg == "--no-settings") {
      o.no_settings = true;
    } else if (arg == "--reset-settings") {
      o.reset_settings = true;
    } else if (arg.starts_with('-') && arg != "-") {
      std::fprintf(stderr, "kvlab-gui: unknown option '%s'\n%s", argv[i], kUsage);
      std::exit(2);
    } else {
      o.files << QString::fromLocal8Bit(argv[i]);
    }
  }
  if (o.no_settings && o.reset_settings) {
    std::fprintf(stderr, "kvlab-gui: --no-settings and --reset-settings exclude each other\n");
    std::exit(2);
  }
  if (o.screenshot_size && !o.screenshot_dir) {
    std::fprintf(stderr, "kvlab-gui: --screenshot-size needs --screenshot DIR\n");
    std::exit(2);
  }
  if (o.screenshot_dir && !o.files.isEmpty()) {
    std::fprintf(stderr, "kvlab-gui: --screenshot takes no FILE ('%s')\n",
                 o.files.front().toLocal8Bit().constData());
    std::exit(2);
  }
  return o;
}

bool save_window(kvlab::gui::MainWindow& window, const QString& dir, const char* name) {
  QApplication::processEvents();
  QApplication::processEvents();
  const QString path = QDir(dir).filePath(QString::fromLatin1(name));
  if (!window.grab().save(path)) {
    std::fprintf(stderr, "kvlab-gui: %s: cannot write the image\n", path.toLocal8Bit().constData());
    return false;
  }
  std::printf("kvlab-gui: wrote %s\n", path.toLocal8Bit().constData());
  return true;
}

// KVComp with Huffman coding on the same cache (reused): the Compression page with the code
// lengths tab, then with the ratio-by-codec tab.
int take_codec_screenshots(kvlab::gui::MainWindow& window, const QString& dir) {
  using namespace kvlab;
  auto& view = *window.compression_view();
  MethodConfig kvcomp;
  kvcomp.kind = MethodKind::KvComp;
  kvcomp.codec = CodecKind::Huffman;
  view.method_panel()->set_config(kvcomp);
  QElapsedTimer timer;
  timer.start();
  if (!view.run_and_wait()) {
    std::fprintf(stderr, "kvlab-gui: the kvcomp + huffman run failed: %s\n",
                 view.last_error().toLocal8Bit().constData());
    return 1;
  }
  std::printf("kvlab-gui: kvcomp + huffman run took %.2f s\n", timer.elapsed() / 1000.0);
  window.show_page(gui::Page::Compression);
  const std::pair<int, const char*> shots[] = {
      {gui::CompressionView::kCodeLengthTab, "compression-codec.png"},
      {gui::CompressionView::kCodecRatioTab, "compression-codec-ratio.png"},
      {gui::CompressionView::kStreamTab, "compression-stream.png"},
  };
  for (const auto& [tab, name] : shots) {
    view.lower_tabs()->setCurrentIndex(tab);
    if (!save_window(window, dir, name)) return 1;
  }
  view.lower_tabs()->setCurrentIndex(gui::CompressionView::kHistogramTab);
  return 0;
}

// The default eviction comparison on the same synthetic source: H2O at 25% of the context
// against a 25% sliding window, 64 decode steps.
bool run_default_eviction(kvlab::gui::MainWindow& window, const kvlab::SyntheticConfig& source) {
  using namespace kvlab;
  auto& view = *window.eviction_view();
  view.source_panel()->set_synthetic(source);
  EvictionConfig h2o;
  h2o.policy = EvictionPolicy::H2O;
  h2o.budget = Budget{0.25, true};
  h2o.steps = 64;
  EvictionConfig window_policy = h2o;
  window_policy.policy = EvictionPolicy::Window;
  view.policy_panel()->set_config(h2o);
  view.policy_panel()->set_compare(window_policy);
  QElapsedTimer timer;
  timer.start();
  if (!view.run_and_wait()) {
    std::fprintf(stderr, "kvlab-gui: the eviction run failed: %s\n",
                 view.last_error().toLocal8Bit().constData());
    return false;
  }
  std::printf("kvlab-gui: eviction run (h2o vs window, 64 steps) took %.2f s\n",
              timer.elapsed() / 1000.0);
  return true;
}

// One layer's numbers and curves, both maps zoomed on the last steps around the needle.
int take_eviction_needle_screenshot(kvlab::gui::MainWindow& window, const QString& dir) {
  using namespace kvlab;
  auto& view = *window.eviction_view();
  if (!view.model()->report()) return 1;
  window.show_page(gui::Page::Eviction);
  view.select(view.model()->report()->layers.size() / 2, 1);
  view.set_all_layers(false);
  QApplication::processEvents();
  if (const auto needle = view.model()->report()->config.needle) {
    view.map_chart()->xAxis->setRange(*needle - 60, *needle + 60);
    view.map_chart()->replot();
  }
  const bool ok = save_window(window, dir, "eviction-needle.png");
  view.select(0, 0);
  view.set_all_layers(true);
  return ok ? 0 : 1;
}

// Every chart tab of the Planner page (planner.png shows the first): the default scenario with
// a TPOT target of 30 ms, so the frontier shows the best choice under it.
int take_planner_screenshots(kvlab::gui::MainWindow& window, const QString& dir) {
  using namespace kvlab;
  auto& view = *window.planner_view();
  window.show_page(gui::Page::Planner);
  view.set_targets(0, 30);
  const char* names[] = {"planner-memory.png", "planner-context.png", "planner-frontier.png",
                         "planner-roofline.png", "planner-advice.png"};
  QTabWidget* tabs = view.chart_tabs();
  const int before = tabs->currentIndex();
  for (int i = 0; i < tabs->count() && i < static_cast<int>(std::size(names)); ++i) {
    tabs->setCurrentIndex(i);
    if (!save_window(window, dir, names[i])) return 1;
  }
  tabs->setCurrentIndex(before);
  view.set_targets(0, 0);
  return 0;
}

int take_screenshots(kvlab::gui::MainWindow& window, const QString& dir) {
  using namespace kvlab;
  SyntheticConfig source;
  source.preset = "llama3-8b";
  source.layers = kScreenshotLayers;
  source.context = kScreenshotContext;
  window.compression_view()->source_panel()->set_synthetic(source);
  window.compression_view()->method_panel()->set_config(MethodConfig{});  // kivi-2 G=32 R=128

  QElapsedTimer timer;
  timer.start();
  if (!window.compression_view()->run_and_wait()) {
    std::fprintf(stderr, "kvlab-gui: the screenshot run failed: %s\n",
                 window.compression_view()->last_error().toLocal8Bit().constData());
    return 1;
  }
  std::printf("kvlab-gui: default run (llama3-8b, %d tokens, kivi) took %.2f s\n",
              kScreenshotContext, timer.elapsed() / 1000.0);
  if (!run_default_eviction(window, source)) return 1;
  QString error;
  const QStringList files = kvlab::gui::save_page_screenshots(window, dir, &error);
  for (const QString& f : files) std::printf("kvlab-gui: wrote %s\n", f.toLocal8Bit().constData());
  if (!error.isEmpty()) {
    std::fprintf(stderr, "kvlab-gui: %s\n", error.toLocal8Bit().constData());
    return 1;
  }
  for (const QString& page : kvlab::gui::pages_wider_than_window(window)) {
    std::fprintf(stderr, "kvlab-gui: warning: at this size the page scrolls sideways (%s)\n",
                 page.toLocal8Bit().constData());
  }
  if (const int rc = take_codec_screenshots(window, dir); rc != 0) return rc;
  if (const int rc = take_planner_screenshots(window, dir); rc != 0) return rc;
  return take_eviction_needle_screenshot(window, dir);
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
  kvlab::release_large_buffers_when_freed();
  kvlab::register_backends();
  const bool no_display =
      !env_set("DISPLAY") && !env_set("WAYLAND_DISPLAY") && !env_set("QT_QPA_PLATFORM");
  if (no_display) {
    if (!options.screenshot_dir) options.screenshot_dir = QStringLiteral("kvlab-screenshots");
    std::fprintf(stderr,
                 "kvlab-gui: no display found (DISPLAY, WAYLAND_DISPLAY and QT_QPA_PLATFORM are "
                 "unset); rendering offscreen and saving screenshots to %s\n",
                 options.screenshot_dir->toLocal8Bit().constData());
    qputenv("QT_QPA_PLATFORM", "offscreen");
  }

  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("kvlab"));
  QApplication::setApplicationName(QStringLiteral("kvlab"));
  QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/kvlab.png")));
  QApplication::setApplicationVersion(QString::fromLatin1(kVersion));
  QGuiApplication::setDesktopFileName(QStringLiteral("kvlab"));  // kvlab.desktop: its icon

  // Screenshot mode saves its demo runs into a database of its own, deleted when it ends: never
  // into the user's ($KVLAB_DB, --db or the default one).
  QTemporaryDir screenshot_db;
  if (options.screenshot_dir && !screenshot_db.isValid()) {
    std::fprintf(stderr, "kvlab-gui: --screenshot: no temporary folder for its database: %s\n",
                 screenshot_db.errorString().toLocal8Bit().constData());
    return 1;
  }
  const std::filesystem::path db =
      options.screenshot_dir
          ? std::filesystem::path(
                screenshot_db.filePath(QStringLiteral("runs.sqlite")).toStdString())
          : options.db.value_or(kvlab::default_db_path());
  kvlab::gui::MainWindow window(db);
  if (options.screenshot_dir) {
    // The same pictures whatever the screen, or the size asked for (a laptop's 1280x720).
    window.resize(options.screenshot_size.value_or(window.preferred_size()));
    window.show();
    return take_screenshots(window, *options.screenshot_dir);
  }
  if (options.reset_settings) kvlab::gui::clear_settings();
  if (!options.no_settings) window.restore_settings();  // before show(): no visible jump
  window.show();
  QTimer::singleShot(0, &window, [&window, files = options.files] {
    window.open_latest_or_run_default();
    if (!files.isEmpty()) window.open_files(files);
  });
  try {
    return QApplication::exec();
  } catch (const std::exception& e) {
    // Whatever escaped the event loop ends the app with one line, never an abort.
    std::fprintf(stderr, "kvlab-gui: internal error: %s\n", kvlab::terminal_text(e.what()).c_str());
    return 1;
  }
}
