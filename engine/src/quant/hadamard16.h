// The Walsh–Hadamard butterflies of strides 1, 2, 4 and 8 on 16 floats in one AVX-512 register,
// for the vector forms of hadamard_transform (rotation.cpp: RandomizedHadamard::apply_rows;
// ggml_block_quantizer.cpp: llama.cpp's attn_rot). Private to the engine.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace kvlab::detail {

// hadamard_transform's strides 1 … 8 (rotation.cpp) on a 16-float vector: every value gets the
// same sums and differences in the same order (a + b for the lower, a - b for the upper of each
// pair), so the floats are the same. Inside the vector: with p the vector
// with partners swapped, lanes without the stride bit take v + p, lanes with it p - v. (The
// masked permutes with an all-ones mask are the plain ones; GCC 12 warns about those.)
inline __m512 butterfly_in(__m512 v, __m512 p, __mmask16 upper) {
  return _mm512_mask_sub_ps(_mm512_add_ps(v, p), upper, p, v);
}

inline __m512 hadamard16(__m512 v) {
  v = butterfly_in(v, _mm512_mask_permute_ps(v, 0xFFFF, v, 0xB1), 0xAAAA);           // stride 1
  v = butterfly_in(v, _mm512_mask_permute_ps(v, 0xFFFF, v, 0x4E), 0xCCCC);           // stride 2
  v = butterfly_in(v, _mm512_mask_shuffle_f32x4(v, 0xFFFF, v, v, 0xB1), 0xF0F0);     // stride 4
  return butterfly_in(v, _mm512_mask_shuffle_f32x4(v, 0xFFFF, v, v, 0x4E), 0xFF00);  // stride 8
}

}  // namespace kvlab::detail
#endif
