// Inline FP8 conversions, written so the quantizer's loops vectorise (no branches on data); the
// scalar encode and decode (fp8_rules.h) are the GPU's too.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kvlab/engine/quant/fp8_rules.h"
#include "quant/avx512.h"  // KVLAB_QUANT_AVX512: AVX-512 forms of the loops below

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kvlab::detail {

#if KVLAB_QUANT_AVX512
// fp8_encode<F> of 16 floats: each code in the low byte of its 32-bit lane, the rest zero.
template <class F>
inline __m512i fp8_encode16(__m512 value) {
  const __m512i u = _mm512_castps_si512(value);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
  const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __m512 q = _mm512_mul_ps(
      _mm512_castsi512_ps(a), _mm512_set1_ps(static_cast<float>(1u << (F::kBias - 1 + F::kMant))));
  const __m512 rounded =
      _mm512_sub_ps(_mm512_add_ps(q, _mm512_set1_ps(0x1p23f)), _mm512_set1_ps(0x1p23f));
  // min_ps gives its second operand for NaN, as fmin(NaN, 255) gives 255.
  const __m512i sub = _mm512_cvttps_epi32(_mm512_min_ps(rounded, _mm512_set1_ps(255.f)));
  constexpr int kShift = 23 - F::kMant;
  const __m512i r =
      _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32((1 << (kShift - 1)) - 1)),
                       _mm512_and_si512(_mm512_srli_epi32(a, kShift), _mm512_set1_epi32(1)));
  const __m512i normal = _mm512_sub_epi32(_mm512_srli_epi32(r, kShift),
                                          _mm512_set1_epi32((127 - F::kBias) << F::kMant));
  constexpr std::uint32_t kMinNormalBits = static_cast<std::uint32_t>(127 + 1 - F::kBias) << 23;
  const __mmask16 is_sub =
      _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(static_cast<int>(kMinNormalBits)));
  __m512i code = _mm512_mask_blend_epi32(is_sub, normal, sub);
  code = _mm512_min_epu32(code, _mm512_set1_epi32(static_cast<int>(F::kMaxCode)));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
  code = _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(0x7f));
  return _mm512_or_si512(code, sign);
}
#endif

// fp8_decode<F>(codes[i]) * scale for n codes, without branches on the data: a normal code's
// exponent and mantissa move into a float's and the exponent is rebiased; a subnormal code is its
// mantissa times the subnormal step. Every finite code gives fp8_decode's value exactly (so the
// product is the same float); the codes that fp8_decode reads as NaN or infinity, which no
// quantizer here writes (they saturate), give finite values. 16 codes at a time with AVX-512.
template <class F>
inline float fp8_decode_finite(std::uint32_t c) {
  constexpr std::uint32_t kRebias = static_cast<std::uint32_t>(127 - F::kBias) << 23;
  constexpr float kSubStep = 1.f / static_cast<float>(1u << (F::kBias - 1 + F::kMant));
  const std::uint32_t magnitude = c & 0x7fu;
  const float normal = std::bit_cast<float>((magnitude << (23 - F::kMant)) + kRebias);
  const float sub = static_cast<float>(magnitude) * kSubStep;
  const float v = magnitude < (1u << F::kMant) ? sub : normal;
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) | ((c & 0x80u) << 24));
}

#if defined(__AVX512F__)
// fp8_decode_finite<F> of 16 codes, one in the low byte of each 32-bit lane.
template <class F>
inline __m512 fp8_decode16(__m512i c) {
  const __m512i rebias = _mm512_set1_epi32((127 - F::kBias) << 23);
  const __m512 sub_step = _mm512_set1_ps(1.f / static_cast<float>(1u << (F::kBias - 1 + F::kMant)));
  const __m512i magnitude = _mm512_and_si512(c, _mm512_set1_epi32(0x7f));
  const __m512 normal =
      _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(magnitude, 23 - F::kMant), rebias));
  const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(magnitude), sub_step);
  const __mmask16 is_sub = _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(1 << F::kMant));
  const __m512i v = _mm512_castps_si512(_mm512_mask_blend_ps(is_sub, normal, sub));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
  return _mm512_castsi512_ps(_mm512_or_si512(v, sign));
}
#endif
#if defined(__F16C__) && defined(__AVX2__)
// E4M3 codes as the fp16 bit patterns of their values divided by 2^8: the sign to bit 15, the
// exponent and mantissa to bits 13..7 (fp16's exponent bias is 15, E4M3's 7, so the fp16 reads
// exactly 2^-8 times the code's value, subnormals included: both formats' subnormals step by
// 2^(1 - bias - mantissa bits)). fp16's exponent field never reaches 31 this way, so every code
// gives fp8_decode_finite's value; the caller multiplies by 2^8 (folded into its scale).
inline __m128i e4m3_halves8(__m128i codes16) {  // 8 codes in the low half of each 16-bit lane
  const __m128i magnitude = _mm_and_si128(_mm_slli_epi16(codes16, 7), _mm_set1_epi16(0x3f80));
  const __m128i sign =
      _mm_and_si128(_mm_slli_epi16(codes16, 8), _mm_set1_epi16(static_cast<short>(0x8000)));
  return _mm_or_si128(magnitude, sign);
}
inline __m256i e4m3_halves16(__m256i codes16) {  // 16 codes, one a 16-bit lane
  const __m256i magnitude =
      _mm256_and_si256(_mm256_slli_epi16(codes16, 7), _mm256_set1_epi16(0x3f80));
  const __m256i sign = _mm256_and_si256(_mm256_slli_epi16(codes16, 8),
                                        _mm256_set1_epi16(static_cast<short>(0x8000)));
  return _mm256_or_si256(magnitude, sign);
}
#endif
#if defined(__AVX2__)
// The same for 8 codes (the fused attention loops' AVX2 form).
template <class F>
inline __m256 fp8_decode8(__m256i c) {
  const __m256i rebias = _mm256_set1_epi32((127 - F::kBias) << 23);
  const __m256 sub_step = _mm256_set1_ps(1.f / static_cast<float>(1u << (F::kBias - 1 + F::kMant)));
  const __m256i magnitude = _mm256_and_si256(c, _mm256_set1_epi32(0x7f));
  const __m256 normal =
      _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(magnitude, 23 - F::kMant), rebias));
  const __m256 sub = _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), sub_step);
  // magnitude < 2^mant as a signed compare: both are small non-negative integers.
  const __m256 is_sub =
      _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(1 << F::kMant), magnitude));
  const __m256i v = _mm256_castps_si256(_mm256_blendv_ps(normal, sub, is_sub));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
  return _mm256_castsi256_ps(_mm256_or_si256(v, sign));
}
#endif

// fp8_decode_finite<F>(code) * scale for the 16 codes of `codes` (fp8_decode_scaled16) or the 8
// of its low half (fp8_decode_scaled8): E4M3 through F16C (e4m3_halves16 / 8, 6 operations for 16
// codes where the float bit assembly takes 11) with the 2^8 folded into the scale, which gives
// the same floats (both multiply the code's exact value by the scale); other formats by
// fp8_decode16 / 8. The tile decoder below and the fused attention's FP8 rows
// (attention/format_rows.h) both decode through these.
#if defined(__AVX512F__)
template <class F>
inline __m512 fp8_decode_scaled16(__m128i codes, float scale) {
#if defined(__F16C__)
  if constexpr (std::is_same_v<F, E4M3>) {
    return _mm512_mul_ps(_mm512_cvtph_ps(e4m3_halves16(_mm256_cvtepu8_epi16(codes))),
                         _mm512_set1_ps(scale * 256.f));
  }
#endif
  return _mm512_mul_ps(fp8_decode16<F>(_mm512_cvtepu8_epi32(codes)), _mm512_set1_ps(scale));
}
#endif
#if defined(__AVX2__)
template <class F>
inline __m256 fp8_decode_scaled8(__m128i codes, float scale) {
#if defined(__F16C__)
  if constexpr (std::is_same_v<F, E4M3>) {
    return _mm256_mul_ps(_mm256_cvtph_ps(e4m3_halves8(_mm_cvtepu8_epi16(codes))),
                         _mm256_set1_ps(scale * 256.f));
  }
#endif
  return _mm256_mul_ps(fp8_decode8<F>(_mm256_cvtepu8_epi32(codes)), _mm256_set1_ps(scale));
}
#endif

template <class F>
inline void fp8_decode_scaled(const std::uint8_t* codes, std::size_t n, float scale, float* out) {
  std::size_t i = 0;
#if KVLAB_QUANT_AVX512
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i,
                     fp8_decode_scaled16<F>(
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)), scale));
  }
#endif
  for (; i < n; ++i) out[i] = fp8_decode_finite<F>(codes[i]) * scale;
}

}  // namespace kvlab::detail
