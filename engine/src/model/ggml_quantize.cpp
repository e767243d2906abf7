// Quantization of floats into ggml's 32-value block types, bit for bit as llama.cpp.
//
// Reference (ggml-org/llama.cpp, ggml/src/ggml-quants.c): quantize_row_q4_0_ref,
// quantize_row_q4_1_ref, quantize_row_q5_0_ref, quantize_row_q5_1_ref, quantize_row_q8_0_ref,
// quantize_row_iq4_nl_ref and quantize_iq4_nl (both through quantize_row_iq4_nl_impl, and
// best_index_int8); the block layouts of ggml/src/ggml-common.h; GGML_FP32_TO_FP16
// (ggml_compute_fp32_to_fp16 of ggml-impl.h: round to nearest even, NaN to 0x7E00 with its sign),
// which kvlab's float_to_fp16 equals. Written anew from those functions: every float operation
// is the reference's, in its order, so that the bytes are equal (the tests compare with gguf-py
// and with libggml itself).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/model/ggml_block_rules.h"
#include "kvlab/engine/model/ggml_blocks.h"
#include "kvlab/engine/model/ggml_types.h"
#include "quant/ggml_block_quantizer.h"

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
#define KVLAB_GGML_QUANT_AVX512 1
#endif

// No fused multiply-add may join two of the reference's operations (-march=native offers FMA,
// and GCC contracts a*b+c by default even in ISO C++ mode; libggml-base is built without FMA).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace kvlab {

namespace {

constexpr int kBlock = 32;  // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK4_NL

// kvalues_iq4nl (ggml-common.h).
constexpr std::int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                    1,    13,   25,  38,  53,  69,  89,  113};

// One block by the reference functions (ggml_block_rules.h, which the GPU runs too).
void quant_block_scalar(GgmlType type, const float* x, std::uint8_t* y, int ntry) {
  switch (type) {
    case GgmlType::Q4_0:
      ggml_rules::quant_q4_0(x, y);
      break;
    case GgmlType::Q4_1:
      ggml_rules::quant_q4_1(x, y);
      break;
    case GgmlType::Q5_0:
      ggml_rules::quant_q5_0(x, y);
      break;
    case GgmlType::Q5_1:
      ggml_rules::quant_q5_1(x, y);
      break;
    case GgmlType::Q8_0:
      ggml_rules::quant_q8_0(x, y);
      break;
    default:
      ggml_rules::quant_iq4_nl(x, y, ntry, kIq4nl);
      break;
  }
}

using ggml_rules::store_f16;

#if defined(KVLAB_GGML_QUANT_AVX512)
// --- AVX-512 path ------------------------------------------------------------------------------
// The same float operations as the reference, value by value (x*id, + 8.5f, the x86 truncation
// cvttps2dq = trunc_x86, roundf as trunc plus a step where |fraction| >= 0.5, ...), so the bytes
// are equal. Only reductions are reorganised, where the result provably is the same: a block
// holding NaN or ±inf goes to the reference functions (the NaN-sensitive MAX and comparisons of
// the reference), and for finite values max/min are order-free except for the sign of a zero,
// which is taken from the first zero as the reference's strict comparisons do. IQ4_NL's sums
// stay sequential per block, several blocks interleaved.

// Whether any of the 32 values is NaN or ±inf (fpclass: QNaN 0x01, +inf 0x08, -inf 0x10, SNaN
// 0x80).
inline bool nonfinite(__m512 a, __m512 b) {
  return (_mm512_fpclass_ps_mask(a, 0x99) | _mm512_fpclass_ps_mask(b, 0x99)) != 0;
}

inline std::uint32_t mask32(__mmask16 lo, __mmask16 hi) {
  return static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
}

// signed_absmax of a finite block: the first value of the largest |x|; max = +0 when all are 0.
inline void signed_absmax_v(const float* x, __m512 v0, __m512 v1, float& amax, float& max) {
  const __m512 a0 = _mm512_abs_ps(v0), a1 = _mm512_abs_ps(v1);
  amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
  max = 0.0f;
  if (amax > 0.0f) {
    const __m512 m = _mm512_set1_ps(amax);
    const std::uint32_t at =
        mask32(_mm512_cmp_ps_mask(a0, m, _CMP_EQ_OQ), _mm512_cmp_ps_mask(a1, m, _CMP_EQ_OQ));
    max = x[std::countr_zero(at)];
  }
}

// min_max of a finite block: a zero result keeps the sign of the first zero (the reference only
// replaces on strictly smaller / larger).
inline void min_max_v(const float* x, __m512 v0, __m512 v1, float& min, float& max) {
  min = std::min(std::numeric_limits<float>::max(), _mm512_reduce_min_ps(_mm512_min_ps(v0, v1)));
  max = std::max(-std::numeric_limits<float>::max(), _mm512_reduce_max_ps(_mm512_max_ps(v0, v1)));
  if (min == 0.0f || max == 0.0f) {
    const __m512 z = _mm512_setzero_ps();
    const std::uint32_t at =
        mask32(_mm512_cmp_ps_mask(v0, z, _CMP_EQ_OQ), _mm512_cmp_ps_mask(v1, z, _CMP_EQ_OQ));
    const float first = x[std::countr_zero(at)];
    if (min == 0.0f) min = first;
    if (max == 0.0f) max = first;
  }
}

// (std::int8_t) trunc_x86(v) as int32: cvttps2dq (0x80000000 for NaN / out of range, as
// trunc_x86), then the low byte sign-extended.
inline __m512i to_int8_v(__m512 v) {
  return _mm512_srai_epi32(_mm512_slli_epi32(_mm512_cvttps_epi32(v), 24), 24);
}

// 16 bytes lo | hi << 4 from two int32 vectors (their low bytes, as the uint8 casts).
inline void store_nibbles(std::uint8_t* y, __m512i lo, __m512i hi) {
  const __m512i b = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 4));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm512_cvtepi32_epi8(b));
}

// Q5 layout: low nibbles as store_nibbles (masked to 4 bits), bit 4 into qh.
inline void store_q5(std::uint8_t* qh_at, std::uint8_t* qs, __m512i lo, __m512i hi) {
  const __m512i f = _mm512_set1_epi32(0x0F), b4 = _mm512_set1_epi32(0x10);
  store_nibbles(qs, _mm512_and_si512(lo, f), _mm512_and_si512(hi, f));
  const std::uint32_t qh = mask32(_mm512_test_epi32_mask(lo, b4), _mm512_test_epi32_mask(hi, b4));
  std::memcpy(qh_at, &qh, sizeof qh);
}

void fast_q4_0(const float* x, std::uint8_t* y) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  if (nonfinite(v0, v1)) return ggml_rules::quant_q4_0(x, y);
  float amax, max;
  signed_absmax_v(x, v0, v1, amax, max);
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  const __m512 vid = _mm512_set1_ps(id), off = _mm512_set1_ps(8.5f);
  const __m512i top = _mm512_set1_epi32(15);
  const __m512i q0 = _mm512_min_epi32(top, to_int8_v(_mm512_add_ps(_mm512_mul_ps(v0, vid), off)));
  const __m512i q1 = _mm512_min_epi32(top, to_int8_v(_mm512_add_ps(_mm512_mul_ps(v1, vid), off)));
  store_nibbles(y + offsetof(ggml_block::Q4_0, qs), q0, q1);
}

void fast_q4_1(const float* x, std::uint8_t* y) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  if (nonfinite(v0, v1)) return ggml_rules::quant_q4_1(x, y);
  float min, max;
  min_max_v(x, v0, v1, min, max);
  const float d = (max - min) / ((1 << 4) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  store_f16(y + offsetof(ggml_block::Q4_1, m), min);
  const __m512 vid = _mm512_set1_ps(id), vmin = _mm512_set1_ps(min), h = _mm512_set1_ps(0.5f);
  const __m512i top = _mm512_set1_epi32(15);
  const __m512i q0 = _mm512_min_epi32(
      top, to_int8_v(_mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v0, vmin), vid), h)));
  const __m512i q1 = _mm512_min_epi32(
      top, to_int8_v(_mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v1, vmin), vid), h)));
  store_nibbles(y + offsetof(ggml_block::Q4_1, qs), q0, q1);
}

void fast_q5_0(const float* x, std::uint8_t* y) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  if (nonfinite(v0, v1)) return ggml_rules::quant_q5_0(x, y);
  float amax, max;
  signed_absmax_v(x, v0, v1, amax, max);
  const float d = max / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  const __m512 vid = _mm512_set1_ps(id), off = _mm512_set1_ps(16.5f);
  const __m512i top = _mm512_set1_epi32(31);
  const __m512i q0 = _mm512_min_epi32(top, to_int8_v(_mm512_add_ps(_mm512_mul_ps(v0, vid), off)));
  const __m512i q1 = _mm512_min_epi32(top, to_int8_v(_mm512_add_ps(_mm512_mul_ps(v1, vid), off)));
  store_q5(y + offsetof(ggml_block::Q5_0, qh), y + offsetof(ggml_block::Q5_0, qs), q0, q1);
}

void fast_q5_1(const float* x, std::uint8_t* y) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  if (nonfinite(v0, v1)) return ggml_rules::quant_q5_1(x, y);
  float min, max;
  min_max_v(x, v0, v1, min, max);
  const float d = (max - min) / ((1 << 5) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  store_f16(y + offsetof(ggml_block::Q5_1, m), min);
  const __m512 vid = _mm512_set1_ps(id), vmin = _mm512_set1_ps(min), h = _mm512_set1_ps(0.5f);
  // to_uint8: the low byte of the truncation, no clamp.
  const __m512i q0 =
      _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v0, vmin), vid), h));
  const __m512i q1 =
      _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v1, vmin), vid), h));
  store_q5(y + offsetof(ggml_block::Q5_1, qh), y + offsetof(ggml_block::Q5_1, qs), q0, q1);
}

// roundf(v) (half away from zero) for every float: t = trunc(v), v - t exact, one step away from
// zero where |v - t| >= 0.5 (NaN and ±inf stay as they are).
inline __m512 roundf_v(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up =
      _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f),
                                  _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));  // copysign(1, v)
  return _mm512_mask_add_ps(t, up, t, one);
}

void fast_q8_0(const float* x, std::uint8_t* y) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  if (nonfinite(v0, v1)) return ggml_rules::quant_q8_0(x, y);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / ((1 << 7) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  const __m512 vid = _mm512_set1_ps(id);
  const __m512i q0 = _mm512_cvttps_epi32(roundf_v(_mm512_mul_ps(v0, vid)));
  const __m512i q1 = _mm512_cvttps_epi32(roundf_v(_mm512_mul_ps(v1, vid)));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + offsetof(ggml_block::Q8_0, qs)),
                   _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y + offsetof(ggml_block::Q8_0, qs) + 16),
                   _mm512_cvtepi32_epi8(q1));
}

// best_index_iq4nl without its branches: for finite x the reference's answer is the number of
// k in 0 … 14 with !(x - v[k] < v[k+1] - x) (below the interval holding x the test is false for
// every k, above it true, and in it it is the tie rule), and that test is monotone in x (both
// differences are rounded monotonically), so it is x >= T[k] for T[k] the least float that
// fails it: here, x counted against the 15 sorted T[k] (found once from the reference's own
// comparison) by a four-step branch-free search.
struct Iq4Thresholds {
  float t[16];
  Iq4Thresholds() {
    for (int k = 0; k < 15; ++k) {
      const float a = kIq4nl[k], b = kIq4nl[k + 1];
      const auto fails = [&](float x) { return !(x - a < b - x); };
      float v = (a + b) * 0.5f;
      while (!fails(v)) v = std::nextafter(v, b);
      while (fails(std::nextafter(v, a))) v = std::nextafter(v, a);
      t[k] = v;
    }
    t[15] = std::numeric_limits<float>::infinity();
  }
};
const Iq4Thresholds kIq4Thresholds;

// The codes of 16 finite values, given tables[s] = T[i + 2^s - 1] in lane i (s = 0, 1, 2).
inline __m512i best_index_v(__m512 x, const __m512 tables[3]) {
  __m512i k = _mm512_maskz_mov_epi32(
      _mm512_cmp_ps_mask(x, _mm512_set1_ps(kIq4Thresholds.t[7]), _CMP_GE_OQ), _mm512_set1_epi32(8));
  for (int s = 2; s >= 0; --s) {
    const __mmask16 ge = _mm512_cmp_ps_mask(x, _mm512_permutexvar_ps(k, tables[s]), _CMP_GE_OQ);
    k = _mm512_mask_add_epi32(k, ge, k, _mm512_set1_epi32(1 << s));
  }
  return k;
}

// GCC 12's unmasked AVX-512 intrinsics start from a self-initialised "undefined" vector, which
// -Wuninitialized reports once they are inlined here (GCC bug 105593, fixed in GCC 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// 16 x 16 32-bit values transposed in registers: lane j of r[i] <-> lane i of r[j].
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  // r[4g + c]: rows 4g … 4g + 3 of column c + 4L in 128-bit lane L.
  for (int g = 0; g < 16; g += 4) {
    r[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
    r[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
    r[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    r[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    // Rows 0 … 7 and 8 … 15: lanes of columns c, c + 8 (t[c], t[8 + c]) and c + 4, c + 12.
    for (int h = 0; h < 2; ++h) {
      const __m512 a = r[8 * h + c], b = r[8 * h + 4 + c];
      t[8 * h + c] = _mm512_shuffle_f32x4(a, b, 0x88);
      t[8 * h + 4 + c] = _mm512_shuffle_f32x4(a, b, 0xDD);
    }
    r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
    r[c + 8] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xDD);
    r[c + 4] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
    r[c + 12] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xDD);
  }
}

// IQ4_NL as the KV cache stores it (quantize_row_iq4_nl_ref, ntry = -1) for 16 blocks at `x`,
// one block per lane (the blocks transposed in registers): the reference's operations value by
// value, in its order, every sum sequential in its lane, so the same floats. Blocks holding NaN
// or ±inf go to the reference function; those below GROUP_MAX_EPS get scale 0 and codes 0.
constexpr int kGroup = 16;
void fast_iq4_nl_kv16(const float* x, std::uint8_t* y, int size) {
  __m512 v[kBlock];
  for (int b = 0; b < kGroup; ++b) {
    v[b] = _mm512_loadu_ps(x + b * kBlock);
    v[16 + b] = _mm512_loadu_ps(x + b * kBlock + 16);
  }
  transpose16(v);
  transpose16(v + 16);
  __mmask16 bad = 0;
  __m512 amax = _mm512_setzero_ps(), max = _mm512_setzero_ps();
  for (int j = 0; j < kBlock; ++j) {
    bad |= _mm512_fpclass_ps_mask(v[j], 0x99);
    const __m512 a = _mm512_abs_ps(v[j]);
    const __mmask16 gt = _mm512_cmp_ps_mask(a, amax, _CMP_GT_OQ);
    amax = _mm512_mask_mov_ps(amax, gt, a);
    max = _mm512_mask_mov_ps(max, gt, v[j]);
  }
  const __mmask16 used = _mm512_cmp_ps_mask(amax, _mm512_set1_ps(1e-15f), _CMP_NLT_UQ);
  const __m512 d = _mm512_div_ps(max, _mm512_set1_ps(kIq4nl[0]));
  const __m512 id = _mm512_div_ps(_mm512_set1_ps(1.0f), d);
  const __m512 levels =
      _mm512_setr_ps(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
  const __m512 th = _mm512_loadu_ps(kIq4Thresholds.t);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i last = _mm512_set1_epi32(15);
  const __m512 tables[3] = {
      th,
      _mm512_permutexvar_ps(_mm512_min_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(1)), last),
                            th),
      _mm512_permutexvar_ps(_mm512_min_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(3)), last),
                            th)};
  __m512 sqx = _mm512_setzero_ps(), sq2 = _mm512_setzero_ps();
  __m512 codes[kBlock / 2];
  for (int j = 0; j < kBlock; ++j) {
    const __m512i l = best_index_v(_mm512_mul_ps(id, v[j]), tables);
    const __m512 q = _mm512_permutexvar_ps(l, levels);
    const __m512 wq = _mm512_mul_ps(_mm512_mul_ps(v[j], v[j]), q);
    sqx = _mm512_add_ps(sqx, _mm512_mul_ps(wq, v[j]));
    sq2 = _mm512_add_ps(sq2, _mm512_mul_ps(wq, q));
    if (j < kBlock / 2) {
      codes[j] = _mm512_castsi512_ps(l);
    } else {  // byte j - 16 of each block: code j - 16 | code j << 4
      codes[j - 16] = _mm512_castsi512_ps(
          _mm512_maskz_or_epi32(used, _mm512_castps_si512(codes[j - 16]), _mm512_slli_epi32(l, 4)));
    }
  }
  const __mmask16 positive = _mm512_mask_cmp_ps_mask(used, sq2, _mm512_setzero_ps(), _CMP_GT_OQ);
  const __m512 scale = _mm512_maskz_div_ps(positive, sqx, sq2);
  alignas(32) std::uint16_t half[kGroup];
  _mm256_store_si256(reinterpret_cast<__m256i*>(half),
                     _mm512_cvtps_ph(scale, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  // cvtps_ph keeps a NaN's payload where GGML_FP32_TO_FP16 writes 0x7E00 with the sign.
  const __mmask16 nan = _mm512_cmp_ps_mask(scale, scale, _CMP_UNORD_Q);
  alignas(64) float scales[kGroup];
  if (nan != 0) _mm512_store_ps(scales, scale);
  transpose16(codes);
  for (int b = 0; b < kGroup; ++b) {
    std::uint8_t* yb = y + b * size;
    std::memcpy(yb, &half[b], sizeof half[b]);
    if ((nan >> b) & 1) store_f16(yb, scales[b]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(yb + offsetof(ggml_block::IQ4_NL, qs)),
                     _mm512_cvtepi32_epi8(_mm512_castps_si512(codes[b])));
    if ((bad >> b) & 1) ggml_rules::quant_iq4_nl(x + b * kBlock, yb, -1, kIq4nl);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Fewer than 16 blocks, through a zero-padded group.
void fast_iq4_nl_kv(const float* x, std::uint8_t* y, int blocks, int size) {
  if (blocks == kGroup) return fast_iq4_nl_kv16(x, y, size);
  alignas(64) float xs[kGroup * kBlock] = {};
  std::uint8_t ys[kGroup * 32];
  std::memcpy(xs, x, sizeof(float) * kBlock * blocks);
  fast_iq4_nl_kv16(xs, ys, size);
  std::memcpy(y, ys, static_cast<std::size_t>(size) * blocks);
}
#endif

}  // namespace

bool ggml_quantizable(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::IQ4_NL:
      return true;
    default:
      return false;
  }
}

bool ggml_quantize(GgmlType type, const float* src, std::int64_t n, std::uint8_t* dst,
                   GgmlQuantizeRule rule) {
#if defined(KVLAB_GGML_QUANT_AVX512)
  if (!ggml_quantizable(type) || n < 0 || n % kBlock != 0) return false;
  const int size = ggml_type_info(type)->type_size;
  const std::int64_t blocks = n / kBlock;
  void (*block)(const float*, std::uint8_t*) = nullptr;
  switch (type) {
    case GgmlType::Q4_0:
      block = fast_q4_0;
      break;
    case GgmlType::Q4_1:
      block = fast_q4_1;
      break;
    case GgmlType::Q5_0:
      block = fast_q5_0;
      break;
    case GgmlType::Q5_1:
      block = fast_q5_1;
      break;
    case GgmlType::Q8_0:
      block = fast_q8_0;
      break;
    default:
      // IQ4_NL's model-file rule (a 15-scale search) stays on the reference path.
      if (rule == GgmlQuantizeRule::ModelFile)
        return detail::ggml_quantize_scalar(type, src, n, dst, rule);
      for (std::int64_t b = 0; b < blocks; b += kGroup) {
        fast_iq4_nl_kv(src + b * kBlock, dst + b * size,
                       static_cast<int>(std::min<std::int64_t>(kGroup, blocks - b)), size);
      }
      return true;
  }
  for (std::int64_t b = 0; b < blocks; ++b) block(src + b * kBlock, dst + b * size);
  return true;
#else
  return detail::ggml_quantize_scalar(type, src, n, dst, rule);
#endif
}

namespace detail {

bool ggml_quantize_scalar(GgmlType type, const float* src, std::int64_t n, std::uint8_t* dst,
                          GgmlQuantizeRule rule) {
  if (!ggml_quantizable(type) || n < 0 || n % kBlock != 0) return false;
  const int size = ggml_type_info(type)->type_size;
  const int ntry = rule == GgmlQuantizeRule::ModelFile ? 7 : -1;
  for (std::int64_t b = 0; b < n / kBlock; ++b) {
    quant_block_scalar(type, src + b * kBlock, dst + b * size, ntry);
  }
  return true;
}

}  // namespace detail

}  // namespace kvlab
