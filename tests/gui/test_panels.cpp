// The parts a person sets up before a run: method parameters shown only where they matter, the
// source panel's spec, and the window's pages.
#include <gtest/gtest.h>

#include <cstdio>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QImage>
#include <QLabel>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QScrollBar>
#include <QSpinBox>
#include <QTableWidget>
#include <QTest>
#include <QVBoxLayout>
#include <QWheelEvent>

#include "common/run_controller.h"
#include "common/run_shell.h"
#include "common/source_panel.h"
#include "common/stale_mark.h"
#include "compression/bytes_chart.h"
#include "compression/compression_view.h"
#include "compression/histogram_chart.h"
#include "compression/histogram_panel.h"
#include "compression/layer_chart.h"
#include "compression/method_panel.h"
#include "eviction/eviction_view.h"
#include "gui_test_support.h"
#include "kvlab/engine/io/report_json.h"
#include "kvlab/engine/quant/method_json.h"
#include "kvlab/store/runs_store.h"
#include "learn/learn_view.h"
#include "planner/planner_view.h"
#include "quality/quality_chart.h"
#include "runs/runs_view.h"
#include "stepping_runner.h"
#include "window/main_window.h"
#include "window/screenshots.h"

namespace kvlab::gui {
namespace {

using gui_test::child;
using gui_test::field_shown;

struct Visible {
  bool bits, group, residual, per_head, int8_tokens, old_bits, block, rel_scale;
};

Visible visible(const MethodPanel& p) {
  return {field_shown(p, "bits"),       field_shown(p, "group_size"),  field_shown(p, "residual"),
          field_shown(p, "per_head"),   field_shown(p, "int8_tokens"), field_shown(p, "old_bits"),
          field_shown(p, "block_size"), field_shown(p, "rel_scale")};
}

TEST(MethodPanel, ShowsOnlyTheFieldsOfTheMethod) {
  MethodPanel panel;
  panel.show();
  const auto pick = [&](const char* id) {
    child<QComboBox>(&panel, "method")->setCurrentText(QString::fromLatin1(id));
    return visible(panel);
  };
  auto v = pick("kivi");
  EXPECT_TRUE(v.bits && v.group && v.residual);
  EXPECT_FALSE(v.per_head || v.int8_tokens || v.old_bits || v.block || v.rel_scale);
  v = pick("int8");
  EXPECT_FALSE(v.bits || v.group || v.residual || v.per_head || v.int8_tokens || v.old_bits ||
               v.block || v.rel_scale);
  v = pick("fp8-e4m3");
  EXPECT_TRUE(v.per_head);
  EXPECT_FALSE(v.bits || v.group || v.residual || v.block);
  v = pick("tiered");
  EXPECT_TRUE(v.group && v.residual && v.int8_tokens && v.old_bits);
  EXPECT_FALSE(v.bits || v.per_head || v.block || v.rel_scale);
  v = pick("kvcomp");
  EXPECT_TRUE(v.block && v.rel_scale);
  EXPECT_FALSE(v.bits || v.group || v.residual || v.per_head || v.int8_tokens);
}

TEST(MethodPanel, ConfigRoundTrips) {
  MethodPanel panel;
  EXPECT_EQ(child<QComboBox>(&panel, "method")->count(), static_cast<int>(method_ids().size()));
  MethodConfig c;
  c.kind = MethodKind::KvComp;
  c.block_size = 128;
  c.rel_scale = 0.02;
  panel.set_config(c);
  const MethodConfig back = panel.config();
  EXPECT_EQ(back.kind, MethodKind::KvComp);
  EXPECT_EQ(back.block_size, 128);
  EXPECT_DOUBLE_EQ(back.rel_scale, 0.02);
  EXPECT_EQ(method_label(back), method_label(c));

  c = gui_test::tiered_method();
  c.old_bits = 2;
  panel.set_config(c);
  EXPECT_EQ(method_params_json(panel.config()), method_params_json(c));
}

TEST(SourcePanel, SpecFollowsTheControls) {
  SourcePanel panel;
  EXPECT_EQ(panel.spec().kind, SourceSpec::Kind::Synthetic);
  EXPECT_EQ(panel.spec().synthetic.preset, "llama3-8b");
  EXPECT_EQ(panel.spec().synthetic.context, 1024);  // the GUI's snappy default
  EXPECT_EQ(panel.spec().synthetic.layers, 0);
  EXPECT_EQ(child<QComboBox>(&panel, "preset")->count(),
            static_cast<int>(synthetic_presets().size()));

  panel.set_synthetic(gui_test::tiny_source());
  const SourceSpec s = panel.spec();
  EXPECT_EQ(s.synthetic.preset, "tiny");
  EXPECT_EQ(s.synthetic.context, 96);
  EXPECT_EQ(s.synthetic.seed, 7u);
  const std::string key = s.cache_key();
  child<QSpinBox>(&panel, "context")->setValue(97);
  EXPECT_NE(panel.spec().cache_key(), key);

  panel.set_file(QStringLiteral("/tmp/some.npz"));
  EXPECT_EQ(panel.spec().kind, SourceSpec::Kind::File);
  EXPECT_EQ(panel.spec().file, QStringLiteral("/tmp/some.npz"));
}

// Issue 43, item 8: the bytes chart's labels cannot run together ("203.9 KiB203.9 KiB",
// "zero-pointsresidual"): the value over its unit, the hyphenated name over two lines; the
// per-layer chart's two panes are tall enough for their axis titles and ticks.
TEST(BytesChart, LabelsAreNarrowEnoughNotToRunTogether) {
  CompressionView view(nullptr);
  view.resize(1024, 700);
  view.show();
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  ASSERT_TRUE(view.run_and_wait());
  BytesChart* chart = child<BytesChart>(&view, "bytes");
  auto ticker = qSharedPointerDynamicCast<QCPAxisTickerText>(chart->xAxis->ticker());
  ASSERT_TRUE(ticker);
  for (const QString& label : ticker->ticks()) {
    EXPECT_FALSE(label.contains(QStringLiteral("zero-points"))) << label.toStdString();
  }
  // The labels over the bars, drawn: no two overlap.
  chart->replot();
  std::vector<QRectF> boxes;
  for (int i = 0; i < chart->itemCount(); ++i) {
    if (auto* text = qobject_cast<QCPItemText*>(chart->item(i))) {
      EXPECT_TRUE(text->text().contains(QLatin1Char('\n'))) << text->text().toStdString();
      const QPointF at = text->position->pixelPosition();
      const QFontMetricsF fm(text->font());
      const QRectF box = fm.boundingRect(QRectF(), Qt::AlignHCenter, text->text());
      boxes.push_back(box.translated(at.x() - box.width() / 2, at.y() - box.height()));
    }
  }
  ASSERT_EQ(boxes.size(), 5u);
  for (std::size_t a = 0; a < boxes.size(); ++a) {
    for (std::size_t b = a + 1; b < boxes.size(); ++b) {
      EXPECT_FALSE(boxes[a].intersects(boxes[b])) << a << " and " << b;
    }
  }
  EXPECT_GE(child<LayerChart>(&view, "layers")->minimumHeight(), 400);
}

// Issue 43, item 9: long work says how long it has left, and a cancel says so until it is done.
// Issue 45: one controller holds that lifecycle for every page; the shell only shows it.
TEST(RunShell, EstimatesTheTimeLeftAndKeepsSayingCancelling) {
  EXPECT_EQ(RunController::time_left(50, 1000), QString()) << "too early to say";
  EXPECT_EQ(RunController::time_left(1, 60'000), QString()) << "too little done to say";
  EXPECT_EQ(RunController::time_left(25, 10'000), QStringLiteral("about 30 s left"));
  EXPECT_EQ(RunController::time_left(10, 60'000), QStringLiteral("about 9 min left"));
  SteppingRunner runner;
  RunController controller(&runner);
  RunShell shell({}, &controller);
  shell.show();
  ASSERT_TRUE(controller.start([&] { return runner.start(); }, QStringLiteral("starting")));
  EXPECT_FALSE(controller.start([&] { return runner.start(); }, QStringLiteral("again")))
      << "one run at a time";
  auto* stage = child<QLabel>(&shell, "stage");
  EXPECT_EQ(stage->text(), QStringLiteral("starting"));
  EXPECT_FALSE(shell.run_button()->isEnabled());
  EXPECT_TRUE(shell.cancel_button()->isEnabled());
  ASSERT_TRUE(
      QTest::qWaitFor([&] { return stage->text().startsWith(QStringLiteral("step")); }, 5000));
  QTest::mouseClick(shell.cancel_button(), Qt::LeftButton);
  EXPECT_TRUE(controller.cancelling());
  EXPECT_EQ(stage->text(), QStringLiteral("Cancelling…"));
  // The job's completion names no outcome: the controller ends the run as cancelled.
  ASSERT_TRUE(controller.wait_until_done(5000));
  EXPECT_FALSE(controller.running());
  EXPECT_FALSE(controller.last_ok());
  EXPECT_TRUE(shell.run_button()->isEnabled());
  EXPECT_FALSE(shell.cancel_button()->isEnabled());
  EXPECT_EQ(shell.progress_bar()->value(), 0);
  ASSERT_TRUE(controller.start([&] { return runner.start(); }, QStringLiteral("again")));
  EXPECT_EQ(stage->text(), QStringLiteral("again")) << "no stale Cancelling…";
  controller.cancel();
  ASSERT_TRUE(controller.wait_until_done(5000));
}

// Issue 43, item 10: the wheel over a chart scrolls the page it sits in; Ctrl + wheel zooms it.
TEST(Charts, TheWheelScrollsThePageAndCtrlWheelZooms) {
  QScrollArea area;
  auto* page = new QWidget;
  auto* layout = new QVBoxLayout(page);
  auto* chart = new QualityChart;
  chart->setMinimumHeight(300);
  layout->addWidget(chart);
  auto* filler = new QWidget;
  filler->setMinimumHeight(2000);
  layout->addWidget(filler);
  area.setWidget(page);
  area.setWidgetResizable(true);
  area.resize(500, 400);
  area.show();
  QApplication::processEvents();
  const QCPRange before = chart->xAxis->range();
  const auto wheel = [&](Qt::KeyboardModifiers modifiers) {
    const QPointF at(chart->width() / 2.0, chart->height() / 2.0);
    QWheelEvent e(at, chart->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton, modifiers,
                  Qt::NoScrollPhase, false);
    QApplication::sendEvent(chart, &e);
  };
  wheel(Qt::NoModifier);
  EXPECT_GT(area.verticalScrollBar()->value(), 0) << "the page scrolled";
  EXPECT_EQ(chart->xAxis->range(), before) << "the chart did not zoom";
  const int scrolled = area.verticalScrollBar()->value();
  wheel(Qt::ControlModifier);
  EXPECT_EQ(area.verticalScrollBar()->value(), scrolled);
  EXPECT_NE(chart->xAxis->range(), before) << "Ctrl + wheel zooms";
}

// Issue 43, item 10: on a short window Learn's list of steps and Previous / Next stay in sight;
// the step scrolls under them.
TEST(MainWindow, LearnKeepsItsStepsAndButtonsInSightOnAShortWindow) {
  MainWindow window(gui_test::fresh_dir() / "runs.sqlite");
  window.resize(1024, 700);
  window.show();
  window.show_page(Page::Learn);
  QApplication::processEvents();
  for (int step = 0; step < window.learn_view()->page_count(); ++step) {
    window.learn_view()->show_index(step);
    QApplication::processEvents();
    auto* next = window.learn_view()->findChild<QPushButton*>(QStringLiteral("next"));
    ASSERT_NE(next, nullptr);
    const QPoint bottom = next->mapTo(&window, QPoint(0, next->height()));
    EXPECT_LE(bottom.y(), window.height()) << "step " << step << ": Next is below the window";
    EXPECT_GE(next->mapTo(&window, QPoint(0, 0)).y(), 0) << "step " << step;
  }
}

TEST(HistogramPanel, PickersFollowTheData) {
  HistogramPanel panel;
  LayerHistograms l0{
      0,
      {{QStringLiteral("int8 tier"), 8, std::vector<std::uint64_t>(256, 1)},
       {QStringLiteral("int4 tier"), 4, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}},
      {{QStringLiteral("int2"), 2, {5, 6, 7, 8}}}};
  panel.set_histograms({l0});
  panel.select(0, TensorPick::Keys, 1);
  const auto bars = [&] { return child<QCPBars>(child<HistogramChart>(&panel, "chart"), "bars"); };
  auto* entropy = child<QLabel>(&panel, "entropy");
  EXPECT_EQ(bars()->data()->size(), 16);
  EXPECT_EQ(bars()->data()->at(15)->mainValue(), 16.0);
  EXPECT_TRUE(entropy->text().contains(QStringLiteral("of 4 bits")));
  EXPECT_TRUE(entropy->text().contains(QStringLiteral("16 of 16 codes used")));
  panel.select(5, TensorPick::Values, 3);  // clamped to what exists
  EXPECT_EQ(panel.selected_layer(), 0);
  EXPECT_EQ(panel.selected_histogram(), 0);
  EXPECT_EQ(bars()->data()->size(), 4);
  panel.clear();
  EXPECT_EQ(bars()->data()->size(), 0);
}

TEST(MainWindow, PagesTitleAndScreenshots) {
  const auto dir = gui_test::fresh_dir();
  MainWindow window(dir / "runs.sqlite");
  window.show();
  EXPECT_EQ(window.windowTitle(), QStringLiteral("kvlab"));
  auto* nav = window.findChild<QListWidget*>();
  ASSERT_NE(nav, nullptr);
  ASSERT_EQ(nav->count(), kPageCount);
  EXPECT_EQ(nav->item(0)->text(), QStringLiteral("Compression"));
  EXPECT_EQ(nav->item(static_cast<int>(Page::Runs))->text(), QStringLiteral("Runs"));
  EXPECT_NE(window.eviction_view(), nullptr);
  EXPECT_EQ(window.page_widget(Page::Eviction), window.eviction_view());
  EXPECT_EQ(window.page_widget(Page::Planner), static_cast<QWidget*>(window.planner_view()));
  EXPECT_EQ(window.page_widget(Page::Learn), static_cast<QWidget*>(window.learn_view()));
  nav->setCurrentRow(static_cast<int>(Page::Runs));
  EXPECT_EQ(window.current_page(), Page::Runs);

  QString error;
  const QStringList files =
      save_page_screenshots(window, QString::fromStdString((dir / "shots").string()), &error);
  EXPECT_TRUE(error.isEmpty()) << error.toStdString();
  // The pages, the Compression page's Key channels tab, the Eviction page's press tabs (four),
  // the Quality page's retrieval and generate tabs, the Learn steps.
  ASSERT_EQ(files.size(), kPageCount + 1 + 4 + 2 + window.learn_view()->page_count());
  for (const QString& f : files) {
    const QImage image(f);
    EXPECT_FALSE(image.isNull()) << f.toStdString();
    EXPECT_GE(image.width(), 800) << f.toStdString();
  }
  EXPECT_TRUE(QFileInfo(files[0]).fileName() == QStringLiteral("compression.png"));
  EXPECT_EQ(window.current_page(), Page::Runs);  // put back where it was
}

TEST(MainWindow, UnopenableStoreStillWorks) {
  const auto dir = gui_test::fresh_dir();
  const auto not_a_db = dir / "not-a-db.sqlite";
  {
    std::FILE* f = std::fopen(not_a_db.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("this is not a SQLite database, just some text long enough to be a header\n", f);
    std::fclose(f);
  }
  MainWindow window(not_a_db);
  EXPECT_FALSE(window.store_error().isEmpty());
  EXPECT_EQ(window.runs_view()->row_count(), 0);
}

TEST(MainWindow, StartShowsTheNewestRunOrStartsTheDefault) {
  const auto db = gui_test::fresh_dir() / "runs.sqlite";
  {  // First launch: nothing stored, so the default run starts in the background.
    MainWindow window(db);
    ASSERT_TRUE(window.open_latest_or_run_default());
    EXPECT_TRUE(window.compression_view()->is_running());
    window.compression_view()->cancel();
    window.compression_view()->wait_until_done(60 * 1000);
  }
  // A stored run is reopened from the store: nothing is recomputed or saved again.
  const CompressionReport report =
      gui_test::engine_report(gui_test::tiny_source(), gui_test::tiered_method());
  std::int64_t id = 0;
  {
    auto store = RunsStore::open(db);
    ASSERT_TRUE(store.ok()) << store.message();
    auto saved = store->save_run(NewRun{"compression",
                                        report.source,
                                        report.method,
                                        report.method_label,
                                        method_params_json(report.config),
                                        report_to_json(report),
                                        {{"histograms", histograms_to_json(report)}},
                                        {}});
    ASSERT_TRUE(saved.ok()) << saved.message();
    id = *saved;
  }
  MainWindow window(db);
  window.show_page(Page::Runs);
  ASSERT_TRUE(window.open_latest_or_run_default());
  EXPECT_FALSE(window.compression_view()->is_running());
  EXPECT_EQ(window.current_page(), Page::Compression);
  auto store = RunsStore::open(db);
  ASSERT_TRUE(store.ok());
  auto runs = store->list_runs();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().id, id);
  // The controls are the stored run's settings (issue 43: they were the defaults beside run #20's
  // results, with no stale mark), so the results are not stale.
  CompressionView& view = *window.compression_view();
  const SourceSpec spec = view.source_panel()->spec();
  EXPECT_EQ(spec.kind, SourceSpec::Kind::Synthetic);
  EXPECT_EQ(spec.synthetic.preset, "tiny");
  EXPECT_EQ(spec.synthetic.context, 96);
  EXPECT_EQ(method_params_json(view.method_panel()->config()),
            method_params_json(gui_test::tiered_method()));
  EXPECT_FALSE(child<StaleMark>(&view, "stale")->is_stale());
  child<QSpinBox>(view.method_panel(), "group_size")->setValue(16);
  EXPECT_TRUE(child<StaleMark>(&view, "stale")->is_stale());
}

// A window smaller than a laptop's: the window takes the size it is given, and a page that needs
// more room scrolls instead of pushing the window wider than the screen.
TEST(MainWindow, PagesScrollInASmallWindow) {
  MainWindow window(gui_test::fresh_dir() / "runs.sqlite");
  const QSize wanted = window.preferred_size();
  EXPECT_GE(wanted.width(), window.planner_view()->minimumSizeHint().width());
  window.show();
  window.resize(800, 560);
  window.show_page(Page::Planner);
  QApplication::processEvents();
  EXPECT_EQ(window.width(), 800);
  EXPECT_EQ(window.height(), 560);
  auto* scroll = qobject_cast<QScrollArea*>(window.planner_view()->parentWidget()->parentWidget());
  ASSERT_NE(scroll, nullptr);
  EXPECT_TRUE(scroll->isVisible());
  EXPECT_GT(scroll->horizontalScrollBar()->maximum(), 0);  // the planner needs about 850 px
  // The page keeps its own minimum: nothing inside it is squeezed below what it needs.
  EXPECT_GE(window.planner_view()->width(), window.planner_view()->minimumSizeHint().width());
  window.resize(wanted);
  QApplication::processEvents();
  EXPECT_EQ(scroll->horizontalScrollBar()->maximum(), 0);
}

}  // namespace
}  // namespace kvlab::gui
