// The model runner's causal attention (model/llama_attention.h) against a plain double
// reference written here: softmax(q . k / sqrt(head_dim)) . v over positions 0..pos + i for
// new token i, each query head reading KV head qh / group. Both of its paths: a decode step
// with nothing to mask (the fused row loops, split into ranges of 1024 positions the threads share)
// and the matrix products (prefill blocks, masked steps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kvlab/engine/core/threads.h"
#include "model/llama_attention.h"

namespace kvlab {
namespace {

struct Case {
  int heads, kv_heads, dim, pos, n;
};

struct Data {
  std::vector<float> q, k, v;
};

Data random_data(const Case& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  Data d;
  const std::size_t total = static_cast<std::size_t>(c.pos) + c.n;
  d.q.resize(static_cast<std::size_t>(c.n) * c.heads * c.dim);
  d.k.resize(total * c.kv_heads * c.dim);
  d.v.resize(d.k.size());
  for (float& x : d.q) x = 2.f * normal(rng);  // peaked enough that the softmax is not flat
  for (float& x : d.k) x = normal(rng);
  for (float& x : d.v) x = normal(rng);
  return d;
}

// out[i][qh][c], in doubles; `keep` the positions kept (nullptr: all).
std::vector<double> reference(const Case& c, const Data& d, const char* keep) {
  const int group = c.heads / c.kv_heads, kv = c.kv_heads * c.dim, D = c.heads * c.dim;
  std::vector<double> out(static_cast<std::size_t>(c.n) * D, 0.0);
  for (int i = 0; i < c.n; ++i) {
    const int ctx = c.pos + i + 1;
    for (int qh = 0; qh < c.heads; ++qh) {
      const float* q = d.q.data() + static_cast<std::size_t>(i) * D + qh * c.dim;
      const int h = qh / group;
      std::vector<double> w(static_cast<std::size_t>(ctx));
      double mx = -INFINITY;
      for (int t = 0; t < ctx; ++t) {
        double s = 0.0;
        for (int e = 0; e < c.dim; ++e) {
          s += static_cast<double>(q[e]) * d.k[static_cast<std::size_t>(t) * kv + h * c.dim + e];
        }
        w[static_cast<std::size_t>(t)] = s / std::sqrt(static_cast<double>(c.dim));
        if (!keep || keep[t]) mx = std::max(mx, w[static_cast<std::size_t>(t)]);
      }
      double sum = 0.0;
      for (int t = 0; t < ctx; ++t) {
        double& x = w[static_cast<std::size_t>(t)];
        x = !keep || keep[t] ? std::exp(x - mx) : 0.0;
        sum += x;
      }
      double* o = out.data() + static_cast<std::size_t>(i) * D + qh * c.dim;
      for (int t = 0; t < ctx; ++t) {
        for (int e = 0; e < c.dim; ++e) {
          o[e] += w[static_cast<std::size_t>(t)] / sum *
                  d.v[static_cast<std::size_t>(t) * kv + h * c.dim + e];
        }
      }
    }
  }
  return out;
}

std::vector<float> run(const Case& c, const Data& d, const std::vector<const char*>* masks) {
  detail::AttentionArgs a;
  a.heads = c.heads, a.kv_heads = c.kv_heads, a.head_dim = c.dim;
  a.pos = c.pos, a.n = c.n;
  a.q = d.q.data(), a.keys = d.k.data(), a.values = d.v.data();
  a.masks = masks ? masks->data() : nullptr;
  detail::AttentionScratch scratch;
  std::vector<float> out(static_cast<std::size_t>(c.n) * c.heads * c.dim);
  EXPECT_TRUE(detail::causal_attention(a, scratch, out.data()).ok());
  return out;
}

// Worst |out - ref| over the largest |ref| of the run. Float sums over thousands of positions
// reach about 2e-6 of it; the tests allow 1e-5.
double worst(const std::vector<float>& out, const std::vector<double>& ref) {
  double err = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::abs(out[i] - ref[i]));
    scale = std::max(scale, std::abs(ref[i]));
  }
  return err / scale;
}

// SmolLM2's shape (9 heads on 3 KV heads of 64), a GQA group of 4 past one head tile, one head
// per KV head, and a head size the 16-lane loops do not take (the scalar loops).
const Case kCases[] = {
    {9, 3, 64, 2600, 1}, {9, 3, 64, 37, 1},   {8, 2, 32, 3000, 1},
    {4, 4, 48, 700, 1},  {6, 3, 24, 2100, 1}, {9, 3, 64, 300, 5},
};

TEST(LlamaAttention, MatchesDoublesOnEveryPath) {
  unsigned seed = 1;
  for (const Case& c : kCases) {
    SCOPED_TRACE(::testing::Message() << c.heads << " heads on " << c.kv_heads << " x " << c.dim
                                      << ", pos " << c.pos << ", n " << c.n);
    const Data d = random_data(c, seed++);
    const std::vector<double> ref = reference(c, d, nullptr);
    EXPECT_LT(worst(run(c, d, nullptr), ref), 1e-5);
    // A mask that keeps everything takes the matrix products: the same attention.
    const std::vector<char> all(static_cast<std::size_t>(c.pos + c.n), 1);
    const std::vector<const char*> keep_all(static_cast<std::size_t>(c.kv_heads), all.data());
    EXPECT_LT(worst(run(c, d, &keep_all), ref), 1e-5);
    // One thread gives the same bits as the engine's threads: the positions are split the same
    // way whatever the thread count.
    std::vector<float> one;
    {
      const auto limit = limit_threads(1);
      one = run(c, d, nullptr);
    }
    EXPECT_EQ(one, run(c, d, nullptr));
  }
}

// The tiled attention of a stored cache's later prompt chunks against the same double
// reference, reading the rows through its callback: tiles of one token, of sizes that end inside
// the new tokens' causal edge, and of one tile for all; the reads cover [0, pos + n) in order, or
// [0, pos) where the new tokens' own rows are given.
TEST(LlamaAttention, TiledAttentionMatchesDoubles) {
  const Case cases[] = {
      {9, 3, 64, 300, 37}, {8, 2, 32, 0, 50}, {6, 3, 24, 100, 100}, {4, 4, 16, 1, 3}};
  unsigned seed = 11;
  for (const Case& c : cases) {
    const Data d = random_data(c, seed++);
    const std::vector<double> ref = reference(c, d, nullptr);
    const int kv = c.kv_heads * c.dim, total = c.pos + c.n;
    // Every row through `read`, or the new tokens' own rows given (read up to pos only).
    for (const bool given : {false, true}) {
      for (const int tile : {1, 7, 64, 256, 1000}) {
        SCOPED_TRACE(::testing::Message()
                     << c.heads << " heads on " << c.kv_heads << " x " << c.dim << ", pos " << c.pos
                     << ", n " << c.n << ", tile " << tile << (given ? ", own rows" : ""));
        detail::TiledAttentionArgs a;
        a.heads = c.heads, a.kv_heads = c.kv_heads, a.head_dim = c.dim;
        a.pos = c.pos, a.n = c.n, a.q = d.q.data(), a.tile = tile;
        const int read_end = given ? c.pos : total;
        if (given) a.new_keys = d.k.data() + c.pos * kv, a.new_values = d.v.data() + c.pos * kv;
        int next = 0;
        a.read = [&](int first, int last, float* k, float* v) -> Status {
          if (first != next || last <= first || last - first > tile || last > read_end) {
            return make_error("a read out of order");
          }
          next = last;
          std::copy(d.k.begin() + first * kv, d.k.begin() + last * kv, k);
          std::copy(d.v.begin() + first * kv, d.v.begin() + last * kv, v);
          return Ok{};
        };
        detail::TiledAttentionScratch scratch;
        std::vector<float> out(static_cast<std::size_t>(c.n) * c.heads * c.dim);
        const Status st = detail::tiled_causal_attention(a, scratch, out.data());
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ(next, read_end);
        EXPECT_LT(worst(out, ref), 1e-5);
      }
    }
  }
}

TEST(LlamaAttention, MaskedStepDropsThePositions) {
  const Case c{9, 3, 64, 2600, 1};
  const Data d = random_data(c, 7);
  std::vector<char> keep(static_cast<std::size_t>(c.pos + 1), 1);
  for (std::size_t t = 0; t < keep.size(); t += 3) keep[t] = 0;
  keep.back() = 1;
  const std::vector<const char*> masks(3, keep.data());
  const std::vector<double> ref = reference(c, d, keep.data());
  EXPECT_LT(worst(run(c, d, &masks), ref), 1e-5);
  // The unmasked result is another attention: the check above can fail.
  EXPECT_GT(worst(run(c, d, nullptr), ref), 1e-2);
}

}  // namespace
}  // namespace kvlab
