// A rotation of every head vector before any quantizer (rotated_quantizer.cpp). Private to the
// engine; make_quantizer() (method.cpp) wraps a method's quantizer in it when the configuration
// names a rotation.
#pragma once

#include <cstdint>
#include <memory>

#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::detail {

struct RotationSpec {
  RotationKind kind = RotationKind::None;
  std::uint64_t seed = 0;
  bool values = false;  // rotate the values too (keys always)
};

// `inner` itself when spec.kind is None.
std::unique_ptr<Quantizer> make_rotated_quantizer(std::unique_ptr<Quantizer> inner,
                                                  RotationSpec spec);

}  // namespace kvlab::detail
