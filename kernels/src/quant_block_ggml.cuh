// llama.cpp's 32-value KV-cache blocks on the device: one thread per block, the CPU reference's
// scalar functions (engine/src/model/ggml_quantize.cpp, written from llama.cpp's
// ggml/src/ggml-quants.c quantize_row_q4_0_ref, quantize_row_q4_1_ref, quantize_row_q5_0_ref,
// quantize_row_q5_1_ref, quantize_row_q8_0_ref and quantize_row_iq4_nl_ref with ntry = -1) line
// by line, every float operation the same one in the same order, so the bytes are the same.
// Decoders as engine/src/model/ggml_quants.cpp (dequantize_row_*). llama.cpp's attn_rot
// Hadamard (rotation.cpp hadamard_transform) as one CUDA block per rotated chunk.
// Included only by quant_block.cu.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>

#include "device_quantizer.cuh"
#include "kvlab/engine/model/ggml_blocks.h"
#include "kvlab/engine/model/ggml_types.h"
#include "quant_block_math.cuh"

namespace kvlab::cuda::block_quant {

constexpr int kGgmlBlock = 32;  // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK4_NL

// kvalues_iq4nl (ggml-common.h).
__constant__ const std::int8_t kIq4nlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                   1,    13,   25,  38,  53,  69,  89,  113};

// The largest |x| of a block and the first value that has it; NaN never wins (amax < |v|).
__device__ __forceinline__ float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kGgmlBlock; ++j) {
    if (amax < fabsf(x[j])) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}

// min and max as the reference finds them (v < min, v > max: NaN never counts).
__device__ __forceinline__ void min_max(const float* x, float& mn, float& mx) {
  mn = FLT_MAX;
  mx = -FLT_MAX;
  for (int j = 0; j < kGgmlBlock; ++j) {
    if (x[j] < mn) mn = x[j];
    if (x[j] > mx) mx = x[j];
  }
}

// (max - min) / levels of the "_1" types. max and min are never NaN, so a NaN range is inf - inf,
// x86's default NaN (negative), which the CPU's division keeps and stores as fp16 0xfe00.
__device__ __forceinline__ float range_step(float mn, float mx, float levels) {
  const float range = __fsub_rn(mx, mn);
  return isnan(range) ? x86_default_nan() : __fdiv_rn(range, levels);
}

__device__ __forceinline__ void store_u32(std::uint8_t* p, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<std::uint8_t>(v >> (8 * k));
}
__device__ __forceinline__ std::uint32_t load_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// block_q4_0 {half d; u8 qs[16]}: d = max / -8, codes x/d + 8 (quantize_row_q4_0_ref).
__device__ void quant_q4_0(const float* x, std::uint8_t* y) {
  const float max = signed_absmax(x);
  const float d = __fdiv_rn(max, -8.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  store_f16(y, d);
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const float x0 = __fmul_rn(x[j], id);
    const float x1 = __fmul_rn(x[kGgmlBlock / 2 + j], id);
    const int xi0 = min(15, static_cast<int>(to_int8(__fadd_rn(x0, 8.5f))));
    const int xi1 = min(15, static_cast<int>(to_int8(__fadd_rn(x1, 8.5f))));
    y[offsetof(ggml_block::Q4_0, qs) + j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
  }
}

// block_q4_1 {half d; half m; u8 qs[16]}: d = (max - min) / 15 (quantize_row_q4_1_ref).
__device__ void quant_q4_1(const float* x, std::uint8_t* y) {
  float mn, mx;
  min_max(x, mn, mx);
  const float d = range_step(mn, mx, 15.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  store_f16(y, d);
  store_f16(y + offsetof(ggml_block::Q4_1, m), mn);
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const float x0 = __fmul_rn(__fsub_rn(x[j], mn), id);
    const float x1 = __fmul_rn(__fsub_rn(x[kGgmlBlock / 2 + j], mn), id);
    const int xi0 = min(15, static_cast<int>(to_int8(__fadd_rn(x0, 0.5f))));
    const int xi1 = min(15, static_cast<int>(to_int8(__fadd_rn(x1, 0.5f))));
    y[offsetof(ggml_block::Q4_1, qs) + j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
  }
}

// block_q5_0 {half d; u8 qh[4]; u8 qs[16]}: d = max / -16, codes x/d + 16; bit 4 of value j in
// bit j of the little-endian qh (quantize_row_q5_0_ref).
__device__ void quant_q5_0(const float* x, std::uint8_t* y) {
  const float max = signed_absmax(x);
  const float d = __fdiv_rn(max, -16.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  store_f16(y, d);
  std::uint32_t qh = 0;
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const float x0 = __fmul_rn(x[j], id);
    const float x1 = __fmul_rn(x[kGgmlBlock / 2 + j], id);
    const auto xi0 =
        static_cast<std::uint8_t>(min(31, static_cast<int>(to_int8(__fadd_rn(x0, 16.5f)))));
    const auto xi1 =
        static_cast<std::uint8_t>(min(31, static_cast<int>(to_int8(__fadd_rn(x1, 16.5f)))));
    y[offsetof(ggml_block::Q5_0, qs) + j] =
        static_cast<std::uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << j;
    qh |= ((xi1 & 0x10u) >> 4) << (j + kGgmlBlock / 2);
  }
  store_u32(y + offsetof(ggml_block::Q5_0, qh), qh);
}

// block_q5_1 {half d; half m; u8 qh[4]; u8 qs[16]}: d = (max - min) / 31, codes unclamped
// (quantize_row_q5_1_ref).
__device__ void quant_q5_1(const float* x, std::uint8_t* y) {
  float mn, mx;
  min_max(x, mn, mx);
  const float d = range_step(mn, mx, 31.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  store_f16(y, d);
  store_f16(y + offsetof(ggml_block::Q5_1, m), mn);
  std::uint32_t qh = 0;
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    const float x0 = __fmul_rn(__fsub_rn(x[j], mn), id);
    const float x1 = __fmul_rn(__fsub_rn(x[kGgmlBlock / 2 + j], mn), id);
    const std::uint8_t xi0 = to_uint8(__fadd_rn(x0, 0.5f));
    const std::uint8_t xi1 = to_uint8(__fadd_rn(x1, 0.5f));
    y[offsetof(ggml_block::Q5_1, qs) + j] =
        static_cast<std::uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << j;
    qh |= ((xi1 & 0x10u) >> 4) << (j + kGgmlBlock / 2);
  }
  store_u32(y + offsetof(ggml_block::Q5_1, qh), qh);
}

// block_q8_0 {half d; i8 qs[32]}: d = amax / 127, codes roundf(x/d) (quantize_row_q8_0_ref).
__device__ void quant_q8_0(const float* x, std::uint8_t* y) {
  float amax = 0.0f;
  // MAX(amax, |v|) = amax > |v| ? amax : |v|: a NaN takes amax's place until the next value. Its
  // sign is clear (fabs), as is CUDA's NaN, so a NaN d is stored as 0x7e00 on both.
  for (int j = 0; j < kGgmlBlock; ++j) {
    const float a = fabsf(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  store_f16(y, d);
  for (int j = 0; j < kGgmlBlock; ++j) {
    y[offsetof(ggml_block::Q8_0, qs) + j] =
        static_cast<std::uint8_t>(to_int8(round_half_away(__fmul_rn(x[j], id))));
  }
}

// best_index_int8 (ggml-quants.c): the nearest level by binary search, ties to the upper one;
// NaN gives 15.
__device__ __forceinline__ int best_index_iq4nl(float x) {
  if (x <= kIq4nlLevels[0]) return 0;
  if (x >= kIq4nlLevels[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < kIq4nlLevels[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  const float below = static_cast<float>(kIq4nlLevels[mu - 1]);
  const float above = static_cast<float>(kIq4nlLevels[mu]);
  return __fsub_rn(x, below) < __fsub_rn(above, x) ? mu - 1 : mu;
}

// quantize_row_iq4_nl_ref (quantize_row_iq4_nl_impl, ntry = -1, no importance weights: weight =
// x^2): scale max / -127, codes by best_index_int8, the scale refined once by least squares.
// block_iq4_nl {half d; u8 qs[16]}.
__device__ void quant_iq4_nl(const float* x, std::uint8_t* y) {
  std::uint8_t L[kGgmlBlock] = {};
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kGgmlBlock; ++j) {
    const float ax = fabsf(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  float scale = 0.0f;
  if (!(amax < 1e-15f)) {  // GROUP_MAX_EPS: below it scale 0 and codes 0
    const float d = __fdiv_rn(max, static_cast<float>(kIq4nlLevels[0]));
    const float id = __fdiv_rn(1.0f, d);
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < kGgmlBlock; ++j) {
      const float al = __fmul_rn(id, x[j]);
      const int l = best_index_iq4nl(al);
      L[j] = static_cast<std::uint8_t>(l);
      const float q = static_cast<float>(kIq4nlLevels[l]);
      const float w = __fmul_rn(x[j], x[j]);
      const float wq = __fmul_rn(w, q);
      sumqx = __fadd_rn(sumqx, __fmul_rn(wq, x[j]));
      sumq2 = __fadd_rn(sumq2, __fmul_rn(wq, q));
    }
    scale = sumq2 > 0.0f ? __fdiv_rn(sumqx, sumq2) : 0.0f;
    // No NaN enters the sums where sumq2 > 0 (a NaN x makes sumq2 NaN and the scale 0), so a
    // NaN scale is made of infinities: x86's default NaN, stored as 0xfe00 by the CPU.
    if (isnan(scale)) scale = x86_default_nan();
  }
  store_f16(y, scale);
  for (int j = 0; j < kGgmlBlock / 2; ++j) {
    y[offsetof(ggml_block::IQ4_NL, qs) + j] =
        static_cast<std::uint8_t>(L[j] | (L[kGgmlBlock / 2 + j] << 4));
  }
}

template <GgmlType T>
__device__ __forceinline__ void quant_ggml_block(const float* x, std::uint8_t* y) {
  if constexpr (T == GgmlType::Q4_0) {
    quant_q4_0(x, y);
  } else if constexpr (T == GgmlType::Q4_1) {
    quant_q4_1(x, y);
  } else if constexpr (T == GgmlType::Q5_0) {
    quant_q5_0(x, y);
  } else if constexpr (T == GgmlType::Q5_1) {
    quant_q5_1(x, y);
  } else if constexpr (T == GgmlType::Q8_0) {
    quant_q8_0(x, y);
  } else {
    quant_iq4_nl(x, y);
  }
}

// One block of 32 values y from its type_size bytes b (ggml_quants.cpp deq_*). Q4_1 and Q5_1's
// q * d + m is a multiply, then an add, as the CPU computes it where it is built without FMA
// (KVLAB_NATIVE=OFF, as build/gpu is); a -march=native build on an FMA machine fuses the two and
// may differ from these values in the last bit.
template <GgmlType T>
__device__ __forceinline__ void dequant_ggml_block(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  if constexpr (T == GgmlType::Q8_0) {
    for (int j = 0; j < kGgmlBlock; ++j) {
      y[j] = __fmul_rn(
          static_cast<float>(static_cast<std::int8_t>(b[offsetof(ggml_block::Q8_0, qs) + j])), d);
    }
  } else if constexpr (T == GgmlType::Q4_0) {
    for (int j = 0; j < 16; ++j) {
      y[j] = __fmul_rn(static_cast<float>((b[offsetof(ggml_block::Q4_0, qs) + j] & 0xF) - 8), d);
      y[j + 16] =
          __fmul_rn(static_cast<float>((b[offsetof(ggml_block::Q4_0, qs) + j] >> 4) - 8), d);
    }
  } else if constexpr (T == GgmlType::Q4_1) {
    const float m = load_f16(b + offsetof(ggml_block::Q4_1, m));
    for (int j = 0; j < 16; ++j) {
      y[j] = __fadd_rn(
          __fmul_rn(static_cast<float>(b[offsetof(ggml_block::Q4_1, qs) + j] & 0xF), d), m);
      y[j + 16] = __fadd_rn(
          __fmul_rn(static_cast<float>(b[offsetof(ggml_block::Q4_1, qs) + j] >> 4), d), m);
    }
  } else if constexpr (T == GgmlType::Q5_0) {
    const std::uint32_t qh = load_u32(b + offsetof(ggml_block::Q5_0, qh));
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      y[j] = __fmul_rn(
          static_cast<float>(((b[offsetof(ggml_block::Q5_0, qs) + j] & 0xF) | h0) - 16), d);
      y[j + 16] = __fmul_rn(
          static_cast<float>(((b[offsetof(ggml_block::Q5_0, qs) + j] >> 4) | h1) - 16), d);
    }
  } else if constexpr (T == GgmlType::Q5_1) {
    const float m = load_f16(b + offsetof(ggml_block::Q5_1, m));
    const std::uint32_t qh = load_u32(b + offsetof(ggml_block::Q5_1, qh));
    for (int j = 0; j < 16; ++j) {
      const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
      y[j] = __fadd_rn(
          __fmul_rn(static_cast<float>((b[offsetof(ggml_block::Q5_1, qs) + j] & 0xF) | h0), d), m);
      y[j + 16] = __fadd_rn(
          __fmul_rn(static_cast<float>((b[offsetof(ggml_block::Q5_1, qs) + j] >> 4) | h1), d), m);
    }
  } else {  // IQ4_NL: d * kvalues_iq4nl[nibble]
    for (int j = 0; j < 16; ++j) {
      y[j] = __fmul_rn(
          d, static_cast<float>(kIq4nlLevels[b[offsetof(ggml_block::IQ4_NL, qs) + j] & 0xF]));
      y[j + 16] = __fmul_rn(
          d, static_cast<float>(kIq4nlLevels[b[offsetof(ggml_block::IQ4_NL, qs) + j] >> 4]));
    }
  }
}

// One thread per 32-value block: `blocks` blocks of floats read from `src` (stored as `dtype`)
// into type_size-byte blocks at `codes`.
template <GgmlType T>
__global__ void ggml_quantize_kernel(const void* src, DType dtype, std::size_t blocks,
                                     int type_size, std::uint8_t* codes) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += stride) {
    float x[kGgmlBlock];
    for (int j = 0; j < kGgmlBlock; ++j) x[j] = load_element(src, dtype, b * kGgmlBlock + j);
    quant_ggml_block<T>(x, codes + b * type_size);
  }
}

template <GgmlType T>
__global__ void ggml_dequantize_kernel(const std::uint8_t* codes, std::size_t blocks, int type_size,
                                       float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += stride) {
    dequant_ggml_block<T>(codes + b * type_size, out + b * kGgmlBlock);
  }
}

// llama.cpp's attn_rot as kvlab computes it (rotation.cpp hadamard_transform, the same values as
// ggml_block_quantizer.cpp's AVX-512 hadamard_n): each chunk of n values (n a power of two) of
// `src` gets the butterflies of stride 1, 2, 4, ... (a + b to the lower, a - b to the upper of
// each pair), then one multiply by `scale` = 1.0f / sqrtf(n), into `dst`. One CUDA block per
// chunk, working in place in dst: __syncthreads() between the stages orders the block's global
// memory accesses. dst may be src (dtype F32): each value is read and written by one thread.
__global__ void hadamard_chunks_kernel(const void* src, DType dtype, float* dst, int n, float scale,
                                       std::size_t chunks) {
  for (std::size_t c = blockIdx.x; c < chunks; c += gridDim.x) {
    const std::size_t base = c * static_cast<std::size_t>(n);
    float* v = dst + base;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v[i] = load_element(src, dtype, base + i);
    __syncthreads();
    for (int h = 1; h < n; h *= 2) {
      for (int p = threadIdx.x; p < n / 2; p += blockDim.x) {
        const int j = p / h * 2 * h + p % h;  // pair (j, j + h) of this stage
        const float a = v[j], b = v[j + h];
        v[j] = __fadd_rn(a, b);
        v[j + h] = __fsub_rn(a, b);
      }
      __syncthreads();
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) v[i] = __fmul_rn(v[i], scale);
    __syncthreads();
  }
}

}  // namespace kvlab::cuda::block_quant
