// The three code codecs over KVComp's block layout: decode(encode(x)) == x on boundary and seeded
// random sizes and distributions, single vectors equal slices of the whole decode, appended blocks
// give the bytes of a one-shot encoding, Huffman's payload is within 3% of the order-0 entropy on
// KVComp-like code streams, every byte is accounted for, and the worked example of
// docs/FORMAT.md holds byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <tuple>
#include <vector>

#include "codec/bitpack.h"
#include "codec/codec_streams.h"
#include "core/random.h"
#include "kvlab/engine/codec/code_codec.h"

namespace kvlab {
namespace {

// The histograms' counters (count_codes with its four tables, count_packed_codes a slice at a
// time) against a plain count, reading the packed bytes by the packing's definition: code i at
// bit (i * b) % 8 of byte (i * b) / 8, low bits first.
TEST(CodeCounts, PackedAndByteCountsMatchAPlainCount) {
  detail::Rng rng(5);
  for (const int bits : {1, 2, 4, 8}) {
    const std::size_t count = (std::size_t{1} << 16) * 2 + 37;  // past two slices, odd tail
    std::vector<std::uint8_t> packed(detail::packed_bytes(count, bits));
    for (auto& b : packed) b = static_cast<std::uint8_t>(rng.below(256));
    // Long runs of one byte too: the case the four tables are for.
    std::fill(packed.begin(), packed.begin() + static_cast<std::ptrdiff_t>(packed.size() / 3),
              0x5a);
    std::vector<std::uint64_t> expected(std::size_t{1} << bits, 0);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t bit = i * static_cast<std::size_t>(bits);
      ++expected[(packed[bit / 8] >> (bit % 8)) & ((1u << bits) - 1)];
    }
    std::vector<std::uint64_t> got(expected.size(), 0);
    detail::count_packed_codes(packed.data(), count, bits, got.data());
    EXPECT_EQ(got, expected) << bits << " bits";
    if (bits == 8) {
      const CodeCounts direct = count_codes(packed);
      EXPECT_TRUE(std::equal(direct.begin(), direct.end(), expected.begin()));
    }
  }
}

// Codes below 64, as KVComp's are, take count_codes' byte counters a slice of 16320 at a time, a
// pass for each 16 values up to the slice's largest; a slice holding a larger code, and the tail,
// take the tables. Every count is checked against a plain one, with slices of each kind side by
// side and runs of one value long enough to overflow a byte counter that was not emptied in
// time.
TEST(CodeCounts, SmallCodesCountedBySlicesMatchAPlainCount) {
  detail::Rng rng(9);
  constexpr std::size_t kSlice = 255 * 64;
  for (const std::size_t count :
       {std::size_t{0}, std::size_t{63}, kSlice - 1, kSlice, 5 * kSlice + 77}) {
    std::vector<std::uint8_t> codes(count);
    for (auto& b : codes) b = static_cast<std::uint8_t>(rng.below(21));  // KVComp's 0..20
    if (count > 3 * kSlice) {
      std::fill(codes.begin(), codes.begin() + static_cast<std::ptrdiff_t>(kSlice), 15);
      std::fill(codes.begin() + static_cast<std::ptrdiff_t>(kSlice),
                codes.begin() + static_cast<std::ptrdiff_t>(2 * kSlice), 63);
      codes[2 * kSlice + 100] = 64;  // the third slice has a code the counters cannot take
      codes[3 * kSlice + 7] = 40;    // the fourth takes three passes
      codes[4 * kSlice + 5] = 255;
    }
    std::vector<std::uint64_t> expected(256, 0);
    for (const std::uint8_t c : codes) ++expected[c];
    const CodeCounts got = count_codes(codes);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin())) << count << " codes";
  }
}

constexpr auto& kKinds = kCodecKinds;

enum class Dist { Gaussian, Single, All256, Zeros, Uniform16, Narrow };

// KVComp-like codes: a discretised Gaussian around the middle of a 0..20 code range (rel_scale
// 0.05), sigma 1.4 giving an entropy of about 2.5 bits.
std::uint8_t gaussian_code(detail::Rng& rng, double sigma = 1.4, double mid = 10.0) {
  const double x = std::round(mid + sigma * rng.normal());
  return static_cast<std::uint8_t>(std::clamp(x, 0.0, 20.0));
}

std::vector<std::uint8_t> make_codes(Dist d, std::size_t n, std::uint64_t seed) {
  detail::Rng rng(seed);
  std::vector<std::uint8_t> c(n);
  for (auto& x : c) {
    switch (d) {
      case Dist::Gaussian:
        x = gaussian_code(rng);
        break;
      case Dist::Single:
        x = 201;
        break;
      case Dist::All256:
        x = static_cast<std::uint8_t>(rng.below(256));
        break;
      case Dist::Zeros:
        x = 0;
        break;
      case Dist::Uniform16:
        x = static_cast<std::uint8_t>(rng.below(16));
        break;
      case Dist::Narrow: {  // KVComp's values at rel_scale 0.2: codes 0..5, about 2.1 bits
        const double u = rng.uniform();
        x = u < 0.025 ? 0 : u < 0.165 ? 1 : u < 0.5 ? 2 : u < 0.835 ? 3 : u < 0.975 ? 4 : 5;
        break;
      }
    }
  }
  return c;
}

struct Case {
  CodecKind kind;
  int tokens, heads, dim, block;
  Dist dist;
  std::uint64_t seed;
};

std::string describe(const Case& c) {
  return std::string(codec_id(c.kind)) + " [" + std::to_string(c.tokens) + "," +
         std::to_string(c.heads) + "," + std::to_string(c.dim) + "] block " +
         std::to_string(c.block) + " dist " + std::to_string(static_cast<int>(c.dist)) + " seed " +
         std::to_string(c.seed);
}

// Encodes and decodes (whole and per vector) and checks equality; the Huffman book comes from
// `book_codes` (the prefill) so values outside it go through the escape; with `pairs`, a book
// of pair symbols from the pairs of `book_codes` (all codes must be below 16).
void check_round_trip(const Case& c, const std::vector<std::uint8_t>& book_codes,
                      bool pairs = false) {
  SCOPED_TRACE(describe(c) + (pairs ? " pairs" : ""));
  const std::size_t n = static_cast<std::size_t>(c.tokens) * c.heads * c.dim;
  const std::vector<std::uint8_t> codes = make_codes(c.dist, n, c.seed);
  auto book = pairs
                  ? HuffmanCodebook::from_histogram(count_code_pairs(book_codes, c.dim), true, true)
                  : HuffmanCodebook::from_histogram(count_codes(book_codes), false, true);
  ASSERT_TRUE(book.ok());
  auto enc = encode_codes(codes, c.tokens, c.heads, c.dim, {c.kind, c.block, 0}, &*book);
  ASSERT_TRUE(enc.ok()) << enc.message();
  ASSERT_TRUE(validate_encoded(*enc).ok()) << validate_encoded(*enc).message();
  // Sized without writing the streams: the same bytes.
  auto size = encoded_bytes(codes, c.tokens, c.heads, c.dim, {c.kind, c.block, 0}, &*book);
  ASSERT_TRUE(size.ok()) << size.message();
  EXPECT_EQ(*size, enc->total_bytes());
  std::vector<std::uint8_t> out(n, 0xee);
  Status st = decode_codes(*enc, &*book, out);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(out, codes);
  // Every vector alone equals its slice; sample them on big tensors.
  std::vector<std::uint8_t> vec(static_cast<std::size_t>(c.dim));
  const int step = std::max(1, c.tokens * c.heads / 64);
  for (int v = 0; v < c.tokens * c.heads; v += step) {
    const int t = v / c.heads, h = v % c.heads;
    Status vs = decode_vector(*enc, &*book, t, h, vec);
    ASSERT_TRUE(vs.ok()) << vs.message();
    const auto at = codes.begin() + (static_cast<std::ptrdiff_t>(t) * c.heads + h) * c.dim;
    ASSERT_TRUE(std::equal(vec.begin(), vec.end(), at)) << "token " << t << " head " << h;
  }
}

TEST(CodeCodec, RoundTripBoundarySizes) {
  const int block = 16;
  for (CodecKind kind : kKinds) {
    for (int tokens : {0, 1, block - 1, block, block + 1, 2 * block + 3}) {
      for (Dist d : {Dist::Gaussian, Dist::Single, Dist::All256, Dist::Zeros}) {
        for (auto [heads, dim] : {std::pair{1, 1}, std::pair{2, 7}, std::pair{3, 16},
                                  std::pair{2, 33}, std::pair{1, 128}}) {
          const Case c{kind, tokens, heads, dim, block, d, 7u + static_cast<unsigned>(tokens)};
          // Book from the same distribution, and from a Gaussian prefill (escapes for the rest).
          check_round_trip(c, make_codes(d, 4096, 99));
          check_round_trip(c, make_codes(Dist::Gaussian, 4096, 98));
        }
      }
    }
  }
}

TEST(CodeCodec, RoundTripSeededRandomSizes) {
  detail::Rng rng(2025);
  for (int trial = 0; trial < 120; ++trial) {
    const Case c{kKinds[rng.below(std::size(kKinds))],
                 static_cast<int>(rng.below(300)),
                 1 + static_cast<int>(rng.below(4)),
                 1 + static_cast<int>(rng.below(160)),
                 1 + static_cast<int>(rng.below(100)),
                 static_cast<Dist>(rng.below(5)),
                 rng.next()};
    check_round_trip(c, make_codes(static_cast<Dist>(rng.below(5)), 1 + rng.below(5000), trial));
  }
}

// Where encoding fails, sizing fails with the same message: a code too wide for BitPack's
// width, a code above 15 for a pair book, a vector of escapes past the u16 bit count, a
// missing book, codes that do not fill the shape.
TEST(CodeCodec, EncodedBytesFailWhereEncodingFails) {
  const auto wide = make_codes(Dist::All256, 4 * 2 * 16, 5);
  const auto narrow = make_codes(Dist::Narrow, 4 * 2 * 16, 5);
  auto single = HuffmanCodebook::from_histogram(count_codes(narrow), false, true);
  auto pairs = HuffmanCodebook::from_histogram(count_code_pairs(narrow, 16), true, true);
  ASSERT_TRUE(single.ok() && pairs.ok());
  const auto all256 = make_codes(Dist::All256, 8000, 3);  // escapes: 8 bits and more a code
  struct Failing {
    std::vector<std::uint8_t> codes;
    int tokens, heads, dim;
    CodecConfig config;
    const HuffmanCodebook* book;
  };
  int index = 0;
  for (const Failing& f : {
           Failing{wide, 4, 2, 16, {CodecKind::BitPack, 4, 2}, nullptr},
           Failing{wide, 4, 2, 16, {CodecKind::Huffman, 4, 0}, &*pairs},
           Failing{all256, 1, 1, 8000, {CodecKind::Huffman, 4, 0}, &*single},
           Failing{narrow, 4, 2, 16, {CodecKind::Huffman, 4, 0}, nullptr},
           Failing{narrow, 5, 2, 16, {CodecKind::VarWidth, 4, 0}, nullptr},
           Failing{narrow, 4, 2, 16, {CodecKind::VarWidth, 0, 0}, nullptr},
       }) {
    SCOPED_TRACE("case " + std::to_string(index++));
    auto enc = encode_codes(f.codes, f.tokens, f.heads, f.dim, f.config, f.book);
    auto size = encoded_bytes(f.codes, f.tokens, f.heads, f.dim, f.config, f.book);
    ASSERT_FALSE(enc.ok());
    ASSERT_FALSE(size.ok());
    EXPECT_EQ(size.message(), enc.message());
  }
}

// The shapes the Huffman block decoder treats apart: blocks of fewer than four vectors (fewer
// runs side by side), blocks over 16 Ki codes (decoded chunk by chunk), vectors too wide for
// runs (dim > 4096: vector by vector), one-code vectors, each at the boundary token counts.
TEST(CodeCodec, HuffmanBlockShapesRoundTrip) {
  struct Shape {
    int heads, dim, block;
  };
  for (const Shape sh :
       {Shape{1, 128, 1}, Shape{2, 128, 3}, Shape{1, 128, 4}, Shape{3, 5, 5}, Shape{1, 128, 300},
        Shape{2, 1, 20000}, Shape{2, 4096, 5}, Shape{1, 4100, 6}, Shape{1, 3, 2}}) {
    for (int tokens : {0, 1, sh.block - 1, sh.block, sh.block + 1}) {
      for (Dist d : {Dist::Gaussian, Dist::Single, Dist::All256}) {
        const Case c{CodecKind::Huffman,
                     tokens,
                     sh.heads,
                     sh.dim,
                     sh.block,
                     d,
                     11u + static_cast<unsigned>(tokens)};
        check_round_trip(c, make_codes(d, 4096, 99));
        // Escapes take up to 20 bits: wide vectors of them pass the u16 bit count.
        if (sh.dim <= 3000) check_round_trip(c, make_codes(Dist::Gaussian, 4096, 98));
      }
    }
  }
}

// Pair books (docs/FORMAT.md, "Pair symbols"): boundary token counts, odd and even dims, books
// from the same codes and from other codes (unseen pairs take the escape), and the shapes the
// block decoder treats apart (symbols of many vectors through its scratch, one vector's symbols
// over the scratch, vectors too wide for runs).
TEST(CodeCodec, PairBooksRoundTrip) {
  const int block = 16;
  for (int tokens : {0, 1, block - 1, block, block + 1, 2 * block + 3}) {
    for (Dist d : {Dist::Narrow, Dist::Uniform16, Dist::Zeros}) {
      for (auto [heads, dim] : {std::pair{1, 1}, std::pair{2, 7}, std::pair{3, 16},
                                std::pair{2, 33}, std::pair{1, 128}}) {
        const Case c{CodecKind::Huffman, tokens, heads, dim, block, d, 3u + unsigned(tokens)};
        check_round_trip(c, make_codes(d, 4096, 99), true);
        check_round_trip(c, make_codes(Dist::Narrow, 4096, 98), true);
        check_round_trip(c, make_codes(Dist::Zeros, 64, 98), true);
      }
    }
  }
  for (auto [heads, dim, blk] : {std::tuple{1, 128, 300}, std::tuple{2, 5000, 3},
                                 std::tuple{1, 9001, 2}, std::tuple{2, 4100, 6}}) {
    for (int tokens : {1, blk, blk + 1}) {
      const Case c{CodecKind::Huffman, tokens, heads, dim, blk, Dist::Narrow, 5};
      check_round_trip(c, make_codes(Dist::Narrow, 4096, 97), true);
    }
  }
}

// A pair book holds codes below 16 only: a larger code is an error naming it, and nothing is
// appended.
TEST(CodeCodec, PairBookRejectsCodesAboveFifteen) {
  std::vector<std::uint8_t> codes = make_codes(Dist::Narrow, 4 * 16, 1);
  auto book = HuffmanCodebook::from_histogram(count_code_pairs(codes, 16), true, true);
  ASSERT_TRUE(book.ok());
  auto enc = encode_codes(codes, 4, 1, 16, {CodecKind::Huffman, 4, 0}, &*book);
  ASSERT_TRUE(enc.ok());
  const EncodedCodes before = *enc;
  codes[16 + 3] = 16;
  Status st = append_tokens(*enc, std::span(codes).subspan(0, 32), 2, &*book);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("code 16 at token 5"), std::string::npos) << st.message();
  EXPECT_EQ(enc->payload, before.payload);
  EXPECT_EQ(enc->vector_bits, before.vector_bits);
}

// choose_codebook: pairs where the codes fit 4 bits and pairs code them in fewer bits; single
// codes otherwise, or when pairs are not allowed.
TEST(CodeCodec, ChooseCodebookPicksPairsForSmallCodes) {
  const auto narrow = make_codes(Dist::Narrow, 64 * 128, 4);
  auto picked = choose_codebook(narrow, 128, 5, count_codes(narrow));
  ASSERT_TRUE(picked.ok());
  EXPECT_TRUE(picked->pairs());
  auto single = choose_codebook(narrow, 128, 255, count_codes(narrow));
  ASSERT_TRUE(single.ok());
  EXPECT_FALSE(single->pairs());
  // The bound decides, not the prefill: zeros alone code as pairs only if no later code can
  // pass 15.
  const auto zero_codes = make_codes(Dist::Zeros, 64 * 128, 4);
  auto zeros = choose_codebook(zero_codes, 128, 15, count_codes(zero_codes));
  ASSERT_TRUE(zeros.ok());  // one bit per code either way; pairs take half
  EXPECT_TRUE(zeros->pairs());
  auto zeros_wide = choose_codebook(zero_codes, 128, 20, count_codes(zero_codes));
  ASSERT_TRUE(zeros_wide.ok());
  EXPECT_FALSE(zeros_wide->pairs());
  // Codes above the bound (a bound that is wrong) give the single-code book, never a pair book
  // that could not code them.
  const auto wide = make_codes(Dist::Uniform16, 64 * 128, 4);
  auto above = choose_codebook(wide, 128, 7, count_codes(wide));
  ASSERT_TRUE(above.ok());
  EXPECT_FALSE(above->pairs());
}

// mean_code_bits against a direct count: the bits of the encoded stream equal the sum over
// values of count x mean bits; and each value's mean equals a plain walk over the pairs that
// adds half of each pair's bits to each of its codes (all of them to an odd vector's last code).
TEST(CodeCodec, MeanCodeBitsAddUpToThePayload) {
  for (bool pairs : {false, true}) {
    const int tokens = 64, heads = 2, dim = 33;
    const auto codes = make_codes(Dist::Narrow, static_cast<std::size_t>(tokens) * heads * dim, 8);
    auto book = pairs ? HuffmanCodebook::from_histogram(count_code_pairs(codes, dim), true, true)
                      : HuffmanCodebook::from_histogram(count_codes(codes), false, true);
    ASSERT_TRUE(book.ok());
    auto enc = encode_codes(codes, tokens, heads, dim, {CodecKind::Huffman, 64, 0}, &*book);
    ASSERT_TRUE(enc.ok());
    std::uint64_t stream_bits = 0;
    for (std::uint16_t b : enc->vector_bits) stream_bits += b;
    const CodeCounts counts = count_codes(codes);
    const auto bits = mean_code_bits(codes, dim, *book, counts);
    if (pairs) {
      std::array<double, 256> walk{}, seen{};
      for (std::size_t v = 0; v < codes.size(); v += dim) {
        for (int i = 0; i < dim; i += 2) {
          const int a = codes[v + i], b = i + 1 < dim ? codes[v + i + 1] : 0;
          const double cost = book->cost_bits(static_cast<std::uint8_t>(a | (b << 4)));
          walk[a] += i + 1 < dim ? cost / 2 : cost;
          seen[a] += 1;
          if (i + 1 < dim) {
            walk[b] += cost / 2;
            seen[b] += 1;
          }
        }
      }
      for (int v = 0; v < 256; ++v) {
        EXPECT_EQ(bits[v], seen[v] > 0 ? walk[v] / seen[v] : 0.0) << "value " << v;
      }
    }
    double sum = 0;
    for (int v = 0; v < 256; ++v) sum += static_cast<double>(counts[v]) * bits[v];
    EXPECT_NEAR(sum, static_cast<double>(stream_bits), 1e-6 * static_cast<double>(stream_bits))
        << (pairs ? "pairs" : "codes");
  }
}

// The vector check of the block decoder sums the bits of each value over the decoded codes; its
// SIMD form equals the plain loop for any length and table.
TEST(CodeCodec, CodeBitSumsAgree) {
  detail::Rng rng(77);
  std::vector<std::uint8_t> cost(256), codes(300);
  for (int trial = 0; trial < 200; ++trial) {
    for (auto& c : cost) c = static_cast<std::uint8_t>(rng.below(21));
    for (auto& c : codes) c = static_cast<std::uint8_t>(rng.below(256));
    const std::size_t n = rng.below(codes.size() + 1);
    EXPECT_EQ(detail::sum_code_bits(codes.data(), n, cost.data()),
              detail::sum_code_bits_scalar(codes.data(), n, cost.data()))
        << "n " << n;
  }
}

// A value that has a code of its own written as escape + 8 bits: no encoder writes it, but the
// one-by-one decoder takes it (it is a valid code path), so the block decoder must as well.
TEST(CodeCodec, EscapedValueWithItsOwnCodeDecodes) {
  CodeCounts h{};
  h[0] = 40;
  h[1] = 30;
  h[2] = 20;
  auto book = HuffmanCodebook::from_histogram(h, false, true);
  ASSERT_TRUE(book.ok());
  const int esc_len = book->length(HuffmanCodebook::kEscape);
  const std::uint32_t esc_bits = book->enc_bits(9) & ((1u << esc_len) - 1);  // 9 has no code
  const int tokens = 9, dim = 16;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(tokens) * dim);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i % 3);
  auto enc = encode_codes(codes, tokens, 1, dim, {CodecKind::Huffman, tokens, 0}, &*book);
  ASSERT_TRUE(enc.ok());
  // Rewrite the block with token 5's code 4 (value 1) escaped: 8 + esc_len bits instead of its own.
  HugePageBytes payload;
  detail::BitWriter w(payload);
  for (int t = 0; t < tokens; ++t) {
    const std::uint64_t before = w.bits_written();
    for (int j = 0; j < dim; ++j) {
      const std::uint8_t v = codes[static_cast<std::size_t>(t) * dim + j];
      if (t == 5 && j == 4) {
        w.put(esc_bits | (static_cast<std::uint32_t>(v) << esc_len), esc_len + 8);
      } else {
        w.put(book->enc_bits(v), book->cost_bits(v));
      }
    }
    enc->vector_bits[static_cast<std::size_t>(t)] =
        static_cast<std::uint16_t>(w.bits_written() - before);
  }
  w.flush();
  enc->payload = payload;
  std::vector<std::uint8_t> out(codes.size());
  Status st = decode_codes(*enc, &*book, out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(out, codes);
}

// Huffman streams against a writer that puts every code's canonical code word bit by bit, most
// significant bit first, and an escaped value as the escape's code word and its 8 bits, least
// significant first (docs/FORMAT.md): the encoder looks codes below 64 up 32 at a time and
// writes the rest through its tables, so the vectors mix 32-code chunks of codes below 64 (the
// vector lookup), chunks holding an escape or a code of 64 or more (the tables), and tails.
TEST(CodeCodec, HuffmanStreamsMatchABitByBitWriter) {
  CodeCounts h{};
  for (int v = 0; v < 40; ++v) h[static_cast<std::size_t>(v)] = 1 + (v * 37) % 23;
  h[7] = 0;  // 7, and everything from 40 up, take the escape
  h[200] = 3;
  auto book = HuffmanCodebook::from_histogram(h, false, true);
  ASSERT_TRUE(book.ok());
  ASSERT_FALSE(book->pairs());
  detail::Rng rng(41);
  for (const int dim : {1, 31, 32, 33, 64, 100, 128, 257}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    const int tokens = 12, heads = 2;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(tokens) * heads * dim);
    for (std::size_t i = 0; i < codes.size(); ++i) {
      const std::size_t chunk = (i % static_cast<std::size_t>(dim)) / 32;
      const std::uint64_t r = rng.below(1000);
      // Mostly codes below 40; now and then a 7 (escaped), a 45 (escaped, below 64), a 200
      // (own code, above 63) or a 255 (escaped, above 63); some chunks have none of those.
      std::uint8_t v = static_cast<std::uint8_t>(rng.below(40));
      if (chunk % 3 != 0 && r < 8) v = 7;
      if (chunk % 3 != 0 && r >= 8 && r < 12) v = 45;
      if (chunk % 3 == 2 && r >= 12 && r < 16) v = 200;
      if (chunk % 3 == 2 && r >= 16 && r < 18) v = 255;
      codes[i] = v;
    }
    auto enc = encode_codes(codes, tokens, heads, dim, {CodecKind::Huffman, 5, 0}, &*book);
    ASSERT_TRUE(enc.ok()) << enc.message();
    // The reference: blocks of 5 tokens, per head, each vector's bits one after another, the
    // block padded to a whole byte.
    std::vector<std::uint8_t> payload;
    std::vector<std::uint16_t> vector_bits;
    for (int t0 = 0; t0 < tokens; t0 += 5) {
      for (int head = 0; head < heads; ++head) {
        std::uint64_t bit = 0;
        const std::size_t start = payload.size();
        const auto put = [&](std::uint32_t value, int count, bool msb_first) {
          for (int k = 0; k < count; ++k) {
            const int b = msb_first ? count - 1 - k : k;
            if (bit % 8 == 0) payload.push_back(0);
            payload[start + bit / 8] |= static_cast<std::uint8_t>(((value >> b) & 1u) << (bit % 8));
            ++bit;
          }
        };
        for (int t = t0; t < std::min(tokens, t0 + 5); ++t) {
          const std::uint64_t before = bit;
          for (int j = 0; j < dim; ++j) {
            const std::uint8_t v = codes[(static_cast<std::size_t>(t) * heads + head) * dim +
                                         static_cast<std::size_t>(j)];
            if (book->length(v) > 0) {
              put(book->code(v), book->length(v), true);
            } else {
              put(book->code(HuffmanCodebook::kEscape), book->length(HuffmanCodebook::kEscape),
                  true);
              put(v, 8, false);
            }
          }
          vector_bits.push_back(static_cast<std::uint16_t>(bit - before));
        }
      }
    }
    EXPECT_EQ(enc->vector_bits, vector_bits);
    ASSERT_EQ(enc->payload.size(), payload.size());
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), enc->payload.begin()));
  }
}

TEST(CodeCodec, EmptyHistogramBookEscapesEverything) {
  const Case c{CodecKind::Huffman, 40, 2, 24, 16, Dist::All256, 5};
  check_round_trip(c, {});
}

TEST(CodeCodec, HuffmanWithinThreePercentOfEntropy) {
  // A KVComp-sized tensor: 4096 tokens, 8 KV heads, head_dim 128, blocks of 64 tokens.
  const int tokens = 4096, heads = 8, dim = 128, block = 64;
  const std::vector<std::uint8_t> codes =
      make_codes(Dist::Gaussian, static_cast<std::size_t>(tokens) * heads * dim, 31);
  const CodeCounts hist = count_codes(codes);
  const double entropy = shannon_entropy_bits(hist);
  auto book = HuffmanCodebook::from_histogram(hist, false, true);
  ASSERT_TRUE(book.ok());
  const double n = static_cast<double>(codes.size());
  double bits_per_code[4];
  for (CodecKind kind : kKinds) {
    auto enc = encode_codes(codes, tokens, heads, dim, {kind, block, 0}, &*book);
    ASSERT_TRUE(enc.ok()) << enc.message();
    const double payload = 8.0 * static_cast<double>(enc->payload_bytes()) / n;
    const double total = 8.0 * static_cast<double>(enc->total_bytes() + codebook_bytes(kind)) / n;
    bits_per_code[static_cast<int>(kind)] = payload;
    std::printf(
        "[ codec   ] %-8s entropy %.4f  payload %.4f bits/code (%.2f%% over)  total with "
        "metadata %.4f bits/code\n",
        std::string(codec_id(kind)).c_str(), entropy, payload, 100.0 * (payload / entropy - 1.0),
        total);
  }
  EXPECT_GT(entropy, 2.0);
  EXPECT_LT(entropy, 3.0);
  EXPECT_LE(bits_per_code[2], 1.03 * entropy);
  EXPECT_GE(bits_per_code[2], entropy);
  EXPECT_LT(bits_per_code[2], bits_per_code[1]);
  EXPECT_LT(bits_per_code[1], bits_per_code[0]);
}

// At about 2.2 bits per code (KVComp at rel_scale 0.2) whole bits per code cannot come within
// 3% of the entropy; whole bits per pair of codes do.
TEST(CodeCodec, PairBookWithinThreePercentOfEntropyAtTwoBits) {
  const int tokens = 4096, heads = 8, dim = 128, block = 64;
  const std::vector<std::uint8_t> codes =
      make_codes(Dist::Narrow, static_cast<std::size_t>(tokens) * heads * dim, 32);
  const double entropy = shannon_entropy_bits(count_codes(codes));
  const double n = static_cast<double>(codes.size());
  double payload[2];
  for (bool pairs : {false, true}) {
    auto book = choose_codebook(codes, dim, pairs ? 5 : 255, count_codes(codes), true);
    ASSERT_TRUE(book.ok());
    ASSERT_EQ(book->pairs(), pairs);
    auto enc = encode_codes(codes, tokens, heads, dim, {CodecKind::Huffman, block, 0}, &*book);
    ASSERT_TRUE(enc.ok()) << enc.message();
    payload[pairs] = 8.0 * static_cast<double>(enc->payload_bytes()) / n;
    std::printf("[ codec   ] huffman %-5s entropy %.4f  payload %.4f bits/code (%.2f%% over)\n",
                pairs ? "pairs" : "codes", entropy, payload[pairs],
                100.0 * (payload[pairs] / entropy - 1.0));
  }
  EXPECT_GT(entropy, 2.0);
  EXPECT_LT(entropy, 2.4);
  EXPECT_GE(payload[1], entropy);
  EXPECT_LE(payload[1], 1.03 * entropy);
  EXPECT_LT(payload[1], payload[0]);
}

TEST(CodeCodec, AppendGivesTheBytesOfOneShotEncoding) {
  for (CodecKind kind : kKinds) {
    SCOPED_TRACE(std::string(codec_id(kind)));
    const int heads = 3, dim = 20, block = 8, total = 8 * 7 + 5;
    const std::size_t row = static_cast<std::size_t>(heads) * dim;
    std::vector<std::uint8_t> codes = make_codes(Dist::Gaussian, total * row, 17);
    codes[row * 50 + 3] = 250;  // a late outlier: escape for Huffman, wider group for VarWidth
    const CodecConfig config{kind, block, kind == CodecKind::BitPack ? 8 : 0};
    auto book =
        HuffmanCodebook::from_histogram(count_codes(std::span(codes).first(row * 16)), false, true);
    ASSERT_TRUE(book.ok());
    auto whole = encode_codes(codes, total, heads, dim, config, &*book);
    ASSERT_TRUE(whole.ok()) << whole.message();

    // Prefill of 16 tokens, then one block, then two blocks and a partial one.
    auto grown = encode_codes(std::span(codes).first(16 * row), 16, heads, dim, config, &*book);
    ASSERT_TRUE(grown.ok());
    const HugePageBytes prefill_payload = grown->payload;
    ASSERT_TRUE(append_tokens(*grown, std::span(codes).subspan(16 * row, 8 * row), 8, &*book).ok());
    ASSERT_TRUE(std::equal(prefill_payload.begin(), prefill_payload.end(), grown->payload.begin()));
    Status st = append_tokens(*grown, std::span(codes).subspan(24 * row), total - 24, &*book);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(grown->tokens, whole->tokens);
    EXPECT_EQ(grown->payload, whole->payload);
    EXPECT_EQ(grown->block_offsets, whole->block_offsets);
    EXPECT_EQ(grown->vector_bits, whole->vector_bits);

    // The last block is partial now: appending would have to rewrite it.
    const EncodedCodes before = *grown;
    Status partial = append_tokens(*grown, std::span(codes).first(row), 1, &*book);
    ASSERT_FALSE(partial.ok());
    EXPECT_NE(partial.message().find("partial"), std::string::npos);
    EXPECT_EQ(grown->payload, before.payload);
  }
}

TEST(CodeCodec, FailedAppendLeavesTheTensorUnchanged) {
  const int heads = 1, dim = 8000, block = 4;  // 8000 escaped 9-bit codes = 72000 bits > u16
  auto book =
      HuffmanCodebook::from_histogram(count_codes(std::vector<std::uint8_t>(100, 1)), false, true);
  ASSERT_TRUE(book.ok());
  auto enc = encode_codes(std::vector<std::uint8_t>(4 * dim, 1), 4, heads, dim,
                          {CodecKind::Huffman, block, 0}, &*book);
  ASSERT_TRUE(enc.ok()) << enc.message();
  const EncodedCodes before = *enc;
  std::vector<std::uint8_t> more(4 * dim, 1);
  std::fill(more.begin() + 3 * dim, more.end(), 77);
  Status st = append_tokens(*enc, more, 4, &*book);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("u16"), std::string::npos) << st.message();
  EXPECT_EQ(enc->tokens, before.tokens);
  EXPECT_EQ(enc->payload, before.payload);
  EXPECT_EQ(enc->block_offsets, before.block_offsets);
  EXPECT_EQ(enc->vector_bits, before.vector_bits);
}

TEST(CodeCodec, BitPackWidthAndAccounting) {
  const int tokens = 37, heads = 2, dim = 7, block = 16;
  const std::size_t n = static_cast<std::size_t>(tokens) * heads * dim;
  for (auto [dist, width] :
       {std::pair{Dist::Zeros, 2}, std::pair{Dist::Uniform16, 4}, std::pair{Dist::All256, 8}}) {
    auto enc =
        encode_codes(make_codes(dist, n, 3), tokens, heads, dim, {CodecKind::BitPack, block, 0});
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->bitpack_width, width);
    // Two full token blocks and one of 5 tokens, per head, each rounded up to whole bytes.
    const std::uint64_t expect =
        2 * heads * ((16 * dim * width + 7) / 8) + heads * ((5 * dim * width + 7) / 8);
    EXPECT_EQ(enc->payload_bytes(), expect);
    EXPECT_EQ(enc->metadata_bytes(), EncodedCodes::kHeaderBytes);
  }
  auto narrow = encode_codes(make_codes(Dist::Uniform16, n, 3), tokens, heads, dim,
                             {CodecKind::BitPack, block, 2});
  ASSERT_FALSE(narrow.ok());
  EXPECT_NE(narrow.message().find("does not fit 2 bits"), std::string::npos);
  EXPECT_FALSE(encode_codes({}, 0, 1, 1, {CodecKind::BitPack, block, 3}).ok());
}

TEST(CodeCodec, StreamCodecMetadataIsCounted) {
  const int tokens = 37, heads = 2, dim = 33, block = 16;
  const auto codes = make_codes(Dist::Gaussian, static_cast<std::size_t>(tokens) * heads * dim, 4);
  for (CodecKind kind : {CodecKind::VarWidth, CodecKind::Huffman}) {
    auto book = HuffmanCodebook::from_histogram(count_codes(codes), false, true);
    auto enc = encode_codes(codes, tokens, heads, dim, {kind, block, 0}, &*book);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->block_offsets.size(), 3u * heads);
    EXPECT_EQ(enc->vector_bits.size(), static_cast<std::size_t>(tokens) * heads);
    EXPECT_EQ(enc->metadata_bytes(), EncodedCodes::kHeaderBytes + 4 * 3 * heads +
                                         2 * static_cast<std::uint64_t>(tokens) * heads);
    EXPECT_EQ(enc->header_bits(), kind == CodecKind::VarWidth
                                      ? static_cast<std::uint64_t>(tokens) * heads * 3 * 4
                                      : 0u);
  }
}

// The worked example of docs/FORMAT.md, byte for byte: the contract a CUDA encoder follows.
TEST(CodeCodec, FormatWorkedExample) {
  CodeCounts h{};
  h[0] = 4;
  h[1] = 2;
  h[2] = 1;
  h[3] = 1;
  auto book = HuffmanCodebook::from_histogram(h, false, true);
  ASSERT_TRUE(book.ok());
  EXPECT_EQ(book->length(0), 1);
  for (int s : {1, 2, 3, HuffmanCodebook::kEscape}) EXPECT_EQ(book->length(s), 3);
  EXPECT_EQ(book->code(0), 0b0u);
  EXPECT_EQ(book->code(1), 0b100u);
  EXPECT_EQ(book->code(2), 0b101u);
  EXPECT_EQ(book->code(3), 0b110u);
  EXPECT_EQ(book->code(HuffmanCodebook::kEscape), 0b111u);
  const std::vector<std::uint8_t> ser = book->serialize();
  EXPECT_EQ(ser[0], 0x31);
  EXPECT_EQ(ser[1], 0x33);
  EXPECT_EQ(ser[2], 0x00);
  EXPECT_EQ(ser[128], 0x03);

  const std::vector<std::uint8_t> codes = {0, 0, 1, 2, 0, 3, 0, 7, 1, 0, 0, 0};
  using Bytes = HugePageBytes;
  auto huff = encode_codes(codes, 3, 1, 4, {CodecKind::Huffman, 2, 0}, &*book);
  ASSERT_TRUE(huff.ok());
  EXPECT_EQ(huff->payload, (Bytes{0xa4, 0xe6, 0x07, 0x01}));
  EXPECT_EQ(huff->block_offsets, (std::vector<std::uint32_t>{0, 3}));
  EXPECT_EQ(huff->vector_bits, (std::vector<std::uint16_t>{8, 16, 6}));
  auto var = encode_codes(codes, 3, 1, 4, {CodecKind::VarWidth, 2, 0});
  ASSERT_TRUE(var.ok());
  EXPECT_EQ(var->payload, (Bytes{0x02, 0x39, 0x18, 0x0e, 0x11}));
  EXPECT_EQ(var->block_offsets, (std::vector<std::uint32_t>{0, 4}));
  EXPECT_EQ(var->vector_bits, (std::vector<std::uint16_t>{12, 16, 8}));
  auto pack = encode_codes(codes, 3, 1, 4, {CodecKind::BitPack, 2, 0});
  ASSERT_TRUE(pack.ok());
  EXPECT_EQ(pack->bitpack_width, 4);
  EXPECT_EQ(pack->payload, (Bytes{0x00, 0x21, 0x30, 0x70, 0x01, 0x00}));

  // rANS: the histogram and the escape's 1 give 1821, 910, 455, 455 and 455; two blocks, no
  // words (every state holds its lanes' bits), 32 states each.
  ASSERT_NE(book->rans(), nullptr);
  const RansTable& t = *book->rans();
  EXPECT_EQ(t.frequency(0), 1821u);
  EXPECT_EQ(t.frequency(1), 910u);
  EXPECT_EQ(t.frequency(2), 455u);
  EXPECT_EQ(t.frequency(3), 455u);
  EXPECT_EQ(t.frequency(RansTable::kEscape), 455u);
  EXPECT_EQ(t.escape_start(), 3641u);
  auto rans = encode_codes(codes, 3, 1, 4, {CodecKind::Rans, 2, 0}, &*book);
  ASSERT_TRUE(rans.ok()) << rans.message();
  EXPECT_EQ(rans->block_offsets, (std::vector<std::uint32_t>{0, 128}));
  EXPECT_TRUE(rans->vector_bits.empty());
  EXPECT_EQ(rans->metadata_bytes(), 4u + 2 * 4);
  ASSERT_EQ(rans->payload.size(), 256u);
  auto state = [&](std::size_t block, int lane) {
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      v |= std::uint32_t{rans->payload[block * 128 + 4 * static_cast<std::size_t>(lane) + k]}
           << 8 * k;
    }
    return v;
  };
  const std::uint32_t block0[8] = {0x23709, 0x23709, 0x4872d, 0x90abb,
                                   0x23709, 0x90c82, 0x23709, 0x9009e41};
  for (int l = 0; l < 32; ++l) EXPECT_EQ(state(0, l), l < 8 ? block0[l] : 0x10000u) << l;
  const std::uint32_t block1[4] = {0x4872d, 0x23709, 0x23709, 0x23709};
  for (int l = 0; l < 32; ++l) EXPECT_EQ(state(1, l), l < 4 ? block1[l] : 0x10000u) << l;
}

TEST(CodeCodec, RejectsBadArguments) {
  auto book = HuffmanCodebook::from_histogram(CodeCounts{}, false, true);
  const std::vector<std::uint8_t> codes(2 * 3 * 4, 1);
  EXPECT_FALSE(encode_codes(codes, 2, 3, 4, {CodecKind::Huffman, 8, 0}, nullptr).ok());
  EXPECT_FALSE(encode_codes(codes, 2, 3, 5, {CodecKind::VarWidth, 8, 0}).ok());
  EXPECT_FALSE(encode_codes(codes, 2, 3, 4, {CodecKind::VarWidth, 0, 0}).ok());
  EXPECT_FALSE(encode_codes(codes, -2, 3, 4, {CodecKind::VarWidth, 8, 0}).ok());
  EXPECT_FALSE(encode_codes(codes, 2, 3, 4, {static_cast<CodecKind>(9), 8, 0}).ok());
  auto enc = encode_codes(codes, 2, 3, 4, {CodecKind::Huffman, 8, 0}, &*book);
  ASSERT_TRUE(enc.ok());
  std::vector<std::uint8_t> out(codes.size());
  EXPECT_FALSE(decode_codes(*enc, nullptr, out).ok());
  EXPECT_FALSE(decode_codes(*enc, &*book, std::span(out).first(5)).ok());
  std::vector<std::uint8_t> vec(4);
  EXPECT_FALSE(decode_vector(*enc, &*book, 2, 0, vec).ok());
  EXPECT_FALSE(decode_vector(*enc, &*book, 0, 3, vec).ok());
  EXPECT_FALSE(decode_vector(*enc, &*book, 0, 0, std::span(vec).first(3)).ok());
  EXPECT_EQ(parse_codec("varwidth").value(), CodecKind::VarWidth);
  EXPECT_FALSE(parse_codec("zstd").ok());
}

}  // namespace
}  // namespace kvlab
