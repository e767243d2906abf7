// kvlab-gui [--db PATH] [--screenshot DIR]: the desktop lab. With --screenshot it runs the
// default compression (synthetic llama3-8b, 1024 tokens, KIVI) and saves a PNG of every page,
// then runs KVComp with Huffman coding and saves the Compression page's codec charts and its
// memory over decode steps.
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
#include <QTabWidget>
#include <QTimer>

#include "kvlab/engine/method.h"
#include "kvlab/engine/synthetic.h"
#include "kvlab/gui/compression_view.h"
#include "kvlab/gui/main_window.h"
#include "kvlab/gui/method_panel.h"
#include "kvlab/gui/screenshots.h"
#include "kvlab/gui/source_panel.h"
#include "kvlab/store/runs_store.h"

namespace {

constexpr const char* kUsage =
    "usage: kvlab-gui [--db PATH] [--screenshot DIR]\n"
    "\n"
    "The kvlab desktop lab: compress a KV cache with a method and see what it costs and keeps.\n"
    "\n"
    "options:\n"
    "  --db PATH          runs database (default: $KVLAB_DB, else\n"
    "                     $XDG_DATA_HOME/kvlab/runs.sqlite, else "
    "~/.local/share/kvlab/runs.sqlite)\n"
    "  --screenshot DIR   run the default compression (synthetic llama3-8b, 1024 tokens, kivi),\n"
    "                     save DIR/{compression,eviction,planner,runs,learn}.png, then run\n"
    "                     kvcomp + huffman and save DIR/compression-codec{,-ratio}.png and\n"
    "                     DIR/compression-stream.png (memory over decode steps), and exit\n"
    "  -h, --help         show this help\n"
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
};

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v && *v;
}

// Parses before QApplication exists (the platform must be chosen first). Exits on --help and
// on bad arguments.
Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
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
    } else if (arg == "--db") {
      o.db = value();
    } else if (arg == "--screenshot") {
      o.screenshot_dir = QString::fromLocal8Bit(value());
    } else {
      std::fprintf(stderr, "kvlab-gui: unknown argument '%s'\n%s", argv[i], kUsage);
      std::exit(2);
    }
  }
  return o;
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
    QApplication::processEvents();
    QApplication::processEvents();
    const QString path = QDir(dir).filePath(QString::fromLatin1(name));
    if (!window.grab().save(path)) {
      std::fprintf(stderr, "kvlab-gui: %s: cannot write the image\n",
                   path.toLocal8Bit().constData());
      return 1;
    }
    std::printf("kvlab-gui: wrote %s\n", path.toLocal8Bit().constData());
  }
  view.lower_tabs()->setCurrentIndex(gui::CompressionView::kHistogramTab);
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
  QString error;
  const QStringList files = kvlab::gui::save_page_screenshots(window, dir, &error);
  for (const QString& f : files) std::printf("kvlab-gui: wrote %s\n", f.toLocal8Bit().constData());
  if (!error.isEmpty()) {
    std::fprintf(stderr, "kvlab-gui: %s\n", error.toLocal8Bit().constData());
    return 1;
  }
  return take_codec_screenshots(window, dir);
}

}  // namespace

int main(int argc, char** argv) {
  Options options = parse(argc, argv);
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
  QApplication::setApplicationName(QStringLiteral("kvlab"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

  kvlab::gui::MainWindow window(options.db.value_or(kvlab::default_db_path()));
  window.show();
  if (options.screenshot_dir) return take_screenshots(window, *options.screenshot_dir);
  QTimer::singleShot(0, &window, [&window] { window.open_latest_or_run_default(); });
  return QApplication::exec();
}
