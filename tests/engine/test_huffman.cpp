// HuffmanCodebook: the length limit and Kraft's inequality on any histogram, optimality against a
// plain (unlimited) Huffman code when that fits in 12 bits, canonical and prefix-free codes, the
// escape for values unseen in the histogram, and the 129-byte serialisation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>
#include <vector>

#include "codec/codec_streams.h"
#include "codec/huffman_lengths.h"
#include "core/random.h"
#include "kvlab/engine/codec/code_codec.h"

namespace kvlab {
namespace {

using Book = HuffmanCodebook;

// Plain Huffman code lengths (no limit), by repeatedly joining the two lightest trees.
std::vector<int> plain_huffman_lengths(const std::vector<std::uint64_t>& w) {
  struct Item {
    std::uint64_t weight;
    int node;
    bool operator>(const Item& o) const { return weight > o.weight; }
  };
  std::vector<int> parent;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  std::vector<int> leaf_node(w.size(), -1);
  for (std::size_t s = 0; s < w.size(); ++s) {
    if (w[s] == 0) continue;
    leaf_node[s] = static_cast<int>(parent.size());
    parent.push_back(-1);
    heap.push({w[s], leaf_node[s]});
  }
  std::vector<int> lengths(w.size(), 0);
  if (heap.size() == 1) {
    lengths[static_cast<std::size_t>(std::find_if(w.begin(), w.end(), [](auto x) { return x; }) -
                                     w.begin())] = 1;
    return lengths;
  }
  while (heap.size() > 1) {
    const Item a = heap.top();
    heap.pop();
    const Item b = heap.top();
    heap.pop();
    const int n = static_cast<int>(parent.size());
    parent.push_back(-1);
    parent[static_cast<std::size_t>(a.node)] = n;
    parent[static_cast<std::size_t>(b.node)] = n;
    heap.push({a.weight + b.weight, n});
  }
  for (std::size_t s = 0; s < w.size(); ++s) {
    for (int n = leaf_node[s]; n >= 0 && parent[static_cast<std::size_t>(n)] >= 0;
         n = parent[static_cast<std::size_t>(n)]) {
      ++lengths[s];
    }
  }
  return lengths;
}

template <class L>
std::uint64_t total_bits(const std::vector<std::uint64_t>& w, const L& lengths) {
  std::uint64_t t = 0;
  for (std::size_t s = 0; s < w.size(); ++s) t += w[s] * static_cast<std::uint64_t>(lengths[s]);
  return t;
}

// Histograms of several shapes: uniform, Gaussian-like, geometric, sparse, heavy-tailed.
CodeCounts random_histogram(detail::Rng& rng) {
  CodeCounts h{};
  const int shape = static_cast<int>(rng.below(5));
  const int used = 1 + static_cast<int>(rng.below(256));
  for (int i = 0; i < used; ++i) {
    const std::size_t s = rng.below(256);
    switch (shape) {
      case 0:
        h[s] = 1 + rng.below(1000);
        break;
      case 1:
        h[s] = static_cast<std::uint64_t>(1e6 * std::exp(-0.5 * std::pow((s - 128.0) / 6.0, 2)));
        break;
      case 2:
        h[s] = std::uint64_t{1} << rng.below(40);
        break;
      case 3:
        h[s] = rng.below(3);
        break;
      default:
        h[s] = static_cast<std::uint64_t>(1e9 / std::pow(1.0 + static_cast<double>(i), 2.5));
        break;
    }
  }
  return h;
}

std::vector<std::uint64_t> weights_with_escape(const CodeCounts& h) {
  std::vector<std::uint64_t> w(h.begin(), h.end());
  w.push_back(1);
  return w;
}

TEST(HuffmanCodebook, KraftAndLengthLimitOnRandomHistograms) {
  detail::Rng rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const CodeCounts h = random_histogram(rng);
    auto book = Book::from_histogram(h);
    ASSERT_TRUE(book.ok()) << book.message();
    EXPECT_LE(book->kraft_sum(), 1.0 + 1e-12);
    for (int s = 0; s < Book::kSymbols; ++s) EXPECT_LE(book->length(s), Book::kMaxCodeLength);
    EXPECT_GT(book->length(Book::kEscape), 0);
    for (int v = 0; v < 256; ++v) {
      EXPECT_EQ(book->length(v) > 0, h[static_cast<std::size_t>(v)] > 0);
      EXPECT_LE(book->cost_bits(static_cast<std::uint8_t>(v)), Book::kMaxCodeLength + 8);
    }
  }
}

TEST(HuffmanCodebook, OptimalWhenPlainHuffmanFitsTwelveBits) {
  detail::Rng rng(12);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::vector<std::uint64_t> w = weights_with_escape(random_histogram(rng));
    const std::vector<int> plain = plain_huffman_lengths(w);
    const std::vector<std::uint8_t> limited = detail::limited_code_lengths(w, 12);
    const std::uint64_t plain_bits = total_bits(w, plain);
    const std::uint64_t limited_bits = total_bits(w, limited);
    if (*std::max_element(plain.begin(), plain.end()) <= 12) {
      EXPECT_EQ(limited_bits, plain_bits) << "trial " << trial;
      ++compared;
    } else {
      EXPECT_GE(limited_bits, plain_bits) << "trial " << trial;
    }
  }
  EXPECT_GT(compared, 50);
}

TEST(HuffmanCodebook, LimitsFibonacciWeightsToTwelveBits) {
  // Fibonacci weights make the deepest possible plain Huffman tree (depth n - 1).
  CodeCounts h{};
  std::uint64_t a = 1, b = 1;
  for (int s = 0; s < 40; ++s) {
    h[static_cast<std::size_t>(s)] = a;
    const std::uint64_t c = a + b;
    a = b;
    b = c;
  }
  const std::vector<std::uint64_t> w = weights_with_escape(h);
  const std::vector<int> plain = plain_huffman_lengths(w);
  EXPECT_GT(*std::max_element(plain.begin(), plain.end()), 20);
  auto book = Book::from_histogram(h);
  ASSERT_TRUE(book.ok()) << book.message();
  int max_len = 0;
  for (int s = 0; s < Book::kSymbols; ++s) max_len = std::max(max_len, book->length(s));
  EXPECT_EQ(max_len, 12);
  EXPECT_LE(book->kraft_sum(), 1.0);
  EXPECT_GE(total_bits(w, book->lengths()), total_bits(w, plain));
}

TEST(HuffmanCodebook, CanonicalPrefixFreeAndTableConsistent) {
  detail::Rng rng(13);
  for (int trial = 0; trial < 20; ++trial) {
    auto book = Book::from_histogram(random_histogram(rng));
    ASSERT_TRUE(book.ok());
    std::vector<int> syms;
    for (int s = 0; s < Book::kSymbols; ++s) {
      if (book->length(s) > 0) syms.push_back(s);
    }
    // Canonical: by (length, symbol), codes left-aligned to 12 bits strictly increase.
    std::sort(syms.begin(), syms.end(), [&](int x, int y) {
      return std::pair(book->length(x), x) < std::pair(book->length(y), y);
    });
    for (std::size_t i = 1; i < syms.size(); ++i) {
      const auto left = [&](int s) { return book->code(s) << (12 - book->length(s)); };
      EXPECT_LT(left(syms[i - 1]), left(syms[i]));
      // Prefix-free: the next code does not start with this one.
      const int l = book->length(syms[i - 1]);
      EXPECT_NE(book->code(syms[i]) >> (book->length(syms[i]) - l), book->code(syms[i - 1]));
    }
    for (int s : syms) {
      const int l = book->length(s);
      const std::uint32_t rev = detail::reverse_bits(book->code(s), l);
      const std::uint16_t e = book->decode_table()[rev];
      EXPECT_EQ(e & 0x1ff, s);
      EXPECT_EQ(e >> 9, l);
    }
  }
}

// The decoder's multi-symbol table: each entry's codes are the first codes of its 12 bits, as
// many as end inside them (at most kMultiSymbols, never the escape), and the cost table is
// cost_bits.
TEST(HuffmanCodebook, MultiSymbolTableMatchesCodeByCodeDecoding) {
  detail::Rng rng(17);
  for (int trial = 0; trial < 20; ++trial) {
    auto book = Book::from_histogram(random_histogram(rng));
    ASSERT_TRUE(book.ok());
    const detail::DecodeTables t = detail::decode_tables(*book);
    for (int v = 0; v < 256; ++v) {
      EXPECT_EQ(t.cost[v], book->cost_bits(static_cast<std::uint8_t>(v)));
    }
    for (std::uint32_t x = 0; x < static_cast<std::uint32_t>(Book::kTableSize); ++x) {
      // Code by code through the single-symbol table.
      std::uint32_t used = 0, n = 0, syms = 0;
      for (; n < static_cast<std::uint32_t>(detail::kMultiSymbols); ++n) {
        const std::uint16_t e = book->decode_table()[(x >> used) & (Book::kTableSize - 1)];
        const std::uint32_t len = e >> 9, sym = e & 0x1ff;
        if (len == 0 || sym == Book::kEscape || used + len > Book::kMaxCodeLength) break;
        syms |= sym << (8 * n);
        used += len;
      }
      std::uint32_t entry_syms = 0;
      std::memcpy(&entry_syms, t.syms + 4 * x, 4);
      ASSERT_EQ(t.len_count[2 * x + 1], n) << "index " << x;
      EXPECT_EQ(t.len_count[2 * x], used) << "index " << x;
      EXPECT_EQ(entry_syms, syms) << "index " << x;
    }
  }
}

TEST(HuffmanCodebook, EmptyAndSingleSymbolHistograms) {
  auto empty = Book::from_histogram(CodeCounts{});
  ASSERT_TRUE(empty.ok()) << empty.message();
  EXPECT_EQ(empty->length(Book::kEscape), 1);
  for (int v = 0; v < 256; ++v) EXPECT_EQ(empty->cost_bits(static_cast<std::uint8_t>(v)), 9);

  CodeCounts one{};
  one[7] = 1000;
  auto single = Book::from_histogram(one);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->length(7), 1);
  EXPECT_EQ(single->length(Book::kEscape), 1);
  EXPECT_EQ(single->cost_bits(7), 1);
  EXPECT_EQ(single->cost_bits(8), 9);
}

TEST(HuffmanCodebook, UnseenValuesCostEscapePlusEightBits) {
  CodeCounts h{};
  for (int v = 100; v < 110; ++v) h[static_cast<std::size_t>(v)] = 1000000u >> (v - 100);
  auto book = Book::from_histogram(h);
  ASSERT_TRUE(book.ok());
  // The escape is the rarest symbol, so it gets the longest code.
  int longest = 0;
  for (int v = 0; v < 256; ++v) longest = std::max(longest, book->length(v));
  EXPECT_GE(book->length(Book::kEscape), longest);
  EXPECT_EQ(book->cost_bits(3), book->length(Book::kEscape) + 8);
  EXPECT_EQ(book->cost_bits(100), book->length(100));
}

TEST(HuffmanCodebook, SerialisationRoundTripAndRejects) {
  detail::Rng rng(14);
  auto book = Book::from_histogram(random_histogram(rng));
  ASSERT_TRUE(book.ok());
  const std::vector<std::uint8_t> bytes = book->serialize();
  ASSERT_EQ(bytes.size(), Book::kSerializedBytes);
  EXPECT_EQ(Book::kSerializedBytes, 129u);
  auto back = Book::deserialize(bytes);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->lengths(), book->lengths());
  EXPECT_FALSE(back->pairs());
  EXPECT_EQ(bytes.back() >> 4, 0);

  // A pair book: the same lengths, flagged in the last byte's high nibble.
  auto pairs = Book::from_histogram(random_histogram(rng), true);
  ASSERT_TRUE(pairs.ok());
  const std::vector<std::uint8_t> pair_bytes = pairs->serialize();
  EXPECT_EQ(pair_bytes.back() >> 4, 1);
  auto pair_back = Book::deserialize(pair_bytes);
  ASSERT_TRUE(pair_back.ok()) << pair_back.message();
  EXPECT_TRUE(pair_back->pairs());
  EXPECT_EQ(pair_back->lengths(), pairs->lengths());
  EXPECT_EQ(pair_back->symbols_per_vector(7), 4);
  EXPECT_EQ(back->symbols_per_vector(7), 7);

  EXPECT_FALSE(Book::deserialize(std::span(bytes).first(128)).ok());
  std::vector<std::uint8_t> pad = bytes;
  pad.back() |= 0x30;
  auto bad_kind = Book::deserialize(pad);
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_NE(bad_kind.message().find("symbol-kind nibble is 3"), std::string::npos);

  std::vector<std::uint8_t> lengths(Book::kSymbols, 1);  // 257 one-bit codes: Kraft > 1
  auto kraft = Book::from_lengths(lengths);
  ASSERT_FALSE(kraft.ok());
  EXPECT_NE(kraft.message().find("Kraft"), std::string::npos);
  std::vector<std::uint8_t> too_long(Book::kSymbols, 0);
  too_long[0] = 13;
  too_long[Book::kEscape] = 1;
  EXPECT_FALSE(Book::from_lengths(too_long).ok());
  std::vector<std::uint8_t> no_escape(Book::kSymbols, 0);
  no_escape[0] = 1;
  no_escape[1] = 1;
  auto uncovered = Book::from_lengths(no_escape);
  ASSERT_FALSE(uncovered.ok());
  EXPECT_NE(uncovered.message().find("escape"), std::string::npos);
  // Every value with its own 8-bit code and no escape: complete and valid.
  std::vector<std::uint8_t> flat(Book::kSymbols, 8);
  flat[Book::kEscape] = 0;
  EXPECT_TRUE(Book::from_lengths(flat).ok());
}

TEST(HuffmanCodebook, EntropyOfKnownHistograms) {
  CodeCounts h{};
  EXPECT_EQ(shannon_entropy_bits(h), 0.0);
  h[3] = 10;
  EXPECT_EQ(shannon_entropy_bits(h), 0.0);
  for (int v = 0; v < 4; ++v) h[static_cast<std::size_t>(v)] = 5;
  EXPECT_NEAR(shannon_entropy_bits(h), 2.0, 1e-12);
  CodeCounts all{};
  all.fill(1);
  EXPECT_NEAR(shannon_entropy_bits(all), 8.0, 1e-12);
}

}  // namespace
}  // namespace kvlab
