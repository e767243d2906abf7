// The FP8 formats' scalar conversions, one definition for the CPU and the CUDA kernels: every
// function is inline and, under nvcc, __host__ __device__. The CPU quantizers (fp8_quantizer.cpp,
// fp4_quantizer.cpp's E4M3 block scales) and their vector forms (quant/fp8_impl.h) follow these;
// the GPU quantizers (kernels/src/quant_fp8.cu, quant_block_fp4.cuh) call them. (The attention
// kernels' E4M3 reader, row_decode.h's e4m3_to_float, is tuned apart; test_row_decode.cpp holds it
// to fp8_decode for every code.) OCP FP8: E4M3 (bias 7, no infinities, S.1111.111 NaN) and E5M2
// (bias 15, IEEE-like).
#pragma once

#include <cstdint>

#include "kvlab/engine/core/host_device.h"

namespace kvlab::detail {

template <int ExpBits, int MantBits, int Bias, std::uint32_t MaxCode, bool HasInf>
struct Fp8Traits {
  static constexpr int kExp = ExpBits;
  static constexpr int kMant = MantBits;
  static constexpr int kBias = Bias;
  static constexpr std::uint32_t kMaxCode = MaxCode;  // largest finite magnitude code
  static constexpr bool kHasInf = HasInf;
};
using E4M3 = Fp8Traits<4, 3, 7, 0x7e, false>;
using E5M2 = Fp8Traits<5, 2, 15, 0x7b, true>;

// Round to nearest even, saturate to +-max (infinities too), NaN -> 0x7f with the input's sign.
template <class F>
KVLAB_HOST_DEVICE inline std::uint8_t fp8_encode(float value) {
  const std::uint32_t u = bits_from_float(value);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7fffffffu;
  // Below the smallest normal: a multiple of the subnormal step 2^(1 - bias - mant), rounded to
  // nearest even by the float adder (q < 2^22, so adding 2^23 leaves integer resolution). The
  // product by a power of two is exact, so a compiler that fuses it into the addition changes
  // nothing.
  const float q = float_from_bits(a) * static_cast<float>(1u << (F::kBias - 1 + F::kMant));
  const float rounded = (q + 0x1p23f) - 0x1p23f;
  // Clamped before the cast so large inputs (which take the normal path) stay defined; NaN
  // gives 255, as fmin(NaN, 255).
  const std::uint32_t sub =
      static_cast<std::uint32_t>(static_cast<int>(rounded < 255.f ? rounded : 255.f));
  // Normal: round the 23-bit mantissa to kMant bits (nearest even), then rebias the exponent.
  constexpr int kShift = 23 - F::kMant;
  const std::uint32_t r = a + ((1u << (kShift - 1)) - 1u) + ((a >> kShift) & 1u);
  const std::uint32_t normal =
      (r >> kShift) - (static_cast<std::uint32_t>(127 - F::kBias) << F::kMant);
  constexpr std::uint32_t kMinNormalBits = static_cast<std::uint32_t>(127 + 1 - F::kBias) << 23;
  std::uint32_t code = a < kMinNormalBits ? sub : normal;
  code = code > F::kMaxCode ? F::kMaxCode : code;  // saturate (infinities too)
  code = a > 0x7f800000u ? 0x7fu : code;           // NaN
  return static_cast<std::uint8_t>(sign | code);
}

// The value of a code, built from its bits: a normal code's exponent and mantissa placed in a
// float's, a subnormal code's mantissa times the subnormal step (a small integer times a power of
// two, exact); infinity and NaN (0x7fc00000, the sign of the code) where the format has them.
template <class F>
KVLAB_HOST_DEVICE inline float fp8_decode(std::uint8_t code) {
  constexpr int kMaxExp = (1 << F::kExp) - 1;
  constexpr int kMaxMant = (1 << F::kMant) - 1;
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const int e = (code >> F::kMant) & kMaxExp;
  const int m = code & kMaxMant;
  std::uint32_t bits;
  if (F::kHasInf && e == kMaxExp) {
    bits = m == 0 ? 0x7f800000u : 0x7fc00000u;
  } else if (!F::kHasInf && e == kMaxExp && m == kMaxMant) {
    bits = 0x7fc00000u;
  } else if (e == 0) {
    const float step =
        float_from_bits(static_cast<std::uint32_t>(127 + 1 - F::kBias - F::kMant) << 23);
    bits = bits_from_float(static_cast<float>(m) * step);
  } else {
    bits = (static_cast<std::uint32_t>(e - F::kBias + 127) << 23) |
           (static_cast<std::uint32_t>(m) << (23 - F::kMant));
  }
  return float_from_bits(bits | sign);
}

}  // namespace kvlab::detail
