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

#include "common/gui_format.h"
#include "compression/code_length_chart.h"
#include "compression/compression_view.h"
#include "gui_test_support.h"
#include "kvlab/engine/quant/method.h"
#include "learn/learn_huffman_page.h"
#include "learn/learn_view.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

constexpr double kRelScales[] = {0.3, 0.1, 0.05, 0.02};

// The codes of one tensor of the page's layer, quantized here with the engine's KVComp quantizer.
std::vector<std::uint64_t> own_counts(const LearnHuffmanPage& page) {
  auto cache = generate_synthetic(page.source());
  EXPECT_TRUE(cache.ok()) << cache.message();
  const MethodConfig m{.kind = MethodKind::KvComp, .rel_scale = page.rel_scale(), .codec = {}};
  const LayerKv& layer = cache->layers.front();
  const Tensor& t = page.role() == TensorRole::Key ? layer.key : layer.value;
  auto codes = (*make_quantizer(m))->quantize(t.view(), page.role());
  EXPECT_TRUE(codes.ok()) << codes.message();
  std::vector<std::uint64_t> counts(256, 0);
  for (std::uint8_t c : codes->codes) ++counts[c];
  return counts;
}

// Textbook Huffman: the total bits of the optimal code is the sum of the merged weights.
struct Reference {
  std::uint64_t total_bits = 0;
  int max_length = 0;
};

Reference reference_huffman(std::vector<std::uint64_t> weights, std::uint64_t escape = 0) {
  if (escape > 0) weights.push_back(escape);
  std::erase(weights, 0u);
  if (weights.size() == 1) return {weights[0], 1};
  using Item = std::pair<std::uint64_t, int>;  // weight, height of the subtree
  std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
  for (auto w : weights) queue.push({w, 0});
  Reference r;
  while (queue.size() > 1) {
    const auto [wa, ha] = queue.top();
    queue.pop();
    const auto [wb, hb] = queue.top();
    queue.pop();
    r.total_bits += wa + wb;
    queue.push({wa + wb, 1 + std::max(ha, hb)});
  }
  // The root's height is this tree's longest code word: when it is within the engine's 12-bit
  // limit, an optimal code fits the limit, so the limited optimum is the unlimited one.
  r.max_length = queue.top().second;
  return r;
}

int occurring(const std::vector<std::uint64_t>& counts) {
  return static_cast<int>(std::count_if(counts.begin(), counts.end(), [](auto c) { return c; }));
}

double entropy(const std::vector<std::uint64_t>& counts) {
  const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
  double h = 0;
  for (auto c : counts) h -= c > 0 ? (c / n) * std::log2(c / n) : 0.0;
  return h;
}

// For keys and values at coarse to fine steps: the histogram, the chart, the page's code, the
// engine's codebook and the table against references computed here.
TEST(LearnHuffmanPage, NumbersEqualIndependentReferences) {
  LearnHuffmanPage page;
  ASSERT_TRUE(page.error_text().isEmpty()) << page.error_text().toStdString();
  int compared_with_engine = 0;
  for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    for (double rel : kRelScales) {
      SCOPED_TRACE(testing::Message() << role_name(role) << " rel " << rel);
      page.set_role(role);
      page.set_rel_scale(rel);
      const auto counts = own_counts(page);
      CodeCounts histogram{};  // the engine's codebook for it, built here (escape of weight 1)
      std::copy(counts.begin(), counts.end(), histogram.begin());
      auto book = HuffmanCodebook::from_histogram(histogram);
      ASSERT_TRUE(book.ok()) << book.message();
      std::uint64_t total = 0, page_total = 0, engine_total = 0, lightest = UINT64_MAX;
      double kraft = 0;
      int largest = 0, page_max = 0;
      for (int v = 0; v < 256; ++v) {
        EXPECT_EQ(page.histogram()[v], counts[v]) << v;
        const int len = page.lengths()[static_cast<std::size_t>(v)];
        EXPECT_EQ(len > 0, counts[v] > 0) << v;
        if (counts[v] == 0) continue;
        total += counts[v];
        page_total += counts[v] * len;
        engine_total += counts[v] * book->length(v);
        kraft += std::ldexp(1.0, -len);
        lightest = std::min(lightest, counts[v]);
        largest = v;
        page_max = std::max(page_max, len);
      }
      EXPECT_EQ(page.code_count(), total);
      EXPECT_EQ(total, 256u * 8 * 128);  // tokens × KV heads × head_dim
      EXPECT_EQ(page.distinct_codes(), occurring(counts));
      // Codes run 0..round(1 / rel): the widest value is round((max - min) / step).
      EXPECT_LE(largest, std::lround(1 / rel));
      // The chart: one bar per code that occurs, of its count, and its length.
      const auto* bars = page.chart()->count_bars()->data().data();
      const auto* lengths = page.chart()->length_graph()->data().data();
      ASSERT_EQ(bars->size(), occurring(counts));
      ASSERT_EQ(lengths->size(), bars->size());
      for (int i = 0; i < bars->size(); ++i) {
        const auto v = static_cast<std::size_t>(bars->at(i)->key);
        EXPECT_EQ(bars->at(i)->value, counts[v]);
        EXPECT_EQ(lengths->at(i)->value, page.lengths()[v]);
      }
      const double n = static_cast<double>(total);
      const Reference ref = reference_huffman(counts);
      EXPECT_EQ(page_total, ref.total_bits);  // optimal, as the textbook algorithm
      EXPECT_DOUBLE_EQ(kraft, 1.0);           // a full binary tree
      EXPECT_NEAR(page.bits().huffman, ref.total_bits / n, 1e-12);
      const double h = entropy(counts);
      EXPECT_NEAR(page.bits().entropy, h, 1e-9);
      EXPECT_GE(page.bits().huffman, h - 1e-12);
      EXPECT_LT(page.bits().huffman, h + 1);
      EXPECT_NEAR(page.bits().engine, engine_total / n, 1e-12);
      EXPECT_EQ(page.engine_codebook().lengths(), book->lengths());
      EXPECT_GE(engine_total, page_total);  // the page's code is optimal without the escape
      const Reference ref_escape = reference_huffman(counts, 1);
      const std::uint64_t engine_with_escape = engine_total + book->length(256);
      EXPECT_GE(engine_with_escape, ref_escape.total_bits);
      if (ref_escape.max_length <= HuffmanCodebook::kMaxCodeLength) {
        // No limit binds: both optimal, the engine's over the alphabet plus the escape; and
        // splitting the lightest leaf bounds what the escape costs the real codes.
        EXPECT_EQ(engine_with_escape, ref_escape.total_bits);
        EXPECT_LE(engine_total, page_total + lightest + page_max + 1);
        ++compared_with_engine;
      }
      // The table shows the same numbers, and the savings follow from them.
      const int width = std::max(1, static_cast<int>(std::bit_width(unsigned(largest))));
      EXPECT_EQ(page.bits().fixed_width, width);
      EXPECT_EQ(page.table()->verticalHeaderItem(1)->text(), QString("%1-bit fixed").arg(width));
      EXPECT_EQ(page.table()->item(2, 0)->text(), QString::number(ref.total_bits / n, 'f', 3));
      EXPECT_EQ(page.table()->item(0, 1)->text(), format_byte_count(n));  // 8 bits a code
      const QString saved = format_percent(1 - ref.total_bits / n / 8);
      EXPECT_EQ(page.table()->item(2, 2)->text(),
                saved + "\n" + format_byte_count(n - ref.total_bits / 8.0));
      EXPECT_TRUE(page.headline_label()->text().contains(saved));
    }
  }
  EXPECT_GE(compared_with_engine, 4);
}

TEST(LearnHuffmanPage, MergesShrinkTheForestAndKeepItsWeight) {
  LearnHuffmanPage page;
  page.set_rel_scale(0.1);
  const auto counts = own_counts(page);
  const int distinct = occurring(counts);
  ASSERT_LE(distinct, LearnHuffmanPage::kMaxTreeLeaves);
  EXPECT_EQ(page.other_codes(), 0);
  ASSERT_EQ(page.tree().leaf_count(), distinct);
  ASSERT_EQ(page.step_count(), distinct - 1);
  EXPECT_EQ(page.merge_step(), 0);
  const auto& nodes = page.tree().nodes();
  const auto weights_of = [&](const std::vector<int>& roots) {
    std::vector<std::uint64_t> w;
    for (int r : roots) w.push_back(nodes.at(r).weight);
    std::sort(w.begin(), w.end());
    return w;
  };
  std::vector<int> before = page.tree().roots_after(0);
  for (int k = 1; k <= page.step_count(); ++k) {
    page.step();
    ASSERT_EQ(page.merge_step(), k);
    EXPECT_EQ(page.tree_widget()->merges(), k);
    const std::vector<int> after = page.tree().roots_after(k);
    EXPECT_EQ(after.size() + 1, before.size());
    const auto w = weights_of(after);
    EXPECT_EQ(std::accumulate(w.begin(), w.end(), std::uint64_t{0}), page.code_count());
    // The new node, a root now, joins the two lightest roots of the forest before it.
    const auto lightest = weights_of(before);
    const int made = page.tree().merged_node(k);
    EXPECT_EQ(nodes.at(nodes.at(made).left).weight, lightest[0]);
    EXPECT_EQ(nodes.at(nodes.at(made).right).weight, lightest[1]);
    EXPECT_NE(std::find(after.begin(), after.end(), made), after.end());
    before = after;
  }
  page.step();  // nothing left to merge
  EXPECT_EQ(page.merge_step(), page.step_count());
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(nodes.at(before[0]).weight, page.code_count());
  EXPECT_TRUE(page.tree_widget()->message().contains(QStringLiteral("One tree")));
  for (int i = 0; i < page.tree().leaf_count(); ++i) {  // the tree's words are the code's lengths
    EXPECT_EQ(page.tree().length(i), page.lengths().at(nodes.at(i).symbol));
    EXPECT_EQ(nodes.at(i).weight, counts.at(nodes.at(i).symbol));
  }
  // Fine steps: more codes than the tree shows; the most frequent are leaves, the rest "other".
  page.set_rel_scale(0.02);
  const auto fine = own_counts(page);
  ASSERT_GT(occurring(fine), LearnHuffmanPage::kMaxTreeLeaves);
  EXPECT_EQ(page.merge_step(), 0);  // new settings start over
  ASSERT_EQ(page.tree().leaf_count(), LearnHuffmanPage::kMaxTreeLeaves);
  EXPECT_EQ(page.step_count(), LearnHuffmanPage::kMaxTreeLeaves - 1);
  EXPECT_EQ(page.other_codes(), occurring(fine) - (LearnHuffmanPage::kMaxTreeLeaves - 1));
  const auto& other = page.tree().nodes().at(LearnHuffmanPage::kMaxTreeLeaves - 1);
  EXPECT_EQ(other.symbol, HuffmanSteps::kOther);
  auto rest = fine;
  std::uint64_t least_shown = UINT64_MAX;
  for (int i = 0; i + 1 < LearnHuffmanPage::kMaxTreeLeaves; ++i) {
    least_shown = std::min(least_shown, page.tree().nodes().at(i).weight);
    rest.at(page.tree().nodes().at(i).symbol) = 0;
  }
  EXPECT_LE(*std::max_element(rest.begin(), rest.end()), least_shown);
  EXPECT_EQ(other.weight, std::accumulate(rest.begin(), rest.end(), std::uint64_t{0}));
  EXPECT_TRUE(page.tree_note_label()->text().contains(QStringLiteral("\"other\"")));
}

// Small alphabets, by hand: the textbook example (CLRS, Sec. 16.3), two symbols, one, none.
TEST(HuffmanSteps, SmallAlphabets) {
  const std::pair<int, std::uint64_t> clrs[] = {{'a', 45}, {'b', 13}, {'c', 12},
                                                {'d', 16}, {'e', 9},  {'f', 5}};
  const HuffmanSteps s = HuffmanSteps::build(clrs);
  EXPECT_EQ(s.merge_count(), 5);
  const int want[] = {1, 3, 3, 3, 4, 4};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s.length(i), want[i]) << char(clrs[i].first);
  EXPECT_EQ(s.total_bits(), 224u);
  const std::pair<int, std::uint64_t> two[] = {{3, 5}, {9, 2}};
  const HuffmanSteps pair = HuffmanSteps::build(two);
  EXPECT_EQ(pair.merge_count(), 1);
  EXPECT_EQ(pair.code_word(1), "0");  // the lighter goes left
  EXPECT_EQ(pair.code_word(0), "1");
  EXPECT_EQ(pair.roots_after(1), std::vector<int>{2});
  std::vector<std::uint64_t> one(256, 0);
  one[7] = 1000;
  const std::vector<int> lengths = huffman_lengths(one);
  EXPECT_EQ(lengths[7], 1);  // a code still needs a bit, as in the engine's codebook
  EXPECT_EQ(std::count(lengths.begin(), lengths.end(), 0), 255);
  const HuffmanSteps lone = HuffmanSteps::from_counts(one, 24);
  EXPECT_EQ(lone.merge_count(), 0);
  EXPECT_EQ(lone.code_word(0), "0");
  EXPECT_EQ(lone.roots_after(3), std::vector<int>{0});
  // The widget says why nothing happens, and draws all three without trouble.
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
  page.set_rel_scale(0.2);
  ASSERT_GE(page.step_count(), 3);
  for (int i = 0; i < 2; ++i) page.step_button()->click();
  EXPECT_EQ(page.merge_step(), 2);
  page.reset_button()->click();
  EXPECT_EQ(page.merge_step(), 0);
  page.play_button()->click();
  EXPECT_TRUE(page.is_playing());
  QElapsedTimer timer;
  timer.start();
  while (page.merge_step() < 1 && timer.elapsed() < 10'000) QApplication::processEvents();
  page.play_button()->click();  // pauses
  EXPECT_FALSE(page.is_playing());
  const int paused_at = page.merge_step();
  EXPECT_GE(paused_at, 1);
  timer.restart();
  while (timer.elapsed() < 1'500) QApplication::processEvents();
  EXPECT_EQ(page.merge_step(), paused_at);  // nothing moves while paused
  page.play();                              // on to the end, where it stops by itself
  timer.restart();
  while (page.is_playing() && timer.elapsed() < 30'000) QApplication::processEvents();
  EXPECT_FALSE(page.is_playing());
  EXPECT_EQ(page.merge_step(), page.step_count());
  EXPECT_FALSE(page.step_button()->isEnabled());
  page.play();  // Play at the end starts over
  EXPECT_TRUE(page.is_playing());
  EXPECT_EQ(page.merge_step(), 0);
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
  for (QWidget* w : std::initializer_list<QWidget*>{page.chart(), page.tree_widget(), page.table(),
                                                    page.headline_label(), page.tree_note_label(),
                                                    page.full_view_button()}) {
    if (w->toolTip().trimmed().isEmpty()) missing += w->metaObject()->className() + QString(" ");
  }
  for (int i = 0; i < 5; ++i) {  // 4 columns, 5 rows
    if (i < 4 && page.table()->horizontalHeaderItem(i)->toolTip().isEmpty()) missing += " column";
    if (page.table()->verticalHeaderItem(i)->toolTip().isEmpty()) missing += " row";
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
  EXPECT_LE(page->table()->mapTo(page, QPoint(page->table()->width(), 0)).x(), page->width());
  for (double rel : {0.1, 0.02}) {
    page->set_rel_scale(rel);
    for (int merges : {0, page->step_count() / 2, page->step_count()}) {
      while (page->merge_step() < merges) page->step();
      // A new tree's width reaches the scroll area over a few rounds of layout requests.
      const HuffmanTreeWidget* tree = page->tree_widget();
      QApplication::processEvents();
      for (int round = 0; round < 10 && tree->width() < tree->minimumSizeHint().width(); ++round)
        QApplication::processEvents();
      ASSERT_GE(tree->height(), 200);
      const QRectF inside(0, 0, tree->width(), tree->height());
      for (int i = 0; i < page->tree().leaf_count() + merges; ++i) {
        EXPECT_TRUE(inside.contains(tree->node_position(i))) << i;
      }
      for (int i = 1; i < page->tree().leaf_count(); ++i) {
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
  const auto& counts = page->histogram();
  EXPECT_EQ(layer.value_histograms[0].counts,
            std::vector<std::uint64_t>(counts.begin(), counts.end()));
  // At rel 0.2 every code fits 4 bits and the full view codes pairs of codes where that is
  // smaller; its mean bits per code then stay between the entropy and the page's code-by-code
  // engine book.
  const auto& lengths = page->engine_codebook().lengths();
  if (!layer.value_code_pairs) {
    EXPECT_EQ(layer.value_code_lengths, std::vector<std::uint8_t>(lengths.begin(), lengths.end()));
  }
  ASSERT_EQ(layer.value_code_bits.size(), 256u);
  double bits = 0;
  for (int v = 0; v < 256; ++v) bits += static_cast<double>(counts[v]) * layer.value_code_bits[v];
  bits /= static_cast<double>(page->code_count());
  EXPECT_LE(bits, page->bits().engine + 1e-9);
  EXPECT_GE(bits, 0.98 * page->bits().entropy);
  EXPECT_NEAR(bits,
              8.0 * static_cast<double>(layer.value_codec.payload_bytes) /
                  static_cast<double>(page->code_count()),
              0.01);
}

}  // namespace
}  // namespace kvlab::gui
