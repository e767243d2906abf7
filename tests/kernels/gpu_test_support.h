// What every GPU test shares: a test without a usable GPU reports SKIPPED with the driver's
// reason instead of failing.
#pragma once

#include <gtest/gtest.h>

#include "kvlab/kernels/gpu_kv.h"

#define KVLAB_REQUIRE_GPU()                                           \
  do {                                                                \
    if (::kvlab::Status gpu_ = ::kvlab::cuda::require_gpu(); !gpu_) { \
      GTEST_SKIP() << "no GPU: " << gpu_.message();                   \
    }                                                                 \
  } while (0)
