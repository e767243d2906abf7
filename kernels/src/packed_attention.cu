// Tensor-core fused attention over bit-packed 4- and 8-bit streams (see packed_attention.cuh).
//
// Why the tensor cores: the thread-per-vector kernels of fused_attention.cu spend about G + 2
// instructions per code (extract, convert, G FMAs), far more than the memory system's 15 or so
// bytes per clock per SM leave room for. Here a warp widens a pair of codes to an fp16x2 with a
// LOP3 and one f16x2 add or FMA (4-bit: (w & 0x000f000f) | 0x64006400 is the fp16 pair 1024 + code,
// as in FasterTransformer and Marlin; 8-bit: a byte permute does the same), and one
// mma.m16n8k16 takes 256 codes.
//
// Exactness (as fp8_attention.cu): codes are exact fp16 integers and fp16 x fp16 products are exact
// in the fp32 accumulators. The fp32 factors x (queries times key steps, or softmax weights times
// value steps) are split as x * 2^s = hi + lo, two fp16s, with s putting the largest |x| in
// [2^14, 2^15); both parts go through the tensor cores, leaving an error of about 2^-22 of x.
// The minimums' share (sum_c q min_c, sum_t p min_t) is summed in fp32 on the CUDA cores.
//
// Layout (docs/FORMAT.md; block_layout.h places the blocks): with every vector VB = dim * width / 8
// bytes, a multiple of 16, the vectors of token block tb and head h are VB-byte rows from
// bitpack_block_offset(tb, h, ...). 16-token tiles never cross a token block.
//
// Tiling (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"): lane = 4 g + t.
//  Logits, per KV head: A = codes (16 tokens x 16 channel slots), B = q * step (16 slots x 8
//   columns), C = 16 tokens x 8 columns. Lane (g, t) loads words t * kW ... of tokens g and g + 8;
//   a permutation of the channels (the same in A and B) makes the widened words A fragments with
//   no shuffles. B depends on the token block (the key steps are per channel per block): each warp
//   walks a contiguous range of tiles and rebuilds B when the block changes, from steps and
//   minimums it prefetched one block ahead through a small per-warp shared buffer. Groups of up to
//   4 query heads put the hi parts in columns 0-3 and the lo parts in columns 4-7, so one mma does
//   both (a shuffle adds them); groups of 8 run a hi and a lo mma into the same accumulators.
//  Values, per KV head: A = codes (16 channel rows x 16 tokens), B = p * step (16 tokens x 8
//   columns, hi / lo as for the logits), C = 16 channels x 8 columns. Lane (g, t) loads words
//   g * kWv ... of tokens 4t ... 4t + 3; a byte permute pairs two tokens' codes of one channel, so
//   the widened pairs are A fragments. The weights' rescale follows the largest |weight| the warp
//   has seen (a running rescale by exact powers of two, as in FlashAttention). Per-block sums meet
//   in shared memory, then one atomic per output.
//
// Timings, tuning and what bounds these kernels: docs/PERFORMANCE.md, "GPU kernels".
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda_check.cuh"
#include "kvlab/engine/codec/block_layout.h"
#include "launch_plan.cuh"
#include "packed_attention.cuh"

namespace kvlab::cuda {

namespace {

constexpr int kWarps = PackedAttentionPolicy::kWarps;
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = 16;          // tokens per mma tile
constexpr int kMaxShift = 100;     // |s| bound of the 2^s rescale
constexpr int kNoShift = 1 << 30;  // values: no nonzero weight seen yet
constexpr unsigned kFull = 0xffffffffu;

// 2^e as a float, |e| <= 126.
__device__ __forceinline__ float pow2(int e) {
  return __int_as_float((127 + e) << 23);
}

// The s that puts max_abs * 2^s in [2^14, 2^15). Zero, infinite or NaN maxima: 0.
__device__ __forceinline__ int fp16_shift(float max_abs) {
  if (!(max_abs > 0.f) || !isfinite(max_abs)) return 0;
  int e = 0;
  frexpf(max_abs, &e);
  return min(max(15 - e, -kMaxShift), kMaxShift);
}

__device__ __forceinline__ std::uint32_t f16x2_rn(float lo_half, float hi_half) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi_half), "f"(lo_half));
  return r;
}

__device__ __forceinline__ float f16_lo(std::uint32_t h) {
  float f;
  asm("{ .reg .f16 l, u; mov.b32 {l, u}, %1; cvt.f32.f16 %0, l; }" : "=f"(f) : "r"(h));
  return f;
}
__device__ __forceinline__ float f16_hi(std::uint32_t h) {
  float f;
  asm("{ .reg .f16 l, u; mov.b32 {l, u}, %1; cvt.f32.f16 %0, u; }" : "=f"(f) : "r"(h));
  return f;
}

// (x0, x1) = hi + lo, each an fp16x2 (x0 in the low half).
__device__ __forceinline__ void split_f16x2(float x0, float x1, std::uint32_t& hi,
                                            std::uint32_t& lo) {
  hi = f16x2_rn(x0, x1);
  lo = f16x2_rn(x0 - f16_lo(hi), x1 - f16_hi(hi));
}

__device__ __forceinline__ std::uint32_t hsub_1024(std::uint32_t x) {
  std::uint32_t r;
  asm("sub.f16x2 %0, %1, %2;" : "=r"(r) : "r"(x), "r"(0x64006400u));
  return r;
}
// x / 16 - 64: the fp16 pair 1024 + 16 c -> c, exactly.
__device__ __forceinline__ std::uint32_t hfma_div16(std::uint32_t x) {
  std::uint32_t r;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(0x2c002c00u), "r"(0xd400d400u));
  return r;
}

// A 32-bit word of 4-bit codes (nibble j = code j) as fp16x2 pairs: R[j] = (code j, code j + 4).
__device__ __forceinline__ void widen4(std::uint32_t w, std::uint32_t* R) {
  const std::uint32_t w8 = w >> 8;
  R[0] = hsub_1024((w & 0x000f000fu) | 0x64006400u);
  R[1] = hfma_div16((w & 0x00f000f0u) | 0x64006400u);
  R[2] = hsub_1024((w8 & 0x000f000fu) | 0x64006400u);
  R[3] = hfma_div16((w8 & 0x00f000f0u) | 0x64006400u);
}
// A 32-bit word of 8-bit codes as fp16x2 pairs: R[j] = (code 2j, code 2j + 1).
__device__ __forceinline__ void widen8(std::uint32_t w, std::uint32_t* R) {
  R[0] = hsub_1024(__byte_perm(w, 0x64646464u, 0x4140u));
  R[1] = hsub_1024(__byte_perm(w, 0x64646464u, 0x4342u));
}

// c += a . b for one m16n8k16 tile, fp16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_16816(float (&c)[4], const std::uint32_t (&a)[4],
                                          std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// kN consecutive 32-bit words from p (16-byte aligned for kN >= 4, 8-byte for kN == 2), streamed.
template <int kN>
__device__ __forceinline__ void load_words(std::uint32_t* w, const std::uint8_t* p) {
  if constexpr (kN == 1) {
    w[0] = __ldcs(reinterpret_cast<const unsigned int*>(p));
  } else if constexpr (kN == 2) {
    const uint2 v = __ldcs(reinterpret_cast<const uint2*>(p));
    w[0] = v.x;
    w[1] = v.y;
  } else {
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p) + i);
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
  }
}

struct PackedArgs {
  const std::uint8_t* codes;  // payload
  const float* steps;
  const float* mins;
  const float* in;  // queries [q_heads][dim] or weights [q_heads][tokens]
  float* out;       // logits [q_heads][tokens] or output [q_heads][dim]
  int tokens, heads, block_size;
  int tiles_per_warp;   // logits: a contiguous range per warp
  int tiles_per_block;  // values: a contiguous range per block
  float scale;          // logits: 1 / sqrt(dim)
};

// Where the row of token i0 of token block tb, head h starts (block_layout.h: the encoder's
// placement; kDim * kWidth is a whole number of bytes, so rows start on bytes).
template <int kDim, int kWidth>
__device__ __forceinline__ const std::uint8_t* tile_rows(const PackedArgs& a, int h, int tb, int i0,
                                                         int& n) {
  static_assert(kDim * kWidth % 8 == 0);
  n = block_layout::block_tokens(tb, a.tokens, a.block_size);
  return a.codes +
         block_layout::bitpack_block_offset(tb, h, a.heads, a.block_size, n, kDim, kWidth) +
         block_layout::bitpack_vector_bit(i0, kDim, kWidth) / 8;
}

// --- Logits ---------------------------------------------------------------------------------

template <int kWidth, int kW, int G>
struct LogitCfg {
  static constexpr int kCpw = 32 / kWidth;   // codes per word
  static constexpr int kLaneCh = kW * kCpw;  // channels per lane (t)
  static constexpr int kDim = 4 * kLaneCh;
  static constexpr int kVB = kDim * kWidth / 8;
  static constexpr int kMpw = kCpw / 4;  // mmas per word
  static constexpr int kT = 8 / kW;      // tiles per step: 16 code words per lane per buffer
  static constexpr int kP = G <= 4 ? 4 : 8;
  static constexpr int kNB = G <= 4 ? 1 : 2;  // B sets: hi / lo in columns, or two sets
  static constexpr int kChunk = kLaneCh + 4;  // padded: lanes t read different banks
  static constexpr int kPad = 4 * kChunk;
  static constexpr int kPf = (kDim / 2 + 31) / 32;  // float4 prefetches per lane (steps, mins)
  static constexpr int kMinBlocks = kNB * kDim / 8 > 32 ? 1 : 2;
  __device__ static constexpr int pad(int c) { return c + (c / kLaneCh) * 4; }
  // Channel (within a word) of half e of B register r of mma k.
  __device__ static constexpr int chan(int k, int r, int e) {
    return kWidth == 4 ? 2 * k + r + 4 * e : 2 * r + e;
  }
};

template <int kWidth, int kW, int G>
__global__ void __launch_bounds__(kThreads, LogitCfg<kWidth, kW, G>::kMinBlocks)
    packed_logits_kernel(PackedArgs a) {
  using C = LogitCfg<kWidth, kW, G>;
  constexpr int kT = C::kT, kDim = C::kDim, kVB = C::kVB;
  __shared__ __align__(16) float s_q[C::kP][C::kPad];
  __shared__ __align__(16) float s_step[kWarps][C::kPad];
  __shared__ __align__(16) float s_min[kWarps][C::kPad];
  const int h = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int T = a.tokens;
  const int tpb = a.block_size / kTile;  // tiles per token block, a multiple of kT
  const int tiles = (T + kTile - 1) / kTile;
  const int tile_begin = (blockIdx.x * kWarps + warp) * a.tiles_per_warp;
  const int tile_end = min(tiles, tile_begin + a.tiles_per_warp);

  using Codes = std::uint32_t[kT][2][kW];
  auto load = [&](Codes& x, int tile0) {
    const int tb = tile0 / tpb;
    const int i0 = (tile0 - tb * tpb) * kTile;
    int n = 0;
    const std::uint8_t* rows =
        tile0 < tile_end ? tile_rows<kDim, kWidth>(a, h, tb, i0, n) : a.codes;
#pragma unroll
    for (int u = 0; u < kT; ++u) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = u * kTile + g + 8 * r;
        if (tile0 + u < tile_end && i0 + i < n) {
          load_words<kW>(x[u][r], rows + static_cast<std::uint64_t>(i) * kVB + t * kW * 4);
        } else {
#pragma unroll
          for (int m = 0; m < kW; ++m) x[u][r][m] = 0u;
        }
      }
    }
  };
  // Steps and minimums of token block tb, the warp's lanes together.
  float4 pf[C::kPf];
  auto prefetch = [&](int tb) {
    const std::uint64_t unit = (static_cast<std::uint64_t>(tb) * a.heads + h) * kDim;
#pragma unroll
    for (int i = 0; i < C::kPf; ++i) {
      const int idx = lane + 32 * i;  // float4 index into [steps | mins]
      if (idx < kDim / 2) {
        const float* src =
            idx < kDim / 4 ? a.steps + unit + 4 * idx : a.mins + unit + 4 * (idx - kDim / 4);
        pf[i] = __ldg(reinterpret_cast<const float4*>(src));
      }
    }
  };

  Codes xa, xb;
  int tile0 = tile_begin;
  load(xa, tile0);
  if (tile0 < tile_end) prefetch(tile0 / tpb);

  // Queries times 1/sqrt(dim), zero rows past the group.
  for (int i = threadIdx.x; i < C::kP * kDim; i += kThreads) {
    const int hd = i / kDim, c = i % kDim;
    s_q[hd][C::pad(c)] =
        hd < G ? a.in[(static_cast<std::size_t>(h) * G + hd) * kDim + c] * a.scale : 0.f;
  }
  __syncthreads();
  if (tile0 >= tile_end) return;

  // B fragments (per set, word, mma, register) and the epilogue's constants.
  std::uint32_t b[C::kNB][kW][C::kMpw][2];
  const int hA = C::kP == 4 ? 2 * (t & 1) : 2 * t;  // the lane writes heads hA, hA + 1
  float biasA = 0.f, biasB = 0.f, downA = 0.f, downB = 0.f;
  int cur_tb = -1;

  auto setup = [&](int tb) {
    __syncwarp();
#pragma unroll
    for (int i = 0; i < C::kPf; ++i) {
      const int idx = lane + 32 * i;
      if (idx < kDim / 2) {
        float* dst = idx < kDim / 4 ? &s_step[warp][C::pad(4 * idx)]
                                    : &s_min[warp][C::pad(4 * (idx - kDim / 4))];
        *reinterpret_cast<float4*>(dst) = pf[i];
      }
    }
    __syncwarp();
    if ((tb + 1) * tpb < tile_end) prefetch(tb + 1);
    const int hd = g & (C::kP - 1);
    // Groups of up to 4 query heads: lanes g and g ^ 4 (lane ^ 16) serve the same head (its hi
    // and lo columns). Each converts half of the words, and they swap the parts the other needs.
    constexpr bool kShare = C::kNB == 1;
    constexpr int kOwn = kShare ? kW / 2 : kW;  // words this lane converts
    const bool second = kShare && g >= 4;
    const int c0 = t * C::kChunk + (second ? kOwn * C::kCpw : 0);
    const float* qr = &s_q[hd][c0];
    const float* sr = &s_step[warp][c0];
    const float* mr = &s_min[warp][c0];
    float x[kOwn * C::kCpw];  // q * step
    float mx = 0.f, bias = 0.f;
#pragma unroll
    for (int i = 0; i < kOwn * C::kCpw / 4; ++i) {
      const float4 q = reinterpret_cast<const float4*>(qr)[i];
      const float4 s = reinterpret_cast<const float4*>(sr)[i];
      const float4 m = reinterpret_cast<const float4*>(mr)[i];
      x[4 * i] = q.x * s.x;
      x[4 * i + 1] = q.y * s.y;
      x[4 * i + 2] = q.z * s.z;
      x[4 * i + 3] = q.w * s.w;
      mx = fmaxf(mx, fmaxf(fmaxf(fabsf(x[4 * i]), fabsf(x[4 * i + 1])),
                           fmaxf(fabsf(x[4 * i + 2]), fabsf(x[4 * i + 3]))));
      bias = fmaf(q.x, m.x, bias);
      bias = fmaf(q.y, m.y, bias);
      bias = fmaf(q.z, m.z, bias);
      bias = fmaf(q.w, m.w, bias);
    }
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
    bias += __shfl_xor_sync(kFull, bias, 1);
    bias += __shfl_xor_sync(kFull, bias, 2);
    if constexpr (kShare) {
      mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 16));
      bias += __shfl_xor_sync(kFull, bias, 16);
    }
    const int shift = fp16_shift(mx);
    const float up = pow2(shift);
#pragma unroll
    for (int m = 0; m < kOwn; ++m) {
#pragma unroll
      for (int k = 0; k < C::kMpw; ++k) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          std::uint32_t hi, lo;
          split_f16x2(x[m * C::kCpw + C::chan(k, r, 0)] * up,
                      x[m * C::kCpw + C::chan(k, r, 1)] * up, hi, lo);
          if constexpr (kShare) {
            const std::uint32_t mine = second ? lo : hi;
            const std::uint32_t other = __shfl_xor_sync(kFull, second ? hi : lo, 16);
            b[0][m][k][r] = second ? other : mine;
            b[0][kOwn + m][k][r] = second ? mine : other;
          } else {
            b[0][m][k][r] = hi;
            b[1][m][k][r] = lo;
          }
        }
      }
    }
    biasA = __shfl_sync(kFull, bias, 4 * hA);
    biasB = __shfl_sync(kFull, bias, 4 * hA + 4);
    downA = pow2(-__shfl_sync(kFull, shift, 4 * hA));
    downB = pow2(-__shfl_sync(kFull, shift, 4 * hA + 4));
  };

  const std::size_t head_row = static_cast<std::size_t>(T);
  float* out0 = a.out + (static_cast<std::size_t>(h) * G + hA) * head_row;
  auto write = [&](int tok, float v0, float v1) {
    if (tok < T) {
      if (hA < G) out0[tok] = v0 * downA + biasA;
      if (hA + 1 < G) out0[head_row + tok] = v1 * downB + biasB;
    }
  };

  auto compute = [&](const Codes& x, int t0) {
    const int tb = t0 / tpb;
    if (tb != cur_tb) {
      setup(tb);
      cur_tb = tb;
    }
#pragma unroll
    for (int u = 0; u < kT; ++u) {
      const int tile = t0 + u;
      if (tile >= tile_end) break;
      float acc2[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};  // two mma chains
#pragma unroll
      for (int m = 0; m < kW; ++m) {
        std::uint32_t r0[C::kCpw / 2], r1[C::kCpw / 2];
        if constexpr (kWidth == 4) {
          widen4(x[u][0][m], r0);
          widen4(x[u][1][m], r1);
        } else {
          widen8(x[u][0][m], r0);
          widen8(x[u][1][m], r1);
        }
#pragma unroll
        for (int k = 0; k < C::kMpw; ++k) {
          const std::uint32_t af[4] = {r0[2 * k], r1[2 * k], r0[2 * k + 1], r1[2 * k + 1]};
#pragma unroll
          for (int s = 0; s < C::kNB; ++s) {
            mma_16816(acc2[(m * C::kMpw + k) & 1], af, b[s][m][k][0], b[s][m][k][1]);
          }
        }
      }
      float acc[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] = acc2[0][i] + acc2[1][i];
      if constexpr (C::kP == 4) {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] += __shfl_xor_sync(kFull, acc[i], 2);
        const bool upper = t >= 2;
        write(tile * kTile + g + (upper ? 8 : 0), upper ? acc[2] : acc[0], upper ? acc[3] : acc[1]);
      } else {
        write(tile * kTile + g, acc[0], acc[1]);
        write(tile * kTile + g + 8, acc[2], acc[3]);
      }
    }
  };

  // The next buffer is loaded before this one is multiplied.
  for (; tile0 < tile_end; tile0 += 2 * kT) {
    load(xb, tile0 + kT);
    compute(xa, tile0);
    if (tile0 + kT >= tile_end) break;
    load(xa, tile0 + 2 * kT);
    compute(xb, tile0 + kT);
  }
}

// --- Values ---------------------------------------------------------------------------------

template <int kWidth, int kWv, int G>
struct ValueCfg {
  static constexpr int kCpw = 32 / kWidth;
  static constexpr int kLaneCh = kWv * kCpw;  // channels per lane (g)
  static constexpr int kDim = 8 * kLaneCh;
  static constexpr int kVB = kDim * kWidth / 8;
  static constexpr int kJ = kCpw / 2;  // mmas per word
  static constexpr int kT = 4 / kWv;   // tiles per buffer: 16 code words per lane
  static constexpr int kP = G <= 4 ? 4 : 8;
  static constexpr int kNB = G <= 4 ? 1 : 2;
  static constexpr int kMinBlocks = kDim / 4 > 32 ? 1 : 2;
};

template <int kWidth, int kWv, int G>
__global__ void __launch_bounds__(kThreads, ValueCfg<kWidth, kWv, G>::kMinBlocks)
    packed_values_kernel(PackedArgs a) {
  using C = ValueCfg<kWidth, kWv, G>;
  constexpr int kT = C::kT, kDim = C::kDim, kVB = C::kVB;
  __shared__ float s_sum[G][kDim];
  __shared__ float s_bias[G];
  const int h = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int T = a.tokens, H = a.heads;
  const int tiles = (T + kTile - 1) / kTile;
  const int first = blockIdx.x * a.tiles_per_block;
  const int last = min(tiles, first + a.tiles_per_block);
  const int hd = g & (C::kP - 1);  // the head of this lane's B column
  const bool live_q = hd < G;
  const float* prow = a.in + (static_cast<std::size_t>(h) * G + (live_q ? hd : 0)) * T;
  const bool vec = T % 4 == 0 && reinterpret_cast<std::uintptr_t>(a.in) % 16 == 0;
  const float* sm_src = lane < 16 ? a.steps : a.mins;

  using Codes = std::uint32_t[kT][4][kWv];
  using Weights = float4[kT];
  using StepMin = float[kT];
  auto load = [&](Codes& x, Weights& wq, StepMin& sm, int tile0) {
#pragma unroll
    for (int u = 0; u < kT; ++u) {
      const int tile = tile0 + u;
      const bool live_t = tile < last;
      const int tok0 = tile * kTile;
      const int tb = tok0 / a.block_size;
      const int i0 = tok0 - tb * a.block_size;
      int n = 0;
      const std::uint8_t* rows = live_t ? tile_rows<kDim, kWidth>(a, h, tb, i0, n) : a.codes;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = 4 * t + i;
        if (live_t && i0 + r < n) {
          load_words<kWv>(x[u][i], rows + static_cast<std::uint64_t>(r) * kVB + g * kWv * 4);
        } else {
#pragma unroll
          for (int m = 0; m < kWv; ++m) x[u][i][m] = 0u;
        }
      }
      const int tw = tok0 + 4 * t;
      wq[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (live_t && live_q) {
        if (vec) {
          if (tw < T) wq[u] = __ldg(reinterpret_cast<const float4*>(prow + tw));
        } else {
          wq[u].x = tw < T ? __ldg(prow + tw) : 0.f;
          wq[u].y = tw + 1 < T ? __ldg(prow + tw + 1) : 0.f;
          wq[u].z = tw + 2 < T ? __ldg(prow + tw + 2) : 0.f;
          wq[u].w = tw + 3 < T ? __ldg(prow + tw + 3) : 0.f;
        }
      }
      const int ts = tok0 + (lane & 15);
      sm[u] = live_t && ts < T ? __ldg(sm_src + static_cast<std::size_t>(ts) * H + h) : 0.f;
    }
  };

  constexpr int kStride = kWarps * kT;
  int tile0 = first + warp * kT;
  Codes xa, xb;
  Weights wa, wb;
  StepMin sa, sb;
  load(xa, wa, sa, tile0);

  for (int i = threadIdx.x; i < G * kDim; i += kThreads) (&s_sum[0][0])[i] = 0.f;
  if (threadIdx.x < G) s_bias[threadIdx.x] = 0.f;
  __syncthreads();

  float acc[kWv][C::kJ][4];
#pragma unroll
  for (int m = 0; m < kWv; ++m) {
#pragma unroll
    for (int j = 0; j < C::kJ; ++j) acc[m][j][0] = acc[m][j][1] = acc[m][j][2] = acc[m][j][3] = 0.f;
  }
  float bsum = 0.f;
  int shift = kNoShift;

  auto step = [&](const Codes& x, const Weights& wq, const StepMin& sm) {
    float w[kT][4];
    float mx = 0.f;
#pragma unroll
    for (int u = 0; u < kT; ++u) {
      const float p[4] = {wq[u].x, wq[u].y, wq[u].z, wq[u].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float st = __shfl_sync(kFull, sm[u], 4 * t + i);
        const float mn = __shfl_sync(kFull, sm[u], 16 + 4 * t + i);
        w[u][i] = p[i] * st;
        bsum = fmaf(p[i], mn, bsum);
        mx = fmaxf(mx, fabsf(w[u][i]));
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, o));
    if (mx > 0.f && isfinite(mx)) {
      const int s = fp16_shift(mx);
      if (s < shift) {
        if (shift != kNoShift) {
          const float f = pow2(max(s - shift, -126));
#pragma unroll
          for (int m = 0; m < kWv; ++m) {
#pragma unroll
            for (int j = 0; j < C::kJ; ++j) {
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[m][j][e] *= f;
            }
          }
        }
        shift = s;
      }
    }
    const float up = shift == kNoShift ? 1.f : pow2(shift);
#pragma unroll
    for (int u = 0; u < kT; ++u) {
      // B: rows (k slots) 2t, 2t + 1 are tokens 4t, 4t + 1; slots 2t + 8, 2t + 9 tokens 4t + 2,
      // 4t + 3.
      std::uint32_t h01, l01, h23, l23;
      split_f16x2(w[u][0] * up, w[u][1] * up, h01, l01);
      split_f16x2(w[u][2] * up, w[u][3] * up, h23, l23);
      std::uint32_t bf[C::kNB][2];
      if constexpr (C::kNB == 2) {
        bf[0][0] = h01;
        bf[0][1] = h23;
        bf[1][0] = l01;
        bf[1][1] = l23;
      } else {
        bf[0][0] = g >= 4 ? l01 : h01;
        bf[0][1] = g >= 4 ? l23 : h23;
      }
#pragma unroll
      for (int m = 0; m < kWv; ++m) {
        // pab[c] = (code c of token 4t, of 4t + 1), pcd the same for tokens 4t + 2, 4t + 3.
        std::uint32_t pab[C::kCpw], pcd[C::kCpw];
        if constexpr (kWidth == 4) {
          widen4(__byte_perm(x[u][0][m], x[u][1][m], 0x5410u), pab);
          widen4(__byte_perm(x[u][0][m], x[u][1][m], 0x7632u), pab + 4);
          widen4(__byte_perm(x[u][2][m], x[u][3][m], 0x5410u), pcd);
          widen4(__byte_perm(x[u][2][m], x[u][3][m], 0x7632u), pcd + 4);
        } else {
          const std::uint32_t ab0 = __byte_perm(x[u][0][m], x[u][1][m], 0x5140u);
          const std::uint32_t ab1 = __byte_perm(x[u][0][m], x[u][1][m], 0x7362u);
          const std::uint32_t cd0 = __byte_perm(x[u][2][m], x[u][3][m], 0x5140u);
          const std::uint32_t cd1 = __byte_perm(x[u][2][m], x[u][3][m], 0x7362u);
          widen8(ab0, pab);
          widen8(ab1, pab + 2);
          widen8(cd0, pcd);
          widen8(cd1, pcd + 2);
        }
#pragma unroll
        for (int j = 0; j < C::kJ; ++j) {
          const std::uint32_t af[4] = {pab[2 * j], pab[2 * j + 1], pcd[2 * j], pcd[2 * j + 1]};
#pragma unroll
          for (int s = 0; s < C::kNB; ++s) mma_16816(acc[m][j], af, bf[s][0], bf[s][1]);
        }
      }
    }
  };

  for (; tile0 < last; tile0 += 2 * kStride) {
    load(xb, wb, sb, tile0 + kStride);
    step(xa, wa, sa);
    if (tile0 + kStride >= last) break;
    load(xa, wa, sa, tile0 + 2 * kStride);
    step(xb, wb, sb);
  }

  // acc[m][j]: rows g / g + 8 = channels 2j / 2j + 1 of word m; columns 2t, 2t + 1. Groups of up
  // to 4: columns n and n + 4 (lanes t and t ^ 2) are the hi and lo parts of head n.
  if constexpr (C::kP == 4) {
#pragma unroll
    for (int m = 0; m < kWv; ++m) {
#pragma unroll
      for (int j = 0; j < C::kJ; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[m][j][e] += __shfl_xor_sync(kFull, acc[m][j][e], 2);
      }
    }
  }
  bsum += __shfl_xor_sync(kFull, bsum, 1);
  bsum += __shfl_xor_sync(kFull, bsum, 2);
  // The warps add their sums in turn with plain stores: shared-memory float atomics are a
  // compare-and-swap loop here, and contended ones cost more than the whole stream.
  const bool adds = shift != kNoShift && (C::kP == 8 || t < 2);
  const float down = shift != kNoShift ? pow2(-shift) : 0.f;
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w) {
      if (adds) {
#pragma unroll
        for (int m = 0; m < kWv; ++m) {
#pragma unroll
          for (int j = 0; j < C::kJ; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int c = (g * kWv + m) * C::kCpw + 2 * j + (e >> 1);
              const int head = 2 * t + (e & 1);
              if (head < G) s_sum[head][c] += acc[m][j][e] * down;
            }
          }
        }
      }
      if (t == 0 && live_q && (C::kNB == 2 || g < 4)) s_bias[hd] += bsum;
    }
    __syncthreads();
  }
  for (int i = threadIdx.x; i < G * kDim; i += kThreads) {
    const int n = i / kDim, c = i % kDim;
    atomicAdd(&a.out[(static_cast<std::size_t>(h) * G + n) * kDim + c], s_sum[n][c] + s_bias[n]);
  }
}

// --- Host -----------------------------------------------------------------------------------

// Words per lane: logits kW = dim * width / 128 (2, 4, 8); values kWv = kW / 2.
int lane_words(const GpuCodes& c) {
  const int bits = c.dim * c.width;
  return bits == 256 || bits == 512 || bits == 1024 ? bits / 128 : 0;
}

bool common_supported(const GpuCodes& c, int group) {
  return c.kind == CodecKind::BitPack && (c.width == 4 || c.width == 8) && lane_words(c) != 0 &&
         (group == 1 || group == 2 || group == 4 || group == 8) && c.block_size > 0 &&
         c.block_size % kTile == 0 && c.tokens > 0 && c.heads > 0;
}

PackedArgs args_of(const GpuCodes& c, const float* steps, const float* mins, const float* in,
                   float* out) {
  PackedArgs a{};
  a.codes = reinterpret_cast<const std::uint8_t*>(c.payload.get());
  a.steps = steps;
  a.mins = mins;
  a.in = in;
  a.out = out;
  a.tokens = c.tokens;
  a.heads = c.heads;
  a.block_size = c.block_size;
  return a;
}

template <int kWidth, int kW, int G>
cudaError_t run_logits(PackedArgs a, cudaStream_t stream) {
  using C = LogitCfg<kWidth, kW, G>;
  static int per_sm = 0;
  const int resident = resident_blocks(packed_logits_kernel<kWidth, kW, G>, kThreads, per_sm);
  const int tiles = (a.tokens + kTile - 1) / kTile;
  const int warps_per_head = std::max(1, sm_count() * resident * kWarps / a.heads);
  int tpw = (tiles + warps_per_head - 1) / warps_per_head;
  tpw = (tpw + C::kT - 1) / C::kT * C::kT;
  a.tiles_per_warp = tpw;
  const int warps = (tiles + tpw - 1) / tpw;
  const dim3 grid((warps + kWarps - 1) / kWarps, a.heads);
  packed_logits_kernel<kWidth, kW, G><<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <int kWidth, int kWv, int G>
cudaError_t run_values(PackedArgs a, cudaStream_t stream) {
  using C = ValueCfg<kWidth, kWv, G>;
  static int per_sm = 0;
  const int resident = resident_blocks(packed_values_kernel<kWidth, kWv, G>, kThreads, per_sm);
  const int tiles = (a.tokens + kTile - 1) / kTile;
  const int per_head = std::max(1, sm_count() * resident / a.heads);
  constexpr int kQuantum = kWarps * C::kT;  // one buffer for every warp
  int tpb = (tiles + per_head - 1) / per_head;
  tpb = (tpb + kQuantum - 1) / kQuantum * kQuantum;
  a.tiles_per_block = tpb;
  const dim3 grid((tiles + tpb - 1) / tpb, a.heads);
  packed_values_kernel<kWidth, kWv, G><<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <template <int, int, int> class Run, int kWidth, int kWords>
cudaError_t by_group(int group, const PackedArgs& a, cudaStream_t stream) {
  switch (group) {
    case 1:
      return Run<kWidth, kWords, 1>::go(a, stream);
    case 2:
      return Run<kWidth, kWords, 2>::go(a, stream);
    case 4:
      return Run<kWidth, kWords, 4>::go(a, stream);
    case 8:
      return Run<kWidth, kWords, 8>::go(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template <int kWidth, int kW, int G>
struct LogitsRun {
  static cudaError_t go(const PackedArgs& a, cudaStream_t s) {
    return run_logits<kWidth, kW, G>(a, s);
  }
};
template <int kWidth, int kWv, int G>
struct ValuesRun {
  static cudaError_t go(const PackedArgs& a, cudaStream_t s) {
    return run_values<kWidth, kWv, G>(a, s);
  }
};

// kWords = 2, 4, 8 (logits) or 1, 2, 4 (values), by lane_words() = 2, 4, 8.
template <template <int, int, int> class Run, int kDiv>
cudaError_t dispatch(const GpuCodes& c, int group, const PackedArgs& a, cudaStream_t stream) {
  const int words = lane_words(c);
  if (c.width == 4) {
    if (words == 2) return by_group<Run, 4, 2 / kDiv>(group, a, stream);
    if (words == 4) return by_group<Run, 4, 4 / kDiv>(group, a, stream);
    if (words == 8) return by_group<Run, 4, 8 / kDiv>(group, a, stream);
  } else if (c.width == 8) {
    if (words == 2) return by_group<Run, 8, 2 / kDiv>(group, a, stream);
    if (words == 4) return by_group<Run, 8, 4 / kDiv>(group, a, stream);
    if (words == 8) return by_group<Run, 8, 8 / kDiv>(group, a, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

bool packed_logits_supported(const GpuCodes& keys, int group) {
  if (!common_supported(keys, group)) return false;
  const int steps_tokens = kTile * (8 / lane_words(keys));  // a step never crosses a token block
  return keys.block_size % steps_tokens == 0;
}

bool packed_values_supported(const GpuCodes& values, int group) {
  return common_supported(values, group);
}

cudaError_t launch_packed_logits(const GpuLayer::Impl& g, const float* d_q, int group,
                                 float* d_logits, cudaStream_t stream) {
  if (!packed_logits_supported(g.keys, group) || g.keys.dim != g.head_dim) {
    return cudaErrorInvalidValue;
  }
  PackedArgs a = args_of(g.keys, g.key_steps.get(), g.key_mins.get(), d_q, d_logits);
  a.scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  return dispatch<LogitsRun, 1>(g.keys, group, a, stream);
}

cudaError_t launch_packed_values(const GpuLayer::Impl& g, const float* d_probs, int group,
                                 float* d_out, cudaStream_t stream) {
  if (!packed_values_supported(g.values, group) || g.values.dim != g.head_dim) {
    return cudaErrorInvalidValue;
  }
  const PackedArgs a = args_of(g.values, g.value_steps.get(), g.value_mins.get(), d_probs, d_out);
  return dispatch<ValuesRun, 2>(g.values, group, a, stream);
}

}  // namespace kvlab::cuda
