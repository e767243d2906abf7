// Element types a KV cache can be stored in, and conversions between them and float.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kvlab {

enum class DType : std::uint8_t { F16, BF16, F32 };

constexpr std::size_t dtype_size(DType t) {
  return t == DType::F32 ? 4 : 2;
}
std::string_view dtype_name(DType t);                     // "f16", "bf16", "f32"
std::optional<DType> parse_dtype(std::string_view name);  // also accepts "fp16", "float16", ...

// IEEE binary16 <-> binary32, round to nearest even, NaN and infinities preserved.
float fp16_to_float(std::uint16_t h);
std::uint16_t float_to_fp16(float f);
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
