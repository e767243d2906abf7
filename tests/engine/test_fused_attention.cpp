// Attention computed straight from the compressed cache (KVComp, Jiang et al. 2025, Sec. 4)
// against a double-precision reference over the dequantized cache (dequantize_all): the outputs
// agree to float rounding for GQA groups 1 and 4, Huffman and 4-bit packed streams, with and
// without buffered tokens; the fp16 baseline agrees with the same reference over its own
// tensors; corrupt streams give an Error or a finite result, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kvlab/engine/fused_attention.h"
#include "random.h"
#include "tensor_test_util.h"

namespace kvlab {
namespace {

Tensor random_fp16(int tokens, int heads, int dim, std::uint64_t seed) {
  detail::Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int c = static_cast<int>(i % dim);
    x[i] = static_cast<float>(0.2 * (c % 7) - 0.6 + (0.4 + 0.1 * (c % 3)) * rng.normal());
  }
  return Tensor::from_float(x, DType::F16, tokens, heads, dim);
}

using tensor_test::row_of;

// softmax(q K^T / sqrt(d)) V in double; query head h reads KV head h / group.
std::vector<double> reference(const std::vector<float>& q, int q_heads, const float* k,
                              const float* v, int tokens, int kv_heads, int dim) {
  const int group = q_heads / kv_heads;
  std::vector<double> out(static_cast<std::size_t>(q_heads) * dim, 0.0);
  std::vector<double> p(tokens);
  for (int qh = 0; qh < q_heads; ++qh) {
    const int h = qh / group;
    double mx = -1e300;
    for (int t = 0; t < tokens; ++t) {
      double a = 0;
      for (int c = 0; c < dim; ++c) {
        a += static_cast<double>(q[qh * dim + c]) *
             k[(static_cast<std::size_t>(t) * kv_heads + h) * dim + c];
      }
      p[t] = a / std::sqrt(static_cast<double>(dim));
      mx = std::max(mx, p[t]);
    }
    double sum = 0;
    for (double& x : p) sum += (x = std::exp(x - mx));
    for (int t = 0; t < tokens; ++t) {
      for (int c = 0; c < dim; ++c) {
        out[qh * dim + c] += p[t] / sum * v[(static_cast<std::size_t>(t) * kv_heads + h) * dim + c];
      }
    }
  }
  return out;
}

double rel_error(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

struct Built {
  CompressedKvCache cache;
  Tensor keys, values;
};

Built build(CodecKind codec, int prefill, int appends, int kv_heads, int dim, std::uint64_t seed) {
  CompressedCacheConfig c;
  c.block_size = 16;
  c.buffer_size = 32;
  c.codec = codec;
  // Relative step 0.07 keeps every code <= 14, so 4-bit packing holds them.
  c.rel_scale = codec == CodecKind::BitPack ? 0.07 : 0.05;
  c.bitpack_width = codec == CodecKind::BitPack ? 4 : 0;
  const int total = prefill + appends;
  Built b{*CompressedKvCache::create(c, kv_heads, dim), random_fp16(total, kv_heads, dim, seed),
          random_fp16(total, kv_heads, dim, seed + 1)};
  EXPECT_TRUE(b.cache.prefill(b.keys.view().token_range(0, prefill),
                              b.values.view().token_range(0, prefill)));
  for (int t = prefill; t < total; ++t) {
    EXPECT_TRUE(b.cache.append(row_of(b.keys, t), row_of(b.values, t)));
  }
  return b;
}

std::vector<float> random_queries(int q_heads, int dim, std::uint64_t seed) {
  detail::Rng rng(seed);
  std::vector<float> q(static_cast<std::size_t>(q_heads) * dim);
  for (float& x : q) x = static_cast<float>(1.5 * rng.normal());
  return q;
}

struct Case {
  CodecKind codec;
  int group, prefill, appends;
};

class FusedAttention : public ::testing::TestWithParam<Case> {};

TEST_P(FusedAttention, MatchesDoubleReferenceOverDequantizedCache) {
  const Case p = GetParam();
  constexpr int kKvHeads = 2, kDim = 64;
  Built b = build(p.codec, p.prefill, p.appends, kKvHeads, kDim, 42 + p.prefill);
  const int T = b.cache.tokens();
  const int q_heads = kKvHeads * p.group;
  const std::vector<float> q = random_queries(q_heads, kDim, 7 + p.group);
  std::vector<float> k(static_cast<std::size_t>(T) * kKvHeads * kDim), v(k.size());
  ASSERT_TRUE(b.cache.dequantize_all(k.data(), v.data()));
  const std::vector<double> want = reference(q, q_heads, k.data(), v.data(), T, kKvHeads, kDim);

  std::vector<float> out(static_cast<std::size_t>(q_heads) * kDim), scratch;
  Status st = fused_attention(b.cache.view(), q, q_heads, out, scratch);
  ASSERT_TRUE(st) << st.message();
  EXPECT_LT(rel_error(out, want), 1e-4);

  // The plain fp16 path over the uncompressed tensors, against the same reference over them.
  const std::vector<std::uint16_t> kh(
      reinterpret_cast<const std::uint16_t*>(b.keys.data()),
      reinterpret_cast<const std::uint16_t*>(b.keys.data()) + T * kKvHeads * kDim);
  const std::vector<std::uint16_t> vh(
      reinterpret_cast<const std::uint16_t*>(b.values.data()),
      reinterpret_cast<const std::uint16_t*>(b.values.data()) + T * kKvHeads * kDim);
  const Fp16KvView raw{T, kKvHeads, kDim, kh, vh};
  ASSERT_TRUE(fp16_attention(raw, q, q_heads, out, scratch));
  const std::vector<float> kf = b.keys.view().to_float(), vf = b.values.view().to_float();
  EXPECT_LT(rel_error(out, reference(q, q_heads, kf.data(), vf.data(), T, kKvHeads, kDim)), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedAttention,
    ::testing::Values(Case{CodecKind::Huffman, 1, 64, 0},  // compressed only
                      Case{CodecKind::Huffman, 4, 64, 0},
                      Case{CodecKind::Huffman, 1, 50, 45},  // flushes, non-empty buffer
                      Case{CodecKind::Huffman, 4, 50, 45},
                      Case{CodecKind::Huffman, 3, 50, 45},  // the general group kernel
                      Case{CodecKind::Huffman, 4, 5, 0},    // buffer only
                      Case{CodecKind::Huffman, 4, 0, 100},  // codebooks from the first flush
                      Case{CodecKind::BitPack, 1, 50, 45}, Case{CodecKind::BitPack, 4, 50, 45}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(codec_id(info.param.codec)) + "_g" + std::to_string(info.param.group) +
             "_p" + std::to_string(info.param.prefill) + "_a" + std::to_string(info.param.appends);
    });

TEST(FusedAttentionErrors, RejectsBadShapes) {
  Built b = build(CodecKind::Huffman, 40, 3, 2, 16, 3);
  std::vector<float> out(3 * 16), scratch;
  EXPECT_FALSE(fused_attention(b.cache.view(), std::vector<float>(3 * 16), 3, out, scratch));
  out.resize(4 * 16);
  EXPECT_FALSE(fused_attention(b.cache.view(), std::vector<float>(4 * 16 - 1), 4, out, scratch));
  auto empty = CompressedKvCache::create(CompressedCacheConfig{}, 2, 16);
  ASSERT_TRUE(empty);
  EXPECT_FALSE(fused_attention(empty->view(), std::vector<float>(4 * 16), 4, out, scratch));
}

// A bit count moved from one vector to the next keeps the block's size, so only the decoder's
// check of consumed bits can catch it: it must.
TEST(FusedAttentionErrors, ShiftedBitCountIsAnError) {
  Built b = build(CodecKind::Huffman, 64, 0, 2, 32, 9);
  const CompressedKvView good = b.cache.view();
  EncodedCodes keys = *good.keys;
  keys.vector_bits[3] += 1;
  keys.vector_bits[4] -= 1;
  CompressedKvView bad = good;
  bad.keys = &keys;
  std::vector<float> out(2 * 32), scratch;
  const Status st = fused_attention(bad, random_queries(2, 32, 1), 2, out, scratch);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("key"), std::string::npos) << st.message();
}

// Random corruptions of payload bits, bit counts, offsets and payload length: each run gives an
// Error or a finite output. Run under ASan/UBSan to catch any out-of-bounds read.
TEST(FusedAttentionErrors, CorruptStreamsNeverCrash) {
  for (CodecKind codec : {CodecKind::Huffman, CodecKind::BitPack}) {
    Built b = build(codec, 40, 30, 2, 32, 17);
    const CompressedKvView good = b.cache.view();
    const std::vector<float> q = random_queries(8, 32, 3);
    detail::Rng rng(1234);
    int errors = 0;
    for (int iter = 0; iter < 300; ++iter) {
      EncodedCodes keys = *good.keys, values = *good.values;
      EncodedCodes& e = rng.below(2) ? keys : values;
      switch (rng.below(5)) {
        case 0:
        case 1:  // flip a few payload bits
          for (int f = 0, n = 1 + static_cast<int>(rng.below(4)); f < n; ++f) {
            const std::size_t bit = rng.below(e.payload.size() * 8);
            e.payload[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
          }
          break;
        case 2:  // break a bit count
          if (!e.vector_bits.empty()) {
            e.vector_bits[rng.below(e.vector_bits.size())] =
                static_cast<std::uint16_t>(rng.below(65536));
          }
          break;
        case 3:  // move a block offset
          if (!e.block_offsets.empty()) {
            e.block_offsets[rng.below(e.block_offsets.size())] =
                static_cast<std::uint32_t>(rng.below(e.payload.size() + 64));
          }
          break;
        default:  // truncate the payload
          e.payload.resize(rng.below(e.payload.size()));
          break;
      }
      CompressedKvView bad = good;
      bad.keys = &keys;
      bad.values = &values;
      std::vector<float> out(8 * 32), scratch;
      if (!fused_attention(bad, q, 8, out, scratch)) {
        ++errors;
        continue;
      }
      for (float x : out) ASSERT_TRUE(std::isfinite(x)) << "iteration " << iter;
    }
    EXPECT_GT(errors, 0) << codec_id(codec);
  }
}

}  // namespace
}  // namespace kvlab
