// The plain baseline: decode-time attention over uncompressed fp16 keys and values, one query per
// head, GQA by head index. Rows are converted with F16C and go through the same register-blocked
// AVX2 loops as the fused compressed paths (fused_kernels.h), so the benchmark compares decoding
// costs, not loop quality. The benchmarks set the fused compressed paths against it
// (bench/fused_attention_bench.cpp); its row loops also serve the compressed cache's fp16 buffer.
#include "kvlab/engine/attention/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <Eigen/Core>

#include "attention/attention_common.h"
#include "attention/fused_kernels.h"
#include "kvlab/engine/core/dtype.h"

namespace kvlab {

namespace detail {

namespace {

// Tokens per pass over the heads: their rows (64 x kv_heads x head_dim halves) stay in L2 while
// every head reads its part, and the value accumulators go to memory once per pass.
constexpr int kTokenChunk = 64;

// The key and value loops over rows of `heads` KV heads, `dim` values each: rows_of(h) gives KV
// head h's rows for the fused loops (fused_kernels.h), row_floats(i, buffer) token i's whole row
// [heads][dim] as floats for the scalar loops (other head sizes, builds without AVX2).
template <class RowsOf, class RowFloats>
void rows_logits(RowsOf&& rows_of, RowFloats&& row_floats, int first, int tokens, int heads,
                 int dim, int group, const float* q, float scale, int total_tokens, float* logits) {
#if KVLAB_FUSED_SIMD
  if (dim % kLaneGroup == 0) {
    // The scale goes into the query once; every query head of a GQA group reads each converted
    // key row while it is in registers (key_tile).
    std::vector<float> qf(static_cast<std::size_t>(heads) * group * dim);
    for (std::size_t i = 0; i < qf.size(); ++i) qf[i] = q[i] * scale;
    const float zero[kHeadTile] = {};
    for (int t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const int n = std::min(kTokenChunk, tokens - t0);
      for (int h = 0; h < heads; ++h) {
        const auto rows = rows_of(h);
        for (int g0 = 0; g0 < group; g0 += kHeadTile) {
          const std::size_t qh = static_cast<std::size_t>(h) * group + g0;
          key_tile(rows, static_cast<std::size_t>(t0), n, std::min(kHeadTile, group - g0),
                   dim / kLaneGroup, qf.data() + qh * dim, dim, zero,
                   logits + qh * total_tokens + first + t0, total_tokens);
        }
      }
    }
    return;
  }
#endif
  static_cast<void>(rows_of);
  std::vector<float> buffer(static_cast<std::size_t>(heads) * dim);
  for (int i = 0; i < tokens; ++i) {
    const float* row = row_floats(i, buffer);
    for (int qh = 0; qh < heads * group; ++qh) {
      const float* k = row + static_cast<std::size_t>(qh / group) * dim;
      const float* qv = q + static_cast<std::size_t>(qh) * dim;
      float a = 0.f;
#pragma omp simd reduction(+ : a)
      for (int c = 0; c < dim; ++c) a += qv[c] * k[c];
      logits[static_cast<std::size_t>(qh) * total_tokens + first + i] = a * scale;
    }
  }
}

template <class RowsOf, class RowFloats>
void rows_values(RowsOf&& rows_of, RowFloats&& row_floats, int first, int tokens, int heads,
                 int dim, int group, const float* probs, int total_tokens, float* out) {
#if KVLAB_FUSED_SIMD
  if (dim % kLaneGroup == 0) {
    for (int t0 = 0; t0 < tokens; t0 += kTokenChunk) {
      const int n = std::min(kTokenChunk, tokens - t0);
      for (int h = 0; h < heads; ++h) {
        const auto rows = rows_of(h);
        for (int g0 = 0; g0 < group; g0 += kHeadTile) {
          const std::size_t qh = static_cast<std::size_t>(h) * group + g0;
          value_tile(rows, static_cast<std::size_t>(t0), n, std::min(kHeadTile, group - g0),
                     dim / kLaneGroup, probs + qh * total_tokens + first + t0, total_tokens,
                     out + qh * dim, dim);
        }
      }
    }
    return;
  }
#endif
  static_cast<void>(rows_of);
  std::vector<float> buffer(static_cast<std::size_t>(heads) * dim);
  for (int i = 0; i < tokens; ++i) {
    const float* row = row_floats(i, buffer);
    for (int qh = 0; qh < heads * group; ++qh) {
      const float* v = row + static_cast<std::size_t>(qh / group) * dim;
      const float p = probs[static_cast<std::size_t>(qh) * total_tokens + first + i];
      float* o = out + static_cast<std::size_t>(qh) * dim;
#pragma omp simd
      for (int c = 0; c < dim; ++c) o[c] += p * v[c];
    }
  }
}

// fp16 rows: F16C in the fused loops, fp16_to_float for the scalar ones.
// (Without the fused SIMD loops a head is its index: rows, tokens and hd go unused.)
auto fp16_rows_of([[maybe_unused]] std::span<const std::uint16_t> rows, [[maybe_unused]] int tokens,
                  int heads, int dim) {
  [[maybe_unused]] const std::size_t hd = static_cast<std::size_t>(heads) * dim;
  return [=](int h) {
#if KVLAB_FUSED_SIMD
    return Fp16Rows{rows.data() + static_cast<std::size_t>(h) * dim, hd, dim,
                    static_cast<std::size_t>(tokens)};
#else
    return h;
#endif
  };
}
auto fp16_row_floats(std::span<const std::uint16_t> rows, int heads, int dim) {
  const std::size_t hd = static_cast<std::size_t>(heads) * dim;
  return [=](int i, std::vector<float>& buffer) -> const float* {
    fp16_to_float(rows.subspan(static_cast<std::size_t>(i) * hd, hd), buffer);
    return buffer.data();
  };
}
// float rows: read as they are.
auto float_rows_of([[maybe_unused]] const float* rows, [[maybe_unused]] int tokens, int heads,
                   int dim) {
  [[maybe_unused]] const std::size_t hd = static_cast<std::size_t>(heads) * dim;
  return [=](int h) {
#if KVLAB_FUSED_SIMD
    return FloatRows{rows + static_cast<std::size_t>(h) * dim, hd, dim,
                     static_cast<std::size_t>(tokens)};
#else
    return h;
#endif
  };
}
auto float_row_floats(const float* rows, int heads, int dim) {
  const std::size_t hd = static_cast<std::size_t>(heads) * dim;
  return [=](int i, std::vector<float>&) { return rows + static_cast<std::size_t>(i) * hd; };
}

}  // namespace

void fp16_rows_logits(std::span<const std::uint16_t> keys, int first, int tokens, int heads,
                      int dim, int group, const float* q, float scale, int total_tokens,
                      float* logits) {
  rows_logits(fp16_rows_of(keys, tokens, heads, dim), fp16_row_floats(keys, heads, dim), first,
              tokens, heads, dim, group, q, scale, total_tokens, logits);
}

void fp16_rows_values(std::span<const std::uint16_t> values, int first, int tokens, int heads,
                      int dim, int group, const float* probs, int total_tokens, float* out) {
  rows_values(fp16_rows_of(values, tokens, heads, dim), fp16_row_floats(values, heads, dim), first,
              tokens, heads, dim, group, probs, total_tokens, out);
}

void float_rows_logits(const float* keys, int first, int tokens, int heads, int dim, int group,
                       const float* q, float scale, int total_tokens, float* logits) {
  rows_logits(float_rows_of(keys, tokens, heads, dim), float_row_floats(keys, heads, dim), first,
              tokens, heads, dim, group, q, scale, total_tokens, logits);
}

void float_rows_values(const float* values, int first, int tokens, int heads, int dim, int group,
                       const float* probs, int total_tokens, float* out) {
  rows_values(float_rows_of(values, tokens, heads, dim), float_row_floats(values, heads, dim),
              first, tokens, heads, dim, group, probs, total_tokens, out);
}

Status check_sizes(const char* what, std::size_t in, std::size_t in_need, std::size_t out,
                   std::size_t out_need) {
  if (in != in_need || out != out_need) {
    return make_error(fmt::format("{}: input holds {} floats (needs {}), output {} (needs {})",
                                  what, in, in_need, out, out_need));
  }
  return Ok{};
}

}  // namespace detail

void softmax_rows(std::span<float> x, int rows) {
  if (rows <= 0) return;
  // Eigen's vectorised exp (about 1 ulp), 16 values at a time: a decode step at 8K takes 74K
  // exponentials per layer of SmolLM2, which std::exp one at a time spent a third of the step on.
  // Fixed chunks of 16 (the last one through a buffer) keep every value on the same path whatever
  // the row's address: over a whole row Eigen peels an unaligned start through its scalar exp,
  // which rounds differently. The sums go lane by lane in a fixed order, so a row's result
  // depends on its values alone.
  constexpr int kLanes = 16;
  using Chunk = Eigen::Array<float, kLanes, 1>;
  const auto n = static_cast<Eigen::Index>(x.size() / static_cast<std::size_t>(rows));
  alignas(64) float tail[kLanes];
  alignas(64) float lanes[kLanes];
  for (int r = 0; r < rows; ++r) {
    Eigen::Map<Eigen::ArrayXf> row(x.data() + static_cast<std::size_t>(r) * n, n);
    if (n == 0) continue;
    const float mx = row.maxCoeff();  // the largest whatever the order
    Eigen::Map<Chunk, Eigen::Aligned64> sums(lanes), last(tail);
    sums.setZero();
    Eigen::Index i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      Eigen::Map<Chunk> chunk(row.data() + i);
      chunk = (chunk - mx).exp();
      sums += chunk;
    }
    if (const Eigen::Index m = n - i; m > 0) {
      std::fill(tail, tail + kLanes, mx);  // unused lanes: exp(0), then dropped
      std::copy(row.data() + i, row.data() + n, tail);
      last = (last - mx).exp();
      std::fill(tail + m, tail + kLanes, 0.f);
      sums += last;
      std::copy(tail, tail + m, row.data() + i);
    }
    float sum = 0.f;
    for (const float s : lanes) sum += s;
    row *= 1.f / sum;
  }
}

namespace {

Status check_fp16(const Fp16KvView& kv, int q_heads) {
  if (kv.tokens < 1 || kv.kv_heads < 1 || kv.head_dim < 1) {
    return make_error(fmt::format("fp16 attention: shape [{}, {}, {}] is empty", kv.tokens,
                                  kv.kv_heads, kv.head_dim));
  }
  if (q_heads < 1 || q_heads % kv.kv_heads != 0) {
    return make_error(fmt::format(
        "fp16 attention: {} query heads are not a multiple of {} KV heads", q_heads, kv.kv_heads));
  }
  const std::size_t need = static_cast<std::size_t>(kv.tokens) * kv.kv_heads * kv.head_dim;
  if (kv.keys.size() != need || kv.values.size() != need) {
    return make_error(fmt::format("fp16 attention: {} keys and {} values given, the shape needs {}",
                                  kv.keys.size(), kv.values.size(), need));
  }
  return Ok{};
}

}  // namespace

Status fp16_attention_logits(const Fp16KvView& kv, std::span<const float> q, int q_heads,
                             std::span<float> logits) {
  KVLAB_TRY(check_fp16(kv, q_heads));
  if (Status st = detail::check_sizes("fp16 attention logits", q.size(),
                                      static_cast<std::size_t>(q_heads) * kv.head_dim,
                                      logits.size(), static_cast<std::size_t>(q_heads) * kv.tokens);
      !st) {
    return st;
  }
  const std::size_t hd = static_cast<std::size_t>(kv.kv_heads) * kv.head_dim;
  const int parts = detail::attention_parts(kv.tokens, detail::kMinPartTokens);
  return detail::for_attention_parts(kv.tokens, parts, [&](int, int first, int last) -> Status {
    detail::fp16_rows_logits(kv.keys.subspan(first * hd, (last - first) * hd), first, last - first,
                             kv.kv_heads, kv.head_dim, q_heads / kv.kv_heads, q.data(),
                             1.f / std::sqrt(static_cast<float>(kv.head_dim)), kv.tokens,
                             logits.data());
    return Ok{};
  });
}

Status fp16_attention_values(const Fp16KvView& kv, std::span<const float> probs, int q_heads,
                             std::span<float> out) {
  KVLAB_TRY(check_fp16(kv, q_heads));
  if (Status st = detail::check_sizes("fp16 attention values", probs.size(),
                                      static_cast<std::size_t>(q_heads) * kv.tokens, out.size(),
                                      static_cast<std::size_t>(q_heads) * kv.head_dim);
      !st) {
    return st;
  }
  const std::size_t hd = static_cast<std::size_t>(kv.kv_heads) * kv.head_dim;
  const int parts = detail::attention_parts(kv.tokens, detail::kMinPartTokens);
  std::fill(out.begin(), out.end(), 0.f);
  return detail::for_attention_sums(
      kv.tokens, parts, out.data(), out.size(), [&](int first, int last, float* sums) -> Status {
        detail::fp16_rows_values(kv.values.subspan(first * hd, (last - first) * hd), first,
                                 last - first, kv.kv_heads, kv.head_dim, q_heads / kv.kv_heads,
                                 probs.data(), kv.tokens, sums);
        return Ok{};
      });
}

Status fp16_attention(const Fp16KvView& kv, std::span<const float> q, int q_heads,
                      std::span<float> out, std::vector<float>& scratch) {
  scratch.resize(static_cast<std::size_t>(std::max(q_heads, 0)) *
                 static_cast<std::size_t>(std::max(kv.tokens, 0)));
  KVLAB_TRY(fp16_attention_logits(kv, q, q_heads, scratch));
  softmax_rows(scratch, q_heads);
  return fp16_attention_values(kv, scratch, q_heads, out);
}

}  // namespace kvlab
