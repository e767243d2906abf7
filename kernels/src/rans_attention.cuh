// Decode attention straight from rANS streams (docs/FORMAT.md, "rANS streams") of a GpuLayer,
// pairs or single codes: each warp decodes one codec block at a time, one rANS state per lane
// (engine/include/kvlab/engine/codec/rans_warp.h, the code the CPU test runs lane for lane),
// into a 32-token tile in shared memory, and folds the tile into the logits or the values at
// once. The slot table (4096 entries) sits in shared memory; decoded codes never reach global
// memory. A block that does not decode cleanly flags itself; the host names the first.
#pragma once

#include <cuda_runtime.h>

#include "gpu_layer.cuh"

namespace kvlab::cuda {

// Tuning: not measured yet (no GPU since these kernels were written). Up to 8 warps a CUDA block,
// each decoding one codec block at a time, so that 8 warps share one copy of the 16 KiB slot
// table; fewer where a warp's tile and query (or weights) would not fit the shared memory a
// block may take. At head_dim 128 and 4 query heads a warp takes 6.3 KiB, a CUDA block 66 KiB:
// three fit an H100/H200 SM. The first lease should set these from Nsight Compute.
struct RansAttentionPolicy {
  static constexpr int kMaxWarps = 8;
};

// As launch_fused_logits / launch_fused_values (fused_attention.cuh), for a rANS layer: d_err
// and, for the values, d_out are initialised by the caller.
cudaError_t launch_rans_logits(const GpuLayer::Impl& layer, const float* d_q, int group,
                               float* d_logits, int* d_err, cudaStream_t stream);
cudaError_t launch_rans_values(const GpuLayer::Impl& layer, const float* d_probs, int group,
                               float* d_out, int* d_err, cudaStream_t stream);

}  // namespace kvlab::cuda
