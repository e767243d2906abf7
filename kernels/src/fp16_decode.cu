// The FlashAttention-class fp16 decode kernel (fp16_decode.cuh) and its host entry point
// (gpu_baselines.h).
//
// One block streams a KV head's chunk of tokens tile by tile. The K and V tiles go from global
// to shared memory by cp.async, kStages - 1 tiles ahead of the arithmetic, so the memory system
// stays busy through the softmax and its barriers and the tiles take no registers. Thread layout:
//  - q.k: d / 8 threads share one K row, each taking 8 channels (one 16-byte chunk) and holding
//    those 8 channels of all G query heads in registers; the partial dots are summed over the
//    row's threads with shuffles, and the logits (base 2, 1/sqrt(d) folded into q) go to shared
//    memory.
//  - softmax: warp g updates query head g's running max and sum over the tile and turns its
//    logits into weights 2^(s - max).
//  - .V: thread i owns 8 channels of row i / (d / 8) of each step; its G x 8 accumulators are
//    rescaled by 2^(old max - new max) once per tile, then summed over the rows at the end.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "fp16_decode.cuh"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"
#include "launch_plan.cuh"

namespace kvlab::cuda {

namespace {

using P = Fp16DecodePolicy;
constexpr float kLog2e = 1.4426950408889634f;

// Tokens per tile: at most P::kTile, and few enough that one tile's K and V loads take 32
// registers a thread (d x tile <= 8192), 16 when more than four query heads share the loads
// (their accumulators take 8 registers each); two tiles are in registers at once.
// Tokens per tile: 64, or 32 at d = 256 (a stage then takes 32 KiB of shared memory either way).
constexpr int tile_for(int head_dim) {
  return head_dim > 128 ? 32 : P::kTile;
}
// Shared memory of the K and V stages: kStages x (K tile + V tile) fp16.
constexpr std::size_t stage_bytes(int head_dim) {
  return static_cast<std::size_t>(P::kStages) * 2 * tile_for(head_dim) * head_dim * 2;
}

__device__ __forceinline__ void unpack8(const uint4& u, float (&f)[8]) {
  const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __half22float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

// 16 bytes global -> shared without passing through registers (sm_80 cp.async, L2 only); a row
// past the chunk copies nothing and zero-fills its slot.
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void commit_async() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void wait_async() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <int D, int G>
__global__ void __launch_bounds__(P::kThreads, G <= 4 ? 2 : 1)
    fp16_decode_kernel(Fp16DecodeArgs a, int tokens_per_split, int splits, float* part_acc,
                       float* part_ml, unsigned* counters) {
  constexpr int kTile = tile_for(D);
  constexpr int kLanes = D / 8;  // 16-byte chunks per row
  constexpr int kWarps = P::kThreads / 32;
  constexpr int kRowsPerStep = kWarps * (32 / kLanes);  // K rows per step of the block
  constexpr int kKSteps = kTile / kRowsPerStep;
  constexpr int kVRows = P::kThreads / kLanes;  // V rows per step of the block
  constexpr int kVSteps = kTile / kVRows;
  constexpr int kChunks = kTile * kLanes;  // 16-byte chunks of one tile of K (or V)
  static_assert(kTile % kRowsPerStep == 0 && kTile % kVRows == 0 && kTile % 32 == 0);
  static_assert(kChunks % P::kThreads == 0);
  static_assert(G >= 1 && G <= kWarps);
  constexpr int kGP = G == 1 ? 1 : G == 2 ? 2 : G <= 4 ? 4 : 8;  // G padded to a power of two
  static_assert(kGP <= kLanes);

  extern __shared__ uint4 s_stage[];  // [kStages][K, V][kTile][kLanes]
  __shared__ __align__(16) float s_q[G][D];
  __shared__ float s_p[G][kTile];
  __shared__ float s_m[G], s_l[G], s_alpha[G];
  __shared__ __align__(16) float s_red[kVRows][D];
  __shared__ bool s_last;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int slice = b * a.kv_heads + h;
  const int t_begin = split * tokens_per_split;
  const int t_end = min(a.tokens, t_begin + tokens_per_split);
  const int tiles = (t_end - t_begin + kTile - 1) / kTile;
  const std::size_t stride = static_cast<std::size_t>(a.kv_heads) * D;
  const std::size_t base = (static_cast<std::size_t>(b) * a.tokens * a.kv_heads + h) * D;
  const std::uint16_t* kp = a.k + base;
  const std::uint16_t* vp = a.v + base;
  const std::size_t q_row =
      static_cast<std::size_t>(b) * a.q_heads + static_cast<std::size_t>(h) * G;

  // Tile j's K and V rows into stage j % kStages, as one commit group (an empty group past the
  // last tile, so that the wait below always counts kStages - 1 groups).
  const auto issue = [&](int j) {
    if (j < tiles) {
      uint4* ks = s_stage + static_cast<std::size_t>(j % P::kStages) * 2 * kChunks;
      uint4* vs = ks + kChunks;
      const int t0 = t_begin + j * kTile;
#pragma unroll
      for (int i = tid; i < kChunks; i += P::kThreads) {
        const int t = t0 + i / kLanes;
        const bool valid = t < t_end;
        const std::size_t off = (valid ? t : t_begin) * stride + (i % kLanes) * 8;
        copy16_async(ks + i, kp + off, valid);
        copy16_async(vs + i, vp + off, valid);
      }
    }
    commit_async();
  };
#pragma unroll
  for (int j = 0; j < P::kStages - 1; ++j) issue(j);

  const float q_scale = kLog2e * rsqrtf(static_cast<float>(D));
  for (int i = tid; i < G * D; i += P::kThreads) s_q[i / D][i % D] = a.q[q_row * D + i] * q_scale;
  if (tid < G) {
    s_m[tid] = -INFINITY;
    s_l[tid] = 0.f;
  }
  __syncthreads();

  const int sub = lane % kLanes;  // which 8 channels this thread works on
  const int k_row = warp * (32 / kLanes) + lane / kLanes;
  const int v_row = tid / kLanes;
  // The query head whose dot this thread holds after the reduce-scatter below: the first
  // log2(kGP) halvings keep the upper half where the thread's bit of that step is set.
  int g_of_sub = 0;
#pragma unroll
  for (int off = kLanes / 2, half = kGP / 2; half > 0; off /= 2, half /= 2) {
    if (sub & off) g_of_sub += half;
  }
  float q[G][8];  // this thread's 8 channels of each query head (scaled), held for the chunk
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) q[g][j] = s_q[g][sub * 8 + j];
  }
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[g][j] = 0.f;
  }

  for (int j = 0; j < tiles; ++j) {
    issue(j + P::kStages - 1);  // into the stage the previous tile freed
    wait_async<P::kStages - 1>();
    __syncthreads();
    const uint4* ks = s_stage + static_cast<std::size_t>(j % P::kStages) * 2 * kChunks;
    const uint4* vs = ks + kChunks;
    const int t0 = t_begin + j * kTile;
#pragma unroll
    for (int s = 0; s < kKSteps; ++s) {
      const int row = s * kRowsPerStep + k_row;
      float k8[8];
      unpack8(ks[row * kLanes + sub], k8);
      float d[kGP];
#pragma unroll
      for (int g = 0; g < kGP; ++g) {
        d[g] = 0.f;
        if (g < G) {
#pragma unroll
          for (int c = 0; c < 8; ++c) d[g] = fmaf(q[g][c], k8[c], d[g]);
        }
      }
      // Sum over the row's kLanes threads as a reduce-scatter: at each step a thread sends the
      // half of its values its partner keeps, so G partial dots take log2(kLanes) + G - 1
      // shuffles instead of G log2(kLanes). Afterwards the thread holds head g_of(sub)'s sum.
#pragma unroll
      for (int off = kLanes / 2, n = kGP; off > 0; off /= 2) {
        if (n > 1) {
          const bool upper = (lane & off) != 0;
#pragma unroll
          for (int i = 0; i < n / 2; ++i) {
            const float send = upper ? d[i] : d[i + n / 2];
            const float keep = upper ? d[i + n / 2] : d[i];
            d[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
          }
          n /= 2;
        } else {
          d[0] += __shfl_xor_sync(0xffffffffu, d[0], off);
        }
      }
      if (sub % (kLanes / kGP) == 0 && g_of_sub < G) {
        s_p[g_of_sub][row] = t0 + row < t_end ? d[0] : -INFINITY;
      }
    }
    __syncthreads();
    if (warp < G) {
      const int g = warp;
      float x[kTile / 32];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < kTile / 32; ++i) {
        x[i] = s_p[g][lane + 32 * i];
        mx = fmaxf(mx, x[i]);
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float m_old = s_m[g];
      const float m_new = fmaxf(m_old, mx);  // finite: the tile's first row is a token
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < kTile / 32; ++i) {
        const float p = exp2f(x[i] - m_new);
        s_p[g][lane + 32 * i] = p;
        sum += p;
      }
#pragma unroll
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      __syncwarp();  // every lane has read s_m[g] before lane 0 rewrites it
      if (lane == 0) {
        const float alpha = exp2f(m_old - m_new);
        s_alpha[g] = alpha;
        s_l[g] = s_l[g] * alpha + sum;
        s_m[g] = m_new;
      }
    }
    __syncthreads();
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float alpha = s_alpha[g];
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[g][c] *= alpha;
    }
#pragma unroll
    for (int s = 0; s < kVSteps; ++s) {
      const int row = s * kVRows + v_row;
      float v8[8];
      unpack8(vs[row * kLanes + sub], v8);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float p = s_p[g][row];
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[g][c] = fmaf(p, v8[c], acc[g][c]);
      }
    }
    __syncthreads();  // s_p and this stage are rewritten by the next tile
  }
  wait_async<0>();  // nothing may be left in flight into shared memory at exit

  // Sum the accumulators over the V rows, one query head at a time through shared memory.
  const bool single = splits == 1;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    *reinterpret_cast<float4*>(&s_red[v_row][sub * 8]) =
        make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
    *reinterpret_cast<float4*>(&s_red[v_row][sub * 8 + 4]) =
        make_float4(acc[g][4], acc[g][5], acc[g][6], acc[g][7]);
    __syncthreads();
    for (int c = tid; c < D; c += P::kThreads) {
      float sum = 0.f;
#pragma unroll
      for (int r = 0; r < kVRows; ++r) sum += s_red[r][c];
      if (single) {
        a.out[(q_row + g) * D + c] = sum / s_l[g];
      } else {
        part_acc[((static_cast<std::size_t>(slice) * G + g) * splits + split) * D + c] = sum;
      }
    }
    __syncthreads();
  }
  if (single) return;
  if (tid < G) {
    float* ml = part_ml + ((static_cast<std::size_t>(slice) * G + tid) * splits + split) * 2;
    ml[0] = s_m[tid];
    ml[1] = s_l[tid];
  }
  // The last block of this KV head to finish merges the chunks (threadFenceReduction's pattern:
  // each block's partials are visible device-wide before its count is).
  __threadfence();
  __syncthreads();
  if (tid == 0) s_last = atomicAdd(&counters[slice], 1u) == static_cast<unsigned>(splits - 1);
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  // The merge runs after every other block of this head, on the kernel's critical path, so its
  // loads go out together: first every chunk's max and sum (one per thread), then each query
  // head's weights 2^(m_s - max) into the idle stage memory, then (head, channel pair) sums with
  // eight chunks' loads in flight (from L2: __ldcg, past this SM's L1).
  float* s_w = reinterpret_cast<float*>(s_stage);  // [G][splits]; the host keeps it in bounds
  for (int i = tid; i < G * splits; i += P::kThreads) {
    s_w[i] = __ldcg(&part_ml[(static_cast<std::size_t>(slice) * G * splits + i) * 2]);
  }
  __syncthreads();
  if (warp < G) {
    const int g = warp;
    float* w = s_w + g * splits;
    const float* ml = part_ml + (static_cast<std::size_t>(slice) * G + g) * splits * 2;
    float m = -INFINITY;
    for (int i = lane; i < splits; i += 32) m = fmaxf(m, w[i]);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float l = 0.f;
    for (int i = lane; i < splits; i += 32) {
      const float wi = exp2f(w[i] - m);
      w[i] = wi;
      l = fmaf(__ldcg(&ml[2 * i + 1]), wi, l);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) l += __shfl_xor_sync(0xffffffffu, l, off);
    if (lane == 0) s_alpha[g] = 1.f / l;
  }
  __syncthreads();
  for (int i = tid; i < G * D / 2; i += P::kThreads) {
    const int g = i / (D / 2), c = (i % (D / 2)) * 2;
    const float* src = part_acc + (static_cast<std::size_t>(slice) * G + g) * splits * D + c;
    const float* w = s_w + g * splits;
    float ox = 0.f, oy = 0.f;
#pragma unroll 8
    for (int sp = 0; sp < splits; ++sp) {
      const float2 x =
          __ldcg(reinterpret_cast<const float2*>(src + static_cast<std::size_t>(sp) * D));
      ox = fmaf(x.x, w[sp], ox);
      oy = fmaf(x.y, w[sp], oy);
    }
    const float inv = s_alpha[g];
    *reinterpret_cast<float2*>(&a.out[(q_row + g) * D + c]) = make_float2(ox * inv, oy * inv);
  }
  if (tid == 0) counters[slice] = 0;  // ready for the next launch
}

using KernelFn = void (*)(Fp16DecodeArgs, int, int, float*, float*, unsigned*);

template <int D>
KernelFn kernel_for_group(int g) {
  switch (g) {
    case 1:
      return fp16_decode_kernel<D, 1>;
    case 2:
      return fp16_decode_kernel<D, 2>;
    case 3:
      return fp16_decode_kernel<D, 3>;
    case 4:
      return fp16_decode_kernel<D, 4>;
    case 5:
      return fp16_decode_kernel<D, 5>;
    case 6:
      return fp16_decode_kernel<D, 6>;
    case 7:
      return fp16_decode_kernel<D, 7>;
    case 8:
      return fp16_decode_kernel<D, 8>;
    default:
      return nullptr;
  }
}

KernelFn kernel_for(int head_dim, int group) {
  switch (head_dim) {
    case 64:
      return kernel_for_group<64>(group);
    case 128:
      return kernel_for_group<128>(group);
    case 256:
      return kernel_for_group<256>(group);
    default:
      return nullptr;
  }
}

// Resident blocks per SM of each instantiation, asked once each: [dim 64/128/256][group - 1].
int& occupancy_cache(int head_dim, int group) {
  static int cache[3][P::kMaxGroup] = {};
  return cache[head_dim == 64 ? 0 : head_dim == 128 ? 1 : 2][group - 1];
}

struct Plan {
  KernelFn kernel = nullptr;
  int group = 0, slices = 0, tile = 0;
  std::size_t smem = 0;  // dynamic shared memory: the K and V stages
  SplitPlan split;
  std::size_t partial_rows() const {
    return split.splits == 1 ? 0 : static_cast<std::size_t>(slices) * group * split.splits;
  }
};

bool args_valid(const Fp16DecodeArgs& a) {
  if (a.batch <= 0 || a.tokens < 0 || a.kv_heads <= 0 || a.q_heads <= 0 ||
      a.q_heads % a.kv_heads != 0 || !fp16_decode_supported(a.head_dim, a.q_heads / a.kv_heads) ||
      a.kv_heads > 65535 || a.batch > 65535) {
    return false;
  }
  if (!a.q || !a.out || reinterpret_cast<std::uintptr_t>(a.out) % 8 != 0) return false;
  if (a.tokens == 0) return true;
  const auto misaligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16; };
  return a.k && a.v && !misaligned(a.k) && !misaligned(a.v);
}

Plan plan_for(const Fp16DecodeArgs& a) {
  Plan p;
  p.group = a.q_heads / a.kv_heads;
  p.kernel = kernel_for(a.head_dim, p.group);
  p.slices = a.batch * a.kv_heads;
  p.tile = tile_for(a.head_dim);
  p.smem = stage_bytes(a.head_dim);
  int& resident = occupancy_cache(a.head_dim, p.group);
  if (resident == 0) {
    // The stages pass the 48 KiB a kernel gets without asking; asked once per instantiation.
    if (cudaFuncSetAttribute(p.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(p.smem)) != cudaSuccess) {
      (void)cudaGetLastError();
    }
  }
  const int tiles = (a.tokens + p.tile - 1) / p.tile;
  p.split = plan_splits(tiles, p.slices, resident_blocks(p.kernel, P::kThreads, resident, p.smem));
  // The merge keeps G weights per chunk in the stage memory: at most smem / 4 / G chunks.
  const int max_splits = static_cast<int>(p.smem / sizeof(float)) / p.group;
  if (p.split.splits > max_splits) {
    p.split.tiles_per_split = (tiles + max_splits - 1) / max_splits;
    p.split.splits = (tiles + p.split.tiles_per_split - 1) / p.split.tiles_per_split;
  }
  return p;
}

}  // namespace

bool fp16_decode_supported(int head_dim, int group) {
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && group >= 1 &&
         group <= P::kMaxGroup;
}

Status Fp16Decode::prepare(const Fp16DecodeArgs& a) {
  if (!args_valid(a)) {
    return make_error("fp16 decode attention: unsupported shape (" + std::to_string(a.batch) +
                      " sequences, " + std::to_string(a.q_heads) + " query heads over " +
                      std::to_string(a.kv_heads) + " KV heads, head_dim " +
                      std::to_string(a.head_dim) +
                      "; head_dim must be 64, 128 or 256 and the group 1 to 8) or a missing or "
                      "misaligned buffer");
  }
  if (a.tokens == 0) return Ok{};
  const Plan p = plan_for(a);
  const std::size_t rows = p.partial_rows();
  const std::size_t need = rows * (static_cast<std::size_t>(a.head_dim) + 2);
  if (m_partials.size() < need) KVLAB_TRY_STATUS(m_partials.allocate(need, "fp16 decode partials"));
  if (m_counters.size() < static_cast<std::size_t>(p.slices)) {
    KVLAB_TRY_STATUS(m_counters.allocate(p.slices, "fp16 decode counters"));
    KVLAB_TRY_STATUS(m_counters.zero("fp16 decode counters"));
  }
  return Ok{};
}

cudaError_t Fp16Decode::launch(const Fp16DecodeArgs& a, cudaStream_t stream) {
  if (!args_valid(a)) return cudaErrorInvalidValue;
  if (a.tokens == 0) {
    m_last_splits = 0;
    return cudaMemsetAsync(
        a.out, 0, static_cast<std::size_t>(a.batch) * a.q_heads * a.head_dim * sizeof(float),
        stream);
  }
  const Plan p = plan_for(a);
  const std::size_t rows = p.partial_rows();
  if (m_partials.size() < rows * (static_cast<std::size_t>(a.head_dim) + 2) ||
      (p.split.splits > 1 && m_counters.size() < static_cast<std::size_t>(p.slices))) {
    return cudaErrorInvalidValue;  // not prepared for this shape
  }
  float* acc = m_partials.get();
  float* ml = acc ? acc + rows * a.head_dim : nullptr;
  m_last_splits = p.split.splits;
  const dim3 grid(p.split.splits, a.kv_heads, a.batch);
  p.kernel<<<grid, P::kThreads, p.smem, stream>>>(a, p.split.tiles_per_split * p.tile,
                                                  p.split.splits, acc, ml, m_counters.get());
  return cudaGetLastError();
}

Status fp16_decode_attention(const Fp16KvView& kv, int batch, std::span<const float> q, int q_heads,
                             std::span<float> out, int* splits) {
  KVLAB_TRY_STATUS(require_gpu());
  if (batch <= 0 || kv.tokens < 0 || kv.kv_heads <= 0 || kv.head_dim <= 0 || q_heads <= 0) {
    return make_error("fp16 decode attention: empty or negative shape");
  }
  const std::size_t n = static_cast<std::size_t>(batch) * kv.tokens * kv.kv_heads * kv.head_dim;
  const std::size_t nq = static_cast<std::size_t>(batch) * q_heads * kv.head_dim;
  if (kv.keys.size() != n || kv.values.size() != n || q.size() != nq || out.size() != nq) {
    return make_error("fp16 decode attention: buffer sizes do not match the shape");
  }
  DeviceArray<std::uint16_t> dk, dv;
  DeviceArray<float> dq, dout;
  KVLAB_TRY_STATUS(dk.upload(kv.keys.data(), n, "fp16 decode keys"));
  KVLAB_TRY_STATUS(dv.upload(kv.values.data(), n, "fp16 decode values"));
  KVLAB_TRY_STATUS(dq.upload(q.data(), nq, "fp16 decode queries"));
  KVLAB_TRY_STATUS(dout.allocate(nq, "fp16 decode output"));
  Fp16DecodeArgs a;
  a.batch = batch;
  a.tokens = kv.tokens;
  a.kv_heads = kv.kv_heads;
  a.q_heads = q_heads;
  a.head_dim = kv.head_dim;
  a.k = dk.get();
  a.v = dv.get();
  a.q = dq.get();
  a.out = dout.get();
  Fp16Decode dec;
  KVLAB_TRY_STATUS(dec.prepare(a));
  KVLAB_CUDA_TRY(dec.launch(a, nullptr), "fp16 decode attention");
  KVLAB_CUDA_LAUNCH("fp16 decode attention");
  if (splits) *splits = dec.last_splits();
  return dout.download(out.data(), nq, "fp16 decode output");
}

}  // namespace kvlab::cuda
