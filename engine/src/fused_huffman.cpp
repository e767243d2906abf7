// Multi-symbol Huffman decoding for the fused attention paths (docs/FORMAT.md, "Decoding").
#include "fused_huffman.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace kvlab::detail {

namespace {

static_assert(std::endian::native == std::endian::little,
              "the bit window reads little-endian u64 words (docs/FORMAT.md, Bit order)");

constexpr std::uint32_t kIndexMask = HuffmanCodebook::kTableSize - 1;
constexpr int kLanes = 4;
// Multi-symbol steps per refill: each takes at most 12 bits, a refill gives at least 57.
constexpr int kStepsPerRefill = 4;
constexpr std::ptrdiff_t kLockstepRoom = kStepsPerRefill * FusedHuffmanTable::kMaxCodes;

struct Lane {
  std::uint64_t pos, buf;
  std::uint8_t* out;
  std::uint8_t* end;
  bool bad;
};

struct Source {
  const std::uint8_t* data;
  std::uint64_t last_byte;  // readable - 8: the last byte an 8-byte load may start at
  std::uint64_t peek(std::uint64_t pos) const {
    std::uint64_t w;
    std::memcpy(&w, data + std::min(pos >> 3, last_byte), 8);
    return w >> (pos & 7);
  }
};

// One code through the single-symbol table (the escape takes its 8 raw bits), then a refill:
// the rare path of a multi-symbol step, and every step near a vector's end.
inline void single_step(Lane& s, const std::uint16_t* single, const Source& src) {
  const std::uint32_t e = single[s.buf & kIndexMask];
  std::uint32_t sym = e & 511u, len = e >> 9;
  if (e == 0) [[unlikely]] {  // bits that start no code: consume one so decoding ends
    s.bad = true;
    sym = 0;
    len = 1;
  } else if (sym == static_cast<std::uint32_t>(HuffmanCodebook::kEscape)) {
    sym = static_cast<std::uint32_t>((s.buf >> len) & 255u);
    len += 8;
  }
  *s.out++ = static_cast<std::uint8_t>(sym);
  s.pos += len;
  s.buf = src.peek(s.pos);
}

inline void multi_step(Lane& s, const std::uint32_t* multi, const std::uint16_t* single,
                       const Source& src) {
  const std::uint32_t e = multi[s.buf & kIndexMask];
  if (e < (1u << 30)) [[unlikely]] {  // no code count: escape or no code
    single_step(s, single, src);
    return;
  }
  const std::uint32_t codes = e >> 6;  // the codes, and the count in the fourth byte (slack)
  std::memcpy(s.out, &codes, 4);
  s.out += e >> 30;
  s.buf >>= (e & 63u);
  s.pos += e & 63u;
}

}  // namespace

FusedHuffmanTable::FusedHuffmanTable(const HuffmanCodebook& book)
    : m_multi(HuffmanCodebook::kTableSize), m_single(book.decode_table()) {
  for (std::uint32_t idx = 0; idx < HuffmanCodebook::kTableSize; ++idx) {
    std::uint32_t total = 0, count = 0, codes = 0;
    while (count < kMaxCodes) {
      // Bits past the 12 known ones read as zero; a code that fits in the known bits does not
      // depend on them.
      const std::uint32_t e = m_single[(idx >> total) & kIndexMask];
      const std::uint32_t len = e >> 9, sym = e & 511u;
      if (e == 0 || sym == static_cast<std::uint32_t>(HuffmanCodebook::kEscape) ||
          total + len > static_cast<std::uint32_t>(HuffmanCodebook::kMaxCodeLength)) {
        break;
      }
      codes |= sym << (8 * count);
      total += len;
      ++count;
    }
    m_multi[idx] = count == 0 ? 0u : total | (codes << 6) | (count << 30);
  }
}

int decode_huffman_rows(const FusedHuffmanTable& table, const std::uint8_t* data,
                        std::size_t readable, std::uint64_t start_bit,
                        const std::uint16_t* vector_bits, int count, int dim, std::uint8_t* out,
                        std::size_t stride) {
  const Source src{data, readable - 8};
  const std::uint32_t* multi = table.multi();
  const std::uint16_t* single = table.single();
  std::uint64_t bit = start_bit;
  for (int i0 = 0; i0 < count; i0 += kLanes) {
    const int m = std::min(kLanes, count - i0);
    Lane s[kLanes];
    std::uint64_t ends[kLanes];
    for (int k = 0; k < kLanes; ++k) {
      // Missing lanes repeat the last vector into its own row, so the lock step needs no test.
      const int v = i0 + std::min(k, m - 1);
      const std::uint64_t first = bit;
      if (k < m) {
        ends[k] = bit + vector_bits[v];
        bit = ends[k];
      }
      std::uint8_t* row = out + static_cast<std::size_t>(v) * stride;
      s[k] = Lane{k < m ? first : s[m - 1].pos, 0, row, row + dim, false};
      s[k].buf = src.peek(s[k].pos);
    }
    for (;;) {
      bool room = true;
      for (int k = 0; k < kLanes; ++k) room &= s[k].end - s[k].out >= kLockstepRoom;
      if (!room) break;
      for (int k = 0; k < kLanes; ++k) s[k].buf = src.peek(s[k].pos);
      for (int j = 0; j < kStepsPerRefill; ++j) {
        for (int k = 0; k < kLanes; ++k) multi_step(s[k], multi, single, src);
      }
    }
    // The last codes of each vector: multi-symbol steps while three more fit, then one at a
    // time, the lanes still interleaved.
    for (bool any = true; any;) {
      any = false;
      for (int k = 0; k < m; ++k) {
        const std::ptrdiff_t left = s[k].end - s[k].out;
        if (left <= 0) continue;
        any = true;
        s[k].buf = src.peek(s[k].pos);
        if (left >= FusedHuffmanTable::kMaxCodes) {
          multi_step(s[k], multi, single, src);
        } else {
          single_step(s[k], single, src);
        }
      }
    }
    for (int k = 0; k < m; ++k) {
      if (s[k].bad || s[k].pos != ends[k]) return i0 + k;
    }
  }
  return -1;
}

}  // namespace kvlab::detail
