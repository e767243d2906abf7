// llama.cpp's quantized KV-cache types as a kvlab Quantizer (ggml_block_quantizer.cpp).
// Private to the engine; method.cpp wires it into the method registry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::detail {

// A K or V tensor [tokens, heads, dim] stored as llama.cpp stores it with --cache-type-k/-v
// `type` (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 or IQ4_NL): each token's row of heads × dim values (ggml's
// n_embd_k_gqa / n_embd_v_gqa; quantized V needs flash attention, so V is not transposed) cut
// into 32-value blocks, bytes equal to ggml's set_rows (ggml_quantize, GgmlQuantizeRule::KvCache).
// dim must be a multiple of 32 (quantize() says so otherwise; llama.cpp asserts it too).
// `hadamard`: llama.cpp's attn_rot (rotation.h) where llama.cpp turns it on (dim % 64 == 0):
// each head is rotated before quantizing and rotated back after dequantizing, so dequantize()
// returns the tensor in its original frame, as llama.cpp's attention output is.
// Another type gives a quantizer whose quantize() returns an error naming it.
std::unique_ptr<Quantizer> make_ggml_block_quantizer(GgmlType type, bool hadamard);

// ggml_quantize's reference path (ggml_quantize.cpp): llama.cpp's quantize_row_*_ref one value
// at a time. ggml_quantize computes the same bytes with AVX-512 where the build has it (a block
// holding NaN or ±inf, and IQ4_NL's model-file rule, through this path); the tests compare both.
bool ggml_quantize_scalar(GgmlType type, const float* src, std::int64_t n, std::uint8_t* dst,
                          GgmlQuantizeRule rule = GgmlQuantizeRule::KvCache);

// llama_attn_rotate(head, role, false) on each of `rows` consecutive head vectors of `dim` values
// at `x`: the same butterflies on every value, so the same floats, AVX-512 for rotation sizes up
// to 256 (a head holding NaN or ±inf, and larger sizes, through llama_attn_rotate itself).
void llama_attn_rotate_rows(float* x, std::size_t rows, int dim, TensorRole role);

}  // namespace kvlab::detail
