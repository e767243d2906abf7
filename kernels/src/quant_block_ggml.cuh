// llama.cpp's 32-value KV-cache blocks on the device: one thread per block. The quantizers are
// the CPU's own (engine/include/kvlab/engine/model/ggml_block_rules.h, written from llama.cpp's
// ggml/src/ggml-quants.c quantize_row_q4_0_ref, quantize_row_q4_1_ref, quantize_row_q5_0_ref,
// quantize_row_q5_1_ref, quantize_row_q8_0_ref and quantize_row_iq4_nl_ref with ntry = -1), so
// the bytes are the same. Decoders as engine/src/model/ggml_quants.cpp (dequantize_row_*).
// llama.cpp's attn_rot Hadamard (rotation.cpp hadamard_transform) as one CUDA block per rotated
// chunk. Included only by quant_block.cu.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>

#include "device_quantizer.cuh"
#include "kvlab/engine/model/ggml_block_rules.h"
#include "kvlab/engine/model/ggml_blocks.h"
#include "kvlab/engine/model/ggml_types.h"

namespace kvlab::cuda::block_quant {

// An fp16 stored little-endian at any address (ggml's block fields are unaligned).
__device__ __forceinline__ float load_f16(const std::uint8_t* p) {
  const auto h = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(h));
}

constexpr int kGgmlBlock = 32;  // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK4_NL

// kvalues_iq4nl (ggml-common.h).
__constant__ const std::int8_t kIq4nlLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                   1,    13,   25,  38,  53,  69,  89,  113};

__device__ __forceinline__ std::uint32_t load_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// One block by llama.cpp's reference functions (ggml_block_rules.h: the CPU's own), IQ4_NL as
// the KV cache's quantize_row_iq4_nl_ref (ntry = -1).
template <GgmlType T>
__device__ __forceinline__ void quant_ggml_block(const float* x, std::uint8_t* y) {
  if constexpr (T == GgmlType::Q4_0) {
    ggml_rules::quant_q4_0(x, y);
  } else if constexpr (T == GgmlType::Q4_1) {
    ggml_rules::quant_q4_1(x, y);
  } else if constexpr (T == GgmlType::Q5_0) {
    ggml_rules::quant_q5_0(x, y);
  } else if constexpr (T == GgmlType::Q5_1) {
    ggml_rules::quant_q5_1(x, y);
  } else if constexpr (T == GgmlType::Q8_0) {
    ggml_rules::quant_q8_0(x, y);
  } else {
    ggml_rules::quant_iq4_nl(x, y, -1, kIq4nlLevels);
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
