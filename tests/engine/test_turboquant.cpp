// TurboQuant (arXiv:2504.19874) against references computed here: Lloyd-Max codebooks against
// the uniform quantizer (d = 3, where f_d is flat), Max's (1960) Gaussian table (large d) and
// Monte Carlo conditional means (d = 8); quantize/dequantize against a plain re-implementation
// of Algorithm 1 with the rotation's own matrix; the distortions of Theorems 1 and 2; QJL's
// unbiasedness over seeds; every stored byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/quant/rotation.h"
#include "quant/lloyd_max.h"
#include "quant/turboquant_quantizer.h"

namespace kvlab {
namespace {

using detail::TurboQuantConfig;
using detail::TurboQuantRotation;

// Max (1960), "Quantizing for minimum distortion", Table I: the positive Lloyd-Max levels of
// N(0, 1) for 2, 4, 8 and 16 levels, and their mean squared error.
const std::vector<std::vector<double>> kMaxLevels = {
    {0.7979},
    {0.4528, 1.510},
    {0.2451, 0.7560, 1.344, 2.152},
    {0.1284, 0.3881, 0.6568, 0.9424, 1.256, 1.618, 2.069, 2.733}};
const double kMaxMse[] = {0.3634, 0.1175, 0.03454, 0.009497};

std::vector<float> gaussian(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// `count` rows of `dim` values, each scaled to unit norm.
std::vector<float> unit_rows(int count, int dim, std::uint32_t seed) {
  auto v = gaussian(static_cast<std::size_t>(count) * dim, seed);
  for (int i = 0; i < count; ++i) {
    double s = 0;
    for (int j = 0; j < dim; ++j) s += double(v[i * dim + j]) * v[i * dim + j];
    for (int j = 0; j < dim; ++j) v[i * dim + j] = float(v[i * dim + j] / std::sqrt(s));
  }
  return v;
}

std::vector<float> roundtrip(const TurboQuantConfig& cfg, const Tensor& t) {
  auto qz = detail::make_turboquant_quantizer(cfg);
  auto q = qz->quantize(t.view(), TensorRole::Key);
  EXPECT_TRUE(q.ok()) << (q.ok() ? "" : q.message());
  std::vector<float> out(t.elements(), -1.f);
  if (q.ok()) qz->dequantize(*q, out);
  return out;
}

TEST(LloydMax, FlatDensityAtDim3GivesTheUniformQuantizer) {
  // d = 3: f_3 is 1/2 on [-1, 1] (Archimedes), whose Lloyd-Max quantizer is the uniform one.
  for (int b = 1; b <= 4; ++b) {
    const auto cb = detail::compute_lloyd_max_codebook(3, b);
    const int k = 1 << b;
    ASSERT_EQ(cb.centroids.size(), std::size_t(k));
    for (int i = 0; i < k; ++i) EXPECT_NEAR(cb.centroids[i], -1.0 + (2.0 * i + 1) / k, 1e-5);
    EXPECT_NEAR(cb.mse, (2.0 / k) * (2.0 / k) / 12.0, 1e-6);
  }
}

TEST(LloydMax, LargeDimTendsToMaxGaussianTable) {
  // f_d tends to N(0, 1/d); at d = 4096 the levels differ from Max's by O(1/d) (and his table's
  // four digits).
  const int d = 4096;
  const double sd = 1.0 / std::sqrt(double(d));
  for (int b = 1; b <= 4; ++b) {
    const auto cb = detail::compute_lloyd_max_codebook(d, b);
    const int k = 1 << b;
    for (int i = 0; i < k / 2; ++i) {
      EXPECT_NEAR(cb.centroids[k / 2 + i] / sd, kMaxLevels[b - 1][i], 3e-3) << b << " " << i;
      EXPECT_NEAR(cb.centroids[k / 2 - 1 - i] / sd, -kMaxLevels[b - 1][i], 3e-3) << b << " " << i;
    }
    EXPECT_NEAR(cb.mse * d / kMaxMse[b - 1], 1.0, 3e-3) << b;
    for (int i = 0; i + 1 < k; ++i) {
      EXPECT_NEAR(cb.boundaries[i], 0.5 * (cb.centroids[i] + cb.centroids[i + 1]), 1e-7);
    }
  }
}

TEST(LloydMax, CentroidsAreConditionalMeansOfSphereCoordinates) {
  // d = 8, neither flat nor Gaussian: sample the first coordinate of uniform points on S^7 and
  // check each centroid is the mean of the samples its cell receives.
  const int d = 8, samples = 200000;
  const auto pts = unit_rows(samples, d, 11);
  for (int b = 1; b <= 3; ++b) {
    const auto cb = detail::compute_lloyd_max_codebook(d, b);
    const int k = 1 << b;
    std::vector<double> sum(k, 0), sum2(k, 0), cnt(k, 0);
    double err = 0;
    for (int s = 0; s < samples; ++s) {
      const double x = pts[s * d];
      int c = 0;
      while (c + 1 < k && x > cb.boundaries[c]) ++c;
      sum[c] += x;
      sum2[c] += x * x;
      cnt[c] += 1;
      err += (x - cb.centroids[c]) * (x - cb.centroids[c]);
    }
    for (int c = 0; c < k; ++c) {
      const double mean = sum[c] / cnt[c];
      const double se = std::sqrt((sum2[c] / cnt[c] - mean * mean) / cnt[c]);
      EXPECT_NEAR(cb.centroids[c], mean, 5 * se) << b << " " << c;
    }
    EXPECT_NEAR(err / samples / cb.mse, 1.0, 0.02) << b;
  }
}

TEST(LloydMax, CachedOncePerDimAndBits) {
  const auto& a = detail::lloyd_max_codebook(64, 2);
  const auto& b = detail::lloyd_max_codebook(64, 2);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.dim, 64);
  EXPECT_EQ(a.bits, 2);
  EXPECT_TRUE(detail::compute_lloyd_max_codebook(1, 2).centroids.empty());
  EXPECT_TRUE(detail::compute_lloyd_max_codebook(64, 5).centroids.empty());
}

// Algorithm 1 written out: y = Q x / ||x||, the nearest centroid per coordinate, then
// ||x|| Q^T c, with the norm stored as fp32.
std::vector<float> mse_reference(const std::vector<float>& x, int dim, int bits,
                                 std::uint64_t seed) {
  const auto rot = RandomOrthogonalRotation::create(dim, seed);
  const auto q = rot->matrix();
  const auto& cb = detail::lloyd_max_codebook(dim, bits);
  std::vector<float> out(x.size());
  for (std::size_t v = 0; v < x.size() / dim; ++v) {
    const float* xi = x.data() + v * dim;
    double nn = 0;
    for (int j = 0; j < dim; ++j) nn += double(xi[j]) * xi[j];
    const double norm = std::sqrt(nn);
    std::vector<double> c(dim);
    for (int i = 0; i < dim; ++i) {
      double y = 0;
      for (int j = 0; j < dim; ++j) y += double(q[i * dim + j]) * xi[j];
      y = norm > 0 ? y / norm : 0;
      double best = 1e9;
      for (float cen : cb.centroids) {
        if (std::fabs(y - cen) < best) best = std::fabs(y - cen), c[i] = cen;
      }
    }
    for (int j = 0; j < dim; ++j) {
      double s = 0;
      for (int i = 0; i < dim; ++i) s += double(q[i * dim + j]) * c[i];
      out[v * dim + j] = float(norm * s);
    }
  }
  return out;
}

TEST(TurboQuant, MseMatchesAlgorithmOneWrittenOut) {
  // Boundary token counts around the 256-vector block, odd head counts, dims not powers of two.
  struct Shape {
    int tokens, heads, dim;
  };
  for (const Shape s : {Shape{0, 2, 16}, Shape{1, 1, 24}, Shape{255, 1, 16}, Shape{256, 1, 16},
                        Shape{257, 1, 16}, Shape{7, 3, 40}, Shape{90, 3, 96}}) {
    for (int b = 1; b <= 4; ++b) {
      const auto x = gaussian(static_cast<std::size_t>(s.tokens) * s.heads * s.dim, 5 + b);
      const Tensor t = Tensor::from_float(x, DType::F32, s.tokens, s.heads, s.dim);
      TurboQuantConfig cfg{b, false, TurboQuantRotation::RandomOrthogonal, 42, DType::F32};
      const auto got = roundtrip(cfg, t);
      const auto ref = mse_reference(x, s.dim, b, 42);
      int far = 0;
      for (std::size_t i = 0; i < x.size(); ++i) far += std::fabs(got[i] - ref[i]) > 1e-4f;
      // A coordinate exactly on a boundary may round either way in float: allow a few.
      EXPECT_LE(far, int(x.size() / 500))
          << s.tokens << "x" << s.heads << "x" << s.dim << " b" << b;
    }
  }
}

TEST(TurboQuant, MseDistortionOfUnitVectorsMatchesTheoremOne) {
  // Theorem 1: D_mse = E||x - x_hat||^2 for unit x is about 0.36, 0.117, 0.03, 0.009 at
  // b = 1..4 (d large); Max's Gaussian errors are the limit. At d = 128 the sphere's codebook
  // is within 2 % of them. Both rotations: a randomized Hadamard of random vectors does as well.
  const int d = 128, count = 3000;
  const auto x = unit_rows(count, d, 3);
  const Tensor t = Tensor::from_float(x, DType::F32, count, 1, d);
  for (auto rot : {TurboQuantRotation::RandomOrthogonal, TurboQuantRotation::RandomizedHadamard}) {
    for (int b = 1; b <= 4; ++b) {
      const auto got = roundtrip({b, false, rot, 9, DType::F32}, t);
      double err = 0;
      for (std::size_t i = 0; i < x.size(); ++i) err += double(x[i] - got[i]) * (x[i] - got[i]);
      err /= count;
      EXPECT_NEAR(err / kMaxMse[b - 1], 1.0, 0.05) << b << " " << int(rot);
      // The theorem's bound for every b: sqrt(3) pi / 2 * 4^-b.
      EXPECT_LT(err, std::sqrt(3.0) * std::numbers::pi / 2 * std::pow(4.0, -b));
    }
  }
}

// <y, x_hat> - <y, x> for fixed unit x, y over `seeds` draws of Pi and S.
struct IpStats {
  double mean = 0, se = 0, ratio = 0;
};
IpStats inner_product_errors(int bits, bool qjl, int seeds) {
  const int d = 64;
  const auto x = unit_rows(1, d, 21);
  auto y = unit_rows(1, d, 22);
  for (int j = 0; j < d; ++j) y[j] = 0.6f * x[j] + 0.8f * y[j];
  double exact = 0;
  for (int j = 0; j < d; ++j) exact += double(x[j]) * y[j];
  const Tensor t = Tensor::from_float(x, DType::F32, 1, 1, d);
  double s = 0, s2 = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    const auto got = roundtrip({bits, qjl, TurboQuantRotation::RandomizedHadamard,
                                static_cast<std::uint64_t>(seed), DType::F32},
                               t);
    double ip = 0;
    for (int j = 0; j < d; ++j) ip += double(got[j]) * y[j];
    s += ip - exact;
    s2 += (ip - exact) * (ip - exact);
  }
  IpStats r;
  r.mean = s / seeds;
  r.se = std::sqrt((s2 / seeds - r.mean * r.mean) / seeds);
  r.ratio = 1.0 + r.mean / exact;
  return r;
}

TEST(TurboQuant, ProdInnerProductIsUnbiasedOverSeeds) {
  for (int b = 1; b <= 3; ++b) {
    const auto r = inner_product_errors(b, true, 600);
    EXPECT_LT(std::fabs(r.mean), 4 * r.se) << b << " mean " << r.mean << " se " << r.se;
    EXPECT_GT(r.se, 0.0);
  }
  // Without QJL the 1-bit quantizer shrinks inner products by 2/pi (Sec. 3.2).
  const auto r = inner_product_errors(1, false, 600);
  EXPECT_GT(std::fabs(r.mean), 10 * r.se);
  EXPECT_NEAR(r.ratio, 2.0 / std::numbers::pi, 0.05);
}

TEST(TurboQuant, ProdInnerProductDistortionMatchesTheoremTwo) {
  // Theorem 2: D_prod = E(<y,x> - <y,x_hat>)^2 ~ 1.57/d, 0.56/d, 0.18/d, 0.047/d for b = 1..4,
  // i.e. (pi/2) * D_mse(b - 1) / d for unit x, y (the QJL variance times ||r||^2).
  const int d = 128, count = 2000;
  const auto x = unit_rows(count, d, 31);
  const auto y = unit_rows(count, d, 32);
  const Tensor t = Tensor::from_float(x, DType::F32, count, 1, d);
  for (int b = 1; b <= 4; ++b) {
    const auto got = roundtrip({b, true, TurboQuantRotation::RandomOrthogonal, 5, DType::F32}, t);
    double e2 = 0;
    for (int i = 0; i < count; ++i) {
      double e = 0;
      for (int j = 0; j < d; ++j) e += double(got[i * d + j] - x[i * d + j]) * y[i * d + j];
      e2 += e * e;
    }
    const double expected = std::numbers::pi / 2 * (b == 1 ? 1.0 : kMaxMse[b - 2]) / d;
    EXPECT_NEAR(e2 / count / expected, 1.0, 0.12) << b;
  }
}

TEST(TurboQuant, CountsEveryStoredByte) {
  const int tokens = 5, heads = 3, dim = 64;
  const std::size_t vectors = tokens * heads, n = vectors * dim;
  const Tensor t = Tensor::from_float(gaussian(n, 1), DType::F16, tokens, heads, dim);
  for (int b = 1; b <= 4; ++b) {
    for (bool qjl : {false, true}) {
      for (DType nd : {DType::F16, DType::F32}) {
        const TurboQuantConfig cfg{b, qjl, TurboQuantRotation::RandomizedHadamard, 1, nd};
        auto q = detail::make_turboquant_quantizer(cfg)->quantize(t.view(), TensorRole::Value);
        ASSERT_TRUE(q.ok()) << q.message();
        // The MSE codes (b or b - 1 bits), the QJL signs, one or two norms per vector.
        const int mse_bits = qjl ? b - 1 : b;
        const std::size_t code_bytes = n * mse_bits / 8 + (qjl ? n / 8 : 0);
        const std::size_t norm_bytes = vectors * (qjl ? 2 : 1) * (nd == DType::F16 ? 2 : 4);
        EXPECT_EQ(q->codes.size(), code_bytes);
        EXPECT_EQ(q->bytes.codes, code_bytes);
        EXPECT_EQ(q->bytes.scales, norm_bytes);
        EXPECT_EQ(q->params.size(), vectors * (qjl ? 2 : 1));
        EXPECT_EQ(q->bytes.metadata, kTensorHeaderBytes + 8);
        EXPECT_EQ(q->bytes.total(), code_bytes + norm_bytes + kTensorHeaderBytes + 8);
        const auto expected = detail::turboquant_bytes(cfg, tokens, heads, dim);
        EXPECT_EQ(expected.total(), q->bytes.total());
        std::uint64_t hist = 0;
        for (const auto& h : detail::make_turboquant_quantizer(cfg)->histograms(*q)) {
          EXPECT_EQ(h.counts.size(), std::size_t{1} << h.bits);
          for (auto c : h.counts) hist += c;
        }
        EXPECT_EQ(hist, n * ((mse_bits > 0) + qjl));
      }
    }
  }
  // fp16 norms hold values fp16 can represent, saturated at 65504.
  std::vector<float> big(64, 1.0e4f);
  const Tensor tb = Tensor::from_float(big, DType::F32, 1, 1, 64);
  auto q = detail::make_turboquant_quantizer(
               {4, false, TurboQuantRotation::RandomOrthogonal, 1, DType::F16})
               ->quantize(tb.view(), TensorRole::Key);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->params[0], 65504.0f);
}

TEST(TurboQuant, ZeroVectorsDequantizeToZero) {
  const Tensor t(DType::F16, 9, 2, 32);
  for (int b = 1; b <= 4; ++b) {
    for (bool qjl : {false, true}) {
      for (auto rot :
           {TurboQuantRotation::RandomOrthogonal, TurboQuantRotation::RandomizedHadamard}) {
        for (float v : roundtrip({b, qjl, rot, 3, DType::F16}, t)) ASSERT_EQ(v, 0.0f);
      }
    }
  }
}

TEST(TurboQuant, ErrorsNameTheInput) {
  const Tensor t96(DType::F16, 4, 2, 96);
  auto had = detail::make_turboquant_quantizer(
      {3, false, TurboQuantRotation::RandomizedHadamard, 0, DType::F16});
  auto q = had->quantize(t96.view(), TensorRole::Key);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.message().find("head_dim 96"), std::string::npos) << q.message();
  EXPECT_NE(q.message().find("power of two"), std::string::npos) << q.message();
  // The paper's rotation takes any head_dim.
  EXPECT_TRUE(detail::make_turboquant_quantizer(
                  {3, false, TurboQuantRotation::RandomOrthogonal, 0, DType::F16})
                  ->quantize(t96.view(), TensorRole::Key)
                  .ok());
  for (int bits : {0, 5}) {
    auto bad = detail::make_turboquant_quantizer(
                   {bits, false, TurboQuantRotation::RandomOrthogonal, 0, DType::F16})
                   ->quantize(t96.view(), TensorRole::Key);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.message().find("bits " + std::to_string(bits)), std::string::npos);
  }
  const Tensor t1(DType::F16, 4, 2, 1);
  auto one = had->quantize(t1.view(), TensorRole::Value);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.message().find("head_dim 1"), std::string::npos) << one.message();
  std::vector<float> inf(16, 0.f);
  inf[3] = INFINITY;
  const Tensor ti = Tensor::from_float(inf, DType::F32, 1, 1, 16);
  auto qi = had->quantize(ti.view(), TensorRole::Value);
  ASSERT_FALSE(qi.ok());
  EXPECT_NE(qi.message().find("token 0, head 0"), std::string::npos) << qi.message();
}

// The vectorised nearest-level search (count_boundaries_below) against the plain count of every
// boundary below x, on random values and on values exactly on a boundary (a tie takes the lower
// level), its neighbours one ulp away, +-0, +-inf and NaN, for 0 to 15 boundaries (codebooks of
// 1 to 4 bits and KVQuant's midpoints) and lengths that are not multiples of 16; then on every
// Lloyd-Max codebook scaled by a norm, as TurboQuant uses it.
TEST(TurboQuantLevelSearch, FastEqualsPlainIncludingTies) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.f, 1.f);
  std::uniform_int_distribution<int> pick(0, 99);
  for (int count = 0; count <= detail::kMaxLevelBoundaries; ++count) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<float> t(count);
      for (float& v : t) v = g(rng);
      if (count >= 2 && rep % 4 == 1) t[1] = t[0];  // repeated boundaries
      if (count >= 1 && rep % 4 == 2) t[count / 2] = 0.f;
      std::sort(t.begin(), t.end());  // (the search needs them ascending)
      const std::size_t n = 1 + static_cast<std::size_t>(rep) * 37;
      std::vector<float> x(n);
      for (float& v : x) {
        const int r = pick(rng);
        if (count > 0 && r < 40) {
          const float b = t[static_cast<std::size_t>(pick(rng)) % t.size()];
          v = r < 20 ? b : std::nextafter(b, r < 30 ? INFINITY : -INFINITY);
        } else if (r >= 40 && r < 44) {
          const float special[] = {0.f, -0.f, INFINITY, -INFINITY, NAN};
          v = special[r - 40 + (pick(rng) % 2)];
        } else {
          v = 2.f * g(rng);
        }
      }
      std::vector<std::uint8_t> plain(n, 0xff), fast(n, 0xee);
      detail::count_boundaries_below_plain(x.data(), n, t.data(), count, plain.data());
      detail::count_boundaries_below(x.data(), n, t.data(), count, fast.data());
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(int(fast[i]), int(plain[i]))
            << "count " << count << " rep " << rep << " x " << x[i] << " at " << i;
      }
    }
  }
  for (int bits = 1; bits <= detail::kLloydMaxMaxBits; ++bits) {
    const auto& cb = detail::lloyd_max_codebook(128, bits);
    const float norm = 3.7f;
    std::vector<float> th(cb.boundaries.size());
    for (std::size_t k = 0; k < th.size(); ++k) th[k] = norm * cb.boundaries[k];
    std::vector<float> x = gaussian(1000, 5 + bits);
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] *= norm / std::sqrt(128.f);
      if (i % 5 == 0) x[i] = th[i % th.size()];
    }
    std::vector<std::uint8_t> plain(x.size()), fast(x.size());
    detail::count_boundaries_below_plain(x.data(), x.size(), th.data(), int(th.size()),
                                         plain.data());
    detail::count_boundaries_below(x.data(), x.size(), th.data(), int(th.size()), fast.data());
    EXPECT_EQ(fast, plain) << bits << " bits";
  }
}

}  // namespace
}  // namespace kvlab
