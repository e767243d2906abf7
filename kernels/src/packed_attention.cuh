// Tensor-core fused decode attention over bit-packed 4- and 8-bit GpuLayer streams whose vectors
// are whole 16-byte words (docs/FORMAT.md "Bitpack"), the fast path of launch_fused_logits and
// launch_fused_values (fused_attention.cuh). Warps stream the codes with coalesced 8- or 16-byte
// double-buffered loads, widen them to fp16 with two or three integer instructions per pair of
// codes (exact: every code is an fp16), and multiply on the tensor cores (mma.m16n8k16, fp32
// accumulation) against the queries or softmax weights, which are split into fp16 hi + lo parts
// after a power-of-two rescale so the products keep about 22 bits. Design, tiling and timings:
// packed_attention.cu.
#pragma once

#include <cuda_runtime.h>

#include "gpu_layer.cuh"

namespace kvlab::cuda {

// Tuning: eight warps a block, each walking a contiguous range of 16-token tiles, as
// fp8_attention.cu's measured policy (Fp8AttentionPolicy); not measured apart for these kernels.
struct PackedAttentionPolicy {
  static constexpr int kWarps = 8;
};

// True when the tensor-core kernels take this tensor of a layer at this GQA group: bit-packed,
// width 4 or 8, dim * width one of 256, 512 or 1024 bits (4-bit: head_dim 64, 128, 256; 8-bit:
// 32, 64, 128), group 1, 2, 4 or 8, and a codec block of whole 16-token tiles (the logits also
// need whole steps of 16 * 8 / (dim * width / 128) tokens per block: block_size 64 always works).
bool packed_logits_supported(const GpuCodes& keys, int group);
bool packed_values_supported(const GpuCodes& values, int group);

// The same contract as launch_fused_logits / launch_fused_values without the error flag (a
// bit-packed stream has nothing to check): d_q [q_heads][dim] -> d_logits [q_heads][tokens];
// d_probs [q_heads][tokens] -> d_out [q_heads][dim], which the caller has zeroed on `stream`.
// No synchronisation, no allocation. Only for shapes the *_supported functions accept.
cudaError_t launch_packed_logits(const GpuLayer::Impl& layer, const float* d_q, int group,
                                 float* d_logits, cudaStream_t stream);
cudaError_t launch_packed_values(const GpuLayer::Impl& layer, const float* d_probs, int group,
                                 float* d_out, cudaStream_t stream);

}  // namespace kvlab::cuda
