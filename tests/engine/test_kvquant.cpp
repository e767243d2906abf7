// KVQuant (kvquant_quantizer.h) against references computed here: NF4 against QLoRA's table, the
// k-means against levels known in closed form, the dense-and-sparse split against a sort, the
// bytes against the formula written out, post-RoPE keys quantized before RoPE against RoPE done
// here (and against the pre-RoPE keys of a real model), and its error against plain 3-bit uniform
// quantization.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "codec/bitpack.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/rope_rules.h"
#include "kvlab/engine/model/model_capture.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/quant/kvquant_rules.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"
#include "quant/kvquant_calibration.h"
#include "quant/kvquant_quantizer.h"

namespace kvlab {
namespace {

using detail::KvQuantConfig;
using detail::KvQuantLevels;
using detail::make_kvquant_quantizer;

Tensor gaussian(int T, int H, int D, std::uint32_t seed, DType dtype = DType::F16) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(T) * H * D);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const int ch = static_cast<int>(i % D);
    v[i] = n(rng) * (1.f + 0.1f * (ch % 5)) + (ch == 2 ? 3.f : 0.f);
  }
  return Tensor::from_float(v, dtype, T, H, D);
}

std::vector<float> dequant(const Quantizer& q, const QuantizedTensor& t) {
  std::vector<float> out(static_cast<std::size_t>(t.tokens) * t.heads * t.dim);
  q.dequantize(t, out);
  return out;
}

double mse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * double(a[i] - b[i]);
  return a.empty() ? 0 : s / a.size();
}

// Sparse columns of each quantized token row, from the stored CSR (bounds: sinks, nnz, row
// pointers, columns).
std::vector<std::vector<int>> sparse_rows(const QuantizedTensor& q) {
  const int S = q.bounds[0], Tq = q.tokens - S;
  std::vector<std::vector<int>> rows(static_cast<std::size_t>(Tq));
  for (int t = 0; t < Tq; ++t) {
    for (int j = q.bounds[2 + t]; j < q.bounds[2 + t + 1]; ++j) {
      rows[t].push_back(q.bounds[2 + Tq + 1 + j]);
    }
  }
  return rows;
}

TEST(KvQuant, NormalFloatLevelsAreQloraNf4AtFourBits) {
  // QLoRA (Dettmers et al. 2023), Appendix E / bitsandbytes' NF4 table.
  const double nf4[16] = {-1.0,
                          -0.6961928009986877,
                          -0.5250730514526367,
                          -0.39491748809814453,
                          -0.28444138169288635,
                          -0.18477343022823334,
                          -0.09105003625154495,
                          0.0,
                          0.07958029955625534,
                          0.16093020141124725,
                          0.24611230194568634,
                          0.33791524171829224,
                          0.44070982933044434,
                          0.5626170039176941,
                          0.7229568362236023,
                          1.0};
  const auto l4 = detail::normal_float_levels(4);
  ASSERT_EQ(l4.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(l4[i], nf4[i], 1e-6) << i;
  for (int b : {2, 3, 5}) {
    const auto l = detail::normal_float_levels(b);
    ASSERT_EQ(l.size(), std::size_t{1} << b);
    EXPECT_EQ(l.front(), -1.f);
    EXPECT_EQ(l.back(), 1.f);
    EXPECT_EQ(l[(l.size() / 2) - 1], 0.f) << "zero closes the negative half";
    EXPECT_TRUE(std::is_sorted(l.begin(), l.end()));
  }
  EXPECT_NEAR(detail::normal_quantile(0.975), 1.959963984540054, 1e-12);
}

TEST(KvQuant, KMeansFindsKnownLevels) {
  // Uniform on [-1, 1]: the optimal k levels are the cell centres -1 + (2i + 1) / k.
  std::vector<float> grid;
  for (int i = 0; i < 20000; ++i) grid.push_back(-1.f + (2.f * i + 1.f) / 20000.f);
  for (int k : {4, 8, 16}) {
    const auto c = detail::weighted_kmeans_1d(grid, {}, k);
    for (int i = 0; i < k; ++i) EXPECT_NEAR(c[i], -1.0 + (2.0 * i + 1.0) / k, 2e-3) << k;
  }
  // Tight clusters of very different sizes: the levels are their means, whatever the sizes.
  const float centres[4] = {-0.8f, -0.1f, 0.3f, 0.9f};
  const int counts[4] = {1000, 50, 5000, 10};
  std::vector<float> x, w;
  for (int j = 0; j < 4; ++j) {
    for (int i = 0; i < counts[j]; ++i) x.push_back(centres[j] + 0.001f * ((i % 5) - 2));
  }
  auto c = detail::weighted_kmeans_1d(x, {}, 4);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(c[j], centres[j], 1e-5) << j;
  // Weights move a level: one cluster {0, 1} weighted 3:1 has its centre at 0.25.
  c = detail::weighted_kmeans_1d(std::vector<float>{0.f, 1.f}, std::vector<float>{3.f, 1.f}, 1);
  EXPECT_NEAR(c[0], 0.25f, 1e-6);
}

TEST(KvQuant, CalibratedLevelsFitTheData) {
  // Values uniform per token: its normalised entries are uniform on [-1, 1], so the fitted
  // 3-bit levels are near the cell centres.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> v(512 * 4 * 64);
  for (float& e : v) e = u(rng);
  const Tensor t = Tensor::from_float(v, DType::F32, 512, 4, 64);
  KvQuantConfig cfg;
  cfg.bits = 3;
  auto q = make_kvquant_quantizer(cfg);
  auto cal = q->calibrate(t.view(), TensorRole::Value);
  ASSERT_TRUE(cal.ok()) << cal.message();
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(cal->levels[i], -1.0 + (2.0 * i + 1.0) / 8, 0.02) << i;
  EXPECT_TRUE(cal->lower.empty());
}

// The k largest and k smallest of every token, ties to the lower index at the top and to the
// higher index at the bottom, by a stable sort.
void expect_token_tails(int T, int H, int D, double fraction, int k, float grid) {
  const int C = H * D;
  std::mt19937 rng(11 + C);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(T) * C);
  for (float& e : v) e = grid > 0 ? std::round(nd(rng) / grid) * grid : nd(rng);  // grid: ties
  const Tensor x = Tensor::from_float(v, DType::F16, T, H, D);
  KvQuantConfig cfg;
  cfg.bits = 3;
  cfg.outlier_fraction = fraction;
  cfg.sink_tokens = 0;
  auto q = make_kvquant_quantizer(cfg);
  auto r = q->quantize(x.view(), TensorRole::Value);
  ASSERT_TRUE(r.ok()) << r.message();
  const auto rows = sparse_rows(*r);
  const auto out = dequant(*q, *r);
  const auto xf = x.view().to_float();
  ASSERT_EQ(r->bounds[1], T * 2 * k);
  for (int t = 0; t < T; ++t) {
    std::vector<int> order(C);
    std::iota(order.begin(), order.end(), 0);
    const float* row = xf.data() + t * C;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    std::vector<int> want(order.begin(), order.begin() + k);
    want.insert(want.end(), order.end() - k, order.end());
    std::sort(want.begin(), want.end());
    ASSERT_EQ(rows[t], want) << "token " << t << " of " << C;
    for (int c : want) EXPECT_EQ(out[t * C + c], row[c]) << "kept exactly";
    // The range is what is left: every other entry reconstructs inside it.
    const float lo = row[order[C - 1 - k]], hi = row[order[k]];
    for (int c = 0; c < C; ++c) {
      EXPECT_GE(out[t * C + c], std::min(lo, row[c]) - 1e-2f);
      EXPECT_LE(out[t * C + c], std::max(hi, row[c]) + 1e-2f);
    }
  }
}

TEST(KvQuant, ValueOutliersAreExactlyEachTokensTails) {
  expect_token_tails(50, 4, 32, 0.05, 3, 0.f);      // round(0.05 * 128 / 2) = 3 per side
  expect_token_tails(40, 8, 128, 0.02, 10, 0.f);    // round(0.02 * 1024 / 2) = 10
  expect_token_tails(40, 8, 128, 0.02, 10, 0.25f);  // many ties
  expect_token_tails(20, 3, 64, 0.01, 1, 0.5f);     // SmolLM2's 3 x 64: round(0.96) = 1
  expect_token_tails(20, 5, 100, 0.01, 3, 0.f);     // 500 = 16 * 31 + 4 (a remainder): 3
}

// The percentile by selection (the key thresholds' route) equals numpy's rule over the sorted
// values, ties and ends included.
TEST(KvQuant, PercentileBySelectionIsThePercentileOfTheSorted) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> small(-3, 3);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int n : {1, 2, 3, 10, 199, 1000}) {
    for (bool ties : {false, true}) {
      std::vector<float> v(static_cast<std::size_t>(n));
      for (float& x : v) x = ties ? static_cast<float>(small(rng)) : nd(rng);
      std::vector<float> sorted = v;
      std::sort(sorted.begin(), sorted.end());
      for (double q : {0.0, 0.005, 0.01, 0.25, 0.5, 0.99, 0.995, 1.0}) {
        std::vector<float> work = v;
        EXPECT_EQ(detail::percentile_selected(work, q), detail::percentile_sorted(sorted, q))
            << "n " << n << " q " << q;
      }
    }
  }
}

TEST(KvQuant, KeyOutliersAreTheCalibratedChannelTails) {
  // 1000 distinct values per channel (a shuffled grid of step 0.01, exact in fp16 spacing):
  // the 0.5% and 99.5% percentiles leave exactly 5 entries beyond each.
  const int T = 1000, H = 2, D = 8, C = H * D;
  std::mt19937 rng(3);
  std::vector<float> v(static_cast<std::size_t>(T) * C);
  for (int c = 0; c < C; ++c) {
    std::vector<int> perm(T);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int t = 0; t < T; ++t) v[t * C + c] = (perm[t] - 500) * 0.01f * (1 + c % 3);
  }
  const Tensor x = Tensor::from_float(v, DType::F16, T, H, D);
  const auto xf = x.view().to_float();
  KvQuantConfig cfg;
  cfg.bits = 2;
  cfg.sink_tokens = 0;
  auto q = make_kvquant_quantizer(cfg);
  auto r = q->quantize(x.view(), TensorRole::Key);
  ASSERT_TRUE(r.ok()) << r.message();
  const auto rows = sparse_rows(*r);
  const auto out = dequant(*q, *r);
  std::vector<int> per_channel(C, 0);
  int nnz = 0;
  for (int t = 0; t < T; ++t) {
    for (int c : rows[t]) {
      ++per_channel[c];
      ++nnz;
      EXPECT_EQ(out[t * C + c], xf[t * C + c]);
      const int g = static_cast<int>(std::lround(xf[t * C + c] / (0.01f * (1 + c % 3)))) + 500;
      EXPECT_TRUE(g < 5 || g >= 995) << "grid index " << g;  // the 5 smallest or 5 largest
    }
  }
  for (int c = 0; c < C; ++c) EXPECT_EQ(per_channel[c], 10) << "channel " << c;
  EXPECT_EQ(nnz, r->bounds[1]);
}

TEST(KvQuant, BytesAreTheFormula) {
  for (int bits : {2, 3, 4}) {
    for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      const int T = 77, H = 3, D = 24, C = H * D, S = 2;
      const Tensor x = gaussian(T, H, D, 20 + bits);
      KvQuantConfig cfg;
      cfg.bits = bits;
      cfg.sink_tokens = S;
      cfg.outlier_fraction = 0.03;
      auto q = make_kvquant_quantizer(cfg);
      auto r = q->quantize(x.view(), role);
      ASSERT_TRUE(r.ok()) << r.message();
      const std::uint64_t nnz = static_cast<std::uint64_t>(r->bounds[1]);
      const std::uint64_t Tq = T - S, L = 1u << bits;
      const std::uint64_t units = role == TensorRole::Key ? C : Tq;  // fp16 lower + upper each
      EXPECT_EQ(r->bytes.codes, (Tq * C * bits + 7) / 8);
      EXPECT_EQ(r->bytes.scales, 2 * units);
      EXPECT_EQ(r->bytes.zero_points, 2 * units);
      EXPECT_EQ(r->bytes.residual, 2 * (S * C + nnz));  // sinks + sparse values
      EXPECT_EQ(r->bytes.metadata, 16 + 4 * L + 8 + 4 * (Tq + 1) + 4 * nnz);  // CSR int32
      EXPECT_EQ(r->codes.size(), r->bytes.codes);
      if (role == TensorRole::Value) {
        EXPECT_EQ(nnz, Tq * 2 * 1);  // round(0.03 * 72 / 2) = 1 per side
      }
      const auto h = q->histograms(*r);
      ASSERT_EQ(h.size(), 1u);
      EXPECT_EQ(std::accumulate(h[0].counts.begin(), h[0].counts.end(), std::uint64_t{0}),
                Tq * C - nnz);
    }
  }
}

TEST(KvQuant, BoundarySizesAndSinks) {
  for (int T : {0, 1, 2, 3, 9, 65, 130}) {
    for (int D : {7, 16}) {
      const Tensor x = gaussian(T, 2, D, 40 + T);
      const auto xf = x.view().to_float();
      for (int bits : {2, 3, 4}) {
        for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
          KvQuantConfig cfg;
          cfg.bits = bits;
          cfg.sink_tokens = 2;
          auto q = make_kvquant_quantizer(cfg);
          auto r = q->quantize(x.view(), role);
          ASSERT_TRUE(r.ok()) << r.message();
          const auto out = dequant(*q, *r);
          const int S = std::min(2, T);
          for (int i = 0; i < S * 2 * D; ++i) ASSERT_EQ(out[i], xf[i]) << "sink";
          // Error bounded by the widest level gap times the largest range, for dense entries.
          for (std::size_t i = 0; i < out.size(); ++i) {
            ASSERT_TRUE(std::isfinite(out[i]));
            ASSERT_LT(std::fabs(out[i] - xf[i]), 8.f) << T << " " << D << " " << bits;
          }
        }
      }
    }
  }
  KvQuantConfig bad;
  bad.bits = 9;
  EXPECT_FALSE(
      make_kvquant_quantizer(bad)->quantize(gaussian(4, 1, 8, 1).view(), TensorRole::Key).ok());
  auto q = make_kvquant_quantizer({});
  auto cal = q->calibrate(gaussian(5, 1, 8, 1).view(), TensorRole::Key);
  ASSERT_TRUE(cal.ok());
  EXPECT_FALSE(q->quantize(gaussian(5, 2, 8, 1).view(), TensorRole::Key, *cal).ok())
      << "a calibration of other heads is refused";
  EXPECT_FALSE(q->quantize(gaussian(5, 1, 8, 1).view(), TensorRole::Value, *cal).ok());
}

// RoPE written out here, independently of the engine: pair i of a head turns by pos · θ^(-2i/d).
std::vector<float> rope_here(const std::vector<float>& x, int T, int H, int D, double theta,
                             bool half_split, int first_pos) {
  std::vector<float> y = x;
  for (int t = 0; t < T; ++t) {
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < D / 2; ++i) {
        const double a = (first_pos + t) * std::pow(theta, -2.0 * i / D);
        const int p0 = half_split ? i : 2 * i, p1 = half_split ? i + D / 2 : 2 * i + 1;
        const double u = x[(t * H + h) * D + p0], w = x[(t * H + h) * D + p1];
        y[(t * H + h) * D + p0] = static_cast<float>(u * std::cos(a) - w * std::sin(a));
        y[(t * H + h) * D + p1] = static_cast<float>(u * std::sin(a) + w * std::cos(a));
      }
    }
  }
  return y;
}

// The share of entries where `a` and `b` differ by more than `tol` · max|b|.
double share_apart(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  float amax = 0.f;
  for (float v : b) amax = std::max(amax, std::fabs(v));
  std::size_t apart = 0;
  for (std::size_t i = 0; i < a.size(); ++i) apart += std::fabs(a[i] - b[i]) > tol * amax;
  return a.empty() ? 0.0 : static_cast<double>(apart) / static_cast<double>(a.size());
}

// A model config of H heads of D dims for RoPE: theta 10000, either pair layout.
LlamaConfig rope_model(int H, int D, bool half_split) {
  LlamaConfig mc;
  mc.dim = H * D;
  mc.heads = H;
  mc.rope_theta = 10000.0;
  mc.rope_half_split = half_split;
  return mc;
}

// apply_rope_rows over a long run of positions (its cos and sin stepped on between exact anchors)
// against RoPE in double here, and its inverse against the input; explicit positions as well.
TEST(Rope, ForwardAndInverseMatchRopeInDoubleOverLongContexts) {
  const int T = 5000, H = 2, D = 16;
  const auto x = gaussian(T, H, D, 3, DType::F32).view().to_float();
  for (bool half : {false, true}) {
    const RopeSpec rope = model_rope_spec(rope_model(H, D, half), 123);
    std::vector<float> y = x;
    apply_rope_rows(y.data(), 0, T, H, D, rope);
    const auto want = rope_here(x, T, H, D, 10000.0, half, 123);
    EXPECT_LT(share_apart(y, want, 1e-5f), 1e-4) << "half_split " << half;
    apply_rope_rows(y.data(), 0, T, H, D, rope, /*inverse=*/true);
    EXPECT_LT(share_apart(y, x, 1e-5f), 1e-4) << "half_split " << half;
    // The same positions given one by one, and rows [t0, t1) of them.
    RopeSpec listed = rope;
    for (int t = 0; t < T; ++t) listed.positions.push_back(123 + t);
    std::vector<float> part(x.begin() + 700 * H * D, x.begin() + 900 * H * D);
    apply_rope_rows(part.data(), 700, 900, H, D, listed);
    const std::vector<float> want_part(want.begin() + 700 * H * D, want.begin() + 900 * H * D);
    EXPECT_LT(share_apart(part, want_part, 1e-5f), 1e-4) << "half_split " << half;
  }
}

// Rows turned in pieces that start at multiples of kRopeAnchor are the rows turned in one call,
// bit for bit (the synthetic generator turns its keys a tile at a time on this promise).
TEST(Rope, PiecesAtAnchorsEqualOnePass) {
  const int T = 1000, H = 3, D = 16;
  const auto x = gaussian(T, H, D, 5, DType::F32).view().to_float();
  const RopeSpec rope = model_rope_spec(rope_model(H, D, false), 0);
  std::vector<float> whole = x, pieces = x;
  apply_rope_rows(whole.data(), 0, T, H, D, rope);
  for (int t0 = 0; t0 < T; t0 += 3 * kRopeAnchor) {
    const int t1 = std::min(T, t0 + 3 * kRopeAnchor);
    apply_rope_rows(pieces.data() + static_cast<std::size_t>(t0) * H * D, t0, t1, H, D, rope);
  }
  EXPECT_EQ(pieces, whole);
  EXPECT_NE(pieces, x);
}

// A first position read from a file (kvlab.key_rope) that would run past INT_MAX is refused by
// check() (position(t) = first_position + t would overflow: UBSan, signed-integer-overflow).
TEST(Rope, CheckRefusesPositionsPastIntMax) {
  RopeSpec rope;
  rope.frequencies = {1.0};
  rope.rotary_dims = 2;
  rope.first_position = std::numeric_limits<int>::max();
  EXPECT_TRUE(rope.check(1, 2));
  EXPECT_FALSE(rope.check(2, 2));
  rope.first_position = std::numeric_limits<int>::max() - 1;
  EXPECT_TRUE(rope.check(2, 2));
  rope.positions = {std::numeric_limits<int>::max(), 0, 1};
  EXPECT_TRUE(rope.check(3, 2));
}

TEST(KvQuant, PostRopeKeysAreQuantizedBeforeRope) {
  const int T = 200, H = 2, D = 32;
  const Tensor pre = gaussian(T, H, D, 8);
  const auto pref = pre.view().to_float();
  for (bool half : {false, true}) {
    const LlamaConfig mc = rope_model(H, D, half);
    // Keys as a model stores them: turned by RoPE written out here, at positions 5, 6, ...
    const auto postf = rope_here(pref, T, H, D, 10000.0, half, 5);
    const Tensor post = Tensor::from_float(postf, DType::F32, T, H, D);
    // NormalFloat levels: fixed, so a k-means fit on inputs a rounding apart cannot move them.
    KvQuantConfig plain_cfg;
    plain_cfg.bits = 3;
    plain_cfg.levels = KvQuantLevels::NormalFloat;
    KvQuantConfig cfg = plain_cfg;
    cfg.rope = model_rope_spec(mc, 5);
    auto q = make_kvquant_quantizer(cfg);
    auto plain = make_kvquant_quantizer(plain_cfg);
    EXPECT_NE(q->name().find("pre-RoPE"), std::string::npos) << q->name();
    auto r = q->quantize(post.view(), TensorRole::Key);
    ASSERT_TRUE(r.ok()) << r.message();
    const auto out = dequant(*q, *r);
    // The same as quantizing the pre-RoPE keys and turning the result by RoPE afterwards.
    auto rp = plain->quantize(pre.view(), TensorRole::Key);
    ASSERT_TRUE(rp.ok());
    const auto want = rope_here(dequant(*plain, *rp), T, H, D, 10000.0, half, 5);
    EXPECT_LT(share_apart(out, want, 1e-3f), 0.005) << "half_split " << half;
    EXPECT_NEAR(mse(out, postf), mse(dequant(*plain, *rp), pref), 0.02 * mse(out, postf));
    // Quantizing the post-RoPE keys per channel as they are is a different method.
    auto rpost = plain->quantize(post.view(), TensorRole::Key);
    ASSERT_TRUE(rpost.ok());
    EXPECT_GT(share_apart(dequant(*plain, *rpost), want, 1e-3f), 0.2) << "half_split " << half;
    // Values never turn.
    auto rv = q->quantize(post.view(), TensorRole::Value);
    auto rvp = plain->quantize(post.view(), TensorRole::Value);
    ASSERT_TRUE(rv.ok() && rvp.ok());
    EXPECT_EQ(dequant(*q, *rv), dequant(*plain, *rvp));
  }
  auto plain = make_kvquant_quantizer({});
  EXPECT_NE(plain->name().find("as given"), std::string::npos) << plain->name();
}

// A real model's post-RoPE keys, turned back by the quantizer, against the same model's pre-RoPE
// keys (its capture before RoPE): quantized alike, and the compress pipeline takes the RoPE from
// the capture itself.
TEST(KvQuant, PostRopeCaptureOfARealModelQuantizesAsItsPreRopeKeys) {
  const std::string model_path = std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin";
  if (!std::filesystem::exists(model_path)) GTEST_SKIP() << model_path << " is absent: skipped";
  auto model = load_model(model_path);
  ASSERT_TRUE(model.ok()) << model.message();
  auto pre = capture_kv_cache(*model, "Once upon a time", {40, true});
  auto post = capture_kv_cache(*model, "Once upon a time", {40, false});
  ASSERT_TRUE(pre.ok() && post.ok());
  ASSERT_TRUE(post->cache.key_rope.enabled());
  EXPECT_FALSE(post->cache.keys_pre_rope);
  EXPECT_TRUE(pre->cache.keys_pre_rope);
  const int T = post->cache.tokens(), H = post->cache.shape.kv_heads;
  const int D = post->cache.shape.head_dim;
  KvQuantConfig plain_cfg;
  plain_cfg.bits = 3;
  plain_cfg.levels = KvQuantLevels::NormalFloat;
  KvQuantConfig cfg = plain_cfg;
  cfg.rope = post->cache.key_rope;
  auto q = make_kvquant_quantizer(cfg);
  auto plain = make_kvquant_quantizer(plain_cfg);
  for (std::size_t l = 0; l < pre->cache.layers.size(); ++l) {
    auto r = q->quantize(post->cache.layers[l].key.view(), TensorRole::Key);
    auto rp = plain->quantize(pre->cache.layers[l].key.view(), TensorRole::Key);
    ASSERT_TRUE(r.ok() && rp.ok()) << r.message();
    auto want = dequant(*plain, *rp);
    apply_rope_rows(want.data(), 0, T, H, D, post->cache.key_rope);
    EXPECT_LT(share_apart(dequant(*q, *r), want, 1e-3f), 0.01) << "layer " << l;
  }
  // compress_cache: the post-RoPE capture quantized pre-RoPE has the pre-RoPE capture's error
  // (RoPE is a rotation); --post-rope says so in its label.
  MethodConfig m;
  m.kind = MethodKind::KvQuant;
  m.bits = 2;
  auto a = compress_cache(post->cache, m);
  auto b = compress_cache(pre->cache, m);
  m.pre_rope = false;
  auto c = compress_cache(post->cache, m);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.message() << b.message() << c.message();
  EXPECT_NE(a->method_label.find("pre-RoPE"), std::string::npos) << a->method_label;
  EXPECT_NE(c->method_label.find("post-RoPE"), std::string::npos) << c->method_label;
  for (std::size_t l = 0; l < a->layers.size(); ++l) {
    const double ea = a->layers[l].key_error.mse, eb = b->layers[l].key_error.mse;
    EXPECT_NEAR(ea, eb, 0.02 * eb) << "layer " << l;
  }
  // The attention error of the pre-RoPE capture meets its post-RoPE queries with turned keys.
  EXPECT_NEAR(a->error.attn_output_rel_error, b->error.attn_output_rel_error,
              0.05 * b->error.attn_output_rel_error);
}

// Plain b-bit min-max uniform quantization, per channel (keys) or per token (values).
std::vector<float> uniform_here(const std::vector<float>& x, int T, int C, int bits, bool key) {
  std::vector<float> y(x.size());
  const int outer = key ? C : T, inner = key ? T : C;
  const auto at = [&](int o, int i) { return key ? i * C + o : o * C + i; };
  const float levels = static_cast<float>((1 << bits) - 1);
  for (int o = 0; o < outer; ++o) {
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < inner; ++i) lo = std::min(lo, x[at(o, i)]), hi = std::max(hi, x[at(o, i)]);
    const float step = hi > lo ? (hi - lo) / levels : 1.f;
    for (int i = 0; i < inner; ++i) {
      y[at(o, i)] = lo + std::round((x[at(o, i)] - lo) / step) * step;
    }
  }
  return y;
}

TEST(KvQuant, ThreeBitsWithOutliersBeatUniformThreeBits) {
  const int T = 512, H = 2, D = 64, C = H * D;
  std::mt19937 rng(17);
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(T) * C);
  for (float& e : v) e = n(rng) * (u(rng) < 0.005f ? 25.f : 1.f);  // 0.5% large outliers
  const Tensor x = Tensor::from_float(v, DType::F16, T, H, D);
  const auto xf = x.view().to_float();
  for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    for (KvQuantLevels levels : {KvQuantLevels::KMeans, KvQuantLevels::NormalFloat}) {
      KvQuantConfig cfg;
      cfg.bits = 3;
      cfg.levels = levels;
      auto q = make_kvquant_quantizer(cfg);
      auto r = q->quantize(x.view(), role);
      ASSERT_TRUE(r.ok()) << r.message();
      const double e_kvq = mse(dequant(*q, *r), xf);
      const double e_uni = mse(uniform_here(xf, T, C, 3, role == TensorRole::Key), xf);
      EXPECT_LT(e_kvq, 0.5 * e_uni) << role_name(role) << " " << q->name();
      std::printf("[kvquant] %s %s: mse %.4f vs uniform 3-bit %.4f\n", role_name(role),
                  q->name().c_str(), e_kvq, e_uni);
    }
  }
}

// Not a timed test: prints the quantize throughput (fp16 input bytes per second, one core) and
// the calibration time. Run with --gtest_also_run_disabled_tests --gtest_filter=*Throughput*.
TEST(KvQuant, DISABLED_Throughput) {
  const int T = 4096, H = 8, D = 128;
  const Tensor x = gaussian(T, H, D, 1);
  const double bytes = static_cast<double>(x.nbytes());
  for (int bits : {2, 3, 4}) {
    KvQuantConfig cfg;
    cfg.bits = bits;
    cfg.calibration_tokens = 512;
    auto q = make_kvquant_quantizer(cfg);
    for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      auto cal = q->calibrate(x.view(), role);
      ASSERT_TRUE(cal.ok());
      double best = 1e30;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        auto r = q->quantize(x.view(), role, *cal);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        ASSERT_TRUE(r.ok());
        best = std::min(best, s);
        if (rep == 0) {
          std::printf("[kvquant] %d-bit %s: %.3f bits/value\n", bits, role_name(role),
                      8.0 * r->bytes.total() / (double(T) * H * D));
        }
      }
      std::printf(
          "[kvquant] %d-bit %s: quantize %.2f GB/s of fp16, calibration (512 tokens) %.1f ms\n",
          bits, role_name(role), bytes / best / 1e9, 1e3 * cal->seconds);
    }
  }
}

// Issue 43, item 9: KVQuant's calibration is long at long context; the bar moves inside it and a
// cancel stops it there, reported as a cancel (not wrapped as a failure of the tensor).
TEST(KvQuant, ProgressMovesInsideTheQuantizerAndACancelStopsIt) {
  SyntheticConfig sc;
  sc.preset = "llama3-8b";
  sc.layers = 1;
  sc.context = 8192;
  const KvCache cache = generate_synthetic(sc).value();
  MethodConfig m;
  m.kind = MethodKind::KvQuant;
  m.bits = 3;
  std::vector<double> seen;
  auto done = compress_cache(cache, m, [&](double f, std::string_view) {
    seen.push_back(f);
    return true;
  });
  ASSERT_TRUE(done.ok()) << done.message();
  // One layer: its keys' quantize call spans 2% to 20% of the run.
  EXPECT_TRUE(std::any_of(seen.begin(), seen.end(), [](double f) { return f > 0.03 && f < 0.19; }))
      << "no progress inside the keys' quantizer";
  bool asked = false;
  auto cancelled = compress_cache(cache, m, [&](double f, std::string_view) {
    if (f > 0.03) asked = true;
    return !asked;
  });
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.message(), kCancelledMessage);
}

// The GPU's route to a value token's tails (kvquant_rules.h: a bound from K = k + 1 groups'
// extremes, then each entry past it ranked) against the CPU's select_token_tails, on rows with
// ties, zeros of both signs and repeated extremes: the same outliers and the same range.
TEST(KvQuantRules, TailRanksAreTheSelectedTails) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 5);
  detail::TailScratch scratch;
  int rows = 0;
  for (int n : {3, 7, 64, 192, 1000}) {
    for (int k : {0, 1, 3, 10, 400}) {
      for (int trial = 0; trial < 6; ++trial) {
        std::vector<float> x(static_cast<std::size_t>(n));
        for (float& v : x) {
          const int p = pick(rng);
          v = p == 0 ? 0.f : p == 1 ? -0.f : p == 2 ? 2.5f : nd(rng);  // ties
        }
        if (trial % 2 == 1) x[static_cast<std::size_t>(n) / 2] = 9.f;  // one clear maximum
        float lower = 0.f, upper = 0.f;
        std::vector<int> want;
        detail::select_token_tails(x.data(), n, k, scratch, lower, upper, want);
        const int kk = std::clamp(k, 0, (n - 1) / 2), K = kk + 1;
        // The bound: the smallest of K groups' maxima (the largest of their minima).
        std::vector<float> gmax(K, -INFINITY), gmin(K, INFINITY);
        for (int j = 0; j < n; ++j) {
          gmax[j % K] = std::max(gmax[j % K], x[j]);
          gmin[j % K] = std::min(gmin[j % K], x[j]);
        }
        const float tau_hi = *std::min_element(gmax.begin(), gmax.end());
        const float tau_lo = *std::max_element(gmin.begin(), gmin.end());
        std::vector<int> got;
        float got_lower = 0.f, got_upper = 0.f;
        for (int j = 0; j < n; ++j) {
          const int hr = kvquant_rules::high_rank(x.data(), n, j);
          const int lr = kvquant_rules::low_rank(x.data(), n, j);
          if (hr <= kk) {
            EXPECT_GE(x[j], tau_hi) << "a high tail entry below the bound";
          }
          if (lr <= kk) {
            EXPECT_LE(x[j], tau_lo) << "a low tail entry above the bound";
          }
          if (hr < kk || lr < kk) got.push_back(j);
          if (hr == kk) got_upper = x[j];
          if (lr == kk) got_lower = x[j];
        }
        const std::string at = "n " + std::to_string(n) + " k " + std::to_string(k);
        EXPECT_EQ(got, want) << at;
        EXPECT_EQ(std::bit_cast<std::uint32_t>(got_upper), std::bit_cast<std::uint32_t>(upper))
            << at;
        EXPECT_EQ(std::bit_cast<std::uint32_t>(got_lower), std::bit_cast<std::uint32_t>(lower))
            << at;
        ++rows;
      }
    }
  }
  EXPECT_EQ(rows, 150);
}

// The GPU quantizer's apply step (kernels/src/quant_kvquant.cu) composed here from what it
// calls (the rules, the RoPE angles and the packing the CPU quantizer shares with it) gives the
// CPU quantizer's bytes: codes, parameters, residual and sparse table, keys pre-RoPE (full and
// partial rotary dims, both pair layouts) and as given, values, every bit width, sinks 0 to 3,
// and no outliers at all. The GPU test (GpuQuantizers.SameBytesAsTheCpu) runs the kernels.
TEST(KvQuantRules, ApplyStepFromTheRulesIsTheQuantizersBytes) {
  struct Case {
    int bits, sinks;
    double outliers;
    int rotary;  // 0: keys as given
    bool half;
  };
  const int T = 150, H = 3, D = 16, C = H * D;
  const Tensor x = gaussian(T, H, D, 21, DType::BF16);
  const std::vector<float> xf = x.view().to_float();
  int cases = 0;
  for (const Case& cs :
       {Case{3, 1, 0.01, 0, false}, Case{2, 0, 0.05, 16, false}, Case{4, 3, 0.02, 16, true},
        Case{3, 1, 0.0, 8, true}, Case{4, 1, 0.01, 8, false}}) {
    KvQuantConfig cfg;
    cfg.bits = cs.bits;
    cfg.sink_tokens = cs.sinks;
    cfg.outlier_fraction = cs.outliers;
    if (cs.rotary > 0) {
      cfg.rope.rotary_dims = cs.rotary;
      cfg.rope.half_split = cs.half;
      cfg.rope.first_position = 7;
      for (int i = 0; i < cs.rotary / 2; ++i)
        cfg.rope.frequencies.push_back(std::pow(10000.0, -2.0 * i / cs.rotary));
    }
    const auto q = make_kvquant_quantizer(cfg);
    for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      const std::string at = std::string(role_name(role)) + " bits " + std::to_string(cs.bits) +
                             " rotary " + std::to_string(cs.rotary);
      auto want = q->quantize(x.view(), role);
      ASSERT_TRUE(want) << at << ": " << want.message();
      auto cal = q->self_calibration(x.view(), role);
      ASSERT_TRUE(cal) << at;
      const bool key = role == TensorRole::Key;
      const int S = std::min(cs.sinks, T), Tq = T - S, half = cs.rotary / 2;
      // rows: turned back before RoPE pair by pair, at the angles the quantizer turns by.
      std::vector<float> rows = xf;
      if (key && cs.rotary > 0) {
        std::vector<float> cosv(static_cast<std::size_t>(T) * half), sinv(cosv.size());
        detail::kvquant_key_rope_angles(cfg.rope, T, S, true, cosv.data(), sinv.data());
        for (int t = 0; t < T; ++t) {
          for (int h = 0; h < H; ++h) {
            float* r = rows.data() + (static_cast<std::size_t>(t) * H + h) * D;
            for (int i = 0; i < half; ++i) {
              rope_rules::turn_pair(r[rope_rules::pair_first(i, cs.half)],
                                    r[rope_rules::pair_second(i, cs.rotary, cs.half)],
                                    cosv[t * half + i], sinv[t * half + i]);
            }
          }
        }
      }
      const std::vector<float> mids = detail::kvquant_midpoints(cal->levels);
      const int nm = static_cast<int>(mids.size());
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(Tq) * C);
      std::vector<float> params = cal->levels, tl, tu;
      const detail::KvQuantKeyRanges ranges =
          key ? detail::kvquant_key_ranges(*cal) : detail::KvQuantKeyRanges{};
      const std::vector<float>&lo = ranges.lower, &up = ranges.upper, &inv = ranges.inv,
            &bias = ranges.bias;
      std::vector<std::uint16_t> residual;
      std::vector<int> row_ptr{0}, cols;
      for (int i = 0; i < S * C; ++i) residual.push_back(float_to_fp16(rows[i]));
      std::vector<std::uint16_t> sparse;
      const int k = detail::outliers_per_side(cs.outliers, C);
      for (int t = 0; t < Tq; ++t) {
        const float* r = rows.data() + static_cast<std::size_t>(S + t) * C;
        std::uint8_t* cd = codes.data() + static_cast<std::size_t>(t) * C;
        std::vector<bool> out(C, false);
        if (key) {
          for (int c = 0; c < C; ++c) {
            cd[c] = kvquant_rules::entry_code(r[c], inv[c], bias[c], mids.data(), nm);
            out[c] = cs.outliers > 0.0 && kvquant_rules::key_outlier(r[c], lo[c], up[c]);
          }
        } else {
          float lower = 0.f, upper = 0.f;
          for (int c = 0; c < C; ++c) {
            const int hr = kvquant_rules::high_rank(r, C, c), lr = kvquant_rules::low_rank(r, C, c);
            out[c] = hr < k || lr < k;
            if (hr == k) upper = r[c];
            if (lr == k) lower = r[c];
          }
          tl.push_back(fp16_to_float(float_to_fp16(lower)));
          tu.push_back(fp16_to_float(float_to_fp16(upper)));
          float iv = 0.f, bs = 0.f;
          kvquant_rules::normaliser(tl.back(), tu.back(), iv, bs);
          for (int c = 0; c < C; ++c)
            cd[c] = kvquant_rules::entry_code(r[c], iv, bs, mids.data(), nm);
        }
        for (int c = 0; c < C; ++c) {
          if (!out[c]) continue;
          cols.push_back(c);
          sparse.push_back(float_to_fp16(r[c]));
        }
        row_ptr.push_back(static_cast<int>(cols.size()));
      }
      std::vector<std::uint8_t> packed(detail::packed_bytes(codes.size(), cs.bits), 0);
      detail::kvquant_pack(codes.data(), codes.size(), cs.bits, packed.data(), 0);
      EXPECT_TRUE(std::equal(packed.begin(), packed.end(), want->codes.begin(), want->codes.end()))
          << at;
      const auto& a = key ? lo : tl;
      const auto& b = key ? up : tu;
      params.insert(params.end(), a.begin(), a.end());
      params.insert(params.end(), b.begin(), b.end());
      ASSERT_EQ(params.size(), want->params.size()) << at;
      EXPECT_EQ(0, std::memcmp(params.data(), want->params.data(), params.size() * 4)) << at;
      residual.insert(residual.end(), sparse.begin(), sparse.end());
      EXPECT_EQ(residual, want->residual) << at;
      std::vector<int> bounds{S, static_cast<int>(cols.size())};
      bounds.insert(bounds.end(), row_ptr.begin(), row_ptr.end());
      bounds.insert(bounds.end(), cols.begin(), cols.end());
      EXPECT_EQ(bounds, want->bounds) << at;
      const ByteBreakdown bb = detail::kvquant_bytes(role, T, H, D, cs.sinks, cs.bits, cols.size());
      EXPECT_EQ(bb.total(), want->bytes.total()) << at;
      if (cs.outliers > 0.0 && (key || k > 0)) {  // a sparse table to compare
        EXPECT_GT(cols.size(), 0u) << at;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 10);
}

}  // namespace
}  // namespace kvlab
