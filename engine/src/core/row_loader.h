// Converts token rows of a view to contiguous float, the form every quantizer works on.
#pragma once

#include "kvlab/engine/core/tensor.h"

namespace kvlab::detail {

// Writes rows [t0, t1) of `x` as float, [t1 - t0][heads * dim].
inline void load_rows(const TensorView& x, int t0, int t1, float* out) {
  const std::size_t dim = static_cast<std::size_t>(x.dim());
  if (x.contiguous()) {
    const std::size_t n = static_cast<std::size_t>(x.heads()) * dim * (t1 - t0);
    convert_to_float(x.dtype(), {x.row_ptr(t0, 0), n * dtype_size(x.dtype())}, {out, n});
    return;
  }
  for (int t = t0; t < t1; ++t) {
    for (int h = 0; h < x.heads(); ++h, out += dim) x.load_row(t, h, {out, dim});
  }
}

}  // namespace kvlab::detail
