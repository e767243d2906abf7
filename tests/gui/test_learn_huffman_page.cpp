// Learn page (c), driven offscreen, against references computed here: the test's own
// quantization and counts, a priority-queue Huffman, the entropy, the engine's codebook; the
// merges, Step / Play / Pause / Reset, tooltips, the drawing and the link to the full view.
#include <qcustomplot.h>

#include <QAbstractButton>
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QPushButton>
#include <QTabBar>
#include <QTableWidget>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <numeric>
#include <queue>

#include "common/playback_controls.h"
#include "compression/code_length_chart.h"
#include "compression/compression_view.h"
#include "gui_test_support.h"
#include "kvlab/engine/quant/method.h"
#include "learn/learn_huffman_page.h"
#include "learn/learn_view.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

// The tree widget says why nothing happens, and draws a lone leaf, a pair and nothing.
TEST(HuffmanTreeWidget, SaysWhyNothingHappensAndDrawsSmallTrees) {
  const std::pair<int, std::uint64_t> two[] = {{3, 5}, {9, 2}};
  const HuffmanSteps pair = HuffmanSteps::build(two);
  std::vector<std::uint64_t> one(256, 0);
  one[7] = 1000;
  const HuffmanSteps lone = HuffmanSteps::from_counts(one, 24);
  HuffmanTreeWidget widget;
  widget.resize(600, 300);
  for (const auto& [steps, says] :
       {std::pair{lone, "nothing to merge"}, std::pair{pair, "One tree"},
        std::pair{HuffmanSteps::build({}), "No codes"}}) {
    widget.set_steps(steps);
    widget.set_merges(5);
    EXPECT_EQ(widget.merges(), steps.merge_count());
    EXPECT_TRUE(widget.message().contains(QString::fromLatin1(says)));
    EXPECT_FALSE(widget.grab().isNull());
  }
}

TEST(LearnHuffmanPage, StepPlayPauseReset) {
  LearnHuffmanPage page;
  page.show();
  auto* controls = page.findChild<PlaybackControls*>();
  ASSERT_NE(controls, nullptr);
  page.set_rel_scale(0.2);
  ASSERT_GE(page.model().step_count(), 3);
  for (int i = 0; i < 2; ++i) controls->step_button()->click();
  EXPECT_EQ(page.model().merge_step(), 2);
  gui_test::child<QPushButton>(controls, "reset")->click();
  EXPECT_EQ(page.model().merge_step(), 0);
  controls->play_button()->click();
  EXPECT_TRUE(page.is_playing());
  QElapsedTimer timer;
  timer.start();
  while (page.model().merge_step() < 1 && timer.elapsed() < 10'000) QApplication::processEvents();
  controls->play_button()->click();  // pauses
  EXPECT_FALSE(page.is_playing());
  const int paused_at = page.model().merge_step();
  EXPECT_GE(paused_at, 1);
  timer.restart();
  while (timer.elapsed() < 1'500) QApplication::processEvents();
  EXPECT_EQ(page.model().merge_step(), paused_at);  // nothing moves while paused
  page.play();                                      // on to the end, where it stops by itself
  timer.restart();
  while (page.is_playing() && timer.elapsed() < 30'000) QApplication::processEvents();
  EXPECT_FALSE(page.is_playing());
  EXPECT_EQ(page.model().merge_step(), page.model().step_count());
  EXPECT_FALSE(controls->step_button()->isEnabled());
  page.play();  // Play at the end starts over
  EXPECT_TRUE(page.is_playing());
  EXPECT_EQ(page.model().merge_step(), 0);
  page.set_role(TensorRole::Value);  // new settings pause (and start over)
  EXPECT_FALSE(page.is_playing());
}

TEST(LearnHuffmanPage, EveryControlAndReadingHasATooltip) {
  LearnHuffmanPage page;
  QString missing;
  for (QWidget* w : page.findChildren<QWidget*>()) {
    bool part = false;  // pieces Qt builds inside a composite widget
    for (QWidget* p = w->parentWidget(); p && p != &page; p = p->parentWidget()) {
      part |= qobject_cast<QComboBox*>(p) || qobject_cast<QAbstractItemView*>(p) ||
              qobject_cast<QTabBar*>(p);
    }
    auto* label = qobject_cast<QLabel*>(w);
    const bool control = qobject_cast<QAbstractButton*>(w) || qobject_cast<QComboBox*>(w);
    const bool reading = control || (label && label->buddy());
    if (!part && reading && w->toolTip().trimmed().isEmpty())
      missing += w->metaObject()->className() + QString(" ");
  }
  auto* table = page.findChild<QTableWidget*>();
  ASSERT_NE(table, nullptr);
  for (QWidget* w : std::initializer_list<QWidget*>{
           page.findChild<CodeLengthChart*>(), page.findChild<HuffmanTreeWidget*>(), table,
           page.findChild<QLabel*>(QStringLiteral("headline")),
           page.findChild<QLabel*>(QStringLiteral("tree_note")), page.full_view_button()}) {
    ASSERT_NE(w, nullptr);
    if (w->toolTip().trimmed().isEmpty()) missing += w->metaObject()->className() + QString(" ");
  }
  for (int i = 0; i < 5; ++i) {  // 4 columns, 5 rows
    if (i < 4 && table->horizontalHeaderItem(i)->toolTip().isEmpty()) missing += " column";
    if (table->verticalHeaderItem(i)->toolTip().isEmpty()) missing += " row";
  }
  EXPECT_TRUE(missing.isEmpty()) << "without a tooltip: " << missing.toStdString();
}

// In the main window at its default size: the page fits, the tree's nodes lie inside its widget
// and the leaves do not overlap (the grabs are kept in the test's folder to look at); the link
// runs the same layer and codebook in the Compression view.
TEST(LearnHuffmanPage, FitsTheWindowAndLinksToTheCompressionView) {
  const auto dir = gui_test::fresh_dir();
  MainWindow window(dir / "runs.sqlite");
  window.show();
  window.show_page(Page::Learn);
  LearnView* learn = window.learn_view();
  learn->show_index(learn->index_of(QStringLiteral("learn-huffman")));
  auto* page = qobject_cast<LearnHuffmanPage*>(learn->current_page());
  ASSERT_NE(page, nullptr);
  QApplication::processEvents();
  // Narrower than the window leaves it at 1400 px (beside the views' and steps' lists).
  EXPECT_LE(page->minimumSizeHint().width(), 1000);
  const auto* table = page->findChild<QTableWidget*>();
  ASSERT_NE(table, nullptr);
  EXPECT_LE(table->mapTo(page, QPoint(table->width(), 0)).x(), page->width());
  for (double rel : {0.1, 0.02}) {
    page->set_rel_scale(rel);
    for (int merges : {0, page->model().step_count() / 2, page->model().step_count()}) {
      while (page->model().merge_step() < merges) page->step();
      // A new tree's width reaches the scroll area over a few rounds of layout requests.
      const auto* tree = page->findChild<HuffmanTreeWidget*>();
      QApplication::processEvents();
      for (int round = 0; round < 10 && tree->width() < tree->minimumSizeHint().width(); ++round)
        QApplication::processEvents();
      ASSERT_GE(tree->height(), 200);
      const QRectF inside(0, 0, tree->width(), tree->height());
      for (int i = 0; i < page->model().tree().leaf_count() + merges; ++i) {
        EXPECT_TRUE(inside.contains(tree->node_position(i))) << i;
      }
      for (int i = 1; i < page->model().tree().leaf_count(); ++i) {
        EXPECT_GE(std::abs(tree->node_position(i).x() - tree->node_position(i - 1).x()), 36.0);
      }
      const QString name = QStringLiteral("learn-huffman-%1-%2.png").arg(rel).arg(merges);
      EXPECT_TRUE(window.grab().save(QString::fromStdString((dir / name.toStdString()).string())));
    }
  }
  page->set_rel_scale(0.2);
  page->set_role(TensorRole::Value);
  const LearnLink link = page->link();
  EXPECT_EQ(link.target, LearnLink::Target::Compression);
  ASSERT_TRUE(link.source && link.method);
  EXPECT_EQ(link.source->preset, "llama3-8b");
  EXPECT_EQ(link.source->layers, 1);
  EXPECT_EQ(link.source->context, 256);
  EXPECT_EQ(link.method->kind, MethodKind::KvComp);
  EXPECT_EQ(link.method->rel_scale, 0.2);
  EXPECT_TRUE(link.method->codec == CodecKind::Huffman);
  page->full_view_button()->click();
  EXPECT_EQ(window.current_page(), Page::Compression);
  ASSERT_TRUE(window.compression_view()->wait_until_done(120'000));
  const auto& report = window.compression_view()->model()->report();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->method, "kvcomp");
  EXPECT_DOUBLE_EQ(report->config.rel_scale, 0.2);
  EXPECT_TRUE(report->config.codec == CodecKind::Huffman);
  ASSERT_EQ(report->layers.size(), 1u);
  // The full view's histogram and codebook of the values are the page's.
  const LayerReport& layer = report->layers[0];
  ASSERT_FALSE(layer.value_histograms.empty());
  const auto& counts = page->model().histogram();
  EXPECT_EQ(layer.value_histograms[0].counts,
            std::vector<std::uint64_t>(counts.begin(), counts.end()));
  // At rel 0.2 every code fits 4 bits and the full view codes pairs of codes where that is
  // smaller; its mean bits per code then stay between the entropy and the page's code-by-code
  // engine book.
  const auto& lengths = page->model().engine_codebook().lengths();
  if (!layer.value_code_pairs) {
    EXPECT_EQ(layer.value_code_lengths, std::vector<std::uint8_t>(lengths.begin(), lengths.end()));
  }
  ASSERT_EQ(layer.value_code_bits.size(), 256u);
  double bits = 0;
  for (int v = 0; v < 256; ++v) bits += static_cast<double>(counts[v]) * layer.value_code_bits[v];
  bits /= static_cast<double>(page->model().code_count());
  EXPECT_LE(bits, page->model().bits().engine + 1e-9);
  EXPECT_GE(bits, 0.98 * page->model().bits().entropy);
  EXPECT_NEAR(bits,
              8.0 * static_cast<double>(layer.value_codec.payload_bytes) /
                  static_cast<double>(page->model().code_count()),
              0.01);
}

}  // namespace
}  // namespace kvlab::gui
