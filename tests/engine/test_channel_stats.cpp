// key_channel_absmax against a plain computation written here: the rotations as explicit
// matrices in double (Sylvester's H_n entry by entry times the sign diagonal; the orthogonal
// rotation's own matrix), then the max over tokens of |x| per head and channel. Token counts
// around the chunk size, f16 and f32, a strided view, NaNs, the per-head seed rule and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "kvlab/engine/quant/channel_stats.h"
#include "kvlab/engine/quant/rotation.h"

namespace kvlab {
namespace {

Tensor random_keys(int tokens, int heads, int dim, DType dtype, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(tokens) * heads * dim);
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] = d(rng);
    if (i % dim == 3) v[i] *= 12.0f;  // an outlier channel in every head
  }
  return Tensor::from_float(v, dtype, tokens, heads, dim);
}

// Head h's rotation as a dense dim×dim matrix in double (row i, column j).
std::vector<double> rotation_matrix(RotationKind kind, int dim, std::uint64_t seed, int h) {
  const std::size_t n = static_cast<std::size_t>(dim);
  std::vector<double> m(n * n, 0.0);
  const std::uint64_t head_seed = rotation_head_seed(seed, h);
  if (kind == RotationKind::None) {
    for (std::size_t i = 0; i < n; ++i) m[i * n + i] = 1.0;
  } else if (kind == RotationKind::Hadamard) {  // H D / sqrt(n)
    auto r = RandomizedHadamard::create(dim, head_seed);
    EXPECT_TRUE(r.ok());
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        const double h_ij = (std::popcount(i & j) & 1) ? -1.0 : 1.0;
        m[i * n + j] = h_ij * r->signs()[j] / std::sqrt(double(n));
      }
    }
  } else {
    auto r = RandomOrthogonalRotation::create(dim, head_seed);
    EXPECT_TRUE(r.ok());
    for (std::size_t i = 0; i < n * n; ++i) m[i] = r->matrix()[i];
  }
  return m;
}

std::vector<double> plain_absmax(const TensorView& x, RotationKind kind, std::uint64_t seed) {
  const int dim = x.dim();
  std::vector<double> out(static_cast<std::size_t>(x.heads()) * dim, 0.0);
  for (int h = 0; h < x.heads(); ++h) {
    const std::vector<double> m = rotation_matrix(kind, dim, seed, h);
    for (int t = 0; t < x.tokens(); ++t) {
      for (int i = 0; i < dim; ++i) {
        double y = 0;
        for (int j = 0; j < dim; ++j) y += m[i * dim + j] * x.at(t, h, j);
        double& o = out[static_cast<std::size_t>(h) * dim + i];
        if (!std::isnan(y)) o = std::max(o, std::fabs(y));
      }
    }
  }
  return out;
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << "entry " << i;
  }
}

TEST(ChannelStats, HeadSeedRule) {
  // The rule RotatedQuantizer has used since issue 22: seed ^ (golden ratio * (head + 1)).
  EXPECT_EQ(rotation_head_seed(0, 0), 0x9E3779B97F4A7C15ull);
  EXPECT_EQ(rotation_head_seed(7, 2), 7ull ^ (0x9E3779B97F4A7C15ull * 3ull));
  EXPECT_NE(rotation_head_seed(1, 0), rotation_head_seed(1, 1));
}

TEST(ChannelStats, MatchesPlainComputationAcrossChunkSizes) {
  for (int tokens : {0, 1, 255, 256, 257, 600}) {
    for (DType dtype : {DType::F16, DType::F32}) {
      for (RotationKind kind :
           {RotationKind::None, RotationKind::Hadamard, RotationKind::Orthogonal}) {
        const Tensor keys = random_keys(tokens, 2, 16, dtype, 11u + tokens);
        auto got = key_channel_absmax(keys.view(), kind, 42);
        ASSERT_TRUE(got.ok()) << got.message();
        SCOPED_TRACE(::testing::Message() << "tokens " << tokens << " " << rotation_id(kind));
        expect_near_all(*got, plain_absmax(keys.view(), kind, 42));
      }
    }
  }
}

TEST(ChannelStats, NoRotationIsExact) {
  const Tensor keys = random_keys(300, 3, 8, DType::F32, 5);
  auto got = key_channel_absmax(keys.view(), RotationKind::None, 0);
  ASSERT_TRUE(got.ok());
  const auto want = plain_absmax(keys.view(), RotationKind::None, 0);
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*got)[i], static_cast<float>(want[i]));
}

TEST(ChannelStats, StridedViewEqualsItsCopy) {
  const Tensor keys = random_keys(70, 4, 32, DType::F16, 9);
  const TensorView one_head = keys.view().head(2);  // not contiguous: stride of 4 heads
  ASSERT_FALSE(one_head.contiguous());
  const std::vector<float> copy = one_head.to_float();
  const Tensor packed = Tensor::from_float(copy, DType::F32, 70, 1, 32);
  for (RotationKind kind : {RotationKind::Hadamard, RotationKind::Orthogonal}) {
    auto a = key_channel_absmax(one_head, kind, 3);
    auto b = key_channel_absmax(packed.view(), kind, 3);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
  }
}

TEST(ChannelStats, RotationLowersTheOutlierChannel) {
  const Tensor keys = random_keys(512, 2, 64, DType::F16, 1);
  auto raw = key_channel_absmax(keys.view(), RotationKind::None, 0);
  ASSERT_TRUE(raw.ok());
  const float raw_max = *std::max_element(raw->begin(), raw->end());
  for (RotationKind kind : {RotationKind::Hadamard, RotationKind::Orthogonal}) {
    auto rotated = key_channel_absmax(keys.view(), kind, 0);
    ASSERT_TRUE(rotated.ok());
    EXPECT_LT(*std::max_element(rotated->begin(), rotated->end()), 0.6f * raw_max)
        << rotation_id(kind);
  }
}

TEST(ChannelStats, SkipsNaN) {
  std::vector<float> v{1.f, -2.f, NAN, 0.5f, -3.f, NAN, 0.25f, 4.f};
  const Tensor keys = Tensor::from_float(v, DType::F32, 2, 1, 4);
  auto got = key_channel_absmax(keys.view(), RotationKind::None, 0);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, (std::vector<float>{3.f, 2.f, 0.25f, 4.f}));
}

TEST(ChannelStats, HadamardNeedsPowerOfTwo) {
  const Tensor keys = random_keys(4, 1, 96, DType::F32, 2);
  auto got = key_channel_absmax(keys.view(), RotationKind::Hadamard, 0);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.message().find("hadamard"), std::string::npos) << got.message();
  EXPECT_TRUE(key_channel_absmax(keys.view(), RotationKind::Orthogonal, 0).ok());
}

}  // namespace
}  // namespace kvlab
