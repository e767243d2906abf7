#include "kvlab/engine/core/dtype.h"

#include <bit>
#include <cassert>
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace kvlab {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F32:
      return "f32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  if (name == "f16" || name == "fp16" || name == "float16" || name == "F16") return DType::F16;
  if (name == "bf16" || name == "bfloat16" || name == "BF16") return DType::BF16;
  if (name == "f32" || name == "fp32" || name == "float32" || name == "F32") return DType::F32;
  return std::nullopt;
}

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: value = mant * 2^-24
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return (sign != 0u) ? -v : v;
  }
  return std::bit_cast<float>(bits);
}

float bf16_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  const std::uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

void fp16_to_float(std::span<const std::uint16_t> in, std::span<float> out) {
  std::size_t i = 0;
  const std::size_t n = in.size();
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i));
    _mm256_storeu_ps(out.data() + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) out[i] = fp16_to_float(in[i]);
}

void float_to_fp16(std::span<const float> in, std::span<std::uint16_t> out) {
  std::size_t i = 0;
  const std::size_t n = in.size();
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_loadu_ps(in.data() + i);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + i),
                     _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
  }
#endif
  for (; i < n; ++i) out[i] = float_to_fp16(in[i]);
}

void convert_to_float(DType t, std::span<const std::byte> src_bytes, std::span<float> out_floats) {
  const std::size_t count = out_floats.size();
  if (count == 0) return;  // empty tensors may have null buffers
  assert(src_bytes.size() >= count * dtype_size(t));
  const std::byte* src = src_bytes.data();
  float* out = out_floats.data();
  switch (t) {
    case DType::F32:
      std::memcpy(out, src, count * sizeof(float));
      return;
    case DType::F16:
      fp16_to_float({reinterpret_cast<const std::uint16_t*>(src), count}, {out, count});
      return;
    case DType::BF16: {
      const auto* b = reinterpret_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < count; ++i) out[i] = bf16_to_float(b[i]);
      return;
    }
  }
}

void convert_from_float(DType t, std::span<const float> src_floats,
                        std::span<std::byte> dst_bytes) {
  const std::size_t count = src_floats.size();
  if (count == 0) return;
  assert(dst_bytes.size() >= count * dtype_size(t));
  const float* src = src_floats.data();
  std::byte* dst = dst_bytes.data();
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case DType::F16:
      float_to_fp16({src, count}, {reinterpret_cast<std::uint16_t*>(dst), count});
      return;
    case DType::BF16: {
      auto* b = reinterpret_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < count; ++i) b[i] = float_to_bf16(src[i]);
      return;
    }
  }
}

}  // namespace kvlab
