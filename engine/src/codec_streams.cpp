// Per-vector streams of the Huffman and per-group variable-width codecs (docs/FORMAT.md).
// Huffman decoding is table-driven: one lookup in the codebook's 4096-entry table per symbol,
// from a 64-bit bit buffer refilled without branches; the bounds checks are predictable branches
// that only fail on corrupt input. One stream is latency-bound (lookup -> shift -> lookup);
// interleaving several vectors and multi-symbol tables are the next steps for speed.
#include <algorithm>

#include "codec_streams.h"

namespace kvlab::detail {

void encode_huffman_vector(const std::uint8_t* codes, int dim, const HuffmanCodebook& book,
                           BitWriter& out) {
  for (int i = 0; i < dim; ++i) out.put(book.enc_bits(codes[i]), book.cost_bits(codes[i]));
}

DecodeProblem decode_huffman_vector(const std::uint8_t* data, std::size_t readable,
                                    std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                    const HuffmanCodebook& book, std::uint8_t* out) {
  const std::uint16_t* const table = book.decode_table();
  return with_bounded_stream(data, readable, start_bit, bit_count,
                             [table, dim, out](const std::uint8_t* base, std::uint64_t pos,
                                               const std::uint64_t end) -> DecodeProblem {
                               constexpr std::uint64_t kMask = HuffmanCodebook::kTableSize - 1;
                               // Bit buffer with branchless refill (F. Giesen, "Reading bits in far
                               // too many ways", variant 4): after a refill the buffer holds >= 56
                               // bits, enough for a 12-bit escape and its 8 raw bits. Loads stay
                               // within 16 bytes past the stream (with_bounded_stream). Invariant:
                               // 8 * next == pos + count (bits of `buf` not yet consumed), count
                               // < 64.
                               const std::uint8_t* next = base + (pos >> 3) + 7;
                               std::uint64_t buf = load_le64(base + (pos >> 3)) >> (pos & 7);
                               unsigned count = 56 - static_cast<unsigned>(pos & 7);
                               for (int i = 0; i < dim; ++i) {
                                 // A valid stream never starts a code at or past its end; a corrupt
                                 // one may.
                                 if (pos >= end) return "stream ends before its last code";
                                 buf |= load_le64(next)
                                        << count;  // count < 64 here, so the shift is defined
                                 next += (63 - count) >> 3;
                                 count |= 56;
                                 const std::uint16_t entry = table[buf & kMask];
                                 std::uint32_t len = entry >> 9;
                                 std::uint32_t sym = entry & 0x1ff;
                                 if (len == 0) return "bits that are no code of the codebook";
                                 if (sym == static_cast<std::uint32_t>(HuffmanCodebook::kEscape)) {
                                   sym = static_cast<std::uint32_t>(buf >> len) & 0xff;
                                   len += 8;
                                 }
                                 out[i] = static_cast<std::uint8_t>(sym);
                                 buf >>= len;
                                 count -= len;
                                 pos += len;
                               }
                               if (pos != end) return "bit count disagrees with the decoded codes";
                               return nullptr;
                             });
}

void encode_varwidth_vector(const std::uint8_t* codes, int dim, BitWriter& out) {
  for (int g = 0; g < dim; g += kVarWidthGroup) {
    const int n = std::min(kVarWidthGroup, dim - g);
    unsigned max_code = 0;
    for (int i = 0; i < n; ++i) max_code |= codes[g + i];  // same bit width as the maximum
    const int width = std::bit_width(max_code);
    out.put(static_cast<std::uint32_t>(width), 4);
    if (width == 0) continue;
    for (int i = 0; i < n; ++i) out.put(codes[g + i], width);
  }
}

DecodeProblem decode_varwidth_vector(const std::uint8_t* data, std::size_t readable,
                                     std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                     std::uint8_t* out) {
  return with_bounded_stream(
      data, readable, start_bit, bit_count,
      [&](const std::uint8_t* base, std::uint64_t pos, std::uint64_t end) -> DecodeProblem {
        for (int g = 0; g < dim; g += kVarWidthGroup) {
          const int n = std::min(kVarWidthGroup, dim - g);
          if (pos + 4 > end) return "stream ends inside a group header";
          const auto width =
              static_cast<unsigned>((load_le64(base + (pos >> 3)) >> (pos & 7)) & 0xf);
          pos += 4;
          if (width > 8) return "group width header above 8 bits";
          if (pos + static_cast<std::uint64_t>(n) * width > end) {
            return "stream ends inside a group's codes";
          }
          const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
          for (int i = 0; i < n; ++i) {
            out[g + i] =
                static_cast<std::uint8_t>((load_le64(base + (pos >> 3)) >> (pos & 7)) & mask);
            pos += width;
          }
        }
        if (pos != end) return "bit count disagrees with the decoded codes";
        return nullptr;
      });
}

}  // namespace kvlab::detail
