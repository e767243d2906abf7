// FP4 (E2M1) KV caches as the GPU serving engines and llama.cpp store them. Private to the engine;
// the lead wires the factories into the method registry.
//
// NVFP4 (NVIDIA: TensorRT-LLM `cvt_warp_fp16_to_fp4`, vLLM csrc/quantization/fp4/
// nvfp4_quant_kernels.cu, FlashInfer `fp4_quantize`): blocks of 16 values along head_dim, one
// E4M3 scale per block and one fp32 global scale per tensor:
//   global = 448 * 6 / amax(|x|)                          (fp32; vLLM/ModelOpt host code)
//   sf     = global * (block_amax * (1 / 6))              (fp32, as the kernel computes it)
//   sf8    = e4m3(sf), round to nearest even, saturating  (__nv_fp8_e4m3(float): SATFINITE)
//   out    = sf8 != 0 ? 1 / (float(sf8) * (1 / global)) : 0
//   code   = e2m1(x * out), round to nearest even, saturating at 6 (cvt.rn.satfinite.e2m1x2);
//            where out is NaN (sf = 0 * inf) every code of the block is out's sign, 0x0 or 0x8
//   x_hat  = e2m1_value(code) * (float(sf8) / global)
// The kernel's reciprocals are rcp.approx.ftz; here they are IEEE divisions (the CPU has no
// equivalent; the two agree except in the last bit of rare scales).
// Layout in QuantizedTensor::codes: all nibbles first, row-major [token][head][dim/2] with
// element 2i in the low nibble of byte i (vLLM's packing order), then all block scales, one
// E4M3 byte per 16 values in the same order. params = {global}. 4.5 bits a value + 4 bytes.
//
// MXFP4 (llama.cpp block_mxfp4, ggml/src/ggml-common.h; rule of quantize_row_mxfp4_ref in
// ggml/src/ggml-quants.c): blocks of 32 values, each 17 bytes: one E8M0 exponent byte e, then
// 16 bytes qs with qs[j] = idx(x[j]) | idx(x[j + 16]) << 4, where idx picks the nearest of
// kvalues_mxfp4 = {0,1,2,3,4,6,8,12, -0,-1,-2,-3,-4,-6,-8,-12} (E2M1 doubled) times
// d = 2^(e - 127) / 2, first index wins ties (best_index_mxfp4). 4.25 bits a value.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "kvlab/engine/quant/fp4_rules.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::detail {

inline constexpr int kNvfp4BlockSize = 16;
inline constexpr int kMxfp4BlockSize = 32;
inline constexpr int kMxfp4BlockBytes = 17;  // sizeof(block_mxfp4): e8m0 + 16 nibble bytes

// The 256 E4M3 values (NaN codes as NaN): NVFP4's block scales.
const std::array<float, 256>& e4m3_table();

// E2M1: code = sign << 3 | magnitude index into {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
float e2m1_to_float(std::uint8_t code);
// Round to nearest, ties to the even code, |x| beyond 6 saturates to 6; the sign is kept (a
// negative value that rounds to zero is 0x8, as an IEEE-style conversion gives). NaN gives its
// sign with magnitude 0 (0x0 or 0x8).
std::uint8_t float_to_e2m1(float x);

// NVFP4's per-tensor global scale, nvfp4_global_scale(amax): fp4_rules.h.
// Quantizes n values (a multiple of 16): n / 2 nibble bytes and n / 16 E4M3 scale bytes.
void nvfp4_quantize_row(const float* x, int n, float global_scale, std::uint8_t* nibbles,
                        std::uint8_t* block_scales);
// The reconstruction of n values (a multiple of 16) from their nibbles and block scales:
// e2m1 * (float(sf8) / global), vLLM's reference dequantization. The quantizer's dequantize()
// and the runner's stored cache (kv_method_store.cpp) both decode with it.
void nvfp4_dequantize_row(const std::uint8_t* nibbles, const std::uint8_t* block_scales, int n,
                          float global_scale, float* out);

// llama.cpp's exponent byte: (uint8)(floor(log2(amax)) - 2 + 127), 0 where amax is 0.
std::uint8_t mxfp4_exponent(float amax);
// llama.cpp's GGML_E8M0_TO_FP32_HALF, e8m0_to_float_half: fp4_rules.h.
// Quantizes n values (a multiple of 32) into n / 32 block_mxfp4 (17 bytes each).
void mxfp4_quantize_row(const float* x, int n, std::uint8_t* blocks);

// Quantizers over [tokens, heads, dim]: blocks run along head_dim per token per head, and a
// head_dim that is not a multiple of the block size is an error naming both.
std::unique_ptr<Quantizer> make_nvfp4_quantizer();
std::unique_ptr<Quantizer> make_mxfp4_quantizer();

}  // namespace kvlab::detail
