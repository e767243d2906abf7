// The per-group variable-width codec's vectors (docs/FORMAT.md, "VarWidth streams"): each group of
// 16 codes stored in the fewest bits that hold its largest code, behind a 4-bit header.
#include <algorithm>

#include "codec/codec_streams.h"

namespace kvlab::detail {

void encode_varwidth_vector(const std::uint8_t* codes, int dim, BitWriter& out) {
  // At most 8 bits per code plus a 4-bit header per 16 codes.
  BitWriter::Cursor c = out.begin(static_cast<std::size_t>(dim) * 2 + 8);
  auto put = [&c](std::uint32_t bits, unsigned count) {  // count <= 8
    c.acc |= static_cast<std::uint64_t>(bits) << c.pending;
    c.pending += count;
    if (c.pending >= 32) {
      store_le64(c.p, c.acc);
      c.p += 4;
      c.acc >>= 32;
      c.pending -= 32;
    }
  };
  for (int g = 0; g < dim; g += kVarWidthGroup) {
    const int n = std::min(kVarWidthGroup, dim - g);
    unsigned max_code = 0;
    for (int i = 0; i < n; ++i) max_code |= codes[g + i];  // same bit width as the maximum
    const auto width = static_cast<unsigned>(std::bit_width(max_code));
    put(width, 4);
    if (width == 0) continue;
    for (int i = 0; i < n; ++i) put(codes[g + i], width);
  }
  // Leave the BitWriter's invariant: fewer than 8 pending bits, the rest stored.
  store_le64(c.p, c.acc);
  c.p += c.pending >> 3;
  c.acc >>= c.pending & ~7u;
  c.pending &= 7;
  out.commit(c);
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
