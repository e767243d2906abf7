// Fused decode-attention kernels (see fused_attention.cuh) and the host entry points.
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

using P = FusedAttentionPolicy;
constexpr int kWarpsPerGroup = P::kVectors / 32;
constexpr int kErrNone = 0x7fffffff;
constexpr std::size_t kTableBytes = 4096 * sizeof(std::uint32_t);
static_assert(P::kVectors % 32 == 0 && P::kStageWords % 4 == 0);

// Word loads of a bit stream not staged in shared memory go through the read-only cache.
struct LdgWords {
  const std::uint32_t* __restrict__ w;
  __device__ __forceinline__ std::uint32_t operator()(std::uint64_t i) const {
    return __ldg(w + i);
  }
};
using Staged = word_stream::StagedWords<LdgWords>;

struct StreamArgs {
  const std::uint32_t* payload;
  std::uint64_t payload_words;  // padding included (word_stream::payload_words_for)
  std::uint64_t payload_bytes;
  const std::uint32_t* block_offsets;
  const std::uint16_t* vector_bits;
  const std::uint32_t* table;  // Huffman pair decode table (global; copied to shared memory)
  int tokens, heads, dim, block_size, width;
  int token_blocks, blocks;  // GpuCodes::token_blocks(), blocks()
  bool aligned16;  // bitpack: every vector is whole 16-byte words (dim * width % 128 == 0)
};

StreamArgs stream_args(const GpuCodes& c, const GpuBook& book) {
  StreamArgs s;
  s.payload = c.payload.get();
  s.payload_words = c.payload.size();
  s.payload_bytes = c.payload_bytes;
  s.block_offsets = c.block_offsets.get();
  s.vector_bits = c.vector_bits.get();
  s.table = book.decode2.get();
  s.tokens = c.tokens;
  s.heads = c.heads;
  s.dim = c.dim;
  s.block_size = c.block_size;
  s.width = c.width;
  s.token_blocks = c.token_blocks();
  s.blocks = c.blocks();
  s.aligned16 = c.kind == CodecKind::BitPack && (c.dim * c.width) % 128 == 0;
  return s;
}

// A thread's place in its CUDA block: group g (one codec block at a time), vector t of the group.
struct Place {
  int g, t;
  __device__ Place()
      : g(static_cast<int>(threadIdx.x) / P::kVectors), t(threadIdx.x % P::kVectors) {}
};

// The codec block a group takes in one round of the grid-stride loop, and (Huffman) the window of
// its stream staged in shared memory.
struct GroupBlock {
  bool live = false;  // false past the last token block: the group only keeps the barriers
  int tb = 0, n = 0, b = 0;
  word_stream::StageWindow window;
};

template <bool kHuffman>
__device__ __forceinline__ GroupBlock group_block(const StreamArgs& s, int tb, int h) {
  GroupBlock k;
  k.live = tb < s.token_blocks;
  if (!k.live) return k;
  k.tb = tb;
  k.n = block_layout::block_tokens(tb, s.tokens, s.block_size);
  k.b = static_cast<int>(block_layout::block_of(tb * s.block_size, h, s.heads, s.block_size));
  if constexpr (kHuffman) {
    const std::uint64_t first = s.block_offsets[k.b];
    const std::uint64_t end = k.b + 1 < s.blocks ? s.block_offsets[k.b + 1] : s.payload_bytes;
    k.window = word_stream::stage_window(first, end, s.payload_words, P::kStageWords);
  }
  return k;
}

// The group's threads copy its window of the payload to `stage` (16-byte aligned): whole 16-byte
// words, then the last few words one at a time.
__device__ __forceinline__ void stage_words(std::uint32_t* stage, const word_stream::StageWindow& w,
                                            const std::uint32_t* payload, int t) {
  const std::uint32_t quads = w.count / 4;
  const uint4* src = reinterpret_cast<const uint4*>(payload + w.base);
  uint4* dst = reinterpret_cast<uint4*>(stage);
  for (std::uint32_t k = t; k < quads; k += P::kVectors) dst[k] = __ldg(src + k);
  for (std::uint32_t k = 4 * quads + t; k < w.count; k += P::kVectors) {
    stage[k] = __ldg(payload + w.base + k);
  }
}

// The exclusive prefix sum of `bits` over the thread's group, and the group's total. Every thread
// of the CUDA block calls it: it synchronises the block. `totals` (shared, a word per warp) must
// not be written again before the next barrier.
__device__ __forceinline__ std::uint32_t group_scan(std::uint32_t bits, std::uint32_t* totals,
                                                    std::uint32_t& group_total) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  std::uint32_t incl = bits;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const std::uint32_t v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) totals[warp] = incl;
  __syncthreads();
  const int first = warp - warp % kWarpsPerGroup;
  std::uint32_t before = 0, total = 0;
#pragma unroll
  for (int k = 0; k < kWarpsPerGroup; ++k) {
    const std::uint32_t w = totals[first + k];
    before += first + k < warp ? w : 0u;
    total += w;
  }
  group_total = total;
  return before + incl - bits;
}

// Where vector i (< n) of the group's codec block starts, for every thread at once (Huffman: the
// block's offset, the bits of its vectors decoded in earlier rounds (`carry`) and the scan of
// this round's; bit-packed: from the shape). Every thread of the CUDA block calls it.
template <bool kHuffman>
__device__ __forceinline__ std::uint64_t vector_start(const StreamArgs& s, const GroupBlock& k,
                                                      int h, int i, std::uint32_t& carry,
                                                      std::uint32_t& bits, std::uint32_t* totals) {
  if constexpr (kHuffman) {
    const std::uint64_t v0 =
        k.live ? block_layout::first_vector(k.tb, h, s.heads, s.block_size, k.n) : 0;
    bits = i < k.n ? s.vector_bits[v0 + i] : 0u;
    std::uint32_t total = 0;
    const std::uint32_t start = group_scan(bits, totals, total);
    const std::uint64_t block = k.live ? std::uint64_t{s.block_offsets[k.b]} * 8 : 0;
    const std::uint64_t pos = block + carry + start;
    carry += total;
    return pos;
  } else {
    bits = 0;
    if (!k.live) return 0;
    return 8 * block_layout::bitpack_block_offset(k.tb, h, s.heads, s.block_size, k.n, s.dim,
                                                  s.width) +
           block_layout::bitpack_vector_bit(i, s.dim, s.width);
  }
}

// Decodes one vector's `dim` codes, calling f(c, code) for each (and f(dim, 0), see
// decode_pair_vector). Returns false when the vector is corrupt (a lookup with no code, or a bit
// count other than `bits`). Huffman reads the staged window from shared memory and the rest of
// the stream from global memory.
template <bool kHuffman, int kWidth, class F>
__device__ __forceinline__ bool decode_vector(const StreamArgs& s, const std::uint32_t* table,
                                              const std::uint32_t* stage,
                                              const word_stream::StageWindow& window,
                                              std::uint64_t pos, std::uint32_t bits, F&& f) {
  if constexpr (kHuffman) {
    word_stream::WordReader<Staged> r(Staged{stage, LdgWords{s.payload}, window.base, window.count},
                                      s.payload_words, pos);
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
    word_stream::WordReader<LdgWords> r(LdgWords{s.payload}, s.payload_words, pos);
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

// Adds each warp's sum of v[j] into target[j] (shared).
template <int G>
__device__ __forceinline__ void warp_add(const float* v, float* target) {
#pragma unroll
  for (int j = 0; j < G; ++j) {
    float x = v[j];
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(&target[j], x);
  }
}

// Dynamic shared memory of one group: the logits kernel's query (G * (dim + 1) floats, the
// channel past the end zero) or the values kernel's code tile, then the staged stream words.
__host__ __device__ inline std::size_t logits_group_bytes(bool huffman, int dim, int G) {
  return align16(sizeof(float) * G * (dim + 1)) +
         (huffman ? sizeof(std::uint32_t) * P::kStageWords : 0);
}
__host__ __device__ inline std::size_t values_group_bytes(bool huffman, int dim) {
  return align16(static_cast<std::size_t>(P::kVectors) * word_stream::tile_row(dim)) +
         (huffman ? sizeof(std::uint32_t) * P::kStageWords : 0);
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
__global__ void __launch_bounds__(P::kVectors* P::kMaxGroups) logits_kernel(KeyArgs a) {
  __shared__ std::uint32_t table[kHuffman ? 4096 : 1];
  __shared__ float bias[P::kMaxGroups][G];
  __shared__ std::uint32_t totals[P::kMaxGroups * kWarpsPerGroup];
  extern __shared__ __align__(16) std::uint8_t dyn[];
  const StreamArgs& s = a.s;
  const int dim = s.dim;
  const Place me;
  const int groups = static_cast<int>(blockDim.x) / P::kVectors;
  const std::size_t qf_bytes = align16(sizeof(float) * G * (dim + 1));
  std::uint8_t* mine = dyn + me.g * logits_group_bytes(kHuffman, dim, G);
  float* qf = reinterpret_cast<float*>(mine);  // [channel][G]
  std::uint32_t* stage = reinterpret_cast<std::uint32_t*>(mine + qf_bytes);
  if constexpr (kHuffman) {
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) table[i] = s.table[i];
  }
  const int h = blockIdx.y;
  for (int tb0 = blockIdx.x * groups; tb0 < s.token_blocks; tb0 += gridDim.x * groups) {
    const GroupBlock k = group_block<kHuffman>(s, tb0 + me.g, h);
    __syncthreads();  // the last round's query, bias and staged words are no longer read
    if (me.t < G) {
      bias[me.g][me.t] = 0.f;
      qf[dim * G + me.t] = 0.f;  // the zero channel past the end (decode_pair_vector)
    }
    if constexpr (kHuffman) {
      if (k.live) stage_words(stage, k.window, s.payload, me.t);
    }
    __syncthreads();
    float part[G];
#pragma unroll
    for (int g = 0; g < G; ++g) part[g] = 0.f;
    if (k.live) {
      const std::size_t unit = (static_cast<std::size_t>(k.tb) * s.heads + h) * dim;
      for (int c = me.t; c < dim; c += P::kVectors) {
        const float st = a.steps[unit + c] * a.scale, mn = a.mins[unit + c] * a.scale;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float qv = a.q[(static_cast<std::size_t>(h) * G + g) * dim + c];
          qf[c * G + g] = qv * st;
          part[g] += qv * mn;
        }
      }
    }
    warp_add<G>(part, bias[me.g]);
    __syncthreads();
    const int first = k.tb * s.block_size;
    std::uint32_t carry = 0;
    // Rounds of kVectors vectors over the block: the same count in every group, so that every
    // thread meets the barriers.
    for (int i0 = 0; i0 < s.block_size; i0 += P::kVectors) {
      const int i = i0 + me.t;
      std::uint32_t bits = 0;
      const std::uint64_t pos = vector_start<kHuffman>(s, k, h, i, carry, bits, totals);
      if (i < k.n) {
        float acc[G];
#pragma unroll
        for (int g = 0; g < G; ++g) acc[g] = 0.f;
        const bool ok = decode_vector<kHuffman, kWidth>(
            s, table, stage, k.window, pos, bits,
            [&](int c, std::uint32_t code) { fma_group<G>(qf, c, static_cast<float>(code), acc); });
        if (!ok) atomicMin(a.err, k.b + 1);
#pragma unroll
        for (int g = 0; g < G; ++g) {
          a.logits[(static_cast<std::size_t>(h) * G + g) * s.tokens + first + i] =
              acc[g] + bias[me.g][g];
        }
      }
      if constexpr (kHuffman) __syncthreads();  // the scan's totals are written again
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
__global__ void __launch_bounds__(P::kVectors* P::kMaxGroups) values_kernel(ValueArgs a) {
  // Thread t of a group owns channel pairs (2t, 2t+1) and (2t + 2*kVectors, ...): one 2-byte tile
  // read per row serves both channels of a pair.
  constexpr int kPairs = kMaxFusedHeadDim / (2 * P::kVectors);
  __shared__ std::uint32_t table[kHuffman ? 4096 : 1];
  __shared__ __align__(16) float w[P::kMaxGroups][P::kVectors * G];  // [row][G]: weight * step
  __shared__ float bias[P::kMaxGroups][G];
  __shared__ std::uint32_t totals[P::kMaxGroups * kWarpsPerGroup];
  extern __shared__ __align__(16) std::uint8_t dyn[];
  const StreamArgs& s = a.s;
  const int dim = s.dim;
  const int row = word_stream::tile_row(dim);
  const Place me;
  const int groups = static_cast<int>(blockDim.x) / P::kVectors;
  std::uint8_t* mine = dyn + me.g * values_group_bytes(kHuffman, dim);
  std::uint8_t* tile = mine;  // kVectors rows of word_stream::tile_row(dim) bytes
  std::uint32_t* stage =
      reinterpret_cast<std::uint32_t*>(mine + align16(static_cast<std::size_t>(P::kVectors) * row));
  if constexpr (kHuffman) {
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) table[i] = s.table[i];
  }
  if (me.t < G) bias[me.g][me.t] = 0.f;
  const int h = blockIdx.y;
  float acc[kPairs][2][G];
  float bsum[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    bsum[g] = 0.f;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) acc[j][0][g] = acc[j][1][g] = 0.f;
  }
  std::uint8_t* my_row = tile + me.t * row;
  for (int tb0 = blockIdx.x * groups; tb0 < s.token_blocks; tb0 += gridDim.x * groups) {
    const GroupBlock k = group_block<kHuffman>(s, tb0 + me.g, h);
    // Every decode of the last round ended before its last barrier, so the stage is free.
    if constexpr (kHuffman) {
      if (k.live) stage_words(stage, k.window, s.payload, me.t);
    }
    const int first = k.tb * s.block_size;
    std::uint32_t carry = 0;
    for (int i0 = 0; i0 < s.block_size; i0 += P::kVectors) {
      __syncthreads();  // the previous tile has been read; the staged words are in place
      const int i = i0 + me.t;
      std::uint32_t bits = 0;
      const std::uint64_t pos = vector_start<kHuffman>(s, k, h, i, carry, bits, totals);
      if (i < k.n) {
        const std::size_t th = static_cast<std::size_t>(first + i) * s.heads + h;
        const float st = a.steps[th], mn = a.mins[th];
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float p = a.probs[(static_cast<std::size_t>(h) * G + g) * s.tokens + first + i];
          w[me.g][me.t * G + g] = p * st;
          bsum[g] = fmaf(p, mn, bsum[g]);
        }
        const bool ok = decode_vector<kHuffman, kWidth>(
            s, table, stage, k.window, pos, bits,
            [&](int c, std::uint32_t code) { my_row[c] = static_cast<std::uint8_t>(code); });
        if (!ok) atomicMin(a.err, k.b + 1);
      }
      if (dim & 1) my_row[dim] = 0;  // the odd channel's partner in the last pair
      __syncthreads();
      const int m = k.live ? max(0, min(P::kVectors, k.n - i0)) : 0;
      const float* wg = w[me.g];
#pragma unroll
      for (int j = 0; j < kPairs; ++j) {
        const int c = 2 * (me.t + j * P::kVectors);
        if (c < dim) {
          for (int r = 0; r < m; ++r) {
            const std::uint32_t two = *reinterpret_cast<const std::uint16_t*>(tile + r * row + c);
            const float x0 = static_cast<float>(two & 255u), x1 = static_cast<float>(two >> 8);
            fma_group<G>(wg + r * G, 0, x0, acc[j][0]);
            fma_group<G>(wg + r * G, 0, x1, acc[j][1]);
          }
        }
      }
    }
  }
  // The minimums' share: sum_t p * min_t, the same for every channel of a query head.
  warp_add<G>(bsum, bias[me.g]);
  __syncthreads();
#pragma unroll
  for (int j = 0; j < kPairs; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int c = 2 * (me.t + j * P::kVectors) + e;
      if (c < dim) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
          atomicAdd(&a.out[(static_cast<std::size_t>(h) * G + g) * dim + c],
                    acc[j][e][g] + bias[me.g][g]);
        }
      }
    }
  }
}

template <template <bool, int, int> class Launch, class Args>
cudaError_t dispatch(CodecKind kind, int width, int group, const Args& args, cudaStream_t stream) {
  auto by_group = [&](auto huff, auto w) -> cudaError_t {
    constexpr bool H = decltype(huff)::value;
    constexpr int W = decltype(w)::value;
    switch (group) {
      case 1:
        return Launch<H, W, 1>::run(args, stream);
      case 2:
        return Launch<H, W, 2>::run(args, stream);
      case 4:
        return Launch<H, W, 4>::run(args, stream);
      case 8:
        return Launch<H, W, 8>::run(args, stream);
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

// Groups a CUDA block takes: as many as the shared memory holds, at most kMaxGroups.
template <class K>
int groups_for(K kernel, std::size_t per_group) {
  cudaFuncAttributes attr{};
  if (cudaFuncGetAttributes(&attr, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    attr.sharedSizeBytes = kTableBytes;
  }
  return units_that_fit(attr.sharedSizeBytes, per_group, P::kMaxGroups);
}

// `kernel` over the codec blocks, as many groups a CUDA block as fit `per_group` bytes each;
// `resident` and `opted` are the kernel's own (one pair per instantiation).
template <class K, class Args>
cudaError_t launch_groups(K kernel, const Args& a, std::size_t per_group, int& resident,
                          std::size_t& opted, cudaStream_t stream) {
  const int groups = groups_for(kernel, per_group);
  return launch_over_blocks(kernel, a, groups, P::kVectors, per_group * std::max(groups, 1),
                            a.s.token_blocks, a.s.heads, resident, opted, stream);
}

template <bool H, int W, int G>
struct LogitsLaunch {
  static cudaError_t run(const KeyArgs& a, cudaStream_t stream) {
    static int resident = 0;
    static std::size_t opted = 0;
    return launch_groups(logits_kernel<H, W, G>, a, logits_group_bytes(H, a.s.dim, G), resident,
                         opted, stream);
  }
};
template <bool H, int W, int G>
struct ValuesLaunch {
  static cudaError_t run(const ValueArgs& a, cudaStream_t stream) {
    static int resident = 0;
    static std::size_t opted = 0;
    return launch_groups(values_kernel<H, W, G>, a, values_group_bytes(H, a.s.dim), resident, opted,
                         stream);
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
  return dispatch<LogitsLaunch>(g.codec, g.keys.width, group, a, stream);
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
  return dispatch<ValuesLaunch>(g.codec, g.values.width, group, a, stream);
}

namespace {

Status check_call(const GpuLayer& layer, std::size_t in, std::size_t out, int q_heads,
                  std::size_t in_per_head, std::size_t out_per_head, const char* what) {
  const GpuLayer::Impl& g = layer.impl();
  const std::string w(what);
  KVLAB_TRY_STATUS(check::query_heads(w, q_heads, g.kv_heads));
  const int group = q_heads / g.kv_heads;
  KVLAB_TRY_STATUS(check::group(w, group, supported_group(group), "1, 2, 4, 8"));
  if (g.head_dim > kMaxFusedHeadDim) {
    return make_error(w + ": head_dim " + std::to_string(g.head_dim) +
                      " is larger than the GPU kernels' " + std::to_string(kMaxFusedHeadDim));
  }
  KVLAB_TRY_STATUS(check::io(w, in, static_cast<std::size_t>(q_heads) * in_per_head, out,
                             static_cast<std::size_t>(q_heads) * out_per_head));
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
