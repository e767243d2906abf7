// Private to the attention sources: the plain fp16 row loops, shared by the fp16 baseline
// (fp16_attention.cpp) and by the fused paths for the cache's uncompressed buffer
// (fused_attention.cpp), and the size check both give their callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kvlab/engine/core/result.h"

namespace kvlab::detail {

// logits[qh][first + i] = q[qh] . k_i * scale for the fp16 key rows of `tokens` tokens,
// [tokens][heads][dim]; query head qh reads KV head qh / group; rows are `total_tokens` long.
void fp16_rows_logits(std::span<const std::uint16_t> keys, int first, int tokens, int heads,
                      int dim, int group, const float* q, float scale, int total_tokens,
                      float* logits);
// out[qh] += probs[qh][first + i] * v_i for the fp16 value rows of `tokens` tokens.
void fp16_rows_values(std::span<const std::uint16_t> values, int first, int tokens, int heads,
                      int dim, int group, const float* probs, int total_tokens, float* out);

// An error naming `what` unless the input holds in_need floats and the output out_need.
Status check_sizes(const char* what, std::size_t in, std::size_t in_need, std::size_t out,
                   std::size_t out_need);

}  // namespace kvlab::detail
