// Fused rANS decode-attention kernels (see rans_attention.cuh) and their launchers. The warp's
// work (decoding a block, the dot products, the weighted sums) is rans_warp.h's; this file gives
// it the CUDA warp, the shared memory and the grid.
#include <algorithm>
#include <cmath>

#include "kvlab/engine/codec/block_layout.h"
#include "kvlab/engine/codec/rans_warp.h"
#include "launch_plan.cuh"
#include "rans_attention.cuh"

namespace kvlab::cuda {

namespace {

constexpr int kMaxWarps = RansAttentionPolicy::kMaxWarps;
constexpr std::size_t kSlotBytes = 4096 * sizeof(std::uint32_t);

static_assert(rans_warp::kMaxHeadDim == 256, "the launchers check head_dim against it");

// rans_warp.h's Warp on the hardware: every call is made by the whole warp.
struct CudaWarp {
  __device__ __forceinline__ int lane() const { return static_cast<int>(threadIdx.x & 31u); }
  __device__ __forceinline__ std::uint32_t ballot(bool p) const {
    return __ballot_sync(0xffffffffu, p);
  }
  __device__ __forceinline__ std::uint32_t shfl(std::uint32_t v, int src) const {
    return __shfl_sync(0xffffffffu, v, src);
  }
  __device__ __forceinline__ float shfl_xor(float v, int mask) const {
    return __shfl_xor_sync(0xffffffffu, v, mask);
  }
  __device__ __forceinline__ bool all(bool p) const { return __all_sync(0xffffffffu, p) != 0; }
  __device__ __forceinline__ void sync() const { __syncwarp(); }
  __device__ __forceinline__ std::uint32_t load(const std::uint32_t* p) const { return __ldg(p); }
};

struct Stream {
  const std::uint32_t* payload;
  std::uint64_t payload_words, payload_bytes;
  const std::uint32_t* block_offsets;
  const std::uint32_t* slots;  // global; staged into shared memory
  std::uint32_t escape_start;
  bool pairs;
  int tokens, heads, dim, block_size;
};

Stream stream_of(const GpuCodes& c, const GpuBook& book) {
  Stream s;
  s.payload = c.payload.get();
  s.payload_words = c.payload.size();
  s.payload_bytes = c.payload_bytes;
  s.block_offsets = c.block_offsets.get();
  s.slots = book.rans_slots.get();
  s.escape_start = book.rans_escape;
  s.pairs = book.rans_pairs;
  s.tokens = c.tokens;
  s.heads = c.heads;
  s.dim = c.dim;
  s.block_size = c.block_size;
  return s;
}

// Block (tb, h) of the stream for rans_warp::decode_block.
__device__ __forceinline__ rans_warp::Block block_of(const Stream& s, int tb, int h,
                                                     const std::uint32_t* slots,
                                                     std::uint8_t* tile) {
  const int b = tb * s.heads + h;
  const int blocks = ((s.tokens + s.block_size - 1) / s.block_size) * s.heads;
  rans_warp::Block a;
  a.payload = s.payload;
  a.payload_words = s.payload_words;
  a.begin = s.block_offsets[b];
  a.end = b + 1 < blocks ? s.block_offsets[b + 1] : s.payload_bytes;
  a.tokens = block_layout::block_tokens(tb, s.tokens, s.block_size);
  a.dim = s.dim;
  a.pairs = s.pairs;
  a.slots = slots;
  a.escape_start = s.escape_start;
  a.tile = tile;
  return a;
}

__device__ __forceinline__ void stage_slots(const Stream& s, std::uint32_t* slots) {
  for (int i = threadIdx.x; i < 4096; i += blockDim.x) slots[i] = __ldg(s.slots + i);
  __syncthreads();
}

// Dynamic shared memory of one warp: its code tile, then (logits) the folded query or (values)
// the chunk's weights, 16-byte aligned.
__host__ __device__ constexpr std::size_t tile_bytes(int dim) {
  return align16(static_cast<std::size_t>(rans_warp::kChunk) * rans_warp::tile_row(dim));
}
__host__ __device__ constexpr std::size_t logits_warp_bytes(int dim, int G) {
  return tile_bytes(dim) + align16(sizeof(float) * ((dim + 3) & ~3) * G);
}
__host__ __device__ constexpr std::size_t values_warp_bytes(int dim, int G) {
  return tile_bytes(dim) + align16(sizeof(float) * rans_warp::kChunk * G);
}

struct LogitsArgs {
  Stream s;
  const float* steps;  // [tb][head][dim]
  const float* mins;
  const float* q;  // [q_heads][dim]
  float scale;
  float* logits;  // [q_heads][tokens]
  int* err;
};

// Grid (x, kv_heads); warp w of CUDA block x takes token blocks x * warps + w, stepping by the
// grid's warps.
template <int G>
__global__ void __launch_bounds__(32 * kMaxWarps) rans_logits_kernel(LogitsArgs a) {
  __shared__ std::uint32_t slots[4096];
  extern __shared__ __align__(16) std::uint8_t smem[];
  const Stream& s = a.s;
  stage_slots(s, slots);
  const int warps = static_cast<int>(blockDim.x >> 5), warp = static_cast<int>(threadIdx.x >> 5);
  std::uint8_t* tile = smem + warp * logits_warp_bytes(s.dim, G);
  float* qf = reinterpret_cast<float*>(tile + tile_bytes(s.dim));
  const int h = blockIdx.y;
  const int tbs = (s.tokens + s.block_size - 1) / s.block_size;
  CudaWarp w;
  for (int tb = blockIdx.x * warps + warp; tb < tbs; tb += gridDim.x * warps) {
    rans_warp::Logits<G> lg;
    lg.tile = tile;
    lg.row = rans_warp::tile_row(s.dim);
    lg.channels = (s.dim + 3) & ~3;
    lg.logits = a.logits + static_cast<std::size_t>(h) * G * s.tokens;
    lg.tokens = static_cast<std::uint64_t>(s.tokens);
    lg.first = static_cast<std::uint64_t>(tb) * s.block_size;
    const std::size_t unit = (static_cast<std::size_t>(tb) * s.heads + h) * s.dim;
    lg.prepare(w, qf, a.q + static_cast<std::size_t>(h) * G * s.dim, a.steps + unit, a.mins + unit,
               s.dim, a.scale);
    if (!rans_warp::decode_block(w, block_of(s, tb, h, slots, tile), lg) && w.lane() == 0) {
      atomicMin(a.err, tb * s.heads + h + 1);
    }
  }
}

struct ValuesArgs {
  Stream s;
  const float* steps;  // [token][head]
  const float* mins;
  const float* probs;  // [q_heads][tokens]
  float* out;          // [q_heads][dim], accumulated
  int* err;
};

template <int G>
__global__ void __launch_bounds__(32 * kMaxWarps) rans_values_kernel(ValuesArgs a) {
  __shared__ std::uint32_t slots[4096];
  extern __shared__ __align__(16) std::uint8_t smem[];
  const Stream& s = a.s;
  const int warps = static_cast<int>(blockDim.x >> 5), warp = static_cast<int>(threadIdx.x >> 5);
  // The CUDA block's sums [G][dim] first, then each warp's tile and weights.
  float* sums = reinterpret_cast<float*>(smem);
  for (int i = threadIdx.x; i < G * s.dim; i += blockDim.x) sums[i] = 0.f;
  stage_slots(s, slots);  // its barrier also orders the zeroing
  std::uint8_t* tile =
      smem + align16(sizeof(float) * G * s.dim) + warp * values_warp_bytes(s.dim, G);
  const int h = blockIdx.y;
  const int tbs = (s.tokens + s.block_size - 1) / s.block_size;
  CudaWarp w;
  rans_warp::Values<G> val;
  val.steps = a.steps;
  val.mins = a.mins;
  val.probs = a.probs + static_cast<std::size_t>(h) * G * s.tokens;
  val.weights = reinterpret_cast<float*>(tile + tile_bytes(s.dim));
  val.tile = tile;
  val.row = rans_warp::tile_row(s.dim);
  val.dim = s.dim;
  val.heads = s.heads;
  val.head = h;
  val.tokens = static_cast<std::uint64_t>(s.tokens);
  for (int tb = blockIdx.x * warps + warp; tb < tbs; tb += gridDim.x * warps) {
    val.first = static_cast<std::uint64_t>(tb) * s.block_size;
    if (!rans_warp::decode_block(w, block_of(s, tb, h, slots, tile), val) && w.lane() == 0) {
      atomicMin(a.err, tb * s.heads + h + 1);
    }
  }
  val.flush(w, [&](int g, int c, float v) { atomicAdd(&sums[g * s.dim + c], v); });
  __syncthreads();
  float* out = a.out + static_cast<std::size_t>(h) * G * s.dim;
  for (int i = threadIdx.x; i < G * s.dim; i += blockDim.x) atomicAdd(&out[i], sums[i]);
}

// Warps per CUDA block that fit the shared memory (the slot table is static), at most kMaxWarps.
int warps_for(std::size_t fixed, std::size_t per_warp) {
  return units_that_fit(kSlotBytes + fixed, per_warp, kMaxWarps);
}

template <int G>
cudaError_t logits_for(const LogitsArgs& a, int token_blocks, cudaStream_t stream) {
  static int resident = 0;
  static std::size_t opted = 0;
  const std::size_t per_warp = logits_warp_bytes(a.s.dim, G);
  const int warps = warps_for(0, per_warp);
  return launch_over_blocks(rans_logits_kernel<G>, a, warps, 32, per_warp * std::max(warps, 1),
                            token_blocks, a.s.heads, resident, opted, stream);
}

template <int G>
cudaError_t values_for(const ValuesArgs& a, int token_blocks, cudaStream_t stream) {
  static int resident = 0;
  static std::size_t opted = 0;
  const std::size_t fixed = align16(sizeof(float) * G * a.s.dim);
  const std::size_t per_warp = values_warp_bytes(a.s.dim, G);
  const int warps = warps_for(fixed, per_warp);
  return launch_over_blocks(rans_values_kernel<G>, a, warps, 32,
                            fixed + per_warp * std::max(warps, 1), token_blocks, a.s.heads,
                            resident, opted, stream);
}

template <class F>
cudaError_t by_group(int group, F&& f) {
  switch (group) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t launch_rans_logits(const GpuLayer::Impl& g, const float* d_q, int group,
                               float* d_logits, int* d_err, cudaStream_t stream) {
  if (g.head_dim > rans_warp::kMaxHeadDim) return cudaErrorInvalidValue;
  LogitsArgs a;
  a.s = stream_of(g.keys, g.key_book);
  a.steps = g.key_steps.get();
  a.mins = g.key_mins.get();
  a.q = d_q;
  a.scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  a.logits = d_logits;
  a.err = d_err;
  const int tbs = g.keys.token_blocks();
  return by_group(group, [&](auto G) { return logits_for<decltype(G)::value>(a, tbs, stream); });
}

cudaError_t launch_rans_values(const GpuLayer::Impl& g, const float* d_probs, int group,
                               float* d_out, int* d_err, cudaStream_t stream) {
  if (g.head_dim > rans_warp::kMaxHeadDim) return cudaErrorInvalidValue;
  ValuesArgs a;
  a.s = stream_of(g.values, g.value_book);
  a.steps = g.value_steps.get();
  a.mins = g.value_mins.get();
  a.probs = d_probs;
  a.out = d_out;
  a.err = d_err;
  const int tbs = g.values.token_blocks();
  return by_group(group, [&](auto G) { return values_for<decltype(G)::value>(a, tbs, stream); });
}

}  // namespace kvlab::cuda
