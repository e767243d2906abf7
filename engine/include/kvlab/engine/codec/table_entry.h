// The bit layouts of the Huffman decode tables, in one place for the CPU and the CUDA code
// (docs/FORMAT.md, "Decode table"). Every function is constexpr and, under nvcc, __host__
// __device__, so the encoder that fills a table and the kernels that read it cannot disagree.
//
// Single-symbol entry (HuffmanCodebook::decode_table(), uint16, indexed by the next 12 stream
// bits): the code length in bits 9..12, the symbol (0..255, or 256 for the escape) in bits 0..8;
// 0 means the bits are no code.
//
// GPU pair entry (word_stream::fill_pair_table(), uint32, same index): up to two
// symbols that one lookup resolves,
//   bits  0..7  first symbol      bits  8..15 second symbol
//   bits 16..19 first code's length
//   bits 20..24 bits both codes take (the first alone when there is one)
//   bits 25..26 symbols in the entry (0: no code, 1 or 2)
//   bit  27     the first code is the escape: its value is the 8 raw bits after the code.
#pragma once

#include <cstdint>

#include "kvlab/engine/core/host_device.h"

namespace kvlab::table_entry {

inline constexpr std::uint32_t kSymbolBits = 9;
inline constexpr std::uint32_t kSymbolMask = (1u << kSymbolBits) - 1u;

KVLAB_HOST_DEVICE constexpr std::uint16_t single(std::uint32_t length, std::uint32_t symbol) {
  return static_cast<std::uint16_t>((length << kSymbolBits) | symbol);
}
KVLAB_HOST_DEVICE constexpr std::uint32_t single_length(std::uint32_t entry) {
  return entry >> kSymbolBits;
}
KVLAB_HOST_DEVICE constexpr std::uint32_t single_symbol(std::uint32_t entry) {
  return entry & kSymbolMask;
}

KVLAB_HOST_DEVICE constexpr std::uint32_t pair(std::uint32_t first, std::uint32_t second,
                                               std::uint32_t first_length,
                                               std::uint32_t total_length, std::uint32_t count,
                                               bool escape) {
  return first | (second << 8) | (first_length << 16) | (total_length << 20) | (count << 25) |
         (static_cast<std::uint32_t>(escape) << 27);
}
KVLAB_HOST_DEVICE constexpr std::uint32_t pair_first(std::uint32_t e) {
  return e & 255u;
}
KVLAB_HOST_DEVICE constexpr std::uint32_t pair_second(std::uint32_t e) {
  return (e >> 8) & 255u;
}
KVLAB_HOST_DEVICE constexpr std::uint32_t pair_first_length(std::uint32_t e) {
  return (e >> 16) & 15u;
}
KVLAB_HOST_DEVICE constexpr std::uint32_t pair_total_length(std::uint32_t e) {
  return (e >> 20) & 31u;
}
KVLAB_HOST_DEVICE constexpr std::uint32_t pair_count(std::uint32_t e) {
  return (e >> 25) & 3u;
}
KVLAB_HOST_DEVICE constexpr bool pair_escape(std::uint32_t e) {
  return (e >> 27) != 0;
}

}  // namespace kvlab::table_entry
