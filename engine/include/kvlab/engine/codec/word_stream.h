// The code streams read as 32-bit words: how the GPU kernels read a Huffman or bit-packed vector
// (docs/FORMAT.md, "Huffman streams" and "Bitpack"), in one header for the CUDA code and the CPU
// tests that run it. Every function is constexpr and, under nvcc, __host__ __device__; the
// kernels (kernels/src/fused_attention.cu) pass a word source that loads through the read-only
// cache, the tests one over a host vector (tests/engine/test_word_stream.cpp).
//
// The rules:
// - A payload is its bytes as little-endian 32-bit words, padded with zero bytes to a whole word
//   and followed by two zero words (payload_words_for), so a reader positioned at the payload's
//   last bit finds its first two words inside the allocation.
// - Bits are read LSB-first, the order the encoders write (the stream's first bit is bit 0 of its
//   first byte).
// - The reader keeps a 64-bit buffer holding at least 32 unread bits: peek() gives the next 32
//   bits with no load, and a skip that leaves fewer than 32 refills with one aligned word. A
//   word index past the payload's last word is clamped to the last padding word, which is zero:
//   a corrupt bit count or offset can misdecode but never read outside the allocation.
//
// The CPU's own decoders (engine/src/codec/huffman_decode.cpp) read the same bit order through
// unaligned 8-byte loads, which x86 makes cheap and a GPU does not; both are held to the same
// bytes by the tests.
#pragma once

#include <cstdint>

#include "kvlab/engine/codec/table_entry.h"

namespace kvlab::word_stream {

// Words to allocate for a payload of `bytes` bytes: whole words, plus two zero words of slack.
KVLAB_HOST_DEVICE constexpr std::uint64_t payload_words_for(std::uint64_t bytes) {
  return (bytes + 3) / 4 + 2;
}

KVLAB_HOST_DEVICE constexpr std::uint64_t min_u64(std::uint64_t a, std::uint64_t b) {
  return a < b ? a : b;
}

// A reader over `words` (a callable: words(i) is word i) of a payload of `payload_words` words
// (payload_words_for's count, padding included), starting at bit `pos`.
template <class Words>
class WordReader {
 public:
  KVLAB_HOST_DEVICE constexpr WordReader(Words words, std::uint64_t payload_words,
                                         std::uint64_t pos)
      : m_words(words), m_last(payload_words - 1) {
    const std::uint64_t i = min_u64(pos >> 5, m_last - 1);
    const std::uint32_t sh = static_cast<std::uint32_t>(pos & 31u);
    m_buf = (static_cast<std::uint64_t>(m_words(i)) |
             (static_cast<std::uint64_t>(m_words(i + 1)) << 32)) >>
            sh;
    m_count = 64 - sh;
    m_next = i + 2;
  }
  // The next 32 bits, first bit in bit 0.
  KVLAB_HOST_DEVICE constexpr std::uint32_t peek() const {
    return static_cast<std::uint32_t>(m_buf);
  }
  // Moves past n <= 32 bits.
  KVLAB_HOST_DEVICE constexpr void skip(std::uint32_t n) {
    m_buf = n < 64 ? m_buf >> n : 0;
    m_count -= n;
    if (m_count < 32) {
      m_buf |= static_cast<std::uint64_t>(m_words(min_u64(m_next, m_last))) << m_count;
      m_count += 32;
      ++m_next;
    }
  }

 private:
  Words m_words;
  std::uint64_t m_last;  // index of the last padding word (zero)
  std::uint64_t m_next;  // next word to load
  std::uint64_t m_buf;
  std::uint32_t m_count;  // bits in m_buf, >= 32
};

// Bytes per row of a shared-memory tile of decoded codes (a byte a code), as the GPU's attention
// kernels keep one: whole 32-bit words and one more, so rows start in different banks (a thread
// reads a row each) and a decoder's spare write past the last channel (decode_pair_vector's
// f(dim, 0), a pair's second code) stays inside the row.
KVLAB_HOST_DEVICE constexpr int tile_row(int dim) {
  return ((dim + 3) & ~3) + 4;
}

// The words of one block's stream that a decoder copies to fast memory (a GPU's shared memory)
// before decoding it: from the 16-byte-aligned word at or below the block's first byte to the
// reader's look-ahead past its last byte (two words), inside the payload, at most `capacity`
// words. With corrupt offsets the window only shrinks: StagedWords reads what it lacks from the
// payload itself.
struct StageWindow {
  std::uint64_t base = 0;  // first word copied, a multiple of 4
  std::uint32_t count = 0;
};
KVLAB_HOST_DEVICE constexpr StageWindow stage_window(std::uint64_t first_byte,
                                                     std::uint64_t end_byte,
                                                     std::uint64_t payload_words,
                                                     std::uint32_t capacity) {
  StageWindow w;
  w.base = (first_byte / 4) & ~std::uint64_t{3};
  const std::uint64_t end = min_u64((end_byte + 3) / 4 + 2, payload_words);
  const std::uint64_t n = end > w.base ? end - w.base : 0;
  w.count = static_cast<std::uint32_t>(min_u64(n, capacity));
  return w;
}

// A word source that takes words [base, base + count) from a staged copy and the others from
// `words` (the payload).
template <class Words>
struct StagedWords {
  const std::uint32_t* stage;
  Words words;
  std::uint64_t base;
  std::uint32_t count;
  KVLAB_HOST_DEVICE constexpr std::uint32_t operator()(std::uint64_t i) const {
    const std::uint64_t j = i - base;  // wraps for i < base
    return j < count ? stage[j] : words(i);
  }
};

// The pair decode table (table_entry.h's pair entries) of a single-code Huffman decode table
// (HuffmanCodebook::decode_table(), kTableSize entries of the next kIndexBits bits). An entry
// takes a second symbol when its whole code lies inside the index bits and is no escape.
inline constexpr std::uint32_t kIndexBits = 12;
inline constexpr std::uint32_t kTableSize = 1u << kIndexBits;
inline constexpr std::uint32_t kEscapeSymbol = 256;  // HuffmanCodebook::kEscape

KVLAB_HOST_DEVICE constexpr void fill_pair_table(const std::uint16_t* single, std::uint32_t* out) {
  for (std::uint32_t i = 0; i < kTableSize; ++i) {
    const std::uint32_t e1 = single[i];
    out[i] = 0;
    if (e1 == 0) continue;
    const std::uint32_t len1 = table_entry::single_length(e1);
    const std::uint32_t s1 = table_entry::single_symbol(e1);
    if (s1 == kEscapeSymbol) {
      out[i] = table_entry::pair(0, 0, len1, len1, 1, true);
      continue;
    }
    std::uint32_t entry = table_entry::pair(s1, 0, len1, len1, 1, false);
    const std::uint32_t room = kIndexBits - len1;
    if (room > 0) {
      const std::uint32_t e2 = single[(i >> len1) & ((1u << room) - 1u)];
      const std::uint32_t len2 = table_entry::single_length(e2);
      const std::uint32_t s2 = table_entry::single_symbol(e2);
      if (e2 != 0 && len2 <= room && s2 != kEscapeSymbol) {
        entry = table_entry::pair(s1, s2, len1, len1 + len2, 2, false);
      }
    }
    out[i] = entry;
  }
}

// Decodes one Huffman vector of `dim` codes through the pair table, calling f(c, code) for each
// channel c. Returns false when the vector is corrupt: a lookup that is no code, or bits used
// other than `bits` (its bit count). The last code of a vector never takes a paired second one,
// so a vector uses exactly its own bits.
//
// No branch on the entry's count: a lookup without a second symbol also calls f(c + 1, 0) (at
// most f(dim, 0) past the last channel), which the next lookup overwrites; callers give f room
// for channel dim.
template <class Reader, class F>
KVLAB_HOST_DEVICE constexpr bool decode_pair_vector(Reader& r, const std::uint32_t* table, int dim,
                                                    std::uint32_t bits, F&& f) {
  std::uint32_t used = 0;
  bool ok = true;
  int c = 0;
  while (c < dim) {
    const std::uint32_t x = r.peek();
    const std::uint32_t e = table[x & (kTableSize - 1u)];
    const std::uint32_t len1 = table_entry::pair_first_length(e);
    const bool esc = table_entry::pair_escape(e);
    const bool two = table_entry::pair_count(e) == 2u && c + 1 < dim;
    const std::uint32_t first = esc ? (x >> len1) & 255u : table_entry::pair_first(e);
    const std::uint32_t adv = two ? table_entry::pair_total_length(e) : len1 + (esc ? 8u : 0u);
    r.skip(adv);
    used += adv;
    ok &= table_entry::pair_count(e) != 0;
    f(c, first);
    f(c + 1 < dim ? c + 1 : dim, two ? table_entry::pair_second(e) : 0u);
    c += two ? 2 : 1;
  }
  return ok && used == bits;
}

// Decodes one bit-packed vector of `dim` codes of kWidth bits (2, 4 or 8: whole codes per word),
// calling f(c, code) for each channel c < dim.
template <int kWidth, class Reader, class F>
KVLAB_HOST_DEVICE constexpr void decode_packed_vector(Reader& r, int dim, F&& f) {
  static_assert(kWidth == 2 || kWidth == 4 || kWidth == 8, "codes must not straddle words");
  constexpr int kPer = 32 / kWidth;
  constexpr std::uint32_t kMask = (1u << kWidth) - 1u;
  for (int c0 = 0; c0 < dim; c0 += kPer) {
    const std::uint32_t x = r.peek();
    r.skip(32);
    KVLAB_UNROLL
    for (int k = 0; k < kPer; ++k) {
      if (c0 + k < dim) f(c0 + k, (x >> (k * kWidth)) & kMask);
    }
  }
}

}  // namespace kvlab::word_stream
