// The element rules of the per-tensor symmetric and the group (KIVI, age tiers, KVComp)
// quantizers, in one place for the CPU and the CUDA code: what step and minimum a unit stores,
// how a parameter is rounded to its stored dtype, and which code an element gets. Every function
// is inline and, under nvcc, __host__ __device__; the CPU quantizers (symmetric_quantizer.cpp,
// group_quant.cpp) and the kernels (kernels/src/quant_group.cu) call these and nothing else, so
// their codes and parameters are the same bytes by construction.
//
// Multiply-adds that decide a code are explicit fmas: a build that contracts a * b + c into one
// (the CPU's -march=native, nvcc's default) and one that does not give the same codes.
// Comparisons are written out (not fminf / fmaxf) so the CPU loops over them vectorise; inputs
// are finite (compress_cache checks).
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#include <bit>
#endif

#include "kvlab/engine/core/host_device.h"

namespace kvlab::rules {

KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float fused_multiply_add(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// ---- Per-tensor symmetric INT8 / INT4 (symmetric_quantizer.cpp) --------------------------------

// The largest code magnitude: 2^(bits-1) - 1 (127, 7).
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float symmetric_qmax(int bits) {
  return static_cast<float>((1 << (bits - 1)) - 1);
}

// scale = max|x| / qmax; 1 for an all-zero tensor (every code then the zero code).
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float symmetric_scale(float amax, int bits) {
  return amax > 0.f ? amax / symmetric_qmax(bits) : 1.f;
}

// The stored code of x: round(x / scale) offset by 2^(bits-1), in 1 .. 2 qmax + 1. x * inv lies
// in [-qmax, qmax]; adding 2^(bits-1) + 0.5 makes truncation round half up.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE std::uint8_t symmetric_code(float x, float inv, int bits) {
  const float offset = static_cast<float>(1 << (bits - 1)) + 0.5f;
  const float top = 2.f * symmetric_qmax(bits) + 1.5f;
  float v = fused_multiply_add(x, inv, offset);
  v = v < 1.f ? 1.f : v;
  v = v > top ? top : v;
  return static_cast<std::uint8_t>(static_cast<int>(v));
}

// ---- Group quantization (group_quant.h) --------------------------------------------------------

// Parameter dtypes, as DType's F16 / BF16 / F32 (dtype.h; kept apart so nvcc needs no engine
// header here).
enum class ParamDtype : std::uint8_t { F16, BF16, F32 };

// A step or minimum as its dtype stores it: fp16 rounded to nearest even and saturating at
// +-65504; bf16 rounded to nearest even; float32 as is.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float round_param(float v, ParamDtype dtype) {
  if (dtype == ParamDtype::F16) {
    v = v < -65504.f ? -65504.f : v;
    v = v > 65504.f ? 65504.f : v;
#if defined(__CUDACC__)
    return __half2float(__float2half_rn(v));
#else
    return static_cast<float>(static_cast<_Float16>(v));
#endif
  }
  if (dtype == ParamDtype::BF16) {
#if defined(__CUDACC__)
    return __bfloat162float(__float2bfloat16_rn(v));
#else
    const std::uint32_t x = std::bit_cast<std::uint32_t>(v);
    const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) & 0xffff0000u;
    return std::bit_cast<float>(rounded);
#endif
  }
  return v;
}

// A unit's minimum and maximum with -0 made +0 (x + 0 is +0 for either zero, x otherwise): the
// CPU's and the GPU's reductions visit a unit's values in different orders, and of a -0 and a
// +0 either may come out; normalised, both store the same bytes.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float unsigned_zero(float x) {
  return x + 0.0f;
}

// A unit's step before rounding: (max - min) / (2^bits - 1) under the Levels rule (KIVI), or
// rel_scale * (max - min) under the Relative rule (KVComp).
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float group_step(float range, bool relative, float rel_scale,
                                                      int bits) {
  return relative ? rel_scale * range : range / static_cast<float>((1 << bits) - 1);
}

// 1 / step, 0 for a zero step (a constant unit: every code 0).
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float group_inverse(float step) {
  return step > 0.f ? 1.f / step : 0.f;
}

// The code of x in a unit of minimum mn and inverse step inv: round((x - min) * inv) clamped to
// [0, max_code]. With float32 parameters x >= min holds exactly, so truncating q + 0.5 rounds; a
// minimum rounded to fp16 / bf16 may lie above x, hence the lower clamp.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE std::uint8_t group_code(float x, float mn, float inv,
                                                             float max_code) {
  float q = fused_multiply_add(x - mn, inv, 0.5f);
  const float top = max_code + 0.5f;
  q = q < top ? q : top;
  q = q > 0.f ? q : 0.f;
  return static_cast<std::uint8_t>(static_cast<int>(q));
}

}  // namespace kvlab::rules
