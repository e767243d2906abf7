// The plain baseline the compressed kernels race: attention over an uncompressed fp16 cache
// through cuBLAS, one strided-batched GEMM per op (batch = KV heads, N = the GQA group), as a
// serving stack without KV compression would run it. Queries and softmax weights are converted to
// fp16 for the GEMM (the weights scaled by 4096 first, so small probabilities keep full fp16
// precision, and the result scaled back); accumulation is fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.cuh"

namespace kvlab::cuda {

class Fp16Baseline {
 public:
  static Result<Fp16Baseline> create();
  Fp16Baseline() = default;
  ~Fp16Baseline();
  Fp16Baseline(Fp16Baseline&& o) noexcept;
  Fp16Baseline& operator=(Fp16Baseline&& o) noexcept;

  // d_k [tokens][kv_heads][dim] fp16, d_q [q_heads][dim] -> d_logits [q_heads][tokens].
  // Asynchronous on the default stream.
  cudaError_t logits(const std::uint16_t* d_k, int tokens, int kv_heads, int dim, const float* d_q,
                     int q_heads, float* d_logits);
  // d_v [tokens][kv_heads][dim], d_probs [q_heads][tokens] -> d_out [q_heads][dim].
  cudaError_t values(const std::uint16_t* d_v, int tokens, int kv_heads, int dim,
                     const float* d_probs, int q_heads, float* d_out);

 private:
  void* m_handle = nullptr;              // cublasHandle_t
  DeviceArray<std::uint16_t> m_scratch;  // fp16 copy of the queries or weights
  cudaError_t to_half(const float* in, std::size_t n, float scale);
};

}  // namespace kvlab::cuda
