// Small helpers shared by the engine tests that feed caches token by token.
#pragma once

#include <vector>

#include "kvlab/engine/core/tensor.h"

namespace kvlab::tensor_test {

// One token of `t` as float, all heads: [heads * dim].
inline std::vector<float> row_of(const Tensor& t, int token) {
  std::vector<float> r(static_cast<std::size_t>(t.heads()) * t.dim());
  for (int h = 0; h < t.heads(); ++h)
    t.view().load_row(token, h, std::span(r).subspan(static_cast<std::size_t>(h * t.dim())));
  return r;
}

}  // namespace kvlab::tensor_test
