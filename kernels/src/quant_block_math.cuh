// Device ports of the CPU's scalar conversions that the block quantizers (quant_block.cu) must
// reproduce bit for bit: ggml_quantize.cpp's x86 float-to-integer casts and roundf, dtype.cpp's
// float_to_fp16, fp8_impl.h's E4M3 encoder and decoder, and x86's NaN rules where a NaN's sign
// reaches a stored byte. Every float operation is an explicit __f*_rn intrinsic, so that nvcc
// contracts nothing into an FMA the CPU does not do. Included only by quant_block*.cu(h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvlab::cuda::block_quant {

// x86's "QNaN floating-point indefinite", the NaN an SSE/AVX operation makes out of operands that
// are not NaN (0 * inf, inf - inf, inf / inf): its sign bit is set. CUDA's operations return
// 0x7fffffff instead, so wherever such a NaN's sign reaches a stored byte (an fp16 scale, an
// E4M3 scale, an E2M1 code) the quantizers put this one in its place.
__device__ __forceinline__ float x86_default_nan() {
  return __uint_as_float(0xffc00000u);
}

// ggml_quantize.cpp's trunc_x86: C's float-to-int conversion as x86-64 compiles it (cvttss2si):
// truncation toward zero, 0x80000000 for NaN and out-of-range values.
__device__ __forceinline__ std::int32_t trunc_x86(float v) {
  return (v > -2147483648.0f && v < 2147483648.0f) ? static_cast<std::int32_t>(v) : INT32_MIN;
}
__device__ __forceinline__ std::int8_t to_int8(float v) {
  return static_cast<std::int8_t>(trunc_x86(v));
}
__device__ __forceinline__ std::uint8_t to_uint8(float v) {
  return static_cast<std::uint8_t>(trunc_x86(v));
}

// C's roundf (halfway cases away from zero), as ggml_quantize.cpp's AVX-512 roundf_v computes it:
// t = trunc(v), v - t exact, one step away from zero where |v - t| >= 0.5. NaN and +-inf stay.
__device__ __forceinline__ float round_half_away(float v) {
  const float t = truncf(v);
  return fabsf(__fsub_rn(v, t)) >= 0.5f ? __fadd_rn(t, copysignf(1.0f, v)) : t;
}

// dtype.cpp's float_to_fp16 (= ggml's GGML_FP32_TO_FP16): round to nearest even, overflow to
// infinity, NaN to 0x7e00 with its sign (where __float2half_rn would keep payload bits).
__device__ __forceinline__ std::uint16_t float_to_fp16_bits(float f) {
  const std::uint32_t x = __float_as_uint(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  }
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {
    const float v = __fmul_rn(__uint_as_float(ax), 0x1p24f);
    const float r = __fsub_rn(__fadd_rn(v, 0x1p23f), 0x1p23f);
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(r));
  }
  std::uint32_t m = ax + 0xfffu + ((ax >> 13) & 1u);
  m -= 0x38000000u;
  return static_cast<std::uint16_t>(sign | (m >> 13));
}

// An fp16 stored little-endian at any address (ggml's block fields are unaligned).
__device__ __forceinline__ void store_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = float_to_fp16_bits(v);
  p[0] = static_cast<std::uint8_t>(h & 0xffu);
  p[1] = static_cast<std::uint8_t>(h >> 8);
}
__device__ __forceinline__ float load_f16(const std::uint8_t* p) {
  const auto h = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(h));
}

// fp8_impl.h's fp8_encode<E4M3>: round to nearest even, saturating at 448, NaN to 0x7f with the
// sign of the input.
__device__ __forceinline__ std::uint8_t e4m3_encode(float value) {
  const std::uint32_t u = __float_as_uint(value);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7fffffffu;
  const float q = __fmul_rn(__uint_as_float(a), 512.f);  // 2^(bias - 1 + mantissa bits)
  const auto sub = static_cast<std::uint32_t>(
      static_cast<int>(fminf(__fsub_rn(__fadd_rn(q, 0x1p23f), 0x1p23f), 255.f)));
  const std::uint32_t r = a + ((1u << 19) - 1u) + ((a >> 20) & 1u);
  const std::uint32_t normal = (r >> 20) - (static_cast<std::uint32_t>(127 - 7) << 3);
  std::uint32_t code = a < (static_cast<std::uint32_t>(127 + 1 - 7) << 23) ? sub : normal;
  code = code > 0x7eu ? 0x7eu : code;
  code = a > 0x7f800000u ? 0x7fu : code;
  return static_cast<std::uint8_t>(sign | code);
}

// fp8_decode<E4M3> (the CPU's e4m3 table): exact; 0x7f and 0xff are NaN.
__device__ __forceinline__ float e4m3_decode(std::uint8_t code) {
  const std::uint32_t e = (code >> 3) & 0xfu;
  const std::uint32_t m = code & 0x7u;
  float v;
  if (e == 0xfu && m == 0x7u) {
    v = __uint_as_float(0x7fc00000u);
  } else if (e == 0) {
    v = __fmul_rn(static_cast<float>(m), 0x1p-9f);  // m * 2^-9, exact
  } else {
    v = __uint_as_float(((e - 7u + 127u) << 23) | (m << 20));
  }
  return (code & 0x80u) ? -v : v;
}

}  // namespace kvlab::cuda::block_quant
