// Packing of b-bit codes (b = 1, 2, 4 or 8) into bytes: code i of a stream sits at bit
// (i * b) % 8 of byte (i * b) / 8, low bits first. Private to the engine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvlab::detail {

constexpr std::size_t packed_bytes(std::size_t count, int bits) {
  return (count * static_cast<std::size_t>(bits) + 7) / 8;
}

// Writes `count` codes (each < 2^bits) into `out` starting at code index `first`.
// Bits of `out` outside the written codes keep their value.
void pack_codes(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out,
                std::size_t first);
// Reads `count` codes starting at code index `first`.
void unpack_codes(const std::uint8_t* packed, std::size_t first, std::size_t count, int bits,
                  std::uint8_t* codes);
// Adds the count of each code value among the first `count` packed codes into counts[value]
// (counts has 2^bits entries), unpacking a slice at a time into a small buffer.
void count_packed_codes(const std::uint8_t* packed, std::size_t count, int bits,
                        std::uint64_t* counts);

}  // namespace kvlab::detail
