// Fused decode + attention on the GPU for one query per head (a decode step), straight from the
// docs/FORMAT.md streams of a GpuLayer, Huffman or bit-packed. A CUDA block holds up to
// FusedAttentionPolicy::kMaxGroups groups of kVectors threads; a group takes one codec block at a
// time, a thread one key or value vector of it. A Huffman group first copies its block's stream
// into shared memory with 16-byte loads (word_stream::stage_window), then each thread decodes its
// vector from there, up to two symbols per lookup in a 4096-entry pair table that the groups
// share, and folds x = min + code * step into the result at once: keys into q.k for every query
// head of the GQA group (the dequantization folded into the query per key block), values through
// a small shared-memory tile of codes that the group multiplies by the softmax weights. Decoded
// values never reach global memory. A vector that hits no code or does not use exactly its bit
// count flags its block; the host reports the first flagged block. rANS layers go to
// rans_attention.cuh's kernels. The stream reading is word_stream.h's, which the CPU tests run.
#pragma once

#include <cuda_runtime.h>

#include "gpu_layer.cuh"

namespace kvlab::cuda {

// Tuning. Measured (H200, 32K tokens, the version before groups and staging: 64 threads and one
// codec block a CUDA block, the stream read from global memory): q.K 83.3 us, softmax.V 135.2 us
// (docs/PERFORMANCE.md's GPU table); Nsight Compute on q.K found 5.9% of the DRAM bandwidth, 34%
// theoretical occupancy bound by the 16 KiB pair table each 64-thread block held, and half the
// stalls on global loads of the streams (L1TEX scoreboard). Hence up to four codec blocks a CUDA
// block sharing one table, and each block's stream staged in shared memory first: 4 KiB a group,
// a 64 x 128 block at up to 4 bits a code (KVComp's streams take about 2.8); a longer block
// reads the rest from global memory. Not yet measured: the first GPU session should.
struct FusedAttentionPolicy {
  static constexpr int kVectors = 64;       // threads of a group: vectors decoded at once
  static constexpr int kMaxGroups = 4;      // codec blocks a CUDA block decodes side by side
  static constexpr int kStageWords = 1024;  // stream words a group stages
};

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
