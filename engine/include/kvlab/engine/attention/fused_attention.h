// Decode-time attention computed straight from a compressed KV cache (KVComp, Jiang et al. 2025,
// Sec. 4: decompression fused with the attention kernels): each key or value vector's code
// stream is decoded symbol by symbol into registers, x = min + code * step is folded into the
// dot product or the weighted sum at once, and no decoded tensor is ever written. One decoded
// key serves every query head of its GQA group. Buffered (fp16) tokens are read directly.
//
// The same entry points run the Huffman streams (table-driven decoding, docs/FORMAT.md) and the
// fixed-width packed baseline, chosen by the view's codec; the fp16 functions are the plain
// baseline over uncompressed keys and values, for the benchmarks.
//
// Shapes: q [q_heads][head_dim]; logits and probabilities [q_heads][tokens]; out
// [q_heads][head_dim]; q_heads a multiple of kv_heads, query head h reads KV head
// h / (q_heads / kv_heads). A corrupt stream gives an Error, never a crash.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

// logits = q . k / sqrt(head_dim) for every cached token.
Status fused_attention_logits(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                              std::span<float> logits);
// out = probs . V for every query head.
Status fused_attention_values(const CompressedKvView& cache, std::span<const float> probs,
                              int q_heads, std::span<float> out);
// softmax(q . K / sqrt(d)) . V; `scratch` is resized to q_heads * tokens floats.
Status fused_attention(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                       std::span<float> out, std::vector<float>& scratch);

// Uncompressed fp16 keys and values, [tokens][kv_heads][head_dim].
struct Fp16KvView {
  int tokens = 0, kv_heads = 0, head_dim = 0;
  std::span<const std::uint16_t> keys, values;
};

Status fp16_attention_logits(const Fp16KvView& kv, std::span<const float> q, int q_heads,
                             std::span<float> logits);
Status fp16_attention_values(const Fp16KvView& kv, std::span<const float> probs, int q_heads,
                             std::span<float> out);
Status fp16_attention(const Fp16KvView& kv, std::span<const float> q, int q_heads,
                      std::span<float> out, std::vector<float>& scratch);

// In-place softmax of each of `rows` rows (max subtracted first, so large logits stay finite).
void softmax_rows(std::span<float> x, int rows);

}  // namespace kvlab
