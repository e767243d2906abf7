// KVQuant's apply step for one entry and one token, written once for the CPU and the GPU (the
// method and the stored layout are in engine/src/quant/kvquant_quantizer.h). Every function is
// inline and, under nvcc, __host__ __device__; the CPU quantizer (kvquant_quantizer.cpp) and the
// kernels (kernels/src/quant_kvquant.cu) both call them, so the codes, outliers and ranges are
// the same bytes by construction.
//  - a range [lower, upper] normalises x to u = x * inv + bias, with offset = (upper + lower) / 2,
//    scale = (upper - lower) / 2, inv = 1 / scale (0 for an empty range), bias = -offset * inv
//    (the reference's quant_fn_nuq_recon); u is one fused multiply-add;
//  - a code is the number of level midpoints below u (a tie goes to the lower level, as the
//    reference's argmin over |u - level| picks the first);
//  - a key entry is an outlier when it lies above its channel's upper or below its lower
//    threshold (get_outliers);
//  - a value token's outliers are its k largest and k smallest entries, ranked by value, ties to
//    the lower index for the high tail and to the higher index for the low tail; the (k+1)-th of
//    each tail sets the range (QuantV.forward_fused_sparse's topk of k + 1). high_rank() and
//    low_rank() give an entry's place in each tail: the CPU selects the tails by a faster route
//    (select_token_tails) that the test holds to these ranks; the GPU ranks the entries a bound
//    leaves as candidates.
#pragma once

#include <cstdint>

#include "kvlab/engine/core/host_device.h"
#include "kvlab/engine/quant/group_rules.h"

namespace kvlab::kvquant_rules {

// Tokens the CPU quantizer loads (and turns back before RoPE) at a time: the RoPE angles' anchors
// (rope.h) fall at the sinks' end and every kChunkTokens after it.
inline constexpr int kChunkTokens = 64;

// inv and bias of the range [lower, upper].
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE void normaliser(float lower, float upper, float& inv,
                                                     float& bias) {
  const float offset = 0.5f * (upper + lower), scale = 0.5f * (upper - lower);
  inv = scale > 0.f ? 1.f / scale : 0.f;
  bias = -rounded_product(offset, inv);
}

// The code of a normalised value among `count` ascending midpoints.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE std::uint8_t level_code(float u, const float* mids,
                                                             int count) {
  int c = 0;
  for (int j = 0; j < count; ++j) c += u > mids[j] ? 1 : 0;
  return static_cast<std::uint8_t>(c);
}

KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE std::uint8_t entry_code(float x, float inv, float bias,
                                                             const float* mids, int count) {
  return level_code(rules::fused_multiply_add(x, inv, bias), mids, count);
}

KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE bool key_outlier(float x, float lower, float upper) {
  return x > upper || x < lower;
}

// Entries of x[0, n) ranked above entry j in the high tail (larger, or equal at a lower index),
// and in the low tail (smaller, or equal at a higher index). NaN entries rank nowhere.
template <class X>
KVLAB_HOST_DEVICE int high_rank(const X& x, int n, int j) {
  const float v = x[j];
  int r = 0;
  for (int i = 0; i < n; ++i) {
    const float a = x[i];
    r += (a > v || (a == v && i < j)) ? 1 : 0;
  }
  return r;
}
template <class X>
KVLAB_HOST_DEVICE int low_rank(const X& x, int n, int j) {
  const float v = x[j];
  int r = 0;
  for (int i = 0; i < n; ++i) {
    const float a = x[i];
    r += (a < v || (a == v && i > j)) ? 1 : 0;
  }
  return r;
}

}  // namespace kvlab::kvquant_rules
