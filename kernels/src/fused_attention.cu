// Fused decode-attention kernels (see fused_attention.cuh) and the host entry points.
#include <cub/block/block_scan.cuh>

#include <cmath>
#include <string>
#include <vector>

#include "fused_attention.cuh"
#include "kvlab/engine/codec/block_layout.h"
#include "kvlab/engine/codec/word_stream.h"
#include "launch_plan.cuh"
#include "packed_attention.cuh"
#include "rans_attention.cuh"

namespace kvlab::cuda {

namespace {

constexpr int kThreads = 64;  // vectors decoded at once per CUDA block
constexpr int kTilePad = 4;   // bytes of padding per tile row: rows start in different banks
constexpr int kErrNone = 0x7fffffff;

// A thread's word loads of its bit stream go through the read-only cache.
struct LdgWords {
  const std::uint32_t* __restrict__ w;
  __device__ __forceinline__ std::uint32_t operator()(std::uint64_t i) const {
    return __ldg(w + i);
  }
};
using Reader = word_stream::WordReader<LdgWords>;

struct StreamArgs {
  const std::uint32_t* payload;
  std::uint64_t payload_words;  // padding included (word_stream::payload_words_for)
  const std::uint32_t* block_offsets;
  const std::uint16_t* vector_bits;
  const std::uint32_t* table;  // Huffman pair decode table (global; staged into shared memory)
  int tokens, heads, dim, block_size, width;
  bool aligned16;  // bitpack: every vector is whole 16-byte words (dim * width % 128 == 0)
};

StreamArgs stream_args(const GpuCodes& c, const GpuBook& book) {
  StreamArgs s;
  s.payload = c.payload.get();
  s.payload_words = c.payload.size();
  s.block_offsets = c.block_offsets.get();
  s.vector_bits = c.vector_bits.get();
  s.table = book.decode2.get();
  s.tokens = c.tokens;
  s.heads = c.heads;
  s.dim = c.dim;
  s.block_size = c.block_size;
  s.width = c.width;
  s.aligned16 = c.kind == CodecKind::BitPack && (c.dim * c.width) % 128 == 0;
  return s;
}

// Per codec block: the start bit of each of this CUDA block's vectors. Huffman: block offset plus
// a block-wide scan of the vector bit counts; bitpack: from the shape.
template <bool kHuffman>
struct VectorStarts {
  using Scan = cub::BlockScan<std::uint32_t, kThreads>;
  typename Scan::TempStorage scan;
};

// Bytes per row of the values kernel's code tile: rows start in different banks.
__host__ __device__ constexpr int tile_row(int dim) {
  return ((dim + 3) & ~3) + kTilePad;
}

// Decodes one vector's `dim` codes, calling f(c, code) for each. Returns false when the vector
// is corrupt (a lookup with no code, or a bit count other than `bits`).
template <bool kHuffman, int kWidth, class F>
__device__ __forceinline__ bool decode_vector(const StreamArgs& s, const std::uint32_t* table,
                                              std::uint64_t pos, std::uint32_t bits, F&& f) {
  if constexpr (kHuffman) {
    Reader r(LdgWords{s.payload}, s.payload_words, pos);
    return word_stream::decode_pair_vector(r, table, s.dim, bits, f);
  } else {
    constexpr int kPer = 32 / kWidth;
    constexpr std::uint32_t kMask = (1u << kWidth) - 1u;
    if (s.aligned16) {
      // Every vector starts on a 16-byte boundary and fills whole 16-byte words.
      const uint4* v = reinterpret_cast<const uint4*>(s.payload) + (pos >> 7);
#pragma unroll 4
      for (int c0 = 0; c0 < s.dim; c0 += 4 * kPer) {
        const uint4 q = __ldg(v + c0 / (4 * kPer));
        const std::uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int m = 0; m < 4; ++m) {
#pragma unroll
          for (int k = 0; k < kPer; ++k) f(c0 + m * kPer + k, (words[m] >> (k * kWidth)) & kMask);
        }
      }
      return true;
    }
    Reader r(LdgWords{s.payload}, s.payload_words, pos);
    word_stream::decode_packed_vector<kWidth>(r, s.dim, f);
    return true;
  }
}

// acc[g] += qf[c][g] * x for the G query heads of a group; qf is laid out [channel][G] so one
// vector load brings all of them.
template <int G>
__device__ __forceinline__ void fma_group(const float* qf, int c, float x, float* acc) {
  if constexpr (G % 4 == 0) {
#pragma unroll
    for (int j = 0; j < G / 4; ++j) {
      const float4 q = reinterpret_cast<const float4*>(qf + c * G)[j];
      acc[4 * j] = fmaf(q.x, x, acc[4 * j]);
      acc[4 * j + 1] = fmaf(q.y, x, acc[4 * j + 1]);
      acc[4 * j + 2] = fmaf(q.z, x, acc[4 * j + 2]);
      acc[4 * j + 3] = fmaf(q.w, x, acc[4 * j + 3]);
    }
  } else if constexpr (G == 2) {
    const float2 q = reinterpret_cast<const float2*>(qf)[c];
    acc[0] = fmaf(q.x, x, acc[0]);
    acc[1] = fmaf(q.y, x, acc[1]);
  } else {
    acc[0] = fmaf(qf[c], x, acc[0]);
  }
}

// Where vector i (0 <= i < n) of codec block b starts, for every thread of the CUDA block at once
// (Huffman needs the block-wide scan, so every thread calls this).
template <bool kHuffman>
__device__ __forceinline__ std::uint64_t vector_start(
    const StreamArgs& s, int b, int tb, int h, int n, int i0, std::uint32_t& carry,
    std::uint32_t& bits, typename cub::BlockScan<std::uint32_t, kThreads>::TempStorage& scan) {
  const int i = i0 + threadIdx.x;
  if constexpr (kHuffman) {
    const std::uint64_t first_vector = block_layout::first_vector(tb, h, s.heads, s.block_size, n);
    bits = i < n ? s.vector_bits[first_vector + i] : 0u;
    std::uint32_t start = 0, total = 0;
    cub::BlockScan<std::uint32_t, kThreads>(scan).ExclusiveSum(bits, start, total);
    const std::uint64_t pos = static_cast<std::uint64_t>(s.block_offsets[b]) * 8 + carry + start;
    carry += total;
    return pos;
  } else {
    bits = 0;
    return 8 * block_layout::bitpack_block_offset(tb, h, s.heads, s.block_size, n, s.dim, s.width) +
           block_layout::bitpack_vector_bit(i, s.dim, s.width);
  }
}

struct KeyArgs {
  StreamArgs s;
  const float* steps;  // [tb][head][dim]
  const float* mins;
  const float* q;  // [q_heads][dim]
  float scale;
  float* logits;  // [q_heads][tokens]
  int* err;
};

template <bool kHuffman, int kWidth, int G>
__global__ void __launch_bounds__(kThreads) logits_kernel(KeyArgs a) {
  __shared__ std::uint32_t table[kHuffman ? 4096 : 1];
  extern __shared__ __align__(16) float qf[];  // [channel][G], G * (dim + 1) floats
  __shared__ float bias[G];
  __shared__ typename cub::BlockScan<std::uint32_t, kThreads>::TempStorage scan;
  const StreamArgs& s = a.s;
  if constexpr (kHuffman) {
    for (int i = threadIdx.x; i < 4096; i += kThreads) table[i] = s.table[i];
  }
  const int h = blockIdx.y;
  const int tbs = (s.tokens + s.block_size - 1) / s.block_size;
  const int dim = s.dim;
  for (int tb = blockIdx.x; tb < tbs; tb += gridDim.x) {
    __syncthreads();  // qf and bias of the previous block are no longer read
    const std::size_t unit = (static_cast<std::size_t>(tb) * s.heads + h) * dim;
    if (threadIdx.x < G) {
      bias[threadIdx.x] = 0.f;
      qf[dim * G + threadIdx.x] = 0.f;  // the zero channel past the end (decode_vector)
    }
    __syncthreads();
    float part[G];
#pragma unroll
    for (int g = 0; g < G; ++g) part[g] = 0.f;
    for (int c = threadIdx.x; c < dim; c += kThreads) {
      const float st = a.steps[unit + c] * a.scale, mn = a.mins[unit + c] * a.scale;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float qv = a.q[(static_cast<std::size_t>(h) * G + g) * dim + c];
        qf[c * G + g] = qv * st;
        part[g] += qv * mn;
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float v = part[g];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if ((threadIdx.x & 31) == 0) atomicAdd(&bias[g], v);
    }
    __syncthreads();
    const int first = tb * s.block_size;
    const int n = block_layout::block_tokens(tb, s.tokens, s.block_size);
    const int b = static_cast<int>(block_layout::block_of(first, h, s.heads, s.block_size));
    std::uint32_t carry = 0;
    for (int i0 = 0; i0 < n; i0 += kThreads) {
      std::uint32_t bits = 0;
      const std::uint64_t pos = vector_start<kHuffman>(s, b, tb, h, n, i0, carry, bits, scan);
      const int i = i0 + threadIdx.x;
      if (i < n) {
        float acc[G];
#pragma unroll
        for (int g = 0; g < G; ++g) acc[g] = 0.f;
        const bool ok = decode_vector<kHuffman, kWidth>(
            s, table, pos, bits,
            [&](int c, std::uint32_t code) { fma_group<G>(qf, c, static_cast<float>(code), acc); });
        if (!ok) atomicMin(a.err, b + 1);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          a.logits[(static_cast<std::size_t>(h) * G + g) * s.tokens + first + i] = acc[g] + bias[g];
        }
      }
      __syncthreads();  // the scan storage is reused
    }
  }
}

struct ValueArgs {
  StreamArgs s;
  const float* steps;  // [token][head]
  const float* mins;
  const float* probs;  // [q_heads][tokens]
  float* out;          // [q_heads][dim], accumulated
  int* err;
};

template <bool kHuffman, int kWidth, int G>
__global__ void __launch_bounds__(kThreads) values_kernel(ValueArgs a) {
  // Thread t owns channel pairs (2t, 2t+1) and (2t + 2*kThreads, ...): one 2-byte tile read per
  // row serves both channels of a pair.
  constexpr int kPairs = kMaxFusedHeadDim / (2 * kThreads);
  __shared__ std::uint32_t table[kHuffman ? 4096 : 1];
  extern __shared__ __align__(16) std::uint8_t tile[];  // kThreads rows of tile_row(dim) bytes
  __shared__ __align__(16) float w[kThreads * G];       // [row][G]: softmax weight * step
  __shared__ float bias[G];
  __shared__ typename cub::BlockScan<std::uint32_t, kThreads>::TempStorage scan;
  const StreamArgs& s = a.s;
  if constexpr (kHuffman) {
    for (int i = threadIdx.x; i < 4096; i += kThreads) table[i] = s.table[i];
  }
  if (threadIdx.x < G) bias[threadIdx.x] = 0.f;
  const int h = blockIdx.y;
  const int dim = s.dim;
  const int row = tile_row(dim);
  const int tbs = (s.tokens + s.block_size - 1) / s.block_size;
  float acc[kPairs][2][G];
  float bsum[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    bsum[g] = 0.f;
#pragma unroll
    for (int k = 0; k < kPairs; ++k) acc[k][0][g] = acc[k][1][g] = 0.f;
  }
  for (int tb = blockIdx.x; tb < tbs; tb += gridDim.x) {
    const int first = tb * s.block_size;
    const int n = block_layout::block_tokens(tb, s.tokens, s.block_size);
    const int b = static_cast<int>(block_layout::block_of(first, h, s.heads, s.block_size));
    std::uint32_t carry = 0;
    for (int i0 = 0; i0 < n; i0 += kThreads) {
      __syncthreads();  // the previous tile has been read
      std::uint32_t bits = 0;
      const std::uint64_t pos = vector_start<kHuffman>(s, b, tb, h, n, i0, carry, bits, scan);
      const int i = i0 + threadIdx.x;
      std::uint8_t* my_row = tile + threadIdx.x * row;
      if (i < n) {
        const std::size_t th = static_cast<std::size_t>(first + i) * s.heads + h;
        const float st = a.steps[th], mn = a.mins[th];
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float p = a.probs[(static_cast<std::size_t>(h) * G + g) * s.tokens + first + i];
          w[threadIdx.x * G + g] = p * st;
          bsum[g] = fmaf(p, mn, bsum[g]);
        }
        const bool ok = decode_vector<kHuffman, kWidth>(
            s, table, pos, bits,
            [&](int c, std::uint32_t code) { my_row[c] = static_cast<std::uint8_t>(code); });
        if (!ok) atomicMin(a.err, b + 1);
      }
      if (dim & 1) my_row[dim] = 0;  // the odd channel's partner in the last pair
      __syncthreads();
      const int m = min(kThreads, n - i0);
#pragma unroll
      for (int k = 0; k < kPairs; ++k) {
        const int c = 2 * (threadIdx.x + k * kThreads);
        if (c < dim) {
          for (int r = 0; r < m; ++r) {
            const std::uint32_t two = *reinterpret_cast<const std::uint16_t*>(tile + r * row + c);
            const float x0 = static_cast<float>(two & 255u), x1 = static_cast<float>(two >> 8);
            fma_group<G>(w + r * G, 0, x0, acc[k][0]);
            fma_group<G>(w + r * G, 0, x1, acc[k][1]);
          }
        }
      }
    }
  }
  // The minimums' share: sum_t p * min_t, the same for every channel of a query head.
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float v = bsum[g];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&bias[g], v);
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kPairs; ++k) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int c = 2 * (threadIdx.x + k * kThreads) + j;
      if (c < dim) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
          atomicAdd(&a.out[(static_cast<std::size_t>(h) * G + g) * dim + c],
                    acc[k][j][g] + bias[g]);
        }
      }
    }
  }
}

int grid_x(int token_blocks, int heads) {
  const int want = std::max(1, sm_count() * 32 / std::max(1, heads));
  return std::max(1, std::min(token_blocks, want));
}

template <template <bool, int, int> class Launch, class Args>
cudaError_t dispatch(CodecKind kind, int width, int group, dim3 grid, const Args& args,
                     cudaStream_t stream) {
  auto by_group = [&](auto huff, auto w) -> cudaError_t {
    constexpr bool H = decltype(huff)::value;
    constexpr int W = decltype(w)::value;
    switch (group) {
      case 1:
        return Launch<H, W, 1>::run(grid, args, stream);
      case 2:
        return Launch<H, W, 2>::run(grid, args, stream);
      case 4:
        return Launch<H, W, 4>::run(grid, args, stream);
      case 8:
        return Launch<H, W, 8>::run(grid, args, stream);
      default:
        return cudaErrorInvalidValue;
    }
  };
  if (kind == CodecKind::Huffman) {
    return by_group(std::true_type{}, std::integral_constant<int, 8>{});
  }
  switch (width) {
    case 2:
      return by_group(std::false_type{}, std::integral_constant<int, 2>{});
    case 4:
      return by_group(std::false_type{}, std::integral_constant<int, 4>{});
    case 8:
      return by_group(std::false_type{}, std::integral_constant<int, 8>{});
    default:
      return cudaErrorInvalidValue;
  }
}

template <bool H, int W, int G>
struct LogitsLaunch {
  static cudaError_t run(dim3 grid, const KeyArgs& a, cudaStream_t stream) {
    const std::size_t smem = sizeof(float) * G * (a.s.dim + 1);
    logits_kernel<H, W, G><<<grid, kThreads, smem, stream>>>(a);
    return cudaGetLastError();
  }
};
template <bool H, int W, int G>
struct ValuesLaunch {
  static cudaError_t run(dim3 grid, const ValueArgs& a, cudaStream_t stream) {
    const std::size_t smem = static_cast<std::size_t>(kThreads) * tile_row(a.s.dim);
    values_kernel<H, W, G><<<grid, kThreads, smem, stream>>>(a);
    return cudaGetLastError();
  }
};

__global__ void set_int(int* p, int v) {
  *p = v;
}

}  // namespace

bool supported_group(int group) {
  return group == 1 || group == 2 || group == 4 || group == 8;
}

cudaError_t launch_fused_logits(const GpuLayer::Impl& g, const float* d_q, int group,
                                float* d_logits, int* d_err, cudaStream_t stream) {
  KeyArgs a;
  a.s = stream_args(g.keys, g.key_book);
  a.steps = g.key_steps.get();
  a.mins = g.key_mins.get();
  a.q = d_q;
  a.scale = 1.0f / std::sqrt(static_cast<float>(g.head_dim));
  a.logits = d_logits;
  a.err = d_err;
  set_int<<<1, 1, 0, stream>>>(d_err, kErrNone);
  if (g.codec == CodecKind::Rans) return launch_rans_logits(g, d_q, group, d_logits, d_err, stream);
  if (g.codec == CodecKind::BitPack && packed_logits_supported(g.keys, group)) {
    return launch_packed_logits(g, d_q, group, d_logits, stream);  // tensor cores
  }
  const int tbs = g.keys.token_blocks();
  const dim3 grid(grid_x(tbs, g.kv_heads), g.kv_heads);
  return dispatch<LogitsLaunch>(g.codec, g.keys.width, group, grid, a, stream);
}

cudaError_t launch_fused_values(const GpuLayer::Impl& g, const float* d_probs, int group,
                                float* d_out, int* d_err, cudaStream_t stream) {
  ValueArgs a;
  a.s = stream_args(g.values, g.value_book);
  a.steps = g.value_steps.get();
  a.mins = g.value_mins.get();
  a.probs = d_probs;
  a.out = d_out;
  a.err = d_err;
  set_int<<<1, 1, 0, stream>>>(d_err, kErrNone);
  if (cudaError_t e = cudaMemsetAsync(
          d_out, 0, sizeof(float) * static_cast<std::size_t>(group) * g.kv_heads * g.head_dim,
          stream)) {
    return e;
  }
  if (g.codec == CodecKind::Rans)
    return launch_rans_values(g, d_probs, group, d_out, d_err, stream);
  if (g.codec == CodecKind::BitPack && packed_values_supported(g.values, group)) {
    return launch_packed_values(g, d_probs, group, d_out, stream);  // tensor cores
  }
  const int tbs = g.values.token_blocks();
  const dim3 grid(grid_x(tbs, g.kv_heads), g.kv_heads);
  return dispatch<ValuesLaunch>(g.codec, g.values.width, group, grid, a, stream);
}

namespace {

Status check_call(const GpuLayer& layer, std::size_t in, std::size_t out, int q_heads,
                  std::size_t in_per_head, std::size_t out_per_head, const char* what) {
  const GpuLayer::Impl& g = layer.impl();
  if (q_heads <= 0 || g.kv_heads <= 0 || q_heads % g.kv_heads != 0) {
    return make_error(std::string(what) + ": " + std::to_string(q_heads) +
                      " query heads are not a multiple of " + std::to_string(g.kv_heads) +
                      " KV heads");
  }
  if (!supported_group(q_heads / g.kv_heads)) {
    return make_error(std::string(what) + ": GQA groups of " +
                      std::to_string(q_heads / g.kv_heads) +
                      " query heads per KV head are not built for the GPU (1, 2, 4, 8)");
  }
  if (g.head_dim > kMaxFusedHeadDim) {
    return make_error(std::string(what) + ": head_dim " + std::to_string(g.head_dim) +
                      " is larger than the GPU kernels' " + std::to_string(kMaxFusedHeadDim));
  }
  if (in != static_cast<std::size_t>(q_heads) * in_per_head ||
      out != static_cast<std::size_t>(q_heads) * out_per_head) {
    return make_error(std::string(what) + ": input or output size does not match the shape");
  }
  return Ok{};
}

Status run_fused(const GpuLayer& layer, std::span<const float> in, int q_heads,
                 std::span<float> out, bool keys) {
  KVLAB_TRY_STATUS(require_gpu());
  const GpuLayer::Impl& g = layer.impl();
  const char* what = keys ? "GPU attention logits" : "GPU attention values";
  KVLAB_TRY_STATUS(check_call(layer, in.size(), out.size(), q_heads, keys ? g.head_dim : g.tokens,
                              keys ? g.tokens : g.head_dim, what));
  DeviceArray<float> d_in, d_out;
  DeviceArray<int> d_err;
  KVLAB_TRY_STATUS(d_in.upload(in.data(), in.size(), what));
  KVLAB_TRY_STATUS(d_out.allocate(out.size(), what));
  KVLAB_TRY_STATUS(d_err.allocate(1, what));
  // Poisoned with NaN, so an element the kernel failed to write cannot pass for a result.
  KVLAB_CUDA_TRY(cudaMemset(d_out.get(), 0xff, d_out.bytes()), what);
  const int group = q_heads / g.kv_heads;
  KVLAB_CUDA_TRY(keys
                     ? launch_fused_logits(g, d_in.get(), group, d_out.get(), d_err.get(), nullptr)
                     : launch_fused_values(g, d_in.get(), group, d_out.get(), d_err.get(), nullptr),
                 what);
  KVLAB_CUDA_TRY(cudaDeviceSynchronize(), what);
  int err = 0;
  KVLAB_TRY_STATUS(d_err.download(&err, 1, what));
  if (err != kErrNone) {
    const GpuCodes& c = keys ? g.keys : g.values;
    const int b = err - 1;
    return make_error(std::string(what) + ": corrupt " + (keys ? "key" : "value") +
                      " stream in block " + std::to_string(b) + " (head " +
                      std::to_string(b % c.heads) + ", tokens from " +
                      std::to_string((b / c.heads) * c.block_size) + ")");
  }
  return d_out.download(out.data(), out.size(), what);
}

}  // namespace

Status attention_logits(const GpuLayer& layer, std::span<const float> q, int q_heads,
                        std::span<float> logits) {
  return run_fused(layer, q, q_heads, logits, true);
}

Status attention_values(const GpuLayer& layer, std::span<const float> probs, int q_heads,
                        std::span<float> out) {
  return run_fused(layer, probs, q_heads, out, false);
}

}  // namespace kvlab::cuda
