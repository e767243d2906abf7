// Private to the fused attention paths: a Huffman decoder of whole code vectors into a small
// per-tile row buffer (one byte per code, L1-resident), tuned for the attention loops that
// consume the rows at once. It takes up to three codes per 12-bit lookup (a multi-symbol table
// built here from the codebook's single-symbol table, the idea of codec_streams.cpp's table but
// kept apart so that the codec may change its own), refills its 64-bit bit window without a
// branch, and decodes four vectors interleaved so their lookup -> shift chains overlap.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvlab/engine/code_codec.h"

namespace kvlab::detail {

class FusedHuffmanTable {
 public:
  // Entry per 12-bit window: total length in bits 0..5 (a 64-bit shift by the entry itself takes
  // the codes), the codes in bits 6..29, first decoded lowest, their count (0..3) in bits 30..31
  // (one shift gives it); count 0 = the first code is the escape or no code.
  static constexpr int kMaxCodes = 3;
  explicit FusedHuffmanTable(const HuffmanCodebook& book);
  const std::uint32_t* multi() const { return m_multi.data(); }
  const std::uint16_t* single() const { return m_single; }

 private:
  std::vector<std::uint32_t> m_multi;
  const std::uint16_t* m_single;
};

// Decodes `count` consecutive bit-aligned vectors of `dim` codes, the first starting at bit
// `start_bit` of data[0, readable) (readable >= 8; every 8-byte load is clamped inside it, so a
// corrupt stream reads garbage, never out of bounds), vector i to out + i * stride (stride >=
// dim + 4: a step may write 3 bytes past its last code). Returns the index of the first vector
// whose bits are no code or whose length differs from vector_bits[i]; -1 if all decode.
int decode_huffman_rows(const FusedHuffmanTable& table, const std::uint8_t* data,
                        std::size_t readable, std::uint64_t start_bit,
                        const std::uint16_t* vector_bits, int count, int dim, std::uint8_t* out,
                        std::size_t stride);

}  // namespace kvlab::detail
