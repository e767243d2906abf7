// FP8 <-> float conversions for the FP8 device quantizer (quant_fp8.cu): line-for-line ports of
// the CPU's fp8_encode / fp8_decode (engine/src/quant/fp8_impl.h), on the same format traits, so
// every code and every decoded value has the CPU's bits. __host__ __device__ so that a host test
// can hold them to the CPU functions over every float; on the device each float operation is an
// explicitly rounded intrinsic (no FMA contraction), on the host the plain operator.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "kvlab/engine/core/host_device.h"
#include "quant/fp8_impl.h"

namespace kvlab::cuda::fp8 {

__host__ __device__ __forceinline__ float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

__host__ __device__ __forceinline__ float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

__host__ __device__ __forceinline__ float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// detail::fp8_encode<F>: round to nearest even, saturate to +-max (infinities too), NaN -> 0x7f
// with the input's sign.
template <class F>
__host__ __device__ __forceinline__ std::uint8_t encode(float value) {
  const std::uint32_t u = bits_from_float(value);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7fffffffu;
  // Below the smallest normal: a multiple of the subnormal step, rounded to nearest even by the
  // float adder (q < 2^22, so adding 2^23 leaves integer resolution).
  const float q = mul_rn(float_from_bits(a), static_cast<float>(1u << (F::kBias - 1 + F::kMant)));
  const std::uint32_t sub = static_cast<std::uint32_t>(
      static_cast<int>(fminf(sub_rn(add_rn(q, 0x1p23f), 0x1p23f), 255.f)));
  // Normal: round the 23-bit mantissa to kMant bits (nearest even), then rebias the exponent.
  constexpr int kShift = 23 - F::kMant;
  const std::uint32_t r = a + ((1u << (kShift - 1)) - 1u) + ((a >> kShift) & 1u);
  const std::uint32_t normal =
      (r >> kShift) - (static_cast<std::uint32_t>(127 - F::kBias) << F::kMant);
  constexpr std::uint32_t kMinNormalBits = static_cast<std::uint32_t>(127 + 1 - F::kBias) << 23;
  std::uint32_t code = a < kMinNormalBits ? sub : normal;
  code = code > F::kMaxCode ? F::kMaxCode : code;  // saturate (infinities too)
  code = a > 0x7f800000u ? 0x7fu : code;           // NaN
  return static_cast<std::uint8_t>(sign | code);
}

// detail::fp8_decode<F>, built from the bits: ldexp of a kMant-bit mantissa is exact, and
// NaN is std::numeric_limits<float>::quiet_NaN() (0x7fc00000), negated for a negative code.
template <class F>
__host__ __device__ __forceinline__ float decode(std::uint8_t code) {
  constexpr int kMaxExp = (1 << F::kExp) - 1;
  constexpr int kMaxMant = (1 << F::kMant) - 1;
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const int e = (code >> F::kMant) & kMaxExp;
  const int m = code & kMaxMant;
  std::uint32_t bits;
  if (F::kHasInf && e == kMaxExp) {
    bits = m == 0 ? 0x7f800000u : 0x7fc00000u;
  } else if (!F::kHasInf && e == kMaxExp && m == kMaxMant) {
    bits = 0x7fc00000u;
  } else if (e == 0) {
    // m * 2^(1 - bias - mant): a small integer times a power of two, exact.
    const float step =
        float_from_bits(static_cast<std::uint32_t>(127 + 1 - F::kBias - F::kMant) << 23);
    bits = bits_from_float(mul_rn(static_cast<float>(m), step));
  } else {
    bits = (static_cast<std::uint32_t>(e - F::kBias + 127) << 23) |
           (static_cast<std::uint32_t>(m) << (23 - F::kMant));
  }
  return float_from_bits(bits | sign);
}

// The CPU computes x * inf (x = 0) and 0 / 0 on x86, whose generated NaN is the "default NaN"
// 0xffc00000 (sign set); the GPU's is 0x7fffffff. Only a scale that underflowed to 0 (a head of
// float32 values all below ~2^-141) gives one; the sign bit is what reaches the fp8 code.
__host__ __device__ __forceinline__ float as_x86_nan(float v) {
  return v != v ? float_from_bits(0xffc00000u) : v;
}

}  // namespace kvlab::cuda::fp8
