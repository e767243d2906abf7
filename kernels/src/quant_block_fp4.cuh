// NVFP4 and MXFP4 on the device: the CPU's scalar rules (engine/src/quant/fp4_quantizer.cpp,
// formulas in fp4_quantizer.h; the element rules themselves in quant/fp4_rules.h) one thread per
// block, the same float operations in the same order.
//  - NVFP4 (TensorRT-LLM cvt_warp_fp16_to_fp4, vLLM nvfp4_quant_kernels.cu): 16 values per block,
//    an E4M3 scale per block, an fp32 global scale 448 * 6 / amax per tensor, the CPU's IEEE
//    divisions (not the kernels' rcp.approx).
//  - MXFP4 (llama.cpp quantize_row_mxfp4_ref, block_mxfp4): 32 values per block, an E8M0
//    exponent byte and 16 nibble bytes.
// Included only by quant_block.cu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device_quantizer.cuh"
#include "kvlab/engine/quant/fp4_rules.h"
#include "kvlab/engine/quant/fp8_rules.h"

namespace kvlab::cuda::block_quant {

constexpr int kNvfp4Block = 16;
constexpr int kMxfp4Block = 32;
constexpr int kMxfp4Bytes = 17;  // sizeof(block_mxfp4): e8m0 + 16 nibble bytes

// max |x| with NaN left out (the CPU's block_amax and tensor_amax); +-inf counts.
__device__ __forceinline__ float amax_of(float amax, float x) {
  const float a = fabsf(x);
  return a > amax ? a : amax;
}

// NVFP4's per-tensor amax as the bit pattern of a non-negative float (which orders as unsigned),
// by atomicMax into *bits (zeroed before).
__global__ void tensor_amax_kernel(const void* src, DType dtype, std::size_t n,
                                   unsigned int* bits) {
  float amax = 0.0f;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    amax = amax_of(amax, load_element(src, dtype, i));
  }
  unsigned int m = __float_as_uint(amax);
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) atomicMax(bits, m);
}

__global__ void nvfp4_global_kernel(const unsigned int* amax_bits, float* global) {
  *global = detail::nvfp4_global_scale(__uint_as_float(*amax_bits));
}

// e2m1_encode(x * s) as the CPU gets it on x86, for a scale s that is not NaN: a NaN x gives its
// own NaN (sign kept; CUDA's product would lose it), and x * s = 0 * inf gives x86's default NaN
// (negative), code 0x8.
__device__ __forceinline__ std::uint8_t e2m1_code(float x, float s) {
  if (isnan(x)) return detail::e2m1_encode(x);
  const float y = __fmul_rn(x, s);
  return detail::e2m1_encode(x86_nan(y));
}

// One thread per 16-value block (nvfp4_quantize_row): nibbles at `nibbles` (element 2i in the low
// nibble of byte i), one E4M3 scale byte per block at `scales`.
__global__ void nvfp4_quantize_kernel(const void* src, DType dtype, std::size_t blocks,
                                      const float* global_scale, std::uint8_t* nibbles,
                                      std::uint8_t* scales) {
  const float global = *global_scale;
  const float inv_global = __fdiv_rn(1.0f, global);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += stride) {
    float x[kNvfp4Block];
    float amax = 0.0f;
    for (int j = 0; j < kNvfp4Block; ++j) {
      x[j] = load_element(src, dtype, b * kNvfp4Block + j);
      amax = amax_of(amax, x[j]);
    }
    // Neither factor is ever NaN, so a NaN sf is 0 * inf: x86's default NaN, E4M3 code 0xff.
    const float sf = x86_nan(detail::nvfp4_block_scale(global, amax));
    const std::uint8_t sf8 = detail::fp8_encode<detail::E4M3>(sf);
    scales[b] = sf8;
    std::uint8_t* out = nibbles + b * (kNvfp4Block / 2);
    if ((sf8 & 0x7fu) == 0x7fu) {
      // A NaN block scale: out = 1 / (NaN * inv_global) keeps the scale's NaN and its sign, and
      // the CPU writes that sign with magnitude 0 for every value of the block.
      const std::uint8_t fill = (sf8 & 0x80u) ? 0x88 : 0x00;
      for (int j = 0; j < kNvfp4Block / 2; ++j) out[j] = fill;
      continue;
    }
    const float out_scale =
        detail::nvfp4_value_factor(detail::fp8_decode<detail::E4M3>(sf8), inv_global);
    for (int j = 0; j < kNvfp4Block / 2; ++j) {
      const std::uint8_t lo = e2m1_code(x[2 * j], out_scale);
      const std::uint8_t hi = e2m1_code(x[2 * j + 1], out_scale);
      out[j] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
  }
}

// fp4_quantizer.cpp's kE2m1Magnitudes and e2m1_to_float: code = sign << 3 | magnitude index.
__constant__ const float kE2m1Magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
__device__ __forceinline__ float e2m1_value(std::uint32_t code) {
  const float m = kE2m1Magnitudes[code & 0x7u];
  return (code & 0x8u) ? -m : m;
}

// vLLM's reference dequantization: e2m1 * (float(sf8) / global).
__global__ void nvfp4_dequantize_kernel(const std::uint8_t* nibbles, const std::uint8_t* scales,
                                        const float* global_scale, std::size_t blocks, float* out) {
  const float global = *global_scale;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += stride) {
    const float s = __fdiv_rn(detail::fp8_decode<detail::E4M3>(scales[b]), global);
    const std::uint8_t* in = nibbles + b * (kNvfp4Block / 2);
    float* o = out + b * kNvfp4Block;
    for (int j = 0; j < kNvfp4Block / 2; ++j) {
      o[2 * j] = __fmul_rn(e2m1_value(in[j] & 0xfu), s);
      o[2 * j + 1] = __fmul_rn(e2m1_value(in[j] >> 4), s);
    }
  }
}

// mxfp4_exponent_fast, then mxfp4_exponent: (uint8)(floorf(log2f(amax)) - 2 + 127), 0 for 0.
// The exponent field gives the answer except for zero, subnormals, the smallest exponents,
// infinity and mantissas within 2^-11 of the next power of two; there the CPU calls log2f, and
// this takes log2 in double rounded to float (a correctly rounded log2f: glibc's is within 0.75
// ulp, so the two can part only where log2 lies within a quarter ulp of half an ulp below an
// integer). fp16 and bf16 data never take that path (their mantissas end 13 zero bits early).
__device__ __forceinline__ std::uint8_t mxfp4_exponent(float amax) {
  const std::uint32_t bits = __float_as_uint(amax);
  const std::uint32_t biased = bits >> 23;
  if (biased >= 3 && biased <= 254 && (bits & 0x7fffffu) < 0x7ff000u) {
    return static_cast<std::uint8_t>(biased - 2);
  }
  if (!(amax > 0.0f)) return 0;
  const auto l = static_cast<float>(log2(static_cast<double>(amax)));
  float e = __fadd_rn(__fsub_rn(floorf(l), 2.0f), 127.0f);
  e = e < -256.0f ? -256.0f : (e > 255.0f ? 255.0f : e);  // std::clamp(e, -256.f, 255.f)
  return static_cast<std::uint8_t>(static_cast<int>(e));
}

// llama.cpp's kvalues_mxfp4: E2M1 magnitudes doubled, then their negatives (index 8 is +0).
__constant__ const float kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                             0, -1, -2, -3, -4, -6, -8, -12};

// One thread per 32-value block (mxfp4_quantize_row): |x| against the midpoints between
// neighbouring magnitudes (0.5, 1.5, 2.5, 3.5, 5, 7, 10 times d), ties to the smaller one; a
// value that rounds to zero takes index 0 whatever its sign; NaN index 0.
__global__ void mxfp4_quantize_kernel(const void* src, DType dtype, std::size_t blocks,
                                      std::uint8_t* codes) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += stride) {
    float x[kMxfp4Block];
    float amax = 0.0f;
    for (int j = 0; j < kMxfp4Block; ++j) {
      x[j] = load_element(src, dtype, b * kMxfp4Block + j);
      amax = amax_of(amax, x[j]);
    }
    const std::uint8_t e = mxfp4_exponent(amax);
    const float d = detail::e8m0_to_float_half(e);
    float t[7];
    for (int k = 0; k < 7; ++k) t[k] = __fmul_rn(detail::mxfp4_midpoint(k), d);
    std::uint8_t c[kMxfp4Block];
    for (int j = 0; j < kMxfp4Block; ++j) c[j] = detail::mxfp4_code(x[j], t);
    std::uint8_t* out = codes + b * kMxfp4Bytes;
    out[0] = e;
    for (int j = 0; j < kMxfp4Block / 2; ++j) {
      out[1 + j] = static_cast<std::uint8_t>(c[j] | (c[j + kMxfp4Block / 2] << 4));
    }
  }
}

// dequantize: kvalues_mxfp4[nibble] * d, low nibbles the first 16 values.
__global__ void mxfp4_dequantize_kernel(const std::uint8_t* codes, std::size_t blocks, float* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t b = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks;
       b += stride) {
    const std::uint8_t* block = codes + b * kMxfp4Bytes;
    const float d = detail::e8m0_to_float_half(block[0]);
    float* o = out + b * kMxfp4Block;
    for (int j = 0; j < kMxfp4Block / 2; ++j) {
      o[j] = __fmul_rn(kMxfp4Values[block[1 + j] & 0xfu], d);
      o[j + kMxfp4Block / 2] = __fmul_rn(kMxfp4Values[block[1 + j] >> 4], d);
    }
  }
}

}  // namespace kvlab::cuda::block_quant
