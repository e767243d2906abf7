// The GPU kernels' stream reading (word_stream.h), run on the CPU: the word reader, the pair
// table and the Huffman and bit-packed vector decoders that kernels/src/fused_attention.cu
// compiles. They are held to a plain reference written here, which reads one bit at a time and
// matches the codebook's canonical codes (HuffmanCodebook::code(), length()) without any decode
// table, and to the engine's decoder (decode_codes()) on what the engine encodes.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/random.h"
#include "kvlab/engine/codec/block_layout.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/word_stream.h"

namespace kvlab {
namespace {

static_assert(word_stream::kTableSize == HuffmanCodebook::kTableSize);
static_assert(word_stream::kEscapeSymbol == HuffmanCodebook::kEscape);
static_assert(word_stream::kIndexBits == HuffmanCodebook::kMaxCodeLength);

struct HostWords {
  const std::uint32_t* w;
  std::uint32_t operator()(std::uint64_t i) const { return w[i]; }
};
using Reader = word_stream::WordReader<HostWords>;

// A payload as the GPU holds it (gpu_layer.cu's upload): little-endian words, then the padding.
std::vector<std::uint32_t> to_words(std::span<const std::uint8_t> bytes) {
  std::vector<std::uint32_t> words(word_stream::payload_words_for(bytes.size()), 0u);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    words[i / 4] |= static_cast<std::uint32_t>(bytes[i]) << (8 * (i % 4));
  }
  return words;
}

// The plain reference: bit `pos` of the stream, LSB-first, zero past its end.
struct PlainBits {
  std::span<const std::uint8_t> bytes;
  std::uint32_t at(std::uint64_t pos) const {
    return pos / 8 < bytes.size() ? (bytes[pos / 8] >> (pos % 8)) & 1u : 0u;
  }
  std::uint32_t read(std::uint64_t& pos, int n) const {  // n raw bits, first bit in bit 0
    std::uint32_t v = 0;
    for (int k = 0; k < n; ++k) v |= at(pos++) << k;
    return v;
  }
};

// One code at `pos` by matching the canonical codes bit by bit (first stream bit = the code's
// most significant bit); the escape's value is the 8 raw bits after it. nullopt: no code.
struct PlainCode {
  int value;
  bool escape;
};
// The book's codes by (length, code value).
using CodeMap = std::map<std::pair<int, std::uint32_t>, int>;
CodeMap code_map(const HuffmanCodebook& book) {
  CodeMap codes;
  for (int s = 0; s < HuffmanCodebook::kSymbols; ++s) {
    if (book.length(s) > 0) codes[{book.length(s), book.code(s)}] = s;
  }
  return codes;
}
std::optional<PlainCode> plain_code(const CodeMap& codes, const PlainBits& bits,
                                    std::uint64_t& pos) {
  std::uint32_t v = 0;
  for (int len = 1; len <= HuffmanCodebook::kMaxCodeLength; ++len) {
    v = (v << 1) | bits.at(pos + static_cast<std::uint64_t>(len) - 1);
    const auto it = codes.find({len, v});
    if (it == codes.end()) continue;
    pos += static_cast<std::uint64_t>(len);
    if (it->second == HuffmanCodebook::kEscape) {
      return PlainCode{static_cast<int>(bits.read(pos, 8)), true};
    }
    return PlainCode{it->second, false};
  }
  return std::nullopt;
}

// A vector's verdict and codes by the plain reference: every code valid, exactly `count` bits.
bool plain_vector(const CodeMap& codes, const PlainBits& bits, std::uint64_t pos,
                  std::uint32_t count, int dim, std::vector<std::uint8_t>& out) {
  const std::uint64_t start = pos;
  out.assign(static_cast<std::size_t>(dim), 0);
  for (int c = 0; c < dim; ++c) {
    const std::optional<PlainCode> code = plain_code(codes, bits, pos);
    if (!code) return false;
    out[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(code->value);
  }
  return pos - start == count;
}

// decode_pair_vector() into row[0, dim] (row[dim] takes the decoder's spare zero).
template <class R>
bool decode_row(R& r, const std::vector<std::uint32_t>& table, int dim, std::uint32_t bits,
                std::vector<std::uint8_t>& row) {
  return word_stream::decode_pair_vector(
      r, table.data(), dim, bits, [&](int c, std::uint32_t code) {
        row[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(code);
      });
}

// Codes a quantizer might give: mostly small, a geometric tail, rarely a large value.
std::vector<std::uint8_t> skewed_codes(detail::Rng& rng, std::size_t n, int max_code) {
  std::vector<std::uint8_t> codes(n);
  for (auto& c : codes) {
    int v = 0;
    while (v < max_code && rng.uniform() < 0.55) ++v;
    if (rng.below(97) == 0)
      v = static_cast<int>(rng.below(static_cast<std::uint64_t>(max_code) + 1));
    c = static_cast<std::uint8_t>(v);
  }
  return codes;
}

// A single-code book (the GPU decodes single-code books) from the first `sample` codes, so the
// values the rest hold and the sample lacks take the escape.
HuffmanCodebook sample_book(std::span<const std::uint8_t> codes, std::size_t sample) {
  auto book = HuffmanCodebook::from_histogram(count_codes(codes.first(sample)));
  EXPECT_TRUE(book) << book.message();
  return *book;
}

TEST(WordStream, ReaderGivesTheStreamsBitsFromAnyPosition) {
  detail::Rng rng(7);
  for (const std::size_t size : {1u, 4u, 5u, 37u, 64u}) {
    std::vector<std::uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng.below(256));
    const std::vector<std::uint32_t> words = to_words(bytes);
    const PlainBits plain{bytes};
    // From every bit of the stream and past its end, a random walk of skips up to 32 bits, each
    // peek() the next 32 bits of the stream (zeros past its end; the reader never loads past
    // the padding, which HostWords would not notice, so the index is checked too).
    for (std::uint64_t start = 0; start < 8 * size + 40; ++start) {
      std::vector<std::uint32_t> seen;
      auto logged = [&](std::uint64_t i) {
        EXPECT_LT(i, words.size()) << "a load past the padding, from bit " << start;
        seen.push_back(static_cast<std::uint32_t>(i));
        return i < words.size() ? words[i] : 0u;
      };
      struct LoggedWords {
        decltype(logged)* f;
        std::uint32_t operator()(std::uint64_t i) const { return (*f)(i); }
      };
      word_stream::WordReader<LoggedWords> r(LoggedWords{&logged}, words.size(), start);
      std::uint64_t pos = start;
      for (int step = 0; step < 12; ++step) {
        std::uint64_t p = pos;
        ASSERT_EQ(r.peek(), plain.read(p, 32)) << "size " << size << ", bit " << pos;
        const auto n = static_cast<std::uint32_t>(1 + rng.below(32));
        r.skip(n);
        pos += n;
      }
    }
  }
}

TEST(WordStream, PairTableResolvesTheCanonicalCodes) {
  detail::Rng rng(11);
  for (int trial = 0; trial < 6; ++trial) {
    const int max_code = trial < 3 ? 15 : 255;
    const std::vector<std::uint8_t> codes = skewed_codes(rng, 4000, max_code);
    const HuffmanCodebook book = sample_book(codes, 1000 + 500 * trial);
    std::vector<std::uint32_t> table(word_stream::kTableSize);
    word_stream::fill_pair_table(book.decode_table(), table.data());
    const CodeMap canon = code_map(book);
    int pairs = 0, escapes = 0;
    for (std::uint32_t i = 0; i < word_stream::kTableSize; ++i) {
      // The 12 index bits as a stream, then zeros.
      std::uint8_t bytes[4] = {static_cast<std::uint8_t>(i & 255u),
                               static_cast<std::uint8_t>(i >> 8), 0, 0};
      const PlainBits plain{bytes};
      const std::uint32_t e = table[i];
      std::uint64_t pos = 0;
      const std::optional<PlainCode> first = plain_code(canon, plain, pos);
      if (!first) {
        ASSERT_EQ(table_entry::pair_count(e), 0u) << i;
        continue;
      }
      ASSERT_EQ(table_entry::pair_escape(e), first->escape) << i;
      const std::uint64_t len1 = first->escape ? pos - 8 : pos;
      ASSERT_EQ(table_entry::pair_first_length(e), len1) << i;
      if (first->escape) {
        ++escapes;
        ASSERT_EQ(table_entry::pair_count(e), 1u) << i;
        continue;
      }
      ASSERT_EQ(table_entry::pair_first(e), static_cast<std::uint32_t>(first->value)) << i;
      // A second code is taken exactly when it lies whole inside the index bits and is no
      // escape.
      const std::optional<PlainCode> second = plain_code(canon, plain, pos);
      const bool fits = second && !second->escape && pos <= word_stream::kIndexBits;
      ASSERT_EQ(table_entry::pair_count(e), fits ? 2u : 1u) << i;
      if (fits) {
        ++pairs;
        ASSERT_EQ(table_entry::pair_second(e), static_cast<std::uint32_t>(second->value)) << i;
        ASSERT_EQ(table_entry::pair_total_length(e), pos) << i;
      } else {
        ASSERT_EQ(table_entry::pair_total_length(e), len1) << i;
      }
    }
    EXPECT_GT(pairs, 0);
    EXPECT_GT(escapes, 0);
  }
}

struct Shape {
  int tokens, heads, dim, block;
};

// Skewed codes of a shape, Huffman-coded with a single-code book from their first `sample`
// codes, and the book's pair table.
struct Coded {
  std::vector<std::uint8_t> codes;
  HuffmanCodebook book;
  EncodedCodes e;
  std::vector<std::uint32_t> table;
};
Coded huffman_coded(detail::Rng& rng, const Shape& s, std::size_t sample_div) {
  Coded c;
  const std::size_t n = static_cast<std::size_t>(s.tokens) * s.heads * s.dim;
  c.codes = skewed_codes(rng, n, 255);
  c.book = sample_book(c.codes, std::max<std::size_t>(1, n / sample_div));
  CodecConfig config;
  config.block_size = s.block;
  auto e = encode_codes(c.codes, s.tokens, s.heads, s.dim, config, &c.book);
  EXPECT_TRUE(e) << e.message();
  if (e) c.e = std::move(*e);
  c.table.resize(word_stream::kTableSize);
  word_stream::fill_pair_table(c.book.decode_table(), c.table.data());
  return c;
}
constexpr Shape kShapes[] = {{1, 1, 1, 64},    {70, 3, 5, 64},   {130, 2, 64, 64},
                             {65, 1, 127, 32}, {64, 4, 128, 64}, {9, 2, 256, 4}};

// Where each vector of `e` starts and how many bits it has, in codes order [token][head].
struct VectorPlace {
  std::uint64_t pos;
  std::uint32_t bits;
};
std::vector<VectorPlace> vector_places(const EncodedCodes& e) {
  std::vector<VectorPlace> places(static_cast<std::size_t>(e.tokens) * e.heads);
  for (int tb = 0; tb < e.token_blocks(); ++tb) {
    const int n = block_layout::block_tokens(tb, e.tokens, e.block_size);
    for (int h = 0; h < e.heads; ++h) {
      const int first_token = tb * e.block_size;
      std::uint64_t pos = 0;
      if (e.kind == CodecKind::Huffman) {
        pos = 8ull * e.block_offsets[block_layout::block_of(first_token, h, e.heads, e.block_size)];
      } else {
        pos = 8 * block_layout::bitpack_block_offset(tb, h, e.heads, e.block_size, n, e.dim,
                                                     e.bitpack_width);
      }
      const std::uint64_t v0 = block_layout::first_vector(tb, h, e.heads, e.block_size, n);
      for (int i = 0; i < n; ++i) {
        VectorPlace& p = places[static_cast<std::size_t>(first_token + i) * e.heads + h];
        if (e.kind == CodecKind::Huffman) {
          p = {pos, e.vector_bits[v0 + i]};
          pos += p.bits;
        } else {
          p = {pos + block_layout::bitpack_vector_bit(i, e.dim, e.bitpack_width), 0};
        }
      }
    }
  }
  return places;
}

TEST(WordStream, DecodesEveryVectorAsTheEngineDoes) {
  detail::Rng rng(23);
  for (const Shape& s : kShapes) {
    const std::size_t n = static_cast<std::size_t>(s.tokens) * s.heads * s.dim;
    const Coded c = huffman_coded(rng, s, 3);
    std::vector<std::uint8_t> expect(n);
    ASSERT_TRUE(decode_codes(c.e, &c.book, expect));
    ASSERT_EQ(expect, c.codes);
    const std::vector<std::uint32_t> words = to_words(c.e.payload);
    const std::vector<VectorPlace> places = vector_places(c.e);
    std::vector<std::uint8_t> row(static_cast<std::size_t>(s.dim) + 1);
    for (std::size_t v = 0; v < places.size(); ++v) {
      Reader r(HostWords{words.data()}, words.size(), places[v].pos);
      const bool ok = decode_row(r, c.table, s.dim, places[v].bits, row);
      ASSERT_TRUE(ok) << "dim " << s.dim << ", vector " << v;
      ASSERT_TRUE(std::equal(row.begin(), row.end() - 1, expect.begin() + v * s.dim))
          << "dim " << s.dim << ", vector " << v;
    }
    // The same codes bit-packed at each width that holds them.
    for (const int width : {2, 4, 8}) {
      std::vector<std::uint8_t> narrow(c.codes);
      for (auto& x : narrow) x = static_cast<std::uint8_t>(x & ((1u << width) - 1u));
      CodecConfig config;
      config.block_size = s.block;
      config.kind = CodecKind::BitPack;
      config.bitpack_width = width;
      auto p = encode_codes(narrow, s.tokens, s.heads, s.dim, config);
      ASSERT_TRUE(p) << p.message();
      ASSERT_TRUE(decode_codes(*p, nullptr, expect));
      ASSERT_EQ(expect, narrow);
      const std::vector<std::uint32_t> pw = to_words(p->payload);
      const std::vector<VectorPlace> pp = vector_places(*p);
      for (std::size_t v = 0; v < pp.size(); ++v) {
        Reader r(HostWords{pw.data()}, pw.size(), pp[v].pos);
        auto store = [&](int ch, std::uint32_t code) {
          row[static_cast<std::size_t>(ch)] = static_cast<std::uint8_t>(code);
        };
        if (width == 2) word_stream::decode_packed_vector<2>(r, s.dim, store);
        if (width == 4) word_stream::decode_packed_vector<4>(r, s.dim, store);
        if (width == 8) word_stream::decode_packed_vector<8>(r, s.dim, store);
        ASSERT_TRUE(std::equal(row.begin(), row.end() - 1, expect.begin() + v * s.dim))
            << "width " << width << ", dim " << s.dim << ", vector " << v;
      }
    }
  }
}

// The GPU kernels stage each block's stream in shared memory and decode from there
// (stage_window, StagedWords): the same codes whether a block's words fit the stage or not.
TEST(WordStream, StagedBlocksDecodeAsThePayload) {
  detail::Rng rng(41);
  const Shape s{200, 3, 128, 64};
  const Coded c = huffman_coded(rng, s, 4);
  const EncodedCodes& e = c.e;
  const std::vector<std::uint32_t> words = to_words(e.payload);
  std::vector<std::uint8_t> row(static_cast<std::size_t>(s.dim) + 1);
  const int blocks = e.block_count();
  for (const std::uint32_t capacity : {0u, 8u, 100u, 1024u, 1u << 20}) {
    int whole = 0;
    for (int b = 0; b < blocks; ++b) {
      const auto place = block_layout::place_of(b, s.heads, s.tokens, s.block);
      const std::uint64_t first = e.block_offsets[static_cast<std::size_t>(b)];
      const std::uint64_t end =
          b + 1 < blocks ? e.block_offsets[static_cast<std::size_t>(b) + 1] : e.payload.size();
      const word_stream::StageWindow win =
          word_stream::stage_window(first, end, words.size(), capacity);
      ASSERT_EQ(win.base % 4, 0u);
      ASSERT_LE(win.base * 4, first);
      ASSERT_LE(win.base + win.count, words.size());
      ASSERT_LE(win.count, capacity);
      // The stage holds the window's words and garbage past them, which must never be read.
      std::vector<std::uint32_t> stage(win.count + 64, 0xdeadbeefu);
      std::copy_n(words.begin() + static_cast<std::ptrdiff_t>(win.base), win.count, stage.begin());
      whole += win.base + win.count >= std::min<std::uint64_t>((end + 3) / 4 + 2, words.size());
      const word_stream::StagedWords<HostWords> staged{stage.data(), HostWords{words.data()},
                                                       win.base, win.count};
      const std::uint64_t v0 = place.first_vector;
      std::uint64_t pos = 8 * first;
      for (int i = 0; i < place.tokens; ++i) {
        const std::uint32_t bits = e.vector_bits[v0 + static_cast<std::uint64_t>(i)];
        word_stream::WordReader<word_stream::StagedWords<HostWords>> r(staged, words.size(), pos);
        const bool ok = decode_row(r, c.table, s.dim, bits, row);
        const std::size_t token = static_cast<std::size_t>(place.first_token + i);
        ASSERT_TRUE(ok) << "capacity " << capacity << ", block " << b << ", vector " << i;
        ASSERT_TRUE(std::equal(
            row.begin(), row.end() - 1,
            c.codes.begin() + static_cast<std::ptrdiff_t>((token * s.heads + place.head) * s.dim)))
            << "capacity " << capacity << ", block " << b << ", vector " << i;
        pos += bits;
      }
    }
    // 1024 words hold every block here (about 2.5 bits a code: 2.6 KB a block of 64 tokens); 100
    // only the last token block's (8 tokens), 8 none.
    const int expect_whole = capacity >= 1024 ? blocks : capacity == 100 ? s.heads : 0;
    EXPECT_EQ(whole, expect_whole) << capacity;
  }
}

TEST(WordStream, FlagsTheCorruptVectorsThePlainDecoderRejects) {
  detail::Rng rng(31);
  const Shape s{70, 3, 24, 32};
  const Coded c = huffman_coded(rng, s, 2);
  const std::vector<VectorPlace> places = vector_places(c.e);
  const CodeMap canon = code_map(c.book);
  int rejected = 0, accepted = 0;
  std::vector<std::uint8_t> row(static_cast<std::size_t>(s.dim) + 1), plain_row;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::uint8_t> bytes(c.e.payload.begin(), c.e.payload.end());
    const int flips = 1 + static_cast<int>(rng.below(4));
    for (int f = 0; f < flips; ++f) {
      bytes[rng.below(bytes.size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
    }
    // Now and then the last bytes go too, so streams run into the padding.
    if (trial % 5 == 0) bytes.resize(bytes.size() - 1 - rng.below(8));
    const std::vector<std::uint32_t> words = to_words(bytes);
    const PlainBits plain{bytes};
    for (std::size_t v = 0; v < places.size(); ++v) {
      Reader r(HostWords{words.data()}, words.size(), places[v].pos);
      const bool ok = decode_row(r, c.table, s.dim, places[v].bits, row);
      const bool plain_ok =
          plain_vector(canon, plain, places[v].pos, places[v].bits, s.dim, plain_row);
      ASSERT_EQ(ok, plain_ok) << "trial " << trial << ", vector " << v;
      if (ok) {
        ASSERT_TRUE(std::equal(plain_row.begin(), plain_row.end(), row.begin()))
            << "trial " << trial << ", vector " << v;
        ++accepted;
      } else {
        ++rejected;
      }
    }
  }
  // The damage reaches a share of the vectors, and the rest still decode.
  EXPECT_GT(rejected, 40);
  EXPECT_GT(accepted, rejected);
}

}  // namespace
}  // namespace kvlab
