// The plain baseline the compressed kernels race: attention over an uncompressed fp16 cache
// through cuBLAS, one strided-batched GEMM per op (batch = KV heads, N = the GQA group), as a
// serving stack without KV compression would run it. One KV head's rows are strided by
// kv_heads * dim in the [tokens][kv_heads][dim] layout, which is a plain leading dimension for
// cuBLAS. cuBLAS takes fp16 A and B together only, so the queries and softmax weights are
// converted to fp16 by a small kernel first (the weights scaled by 4096, so weights down to 1e-8
// keep full fp16 precision, and the result scaled back; weights must stay below 16). Accumulation
// is fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda_check.cuh"

namespace kvlab::cuda {

// Owns a cuBLAS handle and the fp16 staging buffer. Move-only.
class Fp16Baseline {
 public:
  static Result<Fp16Baseline> create();
  Fp16Baseline() = default;
  ~Fp16Baseline();
  Fp16Baseline(Fp16Baseline&& o) noexcept;
  Fp16Baseline& operator=(Fp16Baseline&& o) noexcept;

  // d_k [tokens][kv_heads][dim] fp16, d_q [q_heads][dim] -> d_logits [q_heads][tokens]
  // (q.k / sqrt(dim)). Asynchronous on `stream`: no synchronisation. The staging buffer grows
  // (cudaMalloc) only when a call needs more than any earlier one. q_heads not a multiple of
  // kv_heads: cudaErrorInvalidValue. A cuBLAS failure: cudaErrorUnknown, with the cuBLAS status in
  // last_blas_error().
  cudaError_t logits(const std::uint16_t* d_k, int tokens, int kv_heads, int dim, const float* d_q,
                     int q_heads, float* d_logits, cudaStream_t stream = nullptr);
  // d_v [tokens][kv_heads][dim], d_probs [q_heads][tokens] -> d_out [q_heads][dim]. As logits().
  cudaError_t values(const std::uint16_t* d_v, int tokens, int kv_heads, int dim,
                     const float* d_probs, int q_heads, float* d_out,
                     cudaStream_t stream = nullptr);

  // The name and text of the last failed cuBLAS call's status ("" when none failed).
  const std::string& last_blas_error() const { return m_blas_error; }

 private:
  void* m_handle = nullptr;              // cublasHandle_t
  DeviceArray<std::uint16_t> m_scratch;  // fp16 copy of the queries or weights
  std::string m_blas_error;
  cudaError_t to_half(const float* in, std::size_t n, float scale, cudaStream_t stream);
};

}  // namespace kvlab::cuda
