// cuBLAS fp16 attention baseline (see fp16_baseline.cuh) and its host entry points
// (gpu_baselines.h). Every cuBLAS status is checked; a failure keeps its name and text for the
// host wrappers' error message.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <dlfcn.h>

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "fp16_baseline.cuh"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"
#include "launch_plan.cuh"

namespace kvlab::cuda {

namespace {

// Softmax weights are scaled by this before the fp16 conversion: weights down to about 1e-8 stay
// fp16 normals (a 32K-token softmax has weights near 3e-5, below fp16's smallest normal 6.1e-5),
// and weights up to 65504 / 4096 = 16 do not overflow. A power of two, so the scale is exact.
constexpr float kProbScale = 4096.f;

__global__ void to_half_kernel(const float* in, std::size_t n, float scale, __half* out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(in[i] * scale);
}

// The cuBLAS calls this baseline makes, opened on its first use rather than linked: loading
// libcublas (and the libcublasLt it pulls in) costs a process about 150 MiB, 93 MiB of it
// relocated data that stays resident (a program that only opens them, 2026-11-29), and nothing
// else in kvlab calls cuBLAS. Each pointer's type comes from cublas_v2.h in an unevaluated
// context, so a signature the header changes fails to compile rather than to run.
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t,
                                                cublasOperation_t, int, int, int, const void*,
                                                const void*, cudaDataType, int, long long,
                                                const void*, cudaDataType, int, long long,
                                                const void*, void*, cudaDataType, int, long long,
                                                int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(
    std::is_same_v<decltype(static_cast<GemmStridedBatchedEx>(&cublasGemmStridedBatchedEx)),
                   GemmStridedBatchedEx>);

struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  GemmStridedBatchedEx gemm_strided_batched = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Opens cuBLAS once per process: by its soname (LD_LIBRARY_PATH, the loader's cache), else from
// the toolkit this tree was built with (KVLAB_CUDA_LIBRARY_DIR, from kernels/CMakeLists.txt).
const Result<CublasApi>& cublas_api() {
  static const Result<CublasApi> api = []() -> Result<CublasApi> {
    const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string tried = soname;
    if (!lib) {
      const std::string path = std::string(KVLAB_CUDA_LIBRARY_DIR) + "/" + soname;
      lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      tried += " or " + path;
    }
    if (!lib) {
      const char* why = dlerror();
      return make_error("cuBLAS: cannot open " + tried + " (" + (why ? why : "not found") +
                        "); the cuBLAS baseline needs the CUDA toolkit's libraries on "
                        "LD_LIBRARY_PATH");
    }
    CublasApi a;
    std::string missing;
    const auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
    };
    find(a.create, "cublasCreate_v2");
    find(a.destroy, "cublasDestroy_v2");
    find(a.set_stream, "cublasSetStream_v2");
    find(a.gemm_strided_batched, "cublasGemmStridedBatchedEx");
    find(a.status_name, "cublasGetStatusName");
    find(a.status_string, "cublasGetStatusString");
    if (!missing.empty()) {
      return make_error("cuBLAS: " + soname + " lacks " + missing);
    }
    return a;
  }();
  return api;
}

cublasHandle_t handle_of(void* h) {
  return static_cast<cublasHandle_t>(h);
}

// Only after a call through cublas_api() returned `st`, so the library is open.
std::string blas_message(cublasStatus_t st) {
  const CublasApi& api = *cublas_api();
  return std::string(api.status_name(st)) + ": " + api.status_string(st);
}

}  // namespace

Status cublas_available() {
  const Result<CublasApi>& api = cublas_api();
  if (!api) return api.error();
  return Ok{};
}

Result<Fp16Baseline> Fp16Baseline::create() {
  const Result<CublasApi>& api = cublas_api();
  if (!api) return api.error();
  Fp16Baseline b;
  cublasHandle_t h = nullptr;
  if (const cublasStatus_t st = api->create(&h); st != CUBLAS_STATUS_SUCCESS) {
    return make_error("cuBLAS: creating a handle failed (" + blas_message(st) + ")");
  }
  b.m_handle = h;
  return Result<Fp16Baseline>(std::move(b));
}

Fp16Baseline::~Fp16Baseline() {
  if (m_handle) cublas_api()->destroy(handle_of(m_handle));
}
Fp16Baseline::Fp16Baseline(Fp16Baseline&& o) noexcept
    : m_handle(std::exchange(o.m_handle, nullptr)),
      m_scratch(std::move(o.m_scratch)),
      m_blas_error(std::move(o.m_blas_error)) {}
Fp16Baseline& Fp16Baseline::operator=(Fp16Baseline&& o) noexcept {
  if (this != &o) {
    if (m_handle) cublas_api()->destroy(handle_of(m_handle));
    m_handle = std::exchange(o.m_handle, nullptr);
    m_scratch = std::move(o.m_scratch);
    m_blas_error = std::move(o.m_blas_error);
  }
  return *this;
}

cudaError_t Fp16Baseline::to_half(const float* in, std::size_t n, float scale,
                                  cudaStream_t stream) {
  if (m_scratch.size() < n) {
    if (!m_scratch.allocate(n, "cuBLAS baseline scratch")) return cudaErrorMemoryAllocation;
  }
  to_half_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      in, n, scale, reinterpret_cast<__half*>(m_scratch.get()));
  return cudaGetLastError();
}

cudaError_t Fp16Baseline::logits(const std::uint16_t* d_k, int tokens, int kv_heads, int dim,
                                 const float* d_q, int q_heads, float* d_logits,
                                 cudaStream_t stream) {
  if (!m_handle || tokens <= 0 || kv_heads <= 0 || dim <= 0 || q_heads <= 0 ||
      q_heads % kv_heads != 0) {
    return cudaErrorInvalidValue;
  }
  const int group = q_heads / kv_heads;
  if (cudaError_t e = to_half(d_q, static_cast<std::size_t>(q_heads) * dim, 1.f, stream)) return e;
  const CublasApi& api = *cublas_api();  // open: m_handle came from it
  if (const cublasStatus_t st = api.set_stream(handle_of(m_handle), stream);
      st != CUBLAS_STATUS_SUCCESS) {
    m_blas_error = blas_message(st);
    return cudaErrorUnknown;
  }
  // The engine's scale (fp16_attention.cpp): 1 / sqrt(dim) in float.
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dim)), beta = 0.f;
  // Column-major per KV head h: C (tokens x group) = K_h^T (tokens x dim) . Q_h (dim x group).
  const cublasStatus_t st = api.gemm_strided_batched(
      handle_of(m_handle), CUBLAS_OP_T, CUBLAS_OP_N, tokens, group, dim, &alpha, d_k, CUDA_R_16F,
      kv_heads * dim, dim, m_scratch.get(), CUDA_R_16F, dim, static_cast<long long>(group) * dim,
      &beta, d_logits, CUDA_R_32F, tokens, static_cast<long long>(group) * tokens, kv_heads,
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    m_blas_error = blas_message(st);
    return cudaErrorUnknown;
  }
  return cudaSuccess;
}

cudaError_t Fp16Baseline::values(const std::uint16_t* d_v, int tokens, int kv_heads, int dim,
                                 const float* d_probs, int q_heads, float* d_out,
                                 cudaStream_t stream) {
  if (!m_handle || tokens <= 0 || kv_heads <= 0 || dim <= 0 || q_heads <= 0 ||
      q_heads % kv_heads != 0) {
    return cudaErrorInvalidValue;
  }
  const int group = q_heads / kv_heads;
  if (cudaError_t e =
          to_half(d_probs, static_cast<std::size_t>(q_heads) * tokens, kProbScale, stream)) {
    return e;
  }
  const CublasApi& api = *cublas_api();  // open: m_handle came from it
  if (const cublasStatus_t st = api.set_stream(handle_of(m_handle), stream);
      st != CUBLAS_STATUS_SUCCESS) {
    m_blas_error = blas_message(st);
    return cudaErrorUnknown;
  }
  const float alpha = 1.0f / kProbScale, beta = 0.f;
  // Column-major per KV head h: C (dim x group) = V_h (dim x tokens) . P_h (tokens x group).
  const cublasStatus_t st = api.gemm_strided_batched(
      handle_of(m_handle), CUBLAS_OP_N, CUBLAS_OP_N, dim, group, tokens, &alpha, d_v, CUDA_R_16F,
      kv_heads * dim, dim, m_scratch.get(), CUDA_R_16F, tokens,
      static_cast<long long>(group) * tokens, &beta, d_out, CUDA_R_32F, dim,
      static_cast<long long>(group) * dim, kv_heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    m_blas_error = blas_message(st);
    return cudaErrorUnknown;
  }
  return cudaSuccess;
}

namespace {

Status check_fp16(const Fp16KvView& kv, std::size_t in, std::size_t out, int q_heads, bool keys,
                  const char* what) {
  const std::string w(what);
  KVLAB_TRY_STATUS(check::shape(w, kv.tokens, kv.kv_heads, kv.head_dim));
  const std::size_t n = static_cast<std::size_t>(kv.tokens) * kv.kv_heads * kv.head_dim;
  KVLAB_TRY_STATUS(
      check::count(w, keys ? kv.keys.size() : kv.values.size(), n, keys ? "keys" : "values"));
  KVLAB_TRY_STATUS(check::query_heads(w, q_heads, kv.kv_heads));
  const std::size_t in_need = static_cast<std::size_t>(q_heads) * (keys ? kv.head_dim : kv.tokens);
  const std::size_t out_need = static_cast<std::size_t>(q_heads) * (keys ? kv.tokens : kv.head_dim);
  KVLAB_TRY_STATUS(check::io(w, in, in_need, out, out_need));
  return Ok{};
}

Status run_fp16(const Fp16KvView& kv, std::span<const float> in, int q_heads, std::span<float> out,
                bool keys) {
  const char* what = keys ? "GPU fp16 attention logits" : "GPU fp16 attention values";
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
  // Poisoned with NaN, so an element cuBLAS failed to write cannot pass for a result.
  KVLAB_CUDA_TRY(cudaMemset(d_out.get(), 0xff, d_out.bytes()), what);
  const cudaError_t e = keys ? blas->logits(d_kv.get(), kv.tokens, kv.kv_heads, kv.head_dim,
                                            d_in.get(), q_heads, d_out.get())
                             : blas->values(d_kv.get(), kv.tokens, kv.kv_heads, kv.head_dim,
                                            d_in.get(), q_heads, d_out.get());
  if (e != cudaSuccess && !blas->last_blas_error().empty()) {
    return make_error(std::string(what) + ": cuBLAS failed (" + blas->last_blas_error() + ")");
  }
  KVLAB_CUDA_TRY(e, what);
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
