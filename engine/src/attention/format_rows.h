// Private to the engine: rows of a stored cache in a serving engine's block format, read by the
// fused loops of fused_kernels.h (key_tile, value_tile) in place. Each type's load() / load16()
// decodes one lane group of 16 channels in registers, with the same arithmetic as the format's
// reference decoder, so the loops see the values the reconstruction holds and never a tile of
// them in memory:
//  - llama.cpp's Q4_0 and Q8_0 (ggml/src/ggml-common.h block_q4_0 / block_q8_0;
//    dequantize_row_q4_0 / _q8_0 in ggml-quants.c; our deq_q4_0 / deq_q8_0 in
//    model/ggml_quants.cpp): a row is the blocks of 32 values back to back, an fp16 d then the
//    codes; Q4_0 byte j holds value j (low nibble) and value j + 16 (high), so lane group 2b is
//    block b's low nibbles and 2b + 1 its high ones, in channel order;
//  - NVFP4 (quant/fp4_quantizer.h): a token's nibbles (element 2i the low nibble of byte i) then
//    its E4M3 block scales, one per 16 values: a lane group is one block, e2m1(code) *
//    (e4m3(scale) / global) as nvfp4_dequantize_row computes it;
//  - FP8 E4M3 / E5M2 with a scale per tensor or head (fp8_decode_scaled's arithmetic);
//  - KIVI's groups (quant/group_quant.h): 2-, 4- or 8-bit codes packed LSB-first, each
//    min + code * step with group_decode_row's fused multiply-add.
// A row's `base` points at its KV head's part of the first row of a tile; rows are `stride`
// bytes apart (a token's whole row of every head).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "attention/fused_kernels.h"
#include "quant/fp8_impl.h"

namespace kvlab::detail {
#if KVLAB_FUSED_512
inline namespace simd512 {
#else
inline namespace simd256 {
#endif

#if KVLAB_FUSED_SIMD

inline float half_at(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

// Rows whose lane groups are 16 signed 8-bit codes times a scale: Derived::codes(r, j, d) gives
// lane group j of row r and its scale d.
template <class Derived>
struct ScaledCodeRows {
  static constexpr bool kNibbles = false;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    float d;
    const __m128i q = static_cast<const Derived&>(*this).codes(r, j, d);
    const __m256 dv = _mm256_set1_ps(d);
    a = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), dv);
    b = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), dv);
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    float d;
    const __m128i q = static_cast<const Derived&>(*this).codes(r, j, d);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), _mm512_set1_ps(d));
  }
#endif
};

// llama.cpp Q4_0: (nibble - 8) * d.
struct Q4_0Rows : ScaledCodeRows<Q4_0Rows> {
  static constexpr std::size_t kBlockBytes = 18;
  const std::uint8_t* base;
  std::size_t stride;
  Q4_0Rows(const std::uint8_t* base_, std::size_t stride_) : base(base_), stride(stride_) {}
  __m128i codes(std::size_t r, int j, float& d) const {
    const std::uint8_t* b = base + r * stride + static_cast<std::size_t>(j / 2) * kBlockBytes;
    d = half_at(b);
    __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2));
    if (j % 2 != 0) q = _mm_srli_epi16(q, 4);
    return _mm_sub_epi8(_mm_and_si128(q, _mm_set1_epi8(0x0f)), _mm_set1_epi8(8));
  }
};

// llama.cpp Q8_0: code * d.
struct Q8_0Rows : ScaledCodeRows<Q8_0Rows> {
  static constexpr std::size_t kBlockBytes = 34;
  const std::uint8_t* base;
  std::size_t stride;
  Q8_0Rows(const std::uint8_t* base_, std::size_t stride_) : base(base_), stride(stride_) {}
  __m128i codes(std::size_t r, int j, float& d) const {
    const std::uint8_t* b = base + r * stride + static_cast<std::size_t>(j / 2) * kBlockBytes;
    d = half_at(b);
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 + 16 * (j % 2)));
  }
};

// NVFP4: e2m1(code) * (e4m3(scale) / global). `scales` is the offset from a row's start to this
// head's first block scale; `e4m3` the 256 scale values, `global` the tensor's scale.
struct Nvfp4Rows {
  static constexpr bool kNibbles = false;
  const std::uint8_t* base;
  std::size_t stride;
  std::size_t scales;
  const float* e4m3;
  float global;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}
  // Lane group j's 16 codes in channel order as bytes (low nibble, then high, of each byte),
  // and its block's scale.
  __m128i codes(std::size_t r, int j, float& s) const {
    const std::uint8_t* row = base + r * stride;
    s = e4m3[row[scales + static_cast<std::size_t>(j)]] / global;
    const __m128i bytes =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + 8 * static_cast<std::size_t>(j)));
    const __m128i low = _mm_set1_epi8(0x0f);
    return _mm_unpacklo_epi8(_mm_and_si128(bytes, low),
                             _mm_and_si128(_mm_srli_epi16(bytes, 4), low));
  }
  // E2M1 magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}; bit 3 of a code is its sign.
  static __m256 e2m1(__m256i c) {
    const __m256 magnitude =
        _mm256_permutevar8x32_ps(_mm256_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f), c);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(8)), 28);
    return _mm256_xor_ps(magnitude, _mm256_castsi256_ps(sign));
  }
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    float s;
    const __m128i q = codes(r, j, s);
    const __m256 sv = _mm256_set1_ps(s);
    a = _mm256_mul_ps(e2m1(_mm256_cvtepu8_epi32(q)), sv);
    b = _mm256_mul_ps(e2m1(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8))), sv);
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    float s;
    const __m128i q = codes(r, j, s);
    const __m512 table = _mm512_setr_ps(0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f, -0.f, -0.5f, -1.f,
                                        -1.5f, -2.f, -3.f, -4.f, -6.f);
    return _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(q), table), _mm512_set1_ps(s));
  }
#endif
};

// 16 codes of `Bits` bits (2, 4 or 8; packed LSB-first, a row's code c at bit c * Bits: bitpack.h)
// from `p`, their first byte, in channel order as 32-bit lanes.
template <int Bits>
inline void packed_codes(const std::uint8_t* p, __m256i& a, __m256i& b) {
  static_assert(Bits == 2 || Bits == 4 || Bits == 8);
  if constexpr (Bits == 8) {
    a = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
  } else if constexpr (Bits == 4) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m128i low = _mm_set1_epi8(0x0f);
    const __m128i q =
        _mm_unpacklo_epi8(_mm_and_si128(bytes, low), _mm_and_si128(_mm_srli_epi16(bytes, 4), low));
    a = _mm256_cvtepu8_epi32(q);
    b = _mm256_cvtepu8_epi32(_mm_srli_si128(q, 8));
  } else {
    std::int32_t w;
    std::memcpy(&w, p, sizeof w);
    const __m256i word = _mm256_set1_epi32(w), three = _mm256_set1_epi32(3);
    a = _mm256_and_si256(_mm256_srlv_epi32(word, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                         three);
    b = _mm256_and_si256(_mm256_srlv_epi32(word, _mm256_setr_epi32(16, 18, 20, 22, 24, 26, 28, 30)),
                         three);
  }
}
#if KVLAB_FUSED_512
template <int Bits>
inline __m512i packed_codes16(const std::uint8_t* p) {
  static_assert(Bits == 2 || Bits == 4 || Bits == 8);
  if constexpr (Bits == 8) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else if constexpr (Bits == 4) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m128i low = _mm_set1_epi8(0x0f);
    return _mm512_cvtepu8_epi32(
        _mm_unpacklo_epi8(_mm_and_si128(bytes, low), _mm_and_si128(_mm_srli_epi16(bytes, 4), low)));
  } else {
    std::int32_t w;
    std::memcpy(&w, p, sizeof w);
    const __m512i shifts =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(w), shifts), _mm512_set1_epi32(3));
  }
}
#endif

// FP8 (quant/fp8_impl.h): a head's codes times its scale (or the tensor's), as
// fp8_decode_scaled computes them.
template <class F>
struct Fp8Rows {
  static constexpr bool kNibbles = false;
  const std::uint8_t* base;
  std::size_t stride;
  float scale;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}
  const std::uint8_t* at(std::size_t r, int j) const {
    return base + r * stride + static_cast<std::size_t>(kLaneGroup) * j;
  }
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    const std::uint8_t* p = at(r, j);
    const __m256 s = _mm256_set1_ps(scale);
    a = _mm256_mul_ps(
        fp8_decode8<F>(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))),
        s);
    b = _mm256_mul_ps(fp8_decode8<F>(_mm256_cvtepu8_epi32(
                          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)))),
                      s);
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    const __m512i c =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at(r, j))));
    return _mm512_mul_ps(fp8_decode16<F>(c), _mm512_set1_ps(scale));
  }
#endif
};

// Plain 2-, 4- or 8-bit codes, packed LSB-first, in channel order: KIVI's keys, whose step and
// minimum per channel the caller folds into the query (fold_keys) as KVComp's kernels do.
template <int Bits>
struct PackedRows {
  static constexpr bool kNibbles = false;
  const std::uint8_t* base;
  std::size_t stride;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}
  const std::uint8_t* at(std::size_t r, int j) const {
    return base + r * stride + static_cast<std::size_t>(j) * (2 * Bits);
  }
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    __m256i ca, cb;
    packed_codes<Bits>(at(r, j), ca, cb);
    a = _mm256_cvtepi32_ps(ca);
    b = _mm256_cvtepi32_ps(cb);
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    return _mm512_cvtepi32_ps(packed_codes16<Bits>(at(r, j)));
  }
#endif
};

// KIVI's values (per token, groups of `width` channels, a multiple of 16): each row's codes,
// then its fp16 steps, then its fp16 minimums. `steps` is the offset from a row's `base` to this
// head's first step, `mins` from a step to its minimum.
template <int Bits>
struct KiviValueRows {
  static constexpr bool kNibbles = false;
  const std::uint8_t* base;
  std::size_t stride;
  std::size_t steps;
  std::size_t mins;
  int width;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}
  // Lane group j's codes and its group's step and minimum.
  const std::uint8_t* at(std::size_t r, int j, float& step, float& min) const {
    const std::uint8_t* row = base + r * stride;
    const std::uint8_t* s =
        row + steps +
        2 * (static_cast<std::size_t>(j) * kLaneGroup / static_cast<std::size_t>(width));
    step = half_at(s);
    min = half_at(s + mins);
    return row + static_cast<std::size_t>(j) * (2 * Bits);
  }
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    float step, min;
    __m256i ca, cb;
    packed_codes<Bits>(at(r, j, step, min), ca, cb);
    const __m256 sv = _mm256_set1_ps(step), mv = _mm256_set1_ps(min);
    a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ca), sv, mv);
    b = _mm256_fmadd_ps(_mm256_cvtepi32_ps(cb), sv, mv);
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    float step, min;
    const std::uint8_t* p = at(r, j, step, min);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(packed_codes16<Bits>(p)), _mm512_set1_ps(step),
                           _mm512_set1_ps(min));
  }
#endif
};

#endif  // KVLAB_FUSED_SIMD

}  // namespace simd512 / simd256
}  // namespace kvlab::detail
