// What the engine's CPU code and the CUDA kernels share: functions marked KVLAB_HOST_DEVICE are
// __host__ __device__ under nvcc and plain functions elsewhere, so one definition of a format's
// arithmetic (block placement, table entries, row decoding, the group rules, the stream readers)
// serves both, and the CPU tests run what the kernels compile.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVLAB_HOST_DEVICE __host__ __device__
#define KVLAB_FORCE_INLINE __forceinline__
#else
#define KVLAB_HOST_DEVICE
#define KVLAB_FORCE_INLINE inline
#endif

// Full unrolling where nvcc must keep per-thread arrays in registers (the device pass only: the
// host compiler does not know the pragma).
#if defined(__CUDA_ARCH__)
#define KVLAB_UNROLL _Pragma("unroll")
#else
#define KVLAB_UNROLL
#endif

namespace kvlab {

// The float with the bits u, and the bits of f (std::bit_cast where nvcc's device code cannot).
KVLAB_HOST_DEVICE inline float float_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
KVLAB_HOST_DEVICE inline std::uint32_t bits_from_float(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

// a * b rounded to float and never fused with the sum that uses it, on both compilers (the CPU's
// -march=native and nvcc both contract a * b + c into one fma by default): for formulas whose
// bytes the CPU and the GPU must agree on.
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float rounded_product(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  float p = a * b;
#if defined(__x86_64__) || defined(__i386__)
  asm("" : "+x"(p));  // p leaves the expression as a rounded float
#else
  volatile float kept = p;
  p = kept;
#endif
  return p;
#endif
}

}  // namespace kvlab
