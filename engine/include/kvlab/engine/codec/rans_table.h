// The frequency table of the rANS coder (docs/FORMAT.md, "rANS streams"): the same 257-symbol
// alphabet as the Huffman book (256 code values, or pairs of codes below 16, and an escape),
// each symbol given a frequency out of 2^12 instead of a whole number of bits. Range ANS (J.
// Duda, "Asymmetric numeral systems", 2013) codes a symbol of frequency f in -log2(f / 4096) bits,
// fractions of a bit included, and its interleaved form (F. Giesen, "Interleaved entropy coders",
// 2014) lets 32 independent states decode side by side: SIMD lanes on a CPU, a warp on a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "kvlab/engine/core/result.h"

namespace kvlab {

class RansTable {
 public:
  static constexpr int kProbBits = 12;
  static constexpr std::uint32_t kProbScale = 1u << kProbBits;  // frequencies sum to this
  static constexpr int kSymbols = 257;                          // 256 values + escape
  static constexpr int kEscape = 256;
  // 257 frequencies of 12 bits, LSB-first, then the symbol kind in the last byte's high nibble.
  static constexpr std::size_t kSerializedBytes = (kSymbols * 12 + 4 + 7) / 8;

  RansTable() = default;

  // Frequencies proportional to the histogram (of codes, or of pairs), the escape weighted 1 as
  // in the Huffman book: every symbol that occurs, and the escape, gets at least 1, and the
  // rounding to 4096 moves the units that cost the fewest bits (the code length each symbol's
  // count pays for).
  static Result<RansTable> from_histogram(std::span<const std::uint64_t> histogram, bool pairs);
  // Checks a table: 257 frequencies summing to 4096, none above 4095, the escape's at least 1.
  static Result<RansTable> from_frequencies(std::span<const std::uint16_t> frequencies, bool pairs);
  // The table of a Huffman book's code lengths: frequency 2^(12 - length), the escape's
  // increased to fill an incomplete code. It codes as the book does, in the same bits.
  static Result<RansTable> from_lengths(std::span<const std::uint8_t> lengths, bool pairs);
  static Result<RansTable> deserialize(std::span<const std::uint8_t> bytes);
  std::vector<std::uint8_t> serialize() const;

  bool pairs() const { return m_pairs; }
  std::uint32_t frequency(int symbol) const { return m_freq[static_cast<std::size_t>(symbol)]; }
  std::uint32_t cumulative(int symbol) const { return m_cum[static_cast<std::size_t>(symbol)]; }
  // Slots at or above this decode the escape (it comes last in cumulative order).
  std::uint32_t escape_start() const { return m_cum[kEscape]; }
  // Decoder table indexed by the state's low 12 bits (the slot): symbol | frequency << 8 |
  // (slot - cumulative) << 20. An escape slot holds the escape's frequency and offset, symbol 0.
  const std::uint32_t* slot_table() const { return m_slots.data(); }
  // Bits the histogram takes under this table: sum of count * -log2(f / 4096).
  double coded_bits(std::span<const std::uint64_t> histogram) const;

 private:
  static Result<RansTable> build(const std::array<std::uint32_t, kSymbols>& freq, bool pairs);
  std::array<std::uint32_t, kSymbols> m_freq{};
  std::array<std::uint32_t, kSymbols + 1> m_cum{};
  std::vector<std::uint32_t> m_slots;
  bool m_pairs = false;
};

}  // namespace kvlab
