#include "kvlab/engine/attention/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
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
constexpr int kRowBlock = 32;     // two 16-float vectors of rows per token
constexpr int kMetricTile = 128;  // tokens per tile

// One KV head's rows [tokens][dim] of a tensor as stored: read in place when they are floats,
// else converted into the caller's scratch as they are used (a layer's float copy is never made).
class HeadRows {
 public:
  HeadRows(const TensorView& tensor, int head) : m_view(tensor.head(head)) {}
  bool in_place() const { return m_view.dtype() == DType::F32; }
  // Row t as floats: in place, or converted into `scratch` (dim floats).
  const float* row(int t, float* scratch) const {
    if (in_place()) return reinterpret_cast<const float*>(m_view.row_ptr(t, 0));
    m_view.load_row(t, 0, {scratch, static_cast<std::size_t>(m_view.dim())});
    return scratch;
  }
  std::size_t float_stride() const { return static_cast<std::size_t>(m_view.token_stride()); }
  // Rows [first, first + count) asked into the cache ahead of use. One head's row is a few
  // hundred bytes, each in a different page: the hardware prefetcher, which follows accesses
  // within a page, does not see the next one coming.
  void prefetch(int first, int count) const {
    const std::size_t bytes = static_cast<std::size_t>(m_view.dim()) * dtype_size(m_view.dtype());
    for (int i = 0; i < count; ++i) {
      const auto* row = reinterpret_cast<const char*>(m_view.row_ptr(first + i, 0));
      for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
    }
  }

 private:
  TensorView m_view;
};
constexpr int kAhead = 16;  // tokens prefetched ahead

// Denormal results and operands flushed to zero while it lives (the calling thread's MXCSR, set
// back after). A softmax numerator exp(l - max) is denormal where a logit lies more than 87
// below its row's largest; the sums it joins are at least 1 (the largest's own term), so it
// cannot change them in float, nor in double by more than 1e-38, but each product with one
// takes a slow microcode assist: with keys from int8, a third of the attention's time.
class FlushDenormals {
 public:
#if defined(__SSE__)
  FlushDenormals() : m_saved(__builtin_ia32_stmxcsr()) {
    __builtin_ia32_ldmxcsr(m_saved | kFlushToZero | kDenormalsAreZero);
  }
  ~FlushDenormals() {
    __builtin_ia32_ldmxcsr(m_saved);
  }

 private:
  static constexpr unsigned kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
  unsigned m_saved;
#endif
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;
};

// logits[t][0, rows) = K[t] . qt[., 0, rows) for tokens [t, t + J): qt is the queries
// [dim][rows] (scaled by 1/sqrt(d)), 32 rows from r0; `scratch` holds J rows of dim. 2 J
// accumulators: 16 keep both FMA ports busy through the FMA's latency, 8 just do.
template <int J>
void logits_tokens(const HeadRows& keys, int t, int dim, const float* qt, int rows, int r0,
                   float* scratch, float* logits) {
  const auto ud = static_cast<std::size_t>(dim);
  F16 acc[J][2] = {};
  const float* k[J];
  for (int j = 0; j < J; ++j) k[j] = keys.row(t + j, scratch + j * ud);
  for (int d = 0; d < dim; ++d) {
    const F16 q0 = load<F16>(qt + static_cast<std::size_t>(d) * rows + r0);
    const F16 q1 = load<F16>(qt + static_cast<std::size_t>(d) * rows + r0 + 16);
    for (int j = 0; j < J; ++j) {
      acc[j][0] += k[j][d] * q0;
      acc[j][1] += k[j][d] * q1;
    }
  }
  for (int j = 0; j < J; ++j) {
    float* out = logits + static_cast<std::size_t>(t + j) * rows + r0;
    store(out, acc[j][0]);
    store(out + 16, acc[j][1]);
  }
}

// logits[t][0, rows) for n tokens: eight tokens at a time, 32 rows each, then four, then one.
void logits_block(const HeadRows& keys, int n, int dim, const float* qt, int rows, float* scratch,
                  float* logits) {
  for (int r0 = 0; r0 < rows; r0 += kRowBlock) {
    int t = 0;
    for (; t + 8 <= n; t += 8) {
      if (r0 == 0) keys.prefetch(t + kAhead, std::max(0, std::min(8, n - t - kAhead)));
      logits_tokens<8>(keys, t, dim, qt, rows, r0, scratch, logits);
    }
    for (; t + 4 <= n; t += 4) logits_tokens<4>(keys, t, dim, qt, rows, r0, scratch, logits);
    for (; t < n; ++t) logits_tokens<1>(keys, t, dim, qt, rows, r0, scratch, logits);
  }
}

// out[r][c0, c0 + 16 NC) += sum over n tokens of w[t][r] * V[t][c0, ...) for four rows r from
// r0, V row t at values + t * stride (16 NC readable floats from c0), the tile's float sum added
// to the double accumulators.
template <int NC>
[[gnu::noinline]] void weighted_rows(const float* w, int rows, int r0, const float* values,
                                     std::size_t stride, int n, int c0, double* out,
                                     int out_stride) {
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

AttentionErrorAccumulator::AttentionErrorAccumulator(std::span<const float> query_rows,
                                                     const AttentionShape& shape) {
  const int q_heads = shape.q_heads, kv_heads = shape.kv_heads, dim = shape.dim;
  if (q_heads <= 0 || kv_heads <= 0 || dim <= 0) return;
  const int nq = static_cast<int>(query_rows.size() / (static_cast<std::size_t>(q_heads) * dim));
  if (nq <= 0) return;
  const int group = q_heads / kv_heads;
  m_kv_heads = kv_heads;
  m_dim = dim;
  m_live = nq * group;  // rows of one KV head: (query, query head) pairs
  m_rows = (m_live + kRowBlock - 1) / kRowBlock * kRowBlock;
  m_padded = (dim + 15) / 16 * 16;
  const float inv_sqrt_d = 1.0f / std::sqrt(static_cast<float>(dim));
  const auto ur = static_cast<std::size_t>(m_rows);
  const auto heads = static_cast<std::size_t>(kv_heads);
  m_qt.assign(heads * static_cast<std::size_t>(dim) * ur, 0.0f);
  for (int g = 0; g < kv_heads; ++g) {
    float* q = m_qt.data() + static_cast<std::size_t>(g) * dim * ur;
    for (int n = 0; n < nq; ++n) {
      for (int i = 0; i < group; ++i) {
        const float* src =
            query_rows.data() + (static_cast<std::size_t>(n) * q_heads + g * group + i) * dim;
        for (int d = 0; d < dim; ++d)
          q[static_cast<std::size_t>(d) * ur + n * group + i] = src[d] * inv_sqrt_d;
      }
    }
  }
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  m_max.assign(heads * ur, kNone);
  m_max_hat.assign(heads * ur, kNone);
  for (std::vector<double>* v : {&m_sum, &m_sum_hat, &m_weighted_diff, &m_sq_diff})
    v->assign(heads * ur, 0.0);
  m_out.assign(heads * ur * m_padded, 0.0);
  m_out_hat.assign(m_out.size(), 0.0);
  for (AlignedFloats* v : {&m_logits, &m_logits_hat, &m_weights, &m_weights_hat})
    v->resize(static_cast<std::size_t>(kMetricTile) * ur);
  m_tile_max.resize(ur);
  m_tile_max_hat.resize(ur);
  m_tile_values.assign(static_cast<std::size_t>(kMetricTile) * m_padded, 0.0f);
  m_tile_values_hat.assign(m_tile_values.size(), 0.0f);
  m_key_scratch.resize(8 * static_cast<std::size_t>(dim));
}

void AttentionErrorAccumulator::add(const TensorView& keys, const TensorView& values,
                                    std::span<const float> keys_hat,
                                    std::span<const float> values_hat) {
  if (m_rows == 0) return;
  for (const TensorView* v : {&keys, &values}) {
    if (v->heads() != m_kv_heads || v->dim() != m_dim) return;
  }
  const TensorView kh = TensorView::of_floats(keys_hat, m_kv_heads, m_dim);
  const TensorView vh = TensorView::of_floats(values_hat, m_kv_heads, m_dim);
  const int tokens = std::min({keys.tokens(), values.tokens(), kh.tokens(), vh.tokens()});
  for (int t0 = 0; t0 < tokens; t0 += kMetricTile) {
    const int t1 = std::min(tokens, t0 + kMetricTile);
    add_tile(keys.token_range(t0, t1), values.token_range(t0, t1), kh.token_range(t0, t1),
             vh.token_range(t0, t1));
  }
}

// At most kMetricTile tokens, and within them every KV head: the rows are read as they lie in
// memory (a token's heads side by side), each once, and no logit is kept past its tile.
void AttentionErrorAccumulator::add_tile(const TensorView& kt, const TensorView& vt,
                                         const TensorView& kht, const TensorView& vht) {
  const int n = kt.tokens(), dim = m_dim, rows = m_rows, padded = m_padded;
  const FlushDenormals flush;
  const auto ur = static_cast<std::size_t>(rows);
  float* const logits = m_logits.data();
  float* const logits_hat = m_logits_hat.data();
  for (int g = 0; g < m_kv_heads; ++g) {
    const std::size_t gr = static_cast<std::size_t>(g) * ur;
    const HeadRows k(kt, g), kh(kht, g), v(vt, g), vh(vht, g);
    const float* q = m_qt.data() + gr * static_cast<std::size_t>(dim);
    logits_block(k, n, dim, q, rows, m_key_scratch.data(), logits);
    logits_block(kh, n, dim, q, rows, m_key_scratch.data(), logits_hat);
    // Each row's largest logit so far, lane by lane; where it grew, the sums so far are scaled
    // by exp(old - new) (in double), so every numerator below is exp(l - max) in float.
    for (int r = 0; r < rows; r += 16) {
      F16 m = load<F16>(m_max.data() + gr + r), mh = load<F16>(m_max_hat.data() + gr + r);
      for (int t = 0; t < n; ++t) {
        const F16 l = load<F16>(logits + static_cast<std::size_t>(t) * ur + r);
        const F16 lh = load<F16>(logits_hat + static_cast<std::size_t>(t) * ur + r);
        m = l > m ? l : m;
        mh = lh > mh ? lh : mh;
      }
      store(m_tile_max.data() + r, m);
      store(m_tile_max_hat.data() + r, mh);
    }
    for (int r = 0; r < rows; ++r) {
      const std::size_t i = gr + static_cast<std::size_t>(r);
      double* o = m_out.data() + i * padded;
      double* oh = m_out_hat.data() + i * padded;
      if (m_tile_max[r] > m_max[i]) {
        const double f = std::exp(static_cast<double>(m_max[i]) - m_tile_max[r]);  // 0 at first
        m_sum[i] *= f;
        m_weighted_diff[i] *= f;
        for (int d = 0; d < padded; ++d) o[d] *= f;
        m_max[i] = m_tile_max[r];
      }
      if (m_tile_max_hat[r] > m_max_hat[i]) {
        const double f = std::exp(static_cast<double>(m_max_hat[i]) - m_tile_max_hat[r]);
        m_sum_hat[i] *= f;
        for (int d = 0; d < padded; ++d) oh[d] *= f;
        m_max_hat[i] = m_tile_max_hat[r];
      }
    }
    // The softmax numerators exp(l - max) in float, by Eigen's vectorised exp (Cephes'
    // polynomial, within 1 ulp) over the tile as one flat, aligned array of whole vectors: on
    // the column-wise expression Eigen calls the scalar expf, and on an unaligned array it
    // takes the first few by a scalar exp (a run's result would then hang on where the heap
    // put the buffer).
    const Eigen::Map<const Eigen::ArrayXf> m(m_max.data() + gr, rows),
        mh(m_max_hat.data() + gr, rows);
    const Eigen::Index cells = static_cast<Eigen::Index>(n) * rows;
    Eigen::Map<Eigen::ArrayXXf>(m_weights.data(), rows, n) =
        Eigen::Map<const Eigen::ArrayXXf>(logits, rows, n).colwise() - m;
    Eigen::Map<Eigen::ArrayXXf>(m_weights_hat.data(), rows, n) =
        Eigen::Map<const Eigen::ArrayXXf>(logits_hat, rows, n).colwise() - mh;
    Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> e(m_weights.data(), cells);
    Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64> eh(m_weights_hat.data(), cells);
    e = e.exp();
    eh = eh.exp();
    // Per row, in double: sum e, sum e_hat, sum e (l - l_hat) and sum (l - l_hat)^2. The
    // logits' difference is taken in float, exact when they are close. Eight rows at a time
    // over the tile's tokens, the sums in registers.
    v.prefetch(0, n);  // for the sums of e V below
    vh.prefetch(0, n);
    for (int r = 0; r < rows; r += 8) {
      const std::size_t i = gr + static_cast<std::size_t>(r);
      D8 s = load<D8>(m_sum.data() + i), sh = load<D8>(m_sum_hat.data() + i);
      D8 wd = load<D8>(m_weighted_diff.data() + i), sq = load<D8>(m_sq_diff.data() + i);
      for (int t = 0; t < n; ++t) {
        const std::size_t at = static_cast<std::size_t>(t) * ur + r;
        F8 lf, lhf;
        std::memcpy(&lf, logits + at, sizeof lf);
        std::memcpy(&lhf, logits_hat + at, sizeof lhf);
        const D8 diff = __builtin_convertvector(lf - lhf, D8);
        const D8 w = load8d(m_weights.data() + at);
        s += w;
        sh += load8d(m_weights_hat.data() + at);
        wd += w * diff;
        sq += diff * diff;
      }
      store(m_sum.data() + i, s);
      store(m_sum_hat.data() + i, sh);
      store(m_weighted_diff.data() + i, wd);
      store(m_sq_diff.data() + i, sq);
    }
    // The outputs' numerators sum e V, the float sum of the tile added in double.
    for (const auto& [rows_of, tile, w, o] :
         {std::tuple{&v, &m_tile_values, &m_weights, &m_out},
          std::tuple{&vh, &m_tile_values_hat, &m_weights_hat, &m_out_hat}}) {
      const float* first = nullptr;
      std::size_t v_stride = static_cast<std::size_t>(padded);
      if (rows_of->in_place() && padded == dim) {
        first = rows_of->row(0, nullptr);
        v_stride = rows_of->float_stride();
      } else {  // converted or copied to rows of whole vectors, zero beyond dim
        for (int t = 0; t < n; ++t) {
          float* dst = tile->data() + static_cast<std::size_t>(t) * padded;
          const float* src = rows_of->row(t, dst);
          if (src != dst) std::memcpy(dst, src, static_cast<std::size_t>(dim) * sizeof(float));
        }
        first = tile->data();
      }
      weighted_sum(w->data(), rows, first, v_stride, n, padded, o->data() + gr * padded);
    }
  }
  m_tokens += static_cast<std::size_t>(n);
}

// Per row: lse = max + log(sum e); KL(p || p_hat) = sum p (l - l_hat) - (lse - lse_hat);
// o = sum e V / sum e.
AttentionErrorSums AttentionErrorAccumulator::sums() const {
  AttentionErrorSums sums;
  if (m_tokens == 0) return sums;
  const auto ur = static_cast<std::size_t>(m_rows);
  for (int g = 0; g < m_kv_heads; ++g) {
    for (int r = 0; r < m_live; ++r) {
      const std::size_t ri = static_cast<std::size_t>(g) * ur + static_cast<std::size_t>(r);
      sums.sum_sq_logit_err += m_sq_diff[ri];
      const double lse = m_max[ri] + std::log(m_sum[ri]);
      const double lse_hat = m_max_hat[ri] + std::log(m_sum_hat[ri]);
      sums.sum_kl += std::max(0.0, m_weighted_diff[ri] / m_sum[ri] - (lse - lse_hat));
      const Eigen::Map<const Eigen::VectorXd> o_sum(m_out.data() + ri * m_padded, m_dim);
      const Eigen::Map<const Eigen::VectorXd> oh_sum(m_out_hat.data() + ri * m_padded, m_dim);
      const Eigen::VectorXd o = o_sum / m_sum[ri];
      const Eigen::VectorXd oh = oh_sum / m_sum_hat[ri];
      sums.sum_sq_out_err += (o - oh).squaredNorm();
      sums.sum_sq_out += o.squaredNorm();
      const double denom = o.norm() * oh.norm();
      sums.sum_cosine += denom > 0 ? o.dot(oh) / denom : 1.0;
      ++sums.rows;
    }
    sums.logit_count += static_cast<std::size_t>(m_live) * m_tokens;
  }
  return sums;
}

AttentionErrorSums attention_errors(std::span<const float> queries, const TensorView& keys,
                                    const TensorView& values, std::span<const float> keys_hat,
                                    std::span<const float> values_hat, const AttentionShape& shape,
                                    std::stop_token stop) {
  if (shape.kv_heads <= 0 || shape.dim <= 0) return {};
  AttentionErrorAccumulator acc(queries, shape);
  const std::size_t hd = static_cast<std::size_t>(shape.kv_heads) * shape.dim;
  const auto tokens = static_cast<int>(
      std::min<std::size_t>({static_cast<std::size_t>(std::min(keys.tokens(), values.tokens())),
                             keys_hat.size() / hd, values_hat.size() / hd}));
  for (int t0 = 0; t0 < tokens; t0 += kMetricTile) {
    if (stop.stop_requested()) break;
    const int t1 = std::min(tokens, t0 + kMetricTile);
    const std::size_t at = static_cast<std::size_t>(t0) * hd, n = (t1 - t0) * hd;
    acc.add(keys.token_range(t0, t1), values.token_range(t0, t1), keys_hat.subspan(at, n),
            values_hat.subspan(at, n));
  }
  return acc.sums();
}

}  // namespace kvlab
