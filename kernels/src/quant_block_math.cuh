// Device forms of the CPU's scalar conversions that the block quantizers (quant_block.cu) must
// reproduce bit for bit: ggml_quantize.cpp's x86 float-to-integer casts and roundf, and x86's NaN
// rules where a NaN's sign reaches a stored byte; float_to_fp16 (core/dtype.h) and the E4M3
// scales (quant/fp8_rules.h) are the CPU's own functions. Every float operation is an explicit
// __f*_rn intrinsic, so that nvcc contracts nothing into an FMA the CPU does not do. Included only
// by quant_block*.cu(h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/quant/fp8_rules.h"

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

// An fp16 stored little-endian at any address (ggml's block fields are unaligned).
__device__ __forceinline__ void store_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = float_to_fp16(v);
  p[0] = static_cast<std::uint8_t>(h & 0xffu);
  p[1] = static_cast<std::uint8_t>(h >> 8);
}
__device__ __forceinline__ float load_f16(const std::uint8_t* p) {
  const auto h = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(h));
}

// The E4M3 block scales: the CPU's conversions themselves (fp8_rules.h).
__device__ __forceinline__ std::uint8_t e4m3_encode(float value) {
  return ::kvlab::detail::fp8_encode<::kvlab::detail::E4M3>(value);
}
__device__ __forceinline__ float e4m3_decode(std::uint8_t code) {
  return ::kvlab::detail::fp8_decode<::kvlab::detail::E4M3>(code);
}

}  // namespace kvlab::cuda::block_quant
