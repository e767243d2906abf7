// The blocks of llama.cpp's KV-cache types as structs (ggml/src/ggml-common.h's block_q4_0 …
// block_iq4_nl, block_mxfp4) and their value tables: one place for their layout, shared by the CPU
// quantizers and dequantizers (engine/src/model/ggml_quantize.cpp, ggml_quants.cpp) and the CUDA
// ones (kernels/src/quant_block_ggml.cuh). The code reads and writes a block's bytes at
// offsetof(Block, field), never at a written-out number, and the sizes are checked here against
// llama.cpp's (and ggml_type_info()'s) type sizes. Data from a file may sit at any address, so
// the structs describe bytes; they are not accessed in place.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvlab::ggml_block {

inline constexpr int kValues = 32;  // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK4_NL

// d: the scale as fp16 bits; m: the minimum as fp16 bits; qs: 4-bit codes, value j in the low
// nibble of qs[j] and value j + 16 in its high nibble (8-bit codes for Q8_0); qh: bit 4 of value
// j in bit j of the little-endian 32-bit word.
struct Q4_0 {
  std::uint16_t d;
  std::uint8_t qs[kValues / 2];
};
struct Q4_1 {
  std::uint16_t d, m;
  std::uint8_t qs[kValues / 2];
};
struct Q5_0 {
  std::uint16_t d;
  std::uint8_t qh[4];
  std::uint8_t qs[kValues / 2];
};
struct Q5_1 {
  std::uint16_t d, m;
  std::uint8_t qh[4];
  std::uint8_t qs[kValues / 2];
};
struct Q8_0 {
  std::uint16_t d;
  std::int8_t qs[kValues];
};
struct IQ4_NL {  // qs: indices into the non-linear table kvalues_iq4nl
  std::uint16_t d;
  std::uint8_t qs[kValues / 2];
};

// block_mxfp4: an E8M0 exponent, then Q4_0's nibble layout of indices into kvalues_mxfp4.
struct MXFP4 {
  std::uint8_t e;
  std::uint8_t qs[kValues / 2];
};

// kvalues_iq4nl: the 16 levels of IQ4_NL / IQ4_XS, a non-uniform grid fitted to weight
// distributions.
inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};
// kvalues_mxfp4: the FP4 E2M1 values doubled (so they are integers); the block scales are
// halved to match (ggml_e8m0_to_fp32_half, ggml_ue4m3_to_fp32).
inline constexpr std::int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                                 0, -1, -2, -3, -4, -6, -8, -12};

static_assert(sizeof(Q4_0) == 18 && offsetof(Q4_0, qs) == 2);
static_assert(sizeof(Q4_1) == 20 && offsetof(Q4_1, m) == 2 && offsetof(Q4_1, qs) == 4);
static_assert(sizeof(Q5_0) == 22 && offsetof(Q5_0, qh) == 2 && offsetof(Q5_0, qs) == 6);
static_assert(sizeof(Q5_1) == 24 && offsetof(Q5_1, m) == 2 && offsetof(Q5_1, qh) == 4 &&
              offsetof(Q5_1, qs) == 8);
static_assert(sizeof(Q8_0) == 34 && offsetof(Q8_0, qs) == 2);
static_assert(sizeof(IQ4_NL) == 18 && offsetof(IQ4_NL, qs) == 2);
static_assert(sizeof(MXFP4) == 17 && offsetof(MXFP4, qs) == 1);

}  // namespace kvlab::ggml_block
