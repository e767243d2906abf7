// What every GPU test shares: a test without a usable GPU reports SKIPPED with the driver's
// reason instead of failing, and the error measure the outputs are held to.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kvlab/kernels/gpu_kv.h"

#define KVLAB_REQUIRE_GPU()                                           \
  do {                                                                \
    if (::kvlab::Status gpu_ = ::kvlab::cuda::require_gpu(); !gpu_) { \
      GTEST_SKIP() << "no GPU: " << gpu_.message();                   \
    }                                                                 \
  } while (0)

namespace kvlab::test {

// sqrt(sum (x - ref)^2 / sum ref^2); infinite when any element is not finite (unwritten,
// NaN-poisoned).
inline double rel_error(const std::vector<float>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace kvlab::test
