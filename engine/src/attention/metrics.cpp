#include "kvlab/engine/attention/metrics.h"

#include <algorithm>
#include <cmath>

#include <Eigen/Dense>

namespace kvlab {

void ElementErrorSums::add(std::span<const float> x_span, std::span<const float> x_hat_span) {
  const std::size_t n = std::min(x_span.size(), x_hat_span.size());
  const float* x = x_span.data();
  const float* x_hat = x_hat_span.data();
  double se = 0, ss = 0, mx = max_abs;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(x_hat[i]);
    se += d * d;
    ss += static_cast<double>(x[i]) * x[i];
    mx = std::max(mx, std::fabs(d));
  }
  sum_sq_err += se;
  sum_sq_signal += ss;
  max_abs = mx;
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

// Softmax of each row in place (float), returning log-softmax in `logp` (double accuracy for KL).
void softmax_rows(RowMatrix& logits, Eigen::MatrixXd& logp) {
  logp.resize(logits.rows(), logits.cols());
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    const double m = logits.row(r).maxCoeff();
    double sum = 0;
    for (Eigen::Index c = 0; c < logits.cols(); ++c) sum += std::exp(logits(r, c) - m);
    const double lse = m + std::log(sum);
    for (Eigen::Index c = 0; c < logits.cols(); ++c) {
      logp(r, c) = logits(r, c) - lse;
      logits(r, c) = static_cast<float>(std::exp(logp(r, c)));
    }
  }
}

}  // namespace

AttentionErrorSums attention_errors(std::span<const float> query_rows,
                                    std::span<const float> key_rows,
                                    std::span<const float> value_rows,
                                    std::span<const float> key_hat_rows,
                                    std::span<const float> value_hat_rows,
                                    const AttentionShape& shape) {
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
  Eigen::MatrixXd logp, logp_hat;
  for (int g = 0; g < kv_heads; ++g) {
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
    RowMatrix logits = q * k.transpose();
    RowMatrix logits_hat = q * kh.transpose();
    sums.sum_sq_logit_err += (logits - logits_hat).cast<double>().squaredNorm();
    sums.logit_count += static_cast<std::size_t>(logits.size());
    softmax_rows(logits, logp);
    softmax_rows(logits_hat, logp_hat);
    const RowMatrix out = logits * v;
    const RowMatrix out_hat = logits_hat * vh;
    for (Eigen::Index r = 0; r < q.rows(); ++r) {
      double kl = 0;
      for (Eigen::Index c = 0; c < tokens; ++c)
        kl += std::exp(logp(r, c)) * (logp(r, c) - logp_hat(r, c));
      sums.sum_kl += std::max(0.0, kl);
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
