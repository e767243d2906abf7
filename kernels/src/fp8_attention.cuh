// Fused attention over an FP8 cache (vLLM's kv_cache_dtype=fp8, one scale per KV head), the
// second fast baseline. Both ops are bound by memory bandwidth: every code is read once with
// coalesced 16-byte loads, double-buffered in registers. The codes are widened to fp16 in registers
// (exact for E4M3 and E5M2) and multiplied on the tensor cores (mma.m16n8k16, fp32 accumulation)
// against the queries or the softmax weights. Those are split into fp16 hi + lo parts after a
// power-of-two rescale, so the products keep about 22 bits. Dequantized values never reach
// global memory. value = fp8_to_float(code) * scale[head], as engine/src/fp8.cpp. The tuning:
// Fp8AttentionPolicy.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kvlab/engine/quant/fp8.h"

namespace kvlab::cuda {

// Tuning, apart from the algorithm. Measured on an H100 (kvlab bench gpu shape: 32K tokens x 8 KV
// heads x 128 channels, group 4, inputs cycled past the L2): a plain 16-byte streaming read of
// the same 33.5 MB takes 14.2 us there (79% of the device-to-device copy rate, launch and ramp
// included), q.K takes 15.8 us and softmax.V 19.1 us (zeroing of the output included). Double
// buffering with four 16-byte loads per lane per buffer beat one buffer of eight (16.5 / 22.7 us),
// cp.async rings in shared memory (19.5 / 29.2 us), several waves of blocks and one block per SM.
struct Fp8AttentionPolicy {
  static constexpr int kWarps = 8;        // warps per block
  static constexpr int kBlocksPerSm = 2;  // launch bound: at most 128 registers per thread
  static constexpr int kLogitLoads = 4;   // 16-byte loads per lane per buffer (logits)
  static constexpr int kValueTiles = 1;   // 16-token tiles per warp per buffer (values)
  static constexpr int kMinTilesPerBlock =
      8;  // below this a block's setup costs more than it saves
};

constexpr int kMaxFp8HeadDim = 256;
constexpr int kMaxFp8Group = 8;

// One FP8 tensor (keys or values) on the device; not owned.
struct Fp8Device {
  int tokens = 0, kv_heads = 0, head_dim = 0;
  Fp8Format format = Fp8Format::E4M3;
  const std::uint8_t* codes = nullptr;  // [tokens][kv_heads][head_dim], 16-byte aligned
  const float* scales = nullptr;        // [kv_heads]
};

// head_dim a multiple of 16 from 16 to kMaxFp8HeadDim, and 1 to kMaxFp8Group query heads per KV
// head.
bool fp8_shape_supported(int head_dim, int group);

// d_q [q_heads][head_dim] -> d_logits [q_heads][tokens] = scale[h] * q.code / sqrt(head_dim); every
// logit is written. An unsupported shape, q_heads not a multiple of kv_heads, or codes not 16-byte
// aligned: cudaErrorInvalidValue, nothing launched. Asynchronous on `stream`: no synchronisation,
// no allocation.
cudaError_t launch_fp8_logits(const Fp8Device& kv, const float* d_q, int q_heads, float* d_logits,
                              cudaStream_t stream);
// d_probs [q_heads][tokens] -> d_out [q_heads][head_dim] = sum_t probs * scale[h] * code. d_out is
// zeroed on `stream` (cudaMemsetAsync), then each block adds its partial sums with atomics, so the
// last bits may differ from run to run. Same errors and asynchrony as launch_fp8_logits.
cudaError_t launch_fp8_values(const Fp8Device& kv, const float* d_probs, int q_heads, float* d_out,
                              cudaStream_t stream);

}  // namespace kvlab::cuda
