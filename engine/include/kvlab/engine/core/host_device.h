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

// |v| by its bits (fabs on both compilers, NaN included).
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float abs_float(float v) {
  return float_from_bits(bits_from_float(v) & 0x7fffffffu);
}

// A NaN as x86 makes it: an SSE/AVX operation on operands that are not NaN (0 * inf, inf - inf,
// inf / inf) gives the "default NaN" 0xffc00000, sign set; CUDA's operations give 0x7fffffff.
// Where such a NaN's sign reaches a stored byte (an fp16 scale, an fp8 code, an E2M1 code), the
// GPU passes it through this to store the CPU's bytes; on x86 it changes nothing. Only for NaNs
// an operation made, not for a NaN input passed along (its payload is its own).
KVLAB_HOST_DEVICE KVLAB_FORCE_INLINE float x86_nan(float v) {
  return v != v ? float_from_bits(0xffc00000u) : v;
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
