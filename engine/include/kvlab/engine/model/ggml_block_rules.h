// llama.cpp's reference quantizers of its 32-value KV-cache blocks (ggml/src/ggml-quants.c:
// quantize_row_q4_0_ref, _q4_1_ref, _q5_0_ref, _q5_1_ref, _q8_0_ref and quantize_row_iq4_nl_impl
// with best_index_int8), one block at a time, written once for the CPU and the GPU: every function
// is inline and, under nvcc, __host__ __device__. The CPU (engine/src/model/ggml_quantize.cpp)
// runs these for blocks its AVX-512 forms do not take (non-finite values, model files' IQ4_NL
// search); the GPU (kernels/src/quant_block_ggml.cuh) runs them for every block, one thread a
// block. The tests hold the CPU to gguf-py and libggml byte for byte.
//
// What makes the two compilers agree:
//  - no fused multiply-add joins two of the reference's operations (libggml-base is built without
//    FMA): every product that feeds a sum goes through rounded_product(), rounded on its own;
//  - C's float-to-integer conversion as x86-64 compiles it (truncation, 0x80000000 for NaN and
//    out of range), written out (trunc_x86), and roundf as its definition;
//  - a NaN that an operation makes (inf - inf, inf / inf) is x86's "default NaN"; where one reaches
//    a stored fp16, x86_nan() (core/host_device.h) gives it x86's bits on both.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/host_device.h"
#include "kvlab/engine/model/ggml_blocks.h"

namespace kvlab::ggml_rules {

inline constexpr int kBlock = ggml_block::kValues;

// C's conversion of a float to an integer type as x86-64 compiles it (cvttss2si to 32 bits, then
// the low bits): truncation toward zero, and 0x80000000 for NaN and values out of range, where C
// leaves the result undefined. ggml's reference code converts NaN codes this way.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE std::int32_t trunc_x86(float v) {
  return (v > -2147483648.0f && v < 2147483648.0f) ? static_cast<std::int32_t>(v)
                                                   : static_cast<std::int32_t>(0x80000000u);
}
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE std::int8_t to_int8(float v) {
  return static_cast<std::int8_t>(trunc_x86(v));
}
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE std::uint8_t to_uint8(float v) {
  return static_cast<std::uint8_t>(trunc_x86(v));
}

// C's roundf: halfway cases away from zero. t = trunc(v) (exact), v - t exact, one step away from
// zero where |v - t| >= 0.5; NaN and +-inf stay as they are.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float round_half_away(float v) {
  const bool integral = !(abs_float(v) < 8388608.0f);  // 2^23 and up, inf and NaN
  const float t = integral ? v : static_cast<float>(static_cast<std::int32_t>(v));
  // trunc(-0.3) is -0: the sign of v stays on a zero.
  const float tz = t == 0.0f ? float_from_bits(bits_from_float(v) & 0x80000000u) : t;
  const float one = float_from_bits(0x3f800000u | (bits_from_float(v) & 0x80000000u));
  return !integral && abs_float(v - tz) >= 0.5f ? tz + one : tz;
}

KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE void store_f16(std::uint8_t* p, float v) {
  const std::uint16_t h = float_to_fp16(v);
  p[0] = static_cast<std::uint8_t>(h & 0xffu);
  p[1] = static_cast<std::uint8_t>(h >> 8);
}
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE void store_u32(std::uint8_t* p, std::uint32_t v) {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<std::uint8_t>(v >> (8 * k));
}

KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE int min_int(int a, int b) {
  return a < b ? a : b;
}

// The largest |x| of a block and the first value that has it; NaN never wins (amax < |v|).
KVLAB_HOST_DEVICE inline float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (amax < abs_float(x[j])) {
      amax = abs_float(x[j]);
      max = x[j];
    }
  }
  return max;
}

// min and max as the reference finds them (v < min, v > max: NaN never counts).
KVLAB_HOST_DEVICE inline void min_max(const float* x, float& mn, float& mx) {
  mn = 3.402823466e+38f;
  mx = -3.402823466e+38f;
  for (int j = 0; j < kBlock; ++j) {
    if (x[j] < mn) mn = x[j];
    if (x[j] > mx) mx = x[j];
  }
}

// block_q4_0 {half d; u8 qs[16]}: d = max / -8, codes x/d + 8 (low nibbles the first 16 values).
KVLAB_HOST_DEVICE inline void quant_q4_0(const float* x, std::uint8_t* y) {
  const float max = signed_absmax(x);
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  for (int j = 0; j < kBlock / 2; ++j) {
    const int xi0 = min_int(15, to_int8(rounded_product(x[j], id) + 8.5f));
    const int xi1 = min_int(15, to_int8(rounded_product(x[kBlock / 2 + j], id) + 8.5f));
    y[offsetof(ggml_block::Q4_0, qs) + j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
  }
}

// (max - min) / levels of the "_1" types. max and min are never NaN, so a NaN range is inf - inf.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float range_step(float mn, float mx, float levels) {
  return x86_nan(mx - mn) / levels;
}

// block_q4_1 {half d; half m; u8 qs[16]}: d = (max - min) / 15, codes (x - min)/d.
KVLAB_HOST_DEVICE inline void quant_q4_1(const float* x, std::uint8_t* y) {
  float mn, mx;
  min_max(x, mn, mx);
  const float d = range_step(mn, mx, 15.0f);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  store_f16(y + offsetof(ggml_block::Q4_1, m), mn);
  for (int j = 0; j < kBlock / 2; ++j) {
    const int xi0 = min_int(15, to_int8(rounded_product(x[j] - mn, id) + 0.5f));
    const int xi1 = min_int(15, to_int8(rounded_product(x[kBlock / 2 + j] - mn, id) + 0.5f));
    y[offsetof(ggml_block::Q4_1, qs) + j] = static_cast<std::uint8_t>(xi0 | (xi1 << 4));
  }
}

// Codes j and j + 16 of a 5-bit block: their low nibbles into qs[j], their bit 4 into bits j and
// j + 16 of qh.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE void put_q5(std::uint8_t* qs, std::uint32_t& qh, int j,
                                                 std::uint8_t xi0, std::uint8_t xi1) {
  qs[j] = static_cast<std::uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
  qh |= ((xi0 & 0x10u) >> 4) << j;
  qh |= ((xi1 & 0x10u) >> 4) << (j + kBlock / 2);
}

// block_q5_0 {half d; u8 qh[4]; u8 qs[16]}: d = max / -16, codes x/d + 16; bit 4 of value j in
// bit j of the little-endian qh.
KVLAB_HOST_DEVICE inline void quant_q5_0(const float* x, std::uint8_t* y) {
  const float max = signed_absmax(x);
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  std::uint32_t qh = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    const auto xi0 =
        static_cast<std::uint8_t>(min_int(31, to_int8(rounded_product(x[j], id) + 16.5f)));
    const auto xi1 = static_cast<std::uint8_t>(
        min_int(31, to_int8(rounded_product(x[kBlock / 2 + j], id) + 16.5f)));
    put_q5(y + offsetof(ggml_block::Q5_0, qs), qh, j, xi0, xi1);
  }
  store_u32(y + offsetof(ggml_block::Q5_0, qh), qh);
}

// block_q5_1 {half d; half m; u8 qh[4]; u8 qs[16]}: d = (max - min) / 31, codes unclamped.
KVLAB_HOST_DEVICE inline void quant_q5_1(const float* x, std::uint8_t* y) {
  float mn, mx;
  min_max(x, mn, mx);
  const float d = range_step(mn, mx, 31.0f);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  store_f16(y + offsetof(ggml_block::Q5_1, m), mn);
  std::uint32_t qh = 0;
  for (int j = 0; j < kBlock / 2; ++j) {
    const std::uint8_t xi0 = to_uint8(rounded_product(x[j] - mn, id) + 0.5f);
    const std::uint8_t xi1 = to_uint8(rounded_product(x[kBlock / 2 + j] - mn, id) + 0.5f);
    put_q5(y + offsetof(ggml_block::Q5_1, qs), qh, j, xi0, xi1);
  }
  store_u32(y + offsetof(ggml_block::Q5_1, qh), qh);
}

// block_q8_0 {half d; i8 qs[32]}: d = amax / 127, codes roundf(x/d) (ties away from zero).
KVLAB_HOST_DEVICE inline void quant_q8_0(const float* x, std::uint8_t* y) {
  float amax = 0.0f;
  // MAX(amax, |v|) = amax > |v| ? amax : |v|: a NaN takes amax's place until the next value. Its
  // sign is clear (|v|), so a NaN d is stored as 0x7e00 on both.
  for (int j = 0; j < kBlock; ++j) {
    const float a = abs_float(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(y, d);
  for (int j = 0; j < kBlock; ++j) {
    y[offsetof(ggml_block::Q8_0, qs) + j] =
        static_cast<std::uint8_t>(to_int8(round_half_away(rounded_product(x[j], id))));
  }
}

// best_index_int8 of ggml-quants.c over the 16 levels (kvalues_iq4nl): the nearest level by a
// binary search, ties to the upper one; NaN gives 15.
KVLAB_HOST_DEVICE inline int best_index_iq4nl(float x, const std::int8_t* levels) {
  if (x <= levels[0]) return 0;
  if (x >= levels[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < levels[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - static_cast<float>(levels[mu - 1]) < static_cast<float>(levels[mu]) - x ? mu - 1 : mu;
}

// quantize_row_iq4_nl_impl for one 32-value block without importance weights (weight = x^2):
// scale max/-127 refined by least squares, then for ntry > 0 the scales (itry - 127)/max,
// itry = -ntry ... ntry, keeping the best weighted fit, and the codes again with the scale kept.
// The KV cache's quantize_row_iq4_nl_ref is ntry = -1. block_iq4_nl {half d; u8 qs[16]};
// `levels` is kvalues_iq4nl.
KVLAB_HOST_DEVICE inline void quant_iq4_nl(const float* x, std::uint8_t* y, int ntry,
                                           const std::int8_t* levels) {
  std::uint8_t L[kBlock] = {};
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    const float ax = abs_float(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  float scale = 0.0f;
  // GROUP_MAX_EPS: below it the block is zeros, scale 0 and codes 0 (llama.cpp of 2026 zeroes
  // them; older versions leave whatever L held, which decodes to 0 all the same).
  if (!(amax < 1e-15f)) {
    const float l0 = static_cast<float>(levels[0]);
    float d = ntry > 0 ? -max / l0 : max / l0;
    float id = 1.0f / d;
    float sumqx = 0.0f, sumq2 = 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      const int l = best_index_iq4nl(rounded_product(id, x[j]), levels);
      L[j] = static_cast<std::uint8_t>(l);
      const float q = static_cast<float>(levels[l]);
      const float wq = rounded_product(rounded_product(x[j], x[j]), q);
      sumqx = sumqx + rounded_product(wq, x[j]);
      sumq2 = sumq2 + rounded_product(wq, q);
    }
    d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
    float best = rounded_product(d, sumqx);
    for (int itry = -ntry; itry <= ntry; ++itry) {
      id = static_cast<float>(itry + levels[0]) / max;
      sumqx = sumq2 = 0.0f;
      for (int j = 0; j < kBlock; ++j) {
        const float q =
            static_cast<float>(levels[best_index_iq4nl(rounded_product(id, x[j]), levels)]);
        const float wq = rounded_product(rounded_product(x[j], x[j]), q);
        sumqx = sumqx + rounded_product(wq, x[j]);
        sumq2 = sumq2 + rounded_product(wq, q);
      }
      if (sumq2 > 0.0f && rounded_product(sumqx, sumqx) > rounded_product(best, sumq2)) {
        d = sumqx / sumq2;
        best = rounded_product(d, sumqx);
      }
    }
    // No NaN enters the sums where sumq2 > 0 (a NaN x makes sumq2 NaN and the scale 0), so a NaN
    // scale is made of infinities.
    scale = x86_nan(d);
  }
  store_f16(y, scale);
  if (ntry > 0) {
    const float id = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int j = 0; j < kBlock; ++j) {
      L[j] = static_cast<std::uint8_t>(best_index_iq4nl(rounded_product(id, x[j]), levels));
    }
  }
  for (int j = 0; j < kBlock / 2; ++j) {
    y[offsetof(ggml_block::IQ4_NL, qs) + j] =
        static_cast<std::uint8_t>(L[j] | (L[kBlock / 2 + j] << 4));
  }
}

}  // namespace kvlab::ggml_rules
