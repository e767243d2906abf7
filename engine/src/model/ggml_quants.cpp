// ggml's tensor types and the dequantization of their blocks.
//
// Reference: llama.cpp, ggml/src/ggml-common.h (block_q4_0 … block_q8_K, block_iq4_nl,
// block_iq4_xs, block_tq1_0, block_tq2_0, block_mxfp4, block_nvfp4, block_q1_0, block_q2_0 and
// the kvalues_iq4nl / kvalues_mxfp4 tables), ggml/src/ggml-quants.c (dequantize_row_q4_0 …
// dequantize_row_q8_K, dequantize_row_iq4_nl, dequantize_row_iq4_xs, dequantize_row_tq1_0,
// dequantize_row_tq2_0, dequantize_row_mxfp4, dequantize_row_nvfp4, dequantize_row_q1_0,
// dequantize_row_q2_0, get_scale_min_k4), ggml/src/ggml-impl.h (ggml_e8m0_to_fp32_half,
// ggml_ue4m3_to_fp32) and ggml/src/ggml.c (type_traits: names, block and type sizes).
//
// Each block is decoded in the order its values take in the row, by a function of the block's
// bytes alone: the layout's field offsets are written out as constants (the structs are packed
// in ggml, so sizeof and the offsets are the sums of the field sizes), and every multi-byte field
// is read with memcpy, because a mapped GGUF file puts blocks at any address.
#include "kvlab/engine/model/ggml_types.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/model/ggml_blocks.h"

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kvlab {

static_assert(std::endian::native == std::endian::little,
              "GGUF blocks are little-endian and are read in place");

namespace {

constexpr int kQK_K = 256;  // QK_K: values per K-quant super-block (and TQ*, IQ4_XS)

// ---------------------------------------------------------------------------------------------
// Type table (ggml.c's type_traits).

constexpr std::uint32_t kTypeCount = 43;  // GGML_TYPE_COUNT

constexpr std::array<GgmlTypeInfo, kTypeCount> make_type_table() {
  std::array<GgmlTypeInfo, kTypeCount> t{};  // an empty name marks an undefined id
  auto set = [&t](GgmlType type, std::string_view name, int block, int size, bool deq) {
    t[static_cast<std::uint32_t>(type)] = GgmlTypeInfo{name, block, size, deq};
  };
  set(GgmlType::F32, "F32", 1, 4, true);
  set(GgmlType::F16, "F16", 1, 2, true);
  set(GgmlType::Q4_0, "Q4_0", 32, 2 + 16, true);
  set(GgmlType::Q4_1, "Q4_1", 32, 2 + 2 + 16, true);
  set(GgmlType::Q5_0, "Q5_0", 32, 2 + 4 + 16, true);
  set(GgmlType::Q5_1, "Q5_1", 32, 2 + 2 + 4 + 16, true);
  set(GgmlType::Q8_0, "Q8_0", 32, 2 + 32, true);
  // block_q8_1 is two halves and 32 quants (36 bytes) in ggml; gguf-py's GGML_QUANT_SIZES says
  // 40 (two floats). ggml is the format's owner; the type is an activation format for dot
  // products that files do not carry, and ggml has no dequantize_row_q8_1.
  set(GgmlType::Q8_1, "Q8_1", 32, 2 + 2 + 32, false);
  set(GgmlType::Q2_K, "Q2_K", kQK_K, 16 + 64 + 2 + 2, true);
  set(GgmlType::Q3_K, "Q3_K", kQK_K, 32 + 64 + 12 + 2, true);
  set(GgmlType::Q4_K, "Q4_K", kQK_K, 2 + 2 + 12 + 128, true);
  set(GgmlType::Q5_K, "Q5_K", kQK_K, 2 + 2 + 12 + 32 + 128, true);
  set(GgmlType::Q6_K, "Q6_K", kQK_K, 128 + 64 + 16 + 2, true);
  set(GgmlType::Q8_K, "Q8_K", kQK_K, 4 + 256 + 16 * 2, true);
  // The IQ1/IQ2/IQ3 types index lattices of 256 to 2048 grid points (iq2xxs_grid, iq3s_grid,
  // iq1s_grid …, tens of kilobytes of tables): known by size, not decoded.
  set(GgmlType::IQ2_XXS, "IQ2_XXS", kQK_K, 2 + 64, false);
  set(GgmlType::IQ2_XS, "IQ2_XS", kQK_K, 2 + 64 + 8, false);
  set(GgmlType::IQ3_XXS, "IQ3_XXS", kQK_K, 2 + 96, false);
  set(GgmlType::IQ1_S, "IQ1_S", kQK_K, 2 + 32 + 16, false);
  set(GgmlType::IQ4_NL, "IQ4_NL", 32, 2 + 16, true);
  set(GgmlType::IQ3_S, "IQ3_S", kQK_K, 2 + 64 + 8 + 32 + 4, false);
  set(GgmlType::IQ2_S, "IQ2_S", kQK_K, 2 + 64 + 8 + 8, false);
  set(GgmlType::IQ4_XS, "IQ4_XS", kQK_K, 2 + 2 + 4 + 128, true);
  // Integer tensors have no to_float in ggml either.
  set(GgmlType::I8, "I8", 1, 1, false);
  set(GgmlType::I16, "I16", 1, 2, false);
  set(GgmlType::I32, "I32", 1, 4, false);
  set(GgmlType::I64, "I64", 1, 8, false);
  set(GgmlType::F64, "F64", 1, 8, false);
  set(GgmlType::IQ1_M, "IQ1_M", kQK_K, 32 + 16 + 8, false);
  set(GgmlType::BF16, "BF16", 1, 2, true);
  set(GgmlType::TQ1_0, "TQ1_0", kQK_K, 48 + 4 + 2, true);
  set(GgmlType::TQ2_0, "TQ2_0", kQK_K, 64 + 2, true);
  set(GgmlType::MXFP4, "MXFP4", 32, 1 + 16, true);
  set(GgmlType::NVFP4, "NVFP4", 64, 4 + 32, true);
  set(GgmlType::Q1_0, "Q1_0", 128, 2 + 16, true);
  set(GgmlType::Q2_0, "Q2_0", 64, 2 + 16, true);
  return t;
}

constexpr std::array<GgmlTypeInfo, kTypeCount> kTypes = make_type_table();

// ---------------------------------------------------------------------------------------------
// Field readers and scale decoders.

inline float load_f16(const std::uint8_t* p) {
  std::uint16_t h;
  std::memcpy(&h, p, sizeof h);
#if defined(__F16C__)
  return _cvtsh_ss(h);  // one instruction where the CPU has F16C (exact, like fp16_to_float)
#else
  return fp16_to_float(h);
#endif
}

inline float load_f32(const std::uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

// The value tables (kvalues_iq4nl, kvalues_mxfp4) as floats, from ggml_blocks.h's.
constexpr std::array<float, 16> float_table(const std::int8_t (&t)[16]) {
  std::array<float, 16> f{};
  for (int i = 0; i < 16; ++i) f[static_cast<std::size_t>(i)] = t[i];
  return f;
}
constexpr std::array<float, 16> kIq4nlValues = float_table(ggml_block::kIq4nlValues);
// The block scales below are halved to match (ggml_e8m0_to_fp32_half, ggml_ue4m3_to_fp32).
constexpr std::array<float, 16> kFp4Values = float_table(ggml_block::kMxfp4Values);

// ggml_e8m0_to_fp32_half: the MX block scale 2^(e - 127), halved. e < 2 gives the subnormals
// 2^-128 and 2^-127; e = 255 (NaN in the MX spec) is not special-cased, as in ggml.
inline float e8m0_half(std::uint8_t e) {
  const std::uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<std::uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// ggml_ue4m3_to_fp32: NVFP4's unsigned E4M3 sub-block scale (bias 7, 3 mantissa bits), halved;
// 0 and 0x7F (the NaN code) decode to 0. The top bit is not looked at.
inline float ue4m3_half(std::uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF;
  const int man = x & 0x7;
  const float raw = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                             : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return raw * 0.5f;
}

// get_scale_min_k4: the 8 six-bit scales and 8 six-bit mins of a Q4_K / Q5_K super-block,
// packed in 12 bytes. Bytes 0-3 hold scales 0-3 in their low 6 bits and the top 2 bits of scales
// 4-7 above them; bytes 4-7 the same for the mins; bytes 8-11 the low nibbles of scale (low
// half) and min (high half) 4-7.
struct ScaleMins {
  std::array<std::uint8_t, 8> scale;
  std::array<std::uint8_t, 8> min;
};

inline ScaleMins unpack_scale_min_k4(const std::uint8_t* q) {
  ScaleMins s;
  for (int j = 0; j < 4; ++j) {
    s.scale[j] = q[j] & 63;
    s.min[j] = q[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    s.scale[j] = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    s.min[j] = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
  return s;
}

// Q3_K's 16 six-bit scales (stored +32) in 12 bytes: bytes 0-7 hold the low nibbles (scales 0-7
// in the low halves, 8-15 in the high halves); bytes 8-11 the top 2 bits, scale j at bit
// 2*(j/4) of byte 8 + j%4. dequantize_row_q3_K does this with 32-bit masks (kmask1, kmask2).
inline std::array<int, 16> unpack_q3_k_scales(const std::uint8_t* s) {
  std::array<int, 16> out{};
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = (low | (high << 4)) - 32;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Block decoders: `b` is one block, `y` receives its block_size values in row order.

// dequantize_row_q4_0: 32 nibbles; byte j holds value j (low) and value j + 16 (high).
void deq_q4_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const std::uint8_t* qs = b + offsetof(ggml_block::Q4_0, qs);
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0xF) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// dequantize_row_q4_1: like Q4_0, unsigned, plus a min: q * d + m.
void deq_q4_1(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + offsetof(ggml_block::Q4_1, m));
  const std::uint8_t* qs = b + offsetof(ggml_block::Q4_1, qs);
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0xF) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// dequantize_row_q5_0: the Q4_0 nibbles plus a fifth bit per value in a 32-bit word (bit i for
// value i), offset 16.
void deq_q5_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  std::uint32_t qh;
  std::memcpy(&qh, b + offsetof(ggml_block::Q5_0, qh), sizeof qh);
  const std::uint8_t* qs = b + offsetof(ggml_block::Q5_0, qs);
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = static_cast<float>(((qs[j] & 0xF) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
  }
}

// dequantize_row_q5_1: Q5_0's bits, unsigned, plus a min.
void deq_q5_1(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float m = load_f16(b + offsetof(ggml_block::Q5_1, m));
  std::uint32_t qh;
  std::memcpy(&qh, b + offsetof(ggml_block::Q5_1, qh), sizeof qh);
  const std::uint8_t* qs = b + offsetof(ggml_block::Q5_1, qs);
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int h1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = static_cast<float>((qs[j] & 0xF) | h0) * d + m;
    y[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
  }
}

// dequantize_row_q8_0: 32 signed bytes times d.
void deq_q8_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const auto* qs = reinterpret_cast<const std::int8_t*>(b + offsetof(ggml_block::Q8_0, qs));
#pragma omp simd
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(qs[j]) * d;
}

// dequantize_row_q2_K: 16 sub-blocks of 16 values, each with a 4-bit scale (low nibble) and a
// 4-bit min (high nibble) times the super-block's d and dmin. Each 128-value half takes 32 bytes
// of quants; value 32*j + l of the half is bits 2j..2j+1 of byte l, so sub-block = value / 16.
void deq_q2_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* scales = b;
  const std::uint8_t* qs = b + 16;
  const float d = load_f16(b + 80);
  const float dmin = load_f16(b + 82);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* q = qs + 32 * half;
    for (int j = 0; j < 4; ++j) {
      for (int h = 0; h < 2; ++h) {
        const std::uint8_t sc = scales[8 * half + 2 * j + h];
        const float dl = d * static_cast<float>(sc & 0xF);
        const float ml = dmin * static_cast<float>(sc >> 4);
#pragma omp simd
        for (int l = 0; l < 16; ++l) {
          y[l] = dl * static_cast<float>((q[16 * h + l] >> (2 * j)) & 3) - ml;
        }
        y += 16;
      }
    }
  }
}

// dequantize_row_q3_K: Q2_K's 2-bit layout plus a high bit per value in hmask (value 32*k + l
// of the super-block is bit k of hmask[l]); the 3-bit quant is offset 4 and a set high bit
// cancels the offset. Signed 6-bit scales per 16 values, no mins.
void deq_q3_k(const std::uint8_t* b, float* y) {
  const std::uint8_t* hmask = b;
  const std::uint8_t* qs = b + 32;
  const std::array<int, 16> sc = unpack_q3_k_scales(b + 96);
  const float d = load_f16(b + 108);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* q = qs + 32 * half;
    for (int j = 0; j < 4; ++j) {
      const int bit = 4 * half + j;
      for (int h = 0; h < 2; ++h) {
        const float dl = d * static_cast<float>(sc[8 * half + 2 * j + h]);
#pragma omp simd
        for (int l = 0; l < 16; ++l) {
          const int low = (q[16 * h + l] >> (2 * j)) & 3;
          const int offset = ((hmask[16 * h + l] >> bit) & 1) ? 0 : 4;
          y[l] = dl * static_cast<float>(low - offset);
        }
        y += 16;
      }
    }
  }
}

// dequantize_row_q4_K: 8 sub-blocks of 32 with 6-bit scales and mins (get_scale_min_k4);
// each 64 values share 32 bytes, low nibbles first.
void deq_q4_k(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const ScaleMins sm = unpack_scale_min_k4(b + 4);
  const std::uint8_t* qs = b + 16;
  for (int p = 0; p < 4; ++p) {
    const std::uint8_t* q = qs + 32 * p;
    const float d1 = d * sm.scale[2 * p], m1 = dmin * sm.min[2 * p];
    const float d2 = d * sm.scale[2 * p + 1], m2 = dmin * sm.min[2 * p + 1];
#pragma omp simd
    for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
#pragma omp simd
    for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
    y += 64;
  }
}

// dequantize_row_q5_K: Q4_K plus a fifth bit: sub-block s's value l has it in bit s of qh[l].
void deq_q5_k(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const float dmin = load_f16(b + 2);
  const ScaleMins sm = unpack_scale_min_k4(b + 4);
  const std::uint8_t* qh = b + 16;
  const std::uint8_t* qs = b + 48;
  for (int p = 0; p < 4; ++p) {
    const std::uint8_t* q = qs + 32 * p;
    const float d1 = d * sm.scale[2 * p], m1 = dmin * sm.min[2 * p];
    const float d2 = d * sm.scale[2 * p + 1], m2 = dmin * sm.min[2 * p + 1];
#pragma omp simd
    for (int l = 0; l < 32; ++l) {
      const int q1 = (q[l] & 0xF) | (((qh[l] >> (2 * p)) & 1) << 4);
      y[l] = d1 * static_cast<float>(q1) - m1;
    }
#pragma omp simd
    for (int l = 0; l < 32; ++l) {
      const int q2 = (q[l] >> 4) | (((qh[l] >> (2 * p + 1)) & 1) << 4);
      y[32 + l] = d2 * static_cast<float>(q2) - m2;
    }
    y += 64;
  }
}

// dequantize_row_q6_K: 6-bit quants offset 32, split into 4 low bits (ql) and 2 high bits (qh);
// signed 8-bit scales per 16 values. In each 128-value half, byte l of ql holds values l (low)
// and l + 64 (high), byte l + 32 values l + 32 and l + 96, and qh[l] their high bits in that
// order (bits 0-1: l, 2-3: l + 32, 4-5: l + 64, 6-7: l + 96).
void deq_q6_k(const std::uint8_t* b, float* y) {
  const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
  const float d = load_f16(b + 208);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* ql = b + 64 * half;
    const std::uint8_t* qh = b + 128 + 32 * half;
    const std::int8_t* sc = scales + 8 * half;
    // Values l (l < 16 or l >= 16) of each quarter share a scale: sc[is], sc[is + 2], … with
    // is = l / 16, so each run of 16 is one vector loop with four scales.
    for (int is = 0; is < 2; ++is) {
      const float d1 = d * sc[is], d2 = d * sc[is + 2], d3 = d * sc[is + 4], d4 = d * sc[is + 6];
#pragma omp simd
      for (int l = 16 * is; l < 16 * is + 16; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d1 * static_cast<float>(q1);
        y[l + 32] = d2 * static_cast<float>(q2);
        y[l + 64] = d3 * static_cast<float>(q3);
        y[l + 96] = d4 * static_cast<float>(q4);
      }
    }
    y += 128;
  }
}

// dequantize_row_q8_K: a float scale and 256 signed bytes (the 16 bsums after them are for dot
// products only).
void deq_q8_k(const std::uint8_t* b, float* y) {
  const float d = load_f32(b);
  const auto* qs = reinterpret_cast<const std::int8_t*>(b + 4);
#pragma omp simd
  for (int j = 0; j < kQK_K; ++j) y[j] = d * static_cast<float>(qs[j]);
}

// dequantize_row_iq4_nl: Q4_0's nibble layout into the kvalues_iq4nl levels.
void deq_iq4_nl(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const std::uint8_t* qs = b + offsetof(ggml_block::IQ4_NL, qs);
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kIq4nlValues[qs[j] & 0xF];
    y[j + 16] = d * kIq4nlValues[qs[j] >> 4];
  }
}

// dequantize_row_iq4_xs: 8 IQ4_NL-like sub-blocks of 32 with 6-bit scales (offset 32): low
// nibbles in scales_l (two per byte), high 2 bits in the 16-bit scales_h.
void deq_iq4_xs(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  std::uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, sizeof scales_h);
  const std::uint8_t* scales_l = b + 4;
  const std::uint8_t* qs = b + 8;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls =
        ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
#pragma omp simd
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * kIq4nlValues[qs[j] & 0xF];
      y[j + 16] = dl * kIq4nlValues[qs[j] >> 4];
    }
    y += 32;
    qs += 16;
  }
}

// One ternary digit of a TQ1_0 byte: the byte stores 5 (or 4) trits as a fixed-point fraction
// q / 243 scaled to 256, so multiplying by 3^n (mod 256) brings trit n to the top and
// (q * 3) >> 8 reads it. Gives -1, 0 or 1.
inline float tq1_trit(std::uint8_t byte, std::uint8_t pow3) {
  const auto q = static_cast<std::uint8_t>(byte * pow3);
  return static_cast<float>(((q * 3) >> 8) - 1);  // q promotes to int
}

// dequantize_row_tq1_0: 256 trits: bytes 0-31 carry values 0-159 (5 trits each, trit n of byte
// m is value 32n + m), bytes 32-47 values 160-239 (16n + m), and the 4 qh bytes values 240-255
// (4 trits each, value 240 + 4n + m).
void deq_tq1_0(const std::uint8_t* b, float* y) {
  constexpr std::array<std::uint8_t, 5> kPow3 = {1, 3, 9, 27, 81};
  const std::uint8_t* qs = b;
  const std::uint8_t* qh = b + 48;
  const float d = load_f16(b + 52);
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) *y++ = tq1_trit(qs[m], kPow3[n]) * d;
  }
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 16; ++m) *y++ = tq1_trit(qs[32 + m], kPow3[n]) * d;
  }
  for (int n = 0; n < 4; ++n) {
    for (int m = 0; m < 4; ++m) *y++ = tq1_trit(qh[m], kPow3[n]) * d;
  }
}

// dequantize_row_tq2_0: 2-bit codes offset 1; in each 128-value half, value 32l + m is bits
// 2l..2l+1 of byte m.
void deq_tq2_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b + 64);
  for (int half = 0; half < 2; ++half) {
    const std::uint8_t* qs = b + 32 * half;
    for (int l = 0; l < 4; ++l) {
      for (int m = 0; m < 32; ++m) {
        *y++ = static_cast<float>(((qs[m] >> (2 * l)) & 3) - 1) * d;
      }
    }
  }
}

// dequantize_row_mxfp4: OCP MX block: an E8M0 shared exponent and 32 FP4 (E2M1) codes in Q4_0's
// nibble layout.
void deq_mxfp4(const std::uint8_t* b, float* y) {
  const float d = e8m0_half(b[0]);
  const std::uint8_t* qs = b + 1;
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    y[j] = kFp4Values[qs[j] & 0xF] * d;
    y[j + 16] = kFp4Values[qs[j] >> 4] * d;
  }
}

// dequantize_row_nvfp4: four 16-value sub-blocks, each with a UE4M3 scale and 8 bytes of FP4
// codes (byte j: value j low, value j + 8 high).
void deq_nvfp4(const std::uint8_t* b, float* y) {
  for (int s = 0; s < 4; ++s) {
    const float d = ue4m3_half(b[s]);
    const std::uint8_t* qs = b + 4 + 8 * s;
#pragma omp simd
    for (int j = 0; j < 8; ++j) {
      y[j] = kFp4Values[qs[j] & 0xF] * d;
      y[j + 8] = kFp4Values[qs[j] >> 4] * d;
    }
    y += 16;
  }
}

// dequantize_row_q1_0: one sign bit per value (bit j % 8 of byte j / 8): +d or -d.
void deq_q1_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const std::uint8_t* qs = b + 2;
#pragma omp simd
  for (int j = 0; j < 128; ++j) y[j] = ((qs[j / 8] >> (j % 8)) & 1) ? d : -d;
}

// dequantize_row_q2_0: 2-bit codes 0..3 for -1, 0, 1, 2 (bits 2*(j%4) of byte j / 4).
void deq_q2_0(const std::uint8_t* b, float* y) {
  const float d = load_f16(b);
  const std::uint8_t* qs = b + 2;
#pragma omp simd
  for (int j = 0; j < 64; ++j) {
    y[j] = static_cast<float>(((qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
  }
}

// The element types, 256 values (one "block" of 256 elements) at a time.
void deq_f32(const std::uint8_t* b, float* y) {
  std::memcpy(y, b, kQK_K * sizeof(float));
}
void deq_f16(const std::uint8_t* b, float* y) {
  std::array<std::uint16_t, kQK_K> h;
  std::memcpy(h.data(), b, sizeof h);
  fp16_to_float(h, {y, h.size()});
}
void deq_bf16(const std::uint8_t* b, float* y) {
  std::array<std::uint16_t, kQK_K> h;
  std::memcpy(h.data(), b, sizeof h);
  for (int j = 0; j < kQK_K; ++j) y[j] = bf16_to_float(h[j]);
}

using BlockDecoder = void (*)(const std::uint8_t*, float*);

// The decoder of a dequantizable type, with the values and bytes it consumes per call (one
// block, or 256 elements of F32/F16/BF16); nullptr for the others.
struct Decoder {
  BlockDecoder fn = nullptr;
  int values = 0;
  int bytes = 0;
};

Decoder decoder_for(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return {deq_f32, kQK_K, 4 * kQK_K};
    case GgmlType::F16:
      return {deq_f16, kQK_K, 2 * kQK_K};
    case GgmlType::BF16:
      return {deq_bf16, kQK_K, 2 * kQK_K};
    case GgmlType::Q4_0:
      return {deq_q4_0, 32, 18};
    case GgmlType::Q4_1:
      return {deq_q4_1, 32, 20};
    case GgmlType::Q5_0:
      return {deq_q5_0, 32, 22};
    case GgmlType::Q5_1:
      return {deq_q5_1, 32, 24};
    case GgmlType::Q8_0:
      return {deq_q8_0, 32, 34};
    case GgmlType::Q2_K:
      return {deq_q2_k, kQK_K, 84};
    case GgmlType::Q3_K:
      return {deq_q3_k, kQK_K, 110};
    case GgmlType::Q4_K:
      return {deq_q4_k, kQK_K, 144};
    case GgmlType::Q5_K:
      return {deq_q5_k, kQK_K, 176};
    case GgmlType::Q6_K:
      return {deq_q6_k, kQK_K, 210};
    case GgmlType::Q8_K:
      return {deq_q8_k, kQK_K, 292};
    case GgmlType::IQ4_NL:
      return {deq_iq4_nl, 32, 18};
    case GgmlType::IQ4_XS:
      return {deq_iq4_xs, kQK_K, 136};
    case GgmlType::TQ1_0:
      return {deq_tq1_0, kQK_K, 54};
    case GgmlType::TQ2_0:
      return {deq_tq2_0, kQK_K, 66};
    case GgmlType::MXFP4:
      return {deq_mxfp4, 32, 17};
    case GgmlType::NVFP4:
      return {deq_nvfp4, 64, 36};
    case GgmlType::Q1_0:
      return {deq_q1_0, 128, 18};
    case GgmlType::Q2_0:
      return {deq_q2_0, 64, 18};
    default:
      return {};
  }
}

// ---------------------------------------------------------------------------------------------
// Dot products without a row buffer: 256 values at a time are decoded onto the stack by the
// block decoders above (whose loops GCC vectorises, `omp simd` keeping it from unrolling them
// into scalar code first) and dotted with x in float; the chunks are added in double, so that
// long rows do not drift.
//
// Tried and slower with GCC 12: summing quants against x per sub-block and scaling the sums
// (`omp simd` reductions end in a lane-by-lane sum from the stack, per 32 values: 3-4x slower),
// and float lane accumulators across blocks (not kept in registers across the blocks of a
// group; slower for the 32-value types, no faster for the K-quants). On one AVX2 core, 4096-value
// rows run at 3-4.5 Gvalues/s for Q4_0, Q4_1, Q8_0 and Q4_K, about 2 for Q5_K and Q6_K.

#if defined(__AVX2__) && defined(__FMA__)
// Q4_1 and Q8_0 (the SmolLM2 test model's weights) with intrinsics: each block's values become
// floats in registers and are multiplied into two accumulators that live across blocks, so there
// is no horizontal sum and no trip through the stack per block. In the model runner's decode this
// is 1.6-2x the speed of dot_via_stack below (docs/PERFORMANCE.md).
inline __m256 bytes_to_floats(__m128i eight_in_low_half) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(eight_in_low_half));
}
inline __m256 signed_bytes_to_floats(__m128i eight_in_low_half) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight_in_low_half));
}
inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Q4_1: value j of a block is d·q_j + m, q_j in the low nibbles (j < 16) or high nibbles.
// (An AVX-512 build compiles the two 8-lane loops but calls dot_q4_1_avx512 and dot_q8_0_avx512.)
[[maybe_unused]] float dot_q4_1_avx2(const std::uint8_t* row, const float* x, std::int64_t blocks) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const __m128i low4 = _mm_set1_epi8(0x0F);
  for (std::int64_t i = 0; i < blocks; ++i, row += 20, x += 32) {
    const __m256 d = _mm256_set1_ps(load_f16(row));
    const __m256 m = _mm256_set1_ps(load_f16(row + 2));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 4));
    const __m128i lo = _mm_and_si128(q, low4);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), low4);
    acc0 = _mm256_fmadd_ps(_mm256_fmadd_ps(d, bytes_to_floats(lo), m), _mm256_loadu_ps(x), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_fmadd_ps(d, bytes_to_floats(_mm_srli_si128(lo, 8)), m),
                           _mm256_loadu_ps(x + 8), acc1);
    acc0 =
        _mm256_fmadd_ps(_mm256_fmadd_ps(d, bytes_to_floats(hi), m), _mm256_loadu_ps(x + 16), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_fmadd_ps(d, bytes_to_floats(_mm_srli_si128(hi, 8)), m),
                           _mm256_loadu_ps(x + 24), acc1);
  }
  return horizontal_sum(_mm256_add_ps(acc0, acc1));
}

// Q8_0: value j of a block is d·q_j, q_j a signed byte.
[[maybe_unused]] float dot_q8_0_avx2(const std::uint8_t* row, const float* x, std::int64_t blocks) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < blocks; ++i, row += 34, x += 32) {
    const __m256 d = _mm256_set1_ps(load_f16(row));
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 18));
    const __m256 s0 = _mm256_mul_ps(signed_bytes_to_floats(q0), _mm256_loadu_ps(x));
    const __m256 s1 =
        _mm256_mul_ps(signed_bytes_to_floats(_mm_srli_si128(q0, 8)), _mm256_loadu_ps(x + 8));
    const __m256 s2 = _mm256_mul_ps(signed_bytes_to_floats(q1), _mm256_loadu_ps(x + 16));
    const __m256 s3 =
        _mm256_mul_ps(signed_bytes_to_floats(_mm_srli_si128(q1, 8)), _mm256_loadu_ps(x + 24));
    acc0 = _mm256_fmadd_ps(d, _mm256_add_ps(s0, s2), acc0);
    acc1 = _mm256_fmadd_ps(d, _mm256_add_ps(s1, s3), acc1);
  }
  return horizontal_sum(_mm256_add_ps(acc0, acc1));
}

#if defined(__AVX512F__)
// The same two with 16-lane registers where the build has AVX-512: a block's 32 values are two
// registers, so half the conversions and multiplies of the 8-lane loops; two blocks a pass into
// four accumulators, so that no sum waits on the one before it. SmolLM2 at a 512-token context:
// the weights' dot products took 62% of a decode step with the 8-lane loops.
inline __m512 bytes_to_floats16(__m128i sixteen) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sixteen));
}
inline __m512 signed_bytes_to_floats16(__m128i sixteen) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sixteen));
}

float dot_q4_1_avx512(const std::uint8_t* row, const float* x, std::int64_t blocks) {
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const auto block = [&](const std::uint8_t* b, const float* xb, __m512& a0, __m512& a1) {
    const __m512 d = _mm512_set1_ps(load_f16(b));
    const __m512 m = _mm512_set1_ps(load_f16(b + 2));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 4));
    const __m128i lo = _mm_and_si128(q, low4);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(q, 4), low4);
    a0 = _mm512_fmadd_ps(_mm512_fmadd_ps(d, bytes_to_floats16(lo), m), _mm512_loadu_ps(xb), a0);
    a1 =
        _mm512_fmadd_ps(_mm512_fmadd_ps(d, bytes_to_floats16(hi), m), _mm512_loadu_ps(xb + 16), a1);
  };
  std::int64_t i = 0;
  for (; i + 2 <= blocks; i += 2, row += 40, x += 64) {
    block(row, x, acc[0], acc[1]);
    block(row + 20, x + 32, acc[2], acc[3]);
  }
  if (i < blocks) block(row, x, acc[0], acc[1]);
  return _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

float dot_q8_0_avx512(const std::uint8_t* row, const float* x, std::int64_t blocks) {
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  const auto block = [&](const std::uint8_t* b, const float* xb, __m512& a) {
    const __m512 d = _mm512_set1_ps(load_f16(b));
    const __m512 s0 = _mm512_mul_ps(
        signed_bytes_to_floats16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2))),
        _mm512_loadu_ps(xb));
    const __m512 s1 = _mm512_mul_ps(
        signed_bytes_to_floats16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18))),
        _mm512_loadu_ps(xb + 16));
    a = _mm512_fmadd_ps(d, _mm512_add_ps(s0, s1), a);
  };
  std::int64_t i = 0;
  for (; i + 2 <= blocks; i += 2, row += 68, x += 64) {
    block(row, x, acc[0]);
    block(row + 34, x + 32, acc[1]);
  }
  if (i < blocks) block(row, x, acc[0]);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}
#endif
#endif

// `n` values (a whole number of blocks) of a type decoded by `Decode`, kValues values from
// kBytes bytes per call: up to 256 values decoded onto the stack, then a float dot with x.
template <BlockDecoder Decode, int kValues, int kBytes>
float dot_via_stack(const std::uint8_t* row, const float* x, std::int64_t n) {
  constexpr int kPerChunk = kQK_K / kValues;  // every block size divides 256
  alignas(32) float buf[kQK_K];
  double total = 0;
  for (; n >= kQK_K; n -= kQK_K, x += kQK_K) {
    for (int c = 0; c < kPerChunk; ++c, row += kBytes) Decode(row, buf + c * kValues);
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < kQK_K; ++j) s += buf[j] * x[j];
    total += static_cast<double>(s);
  }
  if (n > 0) {  // fewer than 256 values: whole blocks
    const int count = static_cast<int>(n);
    for (int c = 0; c < count / kValues; ++c, row += kBytes) Decode(row, buf + c * kValues);
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < count; ++j) s += buf[j] * x[j];
    total += static_cast<double>(s);
  }
  return static_cast<float>(total);
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(std::uint32_t id) {
  if (id >= kTypes.size() || kTypes[id].name.empty()) return nullptr;
  return &kTypes[id];
}

std::optional<std::uint64_t> ggml_row_bytes(GgmlType type, std::int64_t n) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(type));
  if (info == nullptr || n < 0 || n % info->block_size != 0) return std::nullopt;
  const auto blocks = static_cast<std::uint64_t>(n / info->block_size);
  const auto size = static_cast<std::uint64_t>(info->type_size);
  if (blocks > std::numeric_limits<std::uint64_t>::max() / size) return std::nullopt;
  return blocks * size;
}

void ggml_dequantize(GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n) {
  if (n <= 0) return;
  const Decoder dec = decoder_for(type);
  if (dec.fn == nullptr) {
    assert(!"ggml_dequantize: type is not dequantizable");
    std::fill(dst, dst + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(type));
  assert(n % info->block_size == 0);
  // Whole calls of the decoder, then (F32/F16/BF16 only, whose "block" is one element) the
  // rest one block at a time, so that nothing past the row's bytes is read.
  std::int64_t done = 0;
  for (; done + dec.values <= n; done += dec.values) {
    dec.fn(src, dst + done);
    src += dec.bytes;
  }
  if (done < n) {
    std::array<float, kQK_K> buf;
    std::array<std::uint8_t, 4 * kQK_K> bytes{};
    const auto rest_bytes = static_cast<std::size_t>((n - done) * info->type_size);
    std::memcpy(bytes.data(), src, rest_bytes);
    dec.fn(bytes.data(), buf.data());
    std::copy(buf.data(), buf.data() + (n - done), dst + done);
  }
}

float ggml_dot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n) {
  if (n <= 0) return 0.0f;
  [[maybe_unused]] const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(type));
  assert(info == nullptr || n % info->block_size == 0);
  switch (type) {
    case GgmlType::Q4_K:
      return dot_via_stack<deq_q4_k, kQK_K, 144>(row, x, n);
    case GgmlType::Q5_K:
      return dot_via_stack<deq_q5_k, kQK_K, 176>(row, x, n);
    case GgmlType::Q6_K:
      return dot_via_stack<deq_q6_k, kQK_K, 210>(row, x, n);
    case GgmlType::Q4_0:
      return dot_via_stack<deq_q4_0, 32, 18>(row, x, n);
#if defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__)
    case GgmlType::Q4_1:
      return dot_q4_1_avx512(row, x, n / 32);
    case GgmlType::Q8_0:
      return dot_q8_0_avx512(row, x, n / 32);
#elif defined(__AVX2__) && defined(__FMA__)
    case GgmlType::Q4_1:
      return dot_q4_1_avx2(row, x, n / 32);
    case GgmlType::Q8_0:
      return dot_q8_0_avx2(row, x, n / 32);
#else
    case GgmlType::Q4_1:
      return dot_via_stack<deq_q4_1, 32, 20>(row, x, n);
    case GgmlType::Q8_0:
      return dot_via_stack<deq_q8_0, 32, 34>(row, x, n);
#endif
    case GgmlType::Q5_0:
      return dot_via_stack<deq_q5_0, 32, 22>(row, x, n);
    case GgmlType::Q5_1:
      return dot_via_stack<deq_q5_1, 32, 24>(row, x, n);
    case GgmlType::Q2_K:
      return dot_via_stack<deq_q2_k, kQK_K, 84>(row, x, n);
    case GgmlType::Q3_K:
      return dot_via_stack<deq_q3_k, kQK_K, 110>(row, x, n);
    case GgmlType::Q8_K:
      return dot_via_stack<deq_q8_k, kQK_K, 292>(row, x, n);
    case GgmlType::IQ4_NL:
      return dot_via_stack<deq_iq4_nl, 32, 18>(row, x, n);
    case GgmlType::IQ4_XS:
      return dot_via_stack<deq_iq4_xs, kQK_K, 136>(row, x, n);
    case GgmlType::TQ1_0:
      return dot_via_stack<deq_tq1_0, kQK_K, 54>(row, x, n);
    case GgmlType::TQ2_0:
      return dot_via_stack<deq_tq2_0, kQK_K, 66>(row, x, n);
    case GgmlType::MXFP4:
      return dot_via_stack<deq_mxfp4, 32, 17>(row, x, n);
    case GgmlType::NVFP4:
      return dot_via_stack<deq_nvfp4, 64, 36>(row, x, n);
    case GgmlType::Q1_0:
      return dot_via_stack<deq_q1_0, 128, 18>(row, x, n);
    case GgmlType::Q2_0:
      return dot_via_stack<deq_q2_0, 64, 18>(row, x, n);
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: {
      // 256 elements per decoder call; the tail (any count) goes through ggml_dequantize's
      // padded copy so that nothing past the row is read.
      const std::int64_t whole = n / kQK_K * kQK_K;
      double total = type == GgmlType::F32 ? dot_via_stack<deq_f32, kQK_K, 4 * kQK_K>(row, x, whole)
                     : type == GgmlType::F16
                         ? dot_via_stack<deq_f16, kQK_K, 2 * kQK_K>(row, x, whole)
                         : dot_via_stack<deq_bf16, kQK_K, 2 * kQK_K>(row, x, whole);
      if (whole < n) {
        alignas(32) float buf[kQK_K];
        ggml_dequantize(type, row + whole * info->type_size, buf, n - whole);
        float s = 0;
        for (std::int64_t j = 0; j < n - whole; ++j) s += buf[j] * x[whole + j];
        total += static_cast<double>(s);
      }
      return static_cast<float>(total);
    }
    default:
      assert(!"ggml_dot: type is not dequantizable");
      return std::numeric_limits<float>::quiet_NaN();
  }
}

}  // namespace kvlab
