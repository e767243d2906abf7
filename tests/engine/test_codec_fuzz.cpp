// Corrupt or truncated code streams: thousands of seeded random corruptions of the payload, the
// block offsets, the vector bit counts and the header fields must give an error or a successful
// decode of the right size, never a crash or an out-of-bounds read (run under ASan + UBSan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/random.h"
#include "kvlab/engine/codec/code_codec.h"

namespace kvlab {
namespace {

// A discretised Gaussian clamped to 0..top, with code 5 set to `odd` (a rare value).
std::vector<std::uint8_t> gaussian_codes(std::size_t n, std::uint64_t seed, double mid,
                                         double sigma, double top, std::uint8_t odd) {
  detail::Rng rng(seed);
  std::vector<std::uint8_t> c(n);
  for (auto& x : c) {
    const double v = mid + sigma * rng.normal();
    x = static_cast<std::uint8_t>(v < 0 ? 0 : v > top ? top : v);
  }
  c[5] = odd;
  return c;
}

// Codes 0..20, and a 255 so escapes and wide groups appear too.
std::vector<std::uint8_t> skewed_codes(std::size_t n, std::uint64_t seed) {
  return gaussian_codes(n, seed, 10.0, 1.5, 20.0, 255);
}

// Codes a pair book takes (all below 16): a narrower Gaussian, about 2.2 bits of entropy.
std::vector<std::uint8_t> small_codes(std::size_t n, std::uint64_t seed) {
  return gaussian_codes(n, seed, 5.0, 1.0, 15.0, 15);
}

HuffmanCodebook pair_book(int dim) {
  auto book =
      HuffmanCodebook::from_histogram(count_code_pairs(small_codes(4096, 1), dim), true, true);
  EXPECT_TRUE(book.ok());
  return *book;
}

void corrupt(EncodedCodes& e, detail::Rng& rng) {
  const int what = static_cast<int>(rng.below(10));
  auto pick = [&](auto& v) -> auto& {
    return v[rng.below(v.size())];
  };
  switch (what) {
    case 0:
    case 1:  // flip a few payload bits
      for (int k = 0, n = 1 + static_cast<int>(rng.below(8)); k < n && !e.payload.empty(); ++k) {
        pick(e.payload) ^= static_cast<std::uint8_t>(1u << rng.below(8));
      }
      break;
    case 2:  // truncate or extend the payload
      if (rng.below(2) != 0) {
        e.payload.resize(rng.below(e.payload.size() + 1));
      } else {
        e.payload.resize(e.payload.size() + 1 + rng.below(16), 0xff);
      }
      break;
    case 3:  // a bit count anywhere in u16
      if (!e.vector_bits.empty()) pick(e.vector_bits) = static_cast<std::uint16_t>(rng.next());
      break;
    case 4:  // a bit count off by a little, and another compensating (sum unchanged)
      if (e.vector_bits.size() >= 2) {
        const int d = 1 + static_cast<int>(rng.below(12));
        const std::size_t i = rng.below(e.vector_bits.size() - 1);
        e.vector_bits[i] = static_cast<std::uint16_t>(e.vector_bits[i] + d);
        e.vector_bits[i + 1] = static_cast<std::uint16_t>(e.vector_bits[i + 1] - d);
      }
      break;
    case 5:  // an offset anywhere, or shifted a little
      if (!e.block_offsets.empty()) {
        auto& o = pick(e.block_offsets);
        o = rng.below(2) != 0 ? static_cast<std::uint32_t>(rng.next())
                              : static_cast<std::uint32_t>(o + rng.below(9) - 4);
      }
      break;
    case 6:  // metadata arrays of the wrong length
      if (rng.below(2) != 0) {
        e.block_offsets.resize(rng.below(e.block_offsets.size() + 3));
      } else {
        e.vector_bits.resize(rng.below(e.vector_bits.size() + 3));
      }
      break;
    case 7:  // shape fields that disagree with the data
      switch (rng.below(4)) {
        case 0:
          e.tokens = static_cast<int>(rng.below(200)) - 2;
          break;
        case 1:
          e.heads = static_cast<int>(rng.below(5)) - 1;
          break;
        case 2:
          e.dim = static_cast<int>(rng.below(60)) - 1;
          break;
        default:
          e.block_size = static_cast<int>(rng.below(40)) - 1;
          break;
      }
      break;
    case 8:  // codec fields
      if (rng.below(2) != 0) {
        e.bitpack_width = static_cast<int>(rng.below(10));
      } else {
        e.kind = static_cast<CodecKind>(rng.below(5));
      }
      break;
    default:  // random payload bytes over a block
      for (std::size_t i = rng.below(e.payload.size() + 1), n = rng.below(64);
           i < e.payload.size() && n > 0; ++i, --n) {
        e.payload[i] = static_cast<std::uint8_t>(rng.next());
      }
      break;
  }
}

void fuzz_codec(CodecKind kind, const HuffmanCodebook& book, std::uint64_t seed, int variants,
                int* errors) {
  const int tokens = 70, heads = 2, dim = 24, block = 16;
  const std::size_t n_codes = static_cast<std::size_t>(tokens) * heads * dim;
  const auto codes = book.pairs() ? small_codes(n_codes, seed) : skewed_codes(n_codes, seed);
  auto clean = encode_codes(codes, tokens, heads, dim, {kind, block, 8}, &book);
  ASSERT_TRUE(clean.ok()) << clean.message();
  detail::Rng rng(seed);
  std::vector<std::uint8_t> out;
  std::vector<std::uint8_t> vec;
  for (int v = 0; v < variants; ++v) {
    EncodedCodes e = *clean;
    const int rounds = 1 + static_cast<int>(rng.below(3));
    for (int r = 0; r < rounds; ++r) corrupt(e, rng);
    // Size the output from the (possibly corrupt) header, as a caller would; guard absurd sizes.
    const long long n = static_cast<long long>(e.tokens) * e.heads * e.dim;
    out.assign(n > 0 && n < (1 << 20) ? static_cast<std::size_t>(n) : 0, 0);
    Status st = decode_codes(e, &book, out);
    if (!st.ok()) {
      ++*errors;
      EXPECT_FALSE(st.message().empty());
    }
    vec.assign(e.dim > 0 && e.dim < 4096 ? static_cast<std::size_t>(e.dim) : 0, 0);
    const int t = static_cast<int>(rng.below(static_cast<std::uint64_t>(tokens) + 2)) - 1;
    const int h = static_cast<int>(rng.below(heads + 1));
    (void)decode_vector(e, &book, t, h, vec);
    // A range of tokens (a tile of a stored cache): any bounds, whole blocks or not, sized from
    // the corrupt header as a caller would.
    const int first = static_cast<int>(rng.below(tokens + 2)) - 1;
    const int last = first + static_cast<int>(rng.below(2 * block + 2)) - 1;
    const long long range = static_cast<long long>(last - first) * e.heads * e.dim;
    std::vector<std::uint8_t> part(range > 0 && range < (1 << 20) ? range : 0);
    (void)decode_token_range(e, &book, first, last, part);
    (void)validate_encoded(e);
    // Appending to a corrupt tensor may succeed or fail, but never reads out of bounds.
    if (e.heads > 0 && e.dim > 0 && e.heads * e.dim <= 4096) {
      EncodedCodes grown = e;
      const std::vector<std::uint8_t> more(static_cast<std::size_t>(e.heads) * e.dim, 3);
      (void)append_tokens(grown, more, 1, &book);
    }
  }
}

TEST(CodecFuzz, CorruptStreamsGiveErrorsNotCrashes) {
  auto book = HuffmanCodebook::from_histogram(count_codes(skewed_codes(4096, 1)), false, true);
  ASSERT_TRUE(book.ok());
  for (CodecKind kind :
       {CodecKind::Huffman, CodecKind::VarWidth, CodecKind::BitPack, CodecKind::Rans}) {
    int errors = 0;
    fuzz_codec(kind, *book, 100 + static_cast<std::uint64_t>(kind), 1500, &errors);
    std::printf("[ fuzz     ] %s: 1500 corrupt variants, %d errors, %d decoded\n",
                std::string(codec_id(kind)).c_str(), errors, 1500 - errors);
    // Most corruptions are caught: only payload bit flips that still decode can pass.
    EXPECT_GT(errors, kind == CodecKind::BitPack ? 300 : 700) << codec_id(kind);
  }
  int errors = 0;
  fuzz_codec(CodecKind::Huffman, pair_book(24), 107, 1500, &errors);
  std::printf("[ fuzz     ] huffman pairs: 1500 corrupt variants, %d errors, %d decoded\n", errors,
              1500 - errors);
  EXPECT_GT(errors, 700);
  errors = 0;
  fuzz_codec(CodecKind::Rans, pair_book(24), 108, 1500, &errors);
  std::printf("[ fuzz     ] rans pairs: 1500 corrupt variants, %d errors, %d decoded\n", errors,
              1500 - errors);
  EXPECT_GT(errors, 700);
}

// The block decoder (runs of vectors side by side, checked afterwards) against the one-vector
// decoder on corrupt payloads and bit counts that still pass the structural checks: the same
// success, the same codes, and on failure the same first bad vector and reason.
class BlockVsVector : public ::testing::TestWithParam<bool> {};

TEST_P(BlockVsVector, BlockDecodeAgreesWithVectorDecode) {
  const bool pairs = GetParam();
  const int tokens = 150, heads = 2, dim = 40, block = 64;
  auto book =
      pairs ? Result<HuffmanCodebook>(pair_book(dim))
            : HuffmanCodebook::from_histogram(count_codes(skewed_codes(4096, 1)), false, true);
  ASSERT_TRUE(book.ok());
  const std::size_t n_codes = static_cast<std::size_t>(tokens) * heads * dim;
  const auto codes = pairs ? small_codes(n_codes, 9) : skewed_codes(n_codes, 9);
  auto clean = encode_codes(codes, tokens, heads, dim, {CodecKind::Huffman, block, 0}, &*book);
  ASSERT_TRUE(clean.ok());
  detail::Rng rng(4242);
  std::vector<std::uint8_t> whole(codes.size()), one(static_cast<std::size_t>(dim));
  int failures = 0;
  for (int v = 0; v < 600; ++v) {
    EncodedCodes e = *clean;
    for (int k = 0, n = 1 + static_cast<int>(rng.below(4)); k < n; ++k) {
      if (rng.below(3) != 0) {
        e.payload[rng.below(e.payload.size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
      } else {  // move bits between neighbours (in one block, the block sums stay right)
        const std::size_t i = rng.below(e.vector_bits.size() - 1);
        const int d = 1 + static_cast<int>(rng.below(6));
        e.vector_bits[i] = static_cast<std::uint16_t>(e.vector_bits[i] + d);
        e.vector_bits[i + 1] = static_cast<std::uint16_t>(e.vector_bits[i + 1] - d);
      }
    }
    if (!validate_encoded(e).ok()) continue;  // neighbours in two blocks
    const Status st = decode_codes(e, &*book, whole);
    // The first failing vector in block order (token block, head, token), as decode_codes goes.
    Status first_bad = Ok{};
    for (int tb = 0; tb * block < tokens && first_bad.ok(); ++tb) {
      for (int h = 0; h < heads && first_bad.ok(); ++h) {
        for (int t = tb * block; t < std::min(tokens, (tb + 1) * block); ++t) {
          first_bad = decode_vector(e, &*book, t, h, one);
          if (!first_bad.ok()) break;
          const std::size_t at = (static_cast<std::size_t>(t) * heads + h) * dim;
          ASSERT_TRUE(std::equal(one.begin(), one.end(), whole.begin() + at))
              << "variant " << v << " token " << t << " head " << h;
        }
      }
    }
    ASSERT_EQ(st.ok(), first_bad.ok()) << "variant " << v << ": " << st.message();
    if (!st.ok()) {
      ++failures;
      EXPECT_EQ(st.message(), first_bad.message()) << "variant " << v;
    }
  }
  EXPECT_GT(failures, 300);
}

INSTANTIATE_TEST_SUITE_P(CodecFuzz, BlockVsVector, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Pairs" : "Codes"; });

TEST(CodecFuzz, IncompleteCodebookRejectsUnknownCodes) {
  // A valid but incomplete book (Kraft sum 3/4): the bits "11" start no code.
  std::vector<std::uint8_t> lengths(HuffmanCodebook::kSymbols, 0);
  lengths[0] = 1;
  lengths[HuffmanCodebook::kEscape] = 2;
  auto book = HuffmanCodebook::from_lengths(lengths);
  ASSERT_TRUE(book.ok()) << book.message();
  EXPECT_DOUBLE_EQ(book->kraft_sum(), 0.75);
  int errors = 0;
  fuzz_codec(CodecKind::Huffman, *book, 7, 1000, &errors);
  EXPECT_GT(errors, 500);

  // Hand-made stream: code "0" (value 0) then "11" (no code).
  const std::vector<std::uint8_t> zeros(2, 0);
  auto enc = encode_codes(zeros, 1, 1, 2, {CodecKind::Huffman, 4, 0}, &*book);
  ASSERT_TRUE(enc.ok());
  ASSERT_EQ(enc->payload, HugePageBytes{0x00});
  enc->payload[0] = 0b110;  // bit 0 = 0 (value 0), bits 1-2 = 1,1
  std::vector<std::uint8_t> out(2);
  Status st = decode_codes(*enc, &*book, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no code"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("block 0"), std::string::npos) << st.message();
}

TEST(CodecFuzz, ErrorsNameTheBlockAndTheProblem) {
  auto book = HuffmanCodebook::from_histogram(count_codes(skewed_codes(4096, 1)), false, true);
  const auto codes = skewed_codes(40 * 2 * 8, 3);
  auto clean = encode_codes(codes, 40, 2, 8, {CodecKind::Huffman, 16, 0}, &*book);
  ASSERT_TRUE(clean.ok());
  std::vector<std::uint8_t> out(codes.size());

  EncodedCodes past = *clean;
  past.block_offsets[3] = static_cast<std::uint32_t>(past.payload.size() + 10);
  Status st = decode_codes(past, &*book, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("block 2"), std::string::npos) << st.message();

  EncodedCodes order = *clean;
  order.block_offsets[2] = order.block_offsets[1] - 1;
  st = decode_codes(order, &*book, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not increasing"), std::string::npos) << st.message();

  EncodedCodes bits = *clean;
  bits.vector_bits[0] = static_cast<std::uint16_t>(bits.vector_bits[0] + 3);
  bits.vector_bits[1] = static_cast<std::uint16_t>(bits.vector_bits[1] - 3);
  st = decode_codes(bits, &*book, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("vector 0"), std::string::npos) << st.message();

  EncodedCodes sizes = *clean;
  sizes.vector_bits.pop_back();
  st = decode_codes(sizes, &*book, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bit counts for"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kvlab
