// The synthetic source reproduces the structure that makes KV compression hard.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kvlab/engine/sources/synthetic.h"

namespace kvlab {
namespace {

SyntheticConfig small(std::string preset = "tiny", int context = 512) {
  SyntheticConfig c;
  c.preset = std::move(preset);
  c.context = context;
  c.seed = 7;
  return c;
}

// Softmax weights of query n, head h over all tokens of layer l (double precision).
std::vector<double> attention(const KvCache& cache, int l, int n, int h) {
  const auto& layer = cache.layers[l];
  const int d = cache.shape.head_dim, g = h / cache.shape.group_size();
  std::vector<double> w(cache.tokens());
  double m = -1e300;
  for (int t = 0; t < cache.tokens(); ++t) {
    double s = 0;
    for (int c = 0; c < d; ++c) s += layer.query.at(n, h, c) * layer.key.at(t, g, c);
    w[t] = s / std::sqrt(d);
    m = std::max(m, w[t]);
  }
  double sum = 0;
  for (double& x : w) sum += (x = std::exp(x - m));
  for (double& x : w) x /= sum;
  return w;
}

TEST(Synthetic, ShapeDtypeAndMemory) {
  SyntheticConfig c = small("llama3-8b", 64);
  c.layers = 2;
  auto cache = generate_synthetic(c);
  ASSERT_TRUE(cache.ok()) << cache.message();
  EXPECT_TRUE(cache->validate().ok());
  EXPECT_EQ(cache->shape.kv_heads, 8);
  EXPECT_EQ(cache->shape.q_heads, 32);
  EXPECT_EQ(cache->shape.head_dim, 128);
  EXPECT_EQ(cache->layers[0].key.dtype(), DType::F16);
  // fp16: 2 bytes per value, no hidden float copy.
  EXPECT_EQ(cache->stored_bytes(), 2u * 2 * 8 * 128 * 64 * 2);
  EXPECT_EQ(cache->source, "synthetic:llama3-8b");
}

TEST(Synthetic, SeededAndReproducible) {
  auto a = generate_synthetic(small());
  auto b = generate_synthetic(small());
  SyntheticConfig other = small();
  other.seed = 8;
  auto c = generate_synthetic(other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const auto& ka = a->layers[1].key;
  EXPECT_EQ(std::memcmp(ka.data(), b->layers[1].key.data(), ka.nbytes()), 0);
  EXPECT_NE(std::memcmp(ka.data(), c->layers[1].key.data(), ka.nbytes()), 0);
}

TEST(Synthetic, KeysHaveOutlierChannelsValuesDoNot) {
  SyntheticConfig c = small("llama2-7b", 256);
  c.layers = 1;
  auto cache = generate_synthetic(c);
  ASSERT_TRUE(cache.ok());
  for (const Tensor* t : {&cache->layers[0].key, &cache->layers[0].value}) {
    std::vector<double> mag(t->dim(), 0);
    for (int tok = 0; tok < t->tokens(); ++tok) {
      for (int c = 0; c < t->dim(); ++c)
        mag[c] = std::max(mag[c], std::fabs(double(t->at(tok, 0, c))));
    }
    std::vector<double> sorted = mag;
    std::sort(sorted.begin(), sorted.end());
    const double ratio = sorted.back() / sorted[sorted.size() / 2];
    if (t == &cache->layers[0].key) {
      EXPECT_GT(ratio, 4.0) << "keys need outlier channels";
    } else {
      EXPECT_LT(ratio, 3.0) << "values have none";
    }
  }
}

// The keys are drawn per channel (a mean and a spread each) and then turned by RoPE; the cache
// says by which RoPE, so turning them back must give channels whose means stay put: over 2,048
// tokens the high-frequency pairs (the first half of each head) have turned many times, so after
// RoPE their means average out, and before it they are the drawn means (about 0.5 in size).
TEST(Synthetic, KeysCarryTheRopeTheyWereTurnedBy) {
  SyntheticConfig c = small("llama3-8b", 2048);
  c.layers = 1;
  auto cache = generate_synthetic(c);
  ASSERT_TRUE(cache.ok());
  const RopeSpec& rope = cache->key_rope;
  ASSERT_TRUE(rope.enabled());
  EXPECT_EQ(rope.rotary_dims, 128);
  EXPECT_FALSE(rope.half_split);
  EXPECT_FALSE(cache->keys_pre_rope);
  const Tensor& k = cache->layers[0].key;
  const int T = k.tokens(), H = k.heads(), D = k.dim();
  const std::vector<float> post = k.view().to_float();
  // Mean square over the heads' high-frequency channels of each channel's mean over the tokens.
  const auto means_squared = [&](const std::vector<float>& x) {
    double total = 0;
    for (int h = 0; h < H; ++h) {
      for (int d = 0; d < D / 2; ++d) {
        double s = 0;
        for (int t = 0; t < T; ++t) s += x[(static_cast<std::size_t>(t) * H + h) * D + d];
        total += (s / T) * (s / T);
      }
    }
    return total / (H * D / 2);
  };
  std::vector<float> pre = post;
  apply_rope_rows(pre.data(), 0, T, H, D, rope, /*inverse=*/true);
  const double m_pre = means_squared(pre), m_post = means_squared(post);
  EXPECT_GT(m_pre, 0.1) << "the drawn means come back";
  EXPECT_GT(m_pre, 20 * m_post) << "pre " << m_pre << " post " << m_post;
}

TEST(Synthetic, SinkHeavyHittersAndNeedleDrawAttention) {
  const SyntheticConfig c = small("tiny", 1024);
  auto cache = generate_synthetic(c);
  ASSERT_TRUE(cache.ok());
  const SyntheticLandmarks marks = synthetic_landmarks(c);
  EXPECT_EQ(marks.heavy_hitters.size(), 6u);
  for (int l = 0; l < cache->shape.layers; ++l) {
    for (int h = 0; h < cache->shape.q_heads; ++h) {
      const auto early = attention(*cache, l, 0, h);
      std::vector<double> sorted = early;
      std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
      const double median = sorted[sorted.size() / 2];
      EXPECT_GT(early[marks.sink], 0.2) << "sink, layer " << l << " head " << h;
      for (int hh : marks.heavy_hitters) EXPECT_GT(early[hh], 50 * median);
      EXPECT_LT(early[marks.needle], 0.01);
      const auto last = attention(*cache, l, c.queries - 1, h);
      const auto top = std::max_element(last.begin(), last.end()) - last.begin();
      EXPECT_EQ(top, marks.needle) << "the last query retrieves the needle";
    }
  }
}

TEST(Synthetic, AbsurdParametersAreRefusedWithReason) {
  SyntheticConfig c = small();
  c.context = 0;
  EXPECT_NE(generate_synthetic(c).message().find("--context"), std::string::npos);
  c = small("llama3-8b", 1 << 20);
  c.dtype = DType::F32;
  EXPECT_NE(generate_synthetic(c).message().find("GiB"), std::string::npos);
  c = small("gpt-17");
  EXPECT_NE(generate_synthetic(c).message().find("unknown synthetic preset"), std::string::npos);
}

TEST(Synthetic, CancelStopsGeneration) {
  SyntheticConfig c = small("tiny", 64);
  auto r = generate_synthetic(c, [](double, std::string_view) { return false; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), kCancelledMessage);
}

}  // namespace
}  // namespace kvlab
