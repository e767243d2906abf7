// The synthetic source reproduces the structure that makes KV compression hard.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kvlab/engine/core/process_memory.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/sources/synthetic.h"
#include "sources/normal_stream.h"

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

// The fast normals: the quantile table against Python's inverse normal CDF, the sample's
// moments and tail shares against the normal's, and the same sequence however it is drawn.
TEST(Synthetic, NormalStreamDrawsStandardNormals) {
  const auto& table = detail::normal_quantile_table();
  EXPECT_EQ(table[32768], 0.0f);
  // Quantiles of i / 2^16 from Python's statistics.NormalDist().inv_cdf.
  EXPECT_NEAR(table[49152], 0.6744897501960817, 1e-6);      // 0.75
  EXPECT_NEAR(table[65536 - 64], 3.097269078198784, 1e-6);  // 1 - 2^-10
  EXPECT_NEAR(table[1], -4.169569323349103, 1e-5);          // 2^-16
  EXPECT_NEAR(table[0], -5.294704084854597, 1e-5);          // the end: 2^-24
  EXPECT_EQ(table[65536], -table[0]);
  EXPECT_TRUE(std::is_sorted(table.begin(), table.end()));

  detail::NormalStream stream(42);
  std::vector<float> x(1 << 22);
  stream.fill(x);
  double m1 = 0, m2 = 0, m4 = 0;
  std::size_t beyond2 = 0, beyond3 = 0;
  for (float v : x) {
    m1 += v;
    m2 += double(v) * v;
    m4 += double(v) * v * v * v;
    beyond2 += std::fabs(v) > 2;
    beyond3 += std::fabs(v) > 3;
  }
  const double n = static_cast<double>(x.size());
  EXPECT_NEAR(m1 / n, 0.0, 3e-3);  // sd of the mean: 5e-4
  EXPECT_NEAR(m2 / n, 1.0, 4e-3);
  EXPECT_NEAR(m4 / n, 3.0, 3e-2);
  EXPECT_NEAR(beyond2 / n, 0.0455, 1e-3);
  EXPECT_NEAR(beyond3 / n, 0.0027, 2e-4);

  // Drawn in uneven pieces and one at a time: the same values.
  detail::NormalStream a(9), b(9);
  std::vector<float> whole(1000), pieces(1000);
  a.fill(whole);
  std::size_t at = 0;
  for (std::size_t len : {3u, 16u, 1u, 31u, 200u}) {
    b.fill(std::span(pieces).subspan(at, len));
    at += len;
  }
  while (at < pieces.size()) pieces[at++] = b.next();
  EXPECT_EQ(whole, pieces);
}

// Layers are generated side by side: the cache is the same on one thread and on several.
TEST(Synthetic, TheSameCacheOnAnyNumberOfThreads) {
  SyntheticConfig c = small("llama3-8b", 300);
  c.layers = 5;
  std::optional<KvCache> one;
  {
    const auto limit = limit_threads(1);
    auto r = generate_synthetic(c);
    ASSERT_TRUE(r.ok()) << r.message();
    one = std::move(*r);
  }
  auto many = generate_synthetic(c);
  ASSERT_TRUE(many.ok()) << many.message();
  for (std::size_t l = 0; l < one->layers.size(); ++l) {
    for (auto [a, b] : {std::pair{&one->layers[l].key, &many->layers[l].key},
                        {&one->layers[l].value, &many->layers[l].value},
                        {&one->layers[l].query, &many->layers[l].query}}) {
      ASSERT_EQ(a->nbytes(), b->nbytes());
      EXPECT_EQ(std::memcmp(a->data(), b->data(), a->nbytes()), 0) << "layer " << l;
    }
  }
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

// A cache larger than the memory free now is refused before anything is allocated, with the
// way to write it to a file instead; the same cache below the 64 GiB limit is allowed in a file.
TEST(Synthetic, ACacheLargerThanFreeMemoryIsRefusedBeforeAllocating) {
  const std::uint64_t available = available_memory_bytes();
  if (available == 0) GTEST_SKIP() << "the kernel does not say how much memory is available";
  // llama3-8b: 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 128 KiB per token.
  const std::uint64_t per_token = 32ull * 8 * 128 * 2 * 2;
  const std::uint64_t tokens = available / per_token + 4096;
  if (tokens > static_cast<std::uint64_t>(kMaxSyntheticContext) ||
      tokens * per_token > kMaxSyntheticCacheBytes) {
    GTEST_SKIP() << "this machine has more free memory than the engine's limits";
  }
  SyntheticConfig c;
  c.preset = "llama3-8b";
  c.context = static_cast<int>(tokens);
  c.queries = 0;
  const auto r = generate_synthetic(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("of memory available now"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("kvlab sources export --source synthetic:llama3-8b --context " +
                             std::to_string(tokens)),
            std::string::npos)
      << r.message();
}

TEST(Synthetic, CancelStopsGeneration) {
  SyntheticConfig c = small("tiny", 64);
  auto r = generate_synthetic(c, [](double, std::string_view) { return false; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), kCancelledMessage);
}

}  // namespace
}  // namespace kvlab
