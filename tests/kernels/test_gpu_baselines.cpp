// The GPU baselines (cuBLAS fp16 and fused FP8 attention) against double-precision references
// written here with plain loops. SKIPPED without a usable GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kvlab/engine/dtype.h"
#include "kvlab/engine/fp8.h"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"

namespace kvlab {
namespace {

#define KVLAB_REQUIRE_GPU()                         \
  do {                                              \
    if (Status gpu_ = cuda::require_gpu(); !gpu_) { \
      GTEST_SKIP() << "no GPU: " << gpu_.message(); \
    }                                               \
  } while (0)

struct Shape {
  int tokens, kv_heads, group, dim;
};

// logits[qh][t] = sum_c q[qh][c] k[t][h][c] / sqrt(dim); out[qh][c] = sum_t p[qh][t] v[t][h][c].
void reference(const std::vector<double>& k, const std::vector<double>& v, const Shape& s,
               const std::vector<float>& q, const std::vector<float>& p,
               std::vector<double>& logits, std::vector<double>& out) {
  const int qh_n = s.kv_heads * s.group;
  logits.assign(static_cast<std::size_t>(qh_n) * s.tokens, 0.0);
  out.assign(static_cast<std::size_t>(qh_n) * s.dim, 0.0);
  for (int qh = 0; qh < qh_n; ++qh) {
    const int h = qh / s.group;
    for (int t = 0; t < s.tokens; ++t) {
      double dot = 0;
      for (int c = 0; c < s.dim; ++c) {
        const std::size_t i = (static_cast<std::size_t>(t) * s.kv_heads + h) * s.dim + c;
        dot += q[static_cast<std::size_t>(qh) * s.dim + c] * k[i];
        out[static_cast<std::size_t>(qh) * s.dim + c] +=
            p[static_cast<std::size_t>(qh) * s.tokens + t] * v[i];
      }
      logits[static_cast<std::size_t>(qh) * s.tokens + t] = dot / std::sqrt(double(s.dim));
    }
  }
}

double rel_error(const std::vector<float>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;  // unwritten (NaN-poisoned) or overflowed
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

const Shape kShapes[] = {{1, 1, 1, 64},     {63, 2, 4, 128},  {64, 8, 4, 128},  {65, 4, 1, 64},
                         {1000, 8, 4, 128}, {333, 2, 8, 128}, {4096, 8, 4, 128}};

TEST(GpuBaselines, CublasFp16MatchesReference) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message()
                 << s.tokens << "x" << s.kv_heads << " group " << s.group << " dim " << s.dim);
    const std::size_t n = static_cast<std::size_t>(s.tokens) * s.kv_heads * s.dim;
    std::vector<std::uint16_t> k(n), v(n);
    std::vector<double> kd(n), vd(n);
    for (std::size_t i = 0; i < n; ++i) {
      k[i] = float_to_fp16(nd(rng));
      v[i] = float_to_fp16(nd(rng));
      kd[i] = fp16_to_float(k[i]);
      vd[i] = fp16_to_float(v[i]);
    }
    const int qh = s.kv_heads * s.group;
    std::vector<float> q(static_cast<std::size_t>(qh) * s.dim),
        p(static_cast<std::size_t>(qh) * s.tokens);
    for (auto& x : q) x = nd(rng);
    for (auto& x : p) x = std::abs(nd(rng)) / s.tokens;
    std::vector<double> rl, ro;
    reference(kd, vd, s, q, p, rl, ro);
    const Fp16KvView kv{s.tokens, s.kv_heads, s.dim, k, v};
    std::vector<float> logits(rl.size()), out(ro.size());
    ASSERT_TRUE(cuda::fp16_attention_logits(kv, q, qh, logits));
    ASSERT_TRUE(cuda::fp16_attention_values(kv, p, qh, out));
    // Queries and weights are rounded to fp16 for the GEMM: errors near 2^-11.
    EXPECT_LT(rel_error(logits, rl), 2e-3);
    EXPECT_LT(rel_error(out, ro), 2e-3);
  }
}

TEST(GpuBaselines, Fp8MatchesReferenceInBothFormats) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(6);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (Fp8Format format : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(::testing::Message()
                   << (format == Fp8Format::E4M3 ? "e4m3 " : "e5m2 ") << s.tokens << "x"
                   << s.kv_heads << " group " << s.group << " dim " << s.dim);
      const std::size_t n = static_cast<std::size_t>(s.tokens) * s.kv_heads * s.dim;
      std::vector<float> ks(s.kv_heads), vs(s.kv_heads);
      for (auto& x : ks) x = 0.01f + std::abs(nd(rng)) * 0.02f;
      for (auto& x : vs) x = 0.01f + std::abs(nd(rng)) * 0.02f;
      std::vector<std::uint8_t> k(n), v(n);
      std::vector<double> kd(n), vd(n);
      for (std::size_t i = 0; i < n; ++i) {
        const int h = static_cast<int>((i / s.dim) % s.kv_heads);
        k[i] = float_to_fp8(nd(rng) / ks[h], format);
        v[i] = float_to_fp8(nd(rng) / vs[h], format);
        kd[i] = static_cast<double>(fp8_to_float(k[i], format)) * ks[h];
        vd[i] = static_cast<double>(fp8_to_float(v[i], format)) * vs[h];
      }
      const int qh = s.kv_heads * s.group;
      std::vector<float> q(static_cast<std::size_t>(qh) * s.dim),
          p(static_cast<std::size_t>(qh) * s.tokens);
      for (auto& x : q) x = nd(rng);
      for (auto& x : p) x = std::abs(nd(rng)) / s.tokens;
      std::vector<double> rl, ro;
      reference(kd, vd, s, q, p, rl, ro);
      const cuda::Fp8KvView kv{s.tokens, s.kv_heads, s.dim, format, k, v, ks, vs};
      std::vector<float> logits(rl.size()), out(ro.size());
      ASSERT_TRUE(cuda::fp8_attention_logits(kv, q, qh, logits));
      ASSERT_TRUE(cuda::fp8_attention_values(kv, p, qh, out));
      EXPECT_LT(rel_error(logits, rl), 1e-5);
      EXPECT_LT(rel_error(out, ro), 1e-5);
    }
  }
}

TEST(GpuBaselines, BadShapesAreErrors) {
  KVLAB_REQUIRE_GPU();
  const std::vector<std::uint8_t> codes(10 * 2 * 96, 0);
  const std::vector<float> sc(2, 1.f), q(2 * 96), p(2 * 10);
  std::vector<float> logits(2 * 10), out(2 * 96);
  cuda::Fp8KvView kv{10, 2, 96, Fp8Format::E4M3, codes, codes, sc, sc};
  auto st = cuda::fp8_attention_logits(kv, q, 2, logits);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("head_dim 96"), std::string::npos) << st.message();
  const std::vector<std::uint16_t> h(10 * 2 * 64, 0);
  const Fp16KvView f{10, 2, 64, h, h};
  std::vector<float> q3(3 * 64), l3(3 * 10);
  EXPECT_FALSE(cuda::fp16_attention_logits(f, q3, 3, l3));
}

}  // namespace
}  // namespace kvlab
