// FP8 KV cache with scales fixed before the cache fills, as vLLM serves kv_cache_dtype=fp8:
//  - calibrated (vllm/attention/layer.py Attention.calc_kv_scales, run once on the first
//    forward when calculate_kv_scales is set): k_scale = amax(|K|) / K_SCALE_CONSTANT,
//    v_scale = amax(|V|) / V_SCALE_CONSTANT (vllm/envs.py: 200 and 100 by default), fp32;
//    here the amax is over the first `calib_tokens` tokens of the tensor (the prefill);
//  - explicit (checkpoint k_scale / v_scale, vllm/model_executor/layers/quantization/
//    kv_cache.py BaseKVCacheMethod.process_weights_after_loading): the scales as given.
// Every token, the calibration tokens and every later one, is then encoded as
// fp8(x / scale) with saturation to +-max (vLLM's scaled_vec_conversion in
// csrc/quantization/fp8/nvidia/quant_utils.cuh: __nv_cvt_float_to_fp8(a / scale, __NV_SATFINITE,
// ...)); x_hat = float(code) * scale. PyTorch's own x.to(torch.float8_e4m3fn) is not saturating:
// c10's fp8e4m3fn_from_fp32_value gives NaN (0x7f) from |x| >= 464; vLLM's cache write never
// goes through it, so clipping here is saturation, and each clipped value (|x / scale| > max) is
// counted. Per head is a kvlab option (vLLM keeps one scale per layer for K and one for V).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::detail {

inline constexpr float kVllmKScaleConstant = 200.f;  // envs.K_SCALE_CONSTANT default
inline constexpr float kVllmVScaleConstant = 100.f;  // envs.V_SCALE_CONSTANT default

struct Fp8CalibratedConfig {
  Fp8Format format = Fp8Format::E4M3;
  bool per_head = false;  // one scale per KV head instead of one per tensor
  // Tokens at the start of each tensor whose amax fixes the scale of a role without explicit
  // scales; fewer tokens than this in a tensor calibrate on all of them.
  int calib_tokens = 0;
  float k_range = kVllmKScaleConstant;  // scale = amax / range
  float v_range = kVllmVScaleConstant;
  // Explicit (checkpoint) scales, x_hat = code * scale: empty to calibrate that role, else one
  // value (per tensor; with per_head it serves every head) or one per KV head (per_head only).
  std::vector<float> k_scales;
  std::vector<float> v_scales;
};

// Errors: calib_tokens < 0, no calibration tokens for a role without explicit scales, a range
// or a scale that is not finite and positive, several scales without per_head. A scale count
// that does not match the tensor's heads is an error of quantize(), naming both.
Result<std::unique_ptr<Quantizer>> make_fp8_calibrated_quantizer(Fp8CalibratedConfig config);

// What a calibrated FP8 tensor records besides its codes: QuantizedTensor::params holds the
// fp32 scales (1, or one per head), `bounds` {calibration tokens, clipped count low 31 bits,
// clipped count high bits}. histograms() also gives it as a 2-bin "clipped" histogram.
struct Fp8CalibrationReport {
  int calib_tokens = 0;  // 0 where the scales were given
  std::vector<float> scales;
  std::uint64_t clipped = 0;
  std::uint64_t values = 0;
  double clipped_fraction() const {
    return values ? static_cast<double>(clipped) / static_cast<double>(values) : 0.0;
  }
};
Fp8CalibrationReport fp8_calibration_report(const QuantizedTensor& q);

}  // namespace kvlab::detail
