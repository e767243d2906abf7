// The streaming compressed cache (KVComp, Jiang et al. 2025, Sec. 3.2-3.3): after a prefill of P
// tokens and n single-token appends, the compressed part reconstructs exactly as a one-shot
// quantization of the same tokens (same block boundaries), the buffer holds the fp16 rows as
// given, and memory() equals a formula written out here after every step. Boundary prefills
// 0, 1, B-1, B, B+1 and appends crossing several flushes.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/random.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "quant/group_quant.h"
#include "tensor_test_util.h"

namespace kvlab {
namespace {

// Channel-dependent offsets and scales, like real keys, stored as fp16.
Tensor random_fp16(int tokens, int heads, int dim, std::uint64_t seed) {
  detail::Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int c = static_cast<int>(i % dim);
    x[i] = static_cast<float>(0.3 * (c % 5) - 0.5 + (0.5 + 0.1 * (c % 3)) * rng.normal());
  }
  return Tensor::from_float(x, DType::F16, tokens, heads, dim);
}

using tensor_test::row_of;

detail::GroupSpec spec_of(const CompressedCacheConfig& c) {
  return detail::GroupSpec{8, c.block_size, 0, detail::StepRule::Relative, c.rel_scale};
}

struct OneShot {
  std::vector<std::uint8_t> codes;
  std::vector<float> steps, mins, recon;
};

// Quantizes the first `tokens` tokens at once, as KvCompQuantizer would.
OneShot one_shot(const Tensor& x, int tokens, TensorRole role, const CompressedCacheConfig& c) {
  const detail::GroupSpec spec = spec_of(c);
  OneShot o;
  const std::size_t units = detail::group_unit_count(spec, role, tokens, x.heads(), x.dim());
  o.codes.resize(static_cast<std::size_t>(tokens) * x.heads() * x.dim());
  o.steps.resize(units);
  o.mins.resize(units);
  o.recon.resize(o.codes.size());
  if (tokens == 0) return o;
  detail::quantize_groups(x.view().token_range(0, tokens), role, spec, o.codes.data(), 0,
                          o.steps.data(), o.mins.data());
  detail::dequantize_groups(o.codes.data(), 0, o.steps.data(), o.mins.data(), role, spec, x.heads(),
                            x.dim(), 0, tokens, o.recon.data());
  return o;
}

// The book the cache should keep for a prefill's codes: the single-code book, or where every
// code fits 4 bits (`pairs_allowed`) the pair book if it codes the prefill in fewer bits.
Result<HuffmanCodebook> prefill_book(const std::vector<std::uint8_t>& codes, int dim,
                                     bool pairs_allowed) {
  auto single = HuffmanCodebook::from_histogram(count_codes(codes), false, true);
  if (!pairs_allowed || !single) return single;
  auto pairs = HuffmanCodebook::from_histogram(count_code_pairs(codes, dim), true, true);
  if (!pairs) return pairs;
  std::uint64_t single_bits = 0, pair_bits = 0;
  for (std::size_t i = 0; i < codes.size(); ++i) single_bits += single->cost_bits(codes[i]);
  for (std::size_t v = 0; v < codes.size(); v += static_cast<std::size_t>(dim)) {
    for (int j = 0; j < dim; j += 2) {
      const int second = j + 1 < dim ? codes[v + j + 1] : 0;
      pair_bits += pairs->cost_bits(static_cast<std::uint8_t>(codes[v + j] | (second << 4)));
    }
  }
  return pair_bits < single_bits ? pairs : single;
}

struct Param {
  int prefill;
  int appends;
  CodecKind codec;
  double rel_scale = 0.05;  // 0.2: codes 0..5, which the cache's Huffman books code as pairs
};

class CompressedCacheStream : public ::testing::TestWithParam<Param> {};

TEST_P(CompressedCacheStream, EqualsOneShotAndAccountsEveryByte) {
  const Param p = GetParam();
  constexpr int kHeads = 2, kDim = 16;
  CompressedCacheConfig config;
  config.block_size = 8;
  config.buffer_size = 16;
  config.rel_scale = p.rel_scale;
  config.codec = p.codec;
  config.bitpack_width = p.codec == CodecKind::BitPack ? 8 : 0;
  const int B = config.block_size;
  const bool pairs = p.codec != CodecKind::BitPack && p.rel_scale > 1.0 / 15.0;
  const int total = p.prefill + p.appends;
  const Tensor K = random_fp16(total, kHeads, kDim, 11 + total);
  const Tensor V = random_fp16(total, kHeads, kDim, 97 + total);
  auto cache = CompressedKvCache::create(config, kHeads, kDim);
  ASSERT_TRUE(cache) << cache.message();
  // Room made up front (as a store sized for its run makes it) changes no byte held.
  if (p.prefill % 2 == 1) cache->reserve(total);
  ASSERT_TRUE(
      cache->prefill(K.view().token_range(0, p.prefill), V.view().token_range(0, p.prefill)));

  const std::size_t hd = static_cast<std::size_t>(kHeads) * kDim;
  // The model of the cache: whole blocks of the prefill compressed, the tail buffered; an
  // overflowing buffer flushes all its whole blocks.
  int compressed = p.prefill / B * B;
  int buffered = p.prefill - compressed;
  int first_compressed = compressed;  // tokens the codebooks were built from
  int flushes = 0;
  for (int step = 0; step <= p.appends; ++step) {
    if (step > 0) {
      const int t = p.prefill + step - 1;
      ASSERT_TRUE(cache->append(row_of(K, t), row_of(V, t)));
      if (++buffered > config.buffer_size) {
        const int n = buffered / B * B;
        compressed += n;
        buffered -= n;
        ++flushes;
        if (first_compressed == 0) first_compressed = n;
      }
    }
    SCOPED_TRACE(::testing::Message() << "step " << step);
    ASSERT_EQ(cache->compressed_tokens(), compressed);
    ASSERT_EQ(cache->buffered_tokens(), buffered);
    ASSERT_EQ(cache->tokens(), p.prefill + step);

    const OneShot ko = one_shot(K, compressed, TensorRole::Key, config);
    const OneShot vo = one_shot(V, compressed, TensorRole::Value, config);
    std::vector<float> keys(cache->tokens() * hd), values(cache->tokens() * hd);
    ASSERT_TRUE(cache->dequantize_all(keys, values));
    const std::size_t c = static_cast<std::size_t>(compressed) * hd;
    for (std::size_t i = 0; i < c; ++i) {
      ASSERT_EQ(keys[i], ko.recon[i]) << "key element " << i;
      ASSERT_EQ(values[i], vo.recon[i]) << "value element " << i;
    }
    const std::vector<float> kf = K.view().to_float(), vf = V.view().to_float();
    for (std::size_t i = c; i < keys.size(); ++i) {
      ASSERT_EQ(keys[i], kf[i]) << "buffered key element " << i;
      ASSERT_EQ(values[i], vf[i]) << "buffered value element " << i;
    }

    // A range of tokens decodes to the same rows (a later prompt chunk's tiles read them so):
    // from block starts and from inside the buffer, ending anywhere, inside a block included.
    const int tokens = cache->tokens();
    for (const int first : {0, B, compressed - B, compressed, compressed + 1, tokens}) {
      if (first < 0 || first > tokens) continue;
      for (const int last : {first, first + 1, first + B, first + B + 3, tokens}) {
        if (last > tokens) continue;
        const std::size_t n = static_cast<std::size_t>(last - first) * hd;
        std::vector<float> kr(n), vr(n);
        ASSERT_TRUE(cache->dequantize_rows(first, last, kr, vr)) << first << ".." << last;
        const auto at = static_cast<std::ptrdiff_t>(first * hd);
        ASSERT_TRUE(std::equal(kr.begin(), kr.end(), keys.begin() + at)) << first << ".." << last;
        ASSERT_TRUE(std::equal(vr.begin(), vr.end(), values.begin() + at)) << first << ".." << last;
      }
    }
    if (compressed >= B) {  // a range starting inside a compressed block is an error
      std::vector<float> kr(hd), vr(hd);
      EXPECT_FALSE(cache->dequantize_rows(1, 2, kr, vr));
    }

    // Memory formula: steps + mins as float (keys: one per channel per block; values: one per
    // token and head), fp16 buffer rows, codec header + u32 per block + u16 per vector, two
    // 129-byte codebooks, and the payload a one-shot encoding would have with the same books.
    const CacheMemory m = cache->memory();
    const std::uint64_t blocks = static_cast<std::uint64_t>(compressed / B) * kHeads;
    const std::uint64_t vectors = static_cast<std::uint64_t>(compressed) * kHeads;
    EXPECT_EQ(m.quant_params, 2 * 4 * (blocks * kDim + vectors));
    EXPECT_EQ(m.buffer, 2 * 2 * static_cast<std::uint64_t>(buffered) * hd);
    // rANS: no bit counts, and two 386-byte frequency tables instead.
    const bool huff = p.codec != CodecKind::BitPack;
    const bool rans = p.codec == CodecKind::Rans;
    EXPECT_EQ(m.metadata, compressed == 0 ? 0
                          : rans          ? 2 * (4 + 4 * blocks)
                          : huff          ? 2 * (4 + 4 * blocks + 2 * vectors)
                                          : 2 * 4);
    EXPECT_EQ(m.codebooks, huff && compressed > 0 ? 2u * (rans ? 386u : 129u) : 0u);
    std::uint64_t payload = 0;
    if (compressed > 0) {
      const OneShot kb = one_shot(K, first_compressed, TensorRole::Key, config);
      const OneShot vb = one_shot(V, first_compressed, TensorRole::Value, config);
      auto kbook = prefill_book(kb.codes, kDim, pairs);
      auto vbook = prefill_book(vb.codes, kDim, pairs);
      ASSERT_TRUE(kbook && vbook);
      if (huff) {
        EXPECT_EQ(cache->view().key_book->pairs(), kbook->pairs());
        EXPECT_EQ(cache->view().key_book->lengths(), kbook->lengths());
        EXPECT_EQ(cache->view().value_book->pairs(), vbook->pairs());
        EXPECT_EQ(cache->view().value_book->lengths(), vbook->lengths());
      }
      const CodecConfig codec{p.codec, B, config.bitpack_width};
      auto ke = encode_codes(ko.codes, compressed, kHeads, kDim, codec, &*kbook);
      auto ve = encode_codes(vo.codes, compressed, kHeads, kDim, codec, &*vbook);
      ASSERT_TRUE(ke && ve);
      payload = ke->payload_bytes() + ve->payload_bytes();
      if (!huff) {
        EXPECT_EQ(payload, 2 * vectors * kDim);  // 8 bits per code
      }
    }
    EXPECT_EQ(m.payload, payload);
    EXPECT_EQ(m.total(), m.payload + m.metadata + m.codebooks + m.quant_params + m.buffer);
  }
  if (p.appends >= 3 * config.buffer_size) {
    EXPECT_GE(flushes, 2);
  }
}

std::vector<Param> stream_params() {
  std::vector<Param> v;
  for (CodecKind codec : {CodecKind::Huffman, CodecKind::BitPack, CodecKind::Rans}) {
    for (int prefill : {0, 1, 7, 8, 9, 35}) v.push_back({prefill, 53, codec});
  }
  for (int prefill : {0, 35}) v.push_back({prefill, 53, CodecKind::Rans, 0.2});
  v.push_back({16, 0, CodecKind::Huffman});
  v.push_back({0, 1, CodecKind::Huffman});
  for (int prefill : {0, 9, 35}) v.push_back({prefill, 53, CodecKind::Huffman, 0.2});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Boundaries, CompressedCacheStream, ::testing::ValuesIn(stream_params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(codec_id(info.param.codec)) + "_prefill" +
                                  std::to_string(info.param.prefill) + "_appends" +
                                  std::to_string(info.param.appends) +
                                  (info.param.rel_scale > 0.1 ? "_pairs" : "");
                         });

TEST(CompressedCache, RejectsBadConfigAndInput) {
  CompressedCacheConfig c;
  c.block_size = 8;
  c.buffer_size = 12;  // not a multiple of the block
  EXPECT_FALSE(CompressedKvCache::create(c, 2, 16));
  c.buffer_size = 4;  // smaller than a block
  EXPECT_FALSE(CompressedKvCache::create(c, 2, 16));
  c.buffer_size = 16;
  c.codec = CodecKind::VarWidth;
  EXPECT_FALSE(CompressedKvCache::create(c, 2, 16));
  c.codec = CodecKind::Huffman;
  c.rel_scale = 0.0;
  EXPECT_FALSE(CompressedKvCache::create(c, 2, 16));
  c.rel_scale = 0.05;
  EXPECT_FALSE(CompressedKvCache::create(c, 0, 16));

  auto cache = CompressedKvCache::create(c, 2, 16);
  ASSERT_TRUE(cache);
  const Tensor K = random_fp16(10, 2, 16, 1);
  const Tensor wrong = random_fp16(10, 3, 16, 2);
  EXPECT_FALSE(cache->prefill(K.view(), wrong.view()));
  ASSERT_TRUE(cache->prefill(K.view(), K.view()));
  EXPECT_FALSE(cache->prefill(K.view(), K.view()));  // twice
  EXPECT_FALSE(cache->append(std::vector<float>(31), std::vector<float>(32)));
  EXPECT_EQ(cache->tokens(), 10);
}

// Codes the prefill never produced still append, through the codebook's escape.
TEST(CompressedCache, AppendsUnseenCodesThroughTheEscape) {
  CompressedCacheConfig c;
  c.block_size = 4;
  c.buffer_size = 4;
  auto cache = CompressedKvCache::create(c, 1, 8);
  ASSERT_TRUE(cache);
  // A constant prefill gives one code value only.
  Tensor flat(DType::F16, 4, 1, 8);
  ASSERT_TRUE(cache->prefill(flat.view(), flat.view()));
  const Tensor later = random_fp16(9, 1, 8, 5);
  for (int t = 0; t < 9; ++t) ASSERT_TRUE(cache->append(row_of(later, t), row_of(later, t)));
  EXPECT_EQ(cache->compressed_tokens(), 12);
  std::vector<float> k(13 * 8), v(13 * 8);
  ASSERT_TRUE(cache->dequantize_all(k, v));
  // Spans of the wrong size are refused with the sizes named, nothing written past them.
  std::vector<float> short_keys(12 * 8);
  const Status wrong = cache->dequantize_all(short_keys, v);
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.message().find("given 96 and 104"), std::string::npos) << wrong.message();
  const std::vector<float> x = later.view().to_float();
  // Relative step 0.05: |x - x_hat| <= step / 2 <= 0.025 * range of the unit.
  for (int t = 4; t < 12; ++t) {
    for (int d = 0; d < 8; ++d) EXPECT_NEAR(v[t * 8 + d], x[(t - 4) * 8 + d], 0.3) << t;
  }
}

}  // namespace
}  // namespace kvlab
