// Per-vector bit streams of the code codecs (docs/FORMAT.md): an LSB-first bit writer, bounded
// 64-bit loads, and the encoder/decoder of one vector for each variable-length codec. Private to
// the engine.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/huffman_book.h"
#include "kvlab/engine/core/aligned.h"

namespace kvlab::detail {

inline void store_le64(std::uint8_t* p, std::uint64_t v) {
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap64(v);
  std::memcpy(p, &v, sizeof v);
}

// Appends bits to a byte vector, LSB-first: stream bit k is bit k % 8 of byte k / 8. Every put
// stores the whole 64-bit accumulator unaligned and advances by the whole bytes it completed
// (F. Giesen, "Reading bits in far too many ways", applied to writing), so there is no per-byte
// loop and no branch on the fill level. The vector keeps at least 8 bytes of slack past the
// write position while writing; flush() cuts it back to the exact stream length.
class BitWriter {
 public:
  explicit BitWriter(HugePageBytes& out) : m_out(out), m_start(out.size()), m_byte(out.size()) {}
  // `bits` holds exactly `count` (<= 32) significant bits; the first to go out is bit 0.
  void put(std::uint32_t bits, int count) {
    reserve(8);
    m_acc |= static_cast<std::uint64_t>(bits) << m_pending;
    m_pending += static_cast<unsigned>(count);
    store_le64(m_out.data() + m_byte, m_acc);
    m_byte += m_pending >> 3;
    m_acc >>= m_pending & ~7u;  // m_pending < 40: the shift is defined
    m_pending &= 7;
  }
  // Writes the pending bits, zero-padded to a whole byte, and drops the slack.
  void flush() {
    m_byte += (m_pending + 7) / 8;
    m_out.resize(m_byte);
    m_acc = 0;
    m_pending = 0;
  }
  std::uint64_t bits_written() const { return 8 * (m_byte - m_start) + m_pending; }

  // Raw access for tight loops: room for `bytes` more bytes past the write position (plus the
  // 8-byte slack), then the state to write through and hand back with commit().
  struct Cursor {
    std::uint8_t* p;
    std::uint64_t acc;
    unsigned pending;
  };
  Cursor begin(std::size_t bytes) {
    reserve(bytes + 8);
    return {m_out.data() + m_byte, m_acc, m_pending};
  }
  void commit(const Cursor& c) {
    m_byte = static_cast<std::size_t>(c.p - m_out.data());
    m_acc = c.acc;
    m_pending = c.pending;
  }
  // The most the vector's size runs past the stream's end when no single begin() asks for more
  // than `bytes`: what a caller reserves beyond the stream so the writer never reallocates.
  static constexpr std::size_t headroom(std::size_t bytes) { return bytes + 8 + kGrowBytes; }

 private:
  // Grows the vector's size (not zero-filled: every byte is stored before the stream ends)
  // by what is needed plus kGrowBytes, not by a factor: flush() cuts the slack off after every
  // block, so growing by half the payload each time zero-filled most of the payload again per
  // block. The capacity still grows geometrically inside resize().
  static constexpr std::size_t kGrowBytes = 4096;
  void reserve(std::size_t bytes) {
    if (m_out.size() < m_byte + bytes) m_out.resize(m_byte + bytes + kGrowBytes);
  }
  HugePageBytes& m_out;
  std::size_t m_start;
  std::size_t m_byte;  // bytes complete; the pending bits go at m_out[m_byte]
  std::uint64_t m_acc = 0;
  unsigned m_pending = 0;  // < 8 between calls
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

// Bits one symbol can take in a stream: an escape code and its 8 raw bits.
inline constexpr std::uint64_t kMaxStepBits = HuffmanCodebook::kMaxCodeLength + 8;

// The byte past block b of a stream codec's payload: the next block's offset, or the payload's
// end for the last block (docs/FORMAT.md, "Metadata arrays"). Unchecked: validate first.
inline std::uint64_t block_end(const EncodedCodes& e, int b) {
  return b + 1 < e.block_count() ? e.block_offsets[static_cast<std::size_t>(b) + 1]
                                 : e.payload.size();
}

// A vector's `dim` codes from its pair symbols (docs/FORMAT.md, "Pair symbols": two codes a byte,
// low nibble first). AVX-512 where the build has it.
void pair_symbols_to_codes(const std::uint8_t* symbols, int dim, std::uint8_t* out);

// Why a stream failed to decode; nullptr on success.
using DecodeProblem = const char*;

void encode_huffman_vector(const std::uint8_t* codes, int dim, const HuffmanCodebook& book,
                           BitWriter& out);
DecodeProblem decode_huffman_vector(const std::uint8_t* data, std::size_t readable,
                                    std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                    const HuffmanCodebook& book, std::uint8_t* out);

// Decodes the `count` consecutive vectors of one Huffman block: vector i starts at bit
// start_bit + sum(vector_bits[0 .. i-1]) of data[0, readable) and goes to out + i * out_stride.
// The caller has checked that the block's bytes lie inside `data`. The vectors decode as a few
// continuous runs side by side to hide the lookup -> shift latency of each stream. On failure,
// `vector` is the first vector that fails (as decoding them one by one would report) and
// `problem` says why; problem == nullptr on success.
struct BlockProblem {
  int vector = 0;
  DecodeProblem problem = nullptr;
};
BlockProblem decode_huffman_block(const std::uint8_t* data, std::size_t readable,
                                  std::uint64_t start_bit, const std::uint16_t* vector_bits,
                                  int count, int dim, const HuffmanCodebook& book,
                                  std::uint8_t* out, std::size_t out_stride);
// The same, but writing each vector's `symbols` (book.symbols_per_vector(dim)) symbols as they
// are, one byte each. For a pair book a vector's symbols are then its codes packed two per byte,
// low nibble first: Bitpack-4's layout, which the fused attention loops read as they stand.
BlockProblem decode_huffman_symbols(const std::uint8_t* data, std::size_t readable,
                                    std::uint64_t start_bit, const std::uint16_t* vector_bits,
                                    int count, int symbols, const HuffmanCodebook& book,
                                    std::uint8_t* out, std::size_t out_stride);

// The codebook's decoder tables, behind its 4096 single-symbol entries in the same storage
// (huffman.cpp fills them, build_tables sizes the storage with kDecodeStorage):
// - the multi-symbol table, indexed like the single one by the next 12 stream bits, giving as
//   many whole codes as fit in those 12 bits (up to kMultiSymbols, escape excluded). It is split
//   so that a step needs no shift or mask: `syms`, one u32 per index holding the symbols (first
//   decoded in the low byte; stored as 4 bytes it writes them in order), and `len_count`, a byte
//   pair per index: the codes' total length in bits, then their count (0 = the first code is
//   the escape or no code);
// - `cost`: the bits each of the 256 values takes (HuffmanCodebook::cost_bits), for the check of
//   each decoded vector's bit count.
constexpr int kMultiSymbols = 3;
struct DecodeTables {
  const std::uint8_t* syms;       // 4096 x u32
  const std::uint8_t* len_count;  // 4096 x {u8 length, u8 count}
  const std::uint8_t* cost;       // 256 x u8
};
constexpr std::size_t kSymsOffset = HuffmanCodebook::kTableSize * 2;  // bytes
constexpr std::size_t kLenCountOffset = kSymsOffset + HuffmanCodebook::kTableSize * 4;
constexpr std::size_t kCostOffset = kLenCountOffset + HuffmanCodebook::kTableSize * 2;
constexpr std::size_t kDecodeStorage = (kCostOffset + 256) / 2;  // u16 entries in all
inline DecodeTables decode_tables(const HuffmanCodebook& book) {
  const auto* base = reinterpret_cast<const std::uint8_t*>(book.decode_table());
  return {base + kSymsOffset, base + kLenCountOffset, base + kCostOffset};
}
// Sum of cost[codes[i]] over n codes: the bits the codes take, for the decoder's check of each
// vector's bit count. AVX-512 VBMI where the build has it, else the scalar loop (kept for tests).
std::uint64_t sum_code_bits(const std::uint8_t* codes, std::size_t n, const std::uint8_t* cost);
std::uint64_t sum_code_bits_scalar(const std::uint8_t* codes, std::size_t n,
                                   const std::uint8_t* cost);
// Fills the tables behind the 4096 single-symbol entries of `table` (kDecodeStorage entries),
// `cost` from the codebook's cost_bits.
void fill_decode_tables(std::uint16_t* table, const std::uint8_t* cost);

// VarWidth: per group of 16 codes (the last may be shorter), a 4-bit width w = bit width of the
// group's largest code (0..8), then the group's codes in w bits each.
constexpr int kVarWidthGroup = 16;
void encode_varwidth_vector(const std::uint8_t* codes, int dim, BitWriter& out);
DecodeProblem decode_varwidth_vector(const std::uint8_t* data, std::size_t readable,
                                     std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                     std::uint8_t* out);

}  // namespace kvlab::detail
