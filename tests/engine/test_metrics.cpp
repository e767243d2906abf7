// Metrics against a plain double-precision reference written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kvlab/engine/attention/metrics.h"

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

TEST(Metrics, AttentionErrorsMatchDoublePrecisionReference) {
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0, 1);
  const int nq = 3, qh = 8, kvh = 2, t = 57, d = 16;
  std::vector<float> q(nq * qh * d), k(t * kvh * d), v(k.size()), kh(k.size()), vh(k.size());
  for (auto& x : q) x = 2 * n(rng);
  for (std::size_t i = 0; i < k.size(); ++i) {
    k[i] = n(rng);
    v[i] = n(rng);
    kh[i] = k[i] + 0.05f * n(rng);
    vh[i] = v[i] + 0.05f * n(rng);
  }
  const AttentionErrorSums got = attention_errors(q, k, v, kh, vh, {qh, kvh, d});
  const Reference want = reference_attention(q, nq, qh, k, v, kh, vh, t, kvh, d);
  EXPECT_NEAR(got.logit_rmse(), want.logit_rmse, 1e-4 * want.logit_rmse);
  EXPECT_NEAR(got.softmax_kl(), want.kl, 1e-3 * want.kl + 1e-9);
  EXPECT_NEAR(got.output_rel_error(), want.rel, 1e-3 * want.rel);
  EXPECT_NEAR(got.output_cosine(), want.cosine, 1e-6);
  EXPECT_GT(want.kl, 0);
  EXPECT_EQ(got.rows, static_cast<std::size_t>(nq * qh));
}

TEST(Metrics, IdenticalReconstructionHasNoError) {
  std::vector<float> q(4 * 16, 0.5f), k(10 * 16), v(10 * 16);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = v[i] = std::sin(static_cast<float>(i));
  const auto a = attention_errors(q, k, v, k, v, {4, 4, 4});
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

}  // namespace
}  // namespace kvlab
