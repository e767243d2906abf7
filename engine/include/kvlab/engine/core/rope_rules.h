// One RoPE pair turned by an angle's float cos and sin, written once for the CPU (rope.cpp's
// apply_rope_rows) and the GPU (KVQuant's device quantizer turns post-RoPE keys back before it
// codes them): x0' = x0 c - x1 s, x1' = x0 s + x1 c, each product rounded to float before the
// sum, on both compilers (the CPU's -march=native and nvcc would otherwise fuse one product into
// the sum, each where it chooses). Rows are memory bound, so the scalar rounding costs the CPU
// about 5% (4 Mi values: 3.24 ms fused, 3.43 ms rounded, one Zen 3 core).
#pragma once

#include "kvlab/engine/core/host_device.h"

namespace kvlab::rope_rules {

KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE void turn_pair(float& x0, float& x1, float c, float s) {
  const float a = x0, b = x1;
  x0 = rounded_product(a, c) - rounded_product(b, s);
  x1 = rounded_product(a, s) + rounded_product(b, c);
}

// The dims of pair i of a head whose first `rotary_dims` dims turn: (i, i + rotary_dims / 2)
// when split in halves (Hugging Face, NeoX), else (2i, 2i + 1) (llama2.c, ggml's normal mode).
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE int pair_first(int i, bool half_split) {
  return half_split ? i : 2 * i;
}
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE int pair_second(int i, int rotary_dims, bool half_split) {
  return half_split ? i + rotary_dims / 2 : 2 * i + 1;
}

}  // namespace kvlab::rope_rules
