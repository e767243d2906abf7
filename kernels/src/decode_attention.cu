// The FlashAttention-class decode kernel (decode_attention.cuh) over fp16 and compressed row
// formats, and its host entry points (gpu_baselines.h).
//
// One block streams a KV head's chunk of tokens tile by tile. The K and V tiles go from global
// to shared memory by cp.async in the format's stored bytes, kStages - 1 tiles ahead of the
// arithmetic, so the memory system stays busy through the softmax and its barriers and the tiles
// take no registers. A format is a row type below: its row's bytes, the piece size cp.async
// copies them in (4, 8 or 16 bytes), where a row's pieces come from (source()), and load8(), a
// thread's 8 channels of a row decoded from shared memory (fp16: one 16-byte load; the others:
// row_decode.h). A format with kFoldKeys (KVComp's packed codes) has its key steps and minimums
// folded into the thread's query channels, recomputed when the key rows enter a new block, so its
// key rows decode to bare codes. Thread layout:
//  - q.k: d / 8 threads share one K row, each taking 8 channels (one 16-byte chunk) and holding
//    those 8 channels of all G query heads in registers; the partial dots are summed over the
//    row's threads with shuffles, and the logits (base 2, 1/sqrt(d) folded into q) go to shared
//    memory.
//  - softmax: warp g updates query head g's running max and sum over the tile and turns its
//    logits into weights 2^(s - max).
//  - .V: thread i owns 8 channels of row i / (d / 8) of each step; its G x 8 accumulators are
//    rescaled by 2^(old max - new max) once per tile, then summed over the rows at the end.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "decode_attention.cuh"
#include "kvlab/engine/codec/block_layout.h"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"
#include "launch_plan.cuh"

namespace kvlab::cuda {

namespace {

using P = DecodeAttentionPolicy;
constexpr float kLog2e = 1.4426950408889634f;

// Tokens per tile: 64, or 32 at d = 256 (an fp16 stage then takes 32 KiB of shared memory
// either way).
constexpr int tile_for(int head_dim) {
  return head_dim > 128 ? 32 : P::kTile;
}
// Bytes of one tile of K (or V) rows in shared memory.
constexpr std::size_t tile_bytes(DecodeFormat f, int head_dim) {
  return align16(static_cast<std::size_t>(tile_for(head_dim)) * row_decode::row_bytes(f, head_dim));
}
// Shared memory of the K and V stages: kStages x (K tile + V tile).
constexpr std::size_t stage_bytes(DecodeFormat f, int head_dim) {
  return static_cast<std::size_t>(P::kStages) * 2 * tile_bytes(f, head_dim);
}
// The largest cp.async piece (16, 8 or 4 bytes) that divides `bytes`.
constexpr int copy_unit(int bytes) {
  return bytes % 16 == 0 ? 16 : bytes % 8 == 0 ? 8 : 4;
}

__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __half22float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// U bytes global -> shared without passing through registers (sm_80 cp.async; 16 bytes through
// L2 only); a row past the chunk copies nothing and zero-fills its slot.
template <int U>
__device__ __forceinline__ void copy_async(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (U == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
                 "r"(valid ? 16 : 0));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(gmem), "n"(U),
                 "r"(valid ? U : 0));
  }
}

// Where a token's row sits: rows [batch][tokens][kv_heads].
struct RowPlace {
  int b, t, h;           // sequence, token, KV head
  std::size_t row;       // (b * tokens + t) * kv_heads + h
  int tokens, kv_heads;  // of one sequence
};

// The row types. `param` is what a format needs beside the row: FP8's scale of the KV head,
// NVFP4's global scale (read once per block by param()). load8's `row` is the row's index, for
// parameters kept per row.
template <int D>
struct Fp16Rows {
  static constexpr int kDim = D, kRowBytes = 2 * D, kCopy = 16;
  static constexpr DecodeFormat kFormat = DecodeFormat::Fp16;
  static constexpr bool kFoldKeys = false;
  __device__ static const void* source(const DecodeTensor& t, const RowPlace& p, int piece) {
    return static_cast<const std::uint8_t*>(t.data) + p.row * kRowBytes + piece * kCopy;
  }
  __device__ static float param(const DecodeTensor&, int) { return 0.f; }
  template <bool kValue>
  __device__ static void load8(const DecodeTensor&, const std::uint8_t* r, int sub, float,
                               std::size_t, float (&f)[8]) {
    unpack8(reinterpret_cast<const uint4*>(r)[sub], f);
  }
};

template <int D>
struct Fp8Rows {
  static constexpr int kDim = D, kRowBytes = D, kCopy = copy_unit(D);
  static constexpr DecodeFormat kFormat = DecodeFormat::Fp8E4M3;
  static constexpr bool kFoldKeys = false;
  __device__ static const void* source(const DecodeTensor& t, const RowPlace& p, int piece) {
    return static_cast<const std::uint8_t*>(t.data) + p.row * kRowBytes + piece * kCopy;
  }
  __device__ static float param(const DecodeTensor& t, int head) { return t.head_scales[head]; }
  template <bool kValue>
  __device__ static void load8(const DecodeTensor&, const std::uint8_t* r, int sub, float scale,
                               std::size_t, float (&f)[8]) {
    row_decode::fp8_e4m3(r, sub, scale, f);
  }
};

template <int D, DecodeFormat F>
struct GgmlRows {
  static constexpr int kDim = D, kRowBytes = row_decode::row_bytes(F, D);
  static constexpr int kCopy = copy_unit(kRowBytes);
  static constexpr DecodeFormat kFormat = F;
  static constexpr bool kFoldKeys = false;
  __device__ static const void* source(const DecodeTensor& t, const RowPlace& p, int piece) {
    return static_cast<const std::uint8_t*>(t.data) + p.row * kRowBytes + piece * kCopy;
  }
  __device__ static float param(const DecodeTensor&, int) { return 0.f; }
  template <bool kValue>
  __device__ static void load8(const DecodeTensor&, const std::uint8_t* r, int sub, float,
                               std::size_t, float (&f)[8]) {
    if constexpr (F == DecodeFormat::Q8_0) {
      row_decode::q8_0(r, sub, f);
    } else {
      row_decode::q4_0(r, sub, f);
    }
  }
};
template <int D>
using Q8_0Rows = GgmlRows<D, DecodeFormat::Q8_0>;
template <int D>
using Q4_0Rows = GgmlRows<D, DecodeFormat::Q4_0>;

// NVFP4: a row in shared memory is its nibbles, then its block scales, copied from the two
// arrays.
template <int D>
struct Nvfp4Rows {
  static constexpr int kDim = D, kCodeBytes = D / 2, kScaleBytes = D / 16;
  static constexpr int kRowBytes = kCodeBytes + kScaleBytes, kCopy = copy_unit(kScaleBytes);
  static constexpr DecodeFormat kFormat = DecodeFormat::Nvfp4;
  static constexpr bool kFoldKeys = false;
  static_assert(kCodeBytes % kCopy == 0);
  __device__ static const void* source(const DecodeTensor& t, const RowPlace& p, int piece) {
    constexpr int kCodePieces = kCodeBytes / kCopy;
    return piece < kCodePieces
               ? static_cast<const std::uint8_t*>(t.data) + p.row * kCodeBytes + piece * kCopy
               : static_cast<const std::uint8_t*>(t.scales) + p.row * kScaleBytes +
                     (piece - kCodePieces) * kCopy;
  }
  __device__ static float param(const DecodeTensor& t, int) { return t.global; }
  template <bool kValue>
  __device__ static void load8(const DecodeTensor&, const std::uint8_t* r, int sub, float global,
                               std::size_t, float (&f)[8]) {
    row_decode::nvfp4(r, D, sub, global, f);
  }
};

// KVComp's bit-packed 4-bit streams (docs/FORMAT.md, "BitPack"): a sequence's payload is its
// blocks of block_size tokens, token block major then head, each block its vectors back to back
// (dim / 2 bytes each, block_layout.h). Keys decode to their codes: the block's per-channel steps
// and minimums are folded into the query (fold()); values apply their token's step and minimum.
template <int D>
struct Packed4Rows {
  static constexpr int kDim = D, kRowBytes = D / 2, kCopy = copy_unit(kRowBytes);
  static constexpr DecodeFormat kFormat = DecodeFormat::Packed4;
  static constexpr bool kFoldKeys = true;
  __device__ static const void* source(const DecodeTensor& t, const RowPlace& p, int piece) {
    const int tb = p.t / t.block_size;
    const int n = block_layout::block_tokens(tb, p.tokens, t.block_size);
    return static_cast<const std::uint8_t*>(t.data) + p.b * t.batch_bytes +
           block_layout::bitpack_block_offset(tb, p.h, p.kv_heads, t.block_size, n, D, 4) +
           static_cast<std::size_t>(p.t - tb * t.block_size) * kRowBytes + piece * kCopy;
  }
  __device__ static float param(const DecodeTensor&, int) { return 0.f; }
  // Keys: the codes. Values: min + code * step of the row's token.
  template <bool kValue>
  __device__ static void load8(const DecodeTensor& t, const std::uint8_t* r, int sub, float,
                               std::size_t row, float (&f)[8]) {
    row_decode::packed4(r, sub, f);
    if constexpr (kValue) {
      const float step = __ldg(t.steps + row), mn = __ldg(t.mins + row);
#pragma unroll
      for (int c = 0; c < 8; ++c) f[c] = fmaf(f[c], step, mn);
    }
  }
};

// KIVI's quantized tokens (quant/group_quant.h, QuantizedTensor of the KIVI quantizer): rows of
// 2- or 4-bit codes packed LSB-first, [batch][tokens][kv_heads]; keys' steps and minimums per
// channel over groups of `block_size` tokens ([group][head][dim], folded into the query like
// Packed4's), values' per group of `group_channels` channels of a row ([token][head][group]).
// Its newest tokens, kept in fp16, run as Fp16Rows in a second launch (DecodeAttention::launch).
template <int D, DecodeFormat F>
struct KiviRows {
  static constexpr int kBits = F == DecodeFormat::Kivi2 ? 2 : 4;
  static constexpr int kDim = D, kRowBytes = D * kBits / 8, kCopy = copy_unit(kRowBytes);
  static constexpr DecodeFormat kFormat = F;
  static constexpr bool kFoldKeys = true;
  __device__ static const void* source(const DecodeTensor& t, const RowPlace& p, int piece) {
    return static_cast<const std::uint8_t*>(t.data) + p.row * kRowBytes + piece * kCopy;
  }
  __device__ static float param(const DecodeTensor&, int) { return 0.f; }
  template <bool kValue>
  __device__ static void load8(const DecodeTensor& t, const std::uint8_t* r, int sub, float,
                               std::size_t row, float (&f)[8]) {
    if constexpr (kBits == 2) {
      row_decode::codes2(r, sub, f);
    } else {
      row_decode::packed4(r, sub, f);
    }
    if constexpr (kValue) {
      // The thread's eight channels lie in one group (group_channels is a multiple of 8).
      const int per_row = (D + t.group_channels - 1) / t.group_channels;
      const std::size_t unit = row * per_row + (sub * 8) / t.group_channels;
      const float step = __ldg(t.steps + unit), mn = __ldg(t.mins + unit);
#pragma unroll
      for (int c = 0; c < 8; ++c) f[c] = fmaf(f[c], step, mn);
    }
  }
};
template <int D>
using Kivi2Rows = KiviRows<D, DecodeFormat::Kivi2>;
template <int D>
using Kivi4Rows = KiviRows<D, DecodeFormat::Kivi4>;
__device__ __forceinline__ void commit_async() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void wait_async() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <class F, int G>
__global__ void __launch_bounds__(P::kThreads, G <= 4 ? 2 : 1)
    decode_attention_kernel(DecodeAttentionArgs a, int tokens_per_split, int splits,
                            int split_offset, float* part_acc, float* part_ml, unsigned* counters) {
  constexpr int D = F::kDim;
  constexpr int kTile = tile_for(D);
  constexpr int kLanes = D / 8;  // 16-byte chunks per row
  constexpr int kWarps = P::kThreads / 32;
  constexpr int kRowsPerStep = kWarps * (32 / kLanes);  // K rows per step of the block
  constexpr int kKSteps = kTile / kRowsPerStep;
  constexpr int kVRows = P::kThreads / kLanes;  // V rows per step of the block
  constexpr int kVSteps = kTile / kVRows;
  constexpr int kPieces = F::kRowBytes / F::kCopy;  // cp.async pieces of one row
  constexpr int kTilePieces = kTile * kPieces;
  constexpr std::size_t kTileBytes = tile_bytes(F::kFormat, D);
  static_assert(F::kRowBytes % F::kCopy == 0);
  static_assert(kTile % kRowsPerStep == 0 && kTile % kVRows == 0 && kTile % 32 == 0);
  static_assert(G >= 1 && G <= kWarps);
  constexpr int kGP = G == 1 ? 1 : G == 2 ? 2 : G <= 4 ? 4 : 8;  // G padded to a power of two
  static_assert(kGP <= kLanes);

  extern __shared__ uint4 s_stage[];  // [kStages][K, V][kTile rows of F::kRowBytes]
  std::uint8_t* const stage = reinterpret_cast<std::uint8_t*>(s_stage);
  __shared__ __align__(16) float s_q[G][D];
  __shared__ float s_p[G][kTile];
  __shared__ float s_m[G], s_l[G], s_alpha[G];
  __shared__ __align__(16) float s_red[kVRows][D];
  __shared__ bool s_last;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // `split` is this block's chunk of this launch's tokens; its partial is number split_offset +
  // split of `splits` (KIVI's fp16 window runs as a second launch whose chunks follow the
  // quantized tokens' in the same partials, and the last block of either merges them all).
  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int part = split_offset + split;
  const int slice = b * a.kv_heads + h;
  const int t_begin = split * tokens_per_split;
  const int t_end = min(a.tokens, t_begin + tokens_per_split);
  const int tiles = (t_end - t_begin + kTile - 1) / kTile;
  // Row (b, t, h) of K and V is row0 + t * kv_heads.
  const std::size_t row0 = static_cast<std::size_t>(b) * a.tokens * a.kv_heads + h;
  const float k_param = F::param(a.k, h), v_param = F::param(a.v, h);
  const std::size_t q_row =
      static_cast<std::size_t>(b) * a.q_heads + static_cast<std::size_t>(h) * G;

  // Tile j's K and V rows into stage j % kStages, as one commit group (an empty group past the
  // last tile, so that the wait below always counts kStages - 1 groups).
  const auto issue = [&](int j) {
    if (j < tiles) {
      std::uint8_t* ks = stage + static_cast<std::size_t>(j % P::kStages) * 2 * kTileBytes;
      std::uint8_t* vs = ks + kTileBytes;
      const int t0 = t_begin + j * kTile;
#pragma unroll
      for (int i = tid; i < kTilePieces; i += P::kThreads) {
        const int r = i / kPieces, piece = i % kPieces;
        const int t = t0 + r;
        const bool valid = t < t_end;
        const int tt = valid ? t : t_begin;
        const RowPlace place{
            b, tt, h, row0 + static_cast<std::size_t>(tt) * a.kv_heads, a.tokens, a.kv_heads};
        const int at = i * F::kCopy;  // r * kRowBytes + piece * kCopy
        copy_async<F::kCopy>(ks + at, F::source(a.k, place, piece), valid);
        copy_async<F::kCopy>(vs + at, F::source(a.v, place, piece), valid);
      }
    }
    commit_async();
  };
#pragma unroll
  for (int j = 0; j < P::kStages - 1; ++j) issue(j);

  const float q_scale = kLog2e * rsqrtf(static_cast<float>(D));
  for (int i = tid; i < G * D; i += P::kThreads) s_q[i / D][i % D] = a.q[q_row * D + i] * q_scale;
  if (tid < G) {
    s_m[tid] = -INFINITY;
    s_l[tid] = 0.f;
  }
  __syncthreads();

  const int sub = lane % kLanes;  // which 8 channels this thread works on
  const int k_row = warp * (32 / kLanes) + lane / kLanes;
  const int v_row = tid / kLanes;
  // The query head whose dot this thread holds after the reduce-scatter below: the first
  // log2(kGP) halvings keep the upper half where the thread's bit of that step is set.
  int g_of_sub = 0;
#pragma unroll
  for (int off = kLanes / 2, half = kGP / 2; half > 0; off /= 2, half /= 2) {
    if (sub & off) g_of_sub += half;
  }
  float q[G][8];  // this thread's 8 channels of each query head (scaled), held for the chunk
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) q[g][j] = s_q[g][sub * 8 + j];
  }
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.f;
  }
  // kFoldKeys: the key block whose steps are folded into q, and this thread's share of q.min of
  // each query head (summed with the dot over the row's threads).
  int folded_block = -1;
  float kbias[G];
#pragma unroll
  for (int g = 0; g < G; ++g) kbias[g] = 0.f;

  for (int j = 0; j < tiles; ++j) {
    issue(j + P::kStages - 1);  // into the stage the previous tile freed
    wait_async<P::kStages - 1>();
    __syncthreads();
    const std::uint8_t* ks = stage + static_cast<std::size_t>(j % P::kStages) * 2 * kTileBytes;
    const std::uint8_t* vs = ks + kTileBytes;
    const int t0 = t_begin + j * kTile;
#pragma unroll
    for (int s = 0; s < kKSteps; ++s) {
      const int row = s * kRowsPerStep + k_row;
      if constexpr (F::kFoldKeys) {
        // q.(min + code * step) = q.min + (q * step).code over the block's per-channel step and
        // minimum: refolded when this row's block is not the folded one (once a tile at most
        // when blocks hold whole tiles; a row past the chunk keeps the last block).
        const int blk = min(t0 + row, t_end - 1) / a.k.block_size;
        if (blk != folded_block) {
          folded_block = blk;
          const std::size_t unit =
              ((static_cast<std::size_t>(b) * ((a.tokens + a.k.block_size - 1) / a.k.block_size) +
                blk) *
                   a.kv_heads +
               h) *
                  D +
              sub * 8;
          float st[8], mn[8];
#pragma unroll
          for (int c = 0; c < 8; ++c) {
            st[c] = __ldg(a.k.steps + unit + c);
            mn[c] = __ldg(a.k.mins + unit + c);
          }
#pragma unroll
          for (int g = 0; g < G; ++g) {
            kbias[g] = 0.f;
#pragma unroll
            for (int c = 0; c < 8; ++c) {
              const float qv = s_q[g][sub * 8 + c];
              q[g][c] = qv * st[c];
              kbias[g] = fmaf(qv, mn[c], kbias[g]);
            }
          }
        }
      }
      float k8[8];
      F::template load8<false>(a.k, ks + row * F::kRowBytes, sub, k_param, 0, k8);
      float d[kGP];
#pragma unroll
      for (int g = 0; g < kGP; ++g) {
        d[g] = 0.f;
        if constexpr (F::kFoldKeys) {
          if (g < G) d[g] = kbias[g];
        }
        if (g < G) {
#pragma unroll
          for (int c = 0; c < 8; ++c) d[g] = fmaf(q[g][c], k8[c], d[g]);
        }
      }
      // Sum over the row's kLanes threads as a reduce-scatter: at each step a thread sends the
      // half of its values its partner keeps, so G partial dots take log2(kLanes) + G - 1
      // shuffles instead of G log2(kLanes). Afterwards the thread holds head g_of(sub)'s sum.
#pragma unroll
      for (int off = kLanes / 2, n = kGP; off > 0; off /= 2) {
        if (n > 1) {
          const bool upper = (lane & off) != 0;
#pragma unroll
          for (int i = 0; i < n / 2; ++i) {
            const float send = upper ? d[i] : d[i + n / 2];
            const float keep = upper ? d[i + n / 2] : d[i];
            d[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
          }
          n /= 2;
        } else {
          d[0] += __shfl_xor_sync(0xffffffffu, d[0], off);
        }
      }
      if (sub % (kLanes / kGP) == 0 && g_of_sub < G) {
        s_p[g_of_sub][row] = t0 + row < t_end ? d[0] : -INFINITY;
      }
    }
    __syncthreads();
    if (warp < G) {
      const int g = warp;
      float x[kTile / 32];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < kTile / 32; ++i) {
        x[i] = s_p[g][lane + 32 * i];
        mx = fmaxf(mx, x[i]);
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_old = s_m[g];
      const float m_new = fmaxf(m_old, mx);  // finite: the tile's first row is a token
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < kTile / 32; ++i) {
        const float p = exp2f(x[i] - m_new);
        s_p[g][lane + 32 * i] = p;
        sum += p;
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      __syncwarp();  // every lane has read s_m[g] before lane 0 rewrites it
      if (lane == 0) {
        const float alpha = exp2f(m_old - m_new);
        s_alpha[g] = alpha;
        s_l[g] = s_l[g] * alpha + sum;
        s_m[g] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float alpha = s_alpha[g];
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[g][c] *= alpha;
    }
#pragma unroll
    for (int s = 0; s < kVSteps; ++s) {
      const int row = s * kVRows + v_row;
      float v8[8];
      F::template load8<true>(
          a.v, vs + row * F::kRowBytes, sub, v_param,
          row0 + static_cast<std::size_t>(min(t0 + row, t_end - 1)) * a.kv_heads, v8);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = s_p[g][row];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[g][c] = fmaf(p, v8[c], acc[g][c]);
      }
    }
    __syncthreads();  // s_p and this stage are rewritten by the next tile
  }
  wait_async<0>();  // nothing may be left in flight into shared memory at exit

  // Sum the accumulators over the V rows, one query head at a time through shared memory.
  const bool single = splits == 1;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    *reinterpret_cast<float4*>(&s_red[v_row][sub * 8]) =
        make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
    *reinterpret_cast<float4*>(&s_red[v_row][sub * 8 + 4]) =
        make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
    __syncthreads();
    for (int c = tid; c < D; c += P::kThreads) {
      float sum = 0.f;
#pragma unroll
      for (int r = 0; r < kVRows; ++r) sum += s_red[r][c];
      if (single) {
        a.out[(q_row + g) * D + c] = sum / s_l[g];
      } else {
        part_acc[((static_cast<std::size_t>(slice) * G + g) * splits + part) * D + c] = sum;
      }
    }
    __syncthreads();
  }
  if (single) return;
  if (tid < G) {
    float* ml = part_ml + ((static_cast<std::size_t>(slice) * G + tid) * splits + part) * 2;
    ml[0] = s_m[tid];
    ml[1] = s_l[tid];
  }
  // The last block of this KV head to finish merges the chunks (threadFenceReduction's pattern:
  // each block's partials are visible device-wide before its count is).
  __threadfence();
  __syncthreads();
  if (tid == 0) s_last = atomicAdd(&counters[slice], 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // The merge runs after every other block of this head, on the kernel's critical path, so its
  // loads go out together: first every chunk's max and sum (one per thread), then each query
  // head's weights 2^(m_s - max) into the idle stage memory, then (head, channel pair) sums with
  // eight chunks' loads in flight (from L2: __ldcg, past this SM's L1).
  float* s_w = reinterpret_cast<float*>(s_stage);  // [G][splits]; the host keeps it in bounds
  for (int i = tid; i < G * splits; i += P::kThreads) {
    s_w[i] = __ldcg(&part_ml[(static_cast<std::size_t>(slice) * G * splits + i) * 2]);
  }
  __syncthreads();
  if (warp < G) {
    const int g = warp;
    float* w = s_w + g * splits;
    const float* ml = part_ml + (static_cast<std::size_t>(slice) * G + g) * splits * 2;
    float m = -INFINITY;
    for (int i = lane; i < splits; i += 32) m = fmaxf(m, w[i]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float l = 0.f;
    for (int i = lane; i < splits; i += 32) {
      const float wi = exp2f(w[i] - m);
      w[i] = wi;
      l = fmaf(__ldcg(&ml[2 * i + 1]), wi, l);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) s_alpha[g] = 1.f / l;
  }
  __syncthreads();
  for (int i = tid; i < G * D / 2; i += P::kThreads) {
    const int g = i / (D / 2), c = (i % (D / 2)) * 2;
    const float* src = part_acc + (static_cast<std::size_t>(slice) * G + g) * splits * D + c;
    const float* w = s_w + g * splits;
    float ox = 0.f, oy = 0.f;
#pragma unroll 8
    for (int sp = 0; sp < splits; ++sp) {
      const float2 x =
          __ldcg(reinterpret_cast<const float2*>(src + static_cast<std::size_t>(sp) * D));
      ox = fmaf(x.x, w[sp], ox);
      oy = fmaf(x.y, w[sp], oy);
    }
    const float inv = s_alpha[g];
    *reinterpret_cast<float2*>(&a.out[(q_row + g) * D + c]) = make_float2(ox * inv, oy * inv);
  }
  if (tid == 0) counters[slice] = 0;  // ready for the next launch
}

using KernelFn = void (*)(DecodeAttentionArgs, int, int, int, float*, float*, unsigned*);

// fp16 takes every group of 1 to 8 (SmolLM2's 3, Qwen2-7B's 7); the compressed formats the
// groups the other fused kernels take, 1, 2, 4 and 8.
template <class F>
KernelFn kernel_for_group(int g) {
  constexpr bool kAll = F::kFormat == DecodeFormat::Fp16;
  switch (g) {
    case 1:
      return decode_attention_kernel<F, 1>;
    case 2:
      return decode_attention_kernel<F, 2>;
    case 3:
      if constexpr (kAll) return decode_attention_kernel<F, 3>;
      return nullptr;
    case 4:
      return decode_attention_kernel<F, 4>;
    case 5:
      if constexpr (kAll) return decode_attention_kernel<F, 5>;
      return nullptr;
    case 6:
      if constexpr (kAll) return decode_attention_kernel<F, 6>;
      return nullptr;
    case 7:
      if constexpr (kAll) return decode_attention_kernel<F, 7>;
      return nullptr;
    case 8:
      return decode_attention_kernel<F, 8>;
    default:
      return nullptr;
  }
}

template <template <int> class R>
KernelFn kernel_for_dim(int head_dim, int group) {
  switch (head_dim) {
    case 64:
      return kernel_for_group<R<64>>(group);
    case 128:
      return kernel_for_group<R<128>>(group);
    case 256:
      return kernel_for_group<R<256>>(group);
    default:
      return nullptr;
  }
}

KernelFn kernel_for(DecodeFormat format, int head_dim, int group) {
  switch (format) {
    case DecodeFormat::Fp16:
      return kernel_for_dim<Fp16Rows>(head_dim, group);
    case DecodeFormat::Fp8E4M3:
      return kernel_for_dim<Fp8Rows>(head_dim, group);
    case DecodeFormat::Q8_0:
      return kernel_for_dim<Q8_0Rows>(head_dim, group);
    case DecodeFormat::Q4_0:
      return kernel_for_dim<Q4_0Rows>(head_dim, group);
    case DecodeFormat::Nvfp4:
      return kernel_for_dim<Nvfp4Rows>(head_dim, group);
    case DecodeFormat::Packed4:
      return kernel_for_dim<Packed4Rows>(head_dim, group);
    case DecodeFormat::Kivi2:
      return kernel_for_dim<Kivi2Rows>(head_dim, group);
    case DecodeFormat::Kivi4:
      return kernel_for_dim<Kivi4Rows>(head_dim, group);
  }
  return nullptr;
}

constexpr int kFormats = 8;

// Resident blocks per SM of each instantiation, asked once each: [format][dim 64/128/256][group
// - 1].
int& occupancy_cache(DecodeFormat format, int head_dim, int group) {
  static int cache[kFormats][3][P::kMaxGroup] = {};
  return cache[static_cast<int>(format)][head_dim == 64 ? 0 : head_dim == 128 ? 1 : 2][group - 1];
}

struct Plan {
  KernelFn kernel = nullptr;
  int group = 0, slices = 0, tile = 0;
  std::size_t smem = 0;  // dynamic shared memory: the K and V stages
  SplitPlan split;
};

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

bool is_kivi(DecodeFormat f) {
  return f == DecodeFormat::Kivi2 || f == DecodeFormat::Kivi4;
}

bool tensor_valid(DecodeFormat f, const DecodeTensor& t) {
  if (!t.data || !aligned16(t.data)) return false;
  if (f == DecodeFormat::Nvfp4) {
    return t.scales && aligned16(t.scales) && std::isfinite(t.global) && t.global > 0.f;
  }
  if (f == DecodeFormat::Fp8E4M3) return t.head_scales != nullptr;
  if (f == DecodeFormat::Packed4) {
    return t.steps && t.mins && t.block_size >= 1 && t.block_size <= 65535 &&
           t.batch_bytes % 16 == 0;
  }
  if (is_kivi(f)) {
    // Keys: block_size tokens a group; values: group_channels channels a group, whole chunks of
    // eight (a thread's channels share one step and minimum).
    return t.steps && t.mins && t.block_size >= 1 && t.group_channels >= 8 &&
           t.group_channels % 8 == 0;
  }
  return true;
}

bool args_valid(const DecodeAttentionArgs& a) {
  if (static_cast<int>(a.format) >= kFormats) return false;
  if (a.batch <= 0 || a.tokens < 0 || a.window < 0 || a.kv_heads <= 0 || a.q_heads <= 0 ||
      a.q_heads % a.kv_heads != 0 ||
      !decode_attention_supported(a.format, a.head_dim, a.q_heads / a.kv_heads) ||
      a.kv_heads > 65535 || a.batch > 65535) {
    return false;
  }
  if (a.window > 0 && !is_kivi(a.format)) return false;
  if (!a.q || !a.out || reinterpret_cast<std::uintptr_t>(a.out) % 8 != 0) return false;
  if (a.tokens > 0 && !(tensor_valid(a.format, a.k) && tensor_valid(a.format, a.v))) return false;
  return a.window == 0 || (tensor_valid(DecodeFormat::Fp16, a.k_window) &&
                           tensor_valid(DecodeFormat::Fp16, a.v_window));
}

Plan plan_for(const DecodeAttentionArgs& a) {
  Plan p;
  p.group = a.q_heads / a.kv_heads;
  p.kernel = kernel_for(a.format, a.head_dim, p.group);
  p.slices = a.batch * a.kv_heads;
  p.tile = tile_for(a.head_dim);
  p.smem = stage_bytes(a.format, a.head_dim);
  int& resident = occupancy_cache(a.format, a.head_dim, p.group);
  if (resident == 0) {
    // Asked once per instantiation, at any size: the kernel's static shared memory (the query,
    // the weights, the reduction rows) counts against the 48 KiB a block gets without asking, so
    // stages of 48 KiB or less can need it too (fp16 at head_dim 64, FP8 at 128 and 256).
    std::size_t opted = 0;
    if (allow_dynamic_smem(p.kernel, p.smem, opted) != cudaSuccess) (void)cudaGetLastError();
  }
  const int tiles = (a.tokens + p.tile - 1) / p.tile;
  p.split = plan_splits(tiles, p.slices, resident_blocks(p.kernel, P::kThreads, resident, p.smem));
  // The merge keeps G weights per chunk in the stage memory: at most smem / 4 / G chunks.
  const int max_splits = static_cast<int>(p.smem / sizeof(float)) / p.group;
  if (p.split.splits > max_splits) {
    p.split.tiles_per_split = (tiles + max_splits - 1) / max_splits;
    p.split.splits = (tiles + p.split.tiles_per_split - 1) / p.split.tiles_per_split;
  }
  return p;
}

// The launches of one call: the format's tokens, then for KIVI its fp16 window's, their chunks
// numbered one after the other in the same partials (the window's launch runs last, so its last
// block merges them all).
struct Parts {
  bool main = false, window = false;
  DecodeAttentionArgs main_args, window_args;
  Plan main_plan, window_plan;
  int total = 0;
  int group = 0, slices = 0;
  std::size_t partial_rows() const {
    return total <= 1 ? 0 : static_cast<std::size_t>(slices) * group * total;
  }
};

Parts parts_for(const DecodeAttentionArgs& a) {
  Parts r;
  r.group = a.q_heads / a.kv_heads;
  r.slices = a.batch * a.kv_heads;
  r.main = a.tokens > 0;
  r.window = a.window > 0;
  if (r.window) {
    r.window_args = a;
    r.window_args.format = DecodeFormat::Fp16;
    r.window_args.tokens = a.window;
    r.window_args.k = a.k_window;
    r.window_args.v = a.v_window;
    r.window_args.window = 0;
    r.window_plan = plan_for(r.window_args);
    r.total += r.window_plan.split.splits;
  }
  if (r.main) {
    r.main_args = a;
    r.main_args.window = 0;
    r.main_plan = plan_for(r.main_args);
    if (r.window) {
      // The merging block (the window's) keeps G weights per chunk of both in its stage memory.
      const int room = static_cast<int>(r.window_plan.smem / sizeof(float)) / r.group - r.total;
      Plan& p = r.main_plan;
      if (p.split.splits > room) {
        const int tiles = (a.tokens + p.tile - 1) / p.tile;
        p.split.tiles_per_split = (tiles + room - 1) / room;
        p.split.splits = (tiles + p.split.tiles_per_split - 1) / p.split.tiles_per_split;
      }
    }
    r.total += r.main_plan.split.splits;
  }
  return r;
}

}  // namespace

bool decode_attention_supported(DecodeFormat format, int head_dim, int group) {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256) return false;
  if (format == DecodeFormat::Fp16) return group >= 1 && group <= P::kMaxGroup;
  return group == 1 || group == 2 || group == 4 || group == 8;
}

Status DecodeAttention::prepare(const DecodeAttentionArgs& a) {
  if (!args_valid(a)) {
    return make_error(std::string("decode attention (") + row_decode::format_name(a.format) +
                      "): unsupported shape (" + std::to_string(a.batch) + " sequences, " +
                      std::to_string(a.q_heads) + " query heads over " +
                      std::to_string(a.kv_heads) + " KV heads, head_dim " +
                      std::to_string(a.head_dim) +
                      "; head_dim must be 64, 128 or 256 and the group 1 to 8, 1, 2, 4 or 8 for "
                      "a compressed format) or a missing or misaligned buffer or scale");
  }
  if (a.tokens == 0 && a.window == 0) return Ok{};
  const Parts parts = parts_for(a);
  const std::size_t need = parts.partial_rows() * (static_cast<std::size_t>(a.head_dim) + 2);
  if (m_partials.size() < need) {
    KVLAB_TRY_STATUS(m_partials.allocate(need, "decode attention partials"));
  }
  if (m_counters.size() < static_cast<std::size_t>(parts.slices)) {
    KVLAB_TRY_STATUS(m_counters.allocate(parts.slices, "decode attention counters"));
    KVLAB_TRY_STATUS(m_counters.zero("decode attention counters"));
  }
  return Ok{};
}

cudaError_t DecodeAttention::launch(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (!args_valid(a)) return cudaErrorInvalidValue;
  if (a.tokens == 0 && a.window == 0) {
    m_last_splits = 0;
    return cudaMemsetAsync(
        a.out, 0, static_cast<std::size_t>(a.batch) * a.q_heads * a.head_dim * sizeof(float),
        stream);
  }
  const Parts parts = parts_for(a);
  const std::size_t rows = parts.partial_rows();
  if (m_partials.size() < rows * (static_cast<std::size_t>(a.head_dim) + 2) ||
      (parts.total > 1 && m_counters.size() < static_cast<std::size_t>(parts.slices))) {
    return cudaErrorInvalidValue;  // not prepared for this shape
  }
  float* acc = m_partials.get();
  float* ml = acc ? acc + rows * a.head_dim : nullptr;
  m_last_splits = parts.total;
  int offset = 0;
  const auto run = [&](const Plan& p, const DecodeAttentionArgs& args) {
    const dim3 grid(p.split.splits, args.kv_heads, args.batch);
    p.kernel<<<grid, P::kThreads, p.smem, stream>>>(args, p.split.tiles_per_split * p.tile,
                                                    parts.total, offset, acc, ml, m_counters.get());
    offset += p.split.splits;
    return cudaGetLastError();
  };
  if (parts.main) {
    if (cudaError_t e = run(parts.main_plan, parts.main_args)) return e;
  }
  if (parts.window) return run(parts.window_plan, parts.window_args);
  return cudaSuccess;
}

namespace {

// One of K or V on the host, for run_decode.
struct HostTensor {
  std::span<const std::uint8_t> data, scales;
  std::span<const float> head_scales, steps, mins;
};

struct UploadedTensor {
  DeviceArray<std::uint8_t> data, scales;
  DeviceArray<float> head_scales, steps, mins;
  Status upload(const HostTensor& h, DecodeTensor& t) {
    const char* what = "decode attention";
    const auto up = [&](auto& d, auto span) -> Status {
      if (span.empty()) return Ok{};
      return d.upload(span.data(), span.size(), what);
    };
    KVLAB_TRY_STATUS(up(data, h.data));
    KVLAB_TRY_STATUS(up(scales, h.scales));
    KVLAB_TRY_STATUS(up(head_scales, h.head_scales));
    KVLAB_TRY_STATUS(up(steps, h.steps));
    KVLAB_TRY_STATUS(up(mins, h.mins));
    t.data = data.get();
    t.scales = scales.get();
    t.head_scales = head_scales.get();
    t.steps = steps.get();
    t.mins = mins.get();
    return Ok{};
  }
};

// An fp16 buffer's bytes, as run_decode takes them.
std::span<const std::uint8_t> fp16_bytes(std::span<const std::uint16_t> x) {
  return {reinterpret_cast<const std::uint8_t*>(x.data()), x.size_bytes()};
}

// Uploads, launches and downloads: the host entry points below. Launched twice on the one prepared
// DecodeAttention, the output poisoned (NaN) before each launch, and the second launch's output
// returned: it shows that a launch after the first (the split merge's counters as the first left
// them) still writes every output, as the bench's and a decode loop's repeated launches need.
Status run_decode(DecodeAttentionArgs a, const HostTensor& k, const HostTensor& v,
                  const HostTensor& kw, const HostTensor& vw, std::span<const float> q,
                  std::span<float> out, int* splits) {
  const char* what = "decode attention";
  UploadedTensor dk, dv, dkw, dvw;
  DeviceArray<float> dq, dout;
  KVLAB_TRY_STATUS(dk.upload(k, a.k));
  KVLAB_TRY_STATUS(dv.upload(v, a.v));
  KVLAB_TRY_STATUS(dkw.upload(kw, a.k_window));
  KVLAB_TRY_STATUS(dvw.upload(vw, a.v_window));
  KVLAB_TRY_STATUS(dq.upload(q.data(), q.size(), what));
  KVLAB_TRY_STATUS(dout.allocate(out.size(), what));
  a.q = dq.get();
  a.out = dout.get();
  DecodeAttention dec;
  KVLAB_TRY_STATUS(dec.prepare(a));
  for (int launch = 0; launch < 2; ++launch) {
    KVLAB_CUDA_TRY(cudaMemset(dout.get(), 0xff, dout.bytes()), what);
    KVLAB_CUDA_TRY(dec.launch(a, nullptr), what);
    KVLAB_CUDA_LAUNCH("decode attention");
  }
  if (splits) *splits = dec.last_splits();
  return dout.download(out.data(), out.size(), what);
}

}  // namespace

Status fp16_decode_attention(const Fp16KvView& kv, int batch, std::span<const float> q, int q_heads,
                             std::span<float> out, int* splits) {
  if (batch <= 0 || kv.tokens < 0 || kv.kv_heads <= 0 || kv.head_dim <= 0 || q_heads <= 0) {
    return make_error("fp16 decode attention: empty or negative shape");
  }
  const std::string what = "fp16 decode attention";
  KVLAB_TRY_STATUS(check::query_heads(what, q_heads, kv.kv_heads));
  const std::size_t n = static_cast<std::size_t>(batch) * kv.tokens * kv.kv_heads * kv.head_dim;
  const std::size_t nq = static_cast<std::size_t>(batch) * q_heads * kv.head_dim;
  KVLAB_TRY_STATUS(check::count(what, kv.keys.size(), n, "keys"));
  KVLAB_TRY_STATUS(check::count(what, kv.values.size(), n, "values"));
  KVLAB_TRY_STATUS(check::io(what, q.size(), nq, out.size(), nq));
  KVLAB_TRY_STATUS(require_gpu());
  const auto a = DecodeAttentionArgs::of_shape(DecodeFormat::Fp16, batch, kv.tokens, kv.kv_heads,
                                               q_heads, kv.head_dim);
  return run_decode(a, HostTensor{fp16_bytes(kv.keys), {}, {}, {}, {}},
                    HostTensor{fp16_bytes(kv.values), {}, {}, {}, {}}, {}, {}, q, out, splits);
}

Status decode_attention(const StoredKvView& kv, int batch, std::span<const float> q, int q_heads,
                        std::span<float> out, int* splits) {
  const std::string what =
      std::string("decode attention (") + row_decode::format_name(kv.format) + ")";
  const bool nvfp4 = kv.format == DecodeFormat::Nvfp4, fp8 = kv.format == DecodeFormat::Fp8E4M3;
  const bool packed = kv.format == DecodeFormat::Packed4, kivi = is_kivi(kv.format);
  if (kv.format == DecodeFormat::Fp16) {
    return make_error(what + ": fp16 caches go through fp16_decode_attention");
  }
  if (batch <= 0 || kv.tokens < 0 || kv.window_tokens < 0 || kv.kv_heads <= 0 || kv.head_dim <= 0 ||
      q_heads <= 0 || kv.head_dim % 32 != 0) {
    return make_error(what + ": empty or negative shape, or head_dim not a multiple of 32");
  }
  if ((packed || kivi) && (kv.block_size < 1 || kv.block_size > 65535)) {
    return make_error(what + ": block size " + std::to_string(kv.block_size) + " outside 1..65535");
  }
  if (kivi && (kv.value_group_channels < 8 || kv.value_group_channels % 8 != 0 ||
               kv.tokens % kv.block_size != 0)) {
    return make_error(what + ": value groups of " + std::to_string(kv.value_group_channels) +
                      " channels (a multiple of 8 is needed), or " + std::to_string(kv.tokens) +
                      " quantized tokens not whole groups of " + std::to_string(kv.block_size));
  }
  if (!kivi && kv.window_tokens != 0) return make_error(what + ": only KIVI keeps an fp16 window");
  KVLAB_TRY_STATUS(check::query_heads(what, q_heads, kv.kv_heads));
  const int group = q_heads / kv.kv_heads;
  KVLAB_TRY_STATUS(check::group(what, group, group == 1 || group == 2 || group == 4 || group == 8,
                                "1, 2, 4, 8"));
  const std::size_t b = static_cast<std::size_t>(batch);
  const std::size_t rows = b * kv.tokens * kv.kv_heads;
  const std::size_t row = static_cast<std::size_t>(row_decode::row_bytes(kv.format, kv.head_dim));
  const std::size_t sequence_bytes =
      packed ? block_layout::bitpack_payload_bytes(kv.tokens, kv.kv_heads, kv.head_dim,
                                                   kv.block_size, 4)
             : 0;
  const std::size_t data = packed  ? b * sequence_bytes
                           : nvfp4 ? rows * (kv.head_dim / 2)
                                   : rows * row;
  const std::size_t scales = nvfp4 ? rows * (kv.head_dim / 16) : 0;
  const std::size_t heads = fp8 ? static_cast<std::size_t>(kv.kv_heads) : 0;
  std::size_t key_units = 0, value_units = 0;
  if (packed || kivi) {
    const std::size_t groups = (kv.tokens + kv.block_size - 1) / kv.block_size;
    key_units = b * groups * kv.kv_heads * kv.head_dim;
    value_units =
        packed ? rows
               : rows * ((kv.head_dim + kv.value_group_channels - 1) / kv.value_group_channels);
  }
  const std::size_t window = b * kv.window_tokens * kv.kv_heads * kv.head_dim;
  const std::size_t nq = b * q_heads * kv.head_dim;
  const struct {
    std::size_t given, need;
    const char* of;
  } buffers[] = {{kv.keys.size(), data, "key bytes"},
                 {kv.values.size(), data, "value bytes"},
                 {kv.key_scales.size(), scales, "key block scales"},
                 {kv.value_scales.size(), scales, "value block scales"},
                 {kv.key_head_scales.size(), heads, "key head scales"},
                 {kv.value_head_scales.size(), heads, "value head scales"},
                 {kv.key_steps.size(), key_units, "key steps"},
                 {kv.key_mins.size(), key_units, "key minimums"},
                 {kv.value_steps.size(), value_units, "value steps"},
                 {kv.value_mins.size(), value_units, "value minimums"},
                 {kv.window_keys.size(), window, "window keys"},
                 {kv.window_values.size(), window, "window values"}};
  for (const auto& buffer : buffers) {
    KVLAB_TRY_STATUS(check::count(what, buffer.given, buffer.need, buffer.of));
  }
  KVLAB_TRY_STATUS(check::io(what, q.size(), nq, out.size(), nq));
  KVLAB_TRY_STATUS(require_gpu());
  auto a =
      DecodeAttentionArgs::of_shape(kv.format, batch, kv.tokens, kv.kv_heads, q_heads, kv.head_dim);
  a.k.global = kv.key_global;
  a.v.global = kv.value_global;
  a.k.block_size = a.v.block_size = (packed || kivi) ? kv.block_size : 0;
  a.k.batch_bytes = a.v.batch_bytes = sequence_bytes;
  a.v.group_channels = kivi ? kv.value_group_channels : 0;
  a.k.group_channels = a.v.group_channels;
  a.window = kv.window_tokens;
  return run_decode(
      a, HostTensor{kv.keys, kv.key_scales, kv.key_head_scales, kv.key_steps, kv.key_mins},
      HostTensor{kv.values, kv.value_scales, kv.value_head_scales, kv.value_steps, kv.value_mins},
      HostTensor{fp16_bytes(kv.window_keys), {}, {}, {}, {}},
      HostTensor{fp16_bytes(kv.window_values), {}, {}, {}, {}}, q, out, splits);
}

}  // namespace kvlab::cuda
