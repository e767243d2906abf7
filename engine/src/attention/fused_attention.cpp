// Attention straight from KVComp's compressed streams (Jiang et al. 2025, Sec. 4). Per block of
// tokens and KV head, the dequantization x = min + code * step is folded out of the inner loops
// (fused_kernels.h): keys are quantized per channel over the block, so the query heads of the
// GQA group are scaled by the steps once per block and the minimums give one bias per head;
// values are quantized per token, so each softmax weight is scaled by its token's step and the
// minimums add one bias per head at the end. The inner loops then multiply integer codes read
// straight from the payload: 4-bit codes two per byte, 8-bit codes as bytes. Huffman streams
// decode a tile of at most kTile vectors into a small byte-per-code row buffer (L1-resident,
// like the shared-memory staging of the paper's GPU kernels) that the same loops read at once;
// no dequantized vector, let alone a decoded cache, is ever stored. Every Huffman vector must
// consume exactly its stored bit count and every lookup must hit a code; anything else is a
// corrupt stream.
#include "kvlab/engine/attention/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "attention/attention_common.h"
#include "attention/fused_block_rows.h"
#include "attention/fused_kernels.h"

namespace kvlab {

namespace {

using detail::BlockRows;
using detail::ceil_div;
using detail::kTile;
// Query heads per KV head.
constexpr int kMaxGroup = 32;

Status key_logits_blocks(const CompressedKvView& v, const float* q, int group, float scale, int T,
                         int tb0, int tb1, float* logits);

// Blocks a thread takes at least: about detail::kMinPartTokens tokens.
int min_part_blocks(const EncodedCodes& e) {
  return std::max(1, detail::kMinPartTokens / std::max(1, e.block_size));
}

// logits for every compressed token: per block, the query heads of the group folded with the
// block's per-channel steps and minimums, then plain code dot products.
Status key_logits(const CompressedKvView& v, const float* q, int group, float scale, int T,
                  float* logits) {
  const EncodedCodes& e = *v.keys;
  // Threads take consecutive blocks; each writes its own tokens' logits.
  const int parts = detail::attention_parts(e.token_blocks(), min_part_blocks(e));
  return detail::for_attention_parts(e.token_blocks(), parts, [&](int, int tb0, int tb1) {
    return key_logits_blocks(v, q, group, scale, T, tb0, tb1, logits);
  });
}

Status key_logits_blocks(const CompressedKvView& v, const float* q, int group, float scale, int T,
                         int tb0, int tb1, float* logits) {
  const EncodedCodes& e = *v.keys;
  const int dim = e.dim, H = e.heads;
  BlockRows src(e, v.key_book);
  std::vector<float> qf(static_cast<std::size_t>(group) * dim), bias(group);
  for (int tb = tb0; tb < tb1; ++tb) {
    const int first = tb * e.block_size;
    const int n = std::min(e.block_size, e.tokens - first);
    for (int h = 0; h < H; ++h) {
      const std::size_t unit = (static_cast<std::size_t>(tb) * H + h) * dim;
      const float* st = v.key_steps.data() + unit;
      const float* mn = v.key_mins.data() + unit;
      const float* qh = q + static_cast<std::size_t>(h) * group * dim;
#if KVLAB_FUSED_SIMD
      if (dim % detail::kLaneGroup == 0) {
        if (src.nibbles()) {
          detail::fold_keys<true>(qh, group, dim, st, mn, scale, qf.data(), bias.data());
        } else {
          detail::fold_keys<false>(qh, group, dim, st, mn, scale, qf.data(), bias.data());
        }
      } else
#endif
      {
        for (int g = 0; g < group; ++g) {
          const float* qg = qh + static_cast<std::size_t>(g) * dim;
          float* fg = qf.data() + static_cast<std::size_t>(g) * dim;
          float b = 0.f;
          for (int c = 0; c < dim; ++c) {
            b += qg[c] * mn[c];
            fg[c] = qg[c] * st[c] * scale;
          }
          bias[g] = b * scale;
        }
      }
      src.start_block(tb, h, n);
      for (int i0 = 0; i0 < n; i0 += kTile) {
        const int m = std::min(kTile, n - i0);
        float* out = logits + static_cast<std::size_t>(h) * group * T + first + i0;
        if (!src.in_place()) {
          if (const int bad = src.decode(i0, m); bad >= 0) return src.corrupt("key", first, h, bad);
        }
#if KVLAB_FUSED_SIMD
        if (dim % detail::kLaneGroup == 0) {
          for (int g0 = 0; g0 < group; g0 += detail::kHeadTile) {
            const int gt = std::min(detail::kHeadTile, group - g0);
            const float* qg = qf.data() + static_cast<std::size_t>(g0) * dim;
            float* og = out + static_cast<std::size_t>(g0) * T;
            if (src.nibbles()) {
              const detail::NibbleRows rows{src.tile_rows(i0), src.tile_stride()};
              detail::key_tile(rows, 0, m, gt, dim / detail::kLaneGroup, qg, dim, &bias[g0], og, T);
            } else {
              const detail::ByteRows rows{src.tile_rows(i0), src.tile_stride()};
              detail::key_tile(rows, 0, m, gt, dim / detail::kLaneGroup, qg, dim, &bias[g0], og, T);
            }
          }
          continue;
        }
#endif
        for (int i = 0; i < m; ++i) {
          const std::uint8_t* row = src.rows() + static_cast<std::size_t>(i) * src.stride();
          for (int g = 0; g < group; ++g) {
            const float* fg = qf.data() + static_cast<std::size_t>(g) * dim;
            float a = 0.f;
#pragma omp simd reduction(+ : a)
            for (int c = 0; c < dim; ++c) a += fg[c] * static_cast<float>(row[c]);
            out[static_cast<std::size_t>(g) * T + i] = a + bias[g];
          }
        }
      }
    }
  }
  return Ok{};
}

// out += probs . V for every compressed token: the weights scaled by each token's step, the
// minimums summed into one bias per query head, then plain weighted sums of codes.
Status value_sums_blocks(const CompressedKvView& v, const float* probs, int group, int T, int tb0,
                         int tb1, float* out);

Status value_sums(const CompressedKvView& v, const float* probs, int group, int T, float* out) {
  const EncodedCodes& e = *v.values;
  // Threads take consecutive blocks, each adding to its own output (for_attention_sums).
  const int parts = detail::attention_parts(e.token_blocks(), min_part_blocks(e));
  const std::size_t size = static_cast<std::size_t>(e.heads) * group * e.dim;
  return detail::for_attention_sums(e.token_blocks(), parts, out, size,
                                    [&](int tb0, int tb1, float* sums) {
                                      return value_sums_blocks(v, probs, group, T, tb0, tb1, sums);
                                    });
}

Status value_sums_blocks(const CompressedKvView& v, const float* probs, int group, int T, int tb0,
                         int tb1, float* out) {
  const EncodedCodes& e = *v.values;
  const int dim = e.dim, H = e.heads;
  BlockRows src(e, v.value_book);
  std::vector<float> w(static_cast<std::size_t>(group) * kTile);
  float sv[kTile], mv[kTile];  // the tile's value steps and minimums
  std::vector<double> bias(static_cast<std::size_t>(H) * group, 0.0);
  for (int tb = tb0; tb < tb1; ++tb) {
    const int first = tb * e.block_size;
    const int n = std::min(e.block_size, e.tokens - first);
    for (int h = 0; h < H; ++h) {
      src.start_block(tb, h, n);
      float* oh = out + static_cast<std::size_t>(h) * group * dim;
      for (int i0 = 0; i0 < n; i0 += kTile) {
        const int m = std::min(kTile, n - i0);
        for (int i = 0; i < m; ++i) {
          const std::size_t unit = static_cast<std::size_t>(first + i0 + i) * H + h;
          sv[i] = v.value_steps[unit];
          mv[i] = v.value_mins[unit];
        }
        for (int g = 0; g < group; ++g) {
          const float* pg = probs + (static_cast<std::size_t>(h) * group + g) * T + first + i0;
          float* wg = w.data() + static_cast<std::size_t>(g) * kTile;
          float b = 0.f;
#pragma omp simd reduction(+ : b)
          for (int i = 0; i < m; ++i) {
            wg[i] = pg[i] * sv[i];
            b += pg[i] * mv[i];
          }
          bias[static_cast<std::size_t>(h) * group + g] += b;
        }
        if (!src.in_place()) {
          if (const int bad = src.decode(i0, m); bad >= 0) {
            return src.corrupt("value", first, h, bad);
          }
        }
#if KVLAB_FUSED_SIMD
        if (dim % detail::kLaneGroup == 0) {
          for (int g0 = 0; g0 < group; g0 += detail::kHeadTile) {
            const int gt = std::min(detail::kHeadTile, group - g0);
            const float* wg = w.data() + static_cast<std::size_t>(g0) * kTile;
            float* og = oh + static_cast<std::size_t>(g0) * dim;
            const int groups = dim / detail::kLaneGroup;
            if (src.nibbles()) {
              const detail::NibbleRows rows{src.tile_rows(i0), src.tile_stride()};
              detail::value_tile(rows, 0, m, gt, groups, wg, kTile, og, dim);
            } else {
              const detail::ByteRows rows{src.tile_rows(i0), src.tile_stride()};
              detail::value_tile(rows, 0, m, gt, groups, wg, kTile, og, dim);
            }
          }
          continue;
        }
#endif
        for (int i = 0; i < m; ++i) {
          const std::uint8_t* row = src.rows() + static_cast<std::size_t>(i) * src.stride();
          for (int g = 0; g < group; ++g) {
            const float wi = w[static_cast<std::size_t>(g) * kTile + i];
            float* o = oh + static_cast<std::size_t>(g) * dim;
#pragma omp simd
            for (int c = 0; c < dim; ++c) o[c] += wi * static_cast<float>(row[c]);
          }
        }
      }
    }
  }
  for (std::size_t qh = 0; qh < bias.size(); ++qh) {
    const float b = static_cast<float>(bias[qh]);
    for (int c = 0; c < dim; ++c) out[qh * dim + c] += b;
  }
  return Ok{};
}

Status check_encoded(const EncodedCodes* e, const HuffmanCodebook* book, const CompressedKvView& v,
                     const char* what) {
  if (e == nullptr) return make_error(fmt::format("fused attention: no {} codes", what));
  if (e->tokens != v.compressed_tokens || e->heads != v.kv_heads || e->dim != v.head_dim ||
      e->block_size != v.block_size) {
    return make_error(fmt::format(
        "fused attention: {} codes [{}, {}, {}] in blocks of {} do not match the cache's [{}, {}, "
        "{}] in blocks of {}",
        what, e->tokens, e->heads, e->dim, e->block_size, v.compressed_tokens, v.kv_heads,
        v.head_dim, v.block_size));
  }
  if ((e->kind == CodecKind::Huffman && book == nullptr) ||
      (e->kind == CodecKind::Rans && (book == nullptr || book->rans() == nullptr))) {
    return make_error(fmt::format("fused attention: {} codes need a codebook", what));
  }
  if (e->kind == CodecKind::VarWidth) {
    return make_error(fmt::format("fused attention: {} codes: varwidth is not supported", what));
  }
  if (Status st = validate_encoded(*e); !st) {
    return make_error(fmt::format("fused attention: {} codes: {}", what, st.message()));
  }
  return Ok{};
}

Status check_view(const CompressedKvView& v, int q_heads) {
  if (v.kv_heads < 1 || v.head_dim < 1 || v.block_size < 1 || v.compressed_tokens < 0 ||
      v.buffered_tokens < 0) {
    return make_error("fused attention: the cache view has no valid shape");
  }
  if (q_heads < 1 || q_heads % v.kv_heads != 0 || q_heads / v.kv_heads > kMaxGroup) {
    return make_error(fmt::format(
        "fused attention: {} query heads are not a multiple of {} KV heads with at most {} per "
        "group",
        q_heads, v.kv_heads, kMaxGroup));
  }
  if (v.tokens() == 0) return make_error("fused attention: the cache holds no tokens");
  const std::size_t hd = static_cast<std::size_t>(v.kv_heads) * v.head_dim;
  if (v.buffer_keys.size() != static_cast<std::size_t>(v.buffered_tokens) * hd ||
      v.buffer_values.size() != static_cast<std::size_t>(v.buffered_tokens) * hd) {
    return make_error(
        fmt::format("fused attention: the buffer holds {} key and {} value halves, "
                    "{} tokens need {} each",
                    v.buffer_keys.size(), v.buffer_values.size(), v.buffered_tokens,
                    static_cast<std::size_t>(v.buffered_tokens) * hd));
  }
  if (v.compressed_tokens == 0) return Ok{};
  KVLAB_TRY(check_encoded(v.keys, v.key_book, v, "key"));
  KVLAB_TRY(check_encoded(v.values, v.value_book, v, "value"));
  const std::size_t key_units = ceil_div(v.compressed_tokens, v.block_size) * hd;
  const std::size_t value_units = static_cast<std::size_t>(v.compressed_tokens) * v.kv_heads;
  if (v.key_steps.size() != key_units || v.key_mins.size() != key_units ||
      v.value_steps.size() != value_units || v.value_mins.size() != value_units) {
    return make_error(fmt::format(
        "fused attention: {} key and {} value steps given, {} compressed tokens need {} and {}",
        v.key_steps.size(), v.value_steps.size(), v.compressed_tokens, key_units, value_units));
  }
  return Ok{};
}

}  // namespace

Status fused_attention_logits(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                              std::span<float> logits) {
  KVLAB_TRY(check_view(cache, q_heads));
  const int T = cache.tokens(), dim = cache.head_dim, group = q_heads / cache.kv_heads;
  if (Status st = detail::check_sizes("fused attention logits", q.size(),
                                      static_cast<std::size_t>(q_heads) * dim, logits.size(),
                                      static_cast<std::size_t>(q_heads) * T);
      !st) {
    return st;
  }
  const float scale = 1.f / std::sqrt(static_cast<float>(dim));
  if (cache.compressed_tokens > 0) {
    KVLAB_TRY(key_logits(cache, q.data(), group, scale, T, logits.data()));
  }
  detail::fp16_rows_logits(cache.buffer_keys, cache.compressed_tokens, cache.buffered_tokens,
                           cache.kv_heads, dim, group, q.data(), scale, T, logits.data());
  return Ok{};
}

Status fused_attention_values(const CompressedKvView& cache, std::span<const float> probs,
                              int q_heads, std::span<float> out) {
  KVLAB_TRY(check_view(cache, q_heads));
  const int T = cache.tokens(), dim = cache.head_dim, group = q_heads / cache.kv_heads;
  if (Status st = detail::check_sizes("fused attention values", probs.size(),
                                      static_cast<std::size_t>(q_heads) * T, out.size(),
                                      static_cast<std::size_t>(q_heads) * dim);
      !st) {
    return st;
  }
  std::fill(out.begin(), out.end(), 0.f);
  if (cache.compressed_tokens > 0) {
    KVLAB_TRY(value_sums(cache, probs.data(), group, T, out.data()));
  }
  detail::fp16_rows_values(cache.buffer_values, cache.compressed_tokens, cache.buffered_tokens,
                           cache.kv_heads, dim, group, probs.data(), T, out.data());
  return Ok{};
}

Status fused_attention(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                       std::span<float> out, std::vector<float>& scratch) {
  scratch.resize(static_cast<std::size_t>(std::max(q_heads, 0)) *
                 static_cast<std::size_t>(cache.tokens()));
  KVLAB_TRY(fused_attention_logits(cache, q, q_heads, scratch));
  softmax_rows(scratch, q_heads);
  return fused_attention_values(cache, scratch, q_heads, out);
}

}  // namespace kvlab
