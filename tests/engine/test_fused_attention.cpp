// Attention computed straight from the compressed cache (KVComp, Jiang et al. 2025, Sec. 4)
// against a double-precision reference over the dequantized cache (dequantize_all): the outputs
// agree to float rounding for GQA groups 1 to 8, Huffman and 2/4/8-bit packed streams, head sizes
// on and off the SIMD width, blocks of 1 to 100 tokens, with and without buffered tokens; the fp16
// baseline agrees with the same reference over its own tensors; corrupt streams give an Error or a
// finite result, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "core/random.h"
#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/codec/code_codec.h"
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

// `width` is the bitpack width (ignored for Huffman); the relative step keeps every code inside
// it (codes <= 1 / rel_scale).
// `pairs`: Huffman at rel_scale 0.2, whose codes (0..5) the cache codes as pair symbols.
Built build(CodecKind codec, int prefill, int appends, int kv_heads, int dim, std::uint64_t seed,
            int block_size = 16, int width = 4, bool pairs = false) {
  CompressedCacheConfig c;
  c.block_size = block_size;
  c.buffer_size = block_size * ((32 + block_size - 1) / block_size);
  c.codec = codec;
  const bool packed = codec == CodecKind::BitPack;
  c.rel_scale = !packed ? (pairs ? 0.2 : 0.05) : (width == 2 ? 0.34 : 0.07);
  c.bitpack_width = packed ? width : 0;
  const int total = prefill + appends;
  Built b{*CompressedKvCache::create(c, kv_heads, dim), random_fp16(total, kv_heads, dim, seed),
          random_fp16(total, kv_heads, dim, seed + 1)};
  EXPECT_TRUE(b.cache.prefill(b.keys.view().token_range(0, prefill),
                              b.values.view().token_range(0, prefill)));
  for (int t = prefill; t < total; ++t) {
    EXPECT_TRUE(b.cache.append(row_of(b.keys, t), row_of(b.values, t)));
  }
  // Pair books only where every code fits 4 bits; there, the smaller book (usually pairs).
  if (b.cache.has_codebooks()) {
    const bool k = b.cache.view().key_book->pairs(), v = b.cache.view().value_book->pairs();
    if (pairs) {
      EXPECT_TRUE(k || v);
    } else {
      EXPECT_FALSE(k || v);
    }
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
  int dim = 64, block_size = 16, width = 4, kv_heads = 2;
  bool pairs = false;  // Huffman with pair-symbol books
};

class FusedAttention : public ::testing::TestWithParam<Case> {};

TEST_P(FusedAttention, MatchesDoubleReferenceOverDequantizedCache) {
  const Case p = GetParam();
  const int kKvHeads = p.kv_heads, kDim = p.dim;
  Built b = build(p.codec, p.prefill, p.appends, kKvHeads, kDim, 42 + p.prefill, p.block_size,
                  p.width, p.pairs);
  const int T = b.cache.tokens();
  const int q_heads = kKvHeads * p.group;
  const std::vector<float> q = random_queries(q_heads, kDim, 7 + p.group);
  std::vector<float> k(static_cast<std::size_t>(T) * kKvHeads * kDim), v(k.size());
  ASSERT_TRUE(b.cache.dequantize_all(k, v));
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

// head_dim 64 and 48 take the SIMD loops (multiples of 16 lanes); 20 and 33 the scalar ones
// (33 also puts 4-bit vectors off byte boundaries). Groups 5 and 8 take two head tiles of the
// SIMD loops; blocks of 100 tokens take two decode tiles (64 + 36); 1, block - 1, block and
// block + 1 compressed or buffered tokens; and caches of 2,100 to 5,005 tokens.
const Case kCases[] = {
    {CodecKind::Huffman, 1, 64, 0},  // compressed only
    {CodecKind::Huffman, 4, 64, 0},
    {CodecKind::Huffman, 1, 50, 45},  // flushes, non-empty buffer
    {CodecKind::Huffman, 4, 50, 45},
    {CodecKind::Huffman, 3, 50, 45},                      // a head tile of 3
    {CodecKind::Huffman, 4, 5, 0},                        // buffer only
    {CodecKind::Huffman, 4, 0, 100},                      // codebooks from the first flush
    {CodecKind::Huffman, 8, 130, 3, 64, 64, 4, 8},        // GQA 8, kTile-sized blocks
    {CodecKind::Huffman, 5, 201, 0, 48, 100},             // decode tiles of 64 + 36, group 4 + 1
    {CodecKind::Huffman, 2, 65, 0, 20},                   // scalar head size
    {CodecKind::Huffman, 4, 3, 0, 64, 1},                 // blocks of one token
    {CodecKind::Huffman, 2, 15, 0},                       // block - 1: buffer only
    {CodecKind::Huffman, 2, 16, 0},                       // exactly one block
    {CodecKind::Huffman, 2, 17, 0},                       // block + 1
    {CodecKind::Huffman, 6, 17, 0, 16, 16, 4, 1},         // one KV head, 16 lanes
    {CodecKind::Huffman, 4, 50, 45, 64, 16, 4, 2, true},  // pair books
    {CodecKind::Huffman, 8, 130, 3, 64, 64, 4, 8, true},
    {CodecKind::Huffman, 5, 201, 0, 48, 100, 4, 2, true},
    {CodecKind::Huffman, 2, 65, 7, 33, 16, 4, 2, true},  // odd dim: a half pair per vector
    // rANS: a block decodes whole when its first tile is read (blocks of 100: tiles 64 + 36),
    // as codes or as pair symbols read as nibbles; odd dims unpack pairs to a byte a code.
    {CodecKind::Rans, 4, 50, 45},
    {CodecKind::Rans, 8, 130, 3, 64, 64, 4, 8},
    {CodecKind::Rans, 5, 201, 0, 48, 100},
    {CodecKind::Rans, 2, 65, 0, 20},
    {CodecKind::Rans, 4, 3, 0, 64, 1},
    {CodecKind::Rans, 4, 0, 100},
    {CodecKind::Rans, 4, 50, 45, 64, 16, 4, 2, true},
    {CodecKind::Rans, 5, 201, 0, 48, 100, 4, 2, true},
    {CodecKind::Rans, 2, 65, 7, 33, 16, 4, 2, true},
    {CodecKind::BitPack, 1, 50, 45},
    {CodecKind::BitPack, 4, 50, 45},
    {CodecKind::BitPack, 8, 130, 3, 64, 64, 4, 8},
    {CodecKind::BitPack, 3, 201, 0, 48, 100},
    {CodecKind::BitPack, 2, 65, 0, 20},
    {CodecKind::BitPack, 2, 40, 7, 33},
    {CodecKind::BitPack, 4, 3, 0, 64, 1},
    {CodecKind::BitPack, 2, 17, 0},
    {CodecKind::BitPack, 4, 50, 45, 64, 16, 8},  // bytes read in place
    {CodecKind::BitPack, 3, 50, 45, 64, 16, 2},  // 2-bit codes: decoded into rows
    {CodecKind::BitPack, 2, 50, 45, 20, 16, 8},
    // Caches long enough to be shared among threads (detail::kMinPartTokens, 1024 tokens a
    // thread), fp16's too: each range sums its own output, the sums added in order.
    {CodecKind::Huffman, 3, 5000, 5, 64, 64, 4, 2, true},
    {CodecKind::Rans, 3, 5000, 5, 64, 64, 4, 2, true},
    {CodecKind::BitPack, 4, 3001, 40, 64, 100},
    {CodecKind::BitPack, 2, 2100, 0, 48, 16, 8},
};

INSTANTIATE_TEST_SUITE_P(Shapes, FusedAttention, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return std::string(codec_id(c.codec)) + "_g" + std::to_string(c.group) +
                                  "_p" + std::to_string(c.prefill) + "_a" +
                                  std::to_string(c.appends) + "_d" + std::to_string(c.dim) + "_b" +
                                  std::to_string(c.block_size) + "_w" + std::to_string(c.width) +
                                  "_h" + std::to_string(c.kv_heads) + (c.pairs ? "_pairs" : "");
                         });

// q.K and softmax.V apart, at every query head and token, against the double reference: the
// folded query (steps, minimums, scale) and the folded weights must not cost more than float
// rounding anywhere, not only on average.
TEST(FusedAttentionParts, LogitsAndValuesMatchPerElement) {
  for (const Case& p : kCases) {
    SCOPED_TRACE(testing::Message()
                 << codec_id(p.codec) << " g" << p.group << " p" << p.prefill << " a" << p.appends
                 << " d" << p.dim << " b" << p.block_size << " w" << p.width);
    Built b = build(p.codec, p.prefill, p.appends, p.kv_heads, p.dim, 5 + p.prefill, p.block_size,
                    p.width, p.pairs);
    const int T = b.cache.tokens(), H = p.kv_heads, D = p.dim, qh = H * p.group;
    if (T == 0) continue;
    const std::vector<float> q = random_queries(qh, D, 11);
    std::vector<float> k(static_cast<std::size_t>(T) * H * D), v(k.size());
    ASSERT_TRUE(b.cache.dequantize_all(k, v));
    std::vector<float> logits(static_cast<std::size_t>(qh) * T),
        out(static_cast<std::size_t>(qh) * D);
    ASSERT_TRUE(fused_attention_logits(b.cache.view(), q, qh, logits));
    double worst = 0;
    for (int h = 0; h < qh; ++h) {
      for (int t = 0; t < T; ++t) {
        double a = 0, mag = 0;
        for (int c = 0; c < D; ++c) {
          const double x = k[(static_cast<std::size_t>(t) * H + h / p.group) * D + c];
          a += q[h * D + c] * x;
          mag += std::abs(q[h * D + c] * x);
        }
        const double want = a / std::sqrt(static_cast<double>(D));
        mag /= std::sqrt(static_cast<double>(D));
        worst = std::max(
            worst, std::abs(logits[static_cast<std::size_t>(h) * T + t] - want) / (mag + 1e-30));
      }
    }
    EXPECT_LT(worst, 1e-5);
    // Weights of both signs and sizes, not only a softmax.
    detail::Rng rng(3);
    std::vector<float> w(logits.size());
    for (float& x : w) x = static_cast<float>(rng.normal());
    ASSERT_TRUE(fused_attention_values(b.cache.view(), w, qh, out));
    worst = 0;
    for (int h = 0; h < qh; ++h) {
      for (int c = 0; c < D; ++c) {
        double a = 0, mag = 0;
        for (int t = 0; t < T; ++t) {
          const double x = v[(static_cast<std::size_t>(t) * H + h / p.group) * D + c];
          a += w[static_cast<std::size_t>(h) * T + t] * x;
          mag += std::abs(w[static_cast<std::size_t>(h) * T + t] * x);
        }
        worst =
            std::max(worst, std::abs(out[static_cast<std::size_t>(h) * D + c] - a) / (mag + 1e-30));
      }
    }
    EXPECT_LT(worst, 1e-5);
  }
}

// Values the codebook has no code for go through the escape (docs/FORMAT.md): re-encoding the
// same codes with a book built from only the commonest values must give the same logits and
// outputs, bit for bit, as the original streams.
TEST(FusedAttentionParts, EscapedValuesDecodeLikeCodedOnes) {
  Built b = build(CodecKind::Huffman, 96, 0, 2, 64, 21);
  const CompressedKvView good = b.cache.view();
  CompressedKvView esc = good;
  std::vector<EncodedCodes> streams;
  std::vector<HuffmanCodebook> books;
  for (const bool keys : {true, false}) {
    const EncodedCodes& e = keys ? *good.keys : *good.values;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(e.tokens) * e.heads * e.dim);
    ASSERT_TRUE(decode_codes(e, keys ? good.key_book : good.value_book, codes));
    CodeCounts counts = count_codes(codes);
    // The rarer half of the values present lose their codes.
    std::vector<std::uint64_t> present;
    for (std::uint64_t c : counts) {
      if (c > 0) present.push_back(c);
    }
    std::sort(present.begin(), present.end());
    const std::uint64_t cut = present[present.size() / 2];
    std::uint64_t escaped = 0;
    for (std::uint64_t& c : counts) {
      if (c < cut) {
        escaped += c;
        c = 0;
      }
    }
    ASSERT_GT(escaped, 0u);
    auto book = HuffmanCodebook::from_histogram(counts);
    ASSERT_TRUE(book);
    books.push_back(*book);
    CodecConfig config;
    config.block_size = e.block_size;
    auto enc = encode_codes(codes, e.tokens, e.heads, e.dim, config, &books.back());
    ASSERT_TRUE(enc);
    streams.push_back(*enc);
  }
  esc.keys = &streams[0];
  esc.values = &streams[1];
  esc.key_book = &books[0];
  esc.value_book = &books[1];
  const int qh = 8, T = good.tokens();
  const std::vector<float> q = random_queries(qh, 64, 5);
  std::vector<float> want(static_cast<std::size_t>(qh) * T), got(want.size());
  ASSERT_TRUE(fused_attention_logits(good, q, qh, want));
  ASSERT_TRUE(fused_attention_logits(esc, q, qh, got));
  EXPECT_EQ(want, got);
  softmax_rows(want, qh);
  std::vector<float> out_want(static_cast<std::size_t>(qh) * 64), out_got(out_want.size());
  ASSERT_TRUE(fused_attention_values(good, want, qh, out_want));
  ASSERT_TRUE(fused_attention_values(esc, want, qh, out_got));
  EXPECT_EQ(out_want, out_got);
}

// softmax_rows against a double softmax, and the same row at every offset in memory gives the same
// bits (a decode step's result must not depend on where its scratch buffer lies), for lengths
// around its 16-value chunks and scores far apart (exp underflowing to 0).
TEST(FusedAttentionParts, SoftmaxRowsMatchDoublesWhereverTheRowLies) {
  for (const int n : {1, 15, 16, 17, 100, 1027}) {
    SCOPED_TRACE(n);
    detail::Rng rng(n);
    std::vector<float> row(static_cast<std::size_t>(n));
    for (float& x : row) x = static_cast<float>(8.0 * rng.normal());
    if (n > 2) row[1] = -200.f;
    double top = -1e300, sum = 0;
    for (const float x : row) top = std::max(top, static_cast<double>(x));
    for (const float x : row) sum += std::exp(static_cast<double>(x) - top);
    std::vector<float> first;
    for (int offset = 0; offset < 16; ++offset) {
      std::vector<float> buf(static_cast<std::size_t>(offset), 0.f);
      buf.insert(buf.end(), row.begin(), row.end());
      const std::span<float> x(buf.data() + offset, row.size());
      softmax_rows(x, 1);
      if (offset == 0) {
        first.assign(x.begin(), x.end());
        for (int i = 0; i < n; ++i) {
          const double arg = static_cast<double>(row[i]) - top;
          const double want = std::exp(arg) / sum;
          // Float rounds x - max to half an ulp, which exp turns into |x - max| ulps of the
          // result; Eigen's exp and the sum add a few more.
          ASSERT_NEAR(x[i], want, (std::abs(arg) + 4) * 1.2e-7 * want + 1e-30) << i;
        }
      } else {
        ASSERT_TRUE(std::equal(x.begin(), x.end(), first.begin())) << "offset " << offset;
      }
    }
  }
}

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
  // Huffman, Huffman with pair books, BitPack, rANS with pair books.
  for (int variant = 0; variant < 4; ++variant) {
    const CodecKind codec = variant < 2    ? CodecKind::Huffman
                            : variant == 2 ? CodecKind::BitPack
                                           : CodecKind::Rans;
    Built b = build(codec, 40, 30, 2, 32, 17, 16, 4, variant == 1 || variant == 3);
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
