// Metrics against a plain double-precision reference written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kvlab/engine/attention/metrics.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/quantizer.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab {
namespace {

struct Reference {
  double logit_rmse, kl, rel, cosine;
};

Reference reference_attention(const std::vector<float>& q, int nq, int qh,
                              const std::vector<float>& k, const std::vector<float>& v,
                              const std::vector<float>& kh, const std::vector<float>& vh, int t,
                              int kvh, int d) {
  double se_logit = 0, kl = 0, se_out = 0, s_out = 0, cos = 0;
  std::size_t n_logit = 0, rows = 0;
  const int group = qh / kvh;
  for (int n = 0; n < nq; ++n) {
    for (int h = 0; h < qh; ++h) {
      const int g = h / group;
      std::vector<double> l(t), lh(t);
      for (int i = 0; i < t; ++i) {
        double a = 0, b = 0;
        for (int c = 0; c < d; ++c) {
          const double qq = q[(static_cast<std::size_t>(n) * qh + h) * d + c];
          a += qq * k[(static_cast<std::size_t>(i) * kvh + g) * d + c];
          b += qq * kh[(static_cast<std::size_t>(i) * kvh + g) * d + c];
        }
        l[i] = a / std::sqrt(d);
        lh[i] = b / std::sqrt(d);
        se_logit += (l[i] - lh[i]) * (l[i] - lh[i]);
        ++n_logit;
      }
      const auto softmax = [](std::vector<double> x) {
        double m = x[0], s = 0;
        for (double e : x) m = std::max(m, e);
        for (double& e : x) s += (e = std::exp(e - m));
        for (double& e : x) e /= s;
        return x;
      };
      const auto p = softmax(l), ph = softmax(lh);
      for (int i = 0; i < t; ++i) kl += p[i] * std::log(p[i] / ph[i]);
      std::vector<double> o(d, 0), oh(d, 0);
      for (int i = 0; i < t; ++i) {
        for (int c = 0; c < d; ++c) {
          o[c] += p[i] * v[(static_cast<std::size_t>(i) * kvh + g) * d + c];
          oh[c] += ph[i] * vh[(static_cast<std::size_t>(i) * kvh + g) * d + c];
        }
      }
      double dot = 0, no = 0, noh = 0;
      for (int c = 0; c < d; ++c) {
        se_out += (o[c] - oh[c]) * (o[c] - oh[c]);
        s_out += o[c] * o[c];
        dot += o[c] * oh[c];
        no += o[c] * o[c];
        noh += oh[c] * oh[c];
      }
      cos += dot / std::sqrt(no * noh);
      ++rows;
    }
  }
  return {std::sqrt(se_logit / n_logit), kl / rows, std::sqrt(se_out / s_out), cos / rows};
}

// Random queries (at `q_scale`), keys and values, and their reconstructions with Gaussian error
// of `noise`; the float path against the double reference on them.
struct Case {
  unsigned seed;
  int nq, qh, kvh, t, d;
  float q_scale, noise;
  float growth = 0;  // keys scaled by 1 + growth * t / T: the largest logits come late
};

void check_against_reference(const Case& c, double kl_tolerance, double kl_floor, double kl_below) {
  std::mt19937 rng(c.seed);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> q(c.nq * c.qh * c.d), k(c.t * c.kvh * c.d), v(k.size()), kh(k.size()),
      vh(k.size());
  for (auto& x : q) x = c.q_scale * n(rng);
  for (std::size_t i = 0; i < k.size(); ++i) {
    const auto t = static_cast<float>(i / static_cast<std::size_t>(c.kvh * c.d));
    k[i] = n(rng) * (1.0f + c.growth * t / static_cast<float>(c.t));
    v[i] = n(rng);
    kh[i] = k[i] + c.noise * n(rng);
    vh[i] = v[i] + c.noise * n(rng);
  }
  const AttentionErrorSums got =
      attention_errors(q, TensorView::of_floats(k, c.kvh, c.d),
                       TensorView::of_floats(v, c.kvh, c.d), kh, vh, {c.qh, c.kvh, c.d});
  const Reference want = reference_attention(q, c.nq, c.qh, k, v, kh, vh, c.t, c.kvh, c.d);
  EXPECT_GT(want.kl, 0);
  EXPECT_LT(want.kl, kl_below);
  EXPECT_NEAR(got.logit_rmse(), want.logit_rmse, 1e-4 * want.logit_rmse);
  EXPECT_NEAR(got.softmax_kl(), want.kl, kl_tolerance * want.kl + kl_floor);
  EXPECT_NEAR(got.output_rel_error(), want.rel, 1e-3 * want.rel);
  EXPECT_NEAR(got.output_cosine(), want.cosine, 1e-6);
  EXPECT_EQ(got.rows, static_cast<std::size_t>(c.nq * c.qh));
}

TEST(Metrics, AttentionErrorsMatchDoublePrecisionReference) {
  check_against_reference({1, 3, 8, 2, 57, 16, 2.0f, 0.05f}, 1e-3, 1e-9, 1e9);
}

// The shapes the kernels treat apart: head sizes that are not whole vectors (8, 40, 96: padded
// rows of values), more rows a KV head than one block of 32 (9 queries x 4 heads, 17 x 2), token
// counts off the 4-token step and off the 128-token tile, a single token.
TEST(Metrics, EveryKernelShapeMatchesDoublePrecisionReference) {
  for (const Case& c :
       {Case{3, 9, 8, 2, 301, 8, 2.0f, 0.05f}, Case{4, 5, 4, 4, 130, 40, 1.0f, 0.1f},
        Case{5, 1, 6, 3, 3, 96, 2.0f, 0.05f}, Case{6, 17, 2, 1, 257, 128, 1.5f, 0.02f},
        Case{8, 2, 2, 2, 2, 16, 1.0f, 0.05f}}) {
    SCOPED_TRACE("d " + std::to_string(c.d) + ", " + std::to_string(c.t) + " tokens");
    check_against_reference(c, 1e-3, 1e-9, 1e9);
  }
}

// The float path (vectorised exp, float softmax, double sums) at a long context with peaked
// rows and errors small enough that the KL is a difference of nearly equal sums.
TEST(Metrics, LongContextSmallErrorsMatchDoublePrecisionReference) {
  check_against_reference({7, 2, 8, 2, 6000, 64, 3.0f, 0.003f}, 2e-3, 0, 1e-3);
}

// Logits that grow along the context: each tile's rows find a larger maximum than the last, and
// the online softmax scales what it summed before (by factors down to e^-40) to the new one.
TEST(Metrics, LateLargestLogitsMatchDoublePrecisionReference) {
  check_against_reference({9, 3, 8, 2, 1000, 32, 2.0f, 0.02f, 4.0f}, 1e-3, 1e-9, 1e9);
}

TEST(Metrics, IdenticalReconstructionHasNoError) {
  std::vector<float> q(4 * 16, 0.5f), k(10 * 16), v(10 * 16);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = v[i] = std::sin(static_cast<float>(i));
  const auto a = attention_errors(q, TensorView::of_floats(k, 4, 4), TensorView::of_floats(v, 4, 4),
                                  k, v, {4, 4, 4});
  EXPECT_EQ(a.logit_rmse(), 0.0);
  EXPECT_NEAR(a.softmax_kl(), 0.0, 1e-12);
  EXPECT_EQ(a.output_rel_error(), 0.0);
  EXPECT_NEAR(a.output_cosine(), 1.0, 1e-12);
}

TEST(Metrics, ElementErrorsMatchDirectSums) {
  const std::vector<float> x{1, -2, 3, 4}, xh{1.5f, -2, 2, 4};
  ElementErrorSums s;
  s.add(x, xh);
  EXPECT_DOUBLE_EQ(s.mse(), (0.25 + 0 + 1 + 0) / 4);
  EXPECT_DOUBLE_EQ(s.max_abs, 1.0);
  EXPECT_NEAR(s.snr_db(), 10 * std::log10(30 / 1.25), 1e-12);
  ElementErrorSums t = s;
  t += s;
  EXPECT_DOUBLE_EQ(t.mse(), s.mse());
  EXPECT_EQ(t.count, 8u);
}

// One layer of the synthetic llama3-8b preset at 8K (32 query heads, 8 KV heads, peaked heads
// with sinks and heavy hitters) and its KVComp reconstruction: the float path within 1e-5 of
// the double reference on every metric (measured at 32K: 3e-7).
TEST(Metrics, SyntheticLayerMatchesDoublePrecisionReference) {
  SyntheticConfig c;
  c.preset = "llama3-8b";
  c.layers = 1;
  c.context = 8192;
  const KvCache cache = generate_synthetic(c).value();
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  const auto quantizer = make_quantizer(m).value();
  const LayerKv& l = cache.layers[0];
  const std::vector<float> k = l.key.view().to_float(), v = l.value.view().to_float();
  std::vector<float> kh(k.size()), vh(v.size());
  quantizer->dequantize(quantizer->quantize(l.key.view(), TensorRole::Key).value(), kh);
  quantizer->dequantize(quantizer->quantize(l.value.view(), TensorRole::Value).value(), vh);
  const std::vector<float> q = l.query.view().to_float();
  const auto& s = cache.shape;
  // The originals as the cache stores them (fp16), converted row by row inside.
  const AttentionErrorSums got =
      attention_errors(q, l.key.view(), l.value.view(), kh, vh, {s.q_heads, s.kv_heads, 128});
  const Reference want =
      reference_attention(q, l.query.tokens(), s.q_heads, k, v, kh, vh, c.context, s.kv_heads, 128);
  EXPECT_GT(want.kl, 1e-4);
  EXPECT_NEAR(got.softmax_kl(), want.kl, 1e-5 * want.kl);
  EXPECT_NEAR(got.output_rel_error(), want.rel, 1e-5 * want.rel);
  EXPECT_NEAR(got.logit_rmse(), want.logit_rmse, 1e-5 * want.logit_rmse);
  EXPECT_NEAR(got.output_cosine(), want.cosine, 1e-7);
}

}  // namespace
}  // namespace kvlab
