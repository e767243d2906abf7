// The CUDA RowAttention (engine's model/row_attention.h, issue 47 part 1): a method store's rows,
// as it stores them (fp16, FP8 E4M3 with a scale per KV head, llama.cpp's q8_0 and q4_0, NVFP4),
// kept in device memory a layer at a time and attended over in place at every decode step by the
// fused decode kernel (src/decode_attention.cuh). No CUDA headers leak from here.
#pragma once

#include <memory>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/row_attention.h"

namespace kvlab::cuda {

// A RowAttention on the current GPU for `shape`: head_dim 64, 128 or 256; heads a positive
// multiple of kv_heads, at most 8 query heads per KV head; layers > 0; max_tokens >= 0 (each
// layer's storage is reserved for max_tokens tokens when its parameters come, and doubles past
// that; 0: it grows from its first rows). A shape it cannot serve is an Error naming the problem
// (checked first, so also without a GPU); without a usable GPU, require_gpu()'s Error.
//
// Rows stay on the device, appended with a copy per call; attend() uploads q, launches the
// decode kernel once, downloads out and synchronises, on a stream of the instance's own. Formats
// other than fp16 run groups of 1, 2, 4 or 8 query heads per KV head, so groups of 3, 5, 6 and 7
// run as the next of those with zero query heads added, whose outputs are dropped. bytes() counts
// the device memory allocated for rows, block scales and FP8 head scales (capacity, not only the
// tokens held); the q, out and split-merge workspace is not counted. Single-threaded use.
Result<std::unique_ptr<RowAttention>> make_row_attention(const RowAttentionShape& shape);

}  // namespace kvlab::cuda
