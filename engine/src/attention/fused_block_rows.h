// Private to the fused attention paths: where the codes of one block come from, one tile of
// vectors at a time. 4-bit and 8-bit codes on lane boundaries are read in place by the SIMD
// loops; Huffman streams (the codec's own block decoder, codec_streams.h) and the other fixed
// widths decode into a row buffer, at most kTile rows, that the same loops read at once: one
// byte per code, or for a pair book on lane boundaries the pair symbols as they decode, which
// are the codes packed two per byte like 4-bit packing's. A rANS block is one stream: it decodes
// whole when its first tile is asked for (rans_streams.h), and its tiles are read from there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "attention/fused_kernels.h"
#include "codec/codec_streams.h"
#include "codec/rans_streams.h"
#include "kvlab/engine/codec/block_layout.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/core/result.h"

namespace kvlab::detail {

// Vectors decoded into the row buffer at a time: a KVComp block (B = 64) in one go, and a
// bound on the buffer whatever the block size.
constexpr int kTile = 64;

inline std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

// Fixed-width codes, LSB-first (engine/src/bitpack.h's packing), read through a bounded 64-bit
// window: the generic path for widths and head sizes the SIMD loads do not take.
inline std::uint64_t load_bits(const std::uint8_t* data, std::size_t size, std::uint64_t pos) {
  const std::uint64_t byte = pos >> 3;
  std::uint64_t w = 0;
  if (byte + 8 <= size) [[likely]] {
    std::memcpy(&w, data + byte, 8);
  } else {
    for (std::uint64_t k = 0; byte + k < size && k < 8; ++k) {
      w |= static_cast<std::uint64_t>(data[byte + k]) << (8 * k);
    }
  }
  return w >> (pos & 7);
}

// Where the codes of one block come from, one tile of vectors at a time.
class BlockRows {
 public:
  BlockRows(const EncodedCodes& e, const HuffmanCodebook* book)
      : m_e(e),
        m_book(book),
        m_rows(static_cast<std::size_t>(kTile) * static_cast<std::size_t>(e.dim)) {
#if KVLAB_FUSED_SIMD
    const bool lanes = e.dim % kLaneGroup == 0;
    const bool packed = lanes && e.kind == CodecKind::BitPack;
    m_in_place = packed && (e.bitpack_width == 4 || e.bitpack_width == 8);
    m_pair_rows = lanes && needs_book(e.kind) && book != nullptr && book->pairs();
    m_nibbles = (packed && e.bitpack_width == 4) || m_pair_rows;
#endif
  }
  // The rows hold two 4-bit codes per byte, low nibble first (the SIMD loops' NibbleRows), else
  // one byte per code.
  bool nibbles() const {
    return m_nibbles;
  }
  // 4-bit or 8-bit codes read in place (the SIMD loops); otherwise decode() fills the buffer.
  bool in_place() const {
    return m_in_place;
  }
  // Row i of the buffer at rows() + i * stride(): the decoded rows lie back to back.
  std::size_t stride() const {
    return m_pair_rows ? static_cast<std::size_t>(m_e.dim) / 2 : static_cast<std::size_t>(m_e.dim);
  }
  const std::uint8_t* rows() const {
    return m_tile != nullptr ? m_tile : m_rows.data();
  }
  // For the SIMD loops, after decode(i0, m) where needed: row i of the tile (vector i0 + i) at
  // tile_rows(i0) + i * tile_stride().
  const std::uint8_t* tile_rows(int i0) const {
    return m_in_place ? block_base() + static_cast<std::size_t>(i0) * row_bytes() : rows();
  }
  std::size_t tile_stride() const {
    return m_in_place ? row_bytes() : stride();
  }

  // Block tb * heads + h: its first byte and first vector index.
  void start_block(int tb, int h, int n) {
    const std::size_t b = static_cast<std::size_t>(tb) * m_e.heads + h;
    m_block = b;
    m_n = n;
    if (m_e.kind == CodecKind::BitPack) {
      m_byte = block_layout::bitpack_block_offset(tb, h, m_e.heads, m_e.block_size, n, m_e.dim,
                                                  m_e.bitpack_width);
    } else {
      m_byte = m_e.block_offsets[b];
      m_first_vector = block_layout::first_vector(tb, h, m_e.heads, m_e.block_size, n);
      m_bit = 8 * static_cast<std::uint64_t>(m_byte);
    }
  }
  // The in-place codes of the block: row i at base + i * row_bytes.
  const std::uint8_t* block_base() const {
    return m_e.payload.data() + m_byte;
  }
  std::size_t row_bytes() const {
    return static_cast<std::size_t>(m_e.dim) * m_e.bitpack_width / 8;
  }

  // Decodes vectors i0 .. i0 + m - 1 of the block (called in order) into rows 0 .. m - 1; the
  // index of a corrupt vector in `bad`, else -1.
  int decode(int i0, int m) {
    const int dim = m_e.dim;
    if (m_e.kind == CodecKind::BitPack) {
      const int w = m_e.bitpack_width;
      const std::uint64_t mask = (1u << w) - 1u;
      for (int i = 0; i < m; ++i) {
        std::uint64_t pos =
            8 * static_cast<std::uint64_t>(m_byte) + static_cast<std::uint64_t>(i0 + i) * dim * w;
        std::uint8_t* row = m_rows.data() + static_cast<std::size_t>(i) * stride();
        for (int c = 0; c < dim; ++c, pos += w) {
          row[c] = static_cast<std::uint8_t>(
              load_bits(m_e.payload.data(), m_e.payload.size(), pos) & mask);
        }
      }
      return -1;
    }
    if (m_e.kind == CodecKind::Rans) return decode_rans_tile(i0);
    const std::uint16_t* bits = m_e.vector_bits.data() + m_first_vector + i0;
    const BlockProblem p =
        m_pair_rows ? decode_huffman_symbols(m_e.payload.data(), m_e.payload.size(), m_bit, bits, m,
                                             dim / 2, *m_book, m_rows.data(), stride())
                    : decode_huffman_block(m_e.payload.data(), m_e.payload.size(), m_bit, bits, m,
                                           dim, *m_book, m_rows.data(), stride());
    for (int i = 0; i < m; ++i) m_bit += bits[i];
    m_problem = p.problem;
    return p.problem == nullptr ? -1 : i0 + p.vector;
  }

  Status corrupt(const char* what, int first, int h, int vector) const {
    if (m_e.kind == CodecKind::Rans) {
      return make_error(fmt::format(
          "fused attention: corrupt {} stream in block {} (tokens from {}, head {}): {}", what,
          m_block, first, h, m_problem != nullptr ? m_problem : "undecodable"));
    }
    return make_error(fmt::format(
        "fused attention: corrupt {} stream in block {} (tokens from {}, head {}), vector {} "
        "({} bits stored): {}",
        what, m_block, first, h, vector,
        m_e.vector_bits[m_first_vector + static_cast<std::size_t>(vector)],
        m_problem != nullptr ? m_problem : "undecodable"));
  }

 private:
  const EncodedCodes& m_e;
  const HuffmanCodebook* m_book;
  std::vector<std::uint8_t> m_rows;
  DecodeProblem m_problem = nullptr;
  bool m_nibbles = false, m_in_place = false, m_pair_rows = false;
  std::size_t m_block = 0, m_byte = 0, m_first_vector = 0;
  std::uint64_t m_bit = 0;
  int m_n = 0;
  // rANS: the whole block's symbols (and, for a pair book read a code a byte, its codes), and
  // the tile the loops read now.
  std::vector<std::uint8_t> m_symbols, m_codes;
  const std::uint8_t* m_tile = nullptr;

  int decode_rans_tile(int i0) {
    const bool pairs = m_book->pairs();
    const std::size_t per_vector = static_cast<std::size_t>(m_book->symbols_per_vector(m_e.dim));
    if (i0 == 0) {
      const std::uint64_t end = block_end(m_e, static_cast<int>(m_block));
      m_symbols.resize(static_cast<std::size_t>(m_n) * per_vector);
      m_problem = decode_rans_block(m_e.payload.data() + m_byte, end - m_byte, m_symbols.size(),
                                    *m_book->rans(), m_symbols.data());
      if (m_problem != nullptr) return 0;
      if (pairs && !m_pair_rows) {  // one byte per code
        const std::size_t dim = static_cast<std::size_t>(m_e.dim);
        m_codes.resize(static_cast<std::size_t>(m_n) * dim);
        for (int i = 0; i < m_n; ++i) {
          pair_symbols_to_codes(m_symbols.data() + static_cast<std::size_t>(i) * per_vector,
                                m_e.dim, m_codes.data() + static_cast<std::size_t>(i) * dim);
        }
      }
    }
    const std::uint8_t* base = pairs && !m_pair_rows ? m_codes.data() : m_symbols.data();
    m_tile = base + static_cast<std::size_t>(i0) * stride();
    return -1;
  }
};

}  // namespace kvlab::detail
