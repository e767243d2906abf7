// The kernels' launch layer, as CUB's dispatch layer is one: the device facts a grid plan needs
// (SM count, resident blocks of a kernel, the shared memory a block may take), asked once and
// cached; the split of a token range over a grid that fills the device in one wave; the launch
// over codec blocks; and the argument checks of the attention entry points. Each kernel plans its
// grid and checks its call through these instead of a copy of its own.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "kvlab/engine/core/result.h"

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

// Blocks of `threads` for a grid-stride loop over n items: a thread an item, up to 2^20 blocks
// (the loop strides over the rest), and one block for nothing, so that a launch is never empty.
// Only for kernels that stride; a kernel that takes one item a thread sizes its own grid.
inline unsigned stride_grid(std::size_t n, unsigned threads) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((n + threads - 1) / threads, 1, std::size_t{1} << 20));
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

// The most dynamic shared memory a block may opt in to on the current device, asked once (48 KiB
// when the driver cannot say).
inline std::size_t smem_optin() {
  static std::size_t bytes = 0;
  if (bytes == 0) {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&n, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      n = 48 * 1024;
    }
    bytes = static_cast<std::size_t>(n);
  }
  return bytes;
}

// Units (each decoding one codec block: a warp, a group of threads) a CUDA block can hold, at
// most `max_units`, when it takes `fixed` bytes of shared memory (static and dynamic) and
// `per_unit` dynamic bytes a unit. 0 when not one fits.
inline int units_that_fit(std::size_t fixed, std::size_t per_unit, int max_units) {
  const std::size_t room = smem_optin() > fixed ? smem_optin() - fixed : 0;
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(max_units),
                                                room / std::max<std::size_t>(per_unit, 1)));
}

// Lets `kernel` take `smem` bytes of dynamic shared memory, asked once per size (`opted`: the
// most already allowed, a static of the caller's instantiation). Without asking, a block gets 48
// KiB of static and dynamic shared memory together, so a kernel holding static tables (a 16 KiB
// decode table) must ask below 48 KiB of dynamic memory too: the attribute is set for any size
// above the one allowed, not only above 48 KiB.
template <class K>
cudaError_t allow_dynamic_smem(K kernel, std::size_t smem, std::size_t& opted) {
  if (smem <= opted) return cudaSuccess;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem))) {
    return e;
  }
  opted = smem;
  return cudaSuccess;
}

// Launches `kernel` over a layer's codec blocks: a grid of (x, heads) CUDA blocks of `units`
// units of `unit_threads` threads, each unit taking one token block of its head at a time, x
// filling the device's resident blocks once for all heads. `opted` and `resident_cache` are
// statics of the caller's instantiation: the largest dynamic shared memory already allowed for
// the kernel (allow_dynamic_smem) and its resident blocks.
template <class K, class A>
cudaError_t launch_over_blocks(K kernel, const A& args, int units, int unit_threads,
                               std::size_t smem, int token_blocks, int heads, int& resident_cache,
                               std::size_t& opted, cudaStream_t stream) {
  if (units < 1) return cudaErrorInvalidConfiguration;  // head_dim too large for this device
  if (smem > opted) {
    if (cudaError_t e = allow_dynamic_smem(kernel, smem, opted)) return e;
    resident_cache = 0;  // the occupancy depends on it
  }
  const int threads = units * unit_threads;
  const int resident = resident_blocks(kernel, threads, resident_cache, smem);
  const int want = std::max(1, sm_count() * resident / std::max(heads, 1));
  const int x = std::max(1, std::min((token_blocks + units - 1) / units, want));
  kernel<<<dim3(x, heads), threads, smem, stream>>>(args);
  return cudaGetLastError();
}

// Argument checks of the attention entry points, before anything reaches the GPU: each error names
// the call (`what`) and what is wrong.
namespace check {

inline Status shape(const std::string& what, int tokens, int kv_heads, int head_dim) {
  if (tokens > 0 && kv_heads > 0 && head_dim > 0) return Ok{};
  return make_error(what + ": shape [" + std::to_string(tokens) + ", " + std::to_string(kv_heads) +
                    ", " + std::to_string(head_dim) + "] is empty");
}

inline Status query_heads(const std::string& what, int q_heads, int kv_heads) {
  if (q_heads > 0 && kv_heads > 0 && q_heads % kv_heads == 0) return Ok{};
  return make_error(what + ": " + std::to_string(q_heads) + " query heads are not a multiple of " +
                    std::to_string(kv_heads) + " KV heads");
}

// `built`: whether the kernels take groups of `group` query heads per KV head; `which` says which
// they take.
inline Status group(const std::string& what, int group, bool built, const std::string& which) {
  if (built) return Ok{};
  return make_error(what + ": GQA groups of " + std::to_string(group) +
                    " query heads per KV head are not built for the GPU (" + which + ")");
}

// A buffer of `given` elements (`of`: what they are) where the shape needs `need`.
inline Status count(const std::string& what, std::size_t given, std::size_t need,
                    const std::string& of) {
  if (given == need) return Ok{};
  return make_error(what + ": " + std::to_string(given) + " " + of + " given, the shape needs " +
                    std::to_string(need));
}

// The float input (queries or weights) and output of a call.
inline Status io(const std::string& what, std::size_t in, std::size_t in_need, std::size_t out,
                 std::size_t out_need) {
  if (in == in_need && out == out_need) return Ok{};
  return make_error(what + ": input holds " + std::to_string(in) + " floats (needs " +
                    std::to_string(in_need) + "), output " + std::to_string(out) + " (needs " +
                    std::to_string(out_need) + ")");
}

}  // namespace check

}  // namespace kvlab::cuda
