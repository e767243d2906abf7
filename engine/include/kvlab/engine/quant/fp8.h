// FP8 formats as used for KV caches (OCP 8-bit floating point spec; vLLM kv_cache_dtype=fp8).
//  E4M3 ("fn"): bias 7, no infinities, S.1111.111 is NaN, largest finite 448.
//  E5M2: bias 15, IEEE-like with infinities and NaN, largest finite 57344.
// Conversion from float rounds to nearest even and saturates: finite values beyond the largest
// finite (and infinities) become +-max; NaN stays NaN.
#pragma once

#include <cstdint>

namespace kvlab {

enum class Fp8Format : std::uint8_t { E4M3, E5M2 };

float fp8_max(Fp8Format format);
float fp8_to_float(std::uint8_t code, Fp8Format format);
std::uint8_t float_to_fp8(float value, Fp8Format format);

}  // namespace kvlab
