// Code-length construction for the Huffman codec. Private to the engine (tests use it to compare
// the length-limited code with an unlimited one).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvlab::detail {

// Optimal code lengths under a maximum length (package-merge, Larmore & Hirschberg 1990): for
// weights w_i, minimises sum w_i * l_i subject to l_i <= max_length and Kraft's sum <= 1.
// Symbols of weight 0 get length 0 (no code). A single symbol gets length 1. Requires the number
// of nonzero weights to be at most 2^max_length and 1 <= max_length <= 30.
std::vector<std::uint8_t> limited_code_lengths(std::span<const std::uint64_t> weights,
                                               int max_length);

// Canonical code values (DEFLATE's rule, RFC 1951 Sec. 3.2.2): symbols sorted by (length,
// symbol index) get consecutive values, each length's first value continuing the previous
// length's shifted left. Values are MSB-first. Length 0 gets value 0.
std::vector<std::uint32_t> canonical_codes(std::span<const std::uint8_t> lengths);

// The low `length` bits of `value` in reverse order.
constexpr std::uint32_t reverse_bits(std::uint32_t value, int length) {
  std::uint32_t r = 0;
  for (int i = 0; i < length; ++i) r |= ((value >> i) & 1u) << (length - 1 - i);
  return r;
}

}  // namespace kvlab::detail
