// The blocks of llama.cpp's KV-cache types as structs (ggml/src/ggml-common.h's block_q4_0 …
// block_iq4_nl): one place for their layout, shared by the CPU quantizers and dequantizers
// (engine/src/model/ggml_quantize.cpp, ggml_quants.cpp) and the CUDA ones
// (kernels/src/quant_block_ggml.cuh). The code reads and writes a block's bytes at
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

static_assert(sizeof(Q4_0) == 18 && offsetof(Q4_0, qs) == 2);
static_assert(sizeof(Q4_1) == 20 && offsetof(Q4_1, m) == 2 && offsetof(Q4_1, qs) == 4);
static_assert(sizeof(Q5_0) == 22 && offsetof(Q5_0, qh) == 2 && offsetof(Q5_0, qs) == 6);
static_assert(sizeof(Q5_1) == 24 && offsetof(Q5_1, m) == 2 && offsetof(Q5_1, qh) == 4 &&
              offsetof(Q5_1, qs) == 8);
static_assert(sizeof(Q8_0) == 34 && offsetof(Q8_0, qs) == 2);
static_assert(sizeof(IQ4_NL) == 18 && offsetof(IQ4_NL, qs) == 2);

}  // namespace kvlab::ggml_block
