// The kernels' launch layer, as CUB's dispatch layer is one: the device facts a grid plan needs
// (SM count, resident blocks of a kernel), asked once and cached, and the split of a token range
// over a grid that fills the device in one wave. Each attention kernel plans its grid through
// these instead of a copy of its own.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace kvlab::cuda {

// n rounded up to a multiple of 16 bytes (shared-memory regions that 16-byte loads read).
__host__ __device__ constexpr std::size_t align16(std::size_t n) {
  return (n + 15) & ~static_cast<std::size_t>(15);
}

// Streaming multiprocessors of the current device, asked once per device (the benchmark launches
// thousands of times). 108 (an A100) when the driver cannot say.
inline int sm_count() {
  static int sms[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 108;
  }
  int& n = sms[dev >= 0 && dev < 64 ? dev : 0];
  if (n == 0 && cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 108;
  }
  return n;
}

// Blocks of `kernel` resident on one SM at `threads` threads and `smem` bytes of dynamic shared
// memory, asked once per kernel (`cache` is a static of the caller's instantiation). At least 1.
template <class K>
int resident_blocks(K kernel, int threads, int& cache, std::size_t smem = 0) {
  if (cache == 0) {
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 1;
    }
    cache = std::max(1, n);
  }
  return cache;
}

// A token range of `tiles` tiles split into contiguous chunks over `slices` independent grid
// rows (heads x sequences), so that slices x splits fills the device's resident blocks once:
// each chunk holds tiles_per_split tiles (at least `min_tiles`), and `splits` chunks cover the
// range.
struct SplitPlan {
  int splits = 1;
  int tiles_per_split = 1;
};
inline SplitPlan plan_splits(int tiles, int slices, int resident_per_sm, int min_tiles = 1) {
  SplitPlan p;
  tiles = std::max(tiles, 1);
  const int per_slice = std::max(1, sm_count() * resident_per_sm / std::max(slices, 1));
  p.tiles_per_split = std::max(min_tiles, (tiles + per_slice - 1) / per_slice);
  p.splits = (tiles + p.tiles_per_split - 1) / p.tiles_per_split;
  return p;
}

}  // namespace kvlab::cuda
