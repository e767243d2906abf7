#include "kvlab/engine/attention/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <Eigen/Dense>

#include "kvlab/engine/core/aligned.h"

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

// GCC/Clang vector types: one AVX-512 register where the build has it, two or four narrower
// ones where not; loads and stores through memcpy (unaligned).
using F16 = float __attribute__((vector_size(64)));  // 16 floats
using F8 = float __attribute__((vector_size(32)));   // 8 floats
using D8 = double __attribute__((vector_size(64)));  // 8 doubles

template <class V>
V load(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
void store(void* p, V v) {
  std::memcpy(p, &v, sizeof v);
}
// Eight floats widened to doubles.
D8 load8d(const float* p) {
  return __builtin_convertvector(load<F8>(p), D8);
}

// The attention of one KV head's rows is computed token-major: the logits of token t for all
// rows (the group's query heads times the queries) lie side by side, so every per-row sum
// (softmax max and sum, the KL's terms, squared logit errors) is a lane of a vector added up
// over the tokens, and no matrix is ever transposed or packed. Rows are padded to kRowBlock.
constexpr int kRowBlock = 32;  // two 16-float vectors of rows per token
constexpr int kTile = 128;     // tokens per tile of the second pass

// Rows [first, first + count) of a matrix of rows `stride` floats apart, `dim` floats each, asked
// into the cache ahead of use. One head's rows are a few hundred bytes, each in a different page
// of the cache: the hardware prefetcher, which follows accesses within a page, does not see
// the next one coming.
constexpr int kAhead = 16;  // tokens ahead
void prefetch_rows(const float* base, std::size_t stride, int first, int count, int dim) {
  for (int i = 0; i < count; ++i) {
    const auto* row =
        reinterpret_cast<const char*>(base + static_cast<std::size_t>(first + i) * stride);
    for (std::size_t b = 0; b < static_cast<std::size_t>(dim) * sizeof(float); b += 64) {
      __builtin_prefetch(row + b);
    }
  }
}

// logits[t][0, rows) = K[t] . qt[., 0, rows) for n tokens: qt is the queries [dim][rows]
// (scaled by 1/sqrt(d)), K row t at keys + t * stride. Four tokens at a time, 32 rows each.
void logits_block(const float* keys, std::size_t stride, int n, int dim, const float* qt, int rows,
                  float* logits) {
  for (int r0 = 0; r0 < rows; r0 += kRowBlock) {
    int t = 0;
    for (; t + 4 <= n; t += 4) {
      F16 acc[4][2] = {};
      const float* k[4];
      for (int j = 0; j < 4; ++j) k[j] = keys + static_cast<std::size_t>(t + j) * stride;
      if (r0 == 0) prefetch_rows(keys, stride, t + kAhead, std::min(4, n - t - kAhead), dim);
      for (int d = 0; d < dim; ++d) {
        const F16 q0 = load<F16>(qt + static_cast<std::size_t>(d) * rows + r0);
        const F16 q1 = load<F16>(qt + static_cast<std::size_t>(d) * rows + r0 + 16);
        for (int j = 0; j < 4; ++j) {
          acc[j][0] += k[j][d] * q0;
          acc[j][1] += k[j][d] * q1;
        }
      }
      for (int j = 0; j < 4; ++j) {
        float* out = logits + static_cast<std::size_t>(t + j) * rows + r0;
        store(out, acc[j][0]);
        store(out + 16, acc[j][1]);
      }
    }
    for (; t < n; ++t) {
      F16 acc[2] = {};
      const float* k = keys + static_cast<std::size_t>(t) * stride;
      for (int d = 0; d < dim; ++d) {
        acc[0] += k[d] * load<F16>(qt + static_cast<std::size_t>(d) * rows + r0);
        acc[1] += k[d] * load<F16>(qt + static_cast<std::size_t>(d) * rows + r0 + 16);
      }
      float* out = logits + static_cast<std::size_t>(t) * rows + r0;
      store(out, acc[0]);
      store(out + 16, acc[1]);
    }
  }
}

// out[r][c0, c0 + 16 NC) += sum over n tokens of w[t][r] * V[t][c0, ...) for four rows r from
// r0, V row t at values + t * stride (16 NC readable floats from c0), the tile's float sum added
// to the double accumulators.
template <int NC>
void weighted_rows(const float* w, int rows, int r0, const float* values, std::size_t stride, int n,
                   int c0, double* out, int out_stride) {
  F16 acc[4][NC] = {};
  for (int t = 0; t < n; ++t) {
    const float* v = values + static_cast<std::size_t>(t) * stride + c0;
    const float* wt = w + static_cast<std::size_t>(t) * rows + r0;
    F16 vc[NC];
    for (int c = 0; c < NC; ++c) vc[c] = load<F16>(v + 16 * c);
    for (int j = 0; j < 4; ++j) {
      for (int c = 0; c < NC; ++c) acc[j][c] += wt[j] * vc[c];
    }
  }
  for (int j = 0; j < 4; ++j) {
    double* o = out + static_cast<std::size_t>(r0 + j) * out_stride + c0;
    for (int c = 0; c < NC; ++c) {
      float lanes[16];
      store(lanes, acc[j][c]);
      store(o + 16 * c, load<D8>(o + 16 * c) + load8d(lanes));
      store(o + 16 * c + 8, load<D8>(o + 16 * c + 8) + load8d(lanes + 8));
    }
  }
}

// out [rows][padded dim] (double) += w^T V over a tile of n tokens; V rows hold `padded` floats
// (a multiple of 16) at `stride`.
void weighted_sum(const float* w, int rows, const float* values, std::size_t stride, int n,
                  int padded, double* out) {
  for (int r0 = 0; r0 < rows; r0 += 4) {
    int c0 = 0;
    for (; c0 + 64 <= padded; c0 += 64)
      weighted_rows<4>(w, rows, r0, values, stride, n, c0, out, padded);
    switch ((padded - c0) / 16) {
      case 3:
        weighted_rows<3>(w, rows, r0, values, stride, n, c0, out, padded);
        break;
      case 2:
        weighted_rows<2>(w, rows, r0, values, stride, n, c0, out, padded);
        break;
      case 1:
        weighted_rows<1>(w, rows, r0, values, stride, n, c0, out, padded);
        break;
      default:
        break;
    }
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
  const int group = q_heads / kv_heads;
  const int live = nq * group;  // rows of one KV head: (query, query head) pairs
  const int rows = (live + kRowBlock - 1) / kRowBlock * kRowBlock;
  const int padded = (dim + 15) / 16 * 16;
  const std::size_t stride = static_cast<std::size_t>(kv_heads) * dim;
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(dim));
  const auto t_rows = static_cast<std::size_t>(tokens) * rows;

  // Pass one writes both logit matrices [tokens][rows]; pass two reads them a tile at a time.
  HugePageFloats logits(t_rows), logits_hat(t_rows);
  std::vector<float> qt(static_cast<std::size_t>(dim) * rows);    // [dim][rows], zero-padded
  AlignedFloats weights(static_cast<std::size_t>(kTile) * rows);  // 64-byte aligned
  AlignedFloats weights_hat(weights.size());
  std::vector<float> tile_values, tile_values_hat;  // V rows padded to 16 floats, if dim is not
  if (padded != dim) {
    tile_values.assign(static_cast<std::size_t>(kTile) * padded, 0.0f);
    tile_values_hat.assign(tile_values.size(), 0.0f);
  }
  std::vector<float> max(rows), max_hat(rows);
  std::vector<double> sum(rows), sum_hat(rows), weighted_diff(rows), sq_diff(rows);
  std::vector<double> out(static_cast<std::size_t>(rows) * padded);
  std::vector<double> out_hat(out.size());

  for (int g = 0; g < kv_heads && !stop.stop_requested(); ++g) {
    std::fill(qt.begin(), qt.end(), 0.0f);
    for (int n = 0; n < nq; ++n) {
      for (int i = 0; i < group; ++i) {
        const float* src =
            query_rows.data() + (static_cast<std::size_t>(n) * q_heads + g * group + i) * dim;
        for (int d = 0; d < dim; ++d) {
          qt[static_cast<std::size_t>(d) * rows + n * group + i] = src[d] * inv_sqrt_d;
        }
      }
    }
    const float* k = key_rows.data() + static_cast<std::size_t>(g) * dim;
    const float* kh = key_hat_rows.data() + static_cast<std::size_t>(g) * dim;
    logits_block(k, stride, tokens, dim, qt.data(), rows, logits.data());
    logits_block(kh, stride, tokens, dim, qt.data(), rows, logits_hat.data());
    // Each row's largest logit, lane by lane.
    for (int r = 0; r < rows; r += 16) {
      F16 m = load<F16>(logits.data() + r), mh = load<F16>(logits_hat.data() + r);
      for (int t = 1; t < tokens; ++t) {
        const F16 l = load<F16>(logits.data() + static_cast<std::size_t>(t) * rows + r);
        const F16 lh = load<F16>(logits_hat.data() + static_cast<std::size_t>(t) * rows + r);
        m = l > m ? l : m;
        mh = lh > mh ? lh : mh;
      }
      store(max.data() + r, m);
      store(max_hat.data() + r, mh);
    }
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(sum_hat.begin(), sum_hat.end(), 0.0);
    std::fill(weighted_diff.begin(), weighted_diff.end(), 0.0);
    std::fill(sq_diff.begin(), sq_diff.end(), 0.0);
    std::fill(out.begin(), out.end(), 0.0);
    std::fill(out_hat.begin(), out_hat.end(), 0.0);
    const Eigen::Map<const Eigen::ArrayXf> m(max.data(), rows), mh(max_hat.data(), rows);
    for (int t0 = 0; t0 < tokens; t0 += kTile) {
      const int n = std::min(kTile, tokens - t0);
      const float* l = logits.data() + static_cast<std::size_t>(t0) * rows;
      const float* lh = logits_hat.data() + static_cast<std::size_t>(t0) * rows;
      // The softmax numerators exp(l - max) in float, by Eigen's vectorised exp (Cephes'
      // polynomial, within 1 ulp) over the tile as one flat, aligned array of whole vectors: on
      // the column-wise expression Eigen calls the scalar expf, and on an unaligned array it
      // takes the first few by a scalar exp (a run's result would then hang on where the heap
      // put the buffer).
      const Eigen::Index cells = static_cast<Eigen::Index>(n) * rows;
      Eigen::Map<Eigen::ArrayXXf>(weights.data(), rows, n) =
          Eigen::Map<const Eigen::ArrayXXf>(l, rows, n).colwise() - m;
      Eigen::Map<Eigen::ArrayXXf>(weights_hat.data(), rows, n) =
          Eigen::Map<const Eigen::ArrayXXf>(lh, rows, n).colwise() - mh;
      Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> e(weights.data(), cells);
      Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> eh(weights_hat.data(), cells);
      e = e.exp();
      eh = eh.exp();
      // Per row, in double: sum e, sum e_hat, sum e (l - l_hat) and sum (l - l_hat)^2. The
      // logits' difference is taken in float, exact when they are close. Eight rows at a time
      // over the tile's tokens, the sums in registers.
      const float* v = value_rows.data() + static_cast<std::size_t>(t0) * stride + g * dim;
      const float* vh = value_hat_rows.data() + static_cast<std::size_t>(t0) * stride + g * dim;
      for (int t = 0; t < n; ++t) {
        prefetch_rows(v, stride, t, 1, dim);  // for the sums of e V below
        prefetch_rows(vh, stride, t, 1, dim);
      }
      for (int r = 0; r < rows; r += 8) {
        D8 s = load<D8>(sum.data() + r), sh = load<D8>(sum_hat.data() + r);
        D8 wd = load<D8>(weighted_diff.data() + r), sq = load<D8>(sq_diff.data() + r);
        for (int t = 0; t < n; ++t) {
          const std::size_t at = static_cast<std::size_t>(t) * rows + r;
          F8 lf, lhf;
          std::memcpy(&lf, l + at, sizeof lf);
          std::memcpy(&lhf, lh + at, sizeof lhf);
          const D8 diff = __builtin_convertvector(lf - lhf, D8);
          const D8 e = load8d(weights.data() + at);
          s += e;
          sh += load8d(weights_hat.data() + at);
          wd += e * diff;
          sq += diff * diff;
        }
        store(sum.data() + r, s);
        store(sum_hat.data() + r, sh);
        store(weighted_diff.data() + r, wd);
        store(sq_diff.data() + r, sq);
      }
      // The outputs' numerators sum e V, the float sum of the tile added in double.
      std::size_t v_stride = stride;
      if (padded != dim) {  // copied to rows of whole vectors, zero beyond dim
        for (int t = 0; t < n; ++t) {
          std::memcpy(tile_values.data() + static_cast<std::size_t>(t) * padded,
                      v + static_cast<std::size_t>(t) * stride, dim * sizeof(float));
          std::memcpy(tile_values_hat.data() + static_cast<std::size_t>(t) * padded,
                      vh + static_cast<std::size_t>(t) * stride, dim * sizeof(float));
        }
        v = tile_values.data();
        vh = tile_values_hat.data();
        v_stride = static_cast<std::size_t>(padded);
      }
      weighted_sum(weights.data(), rows, v, v_stride, n, padded, out.data());
      weighted_sum(weights_hat.data(), rows, vh, v_stride, n, padded, out_hat.data());
    }
    // Per row: lse = max + log(sum e); KL(p || p_hat) = sum p (l - l_hat) - (lse - lse_hat);
    // o = sum e V / sum e.
    for (int r = 0; r < live; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      sums.sum_sq_logit_err += sq_diff[ri];
      const double lse = max[ri] + std::log(sum[ri]);
      const double lse_hat = max_hat[ri] + std::log(sum_hat[ri]);
      sums.sum_kl += std::max(0.0, weighted_diff[ri] / sum[ri] - (lse - lse_hat));
      const Eigen::Map<const Eigen::VectorXd> o_sum(out.data() + ri * padded, dim);
      const Eigen::Map<const Eigen::VectorXd> oh_sum(out_hat.data() + ri * padded, dim);
      const Eigen::VectorXd o = o_sum / sum[ri];
      const Eigen::VectorXd oh = oh_sum / sum_hat[ri];
      sums.sum_sq_out_err += (o - oh).squaredNorm();
      sums.sum_sq_out += o.squaredNorm();
      const double denom = o.norm() * oh.norm();
      sums.sum_cosine += denom > 0 ? o.dot(oh) / denom : 1.0;
      ++sums.rows;
    }
    sums.logit_count += static_cast<std::size_t>(live) * static_cast<std::size_t>(tokens);
  }
  return sums;
}

}  // namespace kvlab
