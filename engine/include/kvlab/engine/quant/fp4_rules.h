// The 4-bit float formats' element rules, one definition for the CPU quantizers
// (engine/src/quant/fp4_quantizer.cpp, whose AVX-512 loops compute the same codes 16 at a time)
// and the GPU's (kernels/src/quant_block_fp4.cuh): every function is inline and, under nvcc,
// __host__ __device__.
//  - E2M1 (NVFP4's elements, OCP MX's FP4): sign << 3 | magnitude index into {0, 0.5, 1, 1.5, 2,
//    3, 4, 6}, rounded to nearest with ties to the even code, saturating at 6;
//  - NVFP4's global and block scales.
//  - MXFP4 as llama.cpp stores it (quantize_row_mxfp4_ref, block_mxfp4): an E8M0 exponent byte
//    e with d = GGML_E8M0_TO_FP32_HALF(e), and each element's index among the doubled E2M1
//    magnitudes by |x| against the midpoints between neighbours times d, ties to the smaller one.
#pragma once

#include <cstdint>

#include "kvlab/engine/core/host_device.h"

namespace kvlab::detail {

// |a| rounded to an E2M1 magnitude index: each midpoint between neighbours goes to the one whose
// code is even (>= where the upper neighbour's code is even: 0.75 -> 1.0, 1.75 -> 2.0, 3.5 ->
// 4.0; > otherwise). Beyond 5 everything is 6 (satfinite); NaN compares false everywhere: 0.
KVLAB_HOST_DEVICE inline std::uint8_t e2m1_magnitude_rne(float a) {
  return static_cast<std::uint8_t>((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) +
                                   (a > 2.5f) + (a >= 3.5f) + (a > 5.f));
}

// The E2M1 code of x: its sign bit (a negative value that rounds to zero keeps it: 0x8), then the
// magnitude; NaN gives its sign with magnitude 0.
KVLAB_HOST_DEVICE inline std::uint8_t e2m1_encode(float x) {
  const std::uint32_t u = bits_from_float(x);
  return static_cast<std::uint8_t>(((u >> 28) & 0x8u) | e2m1_magnitude_rne(abs_float(x)));
}

// NVFP4's scales in fp32 (TensorRT-LLM cvt_warp_fp16_to_fp4; vLLM / ModelOpt's global scale):
// the tensor's global scale (FLOAT8_E4M3_MAX * FLOAT4_E2M1_MAX) / amax, 1 where amax is 0; a
// block's scale before its E4M3 rounding, global * (amax * reciprocal(6)); and the factor the
// block's values are multiplied by, 1 / (its E4M3 scale * (1 / global)), 0 for a zero scale.
// Products and quotients only: no sum for a compiler to fuse them into.
KVLAB_HOST_DEVICE inline float nvfp4_global_scale(float amax) {
  return amax > 0.f ? (448.f * 6.f) / amax : 1.f;
}
KVLAB_HOST_DEVICE inline float nvfp4_block_scale(float global, float block_amax) {
  constexpr float kInvE2m1Max = 1.f / 6.f;  // the kernels' reciprocal(6.0f): the float nearest 1/6
  return global * (block_amax * kInvE2m1Max);
}
KVLAB_HOST_DEVICE inline float nvfp4_value_factor(float e4m3_scale, float inv_global) {
  return e4m3_scale != 0.f ? 1.f / (e4m3_scale * inv_global) : 0.f;
}

// GGML_E8M0_TO_FP32_HALF (ggml-impl.h): 2^(e - 128), as a subnormal below e = 2.
KVLAB_HOST_DEVICE inline float e8m0_to_float_half(std::uint8_t e) {
  const std::uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<std::uint32_t>(e - 1) << 23;
  return float_from_bits(bits);
}

// The midpoints MXFP4 compares |x| with, before the block's d: 0.5, 1.5, 2.5, 3.5, 5, 7 and 10
// for k = 0..6 (times d, a power of two, each exact).
KVLAB_HOST_DEVICE inline float mxfp4_midpoint(int k) {
  constexpr float kMidpoints[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.f, 7.f, 10.f};
  return kMidpoints[k];
}

// llama.cpp's index of x in a block whose midpoints are t (mxfp4_midpoint times d): the count of
// midpoints below |x|, ties to the smaller magnitude; the sign bit (8) only where the index is
// not 0, so a value that rounds to zero is +0 whatever its sign; NaN index 0.
KVLAB_HOST_DEVICE inline std::uint8_t mxfp4_code(float x, const float* t) {
  const float a = abs_float(x);
  const int m =
      (a > t[0]) + (a > t[1]) + (a > t[2]) + (a > t[3]) + (a > t[4]) + (a > t[5]) + (a > t[6]);
  return static_cast<std::uint8_t>(m | ((x < 0.f && m > 0) ? 8 : 0));
}

}  // namespace kvlab::detail
