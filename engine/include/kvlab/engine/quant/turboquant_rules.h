// TurboQuant's quantize step for one head vector, written once for the CPU and the GPU (the method
// and the stored layout are in engine/src/quant/turboquant_quantizer.h). Every function is inline
// and, under nvcc, __host__ __device__.
//
// The CPU quantizer (turboquant_quantizer.cpp) runs the same arithmetic a block of vectors at a
// time in AVX-512; its bytes are the bytes these functions give, vector by vector
// (TurboQuantRules.* checks every code, sign and norm). The GPU quantizer
// (kernels/src/quant_turboquant.cu) calls encode_vector() and nothing else, so both store the same
// bytes. For that, every sum below is written in its order, and every rounding is spelled out:
//  - ||x||: x_j^2 accumulated by fused multiply-adds in 16 lanes (x_j in lane j % 16, j
//    ascending), then 0 + lane 0 + ... + lane 15, then a correctly rounded square root;
//  - a product with a d x d matrix (the rotation Pi, QJL's S): each output a chain of fused
//    multiply-adds over k ascending, from 0;
//  - the randomized Hadamard H D / sqrt(d): signs first, then hadamard_transform's butterflies
//    (strides 1 to d / 2, each pair to its sum and difference), then times the float 1 / sqrt(d);
//  - a code: the number of boundaries b_k with y > ||x|| * b_k (the product rounded), as
//    count_boundaries_below (lloyd_max.h);
//  - QJL's residual: y_j - stored ||x|| * c[code] (the product rounded, then the difference);
//    gamma = ||r|| summed in index order, by fmas after an MSE stage and by a rounded product and
//    sum without one (the residual is then y itself).
// Products that must not fuse with the sum after them go through rounded_product()
// (core/host_device.h), which rounds on both compilers.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kvlab/engine/core/host_device.h"
#include "kvlab/engine/quant/group_rules.h"

namespace kvlab::turboquant_rules {

inline constexpr int kNormLanes = 16;

KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float square_root(float v) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(v);
#else
  return std::sqrt(v);
#endif
}

// A vector of d floats at p[0], p[stride], p[2 stride], ...: the CPU's rows are contiguous; the
// GPU keeps one vector per thread in columns (stride = the vectors in flight), so that a warp's
// loads of one coordinate are coalesced.
struct Strided {
  float* p;
  std::size_t stride;
  KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float& operator[](int i) const {
    return p[static_cast<std::size_t>(i) * stride];
  }
};

// What a tensor's vectors share: everything follows from (d, bits, seed) and is built on the host
// (turboquant_quantizer.h, turboquant_tables()).
struct Tables {
  int dim = 0;
  int mse_bits = 0;  // 0: no MSE stage (TurboQuant_prod with 1 bit)
  bool qjl = false;
  const float* rotation = nullptr;    // Pi, d x d row-major; null with the Hadamard
  const float* signs = nullptr;       // the Hadamard's D, d values of +-1
  float hadamard_scale = 1.f;         // 1.0f / sqrtf(d), as the CPU computes it
  const float* boundaries = nullptr;  // 2^mse_bits - 1, ascending
  const float* centroids = nullptr;   // 2^mse_bits
  const float* sketch = nullptr;      // S, d x d row-major, with QJL
  float qjl_scale = 0.f;              // sqrt(pi / 2) / d, as the CPU computes it
  rules::ParamDtype norm_dtype = rules::ParamDtype::F16;
};

// ||x|| of d values (x[j] a float), in the lane order above.
template <class X>
KVLAB_HOST_DEVICE float vector_norm(const X& x, int d) {
  float sum = 0.f;
  for (int lane = 0; lane < kNormLanes; ++lane) {
    float acc = 0.f;
    for (int j = lane; j < d; j += kNormLanes) acc = rules::fused_multiply_add(x[j], x[j], acc);
    sum = sum + acc;
  }
  return square_root(sum);
}

// ||r|| with the squares summed in index order: by fmas (fused) or by a rounded product and a sum.
template <class R>
KVLAB_HOST_DEVICE float residual_norm(const R& r, int d, bool fused) {
  float rr = 0.f;
  for (int j = 0; j < d; ++j) {
    rr = fused ? rules::fused_multiply_add(r[j], r[j], rr) : rr + rounded_product(r[j], r[j]);
  }
  return square_root(rr);
}

// A norm as stored (norm_dtype; fp16 saturates at 65504). v is finite and >= 0.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float stored_norm(float v, rules::ParamDtype dtype) {
  return rules::round_param(v, dtype);
}

// sum_k x[k] * row[k] by fmas over k ascending, from 0.
template <class X>
KVLAB_HOST_DEVICE float ordered_dot(const X& x, const float* row, int d) {
  float acc = 0.f;
  for (int k = 0; k < d; ++k) acc = rules::fused_multiply_add(x[k], row[k], acc);
  return acc;
}

// v <- H_d v, unscaled (the caller multiplies by 1 / sqrt(d)), d a power of two: the butterflies
// of hadamard_transform (rotation.h) in its order, strides 1, 2, 4, ..., d / 2.
template <class V>
KVLAB_HOST_DEVICE void hadamard_unscaled(V& v, int d) {
  for (int h = 1; h < d; h *= 2) {
    for (int b = 0; b < d; b += 2 * h) {
      for (int j = b; j < b + h; ++j) {
        const float a = v[j], c = v[j + h];
        v[j] = a + c;
        v[j + h] = a - c;
      }
    }
  }
}

// y <- Pi x (x[k] a float; y writable, not x's storage).
template <class X, class Y>
KVLAB_HOST_DEVICE void rotate(const Tables& t, const X& x, Y& y) {
  const int d = t.dim;
  if (t.rotation != nullptr) {
    for (int c = 0; c < d; ++c)
      y[c] = ordered_dot(x, t.rotation + static_cast<std::size_t>(c) * d, d);
    return;
  }
  for (int j = 0; j < d; ++j) y[j] = rounded_product(x[j], t.signs[j]);
  hadamard_unscaled(y, d);
  for (int j = 0; j < d; ++j) y[j] = rounded_product(y[j], t.hadamard_scale);
}

// The MSE code of y against the boundaries scaled by ||x|| (as computed).
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE std::uint8_t level_code(float y, float norm,
                                                             const float* boundaries, int count) {
  int c = 0;
  for (int k = 0; k < count; ++k) c += y > rounded_product(norm, boundaries[k]) ? 1 : 0;
  return static_cast<std::uint8_t>(c);
}

// What encode_vector() stores for one vector; codes and signs are d bytes each (0 / 1 for signs),
// in coordinate order.
struct Encoded {
  std::uint8_t* codes;  // MSE codes (unused without an MSE stage)
  std::uint8_t* signs;  // QJL sign bits (unused without QJL)
  float norm = 0.f;     // stored ||x||
  float gamma = 0.f;    // stored ||r|| (QJL)
};

// One vector x (x[k] a float) coded: y and r are d floats of scratch (r unused without QJL).
// False, with nothing stored, when ||x|| is not finite (the quantizer reports the vector).
template <class X, class Y, class R>
KVLAB_HOST_DEVICE bool encode_vector(const Tables& t, const X& x, Y& y, R& r, Encoded& out) {
  const int d = t.dim;
  const float norm = vector_norm(x, d);
  if (!(norm <= 3.402823466e38f)) return false;  // inf or NaN
  out.norm = stored_norm(norm, t.norm_dtype);
  rotate(t, x, y);
  const int boundaries = t.mse_bits > 0 ? (1 << t.mse_bits) - 1 : 0;
  if (t.mse_bits > 0) {
    for (int j = 0; j < d; ++j) {
      const std::uint8_t code = level_code(y[j], norm, t.boundaries, boundaries);
      out.codes[j] = code;
      if (t.qjl) r[j] = y[j] - rounded_product(out.norm, t.centroids[code]);
    }
  } else if (t.qjl) {
    for (int j = 0; j < d; ++j) r[j] = y[j];
  }
  if (!t.qjl) return true;
  out.gamma = stored_norm(residual_norm(r, d, t.mse_bits > 0), t.norm_dtype);
  // sign(S r): row c of S against r.
  for (int c = 0; c < d; ++c) {
    out.signs[c] = ordered_dot(r, t.sketch + static_cast<std::size_t>(c) * d, d) >= 0.f ? 1 : 0;
  }
  return true;
}

// x_hat of one vector from what encode_vector() stored (code(j), sign(j) its bytes): y = ||x|| c
// + QJL's gamma sqrt(pi / 2) / d S^T sign, then x_hat = Pi^T y, written to out (y: d floats of
// scratch). Equal to the CPU's dequantize() up to float rounding (its sums run in other orders).
template <class Codes, class Signs, class Y, class Out>
KVLAB_HOST_DEVICE void decode_vector(const Tables& t, const Codes& code, const Signs& sign,
                                     float norm, float gamma, Y& y, Out& out) {
  const int d = t.dim;
  for (int j = 0; j < d; ++j)
    y[j] = t.mse_bits > 0 ? rounded_product(norm, t.centroids[code(j)]) : 0.f;
  if (t.qjl) {
    const float g = rounded_product(t.qjl_scale, gamma);
    for (int k = 0; k < d; ++k) {
      const float s = sign(k) != 0 ? g : -g;
      const float* row = t.sketch + static_cast<std::size_t>(k) * d;
      for (int j = 0; j < d; ++j) y[j] = rules::fused_multiply_add(s, row[j], y[j]);
    }
  }
  if (t.rotation != nullptr) {
    for (int j = 0; j < d; ++j) {
      float acc = 0.f;
      for (int c = 0; c < d; ++c) {
        acc = rules::fused_multiply_add(y[c], t.rotation[static_cast<std::size_t>(c) * d + j], acc);
      }
      out[j] = acc;
    }
    return;
  }
  hadamard_unscaled(y, d);
  for (int j = 0; j < d; ++j)
    out[j] = rounded_product(rounded_product(y[j], t.hadamard_scale), t.signs[j]);
}

}  // namespace kvlab::turboquant_rules
