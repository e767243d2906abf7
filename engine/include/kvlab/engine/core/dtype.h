// Element types a KV cache can be stored in, and conversions between them and float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kvlab/engine/core/host_device.h"

namespace kvlab {

enum class DType : std::uint8_t { F16, BF16, F32 };

constexpr std::size_t dtype_size(DType t) {
  return t == DType::F32 ? 4 : 2;
}
std::string_view dtype_name(DType t);                     // "f16", "bf16", "f32"
std::optional<DType> parse_dtype(std::string_view name);  // also accepts "fp16", "float16", ...

// IEEE binary16 <-> binary32, round to nearest even, NaN and infinities preserved.
float fp16_to_float(std::uint16_t h);

// float -> fp16 bits (= ggml's GGML_FP32_TO_FP16): round to nearest even, overflow to infinity,
// NaN to 0x7e00 with its sign. One definition for the CPU and the CUDA kernels (__host__
// __device__ under nvcc), which store fp16 scales byte for byte as the CPU does.
KVLAB_HOST_DEVICE inline std::uint16_t float_to_fp16(float f) {
  const std::uint32_t x = bits_from_float(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) {  // inf or NaN
    return static_cast<std::uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  }
  if (ax >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: subnormal or zero in fp16
    // value * 2^24 (exact: a power of two), rounded to nearest even by the float adder, is the
    // subnormal mantissa.
    const float v = float_from_bits(ax) * 0x1p24f;
    const float r = (v + 0x1p23f) - 0x1p23f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(r));
  }
  // Normal: rebias the exponent, round the mantissa 23 -> 10 bits to nearest even.
  std::uint32_t m = ax + 0xfffu + ((ax >> 13) & 1u);
  m -= 0x38000000u;  // (127 - 15) << 23
  return static_cast<std::uint16_t>(sign | (m >> 13));
}
// bfloat16 <-> binary32 (round to nearest even; NaN stays NaN).
float bf16_to_float(std::uint16_t b);
std::uint16_t float_to_bf16(float f);

// Bulk conversions (vectorised with F16C where the CPU has it).
void fp16_to_float(std::span<const std::uint16_t> in, std::span<float> out);
void float_to_fp16(std::span<const float> in, std::span<std::uint16_t> out);
// Converts out.size() elements of type `t` from the start of `src` (at least
// out.size() * dtype_size(t) bytes) to float.
void convert_to_float(DType t, std::span<const std::byte> src, std::span<float> out);
// Converts the floats of `src` to type `t` at the start of `dst` (room for all of them).
void convert_from_float(DType t, std::span<const float> src, std::span<std::byte> dst);

}  // namespace kvlab
