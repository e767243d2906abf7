// Rotations against explicit matrices built here: the Sylvester Hadamard matrix entry by entry
// ((-1)^popcount(i & j) / sqrt(n), independent of the doubling construction), llama.cpp's
// block-diagonal attn_rot as a dense matrix product, orthonormality and inverses, and q·k kept.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kvlab/engine/quant/rotation.h"

namespace kvlab {
namespace {

std::vector<float> gaussian(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// y = H_n x / sqrt(n) from the closed form of Sylvester's matrix, in double.
std::vector<double> hadamard_reference(const std::vector<float>& x) {
  const std::size_t n = x.size();
  std::vector<double> y(n, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      y[i] += ((std::popcount(i & j) & 1) ? -1.0 : 1.0) * x[j];
    }
    y[i] /= std::sqrt(double(n));
  }
  return y;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += double(a[i]) * b[i];
  return s;
}

TEST(Rotation, HadamardMatchesExplicitMatrix) {
  for (int n : {1, 2, 4, 8, 32, 64, 128, 256, 512}) {
    const auto x = gaussian(n, 7 + n);
    auto y = x;
    hadamard_transform(y);
    const auto ref = hadamard_reference(x);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], ref[i], 1e-5 * std::sqrt(n)) << n << " " << i;
  }
}

TEST(Rotation, HadamardColumnsAreOrthonormal) {
  const int n = 64;
  std::vector<std::vector<float>> cols(n, std::vector<float>(n, 0.f));
  for (int j = 0; j < n; ++j) {
    cols[j][j] = 1.f;
    hadamard_transform(cols[j]);
  }
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) EXPECT_NEAR(dot(cols[a], cols[b]), a == b ? 1.0 : 0.0, 1e-6);
  }
}

TEST(Rotation, HadamardIsSelfInverse) {
  for (int n : {2, 16, 128, 1024}) {
    const auto x = gaussian(n, 3);
    auto y = x;
    hadamard_transform(y);
    hadamard_transform(y);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5f);
  }
}

TEST(Rotation, HadamardLeavesNonPowerOfTwoAlone) {
  for (int n : {0, 3, 96}) {
    const auto x = gaussian(n, 1);
    auto y = x;
    hadamard_transform(y);
    EXPECT_EQ(y, x);
  }
}

TEST(Rotation, LlamaAttnRotPredicateAndSizes) {
  // Quantized cache types and head_dim % 64 == 0 only (llama_kv_cache's constructor).
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                     GgmlType::IQ4_NL}) {
    EXPECT_TRUE(llama_attn_rot_enabled(t, 128));
    EXPECT_TRUE(llama_attn_rot_enabled(t, 64));
    EXPECT_FALSE(llama_attn_rot_enabled(t, 96));
    EXPECT_FALSE(llama_attn_rot_enabled(t, 80));
    EXPECT_FALSE(llama_attn_rot_enabled(t, 0));
  }
  for (GgmlType t : {GgmlType::F16, GgmlType::F32, GgmlType::BF16}) {
    EXPECT_FALSE(llama_attn_rot_enabled(t, 128));
  }
  // K: largest power of two dividing head_dim; V: always 64 (build_input_k_rot / _v_rot).
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Key, 64), 64);
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Key, 128), 128);
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Key, 192), 64);
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Key, 256), 256);
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Key, 576), 64);
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Value, 128), 64);
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Value, 256), 64);
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Key, 96), 0);
  EXPECT_EQ(llama_attn_rot_size(TensorRole::Value, 32), 0);
}

// llama.cpp's ggml_mul_mat_aux: rows of n consecutive values, each times the n×n matrix.
TEST(Rotation, LlamaAttnRotateIsBlockDiagonalHadamard) {
  for (int head_dim : {64, 128, 192, 256}) {
    for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      const int n = llama_attn_rot_size(role, head_dim);
      const auto x = gaussian(head_dim, head_dim);
      auto y = x;
      llama_attn_rotate(y, role, false);
      for (int b = 0; b < head_dim; b += n) {
        const auto ref = hadamard_reference({x.begin() + b, x.begin() + b + n});
        for (int i = 0; i < n; ++i) EXPECT_NEAR(y[b + i], ref[i], 1e-5) << head_dim;
      }
      llama_attn_rotate(y, role, true);
      for (int i = 0; i < head_dim; ++i) EXPECT_NEAR(y[i], x[i], 1e-5f);
    }
  }
  auto odd = gaussian(96, 2);
  const auto before = odd;
  llama_attn_rotate(odd, TensorRole::Key, false);
  EXPECT_EQ(odd, before);
}

TEST(Rotation, QueryKeyDotUnchanged) {
  const int head_dim = 128;
  auto q = gaussian(head_dim, 11), k = gaussian(head_dim, 12);
  k[5] = 40.f;  // an outlier channel, the case rotations are for
  const double before = dot(q, k);
  auto qa = q, ka = k;
  llama_attn_rotate(qa, TensorRole::Key, false);
  llama_attn_rotate(ka, TensorRole::Key, false);
  EXPECT_NEAR(dot(qa, ka), before, 1e-4 * std::abs(before) + 1e-4);
  // The rotation spreads the outlier: no rotated channel keeps most of it.
  float peak = 0.f;
  for (float v : ka) peak = std::max(peak, std::abs(v));
  EXPECT_LT(peak, 10.f);

  auto rh = RandomizedHadamard::create(head_dim, 42);
  ASSERT_TRUE(rh.ok());
  auto qb = q, kb = k;
  rh->apply(qb);
  rh->apply(kb);
  EXPECT_NEAR(dot(qb, kb), before, 1e-4 * std::abs(before) + 1e-4);

  auto ro = RandomOrthogonalRotation::create(head_dim, 42);
  ASSERT_TRUE(ro.ok());
  auto qc = q, kc = k;
  ro->apply(qc);
  ro->apply(kc);
  EXPECT_NEAR(dot(qc, kc), before, 1e-4 * std::abs(before) + 1e-4);
}

TEST(Rotation, RandomizedHadamardInverseAndSeeds) {
  auto a = RandomizedHadamard::create(64, 1);
  auto b = RandomizedHadamard::create(64, 1);
  auto c = RandomizedHadamard::create(64, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(std::equal(a->signs().begin(), a->signs().end(), b->signs().begin()));
  EXPECT_FALSE(std::equal(a->signs().begin(), a->signs().end(), c->signs().begin()));
  int negative = 0;
  for (float s : a->signs()) {
    EXPECT_TRUE(s == 1.f || s == -1.f);
    negative += s < 0;
  }
  EXPECT_GT(negative, 10);
  EXPECT_LT(negative, 54);
  // H·D against the explicit product.
  const auto x = gaussian(64, 5);
  std::vector<float> dx(64);
  for (int i = 0; i < 64; ++i) dx[i] = x[i] * a->signs()[i];
  const auto ref = hadamard_reference(dx);
  auto y = x;
  a->apply(y);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], ref[i], 1e-5);
  a->inverse(y);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i], 1e-5f);

  const auto bad = RandomizedHadamard::create(96, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("96"), std::string::npos);
}

TEST(Rotation, RandomizedHadamardRowsEqualApply) {
  for (int d : {2, 8, 16, 32, 64, 128, 256}) {
    const auto r = RandomizedHadamard::create(d, 17 + d);
    ASSERT_TRUE(r.ok());
    for (int count : {1, 3, 256}) {
      for (bool inverse : {false, true}) {
        auto rows = gaussian(static_cast<std::size_t>(count) * d, count + d);
        auto ref = rows;
        for (int i = 0; i < count; ++i) {
          std::span<float> v(ref.data() + static_cast<std::size_t>(i) * d, d);
          inverse ? r->inverse(v) : r->apply(v);
        }
        r->apply_rows(rows.data(), count, inverse);
        for (std::size_t i = 0; i < rows.size(); ++i) {
          ASSERT_EQ(std::bit_cast<std::uint32_t>(rows[i]), std::bit_cast<std::uint32_t>(ref[i]))
              << d << " " << count << " " << inverse << " " << i << ": " << rows[i] << " against "
              << ref[i];
        }
      }
    }
  }
}

TEST(Rotation, RandomOrthogonalIsOrthonormalAndSeeded) {
  for (int dim : {1, 7, 64, 96, 128}) {
    auto r = RandomOrthogonalRotation::create(dim, 9);
    ASSERT_TRUE(r.ok());
    const auto m = r->matrix();
    for (int i = 0; i < dim; ++i) {
      for (int j = 0; j < dim; ++j) {
        double s = 0;
        for (int k = 0; k < dim; ++k) s += double(m[i * dim + k]) * m[j * dim + k];
        EXPECT_NEAR(s, i == j ? 1.0 : 0.0, 1e-5) << dim;
      }
    }
    const auto x = gaussian(dim, 4);
    auto y = x;
    r->apply(y);
    r->inverse(y);
    for (int i = 0; i < dim; ++i) EXPECT_NEAR(y[i], x[i], 1e-5f);
  }
  auto a = RandomOrthogonalRotation::create(32, 1), b = RandomOrthogonalRotation::create(32, 1),
       c = RandomOrthogonalRotation::create(32, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(std::equal(a->matrix().begin(), a->matrix().end(), b->matrix().begin()));
  EXPECT_FALSE(std::equal(a->matrix().begin(), a->matrix().end(), c->matrix().begin()));
  EXPECT_FALSE(RandomOrthogonalRotation::create(0, 1).ok());
}

}  // namespace
}  // namespace kvlab
