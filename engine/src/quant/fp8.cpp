#include "kvlab/engine/quant/fp8.h"

#include <bit>
#include <cmath>
#include <limits>

#include "quant/fp8_impl.h"

namespace kvlab {

float fp8_max(Fp8Format format) {
  return format == Fp8Format::E4M3 ? 448.f : 57344.f;
}

float fp8_to_float(std::uint8_t code, Fp8Format format) {
  return format == Fp8Format::E4M3 ? detail::fp8_decode<detail::E4M3>(code)
                                   : detail::fp8_decode<detail::E5M2>(code);
}

std::uint8_t float_to_fp8(float value, Fp8Format format) {
  return format == Fp8Format::E4M3 ? detail::fp8_encode<detail::E4M3>(value)
                                   : detail::fp8_encode<detail::E5M2>(value);
}

}  // namespace kvlab
