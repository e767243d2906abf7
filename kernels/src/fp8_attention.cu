// FP8 fused attention (see fp8_attention.cuh) and its host entry points (gpu_baselines.h).
//
// Why the tensor cores: at GQA group 4 a CUDA-core kernel spends about 5 instructions per code
// byte (convert, widen, 4 FMAs). The memory system delivers about 15 bytes per clock per SM on an
// H100, so that kernel would be bound by instruction issue rather than by memory. With
// mma.m16n8k16 a warp spends under one instruction per code: the fp8 -> fp16 conversion of a code
// pair is one cvt (E4M3, sm_89+) or one byte permute (E5M2 is the upper byte of an fp16), and one
// mma takes 256 codes.
//
// Exactness: every E4M3 and E5M2 value is an fp16, and fp16 x fp16 products are exact in the fp32
// accumulators. The fp32 queries or weights x are split as x * 2^s = hi + lo (two fp16s). s is the
// power of two that puts the largest |x| near 2^15: per query head for the logits, and for the
// values the largest weight a warp has seen so far (a running rescale as in FlashAttention, by
// exact powers of two, so no pass over the weights comes first). Both parts go through the tensor
// cores; the error is about 2^-22 of the largest |x|. Accumulation is in fp32.
//
// Tiling (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"): lane = 4 g + t.
//  Logits, per KV head: A = codes (16 tokens x 16 channels), B = queries (16 channels x 8 heads of
//   the group, zero past the group), C = 16 tokens x 8 heads. Lane (g, t) loads 16 channels
//   (64 s + 16 t ...) of tokens g and g + 8. A permutation of the k index (channels), the same in A
//   and B, makes those loads the A fragments with no shuffles.
//  Values, per KV head and 128-channel round: A = weights (rows 0-7 the hi parts of the group's
//   heads, rows 8-15 the lo parts), B = codes (16 tokens x 8 channel groups), so hi and lo cost one
//   mma. Lane (g, t) loads channels 16 g ... of tokens 4 t ... 4 t + 3. Two byte permutes pair
//   the tokens into B fragments. Per-block partial sums meet in shared memory, then one atomic
//   per output.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "cuda_check.cuh"
#include "fp8_attention.cuh"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"
#include "launch_plan.cuh"

namespace kvlab::cuda {

namespace {

using P = Fp8AttentionPolicy;
constexpr int kWarps = P::kWarps;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlocksPerSm = P::kBlocksPerSm;
constexpr int kLogitLoads = P::kLogitLoads;
constexpr int kValueTiles = P::kValueTiles;
constexpr int kMinTilesPerBlock = P::kMinTilesPerBlock;
constexpr int kTile = 16;           // tokens per mma tile
constexpr int kMaxShift = 100;      // |s| bound of the 2^s rescale (keeps 2^s a normal float)
constexpr int kNoShift = 1 << 30;   // values: no nonzero weight seen yet
constexpr int kSumStride = 4 * 33;  // values: [head][t * 33 + j], conflict-free shared adds

// 2^e as a float, |e| <= 126.
__device__ __forceinline__ float pow2(int e) {
  return __int_as_float((127 + e) << 23);
}

// The s that puts max_abs * 2^s in [2^14, 2^15), where fp16 keeps 11 bits and cannot overflow.
// Zero, infinite or NaN maxima leave the data unscaled.
__device__ __forceinline__ int fp16_shift(float max_abs) {
  if (!(max_abs > 0.f) || !isfinite(max_abs)) return 0;
  int e = 0;
  frexpf(max_abs, &e);  // max_abs = m * 2^e, m in [0.5, 1)
  return min(max(15 - e, -kMaxShift), kMaxShift);
}

__device__ __forceinline__ std::uint32_t half2_bits(__half2 h) {
  std::uint32_t u;
  memcpy(&u, &h, sizeof(u));
  return u;
}

// (x0, x1) = hi + lo, each an fp16x2 (x0 in the low half).
__device__ __forceinline__ void split_f16x2(float x0, float x1, std::uint32_t& hi,
                                            std::uint32_t& lo) {
  const __half2 h = __floats2half2_rn(x0, x1);
  const float2 f = __half22float2(h);
  hi = half2_bits(h);
  lo = half2_bits(__floats2half2_rn(x0 - f.x, x1 - f.y));
}

// Two FP8 codes, bytes 2 kHalf and 2 kHalf + 1 of w, as an fp16x2 (the lower byte in the low
// half). Exact, NaN included.
template <Fp8Format F, int kHalf>
__device__ __forceinline__ std::uint32_t fp8x2_to_f16x2(std::uint32_t w) {
  if constexpr (F == Fp8Format::E5M2) {
    return __byte_perm(w, 0u, kHalf ? 0x3424u : 0x1404u);  // [0, b, 0, b+1]
  } else {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * kHalf)), __NV_E4M3);
    return static_cast<std::uint32_t>(h.x) | (static_cast<std::uint32_t>(h.y) << 16);
  }
}

// c += a . b for one m16n8k16 tile, fp16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4],
                                          std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

__device__ __forceinline__ float warp_max(float m) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  return m;
}

struct Fp8Params {
  const std::uint8_t* codes;
  const float* scales;
  const float* in;  // queries or weights
  float* out;       // logits or attention output
  int tokens, heads, dim, group, tiles_per_block;
};

// --- Logits ---------------------------------------------------------------------------------

template <int kChunks>
struct LogitShape {
  static constexpr int kSteps = kLogitLoads / (2 * kChunks) > 0 ? kLogitLoads / (2 * kChunks) : 1;
};

// Per-thread state of the logits kernel: lane (g, t) reads channels 64 s + 16 t ... of tokens g
// and g + 8 of each tile, and writes query heads 2t and 2t + 1.
template <Fp8Format F, int kChunks>
struct LogitLane {
  using Codes = uint4[LogitShape<kChunks>::kSteps][2][kChunks];
  const std::uint8_t* kh;
  std::size_t row;
  int tokens, dim, group, last, g, t;

  __device__ __forceinline__ void load(Codes& x, int tile0) const {
#pragma unroll
    for (int u = 0; u < LogitShape<kChunks>::kSteps; ++u) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int tok = (tile0 + u) * kTile + g + 8 * r;
        const bool live = tile0 + u < last && tok < tokens;
        const std::uint8_t* src = kh + static_cast<std::size_t>(live ? tok : 0) * row;
#pragma unroll
        for (int s = 0; s < kChunks; ++s) {
          x[u][r][s] = live && 64 * s + 16 * t < dim
                           ? __ldcs(reinterpret_cast<const uint4*>(src + 64 * s))
                           : make_uint4(0u, 0u, 0u, 0u);
        }
      }
    }
  }
};

// Grid (token ranges, KV heads). kChunks = 64-channel chunks, head_dim <= 64 kChunks.
template <Fp8Format F, int kChunks>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) fp8_logits_kernel(Fp8Params p) {
  constexpr int kSteps = LogitShape<kChunks>::kSteps;
  using Lane = LogitLane<F, kChunks>;
  __shared__ __align__(16) float s_q[kMaxFp8Group][64 * kChunks];
  __shared__ int s_shift[kMaxFp8Group];
  const int h = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int D = p.dim, G = p.group;
  const int tiles = (p.tokens + kTile - 1) / kTile;
  const int first = blockIdx.x * p.tiles_per_block;
  const Lane L{p.codes + static_cast<std::size_t>(h) * D + 16 * t,
               static_cast<std::size_t>(p.heads) * D,
               p.tokens,
               D,
               G,
               min(tiles, first + p.tiles_per_block),
               g,
               t};
  constexpr int kStride = kWarps * kSteps;
  int tile0 = first + warp * kSteps;
  // The first step's loads go out before the query set-up, which hides behind their latency.
  typename Lane::Codes xa, xb;
  L.load(xa, tile0);

  const float* q = p.in + static_cast<std::size_t>(h) * G * D;
  for (int i = threadIdx.x; i < G * D; i += kThreads) s_q[i / D][i % D] = q[i];
  __syncthreads();
  if (warp < G) {
    float m = 0.f;
    for (int c = lane; c < D; c += 32) m = fmaxf(m, fabsf(s_q[warp][c]));
    m = warp_max(m);
    if (lane == 0) s_shift[warp] = fp16_shift(m);
  }
  __syncthreads();

  // B fragments, kept in registers: query head g, channels 64 s + 16 t + 4 j + {0, 1} (b0) and
  // {2, 3} (b1), hi and lo parts.
  std::uint32_t bh[kChunks][4][2], bl[kChunks][4][2];
  const bool live_q = g < G;
  const float up = live_q ? pow2(s_shift[g]) : 0.f;
#pragma unroll
  for (int s = 0; s < kChunks; ++s) {
    const int c0 = 64 * s + 16 * t;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (live_q && c0 < D) v = *reinterpret_cast<const float4*>(&s_q[g][c0 + 4 * j]);
      split_f16x2(v.x * up, v.y * up, bh[s][j][0], bl[s][j][0]);
      split_f16x2(v.z * up, v.w * up, bh[s][j][1], bl[s][j][1]);
    }
  }
  const int n0 = 2 * t, n1 = 2 * t + 1;
  const float down0 = n0 < G ? pow2(-s_shift[n0]) : 0.f;
  const float down1 = n1 < G ? pow2(-s_shift[n1]) : 0.f;
  const float scale = p.scales[h] * (1.f / sqrtf(static_cast<float>(D)));
  float* out0 = p.out + (static_cast<std::size_t>(h) * G + n0) * p.tokens;
  float* out1 = out0 + p.tokens;

  auto compute = [&](const typename Lane::Codes& x, int tile_first) {
#pragma unroll
    for (int u = 0; u < kSteps; ++u) {
      float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};  // hi, lo chains
#pragma unroll
      for (int s = 0; s < kChunks; ++s) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const std::uint32_t w0 = word(x[u][0][s], j), w1 = word(x[u][1][s], j);
          const std::uint32_t a[4] = {fp8x2_to_f16x2<F, 0>(w0), fp8x2_to_f16x2<F, 0>(w1),
                                      fp8x2_to_f16x2<F, 1>(w0), fp8x2_to_f16x2<F, 1>(w1)};
          mma_16816(acc[0], a, bh[s][j][0], bh[s][j][1]);
          mma_16816(acc[1], a, bl[s][j][0], bl[s][j][1]);
        }
      }
      const int tile = tile_first + u;
      if (tile < L.last) {
        const int tok0 = tile * kTile + g, tok1 = tok0 + 8;
        if (n0 < G) {
          if (tok0 < p.tokens) out0[tok0] = ((acc[0][0] + acc[1][0]) * down0) * scale;
          if (tok1 < p.tokens) out0[tok1] = ((acc[0][2] + acc[1][2]) * down0) * scale;
        }
        if (n1 < G) {
          if (tok0 < p.tokens) out1[tok0] = ((acc[0][1] + acc[1][1]) * down1) * scale;
          if (tok1 < p.tokens) out1[tok1] = ((acc[0][3] + acc[1][3]) * down1) * scale;
        }
      }
    }
  };
  // The next buffer is loaded before this one is multiplied; at head_dim > 128 one buffer of 8
  // loads is as deep as the register budget allows.
  if constexpr (kChunks <= 2) {
    for (; tile0 < L.last; tile0 += 2 * kStride) {
      L.load(xb, tile0 + kStride);
      compute(xa, tile0);
      if (tile0 + kStride >= L.last) break;
      L.load(xa, tile0 + 2 * kStride);
      compute(xb, tile0 + kStride);
    }
  } else {
    for (; tile0 < L.last; tile0 += kStride) {
      compute(xa, tile0);
      L.load(xa, tile0 + kStride);
    }
  }
}

// --- Values ---------------------------------------------------------------------------------

// Per-thread state of the values kernel: lane (g, t) reads channels c0 ... c0 + 15 (B column g)
// of tokens 4t ... 4t + 3 of each tile, and head g's weights for those tokens.
struct ValueLane {
  using Codes = uint4[kValueTiles][4];
  using Weights = float4[kValueTiles];
  const std::uint8_t* vh;
  const float* wg;
  std::size_t row;
  int tokens, last, t;
  bool live_c, live_q, vec;

  __device__ __forceinline__ void load(Codes& x, Weights& w, int tile0) const {
#pragma unroll
    for (int u = 0; u < kValueTiles; ++u) {
      const bool live_t = tile0 + u < last;
      const int tb = (tile0 + u) * kTile + 4 * t;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const bool live = live_t && live_c && tb + i < tokens;
        x[u][i] = live ? __ldcs(reinterpret_cast<const uint4*>(
                             vh + static_cast<std::size_t>(tb + i) * row))
                       : make_uint4(0u, 0u, 0u, 0u);
      }
      w[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (live_t && live_q) {
        if (vec) {
          if (tb < tokens) w[u] = __ldg(reinterpret_cast<const float4*>(wg + tb));
        } else {
          w[u].x = tb < tokens ? __ldg(wg + tb) : 0.f;
          w[u].y = tb + 1 < tokens ? __ldg(wg + tb + 1) : 0.f;
          w[u].z = tb + 2 < tokens ? __ldg(wg + tb + 2) : 0.f;
          w[u].w = tb + 3 < tokens ? __ldg(wg + tb + 3) : 0.f;
        }
      }
    }
  }
};

// acc[j]: rows g / g + 8 = hi / lo parts of head g's weights times 2^shift; columns 2t, 2t + 1 =
// channels 32 t + j and 32 t + 16 + j of the round. The shift follows the largest |weight| seen
// so far (FlashAttention's running rescale, here by exact powers of two); the four lanes of head
// g hold all of its accumulators, so a rescale stays within those lanes.
template <Fp8Format F>
__device__ __forceinline__ void values_step(const ValueLane::Codes& x, const ValueLane::Weights& w,
                                            float (&acc)[16][4], int& shift) {
  float m = 0.f;
#pragma unroll
  for (int u = 0; u < kValueTiles; ++u) {
    m = fmaxf(m, fmaxf(fmaxf(fabsf(w[u].x), fabsf(w[u].y)), fmaxf(fabsf(w[u].z), fabsf(w[u].w))));
  }
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  if (m > 0.f && isfinite(m)) {
    const int s = fp16_shift(m);
    if (s < shift) {
      if (shift != kNoShift) {
        const float f = pow2(max(s - shift, -126));
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          acc[j][0] *= f;
          acc[j][1] *= f;
          acc[j][2] *= f;
          acc[j][3] *= f;
        }
      }
      shift = s;
    }
  }
  const float up = shift == kNoShift ? 1.f : pow2(shift);
#pragma unroll
  for (int u = 0; u < kValueTiles; ++u) {
    // A rows g (hi) and g + 8 (lo); columns 2t, 2t + 1 are tokens tb, tb + 1, columns 2t + 8,
    // 2t + 9 tokens tb + 2, tb + 3.
    std::uint32_t a[4];
    split_f16x2(w[u].x * up, w[u].y * up, a[0], a[1]);
    split_f16x2(w[u].z * up, w[u].w * up, a[2], a[3]);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Byte b of p01 / q01 pairs: (token tb, token tb + 1) at channel c0 + 4k + b.
      const std::uint32_t p01 = __byte_perm(word(x[u][0], k), word(x[u][1], k), 0x5140u);
      const std::uint32_t q01 = __byte_perm(word(x[u][0], k), word(x[u][1], k), 0x7362u);
      const std::uint32_t p23 = __byte_perm(word(x[u][2], k), word(x[u][3], k), 0x5140u);
      const std::uint32_t q23 = __byte_perm(word(x[u][2], k), word(x[u][3], k), 0x7362u);
      mma_16816(acc[4 * k + 0], a, fp8x2_to_f16x2<F, 0>(p01), fp8x2_to_f16x2<F, 0>(p23));
      mma_16816(acc[4 * k + 1], a, fp8x2_to_f16x2<F, 1>(p01), fp8x2_to_f16x2<F, 1>(p23));
      mma_16816(acc[4 * k + 2], a, fp8x2_to_f16x2<F, 0>(q01), fp8x2_to_f16x2<F, 0>(q23));
      mma_16816(acc[4 * k + 3], a, fp8x2_to_f16x2<F, 1>(q01), fp8x2_to_f16x2<F, 1>(q23));
    }
  }
}

// Grid (token ranges, KV heads, 128-channel rounds).
template <Fp8Format F>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) fp8_values_kernel(Fp8Params p) {
  __shared__ float s_sum[kMaxFp8Group][kSumStride];
  const int h = blockIdx.y, round = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int D = p.dim, G = p.group, T = p.tokens;
  const int tiles = (T + kTile - 1) / kTile;
  const int first = blockIdx.x * p.tiles_per_block;
  const bool live_q = g < G;
  const int c0 = 128 * round + 16 * g;
  const bool live_c = c0 < D;
  const ValueLane L{p.codes + static_cast<std::size_t>(h) * D + (live_c ? c0 : 0),
                    p.in + (static_cast<std::size_t>(h) * G + (live_q ? g : 0)) * T,
                    static_cast<std::size_t>(p.heads) * D,
                    T,
                    min(tiles, first + p.tiles_per_block),
                    t,
                    live_c,
                    live_q,
                    T % 4 == 0 && reinterpret_cast<std::uintptr_t>(p.in) % 16 == 0};
  constexpr int kStride = kWarps * kValueTiles;
  int tile0 = first + warp * kValueTiles;
  ValueLane::Codes xa, xb;
  ValueLane::Weights wa, wb;
  L.load(xa, wa, tile0);

  for (int i = threadIdx.x; i < kMaxFp8Group * kSumStride; i += kThreads) {
    (&s_sum[0][0])[i] = 0.f;
  }
  __syncthreads();

  float acc[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  int shift = kNoShift;
  // The next buffer is loaded before this one is multiplied.
  for (; tile0 < L.last; tile0 += 2 * kStride) {
    L.load(xb, wb, tile0 + kStride);
    values_step<F>(xa, wa, acc, shift);
    if (tile0 + kStride >= L.last) break;
    L.load(xa, wa, tile0 + 2 * kStride);
    values_step<F>(xb, wb, acc, shift);
  }

  if (live_q && shift != kNoShift) {
    const float down = pow2(-shift);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      atomicAdd(&s_sum[g][t * 33 + j], (acc[j][0] + acc[j][2]) * down);
      atomicAdd(&s_sum[g][t * 33 + 16 + j], (acc[j][1] + acc[j][3]) * down);
    }
  }
  __syncthreads();
  const float scale = p.scales[h];
  for (int i = threadIdx.x; i < G * 128; i += kThreads) {
    const int n = i >> 7, cl = i & 127, c = 128 * round + cl;
    if (c < D) {
      atomicAdd(&p.out[(static_cast<std::size_t>(h) * G + n) * D + c],
                s_sum[n][(cl >> 5) * 33 + (cl & 31)] * scale);
    }
  }
}

// One wave: as many blocks as fit on the device, split over heads x rounds, each a contiguous
// range of tiles (launch_plan.cuh).
void plan_grid(int tokens, int slices, int per_sm, int& splits, int& tiles_per_block) {
  const SplitPlan plan =
      plan_splits((tokens + kTile - 1) / kTile, slices, per_sm, kMinTilesPerBlock);
  splits = plan.splits;
  tiles_per_block = plan.tiles_per_split;
}

cudaError_t check_launch(const Fp8Device& kv, const void* in, int q_heads, const void* out) {
  if (kv.tokens < 0 || kv.kv_heads <= 0 || q_heads <= 0 || q_heads % kv.kv_heads != 0 ||
      !fp8_shape_supported(kv.head_dim, q_heads / kv.kv_heads) ||
      (kv.format != Fp8Format::E4M3 && kv.format != Fp8Format::E5M2)) {
    return cudaErrorInvalidValue;
  }
  if (kv.tokens > 0 && (!kv.codes || !kv.scales || !in || !out ||
                        reinterpret_cast<std::uintptr_t>(kv.codes) % 16 != 0)) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

Fp8Params params_of(const Fp8Device& kv, const float* in, int q_heads, float* out) {
  return Fp8Params{
      kv.codes, kv.scales, in, out, kv.tokens, kv.kv_heads, kv.head_dim, q_heads / kv.kv_heads, 0};
}

template <Fp8Format F, int kChunks>
cudaError_t launch_logits(Fp8Params p, cudaStream_t stream) {
  static int per_sm = 0;
  int splits = 0;
  plan_grid(p.tokens, p.heads, resident_blocks(fp8_logits_kernel<F, kChunks>, kThreads, per_sm),
            splits, p.tiles_per_block);
  fp8_logits_kernel<F, kChunks><<<dim3(splits, p.heads), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

template <Fp8Format F>
cudaError_t launch_logits_dim(Fp8Params p, cudaStream_t stream) {
  if (p.dim <= 64) return launch_logits<F, 1>(p, stream);
  if (p.dim <= 128) return launch_logits<F, 2>(p, stream);
  return launch_logits<F, 4>(p, stream);
}

template <Fp8Format F>
cudaError_t launch_values(Fp8Params p, cudaStream_t stream) {
  static int per_sm = 0;
  const int rounds = (p.dim + 127) / 128;
  int splits = 0;
  plan_grid(p.tokens, p.heads * rounds, resident_blocks(fp8_values_kernel<F>, kThreads, per_sm),
            splits, p.tiles_per_block);
  fp8_values_kernel<F><<<dim3(splits, p.heads, rounds), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

bool fp8_shape_supported(int head_dim, int group) {
  return head_dim >= 16 && head_dim <= kMaxFp8HeadDim && head_dim % 16 == 0 && group >= 1 &&
         group <= kMaxFp8Group;
}

cudaError_t launch_fp8_logits(const Fp8Device& kv, const float* d_q, int q_heads, float* d_logits,
                              cudaStream_t stream) {
  if (cudaError_t e = check_launch(kv, d_q, q_heads, d_logits)) return e;
  if (kv.tokens == 0) return cudaSuccess;
  const Fp8Params p = params_of(kv, d_q, q_heads, d_logits);
  return kv.format == Fp8Format::E4M3 ? launch_logits_dim<Fp8Format::E4M3>(p, stream)
                                      : launch_logits_dim<Fp8Format::E5M2>(p, stream);
}

cudaError_t launch_fp8_values(const Fp8Device& kv, const float* d_probs, int q_heads, float* d_out,
                              cudaStream_t stream) {
  if (cudaError_t e = check_launch(kv, d_probs, q_heads, d_out)) return e;
  if (cudaError_t e = cudaMemsetAsync(
          d_out, 0, sizeof(float) * static_cast<std::size_t>(q_heads) * kv.head_dim, stream)) {
    return e;
  }
  if (kv.tokens == 0) return cudaSuccess;
  const Fp8Params p = params_of(kv, d_probs, q_heads, d_out);
  return kv.format == Fp8Format::E4M3 ? launch_values<Fp8Format::E4M3>(p, stream)
                                      : launch_values<Fp8Format::E5M2>(p, stream);
}

namespace {

Status check_fp8_call(const Fp8KvView& kv, std::size_t in, std::size_t out, int q_heads, bool keys,
                      const char* what) {
  const std::string w(what);
  KVLAB_TRY_STATUS(check::shape(w, kv.tokens, kv.kv_heads, kv.head_dim));
  if (kv.format != Fp8Format::E4M3 && kv.format != Fp8Format::E5M2) {
    return make_error(w + ": unknown FP8 format");
  }
  KVLAB_TRY_STATUS(check::query_heads(w, q_heads, kv.kv_heads));
  const int group = q_heads / kv.kv_heads;
  KVLAB_TRY_STATUS(
      check::group(w, group, group <= kMaxFp8Group, "1 to " + std::to_string(kMaxFp8Group)));
  if (!fp8_shape_supported(kv.head_dim, group)) {
    return make_error(w + ": head_dim " + std::to_string(kv.head_dim) +
                      " is not supported (a multiple of 16 up to " +
                      std::to_string(kMaxFp8HeadDim) + ")");
  }
  const std::size_t n = static_cast<std::size_t>(kv.tokens) * kv.kv_heads * kv.head_dim;
  const std::string tensor = keys ? "key" : "value";
  KVLAB_TRY_STATUS(check::count(w, keys ? kv.keys.size() : kv.values.size(), n, tensor + " codes"));
  KVLAB_TRY_STATUS(check::count(w, keys ? kv.key_scales.size() : kv.value_scales.size(),
                                static_cast<std::size_t>(kv.kv_heads),
                                tensor + " scales (one per KV head)"));
  const std::size_t in_need = static_cast<std::size_t>(q_heads) * (keys ? kv.head_dim : kv.tokens);
  const std::size_t out_need = static_cast<std::size_t>(q_heads) * (keys ? kv.tokens : kv.head_dim);
  KVLAB_TRY_STATUS(check::io(w, in, in_need, out, out_need));
  return Ok{};
}

Status run_fp8(const Fp8KvView& kv, std::span<const float> in, int q_heads, std::span<float> out,
               bool keys) {
  const char* what = keys ? "GPU fp8 attention logits" : "GPU fp8 attention values";
  KVLAB_TRY_STATUS(check_fp8_call(kv, in.size(), out.size(), q_heads, keys, what));
  KVLAB_TRY_STATUS(require_gpu());
  const auto codes = keys ? kv.keys : kv.values;
  const auto scales = keys ? kv.key_scales : kv.value_scales;
  DeviceArray<std::uint8_t> d_codes;
  DeviceArray<float> d_scales, d_in, d_out;
  KVLAB_TRY_STATUS(d_codes.upload(codes.data(), codes.size(), what));
  KVLAB_TRY_STATUS(d_scales.upload(scales.data(), scales.size(), what));
  KVLAB_TRY_STATUS(d_in.upload(in.data(), in.size(), what));
  KVLAB_TRY_STATUS(d_out.allocate(out.size(), what));
  // Poisoned with NaN, so an element the kernel failed to write cannot pass for a result.
  KVLAB_CUDA_TRY(cudaMemset(d_out.get(), 0xff, d_out.bytes()), what);
  Fp8Device d;
  d.tokens = kv.tokens;
  d.kv_heads = kv.kv_heads;
  d.head_dim = kv.head_dim;
  d.format = kv.format;
  d.codes = d_codes.get();
  d.scales = d_scales.get();
  KVLAB_CUDA_TRY(keys ? launch_fp8_logits(d, d_in.get(), q_heads, d_out.get(), nullptr)
                      : launch_fp8_values(d, d_in.get(), q_heads, d_out.get(), nullptr),
                 what);
  KVLAB_CUDA_TRY(cudaDeviceSynchronize(), what);
  return d_out.download(out.data(), out.size(), what);
}

}  // namespace

Status fp8_attention_logits(const Fp8KvView& kv, std::span<const float> q, int q_heads,
                            std::span<float> logits) {
  return run_fp8(kv, q, q_heads, logits, true);
}

Status fp8_attention_values(const Fp8KvView& kv, std::span<const float> probs, int q_heads,
                            std::span<float> out) {
  return run_fp8(kv, probs, q_heads, out, false);
}

}  // namespace kvlab::cuda
