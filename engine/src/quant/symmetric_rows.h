// Reconstruction of per-tensor symmetric INT8 / INT4 codes (symmetric_quantizer.cpp): a code c
// stands for (c - 2^(bits-1)) * scale (group_rules.h's symmetric_code offsets it). One decoder
// for the quantizer's dequantize_tokens() and for the stored cache's rows
// (model/kv_method_store.cpp), so the two reconstruct the same floats by construction.
// Private to the engine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvlab::detail {

// `n` codes from code index `first` of a packed stream (codec/bitpack.h: INT4 two a byte, low
// nibble first) into floats. With an odd number of values a token, an INT4 row can begin in the
// middle of a byte; its first code is then the byte's high nibble.
inline void symmetric_decode(const std::uint8_t* packed, std::size_t first, std::size_t n, int bits,
                             float scale, float* out) {
  const float offset = static_cast<float>(1 << (bits - 1));
  if (bits == 8) {
    const std::uint8_t* src = packed + first;
    for (std::size_t i = 0; i < n; ++i) out[i] = (static_cast<float>(src[i]) - offset) * scale;
    return;
  }
  const std::uint8_t* src = packed + first / 2;
  if (first % 2 == 1 && n > 0) {
    *out++ = (static_cast<float>(*src++ >> 4) - offset) * scale;
    --n;
  }
  const std::size_t pairs = n / 2;
  for (std::size_t j = 0; j < pairs; ++j) {
    out[2 * j] = (static_cast<float>(src[j] & 0xf) - offset) * scale;
    out[2 * j + 1] = (static_cast<float>(src[j] >> 4) - offset) * scale;
  }
  if (n % 2 == 1) out[n - 1] = (static_cast<float>(src[pairs] & 0xf) - offset) * scale;
}

}  // namespace kvlab::detail
