// cuBLAS fp16 attention baseline (see fp16_baseline.cuh) and its host entry points
// (gpu_baselines.h).
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>
#include <utility>

#include "fp16_baseline.cuh"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"

namespace kvlab::cuda {

namespace {

constexpr float kProbScale = 4096.f;

__global__ void to_half_kernel(const float* in, std::size_t n, float scale, __half* out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i] * scale);
}

cublasHandle_t handle_of(void* h) {
  return static_cast<cublasHandle_t>(h);
}

cudaError_t blas_error(cublasStatus_t st) {
  return st == CUBLAS_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

}  // namespace

Result<Fp16Baseline> Fp16Baseline::create() {
  Fp16Baseline b;
  cublasHandle_t h = nullptr;
  if (const cublasStatus_t st = cublasCreate(&h); st != CUBLAS_STATUS_SUCCESS) {
    return make_error(std::string("cuBLAS: creating a handle failed (") +
                      cublasGetStatusString(st) + ")");
  }
  b.m_handle = h;
  return Result<Fp16Baseline>(std::move(b));
}

Fp16Baseline::~Fp16Baseline() {
  if (m_handle) cublasDestroy(handle_of(m_handle));
}
Fp16Baseline::Fp16Baseline(Fp16Baseline&& o) noexcept
    : m_handle(std::exchange(o.m_handle, nullptr)), m_scratch(std::move(o.m_scratch)) {}
Fp16Baseline& Fp16Baseline::operator=(Fp16Baseline&& o) noexcept {
  if (this != &o) {
    if (m_handle) cublasDestroy(handle_of(m_handle));
    m_handle = std::exchange(o.m_handle, nullptr);
    m_scratch = std::move(o.m_scratch);
  }
  return *this;
}

cudaError_t Fp16Baseline::to_half(const float* in, std::size_t n, float scale) {
  if (m_scratch.size() < n) {
    if (!m_scratch.allocate(n, "cuBLAS baseline scratch")) return cudaErrorMemoryAllocation;
  }
  to_half_kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(
      in, n, scale, reinterpret_cast<__half*>(m_scratch.get()));
  return cudaGetLastError();
}

cudaError_t Fp16Baseline::logits(const std::uint16_t* d_k, int tokens, int kv_heads, int dim,
                                 const float* d_q, int q_heads, float* d_logits) {
  const int group = q_heads / kv_heads;
  if (cudaError_t e = to_half(d_q, static_cast<std::size_t>(q_heads) * dim, 1.f)) return e;
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dim)), beta = 0.f;
  // Column-major per KV head h: C (tokens x group) = K_h^T (tokens x dim) . Q_h (dim x group).
  return blas_error(cublasGemmStridedBatchedEx(
      handle_of(m_handle), CUBLAS_OP_T, CUBLAS_OP_N, tokens, group, dim, &alpha, d_k, CUDA_R_16F,
      kv_heads * dim, dim, m_scratch.get(), CUDA_R_16F, dim, static_cast<long long>(group) * dim,
      &beta, d_logits, CUDA_R_32F, tokens, static_cast<long long>(group) * tokens, kv_heads,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

cudaError_t Fp16Baseline::values(const std::uint16_t* d_v, int tokens, int kv_heads, int dim,
                                 const float* d_probs, int q_heads, float* d_out) {
  const int group = q_heads / kv_heads;
  if (cudaError_t e = to_half(d_probs, static_cast<std::size_t>(q_heads) * tokens, kProbScale)) {
    return e;
  }
  const float alpha = 1.0f / kProbScale, beta = 0.f;
  // Column-major per KV head h: C (dim x group) = V_h (dim x tokens) . P_h (tokens x group).
  return blas_error(cublasGemmStridedBatchedEx(
      handle_of(m_handle), CUBLAS_OP_N, CUBLAS_OP_N, dim, group, tokens, &alpha, d_v, CUDA_R_16F,
      kv_heads * dim, dim, m_scratch.get(), CUDA_R_16F, tokens,
      static_cast<long long>(group) * tokens, &beta, d_out, CUDA_R_32F, dim,
      static_cast<long long>(group) * dim, kv_heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

namespace {

Status check_fp16(const Fp16KvView& kv, std::size_t in, std::size_t out, int q_heads, bool keys,
                  const char* what) {
  if (kv.tokens <= 0 || kv.kv_heads <= 0 || kv.head_dim <= 0) {
    return make_error(std::string(what) + ": empty or negative shape");
  }
  const std::size_t n = static_cast<std::size_t>(kv.tokens) * kv.kv_heads * kv.head_dim;
  if ((keys ? kv.keys.size() : kv.values.size()) != n) {
    return make_error(std::string(what) + ": the cache holds the wrong number of values");
  }
  if (q_heads <= 0 || q_heads % kv.kv_heads != 0) {
    return make_error(std::string(what) + ": query heads must be a multiple of the KV heads");
  }
  const std::size_t per_in = keys ? kv.head_dim : kv.tokens;
  const std::size_t per_out = keys ? kv.tokens : kv.head_dim;
  if (in != q_heads * per_in || out != q_heads * per_out) {
    return make_error(std::string(what) + ": input or output size does not match the shape");
  }
  return Ok{};
}

Status run_fp16(const Fp16KvView& kv, std::span<const float> in, int q_heads, std::span<float> out,
                bool keys) {
  const char* what = keys ? "GPU fp16 logits" : "GPU fp16 values";
  KVLAB_TRY_STATUS(check_fp16(kv, in.size(), out.size(), q_heads, keys, what));
  KVLAB_TRY_STATUS(require_gpu());
  auto blas = Fp16Baseline::create();
  if (!blas) return blas.error();
  DeviceArray<std::uint16_t> d_kv;
  DeviceArray<float> d_in, d_out;
  const auto& src = keys ? kv.keys : kv.values;
  KVLAB_TRY_STATUS(d_kv.upload(src.data(), src.size(), what));
  KVLAB_TRY_STATUS(d_in.upload(in.data(), in.size(), what));
  KVLAB_TRY_STATUS(d_out.allocate(out.size(), what));
  KVLAB_CUDA_TRY(cudaMemset(d_out.get(), 0xff, d_out.bytes()), what);
  KVLAB_CUDA_TRY(keys ? blas->logits(d_kv.get(), kv.tokens, kv.kv_heads, kv.head_dim, d_in.get(),
                                     q_heads, d_out.get())
                      : blas->values(d_kv.get(), kv.tokens, kv.kv_heads, kv.head_dim, d_in.get(),
                                     q_heads, d_out.get()),
                 what);
  KVLAB_CUDA_TRY(cudaDeviceSynchronize(), what);
  return d_out.download(out.data(), out.size(), what);
}

}  // namespace

Status fp16_attention_logits(const Fp16KvView& kv, std::span<const float> q, int q_heads,
                             std::span<float> logits) {
  return run_fp16(kv, q, q_heads, logits, true);
}

Status fp16_attention_values(const Fp16KvView& kv, std::span<const float> probs, int q_heads,
                             std::span<float> out) {
  return run_fp16(kv, probs, q_heads, out, false);
}

}  // namespace kvlab::cuda
