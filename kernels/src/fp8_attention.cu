// FP8 fused attention (see fp8_attention.cuh) and its host entry points (gpu_baselines.h).
// Logits: D/16 lanes share one token's vector, each lane a 16-byte load of 16 codes, partial dots
// reduced by shuffles; a warp covers 32/(D/16) tokens per load. Values: each lane owns 4
// channels (one 4-byte load per token), a warp walks its tokens, and per-block partial sums are
// added into the output with atomics. E4M3 converts through the hardware fp8->fp16 path; E5M2 is
// the upper byte of an fp16.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <string>

#include "cuda_check.cuh"
#include "fp8_attention.cuh"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"

namespace kvlab::cuda {

namespace {

template <bool kE4M3>
__device__ __forceinline__ float2 fp8x2_to_float2(std::uint16_t two) {
  __half2_raw h;
  if constexpr (kE4M3) {
    h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
  } else {
    h.x = static_cast<unsigned short>((two & 0xffu) << 8);
    h.y = static_cast<unsigned short>(two & 0xff00u);
  }
  return __half22float2(*reinterpret_cast<__half2*>(&h));
}

template <bool kE4M3>
__device__ __forceinline__ void word_to_floats(std::uint32_t w, float* f) {
  const float2 a = fp8x2_to_float2<kE4M3>(static_cast<std::uint16_t>(w & 0xffffu));
  const float2 b = fp8x2_to_float2<kE4M3>(static_cast<std::uint16_t>(w >> 16));
  f[0] = a.x;
  f[1] = a.y;
  f[2] = b.x;
  f[3] = b.y;
}

constexpr int kBlock = 256;

// Dot of 16 codes (one 16-byte load) with the lane's 16 query channels of every group head.
template <bool kE4M3, int G>
__device__ __forceinline__ void dot16(const uint4 w, const float4* qs, int lanes, int sub,
                                      float* acc) {
  float x[16];
  word_to_floats<kE4M3>(w.x, x);
  word_to_floats<kE4M3>(w.y, x + 4);
  word_to_floats<kE4M3>(w.z, x + 8);
  word_to_floats<kE4M3>(w.w, x + 12);
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const float4 qv = qs[(g * 4 + m) * lanes + sub];
      acc[g] = fmaf(qv.x, x[4 * m], acc[g]);
      acc[g] = fmaf(qv.y, x[4 * m + 1], acc[g]);
      acc[g] = fmaf(qv.z, x[4 * m + 2], acc[g]);
      acc[g] = fmaf(qv.w, x[4 * m + 3], acc[g]);
    }
  }
}

template <bool kE4M3, int G>
__global__ void __launch_bounds__(kBlock)
    fp8_logits_kernel(Fp8Device kv, const float* q, float scale, float* logits) {
  // The group's queries, scaled, as float4s laid out [g][m][lane]: the lanes of a warp read
  // consecutive 16-byte words for each (g, m), so the loads never conflict.
  __shared__ float4 qs[G * 64];
  const int h = blockIdx.y;
  const int lanes = kv.head_dim / 16;  // per token
  const float s = kv.scales[h] * scale;
  float* qf = reinterpret_cast<float*>(qs);
  for (int i = threadIdx.x; i < G * kv.head_dim; i += kBlock) {
    const int g = i / kv.head_dim, c = i % kv.head_dim;
    qf[((g * 4 + (c % 16) / 4) * lanes + c / 16) * 4 + c % 4] =
        q[static_cast<std::size_t>(h) * G * kv.head_dim + i] * s;
  }
  __syncthreads();
  const int per_warp = 32 / lanes;  // tokens per warp step
  const int lane = threadIdx.x & 31;
  const int sub = lane % lanes, slot = lane / lanes;
  const int warp = (blockIdx.x * kBlock + threadIdx.x) / 32;
  const int warps = gridDim.x * kBlock / 32;
  const std::size_t row = static_cast<std::size_t>(kv.kv_heads) * kv.head_dim;
  const std::size_t col = static_cast<std::size_t>(h) * kv.head_dim + sub * 16;
  const int step = warps * per_warp;
  // Two token steps per iteration: both loads are in flight before either is used.
  for (int t0 = warp * per_warp; t0 < kv.tokens; t0 += 2 * step) {
    const int ta = t0 + slot, tb = t0 + step + slot;
    const uint4 zero = make_uint4(0, 0, 0, 0);
    const uint4 wa =
        ta < kv.tokens ? __ldg(reinterpret_cast<const uint4*>(kv.codes + ta * row + col)) : zero;
    const uint4 wb =
        tb < kv.tokens ? __ldg(reinterpret_cast<const uint4*>(kv.codes + tb * row + col)) : zero;
    float acc_a[G], acc_b[G];
#pragma unroll
    for (int g = 0; g < G; ++g) acc_a[g] = acc_b[g] = 0.f;
    dot16<kE4M3, G>(wa, qs, lanes, sub, acc_a);
    dot16<kE4M3, G>(wb, qs, lanes, sub, acc_b);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      for (int o = lanes / 2; o > 0; o >>= 1) {
        acc_a[g] += __shfl_xor_sync(0xffffffffu, acc_a[g], o);
        acc_b[g] += __shfl_xor_sync(0xffffffffu, acc_b[g], o);
      }
    }
    if (sub == 0) {
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float* out = logits + (static_cast<std::size_t>(h) * G + g) * kv.tokens;
        if (ta < kv.tokens) out[ta] = acc_a[g];
        if (tb < kv.tokens) out[tb] = acc_b[g];
      }
    }
  }
}

template <bool kE4M3, int G>
__global__ void __launch_bounds__(kBlock)
    fp8_values_kernel(Fp8Device kv, const float* probs, float* out) {
  constexpr int kChunks = 2;  // 4 channels x 32 lanes x 2 = up to 256 channels
  const int h = blockIdx.y;
  const int lane = threadIdx.x & 31;
  const int warp = (blockIdx.x * kBlock + threadIdx.x) / 32;
  const int warps = gridDim.x * kBlock / 32;
  const std::size_t row = static_cast<std::size_t>(kv.kv_heads) * kv.head_dim;
  float acc[G][kChunks][4];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[g][k][j] = 0.f;
  const int per = (kv.tokens + warps - 1) / warps;
  const int t_begin = warp * per, t_end = min(kv.tokens, t_begin + per);
  // Eight tokens per iteration: their loads are all in flight before the first is used.
  constexpr int kUnroll = 8;
  for (int t0 = t_begin; t0 < t_end; t0 += kUnroll) {
    std::uint32_t word[kUnroll][kChunks];
    float p[kUnroll][G];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int t = t0 + u;
      const bool live = t < t_end;
      const std::uint8_t* base = kv.codes + static_cast<std::size_t>(live ? t : t_begin) * row +
                                 static_cast<std::size_t>(h) * kv.head_dim;
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        const int c = (lane + 32 * k) * 4;
        word[u][k] = c < kv.head_dim ? __ldg(reinterpret_cast<const std::uint32_t*>(base + c)) : 0u;
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        p[u][g] = live ? __ldg(probs + (static_cast<std::size_t>(h) * G + g) * kv.tokens + t) : 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        float x[4];
        word_to_floats<kE4M3>(word[u][k], x);
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[g][k][j] = fmaf(p[u][g], x[j], acc[g][k][j]);
      }
    }
  }
  // Block partials through shared memory, then one atomic per (query head, channel) per block.
  __shared__ float part[G * 256];
  for (int i = threadIdx.x; i < G * kv.head_dim; i += kBlock) part[i] = 0.f;
  __syncthreads();
  const float s = kv.scales[h];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int k = 0; k < kChunks; ++k) {
      const int c = (lane + 32 * k) * 4;
      if (c < kv.head_dim) {
#pragma unroll
        for (int j = 0; j < 4; ++j) atomicAdd(&part[g * kv.head_dim + c + j], acc[g][k][j] * s);
      }
    }
  __syncthreads();
  for (int i = threadIdx.x; i < G * kv.head_dim; i += kBlock) {
    atomicAdd(&out[static_cast<std::size_t>(h) * G * kv.head_dim + i], part[i]);
  }
}

int blocks_for(int tokens, int heads, int tokens_per_block) {
  static int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 108;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 108;
    return n;
  }();
  const int want = std::max(1, sms * 8 / std::max(1, heads));
  return std::max(1, std::min(want, (tokens + tokens_per_block - 1) / tokens_per_block));
}

template <class F>
cudaError_t by_group(int group, F&& f) {
  switch (group) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 8:
      return f(std::integral_constant<int, 8>{});
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool fp8_shape_supported(int head_dim, int group) {
  const bool dim_ok =
      head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
  return dim_ok && (group == 1 || group == 2 || group == 4 || group == 8);
}

cudaError_t launch_fp8_logits(const Fp8Device& kv, const float* d_q, int q_heads, float* d_logits,
                              cudaStream_t stream) {
  const int group = q_heads / kv.kv_heads;
  if (q_heads % kv.kv_heads || !fp8_shape_supported(kv.head_dim, group)) {
    return cudaErrorInvalidValue;
  }
  if (kv.tokens == 0) return cudaSuccess;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kv.head_dim));
  const int per_block = (kBlock / 32) * (32 / (kv.head_dim / 16)) * 4;
  const dim3 grid(blocks_for(kv.tokens, kv.kv_heads, per_block), kv.kv_heads);
  return by_group(group, [&](auto g) -> cudaError_t {
    constexpr int G = decltype(g)::value;
    if (kv.format == Fp8Format::E4M3) {
      fp8_logits_kernel<true, G><<<grid, kBlock, 0, stream>>>(kv, d_q, scale, d_logits);
    } else {
      fp8_logits_kernel<false, G><<<grid, kBlock, 0, stream>>>(kv, d_q, scale, d_logits);
    }
    return cudaGetLastError();
  });
}

cudaError_t launch_fp8_values(const Fp8Device& kv, const float* d_probs, int q_heads, float* d_out,
                              cudaStream_t stream) {
  const int group = q_heads / kv.kv_heads;
  if (q_heads % kv.kv_heads || !fp8_shape_supported(kv.head_dim, group)) {
    return cudaErrorInvalidValue;
  }
  if (cudaError_t e = cudaMemsetAsync(
          d_out, 0, sizeof(float) * static_cast<std::size_t>(q_heads) * kv.head_dim, stream)) {
    return e;
  }
  if (kv.tokens == 0) return cudaSuccess;
  const dim3 grid(blocks_for(kv.tokens, kv.kv_heads, (kBlock / 32) * 16), kv.kv_heads);
  return by_group(group, [&](auto g) -> cudaError_t {
    constexpr int G = decltype(g)::value;
    if (kv.format == Fp8Format::E4M3) {
      fp8_values_kernel<true, G><<<grid, kBlock, 0, stream>>>(kv, d_probs, d_out);
    } else {
      fp8_values_kernel<false, G><<<grid, kBlock, 0, stream>>>(kv, d_probs, d_out);
    }
    return cudaGetLastError();
  });
}

namespace {

Status run_fp8(const Fp8KvView& kv, std::span<const float> in, int q_heads, std::span<float> out,
               bool keys) {
  const char* what = keys ? "GPU fp8 logits" : "GPU fp8 values";
  if (kv.tokens <= 0 || kv.kv_heads <= 0 || q_heads <= 0 || q_heads % kv.kv_heads != 0) {
    return make_error(std::string(what) +
                      ": tokens and heads must be positive, query heads a multiple of KV heads");
  }
  if (!fp8_shape_supported(kv.head_dim, q_heads / kv.kv_heads)) {
    return make_error(std::string(what) + ": head_dim " + std::to_string(kv.head_dim) +
                      " with GQA group " + std::to_string(q_heads / kv.kv_heads) +
                      " is not built (head_dim 16..256, a power of two; group 1, 2, 4, 8)");
  }
  const std::size_t n = static_cast<std::size_t>(kv.tokens) * kv.kv_heads * kv.head_dim;
  const auto& codes = keys ? kv.keys : kv.values;
  const auto& scales = keys ? kv.key_scales : kv.value_scales;
  const std::size_t per_in = keys ? kv.head_dim : kv.tokens;
  const std::size_t per_out = keys ? kv.tokens : kv.head_dim;
  if (codes.size() != n || scales.size() != static_cast<std::size_t>(kv.kv_heads) ||
      in.size() != q_heads * per_in || out.size() != q_heads * per_out) {
    return make_error(std::string(what) + ": an input or output size does not match the shape");
  }
  KVLAB_TRY_STATUS(require_gpu());
  DeviceArray<std::uint8_t> d_codes;
  DeviceArray<float> d_scales, d_in, d_out;
  KVLAB_TRY_STATUS(d_codes.upload(codes.data(), n, what));
  KVLAB_TRY_STATUS(d_scales.upload(scales.data(), scales.size(), what));
  KVLAB_TRY_STATUS(d_in.upload(in.data(), in.size(), what));
  KVLAB_TRY_STATUS(d_out.allocate(out.size(), what));
  KVLAB_CUDA_TRY(cudaMemset(d_out.get(), 0xff, d_out.bytes()), what);
  Fp8Device d;
  d.tokens = kv.tokens;
  d.kv_heads = kv.kv_heads;
  d.head_dim = kv.head_dim;
  d.format = kv.format;
  d.codes = d_codes.get();
  d.scales = d_scales.get();
  KVLAB_CUDA_TRY(keys ? launch_fp8_logits(d, d_in.get(), q_heads, d_out.get(), nullptr)
                      : launch_fp8_values(d, d_in.get(), q_heads, d_out.get(), nullptr),
                 what);
  KVLAB_CUDA_TRY(cudaDeviceSynchronize(), what);
  return d_out.download(out.data(), out.size(), what);
}

}  // namespace

Status fp8_attention_logits(const Fp8KvView& kv, std::span<const float> q, int q_heads,
                            std::span<float> logits) {
  return run_fp8(kv, q, q_heads, logits, true);
}

Status fp8_attention_values(const Fp8KvView& kv, std::span<const float> probs, int q_heads,
                            std::span<float> out) {
  return run_fp8(kv, probs, q_heads, out, false);
}

}  // namespace kvlab::cuda
