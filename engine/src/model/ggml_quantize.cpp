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
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/model/ggml_types.h"

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

// C's conversion of a float to an integer type as x86-64 compiles it (cvttss2si to 32 bits,
// then the low bits): truncation toward zero, and 0x80000000 for NaN and values out of range,
// where C leaves the result undefined. ggml's reference code converts NaN codes this way.
inline std::int32_t trunc_x86(float v) {
  return (v > -2147483648.0f && v < 2147483648.0f) ? static_cast<std::int32_t>(v)
                                                   : std::numeric_limits<std::int32_t>::min();
}
inline std::int8_t to_int8(float v) {
  return static_cast<std::int8_t>(trunc_x86(v));
}
inline std::uint8_t to_uint8(float v) {
  return static_cast<std::uint8_t>(trunc_x86(v));
}

inline void store_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = float_to_fp16(v);
  std::memcpy(p, &h, sizeof h);
}

// The largest |x| of a block and the signed value that has it; NaN never wins (amax < |v|).
inline void signed_absmax(const float* x, float& amax, float& max) {
  amax = 0.0f;
  max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
}

// block_q4_0 {half d; u8 qs[16]}: d = max / -8, codes x/d + 8 (low nibbles the first 16 values).
void quant_q4_0(const float* x, std::uint8_t* y) {
  float amax, max;
  signed_absmax(x, amax, max);
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  for (int j = 0; j < kBlock / 2; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[kBlock / 2 + j] * id;
    const int xi0 = std::min<int>(15, to_int8(x0 + 8.5f));
    const int xi1 = std::min<int>(15, to_int8(x1 + 8.5f));
    y[2 + j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
  }
}

// min and max of a block as the reference finds them (v < min, v > max: NaN never counts).
inline void min_max(const float* x, float& min, float& max) {
  min = std::numeric_limits<float>::max();
  max = -std::numeric_limits<float>::max();
  for (int j = 0; j < kBlock; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

// block_q4_1 {half d; half m; u8 qs[16]}: d = (max - min) / 15, codes (x - min)/d.
void quant_q4_1(const float* x, std::uint8_t* y) {
  float min, max;
  min_max(x, min, max);
  const float d = (max - min) / ((1 << 4) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  store_f16(y + 2, min);
  for (int j = 0; j < kBlock / 2; ++j) {
    const float x0 = (x[j] - min) * id;
    const float x1 = (x[kBlock / 2 + j] - min) * id;
    const int xi0 = std::min<int>(15, to_int8(x0 + 0.5f));
    const int xi1 = std::min<int>(15, to_int8(x1 + 0.5f));
    y[4 + j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
  }
}

// block_q5_0 {half d; u8 qh[4]; u8 qs[16]}: d = max / -16, codes x/d + 16; bit 4 of value j in
// bit j of the little-endian qh.
void quant_q5_0(const float* x, std::uint8_t* y) {
  float amax, max;
  signed_absmax(x, amax, max);
  const float d = max / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  std::uint32_t qh = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[kBlock / 2 + j] * id;
    const auto xi0 = static_cast<std::uint8_t>(std::min<int>(31, to_int8(x0 + 16.5f)));
    const auto xi1 = static_cast<std::uint8_t>(std::min<int>(31, to_int8(x1 + 16.5f)));
    y[6 + j] = static_cast<std::uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << j;
    qh |= ((xi1 & 0x10u) >> 4) << (j + kBlock / 2);
  }
  std::memcpy(y + 2, &qh, sizeof qh);
}

// block_q5_1 {half d; half m; u8 qh[4]; u8 qs[16]}: d = (max - min) / 31.
void quant_q5_1(const float* x, std::uint8_t* y) {
  float min, max;
  min_max(x, min, max);
  const float d = (max - min) / ((1 << 5) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  store_f16(y + 2, min);
  std::uint32_t qh = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    const float x0 = (x[j] - min) * id;
    const float x1 = (x[kBlock / 2 + j] - min) * id;
    const std::uint8_t xi0 = to_uint8(x0 + 0.5f);
    const std::uint8_t xi1 = to_uint8(x1 + 0.5f);
    y[8 + j] = static_cast<std::uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
    qh |= ((xi0 & 0x10u) >> 4) << j;
    qh |= ((xi1 & 0x10u) >> 4) << (j + kBlock / 2);
  }
  std::memcpy(y + 4, &qh, sizeof qh);
}

// block_q8_0 {half d; i8 qs[32]}: d = amax / 127, codes roundf(x/d) (ties away from zero).
void quant_q8_0(const float* x, std::uint8_t* y) {
  float amax = 0.0f;
  // MAX(amax, |v|) = amax > |v| ? amax : |v|: a NaN takes amax's place until the next value.
  for (int j = 0; j < kBlock; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = amax / ((1 << 7) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  for (int j = 0; j < kBlock; ++j) {
    y[2 + j] = static_cast<std::uint8_t>(to_int8(std::round(x[j] * id)));
  }
}

// best_index_int8 of ggml-quants.c: the nearest level by a binary search, ties to the upper one;
// NaN gives 15. (llama.cpp of 2026 compares 2x >= a + b instead, the same for numbers, 0 for NaN;
// this is the form of the libggml the tests compare with, llama-cpp-python 0.3.36.)
inline int best_index_iq4nl(float x) {
  if (x <= kIq4nl[0]) return 0;
  if (x >= kIq4nl[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < kIq4nl[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - kIq4nl[mu - 1] < kIq4nl[mu] - x ? mu - 1 : mu;
}

// quantize_row_iq4_nl_impl for one 32-value block without importance weights (weight = x²):
// scale max/-127 refined by least squares, then for ntry > 0 the scales (itry - 127)/max,
// itry = -ntry … ntry, keeping the best weighted fit, and the codes again with the scale kept.
// block_iq4_nl {half d; u8 qs[16]}.
void quant_iq4_nl(const float* x, std::uint8_t* y, int ntry) {
  std::uint8_t L[kBlock] = {};
  float weight[kBlock];
  for (int j = 0; j < kBlock; ++j) weight[j] = x[j] * x[j];
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  float scale = 0.0f;
  // GROUP_MAX_EPS: below it the block is zeros, scale 0 and codes 0 (llama.cpp of 2026 zeroes
  // them; older versions leave whatever L held, which decodes to 0 all the same).
  if (!(amax < 1e-15f)) {
    float d = ntry > 0 ? -max / kIq4nl[0] : max / kIq4nl[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kBlock; ++j) {
      const float al = id * x[j];
      const int l = best_index_iq4nl(al);
      L[j] = static_cast<std::uint8_t>(l);
      const float q = kIq4nl[l];
      const float w = weight[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = static_cast<float>(itry + kIq4nl[0]) / max;
      sumqx = sumq2 = 0;
      for (int j = 0; j < kBlock; ++j) {
        const float al = id * x[j];
        const float q = kIq4nl[best_index_iq4nl(al)];
        const float w = weight[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
      }
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        d = sumqx / sumq2;
        best = d * sumqx;
      }
    }
    scale = d;
  }
  store_f16(y, scale);
  if (ntry > 0) {
    const float id = scale != 0.0f ? 1 / scale : 0;
    for (int j = 0; j < kBlock; ++j) L[j] = static_cast<std::uint8_t>(best_index_iq4nl(id * x[j]));
  }
  for (int j = 0; j < kBlock / 2; ++j) {
    y[2 + j] = static_cast<std::uint8_t>(L[j] | (L[kBlock / 2 + j] << 4));
  }
}

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
  if (!ggml_quantizable(type) || n < 0 || n % kBlock != 0) return false;
  const int size = ggml_type_info(type)->type_size;
  const std::int64_t blocks = n / kBlock;
  const int ntry = rule == GgmlQuantizeRule::ModelFile ? 7 : -1;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float* x = src + b * kBlock;
    std::uint8_t* y = dst + b * size;
    switch (type) {
      case GgmlType::Q4_0:
        quant_q4_0(x, y);
        break;
      case GgmlType::Q4_1:
        quant_q4_1(x, y);
        break;
      case GgmlType::Q5_0:
        quant_q5_0(x, y);
        break;
      case GgmlType::Q5_1:
        quant_q5_1(x, y);
        break;
      case GgmlType::Q8_0:
        quant_q8_0(x, y);
        break;
      default:
        quant_iq4_nl(x, y, ntry);
        break;
    }
  }
  return true;
}

}  // namespace kvlab
