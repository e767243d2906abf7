#include "codec/bitpack.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "kvlab/engine/codec/huffman_book.h"

namespace kvlab::detail {

namespace {

void pack_slow(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out,
               std::size_t first) {
  const std::uint8_t mask = static_cast<std::uint8_t>((1u << bits) - 1);
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t bit = (first + i) * static_cast<std::size_t>(bits);
    const unsigned shift = bit % 8;
    std::uint8_t& byte = out[bit / 8];
    byte = static_cast<std::uint8_t>((byte & ~(mask << shift)) | ((codes[i] & mask) << shift));
  }
}

void unpack_slow(const std::uint8_t* packed, std::size_t first, std::size_t count, int bits,
                 std::uint8_t* codes) {
  const unsigned mask = (1u << bits) - 1;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t bit = (first + i) * static_cast<std::size_t>(bits);
    codes[i] = static_cast<std::uint8_t>((packed[bit / 8] >> (bit % 8)) & mask);
  }
}

}  // namespace

void pack_codes(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out,
                std::size_t first) {
  if (count == 0) return;  // nothing to write; also keeps null buffers away from memcpy
  if (bits == 8) {
    std::memcpy(out + first, codes, count);
    return;
  }
  const std::size_t per_byte = 8 / static_cast<std::size_t>(bits);
  // Leading codes up to a byte boundary, then whole bytes, then the tail.
  std::size_t head = (per_byte - first % per_byte) % per_byte;
  if (head > count) head = count;
  pack_slow(codes, head, bits, out, first);
  codes += head;
  count -= head;
  first += head;
  std::uint8_t* dst = out + first / per_byte;
  const std::size_t whole = count / per_byte;
  if (bits == 4) {
    for (std::size_t i = 0; i < whole; ++i) {
      dst[i] = static_cast<std::uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
    }
  } else if (bits == 2) {
    for (std::size_t i = 0; i < whole; ++i) {
      const std::uint8_t* c = codes + 4 * i;
      dst[i] = static_cast<std::uint8_t>(c[0] | (c[1] << 2) | (c[2] << 4) | (c[3] << 6));
    }
  } else {
    pack_slow(codes, whole * per_byte, bits, out, first);
  }
  pack_slow(codes + whole * per_byte, count - whole * per_byte, bits, out,
            first + whole * per_byte);
}

void unpack_codes(const std::uint8_t* packed, std::size_t first, std::size_t count, int bits,
                  std::uint8_t* codes) {
  if (count == 0) return;
  if (bits == 8) {
    std::memcpy(codes, packed + first, count);
    return;
  }
  const std::size_t per_byte = 8 / static_cast<std::size_t>(bits);
  std::size_t head = (per_byte - first % per_byte) % per_byte;
  if (head > count) head = count;
  unpack_slow(packed, first, head, bits, codes);
  codes += head;
  count -= head;
  first += head;
  const std::uint8_t* src = packed + first / per_byte;
  const std::size_t whole = count / per_byte;
  if (bits == 4) {
    for (std::size_t i = 0; i < whole; ++i) {
      codes[2 * i] = src[i] & 0xf;
      codes[2 * i + 1] = src[i] >> 4;
    }
  } else if (bits == 2) {
    for (std::size_t i = 0; i < whole; ++i) {
      std::uint8_t* c = codes + 4 * i;
      c[0] = src[i] & 3;
      c[1] = (src[i] >> 2) & 3;
      c[2] = (src[i] >> 4) & 3;
      c[3] = src[i] >> 6;
    }
  } else {
    unpack_slow(packed, first, whole * per_byte, bits, codes);
  }
  unpack_slow(packed, first + whole * per_byte, count - whole * per_byte, bits,
              codes + whole * per_byte);
}

void count_packed_codes(const std::uint8_t* packed, std::size_t count, int bits,
                        std::uint64_t* counts) {
  if (bits == 8) {  // one code a byte: nothing to unpack
    const CodeCounts c = count_codes({packed, count});
    for (std::size_t v = 0; v < c.size(); ++v) counts[v] += c[v];
    return;
  }
  constexpr std::size_t kSlice = 1 << 16;
  std::array<std::uint8_t, kSlice> codes;
  const std::size_t values = std::size_t{1} << bits;
  for (std::size_t at = 0; at < count; at += kSlice) {
    const std::size_t n = std::min(kSlice, count - at);
    unpack_codes(packed, at, n, bits, codes.data());
    const CodeCounts c = count_codes({codes.data(), n});
    for (std::size_t v = 0; v < values; ++v) counts[v] += c[v];
  }
}

}  // namespace kvlab::detail
