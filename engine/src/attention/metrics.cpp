#include "kvlab/engine/attention/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <Eigen/Dense>

namespace kvlab {

void ElementErrorSums::add(std::span<const float> x_span, std::span<const float> x_hat_span) {
  const std::size_t n = std::min(x_span.size(), x_hat_span.size());
  const float* x = x_span.data();
  const float* x_hat = x_hat_span.data();
  // Sixteen double accumulators side by side (vector lanes), each summing every 16th element,
  // then added in a fixed order: the same result on every run, vectorised without -ffast-math.
  constexpr std::size_t kLanes = 16;
  double se[kLanes] = {}, ss[kLanes] = {}, mx[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t j = 0; j < kLanes; ++j) {
      const double xv = x[i + j];
      const double d = xv - static_cast<double>(x_hat[i + j]);
      se[j] += d * d;
      ss[j] += xv * xv;
      mx[j] = std::max(mx[j], std::fabs(d));
    }
  }
  for (std::size_t j = 0; i < n; ++i, ++j) {
    const double xv = x[i];
    const double d = xv - static_cast<double>(x_hat[i]);
    se[j] += d * d;
    ss[j] += xv * xv;
    mx[j] = std::max(mx[j], std::fabs(d));
  }
  double se_sum = 0, ss_sum = 0, m = max_abs;
  for (std::size_t j = 0; j < kLanes; ++j) {
    se_sum += se[j];
    ss_sum += ss[j];
    m = std::max(m, mx[j]);
  }
  sum_sq_err += se_sum;
  sum_sq_signal += ss_sum;
  max_abs = m;
  count += n;
}

ElementErrorSums& ElementErrorSums::operator+=(const ElementErrorSums& o) {
  sum_sq_err += o.sum_sq_err;
  sum_sq_signal += o.sum_sq_signal;
  max_abs = std::max(max_abs, o.max_abs);
  count += o.count;
  return *this;
}

double ElementErrorSums::mse() const {
  return count ? sum_sq_err / count : 0.0;
}

double ElementErrorSums::snr_db() const {
  if (sum_sq_err <= 0) return 999.0;
  if (sum_sq_signal <= 0) return -999.0;
  return 10.0 * std::log10(sum_sq_signal / sum_sq_err);
}

AttentionErrorSums& AttentionErrorSums::operator+=(const AttentionErrorSums& o) {
  sum_sq_logit_err += o.sum_sq_logit_err;
  logit_count += o.logit_count;
  sum_kl += o.sum_kl;
  sum_sq_out_err += o.sum_sq_out_err;
  sum_sq_out += o.sum_sq_out;
  sum_cosine += o.sum_cosine;
  rows += o.rows;
  return *this;
}

double AttentionErrorSums::logit_rmse() const {
  return logit_count ? std::sqrt(sum_sq_logit_err / logit_count) : 0.0;
}
double AttentionErrorSums::softmax_kl() const {
  return rows ? sum_kl / rows : 0.0;
}
double AttentionErrorSums::output_rel_error() const {
  return sum_sq_out > 0 ? std::sqrt(sum_sq_out_err / sum_sq_out) : 0.0;
}
double AttentionErrorSums::output_cosine() const {
  return rows ? sum_cosine / rows : 1.0;
}

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using StridedMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

// Softmax of each row in place (float, with its exponentials vectorised), returning each row's
// log-sum-exp in double, which the KL needs beside the float logits.
void softmax_rows(RowMatrix& logits, std::vector<double>& lse) {
  lse.resize(static_cast<std::size_t>(logits.rows()));
  const Eigen::Index cols = logits.cols();
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    float* row = logits.row(r).data();
    const float m = logits.row(r).maxCoeff();
    // The exponentials by Eigen's vectorised exp (Cephes' polynomial, within 1 ulp), then their
    // sum: together in one loop of our own the compiler kept both scalar (a quarter of the
    // attention metrics' time at 32K).
    Eigen::Map<Eigen::ArrayXf> e(row, cols);
    e = (e - m).exp();
    // Sixteen double partial sums (vector lanes) of the float exponentials, added in order.
    constexpr int kLanes = 16;
    double part[kLanes] = {};
    Eigen::Index c = 0;
    for (; c + kLanes <= cols; c += kLanes) {
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) part[j] += static_cast<double>(row[c + j]);
    }
    for (int j = 0; c < cols; ++c, ++j) part[j] += row[c];
    double sum = 0;
    for (double p : part) sum += p;
    lse[static_cast<std::size_t>(r)] = m + std::log(sum);
    const float inv = static_cast<float>(1.0 / sum);
#pragma omp simd
    for (Eigen::Index i = 0; i < cols; ++i) row[i] *= inv;
  }
}

}  // namespace

AttentionErrorSums attention_errors(std::span<const float> query_rows,
                                    std::span<const float> key_rows,
                                    std::span<const float> value_rows,
                                    std::span<const float> key_hat_rows,
                                    std::span<const float> value_hat_rows,
                                    const AttentionShape& shape, std::stop_token stop) {
  AttentionErrorSums sums;
  const int q_heads = shape.q_heads, kv_heads = shape.kv_heads, dim = shape.dim;
  if (q_heads <= 0 || kv_heads <= 0 || dim <= 0) return sums;
  const int nq = static_cast<int>(query_rows.size() / (static_cast<std::size_t>(q_heads) * dim));
  const int tokens = static_cast<int>(
      std::min({key_rows.size(), value_rows.size(), key_hat_rows.size(), value_hat_rows.size()}) /
      (static_cast<std::size_t>(kv_heads) * dim));
  if (nq <= 0 || tokens <= 0) return sums;
  const float* queries = query_rows.data();
  const float* keys = key_rows.data();
  const float* values = value_rows.data();
  const float* keys_hat = key_hat_rows.data();
  const float* values_hat = value_hat_rows.data();
  const int group = q_heads / kv_heads;
  const Eigen::Index stride = static_cast<Eigen::Index>(kv_heads) * dim;
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(dim));
  RowMatrix q(static_cast<Eigen::Index>(nq) * group, dim);
  std::vector<double> lse, lse_hat;
  for (int g = 0; g < kv_heads && !stop.stop_requested(); ++g) {
    for (int n = 0; n < nq; ++n) {
      for (int i = 0; i < group; ++i) {
        const float* src = queries + (static_cast<std::size_t>(n) * q_heads + g * group + i) * dim;
        q.row(n * group + i) = Eigen::Map<const Eigen::RowVectorXf>(src, dim) * inv_sqrt_d;
      }
    }
    const StridedMap k(keys + g * dim, tokens, dim, Eigen::OuterStride<>(stride));
    const StridedMap v(values + g * dim, tokens, dim, Eigen::OuterStride<>(stride));
    const StridedMap kh(keys_hat + g * dim, tokens, dim, Eigen::OuterStride<>(stride));
    const StridedMap vh(values_hat + g * dim, tokens, dim, Eigen::OuterStride<>(stride));
    const RowMatrix logits = q * k.transpose();
    const RowMatrix logits_hat = q * kh.transpose();
    RowMatrix p = logits, p_hat = logits_hat;
    softmax_rows(p, lse);
    softmax_rows(p_hat, lse_hat);
    // KL(p || p_hat) = sum p (log p - log p_hat), with log p - log p_hat = (l - l_hat) -
    // (lse - lse_hat): the logits' difference in float (exact when they are close), the rows'
    // log-sum-exp difference in double; every sum in double, in lanes added in a fixed order.
    constexpr int kLanes = 8;
    std::vector<double> kl(static_cast<std::size_t>(q.rows()));
    for (Eigen::Index r = 0; r < q.rows(); ++r) {
      const float* l = logits.row(r).data();
      const float* lh = logits_hat.row(r).data();
      const float* pr = p.row(r).data();
      double se[kLanes] = {}, pd[kLanes] = {}, ps[kLanes] = {};
      Eigen::Index c = 0;
      const auto add = [&](Eigen::Index at, int j) {
        const double d = static_cast<double>(l[at] - lh[at]);
        se[j] += d * d;
        pd[j] += static_cast<double>(pr[at]) * d;
        ps[j] += static_cast<double>(pr[at]);
      };
      for (; c + kLanes <= tokens; c += kLanes) {
        for (int j = 0; j < kLanes; ++j) add(c + j, j);
      }
      for (int j = 0; c < tokens; ++c, ++j) add(c, j);
      double sum_se = 0, sum_pd = 0, sum_p = 0;
      for (int j = 0; j < kLanes; ++j) {
        sum_se += se[j];
        sum_pd += pd[j];
        sum_p += ps[j];
      }
      sums.sum_sq_logit_err += sum_se;
      const auto ri = static_cast<std::size_t>(r);
      kl[ri] = sum_pd - (lse[ri] - lse_hat[ri]) * sum_p;
    }
    sums.logit_count += static_cast<std::size_t>(logits.size());
    const RowMatrix out = p * v;
    const RowMatrix out_hat = p_hat * vh;
    for (Eigen::Index r = 0; r < q.rows(); ++r) {
      sums.sum_kl += std::max(0.0, kl[static_cast<std::size_t>(r)]);
      const Eigen::VectorXd o = out.row(r).cast<double>().transpose();
      const Eigen::VectorXd oh = out_hat.row(r).cast<double>().transpose();
      sums.sum_sq_out_err += (o - oh).squaredNorm();
      sums.sum_sq_out += o.squaredNorm();
      const double denom = o.norm() * oh.norm();
      sums.sum_cosine += denom > 0 ? o.dot(oh) / denom : 1.0;
      ++sums.rows;
    }
  }
  return sums;
}

}  // namespace kvlab
