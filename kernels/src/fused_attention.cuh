// Fused decode + attention on the GPU for one query per head (a decode step), straight from the
// docs/FORMAT.md streams of a GpuLayer, Huffman or bit-packed. Each thread decodes one key or
// value vector from a 64-bit window of its stream (two aligned 32-bit loads and a funnel shift),
// up to two Huffman symbols per lookup in a 4096-entry pair table in shared memory, and folds x =
// min + code * step into the result at once: keys into q.k for every query head of the GQA group
// (the dequantization folded into the query per key block), values through a small shared-memory
// tile of codes that the block multiplies by the softmax weights. Decoded values never reach global
// memory. A vector that hits no code or does not use exactly its bit count flags its block; the
// host reports the first flagged block. rANS layers go to rans_attention.cuh's kernels.
#pragma once

#include <cuda_runtime.h>

#include "gpu_layer.cuh"

namespace kvlab::cuda {

// Query heads per KV head the kernels are built for.
bool supported_group(int group);
// Largest head_dim the kernels take.
constexpr int kMaxFusedHeadDim = 256;

// d_q [q_heads][dim] -> d_logits [q_heads][tokens] (q.k / sqrt(dim)); d_err receives 0x7fffffff
// or 1 + the first corrupt block. No synchronisation.
cudaError_t launch_fused_logits(const GpuLayer::Impl& layer, const float* d_q, int group,
                                float* d_logits, int* d_err, cudaStream_t stream);
// d_probs [q_heads][tokens] -> d_out [q_heads][dim] (zeroed by the launcher, then accumulated).
cudaError_t launch_fused_values(const GpuLayer::Impl& layer, const float* d_probs, int group,
                                float* d_out, int* d_err, cudaStream_t stream);

}  // namespace kvlab::cuda
