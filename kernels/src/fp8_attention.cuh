// Fused attention over an FP8 cache (vLLM's kv_cache_dtype=fp8, one scale per KV head), the
// second fast baseline: a bandwidth-bound kernel that reads each code once with 16-byte
// (logits) or 4-byte-per-lane (values) coalesced loads, converts in registers and never writes
// dequantized values.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kvlab/engine/fp8.h"

namespace kvlab::cuda {

struct Fp8Device {
  int tokens = 0, kv_heads = 0, head_dim = 0;
  Fp8Format format = Fp8Format::E4M3;
  const std::uint8_t* codes = nullptr;  // [tokens][kv_heads][head_dim]
  const float* scales = nullptr;        // [kv_heads]
};

// head_dim must be 16, 32, 64, 128 or 256 and q_heads / kv_heads 1, 2, 4 or 8
// (fp8_shape_supported); otherwise cudaErrorInvalidValue. Asynchronous.
bool fp8_shape_supported(int head_dim, int group);
cudaError_t launch_fp8_logits(const Fp8Device& kv, const float* d_q, int q_heads, float* d_logits,
                              cudaStream_t stream);
// d_out is zeroed here, then accumulated.
cudaError_t launch_fp8_values(const Fp8Device& kv, const float* d_probs, int q_heads, float* d_out,
                              cudaStream_t stream);

}  // namespace kvlab::cuda
