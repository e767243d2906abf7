// Device helpers of the block quantizers (quant_block.cu) that have no CPU twin: x86's NaN rules
// where a NaN's sign reaches a stored byte, an fp16 loaded from any address, and the E4M3 scales
// through the CPU's own functions (quant/fp8_rules.h). llama.cpp's blocks are quantized by the
// CPU's functions themselves (model/ggml_block_rules.h). Included only by quant_block*.cu(h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/quant/fp8_rules.h"

namespace kvlab::cuda::block_quant {

// x86's "QNaN floating-point indefinite", the NaN an SSE/AVX operation makes out of operands that
// are not NaN (0 * inf, inf - inf, inf / inf): its sign bit is set. CUDA's operations return
// 0x7fffffff instead, so wherever such a NaN's sign reaches a stored byte (an fp16 scale, an
// E4M3 scale, an E2M1 code) the quantizers put this one in its place.
__device__ __forceinline__ float x86_default_nan() {
  return __uint_as_float(0xffc00000u);
}

// An fp16 stored little-endian at any address (ggml's block fields are unaligned).
__device__ __forceinline__ float load_f16(const std::uint8_t* p) {
  const auto h = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(h));
}

// The E4M3 block scales: the CPU's conversions themselves (fp8_rules.h).
__device__ __forceinline__ std::uint8_t e4m3_encode(float value) {
  return ::kvlab::detail::fp8_encode<::kvlab::detail::E4M3>(value);
}
__device__ __forceinline__ float e4m3_decode(std::uint8_t code) {
  return ::kvlab::detail::fp8_decode<::kvlab::detail::E4M3>(code);
}

}  // namespace kvlab::cuda::block_quant
