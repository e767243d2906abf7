// Learn step (c)'s model alone, against references computed here: the test's own quantization
// and counts, a priority-queue Huffman, the entropy, the engine's codebook; the merges and the
// tree's bookkeeping.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <numeric>
#include <queue>

#include "common/gui_format.h"
#include "kvlab/engine/quant/method.h"
#include "learn/learn_huffman_model.h"

namespace kvlab::gui {
namespace {

constexpr double kRelScales[] = {0.3, 0.1, 0.05, 0.02};

// The codes of one tensor of the page's layer, quantized here with the engine's KVComp quantizer.
std::vector<std::uint64_t> own_counts(const LearnHuffmanModel& page) {
  auto cache = generate_synthetic(page.source());
  EXPECT_TRUE(cache.ok()) << cache.message();
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.rel_scale = page.rel_scale();
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
TEST(LearnHuffmanModel, NumbersEqualIndependentReferences) {
  LearnHuffmanModel page;
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
      const CodeLengthData chart = page.chart_data();
      ASSERT_EQ(chart.counts, counts);
      ASSERT_EQ(chart.lengths, page.lengths());
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
      EXPECT_EQ(page.row_names()[1], QString("%1-bit fixed").arg(width));
      EXPECT_EQ(page.row_cells(2)[0], QString::number(ref.total_bits / n, 'f', 3));
      EXPECT_EQ(page.row_cells(0)[1], format_byte_count(n));  // 8 bits a code
      const QString saved = format_percent(1 - ref.total_bits / n / 8);
      EXPECT_EQ(page.row_cells(2)[2], saved + "\n" + format_byte_count(n - ref.total_bits / 8.0));
      EXPECT_TRUE(page.headline().contains(saved));
    }
  }
  EXPECT_GE(compared_with_engine, 4);
}

TEST(LearnHuffmanModel, MergesShrinkTheForestAndKeepItsWeight) {
  LearnHuffmanModel page;
  page.set_rel_scale(0.1);
  const auto counts = own_counts(page);
  const int distinct = occurring(counts);
  ASSERT_LE(distinct, LearnHuffmanModel::kMaxTreeLeaves);
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
  for (int i = 0; i < page.tree().leaf_count(); ++i) {  // the tree's words are the code's lengths
    EXPECT_EQ(page.tree().length(i), page.lengths().at(nodes.at(i).symbol));
    EXPECT_EQ(nodes.at(i).weight, counts.at(nodes.at(i).symbol));
  }
  // Fine steps: more codes than the tree shows; the most frequent are leaves, the rest "other".
  page.step();
  page.set_rel_scale(0.02);
  const auto fine = own_counts(page);
  ASSERT_GT(occurring(fine), LearnHuffmanModel::kMaxTreeLeaves);
  EXPECT_EQ(page.merge_step(), 0);  // new settings start over
  ASSERT_EQ(page.tree().leaf_count(), LearnHuffmanModel::kMaxTreeLeaves);
  EXPECT_EQ(page.step_count(), LearnHuffmanModel::kMaxTreeLeaves - 1);
  EXPECT_EQ(page.other_codes(), occurring(fine) - (LearnHuffmanModel::kMaxTreeLeaves - 1));
  const auto& other = page.tree().nodes().at(LearnHuffmanModel::kMaxTreeLeaves - 1);
  EXPECT_EQ(other.symbol, HuffmanSteps::kOther);
  auto rest = fine;
  std::uint64_t least_shown = UINT64_MAX;
  for (int i = 0; i + 1 < LearnHuffmanModel::kMaxTreeLeaves; ++i) {
    least_shown = std::min(least_shown, page.tree().nodes().at(i).weight);
    rest.at(page.tree().nodes().at(i).symbol) = 0;
  }
  EXPECT_LE(*std::max_element(rest.begin(), rest.end()), least_shown);
  EXPECT_EQ(other.weight, std::accumulate(rest.begin(), rest.end(), std::uint64_t{0}));
  EXPECT_TRUE(page.tree_note().contains(QStringLiteral("\"other\"")));
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
}

}  // namespace
}  // namespace kvlab::gui
