// The tensor element types of ggml (llama.cpp's tensor library, and so of GGUF files): their
// on-disk ids, block sizes, the conversion of their blocks to floats, and the quantization of
// floats into the block types llama.cpp's KV cache uses (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL).
//
// A quantized type stores its values in fixed blocks (32 values for Q4_0 … Q8_0, 256 for the
// "K" super-blocks) of scales and packed integers; a tensor row is a whole number of blocks. The
// layouts and formulas follow llama.cpp's reference code: the block structs of
// ggml/src/ggml-common.h and the `dequantize_row_*` functions of ggml/src/ggml-quants.c. gguf-py's
// `gguf.quants.dequantize` is the independent implementation the tests compare with.
//
// Blocks are read byte by byte or with memcpy, so data may sit at any address (a memory-mapped
// file gives no alignment beyond the file's own, and the type sizes are odd: 18, 34, 210 bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvlab {

// GGML tensor types by their on-disk id (ggml.h's enum ggml_type). Ids 4, 5 (Q4_2, Q4_3),
// 31-33 (Q4_0_4_4 …) and 36-38 (IQ4_NL_4_4 …) were removed from llama.cpp and are not valid.
enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,  // the three latest (llama.cpp 2026); gguf-py 0.19 knows NVFP4 and Q1_0
  Q1_0 = 41,
  Q2_0 = 42,
};

struct GgmlTypeInfo {
  std::string_view name;  // "Q4_K", as llama.cpp and the gguf Python package print it
  int block_size;         // values per block (1 for F32/F16/BF16 and the integer types)
  int type_size;          // bytes per block
  bool dequantizable;     // kvlab can turn it into floats (ggml_dequantize, ggml_dot)
};

// The type with on-disk id `id`; nullptr for an id llama.cpp does not define (incl. the removed
// 4, 5, 31-33, 36-38).
const GgmlTypeInfo* ggml_type_info(std::uint32_t id);
inline const GgmlTypeInfo* ggml_type_info(GgmlType type) {
  return ggml_type_info(static_cast<std::uint32_t>(type));
}

// Bytes of `n` values of `type`; std::nullopt when n is negative, not a whole number of blocks,
// the byte count overflows 64 bits, or `type` is not a defined type.
std::optional<std::uint64_t> ggml_row_bytes(GgmlType type, std::int64_t n);

// Turns `n` values (a whole number of blocks) stored as `type` at `src` into floats at `dst`.
// Dequantizable: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// Q8_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0 (not the grid-based IQ1/IQ2/IQ3
// types, Q8_1, nor the integer types). Preconditions, checked by the caller (ggml_row_bytes,
// ggml_type_info(type)->dequantizable): `src` holds ggml_row_bytes(type, n) bytes, at any
// alignment, and nothing past them is read. An undequantizable type fills `dst` with NaN.
void ggml_dequantize(GgmlType type, const std::uint8_t* src, float* dst, std::int64_t n);

// Which of ggml's quantizers to follow where they differ (only IQ4_NL's differ).
enum class GgmlQuantizeRule : std::uint8_t {
  // quantize_row_<type>_ref (ggml/src/ggml-quants.c): what llama.cpp's KV cache holds. ggml-cpu's
  // set_rows/cpy convert with type_traits_cpu[type].from_float, which is quantize_row_<type>
  // (ggml-cpu/quants.c), a call of the _ref function for Q4_0 … Q5_1 and IQ4_NL (ntry = -1: one
  // scale, refined by least squares, no search). CUDA's set_rows (cpy-utils.cuh) follows the
  // Q4_0 … Q8_0 formulas. Q8_0 is the exception on CPUs: ggml-cpu's SIMD quantize_row_q8_0
  // (arch/x86) scales and rounds its own way (31 of the 1,196 test blocks differ from the
  // reference in a code), so a CPU-resident q8_0 cache may differ in a last bit; kvlab writes
  // the reference (CUDA, gguf-py) bytes.
  KvCache,
  // ggml_quantize_chunk without an importance matrix (llama-quantize): the same _ref functions
  // for Q4_0 … Q8_0; IQ4_NL searches 15 scales (quantize_iq4_nl, ntry = 7).
  ModelFile,
};

// Whether ggml_quantize handles `type`: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and IQ4_NL.
bool ggml_quantizable(GgmlType type);

// Quantizes `n` floats at `src` into ggml_row_bytes(type, n) bytes at `dst` (any alignment),
// byte for byte as llama.cpp's reference quantizers do: the same float operations in the same
// order, the block scales (and Q4_1/Q5_1 minimums) rounded to fp16 to nearest even.
// Returns false, writing nothing, when `type` is not quantizable or n is negative or not a whole
// number of 32-value blocks. NaN and ±inf do not crash: they give the codes x86-64 builds of
// ggml give (its float-to-integer conversions of NaN, undefined in C, are cvttss2si's, i.e. code
// 0 before any offset), and a NaN or infinite block scale where ggml stores one.
bool ggml_quantize(GgmlType type, const float* src, std::int64_t n, std::uint8_t* dst,
                   GgmlQuantizeRule rule = GgmlQuantizeRule::KvCache);

// The dot product of `n` values stored as `type` at `row` with the floats `x` (same
// preconditions): the value of dequantizing then a float dot, without a row buffer, for
// matrix-vector products. Every dequantizable type decodes 256 values at a time onto the stack
// (vectorised decoders) and dots them in float; the 256-value sums are added in double. NaN for
// an undequantizable type.
float ggml_dot(GgmlType type, const std::uint8_t* row, const float* x, std::int64_t n);

}  // namespace kvlab
