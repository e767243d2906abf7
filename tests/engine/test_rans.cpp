// The rANS codec (docs/FORMAT.md, "rANS streams"): its frequency tables against the entropy and
// their serialisation, the AVX-512 block decoder against the scalar one on clean and corrupt
// blocks, and (RansReference) the bytes of a plain Python coder written from the format alone
// (tests/python/rans_reference.py).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "codec/rans_streams.h"
#include "core/random.h"
#include "kvlab/engine/codec/code_codec.h"

namespace kvlab {
namespace {

namespace fs = std::filesystem;

// Order-0 entropy of a histogram in bits, written out here.
double entropy_bits(const CodeCounts& h) {
  double n = 0, bits = 0;
  for (auto c : h) n += static_cast<double>(c);
  for (auto c : h) {
    if (c > 0) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / n);
  }
  return bits;
}

CodeCounts narrow_histogram(std::size_t n, std::uint64_t seed, std::vector<std::uint8_t>* codes) {
  detail::Rng rng(seed);
  CodeCounts h{};
  for (std::size_t i = 0; i < n; ++i) {
    const double u = rng.uniform();
    const std::uint8_t c = u < 0.025   ? 0
                           : u < 0.165 ? 1
                           : u < 0.5   ? 2
                           : u < 0.835 ? 3
                           : u < 0.975 ? 4
                                       : 5;
    ++h[c];
    if (codes) codes->push_back(c);
  }
  return h;
}

TEST(RansTable, FrequenciesComeWithinATenthOfAPercentOfTheEntropy) {
  for (std::uint64_t seed : {1, 2, 3}) {
    const CodeCounts h = narrow_histogram(200000, seed, nullptr);
    auto t = RansTable::from_histogram(h, false);
    ASSERT_TRUE(t.ok()) << t.message();
    std::uint32_t sum = 0;
    for (int s = 0; s < RansTable::kSymbols; ++s) {
      sum += t->frequency(s);
      if (s < 256) {
        EXPECT_EQ(t->frequency(s) > 0, h[static_cast<std::size_t>(s)] > 0) << s;
      }
    }
    EXPECT_EQ(sum, RansTable::kProbScale);
    EXPECT_EQ(t->frequency(RansTable::kEscape), 1u);
    const double entropy = entropy_bits(h);
    EXPECT_LE(t->coded_bits(h), 1.001 * entropy);
    EXPECT_GE(t->coded_bits(h), entropy);
  }
}

TEST(RansTable, SerialisesToTwelveBitsASymbol) {
  auto t = RansTable::from_histogram(narrow_histogram(5000, 4, nullptr), true);
  ASSERT_TRUE(t.ok());
  const auto bytes = t->serialize();
  ASSERT_EQ(bytes.size(), RansTable::kSerializedBytes);
  // Symbol 1's frequency: bits 12..23, LSB-first; the kind in the last byte's high nibble.
  EXPECT_EQ(static_cast<std::uint32_t>(bytes[1] >> 4 | bytes[2] << 4), t->frequency(1));
  EXPECT_EQ(bytes.back() >> 4, 1);
  auto back = RansTable::deserialize(bytes);
  ASSERT_TRUE(back.ok()) << back.message();
  for (int s = 0; s < RansTable::kSymbols; ++s) EXPECT_EQ(back->frequency(s), t->frequency(s));
  EXPECT_TRUE(back->pairs());

  auto bad = bytes;
  bad[0] ^= 1;  // the sum is off by one
  EXPECT_NE(RansTable::deserialize(bad).message().find("sum"), std::string::npos);
  bad = bytes;
  bad.back() = static_cast<std::uint8_t>((bad.back() & 0x0f) | 0x20);
  EXPECT_NE(RansTable::deserialize(bad).message().find("kind"), std::string::npos);
  std::vector<std::uint16_t> f(RansTable::kSymbols, 0);
  f[3] = RansTable::kProbScale;
  EXPECT_FALSE(RansTable::from_frequencies(f, false).ok());  // above 4095, and no escape
  f[3] = RansTable::kProbScale - 1;
  f[RansTable::kEscape] = 1;
  EXPECT_TRUE(RansTable::from_frequencies(f, false).ok());
  EXPECT_FALSE(RansTable::deserialize(std::span(bytes).first(10)).ok());
}

TEST(RansTable, FromLengthsCodesAsTheHuffmanBookDoes) {
  auto book = HuffmanCodebook::from_histogram(narrow_histogram(5000, 5, nullptr));
  ASSERT_TRUE(book.ok());
  // A Huffman book carries no rANS table unless asked for one; from its lengths alone the table
  // has 2^(12 - length), the escape filling the rest.
  EXPECT_EQ(book->rans(), nullptr);
  auto t = RansTable::from_lengths(book->lengths(), false);
  ASSERT_TRUE(t.ok()) << t.message();
  std::uint32_t filled = 0;
  for (int s = 0; s < 256; ++s) {
    const int l = book->length(s);
    EXPECT_EQ(t->frequency(s), l > 0 ? 4096u >> l : 0u) << s;
    filled += t->frequency(s);
  }
  EXPECT_EQ(t->frequency(RansTable::kEscape), 4096u - filled);
  // Coding with a book that has no table is an error, not a crash.
  const std::vector<std::uint8_t> codes(64, 2);
  auto e = encode_codes(codes, 4, 1, 16, {CodecKind::Rans, 4, 0}, &*book);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("no rANS table"), std::string::npos) << e.message();
}

// Symbols with escapes (values absent from the table), in blocks of every length around the 32
// lanes and the 16-lane registers.
std::vector<std::uint8_t> block_symbols(std::size_t n, detail::Rng& rng) {
  std::vector<std::uint8_t> s(n);
  for (auto& x : s) {
    const double u = rng.uniform();
    x = u < 0.01 ? static_cast<std::uint8_t>(100 + rng.below(150))
                 : static_cast<std::uint8_t>(u < 0.3   ? 2
                                             : u < 0.6 ? 3
                                                       : rng.below(8));
  }
  return s;
}

TEST(RansBlock, SimdDecoderAgreesWithTheScalarOneOnCleanAndCorruptBlocks) {
  CodeCounts h{};
  for (int c = 0; c < 8; ++c) h[static_cast<std::size_t>(c)] = 10 + 100 * (c == 2 || c == 3);
  auto table = RansTable::from_histogram(h, false);
  ASSERT_TRUE(table.ok());
  detail::Rng rng(99);
  HugePageBytes block;
  std::vector<std::uint16_t> words;
  int corrupt_errors = 0;
  for (std::size_t n : {0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 64, 100, 1000, 4096}) {
    SCOPED_TRACE(n);
    const auto symbols = block_symbols(n, rng);
    block.clear();
    detail::encode_rans_block(symbols.data(), n, *table, block, words);
    EXPECT_EQ(block.size(), detail::rans_block_bytes(symbols.data(), n, *table, words));
    std::vector<std::uint8_t> a(n, 0xee), b(n, 0xdd);
    EXPECT_EQ(detail::decode_rans_block(block.data(), block.size(), n, *table, a.data()), nullptr);
    EXPECT_EQ(detail::decode_rans_block_scalar(block.data(), block.size(), n, *table, b.data()),
              nullptr);
    EXPECT_EQ(a, symbols);
    EXPECT_EQ(b, symbols);
    // Corruptions: flipped bits, a cut, a symbol count off by one. Both decoders agree on the
    // outcome and, where they pass, on the symbols.
    for (int v = 0; v < 40 && !block.empty(); ++v) {
      HugePageBytes bad = block;
      std::size_t count = n;
      switch (v % 3) {
        case 0:
          bad[rng.below(bad.size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
          break;
        case 1:
          bad.resize(rng.below(bad.size()));
          break;
        default:
          count = n + 1 - 2 * rng.below(2);
          if (count > n + 1) count = 0;
          break;
      }
      std::vector<std::uint8_t> x(count + 1), y(count + 1);
      const char* p = detail::decode_rans_block(bad.data(), bad.size(), count, *table, x.data());
      const char* q =
          detail::decode_rans_block_scalar(bad.data(), bad.size(), count, *table, y.data());
      ASSERT_EQ(p == nullptr, q == nullptr) << (p ? p : "") << " / " << (q ? q : "");
      if (p != nullptr) {
        EXPECT_STREQ(p, q);
        ++corrupt_errors;
      } else {
        EXPECT_EQ(x, y);
      }
    }
  }
  EXPECT_GT(corrupt_errors, 300);
}

// Blocks decoded side by side (decode_rans_blocks: groups of four with AVX-512 or AVX2)
// give each block what the scalar decoder gives it alone: clean and corrupt blocks of different
// lengths mixed in one call, so a group's blocks end, fail and run on at different rounds.
TEST(RansBlock, BlocksDecodedSideBySideAreEachTheScalarDecodersResult) {
  CodeCounts h{};
  for (int c = 0; c < 40; ++c) h[static_cast<std::size_t>(c)] = 1 + 400 / (c + 1);
  auto table = RansTable::from_histogram(h, false);
  ASSERT_TRUE(table.ok());
  detail::Rng rng(7);
  std::vector<std::uint16_t> words;
  for (int trial = 0; trial < 30; ++trial) {
    const std::size_t n = 1 + rng.below(11);
    std::vector<HugePageBytes> blocks(n);
    std::vector<std::size_t> counts(n);
    std::vector<std::vector<std::uint8_t>> simd(n), scalar(n);
    std::vector<detail::RansJob> jobs(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t count = rng.below(300);
      std::vector<std::uint8_t> symbols(count);
      // Mostly the table's 40 codes, now and then one it codes only by the escape.
      for (auto& v : symbols)
        v = static_cast<std::uint8_t>(rng.below(9) == 0 ? 200 : rng.below(40));
      detail::encode_rans_block(symbols.data(), count, *table, blocks[i], words);
      counts[i] = count;
      if (rng.below(3) == 0 && !blocks[i].empty()) {  // a third corrupt: a flipped bit or a cut
        if (rng.below(2) == 0) {
          blocks[i][rng.below(blocks[i].size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
        } else {
          blocks[i].resize(rng.below(blocks[i].size()));
        }
      }
      simd[i].assign(count, 0xee);
      scalar[i].assign(count, 0xdd);
      jobs[i] = {blocks[i].data(), blocks[i].size(), count, &*table, simd[i].data(), nullptr};
    }
    detail::decode_rans_blocks(jobs.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      SCOPED_TRACE(::testing::Message() << "trial " << trial << " block " << i << " of " << n);
      const char* alone = detail::decode_rans_block_scalar(blocks[i].data(), blocks[i].size(),
                                                           counts[i], *table, scalar[i].data());
      ASSERT_EQ(jobs[i].problem == nullptr, alone == nullptr)
          << (jobs[i].problem ? jobs[i].problem : "") << " / " << (alone ? alone : "");
      if (alone != nullptr) {
        EXPECT_STREQ(jobs[i].problem, alone);
      } else {
        EXPECT_EQ(simd[i], scalar[i]);
      }
    }
  }
}

// Against the entropy and the Huffman codec, on the same KVComp-like codes (about 2.1 bits):
// rANS codes fractions of a bit, and keeps no per-vector bit counts, so with its 32 states per
// block it is smaller in all than Huffman with its pair book.
TEST(RansBlock, SmallerThanHuffmanInAllOnKvcompCodes) {
  const int tokens = 1024, heads = 4, dim = 128, block = 64;
  std::vector<std::uint8_t> codes;
  narrow_histogram(static_cast<std::size_t>(tokens) * heads * dim, 6, &codes);
  const CodeCounts counts = count_codes(codes);
  auto book = choose_codebook(codes, dim, 5, counts, true);
  ASSERT_TRUE(book.ok());
  ASSERT_TRUE(book->pairs());
  auto huff = encode_codes(codes, tokens, heads, dim, {CodecKind::Huffman, block, 0}, &*book);
  auto rans = encode_codes(codes, tokens, heads, dim, {CodecKind::Rans, block, 0}, &*book);
  ASSERT_TRUE(huff.ok() && rans.ok());
  const double n = static_cast<double>(codes.size());
  const double entropy = entropy_bits(counts) / n;
  const double huff_bits = 8.0 * static_cast<double>(huff->total_bytes()) / n;
  const double rans_bits = 8.0 * static_cast<double>(rans->total_bytes()) / n;
  const double states = 8.0 * detail::kRansStateBytes * rans->block_count() / n;
  std::printf("[ rans     ] entropy %.4f, huffman %.4f, rans %.4f bits/code in all (states %.4f)\n",
              entropy, huff_bits, rans_bits, states);
  EXPECT_LT(rans_bits, huff_bits);
  // The payload beyond the states is within 0.5% of the pairs' entropy (at most the codes').
  const double pair_entropy = entropy_bits(count_code_pairs(codes, dim)) / n;
  EXPECT_LE(8.0 * static_cast<double>(rans->payload_bytes()) / n - states, 1.005 * pair_entropy);
  std::vector<std::uint8_t> back(codes.size());
  ASSERT_TRUE(decode_codes(*rans, &*book, back).ok());
  EXPECT_EQ(back, codes);
}

std::vector<std::uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

TEST(RansReference, BytesMatchAPythonCoderWrittenFromTheFormat) {
  const char* env = std::getenv("KVLAB_RANS_REFERENCE_DIR");
  const fs::path dir = env ? env : "";
  std::ifstream list(dir / "cases.txt");
  if (!env || !list) {
    GTEST_SKIP() << "no reference files (ctest's python.rans_reference writes them)";
  }
  std::string line;
  int cases = 0;
  while (std::getline(list, line)) {
    std::istringstream fields(line);
    std::string name;
    int tokens = 0, heads = 0, dim = 0, block = 0, pairs = 0;
    if (!(fields >> name >> tokens >> heads >> dim >> block >> pairs)) continue;
    SCOPED_TRACE(name);
    const auto codes = read_bytes(dir / (name + ".codes"));
    ASSERT_EQ(codes.size(), static_cast<std::size_t>(tokens) * heads * dim);
    auto table = RansTable::deserialize(read_bytes(dir / (name + ".table")));
    ASSERT_TRUE(table.ok()) << table.message();
    ASSERT_EQ(table->pairs(), pairs == 1);
    auto book = HuffmanCodebook::from_histogram(CodeCounts{}, pairs == 1);
    ASSERT_TRUE(book.ok());
    ASSERT_TRUE(book->use_rans(*table).ok());
    auto e = encode_codes(codes, tokens, heads, dim, {CodecKind::Rans, block, 0}, &*book);
    ASSERT_TRUE(e.ok()) << e.message();
    const auto payload = read_bytes(dir / (name + ".payload"));
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), e->payload.begin(), e->payload.end()));
    const auto offsets = read_bytes(dir / (name + ".offsets"));
    ASSERT_EQ(offsets.size(), 4 * e->block_offsets.size());
    for (std::size_t b = 0; b < e->block_offsets.size(); ++b) {
      std::uint32_t o = 0;
      for (int k = 0; k < 4; ++k) o |= std::uint32_t{offsets[4 * b + k]} << 8 * k;
      EXPECT_EQ(o, e->block_offsets[b]) << "block " << b;
    }
    // The Python bytes decode back to the codes.
    EncodedCodes theirs = *e;
    theirs.payload.assign(payload.begin(), payload.end());
    std::vector<std::uint8_t> back(codes.size());
    Status st = decode_codes(theirs, &*book, back);
    ASSERT_TRUE(st.ok()) << st.message();
    EXPECT_EQ(back, codes);
    ++cases;
  }
  EXPECT_GT(cases, 0) << "cases.txt in " << dir << " lists no case";
}

}  // namespace
}  // namespace kvlab
