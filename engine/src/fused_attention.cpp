// Attention straight from KVComp's compressed streams (Jiang et al. 2025, Sec. 4). Each symbol is
// one table lookup on a 64-bit bit window (docs/FORMAT.md, "Decoding"); four vectors of a block
// decode interleaved, a chunk of 32 codes at a time into a register-sized array, where they are
// dequantized (x = min + code * step) and folded into every query head of the GQA group. No
// decoded vector, let alone a decoded cache, is ever stored. Every vector must consume exactly
// its stored bit count and every lookup must hit a code; anything else is a corrupt stream.
#include "kvlab/engine/fused_attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "attention_common.h"

namespace kvlab {

namespace {

static_assert(std::endian::native == std::endian::little,
              "the bit window reads little-endian u64 words (docs/FORMAT.md, Bit order)");

// Decoded codes go to a chunk of kChunk floats per stream (a few vector registers), so the
// serial decoder and the SIMD arithmetic over the GQA group are separate loops.
constexpr int kChunk = 32;
// The vectors of a block are independent bit streams (KVComp Sec. 3.3): kLanes of them decode
// interleaved so their table lookups overlap instead of waiting on one another.
constexpr int kLanes = 4;
// Query heads per KV head the general kernels hold accumulators for.
constexpr int kMaxGroup = 32;

// The stream bits from `pos` on, LSB = next bit: at least 57 valid ones (docs/FORMAT.md,
// "Decoding"). Bytes past the payload's end read as zero, so a corrupt stream never reads out of
// bounds; the bit count check at the end of each vector then reports it.
inline std::uint64_t load_bits(const std::uint8_t* data, std::size_t size, std::uint64_t pos) {
  const std::uint64_t byte = pos >> 3;
  std::uint64_t w = 0;
  if (byte + 8 <= size) [[likely]] {
    std::memcpy(&w, data + byte, 8);
  } else {
    for (std::uint64_t k = 0; byte + k < size && k < 8; ++k) {
      w |= static_cast<std::uint64_t>(data[byte + k]) << (8 * k);
    }
  }
  return w >> (pos & 7);
}

// One stream's decoding state: position, bit window and how many window bits are valid.
struct Stream {
  std::uint64_t pos = 0, win = 0;
  int avail = 0;
};

struct Payload {
  const std::uint8_t* data;
  std::size_t size;
};

inline void refill(const Payload& p, std::uint64_t pos, std::uint64_t& win, int& avail) {
  win = load_bits(p.data, p.size, pos);
  avail = 64 - static_cast<int>(pos & 7);
}

// Decodes n Huffman symbols from each of L streams into out[j][0..n). One 12-bit lookup per
// symbol; the escape (symbol 256) carries the value in the next 8 raw bits. A lookup that hits
// no code sets `invalid` and consumes nothing, which the bit count check also catches.
template <int L>
inline void huffman_chunk(const Payload& p, const std::uint16_t* table, Stream* st,
                          float (*out)[kChunk], int n, std::uint32_t& invalid) {
  std::uint64_t pos[L], win[L];
  int avail[L];
  for (int j = 0; j < L; ++j) {
    pos[j] = st[j].pos;
    win[j] = st[j].win;
    avail[j] = st[j].avail;
  }
  std::uint32_t bad = 0;
  for (int i = 0; i < n; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < L; ++j) {
      if (avail[j] < HuffmanCodebook::kMaxCodeLength + 8) refill(p, pos[j], win[j], avail[j]);
      const std::uint32_t e = table[win[j] & (HuffmanCodebook::kTableSize - 1)];
      bad |= e == 0;
      const int len = static_cast<int>(e >> 9);
      win[j] >>= len;
      avail[j] -= len;
      pos[j] += static_cast<std::uint64_t>(len);
      std::uint32_t sym = e & 511u;
      if (sym == HuffmanCodebook::kEscape) [[unlikely]] {
        sym = static_cast<std::uint32_t>(win[j] & 255u);
        win[j] >>= 8;
        avail[j] -= 8;
        pos[j] += 8;
      }
      out[j][i] = static_cast<float>(sym);
    }
  }
  for (int j = 0; j < L; ++j) st[j] = Stream{pos[j], win[j], avail[j]};
  invalid |= bad;
}

// Fixed-width codes, LSB-first (engine/src/bitpack.h's packing). 4-bit codes on a byte boundary
// (every chunk when dim is even) are read two per byte without the bit window; in bounds because
// validate_encoded checked that the payload holds every block exactly.
inline void packed_chunk(const Payload& p, int width, Stream& s, float* out, int n) {
  if (width == 4 && (s.pos & 7) == 0 && n % 2 == 0) {
    const std::uint8_t* b = p.data + (s.pos >> 3);
#pragma omp simd
    for (int j = 0; j < n / 2; ++j) {
      out[2 * j] = static_cast<float>(b[j] & 15u);
      out[2 * j + 1] = static_cast<float>(b[j] >> 4);
    }
    s.pos += static_cast<std::uint64_t>(n) * 4;
    s.avail = 0;  // the window is stale: reload on the next generic read
    return;
  }
  const std::uint64_t mask = (1u << width) - 1u;
  for (int i = 0; i < n; ++i) {
    if (s.avail < width) refill(p, s.pos, s.win, s.avail);
    out[i] = static_cast<float>(s.win & mask);
    s.win >>= width;
    s.avail -= width;
    s.pos += static_cast<std::uint64_t>(width);
  }
}

std::size_t ceil_div(std::size_t a, std::size_t b) {
  return (a + b - 1) / b;
}

// Walks every block of `e` in block order, kLanes vectors at a time; for each vector the kernel
// gets begin(lane, token, head), chunk(lane, first channel, count, codes) for each chunk of
// channels, and end(lane) once the vector consumed exactly its stored bit count.
template <class Kernel>
Status run_blocks(const EncodedCodes& e, const HuffmanCodebook* book, Kernel& kernel,
                  const char* what) {
  const Payload payload{e.payload.data(), e.payload.size()};
  const bool packed = e.kind == CodecKind::BitPack;
  const std::uint16_t* table = packed ? nullptr : book->decode_table();
  const std::size_t B = static_cast<std::size_t>(e.block_size);
  const std::size_t dim = static_cast<std::size_t>(e.dim);
  const std::size_t width = static_cast<std::size_t>(e.bitpack_width);
  const std::size_t full_block_bytes = packed ? ceil_div(B * dim * width, 8) : 0;
  alignas(32) float x[kLanes][kChunk];
  for (int tb = 0; tb < e.token_blocks(); ++tb) {
    const int first = tb * e.block_size;
    const int n = std::min(e.block_size, e.tokens - first);
    for (int h = 0; h < e.heads; ++h) {
      const std::size_t b = static_cast<std::size_t>(tb) * e.heads + h;
      const std::size_t first_vector =
          static_cast<std::size_t>(tb) * e.heads * B + static_cast<std::size_t>(h) * n;
      std::uint64_t bit = packed
                              ? 8 * (static_cast<std::uint64_t>(tb) * e.heads * full_block_bytes +
                                     h * ceil_div(static_cast<std::size_t>(n) * dim * width, 8))
                              : 8 * static_cast<std::uint64_t>(e.block_offsets[b]);
      for (int i0 = 0; i0 < n; i0 += kLanes) {
        const int m = std::min(kLanes, n - i0);
        Stream st[kLanes];
        std::uint64_t start[kLanes], len[kLanes];
        for (int j = 0; j < m; ++j) {
          len[j] = packed ? dim * width : e.vector_bits[first_vector + i0 + j];
          start[j] = bit;
          st[j].pos = bit;
          refill(payload, bit, st[j].win, st[j].avail);
          bit += len[j];
          kernel.begin(j, first + i0 + j, h);
        }
        std::uint32_t invalid = 0;
        for (int c0 = 0; c0 < e.dim; c0 += kChunk) {
          const int nc = std::min(kChunk, e.dim - c0);
          if (packed) {
            for (int j = 0; j < m; ++j) packed_chunk(payload, e.bitpack_width, st[j], x[j], nc);
          } else if (m == kLanes) {
            huffman_chunk<kLanes>(payload, table, st, x, nc, invalid);
          } else {
            for (int j = 0; j < m; ++j)
              huffman_chunk<1>(payload, table, &st[j], &x[j], nc, invalid);
          }
          for (int j = 0; j < m; ++j) kernel.chunk(j, c0, nc, x[j]);
        }
        for (int j = 0; j < m; ++j) {
          if (invalid != 0 || st[j].pos - start[j] != len[j]) [[unlikely]] {
            return make_error(fmt::format(
                "fused attention: corrupt {} stream in block {} (tokens from {}, head {}), "
                "vector {}: {}",
                what, b, first, h, i0 + j,
                invalid != 0
                    ? std::string("bits that start no code")
                    : fmt::format("{} bits decoded, {} stored", st[j].pos - start[j], len[j])));
          }
          kernel.end(j);
        }
      }
    }
  }
  return Ok{};
}

// q . x / sqrt(d) for each query head of the group, x = min + code * step per channel (keys are
// quantized per channel over a block, KVComp Sec. 3.2). G > 0 fixes the group size at compile
// time so the accumulators stay in registers; G == 0 takes it from `group`.
template <int G>
struct KeyLogitKernel {
  static constexpr int kG = G > 0 ? G : kMaxGroup;
  const float* q;
  int group, dim, heads, tokens, block;
  float scale;
  const float* steps;
  const float* mins;
  float* logits;
  // Lane-wise partial sums over channels, reduced once per vector in end(): one horizontal sum
  // per (vector, query head) instead of one per chunk.
  alignas(32) float part[kLanes][kG][kChunk] = {};
  int token[kLanes] = {};
  int head = 0;
  const float* st = nullptr;
  const float* mn = nullptr;

  int ng() const { return G > 0 ? G : group; }
  void begin(int j, int t, int h) {
    token[j] = t;
    head = h;  // every lane of a call is in the same block: one head, one set of steps
    const std::size_t unit = (static_cast<std::size_t>(t / block) * heads + h) * dim;
    st = steps + unit;
    mn = mins + unit;
    for (int g = 0; g < ng(); ++g) std::fill_n(part[j][g], kChunk, 0.f);
  }
  void chunk(int j, int c0, int n, float* x) {
#pragma omp simd
    for (int i = 0; i < n; ++i) x[i] = mn[c0 + i] + x[i] * st[c0 + i];
    const float* qh = q + static_cast<std::size_t>(head) * ng() * dim + c0;
    for (int g = 0; g < ng(); ++g) {
      const float* qg = qh + static_cast<std::size_t>(g) * dim;
      float* pg = part[j][g];
#pragma omp simd
      for (int i = 0; i < n; ++i) pg[i] += qg[i] * x[i];
    }
  }
  void end(int j) {
    for (int g = 0; g < ng(); ++g) {
      float a = 0.f;
#pragma omp simd reduction(+ : a)
      for (int i = 0; i < kChunk; ++i) a += part[j][g][i];
      logits[(static_cast<std::size_t>(head) * ng() + g) * tokens + token[j]] = a * scale;
    }
  }
};

// out += p * x for each query head of the group, x = min + code * step (values are quantized
// per token, KVComp Sec. 3.2).
template <int G>
struct ValueSumKernel {
  static constexpr int kG = G > 0 ? G : kMaxGroup;
  const float* probs;
  int group, dim, heads, tokens;
  const float* steps;
  const float* mins;
  float* out;
  float p[kLanes][kG] = {};
  float st[kLanes] = {}, mn[kLanes] = {};
  int head = 0;

  int ng() const { return G > 0 ? G : group; }
  void begin(int j, int t, int h) {
    head = h;
    const std::size_t unit = static_cast<std::size_t>(t) * heads + h;
    st[j] = steps[unit];
    mn[j] = mins[unit];
    for (int g = 0; g < ng(); ++g) {
      p[j][g] = probs[(static_cast<std::size_t>(h) * ng() + g) * tokens + t];
    }
  }
  void chunk(int j, int c0, int n, float* x) {
    const float s = st[j], m = mn[j];
#pragma omp simd
    for (int i = 0; i < n; ++i) x[i] = m + x[i] * s;
    float* oh = out + static_cast<std::size_t>(head) * ng() * dim + c0;
    for (int g = 0; g < ng(); ++g) {
      float* o = oh + static_cast<std::size_t>(g) * dim;
      const float pg = p[j][g];
#pragma omp simd
      for (int i = 0; i < n; ++i) o[i] += pg * x[i];
    }
  }
  void end(int) {}
};

// Group sizes of common GQA models get their own instantiation; others (up to kMaxGroup) the
// general one.
template <template <int> class Kernel, class... Args>
Status run_grouped(int group, const EncodedCodes& e, const HuffmanCodebook* book, const char* what,
                   Args... args) {
  auto run = [&](auto kernel) { return run_blocks(e, book, kernel, what); };
  switch (group) {
    case 1:
      return run(Kernel<1>{args...});
    case 2:
      return run(Kernel<2>{args...});
    case 4:
      return run(Kernel<4>{args...});
    case 8:
      return run(Kernel<8>{args...});
    default:
      return run(Kernel<0>{args...});
  }
}

Status check_encoded(const EncodedCodes* e, const HuffmanCodebook* book, const CompressedKvView& v,
                     const char* what) {
  if (e == nullptr) return make_error(fmt::format("fused attention: no {} codes", what));
  if (e->tokens != v.compressed_tokens || e->heads != v.kv_heads || e->dim != v.head_dim ||
      e->block_size != v.block_size) {
    return make_error(fmt::format(
        "fused attention: {} codes [{}, {}, {}] in blocks of {} do not match the cache's [{}, {}, "
        "{}] in blocks of {}",
        what, e->tokens, e->heads, e->dim, e->block_size, v.compressed_tokens, v.kv_heads,
        v.head_dim, v.block_size));
  }
  if (e->kind == CodecKind::Huffman && book == nullptr) {
    return make_error(fmt::format("fused attention: {} codes need a codebook", what));
  }
  if (e->kind == CodecKind::VarWidth) {
    return make_error(fmt::format("fused attention: {} codes: varwidth is not supported", what));
  }
  if (Status st = validate_encoded(*e); !st) {
    return make_error(fmt::format("fused attention: {} codes: {}", what, st.message()));
  }
  return Ok{};
}

Status check_view(const CompressedKvView& v, int q_heads) {
  if (v.kv_heads < 1 || v.head_dim < 1 || v.block_size < 1 || v.compressed_tokens < 0 ||
      v.buffered_tokens < 0) {
    return make_error("fused attention: the cache view has no valid shape");
  }
  if (q_heads < 1 || q_heads % v.kv_heads != 0 || q_heads / v.kv_heads > kMaxGroup) {
    return make_error(fmt::format(
        "fused attention: {} query heads are not a multiple of {} KV heads with at most {} per "
        "group",
        q_heads, v.kv_heads, kMaxGroup));
  }
  if (v.tokens() == 0) return make_error("fused attention: the cache holds no tokens");
  const std::size_t hd = static_cast<std::size_t>(v.kv_heads) * v.head_dim;
  if (v.buffer_keys.size() != static_cast<std::size_t>(v.buffered_tokens) * hd ||
      v.buffer_values.size() != static_cast<std::size_t>(v.buffered_tokens) * hd) {
    return make_error(
        fmt::format("fused attention: the buffer holds {} key and {} value halves, "
                    "{} tokens need {} each",
                    v.buffer_keys.size(), v.buffer_values.size(), v.buffered_tokens,
                    static_cast<std::size_t>(v.buffered_tokens) * hd));
  }
  if (v.compressed_tokens == 0) return Ok{};
  if (Status st = check_encoded(v.keys, v.key_book, v, "key"); !st) return st;
  if (Status st = check_encoded(v.values, v.value_book, v, "value"); !st) return st;
  const std::size_t key_units = ceil_div(v.compressed_tokens, v.block_size) * hd;
  const std::size_t value_units = static_cast<std::size_t>(v.compressed_tokens) * v.kv_heads;
  if (v.key_steps.size() != key_units || v.key_mins.size() != key_units ||
      v.value_steps.size() != value_units || v.value_mins.size() != value_units) {
    return make_error(fmt::format(
        "fused attention: {} key and {} value steps given, {} compressed tokens need {} and {}",
        v.key_steps.size(), v.value_steps.size(), v.compressed_tokens, key_units, value_units));
  }
  return Ok{};
}

}  // namespace

Status fused_attention_logits(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                              std::span<float> logits) {
  if (Status st = check_view(cache, q_heads); !st) return st;
  const int T = cache.tokens(), dim = cache.head_dim, group = q_heads / cache.kv_heads;
  if (Status st = detail::check_sizes("fused attention logits", q.size(),
                                      static_cast<std::size_t>(q_heads) * dim, logits.size(),
                                      static_cast<std::size_t>(q_heads) * T);
      !st) {
    return st;
  }
  const float scale = 1.f / std::sqrt(static_cast<float>(dim));
  if (cache.compressed_tokens > 0) {
    if (Status st = run_grouped<KeyLogitKernel>(
            group, *cache.keys, cache.key_book, "key", q.data(), group, dim, cache.kv_heads, T,
            cache.block_size, scale, cache.key_steps.data(), cache.key_mins.data(), logits.data());
        !st) {
      return st;
    }
  }
  detail::fp16_rows_logits(cache.buffer_keys, cache.compressed_tokens, cache.buffered_tokens,
                           cache.kv_heads, dim, group, q.data(), scale, T, logits.data());
  return Ok{};
}

Status fused_attention_values(const CompressedKvView& cache, std::span<const float> probs,
                              int q_heads, std::span<float> out) {
  if (Status st = check_view(cache, q_heads); !st) return st;
  const int T = cache.tokens(), dim = cache.head_dim, group = q_heads / cache.kv_heads;
  if (Status st = detail::check_sizes("fused attention values", probs.size(),
                                      static_cast<std::size_t>(q_heads) * T, out.size(),
                                      static_cast<std::size_t>(q_heads) * dim);
      !st) {
    return st;
  }
  std::fill(out.begin(), out.end(), 0.f);
  if (cache.compressed_tokens > 0) {
    if (Status st = run_grouped<ValueSumKernel>(
            group, *cache.values, cache.value_book, "value", probs.data(), group, dim,
            cache.kv_heads, T, cache.value_steps.data(), cache.value_mins.data(), out.data());
        !st) {
      return st;
    }
  }
  detail::fp16_rows_values(cache.buffer_values, cache.compressed_tokens, cache.buffered_tokens,
                           cache.kv_heads, dim, group, probs.data(), T, out.data());
  return Ok{};
}

Status fused_attention(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                       std::span<float> out, std::vector<float>& scratch) {
  scratch.resize(static_cast<std::size_t>(std::max(q_heads, 0)) *
                 static_cast<std::size_t>(cache.tokens()));
  if (Status st = fused_attention_logits(cache, q, q_heads, scratch); !st) return st;
  softmax_rows(scratch, q_heads);
  return fused_attention_values(cache, scratch, q_heads, out);
}

}  // namespace kvlab
