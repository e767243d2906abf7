// Per-vector bit streams of the code codecs (docs/FORMAT.md): an LSB-first bit writer, bounded
// 64-bit loads, and the encoder/decoder of one vector for each variable-length codec. Private to
// the engine.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kvlab/engine/code_codec.h"

namespace kvlab::detail {

// Appends bits to a byte vector, LSB-first: stream bit k is bit k % 8 of byte k / 8.
class BitWriter {
 public:
  explicit BitWriter(std::vector<std::uint8_t>& out) : m_out(out) {}
  // `bits` holds exactly `count` (<= 32) significant bits; the first to go out is bit 0.
  void put(std::uint32_t bits, int count) {
    m_acc |= static_cast<std::uint64_t>(bits) << m_pending;
    m_pending += count;
    m_written += static_cast<std::uint64_t>(count);
    if (m_pending >= 32) {
      emit(4);
      m_acc >>= 32;
      m_pending -= 32;
    }
  }
  // Writes the pending bits, zero-padded to a whole byte.
  void flush() {
    emit((m_pending + 7) / 8);
    m_acc = 0;
    m_pending = 0;
  }
  std::uint64_t bits_written() const { return m_written; }

 private:
  void emit(int bytes) {
    for (int i = 0; i < bytes; ++i) m_out.push_back(static_cast<std::uint8_t>(m_acc >> (8 * i)));
  }
  std::vector<std::uint8_t>& m_out;
  std::uint64_t m_acc = 0;
  int m_pending = 0;
  std::uint64_t m_written = 0;
};

// Little-endian 64-bit load; the caller guarantees 8 readable bytes.
inline std::uint64_t load_le64(const std::uint8_t* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  return v;
}

// Runs `decode(base, begin_bit, end_bit)` over the bits [start_bit, start_bit + bit_count) of
// data[0, readable) so that a decoder may load 8 bytes at any byte up to end_bit / 8 + 8: in place
// when that stays inside `data`, else from a zero-padded copy of the stream's bytes. The caller
// has checked that the stream itself lies inside `data`.
template <class Decode>
auto with_bounded_stream(const std::uint8_t* data, std::size_t readable, std::uint64_t start_bit,
                         std::uint32_t bit_count, Decode&& decode) {
  const std::uint64_t end_bit = start_bit + bit_count;
  if (end_bit / 8 + 16 <= readable) return decode(data, start_bit, end_bit);
  // u16 bit counts bound a stream to 8192 bytes, plus one for a start inside a byte.
  std::array<std::uint8_t, 8192 + 1 + 16> local{};
  const std::uint64_t first = start_bit / 8;
  const std::uint64_t last = (end_bit + 7) / 8;
  if (last > first) std::memcpy(local.data(), data + first, last - first);
  return decode(local.data(), start_bit - 8 * first, end_bit - 8 * first);
}

// Why a stream failed to decode; nullptr on success.
using DecodeProblem = const char*;

void encode_huffman_vector(const std::uint8_t* codes, int dim, const HuffmanCodebook& book,
                           BitWriter& out);
DecodeProblem decode_huffman_vector(const std::uint8_t* data, std::size_t readable,
                                    std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                    const HuffmanCodebook& book, std::uint8_t* out);

// VarWidth: per group of 16 codes (the last may be shorter), a 4-bit width w = bit width of the
// group's largest code (0..8), then the group's codes in w bits each.
constexpr int kVarWidthGroup = 16;
void encode_varwidth_vector(const std::uint8_t* codes, int dim, BitWriter& out);
DecodeProblem decode_varwidth_vector(const std::uint8_t* data, std::size_t readable,
                                     std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                     std::uint8_t* out);

}  // namespace kvlab::detail
