// Error metrics on the GPU (run_metrics.cuh), the definitions of engine/src/attention/metrics.cpp:
// element sums in double; logits q.k / sqrt(d) with q scaled in float first, as the CPU does;
// per row the softmax of the stored and of the reconstructed logits, KL(p || p_hat) =
// sum p (l - l_hat) - (lse - lse_hat) (clamped at 0), and the outputs P.V and P_hat.V_hat.
//
// Four launches for the attention: logits of a tile of 16 tokens by 16 rows from shared memory
// (rows padded by a float against bank conflicts); one block per row for its softmax sums, which
// turns the logits into probabilities in place; outputs summed over 512-token chunks in
// registers, then added in double; one warp per row for the output errors.
#include <cmath>

#include "run_metrics.cuh"

namespace kvlab::cuda {

namespace {

constexpr int kTileTokens = 16, kTileRows = 16;  // logits: one (token, row) pair a thread
constexpr int kOutRows = 16, kOutChunk = 512, kOutStage = 64;

__device__ __forceinline__ void atomic_max_bits(unsigned long long* at, double v) {
  atomicMax(at, static_cast<unsigned long long>(__double_as_longlong(v)));
}

__device__ double block_sum(double v, double* shared) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lanes = blockDim.x / 32;
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[warp] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < lanes; ++w) total += shared[w];
  return total;
}

__device__ float block_max(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lanes = blockDim.x / 32;
  __syncthreads();
  if (threadIdx.x % 32 == 0) shared[warp] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < lanes; ++w) m = fmaxf(m, shared[w]);
  return m;
}

__global__ void element_errors_kernel(DeviceTensor x, const float* x_hat, int which,
                                      DeviceLayerSums* sums) {
  __shared__ double shared[32];
  const std::size_t n = x.elements();
  double se = 0, ss = 0, mx = 0;
  bool finite = true;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double xv = load_element(x.data, x.dtype, i);
    finite = finite && isfinite(xv);
    const double d = xv - static_cast<double>(x_hat[i]);
    se += d * d;
    ss += xv * xv;
    mx = fmax(mx, fabs(d));
  }
  if (!finite) sums->not_finite[which] = 1;
  for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if (threadIdx.x % 32 == 0) atomic_max_bits(&sums->max_abs_bits[which], mx);
  se = block_sum(se, shared);
  ss = block_sum(ss, shared);
  if (threadIdx.x == 0) {
    atomicAdd(&sums->sum_sq_err[which], se);
    atomicAdd(&sums->sum_sq_signal[which], ss);
  }
}

// Row (g, r) of KV head g, r = n * group + i: query n's head g * group + i, as the CPU orders.
__global__ void scale_queries_kernel(DeviceTensor queries, AttentionDims d, float* q) {
  const std::size_t n = d.rows() * d.dim;
  const float inv_sqrt_d = 1.0f / sqrtf(static_cast<float>(d.dim));
  const int group = d.q_heads / d.kv_heads, per_head = d.rows_per_head();
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t row = i / d.dim;
    const int c = static_cast<int>(i % d.dim);
    const int g = static_cast<int>(row / per_head), r = static_cast<int>(row % per_head);
    const int query = r / group, head = g * group + r % group;
    const std::size_t src = (static_cast<std::size_t>(query) * d.q_heads + head) * d.dim + c;
    q[i] = load_element(queries.data, queries.dtype, src) * inv_sqrt_d;
  }
}

// grid (token tiles, kv heads, row tiles); 256 threads: token t = tid % 16, row tid / 16.
__global__ void logits_kernel(const float* q, DeviceTensor keys, const float* k_hat,
                              AttentionDims d, float* logits, float* logits_hat) {
  extern __shared__ float smem[];
  const int stride = d.dim + 1;
  float* ks = smem;
  float* khs = ks + kTileTokens * stride;
  float* qs = khs + kTileTokens * stride;
  const int g = blockIdx.y, per_head = d.rows_per_head();
  const int t0 = blockIdx.x * kTileTokens, r0 = blockIdx.z * kTileRows;
  for (int i = threadIdx.x; i < kTileTokens * d.dim; i += blockDim.x) {
    const int t = i / d.dim, c = i % d.dim;
    float k = 0.f, kh = 0.f;
    if (t0 + t < d.tokens) {
      const std::size_t at = (static_cast<std::size_t>(t0 + t) * d.kv_heads + g) * d.dim + c;
      k = load_element(keys.data, keys.dtype, at);
      kh = k_hat[at];
    }
    ks[t * stride + c] = k;
    khs[t * stride + c] = kh;
  }
  for (int i = threadIdx.x; i < kTileRows * d.dim; i += blockDim.x) {
    const int r = i / d.dim, c = i % d.dim;
    qs[r * stride + c] =
        r0 + r < per_head ? q[(static_cast<std::size_t>(g) * per_head + r0 + r) * d.dim + c] : 0.f;
  }
  __syncthreads();
  const int t = threadIdx.x % kTileTokens, r = threadIdx.x / kTileTokens;
  if (t0 + t >= d.tokens || r0 + r >= per_head) return;
  float l = 0.f, lh = 0.f;
  for (int c = 0; c < d.dim; ++c) {
    const float qv = qs[r * stride + c];
    l = fmaf(qv, ks[t * stride + c], l);
    lh = fmaf(qv, khs[t * stride + c], lh);
  }
  const std::size_t at = (static_cast<std::size_t>(g) * per_head + r0 + r) * d.tokens + t0 + t;
  logits[at] = l;
  logits_hat[at] = lh;
}

// One block a row: its softmax sums, its KL and squared logit error into `sums`, and its logits
// replaced by probabilities.
__global__ void softmax_kernel(float* logits, float* logits_hat, int tokens,
                               DeviceLayerSums* sums) {
  __shared__ double dshared[32];
  __shared__ float fshared[32];
  float* l = logits + static_cast<std::size_t>(blockIdx.x) * tokens;
  float* lh = logits_hat + static_cast<std::size_t>(blockIdx.x) * tokens;
  float m = -INFINITY, mh = -INFINITY;
  for (int t = threadIdx.x; t < tokens; t += blockDim.x) {
    m = fmaxf(m, l[t]);
    mh = fmaxf(mh, lh[t]);
  }
  m = block_max(m, fshared);
  mh = block_max(mh, fshared);
  double s = 0, sh = 0, wd = 0, sq = 0;
  for (int t = threadIdx.x; t < tokens; t += blockDim.x) {
    const double diff = static_cast<double>(l[t]) - lh[t];
    const double e = exp(static_cast<double>(l[t]) - m);
    s += e;
    sh += exp(static_cast<double>(lh[t]) - mh);
    wd += e * diff;
    sq += diff * diff;
  }
  s = block_sum(s, dshared);
  sh = block_sum(sh, dshared);
  wd = block_sum(wd, dshared);
  sq = block_sum(sq, dshared);
  for (int t = threadIdx.x; t < tokens; t += blockDim.x) {
    l[t] = static_cast<float>(exp(static_cast<double>(l[t]) - m) / s);
    lh[t] = static_cast<float>(exp(static_cast<double>(lh[t]) - mh) / sh);
  }
  if (threadIdx.x == 0) {
    const double lse = m + log(s), lse_hat = mh + log(sh);
    atomicAdd(&sums->sum_kl, fmax(0.0, wd / s - (lse - lse_hat)));
    atomicAdd(&sums->sum_sq_logit_err, sq);
  }
}

// grid (512-token chunks, kv heads, row tiles of 16); threads over channels. Each thread keeps
// 16 rows' sums of P.V and P_hat.V_hat for its channel over the chunk, then adds them in double.
__global__ void outputs_kernel(const float* probs, const float* probs_hat, DeviceTensor values,
                               const float* v_hat, AttentionDims d, double* out, double* out_hat) {
  __shared__ float ps[kOutRows][kOutStage], phs[kOutRows][kOutStage];
  const int g = blockIdx.y, per_head = d.rows_per_head();
  const int r0 = blockIdx.z * kOutRows;
  const int t_begin = blockIdx.x * kOutChunk;
  const int t_end = min(d.tokens, t_begin + kOutChunk);
  for (int c0 = 0; c0 < d.dim; c0 += blockDim.x) {
    const int c = c0 + threadIdx.x;
    float acc[kOutRows], acch[kOutRows];
#pragma unroll
    for (int i = 0; i < kOutRows; ++i) acc[i] = acch[i] = 0.f;
    for (int s0 = t_begin; s0 < t_end; s0 += kOutStage) {
      __syncthreads();
      for (int i = threadIdx.x; i < kOutRows * kOutStage; i += blockDim.x) {
        const int r = i / kOutStage, t = s0 + i % kOutStage;
        const bool live = r0 + r < per_head && t < t_end;
        const std::size_t at = (static_cast<std::size_t>(g) * per_head + r0 + r) * d.tokens + t;
        ps[r][i % kOutStage] = live ? probs[at] : 0.f;
        phs[r][i % kOutStage] = live ? probs_hat[at] : 0.f;
      }
      __syncthreads();
      if (c >= d.dim) continue;
      const int n = min(kOutStage, t_end - s0);
      for (int t = 0; t < n; ++t) {
        const std::size_t at = (static_cast<std::size_t>(s0 + t) * d.kv_heads + g) * d.dim + c;
        const float v = load_element(values.data, values.dtype, at), vh = v_hat[at];
#pragma unroll
        for (int i = 0; i < kOutRows; ++i) {
          acc[i] = fmaf(ps[i][t], v, acc[i]);
          acch[i] = fmaf(phs[i][t], vh, acch[i]);
        }
      }
    }
    if (c >= d.dim) continue;
#pragma unroll
    for (int i = 0; i < kOutRows; ++i) {
      if (r0 + i >= per_head) break;
      const std::size_t at = (static_cast<std::size_t>(g) * per_head + r0 + i) * d.dim + c;
      atomicAdd(&out[at], static_cast<double>(acc[i]));
      atomicAdd(&out_hat[at], static_cast<double>(acch[i]));
    }
  }
}

// One warp a row: |o - o_hat|^2, |o|^2 and cos(o, o_hat) into `sums`.
__global__ void output_errors_kernel(const double* out, const double* out_hat, std::size_t rows,
                                     int dim, DeviceLayerSums* sums) {
  const std::size_t row = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  double err = 0, oo = 0, hh = 0, oh = 0;
  for (int c = lane; c < dim; c += 32) {
    const double o = out[row * dim + c], h = out_hat[row * dim + c];
    err += (o - h) * (o - h);
    oo += o * o;
    hh += h * h;
    oh += o * h;
  }
  for (int s = 16; s > 0; s >>= 1) {
    err += __shfl_xor_sync(0xffffffffu, err, s);
    oo += __shfl_xor_sync(0xffffffffu, oo, s);
    hh += __shfl_xor_sync(0xffffffffu, hh, s);
    oh += __shfl_xor_sync(0xffffffffu, oh, s);
  }
  if (lane == 0) {
    const double denom = sqrt(oo) * sqrt(hh);
    atomicAdd(&sums->sum_sq_out_err, err);
    atomicAdd(&sums->sum_sq_out, oo);
    atomicAdd(&sums->sum_cosine, denom > 0 ? oh / denom : 1.0);
  }
}

unsigned blocks_for(std::size_t n, unsigned threads, unsigned most) {
  const std::size_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : b > most ? most : b);
}

}  // namespace

cudaError_t launch_element_errors(const DeviceTensor& x, const float* x_hat, int which,
                                  DeviceLayerSums* sums, cudaStream_t stream) {
  if (x.elements() == 0) return cudaSuccess;
  element_errors_kernel<<<blocks_for(x.elements(), 256, 2048), 256, 0, stream>>>(x, x_hat, which,
                                                                                 sums);
  return cudaGetLastError();
}

Status attention_errors(const DeviceTensor& queries, const DeviceTensor& keys,
                        const DeviceTensor& values, const float* k_hat, const float* v_hat,
                        const AttentionDims& d, AttentionScratch& scratch, DeviceLayerSums* sums,
                        cudaStream_t stream) {
  if (d.tokens == 0 || d.rows() == 0) return Ok{};
  if (d.dim > kMaxMetricsDim || d.q_heads % d.kv_heads != 0) {
    return make_error(
        "GPU attention metrics: head_dim above 256 or query heads not a multiple "
        "of KV heads");
  }
  const std::size_t rows = d.rows();
  const std::size_t cells = rows * static_cast<std::size_t>(d.tokens);
  KVLAB_TRY_STATUS(ensure_size(scratch.q, rows * d.dim, "GPU metrics: queries"));
  KVLAB_TRY_STATUS(ensure_size(scratch.probs, cells, "GPU metrics: logits"));
  KVLAB_TRY_STATUS(ensure_size(scratch.probs_hat, cells, "GPU metrics: logits"));
  KVLAB_TRY_STATUS(ensure_size(scratch.out, rows * d.dim, "GPU metrics: outputs"));
  KVLAB_TRY_STATUS(ensure_size(scratch.out_hat, rows * d.dim, "GPU metrics: outputs"));
  KVLAB_CUDA_TRY(cudaMemsetAsync(scratch.out.get(), 0, rows * d.dim * sizeof(double), stream),
                 "GPU metrics: outputs");
  KVLAB_CUDA_TRY(cudaMemsetAsync(scratch.out_hat.get(), 0, rows * d.dim * sizeof(double), stream),
                 "GPU metrics: outputs");
  scale_queries_kernel<<<blocks_for(rows * d.dim, 256, 4096), 256, 0, stream>>>(queries, d,
                                                                                scratch.q.get());
  KVLAB_CUDA_TRY(cudaGetLastError(), "GPU metrics: queries");
  const int per_head = d.rows_per_head();
  const std::size_t smem =
      static_cast<std::size_t>(2 * kTileTokens + kTileRows) * (d.dim + 1) * sizeof(float);
  KVLAB_CUDA_TRY(cudaFuncSetAttribute(logits_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)),
                 "GPU metrics: logits shared memory");
  const dim3 lgrid((d.tokens + kTileTokens - 1) / kTileTokens, d.kv_heads,
                   (per_head + kTileRows - 1) / kTileRows);
  logits_kernel<<<lgrid, kTileTokens * kTileRows, smem, stream>>>(
      scratch.q.get(), keys, k_hat, d, scratch.probs.get(), scratch.probs_hat.get());
  KVLAB_CUDA_TRY(cudaGetLastError(), "GPU metrics: logits");
  softmax_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(
      scratch.probs.get(), scratch.probs_hat.get(), d.tokens, sums);
  KVLAB_CUDA_TRY(cudaGetLastError(), "GPU metrics: softmax");
  const dim3 ogrid((d.tokens + kOutChunk - 1) / kOutChunk, d.kv_heads,
                   (per_head + kOutRows - 1) / kOutRows);
  outputs_kernel<<<ogrid, 128, 0, stream>>>(scratch.probs.get(), scratch.probs_hat.get(), values,
                                            v_hat, d, scratch.out.get(), scratch.out_hat.get());
  KVLAB_CUDA_TRY(cudaGetLastError(), "GPU metrics: outputs");
  output_errors_kernel<<<blocks_for(rows * 32, 256, 1u << 30), 256, 0, stream>>>(
      scratch.out.get(), scratch.out_hat.get(), rows, d.dim, sums);
  KVLAB_CUDA_TRY(cudaGetLastError(), "GPU metrics: output errors");
  return Ok{};
}

}  // namespace kvlab::cuda
