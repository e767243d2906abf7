// Canonical, length-limited Huffman codebooks for uint8 codes. KVComp (Jiang et al. 2025,
// Sec. 3.3) builds one Huffman codebook per layer (separately for K and V) from the prefill's
// code histogram and reuses it for every block appended during decoding. Lengths are capped at
// 12 bits so that a decoder resolves one symbol with one lookup in a 4096-entry table.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "codec/codec_streams.h"
#include "codec/huffman_lengths.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/table_entry.h"

namespace kvlab {

namespace detail {

namespace {

// A package-merge item: a leaf (symbol >= 0) or a package of two items of the previous level.
struct Node {
  std::uint64_t weight;
  std::int32_t symbol;  // -1 for a package
  std::int32_t left, right;
};

}  // namespace

std::vector<std::uint8_t> limited_code_lengths(std::span<const std::uint64_t> weights,
                                               int max_length) {
  std::vector<std::uint8_t> lengths(weights.size(), 0);
  std::vector<std::int32_t> leaves;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] > 0) leaves.push_back(static_cast<std::int32_t>(i));
  }
  if (leaves.empty()) return lengths;
  if (leaves.size() == 1) {  // a code needs at least one bit
    lengths[static_cast<std::size_t>(leaves[0])] = 1;
    return lengths;
  }
  std::stable_sort(leaves.begin(), leaves.end(), [&](std::int32_t a, std::int32_t b) {
    return weights[static_cast<std::size_t>(a)] < weights[static_cast<std::size_t>(b)];
  });

  std::vector<Node> arena;
  arena.reserve(leaves.size() * static_cast<std::size_t>(2 * max_length + 1));
  std::vector<std::int32_t> leaf_items;
  for (std::int32_t s : leaves) {
    leaf_items.push_back(static_cast<std::int32_t>(arena.size()));
    arena.push_back({weights[static_cast<std::size_t>(s)], s, -1, -1});
  }

  // Package-merge: the list of level 1 is the leaves; each further level merges the leaves with
  // the pairs ("packages") of the previous level's list, by weight. After max_length levels the
  // 2n-2 lightest items form the optimal solution and a symbol's length is the number of those
  // items it occurs in (Larmore & Hirschberg 1990, "A fast algorithm for optimal length-limited
  // Huffman codes").
  std::vector<std::int32_t> list = leaf_items;
  for (int level = 1; level < max_length; ++level) {
    std::vector<std::int32_t> packages;
    for (std::size_t i = 0; i + 1 < list.size(); i += 2) {
      const Node& a = arena[static_cast<std::size_t>(list[i])];
      const Node& b = arena[static_cast<std::size_t>(list[i + 1])];
      packages.push_back(static_cast<std::int32_t>(arena.size()));
      arena.push_back({a.weight + b.weight, -1, list[i], list[i + 1]});
    }
    std::vector<std::int32_t> merged;
    merged.reserve(leaf_items.size() + packages.size());
    std::merge(leaf_items.begin(), leaf_items.end(), packages.begin(), packages.end(),
               std::back_inserter(merged), [&](std::int32_t a, std::int32_t b) {
                 return arena[static_cast<std::size_t>(a)].weight <
                        arena[static_cast<std::size_t>(b)].weight;
               });
    list = std::move(merged);
  }

  const std::size_t take = 2 * leaves.size() - 2;
  std::vector<std::int32_t> stack;
  for (std::size_t i = 0; i < take && i < list.size(); ++i) {
    stack.push_back(list[i]);
    while (!stack.empty()) {
      const Node& n = arena[static_cast<std::size_t>(stack.back())];
      stack.pop_back();
      if (n.symbol >= 0) {
        ++lengths[static_cast<std::size_t>(n.symbol)];
      } else {
        stack.push_back(n.left);
        stack.push_back(n.right);
      }
    }
  }
  return lengths;
}

std::vector<std::uint32_t> canonical_codes(std::span<const std::uint8_t> lengths) {
  int max_len = 0;
  for (std::uint8_t l : lengths) max_len = std::max<int>(max_len, l);
  std::vector<std::uint32_t> count(static_cast<std::size_t>(max_len) + 1, 0);
  for (std::uint8_t l : lengths) ++count[l];
  count[0] = 0;
  std::vector<std::uint32_t> next(static_cast<std::size_t>(max_len) + 1, 0);
  std::uint32_t code = 0;
  for (int len = 1; len <= max_len; ++len) {
    code = (code + count[static_cast<std::size_t>(len) - 1]) << 1;
    next[static_cast<std::size_t>(len)] = code;
  }
  std::vector<std::uint32_t> codes(lengths.size(), 0);
  for (std::size_t s = 0; s < lengths.size(); ++s) {
    if (lengths[s] != 0) codes[s] = next[lengths[s]]++;
  }
  return codes;
}

// Greedy decode of each 12-bit window with the single-symbol table: a code is taken while it ends
// inside the window (its bits are then all known, so the higher unknown bits cannot change it),
// up to kMultiSymbols codes; the escape ends the run (its raw bits may lie past the window).
void fill_decode_tables(std::uint16_t* table, const std::uint8_t* cost) {
  constexpr std::uint32_t kMask = HuffmanCodebook::kTableSize - 1;
  auto* bytes = reinterpret_cast<std::uint8_t*>(table);
  for (std::uint32_t x = 0; x < static_cast<std::uint32_t>(HuffmanCodebook::kTableSize); ++x) {
    std::uint32_t syms = 0, used = 0, n = 0;
    while (n < static_cast<std::uint32_t>(kMultiSymbols)) {
      const std::uint16_t single = table[(x >> used) & kMask];
      const std::uint32_t len = table_entry::single_length(single);
      const std::uint32_t sym = table_entry::single_symbol(single);
      if (len == 0 || sym == static_cast<std::uint32_t>(HuffmanCodebook::kEscape) ||
          used + len > static_cast<std::uint32_t>(HuffmanCodebook::kMaxCodeLength)) {
        break;
      }
      syms |= sym << (8 * n);
      used += len;
      ++n;
    }
    std::memcpy(bytes + kSymsOffset + 4 * x, &syms, sizeof syms);
    bytes[kLenCountOffset + 2 * x] = static_cast<std::uint8_t>(used);
    bytes[kLenCountOffset + 2 * x + 1] = static_cast<std::uint8_t>(n);
  }
  std::memcpy(bytes + kCostOffset, cost, 256);
}

}  // namespace detail

namespace {

using Bytes64 = std::uint8_t __attribute__((vector_size(64)));

// Adds a slice's codes to `h` when they are all below 64, as KVComp's are (up to
// kvcomp_max_code(), 20 by default), and says whether they were. Sixteen byte counters a lane,
// one per value, held in registers, in a pass over the slice (in L1) for each 16 values up to
// the slice's largest code: a pass costs a compare and an add under its mask per value for each
// 64 codes, where the tables cost a dependent load and store per code. A lane's counter takes at
// most 255 vectors, the slice's length.
constexpr std::size_t kSmallSlice = 255 * sizeof(Bytes64);
bool count_small_codes(const std::uint8_t* c, std::size_t vectors, CodeCounts& h) {
  Bytes64 largest{};
  for (std::size_t i = 0; i < vectors; ++i) {
    Bytes64 x;
    std::memcpy(&x, c + i * sizeof x, sizeof x);
    largest = x > largest ? x : largest;
  }
  std::uint8_t top = 0;
  for (std::size_t lane = 0; lane < sizeof largest; ++lane) top = std::max(top, largest[lane]);
  if (top >= 64) return false;
  for (int base = 0; base <= top; base += 16) {
    Bytes64 n[16] = {};
    for (std::size_t i = 0; i < vectors; ++i) {
      Bytes64 x;
      std::memcpy(&x, c + i * sizeof x, sizeof x);
      x -= static_cast<std::uint8_t>(base);
      for (int v = 0; v < 16; ++v) n[v] = x == static_cast<std::uint8_t>(v) ? n[v] + 1 : n[v];
    }
    for (int v = 0; v < 16; ++v) {
      std::uint64_t sum = 0;
      for (std::size_t lane = 0; lane < sizeof n[v]; ++lane) sum += n[v][lane];
      h[static_cast<std::size_t>(base + v)] += sum;
    }
  }
  return true;
}

// Adds n codes to `h` by four tables in turn: runs of one value (common: most codes sit near the
// middle) would otherwise make every increment wait for the one before it to reach memory.
void count_by_tables(const std::uint8_t* c, std::size_t n, CodeCounts& h) {
  if (n == 0) return;
  std::array<std::array<std::uint32_t, 256>, 4> t{};
  while (n > 0) {
    // At most 2^32 - 1 increments of one 32-bit table between flushes into h.
    const std::size_t m = std::min<std::size_t>(n, std::size_t{1} << 32);
    std::size_t i = 0;
    for (; i + 4 <= m; i += 4) {
      ++t[0][c[i]];
      ++t[1][c[i + 1]];
      ++t[2][c[i + 2]];
      ++t[3][c[i + 3]];
    }
    for (; i < m; ++i) ++t[0][c[i]];
    for (int v = 0; v < 256; ++v) {
      h[static_cast<std::size_t>(v)] += std::uint64_t{t[0][v]} + t[1][v] + t[2][v] + t[3][v];
    }
    t = {};
    c += m;
    n -= m;
  }
}

}  // namespace

CodeCounts count_codes(std::span<const std::uint8_t> codes) {
  // A slice at a time by byte counters where its codes are all below 64; the slices between,
  // and the tail, by the tables in one run each.
  CodeCounts h{};
  const std::uint8_t* c = codes.data();
  const std::size_t n = codes.size();
  std::size_t tabled = 0;  // codes before this are counted
  for (std::size_t at = 0; at + kSmallSlice <= n; at += kSmallSlice) {
    if (count_small_codes(c + at, kSmallSlice / sizeof(Bytes64), h)) {
      count_by_tables(c + tabled, at - tabled, h);
      tabled = at + kSmallSlice;
    }
  }
  count_by_tables(c + tabled, n - tabled, h);
  return h;
}

double shannon_entropy_bits(const CodeCounts& histogram) {
  const double total =
      static_cast<double>(std::accumulate(histogram.begin(), histogram.end(), std::uint64_t{0}));
  if (total <= 0) return 0.0;
  double h = 0.0;
  for (std::uint64_t c : histogram) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / total;
    h -= p * std::log2(p);
  }
  return h;
}

Result<HuffmanCodebook> HuffmanCodebook::from_histogram(const CodeCounts& histogram, bool pairs,
                                                        bool with_rans) {
  // The escape gets the smallest weight there is, so it costs the fewest code-space (typically
  // one 12-bit leaf: 2^-12 of the code space) while unseen values stay encodable. Smoothing every
  // value with +1 instead would reserve 2^-12 for each of ~250 unseen values, ~6% of the code
  // space, i.e. ~0.09 bits per code on every code: over 3% of a 2.5-bit entropy.
  std::array<std::uint64_t, kSymbols> weights{};
  std::copy(histogram.begin(), histogram.end(), weights.begin());
  weights[kEscape] = 1;
  const std::vector<std::uint8_t> lengths = detail::limited_code_lengths(weights, kMaxCodeLength);
  auto book = from_lengths(lengths, pairs);
  if (!book || !with_rans) return book;
  auto rans = RansTable::from_histogram(histogram, pairs);
  if (!rans) return rans.error();
  book->m_rans = std::move(*rans);
  return book;
}

Result<HuffmanCodebook> HuffmanCodebook::from_lengths(std::span<const std::uint8_t> lengths,
                                                      bool pairs) {
  if (lengths.size() != static_cast<std::size_t>(kSymbols)) {
    return make_error(
        fmt::format("huffman codebook: {} code lengths, expected {}", lengths.size(), kSymbols));
  }
  std::uint64_t kraft = 0;  // in units of 2^-kMaxCodeLength
  for (int s = 0; s < kSymbols; ++s) {
    const int l = lengths[static_cast<std::size_t>(s)];
    if (l > kMaxCodeLength) {
      return make_error(
          fmt::format("huffman codebook: symbol {} has code length {} > {}", s, l, kMaxCodeLength));
    }
    if (l > 0) kraft += std::uint64_t{1} << (kMaxCodeLength - l);
  }
  if (kraft > static_cast<std::uint64_t>(kTableSize)) {
    return make_error(
        fmt::format("huffman codebook: code lengths break Kraft's inequality (sum {}/{} > 1)",
                    kraft, kTableSize));
  }
  if (lengths[kEscape] == 0) {
    for (int s = 0; s < 256; ++s) {
      if (lengths[static_cast<std::size_t>(s)] == 0) {
        return make_error(
            fmt::format("huffman codebook: value {} has no code and there is no escape code", s));
      }
    }
  }
  HuffmanCodebook book;
  book.m_pairs = pairs;
  std::copy(lengths.begin(), lengths.end(), book.m_lengths.begin());
  KVLAB_TRY(book.build_tables());
  return book;
}

Status HuffmanCodebook::use_rans(RansTable table) {
  if (table.pairs() != m_pairs) {
    return make_error(fmt::format("rans table of {} for a codebook of {}",
                                  table.pairs() ? "pairs" : "codes", m_pairs ? "pairs" : "codes"));
  }
  m_rans = std::move(table);
  return Ok{};
}

Status HuffmanCodebook::build_tables() {
  const std::vector<std::uint32_t> codes = detail::canonical_codes(m_lengths);
  std::copy(codes.begin(), codes.end(), m_codes.begin());
  // The 4096 single-symbol entries, then the private decoder tables (detail::DecodeTables) in
  // the same storage, so the public decode_table() stays the documented table.
  m_table.assign(detail::kDecodeStorage, 0);
  for (int s = 0; s < kSymbols; ++s) {
    const int l = m_lengths[static_cast<std::size_t>(s)];
    if (l == 0) continue;
    // The stream is LSB-first and a code's first (most significant) bit comes first, so the
    // table is indexed by the bit-reversed code; every suffix of the remaining bits maps here.
    const std::uint32_t rev = detail::reverse_bits(m_codes[static_cast<std::size_t>(s)], l);
    const std::uint16_t entry =
        table_entry::single(static_cast<std::uint32_t>(l), static_cast<std::uint32_t>(s));
    for (std::uint32_t i = rev; i < static_cast<std::uint32_t>(kTableSize); i += 1u << l) {
      m_table[i] = entry;
    }
  }
  const int esc_len = m_lengths[kEscape];
  const std::uint32_t esc_rev = detail::reverse_bits(m_codes[kEscape], esc_len);
  for (int v = 0; v < 256; ++v) {
    const int l = m_lengths[static_cast<std::size_t>(v)];
    if (l > 0) {
      m_enc_bits[static_cast<std::size_t>(v)] =
          detail::reverse_bits(m_codes[static_cast<std::size_t>(v)], l);
      m_enc_len[static_cast<std::size_t>(v)] = static_cast<std::uint8_t>(l);
      if (v < 64) {
        static_assert(kMaxCodeLength <= 12, "enc_small packs 12 bits of code and its length");
        m_enc_small[static_cast<std::size_t>(v)] = static_cast<std::uint16_t>(
            m_enc_bits[static_cast<std::size_t>(v)] | static_cast<std::uint32_t>(l) << 12);
      }
    } else {
      // Escape code, then the value's 8 bits, least significant first.
      m_enc_bits[static_cast<std::size_t>(v)] =
          esc_rev | (static_cast<std::uint32_t>(v) << esc_len);
      m_enc_len[static_cast<std::size_t>(v)] = static_cast<std::uint8_t>(esc_len + 8);
    }
  }
  detail::fill_decode_tables(m_table.data(), m_enc_len.data());
  return Ok{};
}

double HuffmanCodebook::kraft_sum() const {
  double sum = 0.0;
  for (std::uint8_t l : m_lengths) {
    if (l > 0) sum += std::ldexp(1.0, -l);
  }
  return sum;
}

std::vector<std::uint8_t> HuffmanCodebook::serialize() const {
  std::vector<std::uint8_t> out(kSerializedBytes, 0);
  for (int s = 0; s < kSymbols; ++s) {
    out[static_cast<std::size_t>(s / 2)] |=
        static_cast<std::uint8_t>(m_lengths[static_cast<std::size_t>(s)] << (4 * (s % 2)));
  }
  if (m_pairs) out[kSerializedBytes - 1] |= 0x10;
  return out;
}

Result<HuffmanCodebook> HuffmanCodebook::deserialize(std::span<const std::uint8_t> bytes) {
  if (bytes.size() != kSerializedBytes) {
    return make_error(
        fmt::format("huffman codebook: {} bytes, expected {}", bytes.size(), kSerializedBytes));
  }
  const int flag = bytes[kSerializedBytes - 1] >> 4;
  if (flag > 1) {
    return make_error(fmt::format(
        "huffman codebook: symbol-kind nibble is {}, expected 0 (codes) or 1 (pairs)", flag));
  }
  std::array<std::uint8_t, kSymbols> lengths{};
  for (int s = 0; s < kSymbols; ++s) {
    lengths[static_cast<std::size_t>(s)] =
        static_cast<std::uint8_t>((bytes[static_cast<std::size_t>(s / 2)] >> (4 * (s % 2))) & 0xf);
  }
  return from_lengths(lengths, flag == 1);
}

CodeCounts count_code_pairs(std::span<const std::uint8_t> codes, int dim) {
  CodeCounts h{};
  if (dim <= 0) return h;
  const std::size_t d = static_cast<std::size_t>(dim);
  for (std::size_t v = 0; v + d <= codes.size(); v += d) {
    std::size_t i = 0;
    for (; i + 2 <= d; i += 2) ++h[codes[v + i] | (codes[v + i + 1] << 4)];
    if (i < d) ++h[codes[v + i]];
  }
  return h;
}

namespace {

// Bits the symbols of `histogram` take through `book`.
std::uint64_t coded_bits(const CodeCounts& histogram, const HuffmanCodebook& book) {
  std::uint64_t bits = 0;
  for (int v = 0; v < 256; ++v) {
    bits += histogram[static_cast<std::size_t>(v)] *
            static_cast<std::uint64_t>(book.cost_bits(static_cast<std::uint8_t>(v)));
  }
  return bits;
}

}  // namespace

Result<HuffmanCodebook> choose_codebook(std::span<const std::uint8_t> codes, int dim, int max_code,
                                        const CodeCounts& counts, bool with_rans) {
  auto single = HuffmanCodebook::from_histogram(counts, false, with_rans);
  if (!single || max_code > 15 || dim <= 0) return single;
  for (int v = max_code + 1; v < 256; ++v) {  // codes the bound rules out: not a pair book
    if (counts[static_cast<std::size_t>(v)] != 0) return single;
  }
  const CodeCounts pair_counts = count_code_pairs(codes, dim);
  auto pairs = HuffmanCodebook::from_histogram(pair_counts, true, with_rans);
  if (!pairs) return pairs;
  if (coded_bits(pair_counts, *pairs) < coded_bits(counts, *single)) return pairs;
  return single;
}

std::array<double, 256> mean_code_bits(std::span<const std::uint8_t> codes, int dim,
                                       const HuffmanCodebook& book, const CodeCounts& counts) {
  std::array<double, 256> bits{};
  if (!book.pairs()) {
    for (int v = 0; v < 256; ++v) {
      if (counts[static_cast<std::size_t>(v)] != 0) {
        bits[static_cast<std::size_t>(v)] = book.cost_bits(static_cast<std::uint8_t>(v));
      }
    }
    return bits;
  }
  if (dim <= 0) return bits;
  // Whole pairs and an odd vector's last code counted apart (integers, four tables in turn),
  // then each pair's bits split between its two codes: what a walk adding half of every pair's
  // bits to each of its codes gives, in far fewer steps. A pair with a code above 15 cannot go
  // through a pair book and is left out.
  // Entry 256 counts the pairs left out, so the loop has no branch.
  std::array<std::array<std::uint64_t, 257>, 4> pair_counts{};
  CodeCounts tail{};
  const std::size_t d = static_cast<std::size_t>(dim);
  const std::size_t whole = d / 2;
  const auto pair_symbol = [](std::uint8_t a, std::uint8_t b) -> unsigned {
    return (a | b) > 15 ? 256u : static_cast<unsigned>(a | (b << 4));
  };
  for (std::size_t v = 0; v + d <= codes.size(); v += d) {
    const std::uint8_t* c = codes.data() + v;
    std::size_t k = 0;
    for (; k + 4 <= whole; k += 4) {
      for (std::size_t j = 0; j < 4; ++j)
        ++pair_counts[j][pair_symbol(c[2 * (k + j)], c[2 * (k + j) + 1])];
    }
    for (; k < whole; ++k) ++pair_counts[0][pair_symbol(c[2 * k], c[2 * k + 1])];
    if (d % 2 != 0 && c[d - 1] <= 15) ++tail[c[d - 1]];
  }
  std::array<double, 256> seen{};
  for (unsigned s = 0; s < 256; ++s) {
    const double cost = book.cost_bits(static_cast<std::uint8_t>(s));
    const std::uint64_t n =
        pair_counts[0][s] + pair_counts[1][s] + pair_counts[2][s] + pair_counts[3][s];
    if (n != 0) {
      const auto nd = static_cast<double>(n);
      bits[s & 15] += nd * 0.5 * cost;
      seen[s & 15] += nd;
      bits[s >> 4] += nd * 0.5 * cost;
      seen[s >> 4] += nd;
    }
    if (tail[s] != 0) {  // the odd last code, alone in the pair (code, 0), takes all its bits
      bits[s] += static_cast<double>(tail[s]) * cost;
      seen[s] += static_cast<double>(tail[s]);
    }
  }
  for (int v = 0; v < 256; ++v) {
    if (seen[static_cast<std::size_t>(v)] > 0) {
      bits[static_cast<std::size_t>(v)] /= seen[static_cast<std::size_t>(v)];
    }
  }
  return bits;
}

}  // namespace kvlab
