// Causal attention of the Llama runner (see llama_attention.h).
#include "model/llama_attention.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "attention/attention_common.h"
#include "kvlab/engine/attention/fused_attention.h"

namespace kvlab::detail {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using StridedOut = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

constexpr int kScoreFloats = 16384;  // a block's scores: 64 KiB
constexpr int kMinRows = 48;         // Eigen's float GEBP kernel takes 48 rows at a time (AVX-512)
constexpr int kGemvRows = 8;         // up to this many rows: one matrix-vector product per row
constexpr int kPacket = 16;          // floats per 64-byte row start of the scores

template <class Buffer>
float* grow(Buffer& buffer, std::size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

int round_up(int n) {
  return (n + kPacket - 1) / kPacket * kPacket;
}

// One row of scaled scores to unnormalised probabilities in place: exp(p[t] − max) over the kept
// positions of 0..ctx-1, 0 at the others and up to the end of the row (width, or ctx rounded up
// to kPacket); returns their sum (at least 1: the largest kept score gives exp(0)), or 0 when the
// mask keeps nothing. The row starts 64-byte aligned and has room for ctx rounded up to kPacket,
// so max, exp and sum run in whole packets.
float softmax_row(float* p, int ctx, int width, const char* keep) {
  const int padded = round_up(ctx);
  using Row = Eigen::Map<Eigen::ArrayXf, Eigen::AlignedMax>;
  float max = -INFINITY;
  if (keep) {
    for (int t = 0; t < ctx; ++t) {
      if (keep[t]) max = std::max(max, p[t]);
    }
    if (max == -INFINITY) return 0.0f;
  } else {
    std::fill(p + ctx, p + padded, -INFINITY);
    max = Row(p, padded).maxCoeff();
  }
  Row(p, padded) = (Row(p, padded) - max).exp();
  if (keep) {
    for (int t = 0; t < ctx; ++t) {
      if (!keep[t]) p[t] = 0.0f;
    }
  }
  std::fill(p + ctx, p + std::max(width, padded), 0.0f);
  return Row(p, padded).sum();
}

// The plain path (no mask, no observer): the causal softmax of a whole block at once. Row r
// attends to positions 0..first_ctx + r / group - 1; every row is `stride` long (a multiple of
// kPacket, 64-byte aligned), so the max, the exponentials and the sums run in whole packets.
// Leaves exp(score − row max) in the rows, 0 past each row's positions, and 1 / row sum in
// inverse_sums.
void block_softmax(float* scores, int rows, int stride, int first_ctx, int group, float* row_max,
                   float* inverse_sums) {
  using Block = Eigen::Map<Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>,
                           Eigen::AlignedMax>;
  Block block(scores, rows, stride);
  for (int r = 0; r < rows; ++r) block.row(r).tail(stride - first_ctx - r / group) = -INFINITY;
  Eigen::Map<Eigen::ArrayXf> max(row_max, rows), inverse(inverse_sums, rows);
  max = block.rowwise().maxCoeff();
  for (int r = 0; r < rows; ++r) {  // row by row: a broadcast max would not vectorise
    float* p = scores + static_cast<std::size_t>(r) * stride;
    const int ctx = first_ctx + r / group;
    Eigen::Map<Eigen::ArrayXf, Eigen::AlignedMax> live(p, round_up(ctx));
    live = (live - max[r]).exp();
    std::fill(p + ctx, p + stride, 0.0f);
  }
  inverse = block.rowwise().sum().inverse();  // each at least 1: the max gives exp(0)
}

// A decode step with nothing to observe or weigh: one new token, whose attention reads every
// cached row once. It runs the row loops the stored caches' decode runs (attention_common.h:
// fused_kernels.h's register-blocked loops over the float rows), on the engine's threads, instead
// of matrix products that copy every key into the GEMM's packing buffer each step. A kept-token
// mask (eviction in the loop) sets the dropped positions' scores to -inf before the softmax, so
// they weigh 0 in the values' sums.
Status decode_attention(const AttentionArgs& a, AttentionScratch& s, float* out) {
  const int hd = a.head_dim, group = a.heads / a.kv_heads, total = a.pos + 1;
  const std::size_t kv = static_cast<std::size_t>(a.kv_heads) * hd;
  const std::size_t logits_size = static_cast<std::size_t>(a.heads) * total;
  float* logits = grow(s.scores, logits_size);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // Ranges of kMinPartTokens positions whatever the thread count, added in order: the runner's
  // results do not depend on how many threads ran (as project()'s tiles), which a split by
  // thread count (attention_parts) would give up past 2048 positions.
  const int parts = std::max(1, total / kMinPartTokens);
  KVLAB_TRY(for_attention_parts(total, parts, [&](int, int first, int last) -> Status {
    float_rows_logits(a.keys + first * kv, first, last - first, a.kv_heads, hd, group, a.q, scale,
                      total, logits);
    return Ok{};
  }));
  for (int kvh = 0; a.masks && kvh < a.kv_heads; ++kvh) {
    const char* keep = a.masks[kvh];
    if (!keep) continue;
    if (std::none_of(keep, keep + total, [](char k) { return k != 0; })) {
      return make_error(fmt::format(
          "layer {}, KV head {}: the kept-token mask leaves nothing to attend at position {}",
          a.layer, kvh, total - 1));
    }
    for (int g = 0; g < group; ++g) {
      float* row = logits + static_cast<std::size_t>(kvh * group + g) * total;
      for (int t = 0; t < total; ++t) {
        if (!keep[t]) row[t] = -INFINITY;
      }
    }
  }
  softmax_rows({logits, logits_size}, a.heads);
  const std::size_t out_size = static_cast<std::size_t>(a.heads) * hd;
  std::fill(out, out + out_size, 0.0f);
  return for_attention_sums(total, parts, out, out_size,
                            [&](int first, int last, float* sums) -> Status {
                              float_rows_values(a.values + first * kv, first, last - first,
                                                a.kv_heads, hd, group, logits, total, sums);
                              return Ok{};
                            });
}

}  // namespace

int attention_block_tokens(int group, int total, int n) {
  const int by_size = kScoreFloats / std::max(1, group * total);
  const int by_rows = (kMinRows + group - 1) / group;
  return std::clamp(std::max(by_size, by_rows), 1, std::max(1, n));
}

Status causal_attention(const AttentionArgs& a, AttentionScratch& s, float* out) {
  if (a.n == 1 && !(a.weigh && *a.weigh) && !(a.observe && *a.observe)) {
    return decode_attention(a, s, out);
  }
  const int hd = a.head_dim, group = a.heads / a.kv_heads;
  const int D = a.heads * hd, KV = a.kv_heads * hd, total = a.pos + a.n;
  const int group_width = group * hd;  // one token's queries of the heads sharing a KV head
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int block = attention_block_tokens(group, total, a.n);
  const std::size_t block_rows = static_cast<std::size_t>(block) * group;
  float* queries = grow(s.queries, block_rows * hd);
  float* scores = grow(s.scores, block_rows * round_up(total));
  float* result = grow(s.out, block_rows * hd);
  float* inverse_sums = grow(s.inverse_sums, block_rows);
  float* row_max = grow(s.row_max, block_rows);
  // A weights hook replaces the softmax, the masks and the observer for every head.
  const bool weighed = a.weigh && *a.weigh;
  for (int kvh = 0; kvh < a.kv_heads; ++kvh) {
    const char* keep = a.masks && !weighed ? a.masks[kvh] : nullptr;
    const Strided keys(a.keys + kvh * hd, total, hd, Eigen::OuterStride<>(KV));
    const Strided values(a.values + kvh * hd, total, hd, Eigen::OuterStride<>(KV));
    for (int i0 = 0; i0 < a.n; i0 += block) {
      const int tokens = std::min(block, a.n - i0), rows = tokens * group;
      const int width = a.pos + i0 + tokens;  // the block's last token sees positions 0..width-1
      // Row i·group + g: query head kvh·group + g of token i0 + i.
      // Scaled here by 1 / sqrt(head_dim), so that the scores come out of the product scaled.
      Eigen::Map<RowMatrix>(queries, tokens, group_width) =
          Strided(a.q + static_cast<std::size_t>(i0) * D + kvh * group_width, tokens, group_width,
                  Eigen::OuterStride<>(D)) *
          scale;
      const int stride = round_up(width);  // rows start 64-byte aligned
      StridedOut sc(scores, rows, width, Eigen::OuterStride<>(stride));
      const Eigen::Map<const RowMatrix> q(queries, rows, hd);
      sc.noalias() = q * keys.topRows(width).transpose();
      // Normalised rows for the observer; otherwise the sums divide the hd outputs of a row.
      const bool observed = !weighed && a.observe && *a.observe;
      if (weighed) {
        for (int r = 0; r < rows; ++r) {
          const int ctx = a.pos + i0 + r / group + 1;
          float* p = scores + static_cast<std::size_t>(r) * stride;
          (*a.weigh)(a.layer, kvh * group + r % group, {p, static_cast<std::size_t>(ctx)});
          std::fill(p + ctx, p + width, 0.0f);
          inverse_sums[r] = 1.0f;
        }
      } else if (!keep && !observed) {
        block_softmax(scores, rows, stride, a.pos + i0 + 1, group, row_max, inverse_sums);
      }
      for (int r = 0; (keep || observed) && r < rows; ++r) {
        const int ctx = a.pos + i0 + r / group + 1;
        float* p = scores + static_cast<std::size_t>(r) * stride;
        const float sum = softmax_row(p, ctx, width, keep);
        if (sum == 0.0f) {
          return make_error(fmt::format(
              "layer {}, KV head {}: the kept-token mask leaves nothing to attend at position {}",
              a.layer, kvh, ctx - 1));
        }
        inverse_sums[r] = 1.0f / sum;
        if (observed) {
          Eigen::Map<Eigen::ArrayXf>(p, ctx) *= inverse_sums[r];
          inverse_sums[r] = 1.0f;
          (*a.observe)(a.layer, kvh * group + r % group, {p, static_cast<std::size_t>(ctx)});
        }
      }
      Eigen::Map<RowMatrix> o(result, rows, hd);
      if (rows > kGemvRows) {
        o.noalias() = sc * values.topRows(width);
      } else {
        for (int r = 0; r < rows; ++r) o.row(r).noalias() = sc.row(r) * values.topRows(width);
      }
      o.array().colwise() *= Eigen::Map<const Eigen::ArrayXf>(inverse_sums, rows);
      StridedOut(out + static_cast<std::size_t>(i0) * D + kvh * group_width, tokens, group_width,
                 Eigen::OuterStride<>(D)) =
          Eigen::Map<const RowMatrix>(result, tokens, group_width);
    }
  }
  return Ok{};
}

Status tiled_causal_attention(const TiledAttentionArgs& a, TiledAttentionScratch& s, float* out) {
  const int hd = a.head_dim, group = a.heads / a.kv_heads;
  const int D = a.heads * hd, KV = a.kv_heads * hd, total = a.pos + a.n;
  const int group_width = group * hd, rows = a.n * group;
  if (a.n <= 0 || a.tile <= 0 || !a.read) {
    return make_error(fmt::format("tiled attention: {} new tokens, tiles of {}", a.n, a.tile));
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const std::size_t head_rows = static_cast<std::size_t>(rows) * hd;  // one KV head's queries
  // Per KV head, row i·group + g: query head kvh·group + g of new token i, scaled by
  // 1 / sqrt(head_dim) so that the scores come out of the product scaled.
  float* queries = grow(s.queries, head_rows * a.kv_heads);
  for (int kvh = 0; kvh < a.kv_heads; ++kvh) {
    Eigen::Map<RowMatrix>(queries + kvh * head_rows, a.n, group_width) =
        Strided(a.q + kvh * group_width, a.n, group_width, Eigen::OuterStride<>(D)) * scale;
  }
  float* sums = grow(s.sums, head_rows * a.kv_heads);  // the weighted values so far
  float* row_max = grow(s.row_max, static_cast<std::size_t>(rows) * a.kv_heads);
  float* row_sum = grow(s.row_sum, static_cast<std::size_t>(rows) * a.kv_heads);
  std::fill(sums, sums + head_rows * a.kv_heads, 0.0f);
  std::fill(row_max, row_max + static_cast<std::size_t>(rows) * a.kv_heads, -INFINITY);
  std::fill(row_sum, row_sum + static_cast<std::size_t>(rows) * a.kv_heads, 0.0f);
  const int stride = round_up(a.tile);
  float* keys = grow(s.keys, static_cast<std::size_t>(a.tile) * KV);
  float* values = grow(s.values, static_cast<std::size_t>(a.tile) * KV);
  float* scores = grow(s.scores, static_cast<std::size_t>(rows) * stride);
  const int cached_end = a.new_keys ? a.pos : total;  // rows from `read` end here
  for (int t0 = 0; t0 < total; t0 += a.tile) {
    const int width = std::min(a.tile, total - t0);
    const int cached = std::min(t0 + width, cached_end);
    if (t0 < cached) KVLAB_TRY(a.read(t0, cached, keys, values));
    for (int t = std::max(t0, cached_end); t < t0 + width; ++t) {
      const std::size_t from = static_cast<std::size_t>(t - a.pos) * KV;
      const std::size_t to = static_cast<std::size_t>(t - t0) * KV;
      std::copy_n(a.new_keys + from, KV, keys + to);
      std::copy_n(a.new_values + from, KV, values + to);
    }
    // New token i sees positions up to pos + i: the tokens from t0 - pos on see this tile.
    const int i_first = std::max(0, t0 - a.pos);
    const int r_first = i_first * group, live = rows - r_first;
    for (int kvh = 0; kvh < a.kv_heads; ++kvh) {
      const Strided k(keys + kvh * hd, width, hd, Eigen::OuterStride<>(KV));
      const Strided v(values + kvh * hd, width, hd, Eigen::OuterStride<>(KV));
      const Eigen::Map<const RowMatrix> q(queries + kvh * head_rows + r_first * hd, live, hd);
      StridedOut sc(scores, live, width, Eigen::OuterStride<>(stride));
      sc.noalias() = q * k.transpose();
      float* m = row_max + static_cast<std::size_t>(kvh) * rows + r_first;
      float* l = row_sum + static_cast<std::size_t>(kvh) * rows + r_first;
      Eigen::Map<RowMatrix> o(sums + kvh * head_rows + r_first * hd, live, hd);
      for (int r = 0; r < live; ++r) {
        const int seen = std::min(width, a.pos + i_first + r / group - t0 + 1);
        Eigen::Map<Eigen::ArrayXf> p(scores + static_cast<std::size_t>(r) * stride, seen);
        const float max = std::max(m[r], p.maxCoeff());
        const float rescale = std::exp(m[r] - max);  // 0 at the first tile (m = -inf)
        p = (p - max).exp();
        std::fill(p.data() + seen, p.data() + width, 0.0f);
        l[r] = l[r] * rescale + p.sum();
        m[r] = max;
        if (rescale != 1.0f) o.row(r) *= rescale;
      }
      o.noalias() += sc * v;
    }
  }
  for (int kvh = 0; kvh < a.kv_heads; ++kvh) {
    Eigen::Map<RowMatrix> o(sums + kvh * head_rows, rows, hd);
    o.array().colwise() /= Eigen::Map<const Eigen::ArrayXf>(row_sum + kvh * rows, rows);
    StridedOut(out + kvh * group_width, a.n, group_width, Eigen::OuterStride<>(D)) =
        Eigen::Map<const RowMatrix>(sums + kvh * head_rows, a.n, group_width);
  }
  return Ok{};
}

}  // namespace kvlab::detail
