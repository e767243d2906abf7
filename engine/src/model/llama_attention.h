// Causal attention of the Llama runner (llama_model.h) over its KV cache. Per KV head and per
// block of new tokens, the scores of the head group's queries against the cached keys and the
// weighted values are matrix products, with a vectorised softmax between them. Only the keys up
// to the block's last position take part, so a prefill skips most of the causal upper triangle.
// Kept-token masks and the attention observer (eviction in the loop) run on the same path. A
// decode step (one new token) with no observer or weights hook instead runs the stored caches'
// row loops over the float rows, on the engine's threads (attention/attention_common.h), a mask
// applied to its scores.
#pragma once

#include <Eigen/Core>
#include <functional>
#include <span>
#include <vector>

#include "kvlab/engine/core/aligned.h"
#include "kvlab/engine/core/result.h"

namespace kvlab::detail {

// New tokens per block of queries, for `group` query heads per KV head, `total` cached positions
// (the new tokens included) and `n` new tokens: a block's scores stay near 64 KiB (in L2) while
// a block has enough rows for the GEMM kernel. forward_matmul_shapes() uses the same blocks.
int attention_block_tokens(int group, int total, int n);

// Buffers reused from one forward to the next (grown, never shrunk). The scores' rows start
// 64-byte aligned.
struct AttentionScratch {
  AlignedFloats queries, out, inverse_sums, row_max, scores;
};

struct AttentionArgs {
  int layer = 0;  // for messages and the observer
  int heads = 0, kv_heads = 0, head_dim = 0;
  int pos = 0, n = 0;                  // new tokens at positions pos..pos + n - 1
  const float* q = nullptr;            // [n][heads × head_dim], after RoPE
  const float* keys = nullptr;         // [pos + n][kv_heads × head_dim], after RoPE
  const float* values = nullptr;       // [pos + n][kv_heads × head_dim]
  const char* const* masks = nullptr;  // per KV head: positions kept (nonzero), or nullptr
  const std::function<void(int layer, int q_head, std::span<const float> probs)>* observe = nullptr;
  // When set (and non-empty), turns each row of scaled scores into probabilities instead of the
  // softmax; masks and observe are then not used (LlamaModel::State::attention_weights).
  const std::function<void(int layer, int q_head, std::span<float> scores)>* weigh = nullptr;
};

// Writes the attention output [n][heads × head_dim] to `out`. Softmax over the scaled scores
// q·k / sqrt(head_dim) of positions 0..pos + i for new token i (Vaswani et al. 2017, eq. 1),
// renormalised over the kept positions when a mask is given. An error when a mask keeps none of
// a token's positions.
Status causal_attention(const AttentionArgs& args, AttentionScratch& scratch, float* out);

// The causal attention of n new tokens over a cache read a tile at a time: for a stored cache's
// later prompt chunks (llama.cpp's micro-batches, GreedyConfig::prefill_chunk), whose earlier
// rows live in the store's format. The scores of each tile of `tile` tokens against every new
// token's queries are one matrix product per KV head, and an online softmax (Milakov & Gimelshein
// 2018, as FlashAttention runs it) rescales the running sums as each tile raises a row's maximum:
// memory is a tile and the new tokens' rows, never the whole layer.
struct TiledAttentionArgs {
  int heads = 0, kv_heads = 0, head_dim = 0;
  int pos = 0, n = 0;        // new tokens at positions pos..pos + n - 1
  const float* q = nullptr;  // [n][heads × head_dim], after RoPE
  int tile = 0;              // tokens per tile
  // Rows of tokens [first, last) (after RoPE) from the cache, [last - first][kv_heads × head_dim]
  // each; `first` is a multiple of `tile`, `last` the tile's end, or `pos` where new_keys are
  // given, or pos + n.
  std::function<Status(int first, int last, float* keys, float* values)> read;
  // The new tokens' own rows [n][kv_heads × head_dim], read in place of the cache's from position
  // pos on (a method whose prompt reads its exact rows); null: every row comes from `read`.
  const float* new_keys = nullptr;
  const float* new_values = nullptr;
};

// Tokens per tile a stored cache's later prompt chunk reads (each store rounds it up to whole
// units of its format): 2 × 256 rows of SmolLM2's 192 floats take 384 KiB, in L2 beside the
// scores.
constexpr int kTiledAttentionTokens = 256;

struct TiledAttentionScratch {
  AlignedFloats queries, keys, values, scores, sums, row_max, row_sum;
};

// Writes out [n][heads × head_dim], what causal_attention() writes for the same rows (softmax of
// q·k / sqrt(head_dim) over positions 0..pos + i for new token i), in another summation order.
Status tiled_causal_attention(const TiledAttentionArgs& args, TiledAttentionScratch& scratch,
                              float* out);

}  // namespace kvlab::detail
