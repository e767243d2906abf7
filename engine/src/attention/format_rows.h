// Private to the engine: rows of a stored cache in a serving engine's block format, read by the
// fused loops of fused_kernels.h (key_tile, value_tile) in place. Each type's load() / load16()
// decodes one lane group of 16 channels in registers, with the same arithmetic as the format's
// reference decoder, so the loops see the values the reconstruction holds and never a tile of
// them in memory:
//  - llama.cpp's blocks of 32 values, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL and MXFP4
//    (ggml/src/ggml-common.h; dequantize_row_* in ggml-quants.c; our deq_* in
//    model/ggml_quants.cpp): a row is the blocks back to back; a nibble byte j holds value j
//    (low nibble) and value j + 16 (high), so lane group 2b is block b's low nibbles and 2b + 1
//    its high ones, in channel order;
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
#include "kvlab/engine/model/ggml_blocks.h"
#include "kvlab/engine/model/ggml_types.h"
#include "quant/fp4_quantizer.h"  // e8m0_to_float_half
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

// llama.cpp's blocks of 32 values (ggml-common.h), a row of them back to back: lane group j is
// block j / 2's values 16 * (j % 2) to 16 * (j % 2) + 15, each an 8-bit integer code times the
// block's d (plus its m for Q4_1 and Q5_1). The codes, by type:
//  - Q4_0: nibble - 8; Q4_1: nibble; qs[i] holds value i (low nibble) and i + 16 (high);
//  - Q5_0: (nibble | fifth bit << 4) - 16; Q5_1: nibble | fifth bit << 4; bit i of the 32-bit
//    qh is value i's fifth bit;
//  - Q8_0: the signed byte;
//  - IQ4_NL: kvalues_iq4nl[nibble]; MXFP4: kvalues_mxfp4[nibble] (E2M1 doubled), its d the
//    E8M0 exponent byte's 2^(e - 127) / 2.
// d and m as the reference reads them (fp16, or E8M0); Q4_1 and Q5_1 add m with a fused
// multiply-add.
template <GgmlType T>
struct GgmlBlockOf;
template <>
struct GgmlBlockOf<GgmlType::Q4_0> {
  using type = ggml_block::Q4_0;
};
template <>
struct GgmlBlockOf<GgmlType::Q4_1> {
  using type = ggml_block::Q4_1;
};
template <>
struct GgmlBlockOf<GgmlType::Q5_0> {
  using type = ggml_block::Q5_0;
};
template <>
struct GgmlBlockOf<GgmlType::Q5_1> {
  using type = ggml_block::Q5_1;
};
template <>
struct GgmlBlockOf<GgmlType::Q8_0> {
  using type = ggml_block::Q8_0;
};
template <>
struct GgmlBlockOf<GgmlType::IQ4_NL> {
  using type = ggml_block::IQ4_NL;
};
template <>
struct GgmlBlockOf<GgmlType::MXFP4> {
  using type = ggml_block::MXFP4;
};

template <GgmlType T>
struct GgmlRows {
  using Block = typename GgmlBlockOf<T>::type;  // the layout: ggml_blocks.h
  static constexpr bool kNibbles = false;
  static constexpr bool kMin = T == GgmlType::Q4_1 || T == GgmlType::Q5_1;
  static constexpr bool kFifthBit = T == GgmlType::Q5_0 || T == GgmlType::Q5_1;
  static constexpr std::size_t kBlockBytes = sizeof(Block);

  const std::uint8_t* base;
  std::size_t stride;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}

  const std::uint8_t* block(std::size_t r, int b, float& d, float& m) const {
    const std::uint8_t* p = base + r * stride + static_cast<std::size_t>(b) * kBlockBytes;
    if constexpr (T == GgmlType::MXFP4) {
      d = e8m0_to_float_half(p[offsetof(Block, e)]);
    } else {
      d = half_at(p + offsetof(Block, d));
    }
    if constexpr (kMin) m = half_at(p + offsetof(Block, m));
    return p;
  }
  // The 16 codes as signed bytes from their nibbles `q` (one a byte) and, for Q5_0 / Q5_1, the
  // 16 fifth bits of their half of qh.
  static __m128i finish(__m128i q, std::uint32_t fifth) {
    if constexpr (kFifthBit) {
      // Byte i of the lane group takes bit i of the half's 16 bits: each byte of the two
      // spread over eight lanes, then tested against its lane's bit.
      const __m128i word = _mm_set1_epi16(static_cast<short>(fifth));
      const __m128i spread =
          _mm_shuffle_epi8(word, _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
      const __m128i bit = _mm_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
      const __m128i set = _mm_cmpeq_epi8(_mm_and_si128(spread, bit), bit);
      q = _mm_or_si128(q, _mm_and_si128(set, _mm_set1_epi8(16)));
    } else {
      static_cast<void>(fifth);
    }
    if constexpr (T == GgmlType::Q4_0) return _mm_sub_epi8(q, _mm_set1_epi8(8));
    if constexpr (T == GgmlType::Q5_0) return _mm_sub_epi8(q, _mm_set1_epi8(16));
    if constexpr (T == GgmlType::IQ4_NL || T == GgmlType::MXFP4) {
      // The nibbles index the type's 16 levels: one byte shuffle looks them all up.
      const std::int8_t* levels =
          T == GgmlType::IQ4_NL ? ggml_block::kIq4nlValues : ggml_block::kMxfp4Values;
      return _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)), q);
    }
    return q;
  }
  static std::uint32_t fifth_bits(const std::uint8_t* p) {
    std::uint32_t qh = 0;
    if constexpr (kFifthBit) std::memcpy(&qh, p + offsetof(Block, qh), sizeof qh);
    return qh;
  }

  // Lane group j of row r: its 16 codes as signed bytes, the block's d and (kMin) m.
  __m128i codes(std::size_t r, int j, float& d, float& m) const {
    const std::uint8_t* p = block(r, j / 2, d, m);
    const std::uint8_t* qs = p + offsetof(Block, qs);
    const int half = j % 2;
    if constexpr (T == GgmlType::Q8_0) {
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * half));
    }
    __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    if (half != 0) q = _mm_srli_epi16(q, 4);
    return finish(_mm_and_si128(q, _mm_set1_epi8(0x0f)), fifth_bits(p) >> (16 * half));
  }
  // Both lane groups of block b of row r (lane groups 2b and 2b + 1): one load of the block's
  // bytes and of its d and m for the two.
  void block_codes(std::size_t r, int b, __m128i& lo, __m128i& hi, float& d, float& m) const {
    const std::uint8_t* p = block(r, b, d, m);
    const std::uint8_t* qs = p + offsetof(Block, qs);
    if constexpr (T == GgmlType::Q8_0) {
      lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
      hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16));
    } else {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
      const __m128i low = _mm_set1_epi8(0x0f);
      const std::uint32_t fifth = fifth_bits(p);
      lo = finish(_mm_and_si128(q, low), fifth);
      hi = finish(_mm_and_si128(_mm_srli_epi16(q, 4), low), fifth >> 16);
    }
  }

  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    float d, m = 0.f;
    const __m128i q = codes(r, j, d, m);
    const __m256 dv = _mm256_set1_ps(d);
    a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
    if constexpr (kMin) {
      const __m256 mv = _mm256_set1_ps(m);
      a = _mm256_fmadd_ps(a, dv, mv);
      b = _mm256_fmadd_ps(b, dv, mv);
    } else {
      a = _mm256_mul_ps(a, dv);
      b = _mm256_mul_ps(b, dv);
    }
  }
#if KVLAB_FUSED_512
  static __m512 scaled(__m128i q, __m512 d, __m512 m) {
    const __m512 x = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q));
    if constexpr (kMin) return _mm512_fmadd_ps(x, d, m);
    static_cast<void>(m);
    return _mm512_mul_ps(x, d);
  }
  __m512 load16(std::size_t r, int j) const {
    float d, m = 0.f;
    const __m128i q = codes(r, j, d, m);
    return scaled(q, _mm512_set1_ps(d), _mm512_set1_ps(m));
  }
  // Lane groups j and j + 1 (j even: one block), as load16 gives each.
  void load_pair16(std::size_t r, int j, __m512& a, __m512& b) const {
    float d, m = 0.f;
    __m128i lo, hi;
    block_codes(r, j / 2, lo, hi, d, m);
    const __m512 dv = _mm512_set1_ps(d), mv = _mm512_set1_ps(m);
    a = scaled(lo, dv, mv);
    b = scaled(hi, dv, mv);
  }
#endif
};

// 16 4-bit codes packed two a byte, low nibble first, from the 8 bytes at `p`: one byte each, in
// channel order (low nibble, then high, of each byte).
inline __m128i nibbles_in_order(const std::uint8_t* p) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i low = _mm_set1_epi8(0x0f);
  return _mm_unpacklo_epi8(_mm_and_si128(bytes, low), _mm_and_si128(_mm_srli_epi16(bytes, 4), low));
}

// NVFP4's block scales of a tensor: entry b = e4m3(b) / global, the factor nvfp4_dequantize_row
// computes for a block whose scale byte is b. Worked out once per tensor, not once per block.
inline std::array<float, 256> nvfp4_block_scales(float global) {
  std::array<float, 256> t{};
  const auto& e4m3 = e4m3_table();
  for (std::size_t b = 0; b < t.size(); ++b) t[b] = e4m3[b] / global;
  return t;
}

// NVFP4: e2m1(code) * (e4m3(scale) / global). `scales` is the offset from a row's start to this
// head's first block scale; `block_scale` the tensor's nvfp4_block_scales.
struct Nvfp4Rows {
  static constexpr bool kNibbles = false;
  const std::uint8_t* base;
  std::size_t stride;
  std::size_t scales;
  const float* block_scale;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}
  // Lane group j's 16 codes in channel order as bytes (low nibble, then high, of each byte),
  // and its block's scale.
  __m128i codes(std::size_t r, int j, float& s) const {
    const std::uint8_t* row = base + r * stride;
    s = block_scale[row[scales + static_cast<std::size_t>(j)]];
    return nibbles_in_order(row + 8 * static_cast<std::size_t>(j));
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
    const __m128i q = nibbles_in_order(p);
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
    return _mm512_cvtepu8_epi32(nibbles_in_order(p));
  } else {
    std::int32_t w;
    std::memcpy(&w, p, sizeof w);
    const __m512i shifts =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    return _mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32(w), shifts), _mm512_set1_epi32(3));
  }
}
#endif

#if KVLAB_FUSED_512
// Two lane groups' codes (32 channels from `p`), as packed_codes16 gives each: 4-bit codes from
// one 16-byte load, both halves unpacked into channel order at once.
template <int Bits>
inline void packed_codes_pair16(const std::uint8_t* p, __m512i& a, __m512i& b) {
  if constexpr (Bits == 4) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i low = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(bytes, low), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low);
    a = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
    b = _mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi));
  } else {
    a = packed_codes16<Bits>(p);
    b = packed_codes16<Bits>(p + 2 * Bits);
  }
}
#endif

// FP8 (quant/fp8_impl.h): a head's codes times its scale (or the tensor's), decoded as
// fp8_decode_scaled decodes them (fp8_decode_scaled16 / 8).
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
    a = fp8_decode_scaled8<F>(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), scale);
    b = fp8_decode_scaled8<F>(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)), scale);
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    return fp8_decode_scaled16<F>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at(r, j))),
                                  scale);
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
  // Lane groups j and j + 1 (j even): one read of their step and minimum where a group spans
  // both (groups a multiple of 32 channels wide, as KIVI's G = 32 and 128 are).
  void load_pair16(std::size_t r, int j, __m512& a, __m512& b) const {
    if (width % (2 * kLaneGroup) != 0) {
      a = load16(r, j);
      b = load16(r, j + 1);
      return;
    }
    float step, min;
    __m512i ca, cb;
    packed_codes_pair16<Bits>(at(r, j, step, min), ca, cb);
    const __m512 s = _mm512_set1_ps(step), m = _mm512_set1_ps(min);
    a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ca), s, m);
    b = _mm512_fmadd_ps(_mm512_cvtepi32_ps(cb), s, m);
  }
#endif
};

#endif  // KVLAB_FUSED_SIMD

}  // namespace simd512 / simd256
}  // namespace kvlab::detail
