// A warp decoding one rANS block (docs/FORMAT.md, "rANS streams"), one state per lane, the
// attention that reads the decoded codes, and the warp encoder that writes such a block, written
// once for the CUDA kernels (kernels/src/rans_attention.cu) and for the CPU, where
// tests/engine/test_rans_warp.cpp runs the same code with 32 threads standing in for the lanes (a
// Warp whose ballot and shuffle meet at a barrier). The warp shape follows the format: symbol k of
// a block is lane k mod 32's, so a round is one symbol per lane, and the words a round needs are
// taken in lane order, each lane's index a popcount of the lanes below it that need one (the
// ballot; nvCOMP's `states_per_lane` and DietGPU's ANS decoders read their words the same way).
//
// A Warp supplies: lane(); ballot(bool) -> u32 mask of the lanes passing true; shfl(u32 v, src
// lane); shfl_xor(float, lane mask); all(bool); sync() (a warp barrier for shared memory);
// load(const u32*) (a read-only global load). Every call is made by all 32 lanes together.
//
// Words come through a register window: each lane holds one aligned 32-bit word of the next 64
// 16-bit words and one of the 64 after them (two coalesced 128-byte loads), a needed word is
// shuffled from the lane holding it, and the window moves on by 64 words, loading the next 128
// bytes, as soon as the block's read position leaves its first half: a load is issued a few
// rounds before its words are read.
//
// Decoded codes go to a tile in shared memory, a row of tile_row(dim) bytes for each of kChunk
// tokens; every kChunk tokens the warp hands the tile to a consumer (the dot products with the
// query, or the softmax-weighted sum of values) and goes on decoding. A chunk's symbols are kChunk
// * S, a whole number of rounds, so no round straddles two chunks.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kvlab/engine/codec/word_stream.h"
#include "kvlab/engine/core/host_device.h"

#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

namespace kvlab::rans_warp {

inline constexpr int kLanes = 32;
inline constexpr std::uint32_t kLow = 1u << 16;  // states live in [2^16, 2^32)
inline constexpr int kProbBits = 12;
inline constexpr std::uint32_t kSlotMask = (1u << kProbBits) - 1u;
inline constexpr std::uint64_t kStateBytes = 4 * kLanes;
inline constexpr int kChunk = kLanes;    // tokens handed to the consumer at a time (whole rounds)
inline constexpr int kWindowWords = 64;  // 16-bit words in a lane-word window (32 lanes x 2)
// Channels a lane owns in the values consumer: pairs (2 * (lane + 32 k), + 1), k < kMaxPairs.
inline constexpr int kMaxHeadDim = 256;
inline constexpr int kMaxPairs = kMaxHeadDim / (2 * kLanes);

// RansTable::slot_table() entry: symbol | frequency << 8 | (slot - cumulative) << 20.
KVLAB_HOST_DEVICE constexpr std::uint32_t slot_entry(std::uint32_t symbol, std::uint32_t frequency,
                                                     std::uint32_t offset) {
  return symbol | (frequency << 8) | (offset << 20);
}
KVLAB_HOST_DEVICE constexpr std::uint32_t entry_symbol(std::uint32_t e) {
  return e & 255u;
}
KVLAB_HOST_DEVICE constexpr std::uint32_t entry_frequency(std::uint32_t e) {
  return (e >> 8) & kSlotMask;
}
KVLAB_HOST_DEVICE constexpr std::uint32_t entry_offset(std::uint32_t e) {
  return e >> 20;
}
// The symbol step: x = f * (x >> 12) + slot - c, with slot = x mod 4096 the entry's index.
KVLAB_HOST_DEVICE constexpr std::uint32_t decode_step(std::uint32_t x, std::uint32_t e) {
  return entry_frequency(e) * (x >> kProbBits) + entry_offset(e);
}

// Symbols per vector: dim codes, or ceil(dim / 2) pairs (low nibble first).
KVLAB_HOST_DEVICE constexpr int symbols_per_vector(int dim, bool pairs) {
  return pairs ? (dim + 1) / 2 : dim;
}
// Bytes per tile row (word_stream.h's rule, shared with the Huffman kernels).
using word_stream::tile_row;

KVLAB_HOST_DEVICE inline int popc(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  return std::popcount(v);
#endif
}
KVLAB_HOST_DEVICE inline std::uint32_t load32(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const std::uint32_t*>(p);
#else
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
KVLAB_HOST_DEVICE inline std::uint32_t load16(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const std::uint16_t*>(p);
#else
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}
KVLAB_HOST_DEVICE inline void store16(std::uint8_t* p, std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<std::uint16_t*>(p) = static_cast<std::uint16_t>(v);
#else
  const auto w = static_cast<std::uint16_t>(v);
  std::memcpy(p, &w, 2);
#endif
}

// One block of a stream and where its codes go.
struct Block {
  const std::uint32_t* payload = nullptr;  // the tensor's payload as little-endian words
  std::uint64_t payload_words = 0;         // words readable at `payload`
  std::uint64_t begin = 0, end = 0;        // the block's bytes (validate_encoded() checked them)
  int tokens = 0, dim = 0;
  bool pairs = false;
  const std::uint32_t* slots = nullptr;  // the table's 4096 slot entries
  std::uint32_t escape_start = 4096;     // slots from here decode the escape
  std::uint8_t* tile = nullptr;          // kChunk rows of tile_row(dim) bytes
};

// The lane's word `rel` 16-bit words past the window's start (rel < 128), from the window's two
// halves; every lane takes part, whatever its rel.
template <class Warp>
KVLAB_HOST_DEVICE inline std::uint32_t window_word(Warp& w, std::uint32_t cur, std::uint32_t next,
                                                   std::uint64_t rel) {
  const int src = static_cast<int>((rel >> 1) & 31u);
  const std::uint32_t a = w.shfl(cur, src);
  const std::uint32_t b = w.shfl(next, src);
  const std::uint32_t v = rel < static_cast<std::uint64_t>(kWindowWords) ? a : b;
  return (rel & 1u) ? v >> 16 : v & 0xffffu;
}

// Decodes block `a`, calling consume(w, first, count) for every kChunk tokens (the last chunk may
// be short) once their rows are in the tile: token first + t in row t. True when the block decodes
// cleanly: no word read past its end, every word read, every lane back at 2^16. Warp-uniform.
template <class Warp, class Consume>
KVLAB_HOST_DEVICE bool decode_block(Warp& w, const Block& a, Consume& consume) {
  const int lane = w.lane();
  const int S = symbols_per_vector(a.dim, a.pairs);
  const std::uint64_t count = static_cast<std::uint64_t>(a.tokens) * static_cast<std::uint64_t>(S);
  const std::uint64_t nwords = (a.end - a.begin - kStateBytes) / 2;
  const std::uint64_t last = a.payload_words - 1;
  auto word32 = [&](std::uint64_t i) { return w.load(a.payload + (i < last ? i : last)); };

  // The lane's start state, at an even byte offset (blocks are 128 + 2 * words bytes).
  std::uint32_t x;
  {
    const std::uint64_t at = a.begin + 4u * static_cast<std::uint64_t>(lane);
    x = (at & 3u) == 0 ? word32(at >> 2) : (word32(at >> 2) >> 16) | (word32((at >> 2) + 1) << 16);
  }
  // Word idx of the block is 16-bit word g0 + idx of the payload; the window starts at W.
  const std::uint64_t g0 = (a.begin + kStateBytes) / 2;
  std::uint64_t W = g0 & ~static_cast<std::uint64_t>(kWindowWords - 1);
  std::uint32_t cur = word32(W / 2 + static_cast<std::uint64_t>(lane));
  std::uint32_t next = word32(W / 2 + kLanes + static_cast<std::uint64_t>(lane));
  std::uint64_t pos = 0;
  const std::uint32_t below = (1u << lane) - 1u;  // lane 0: 0

  // The lane's symbol k = 32 r + lane: token i of the block, symbol j of its vector.
  int i = lane / S, j = lane % S;
  const int step_tokens = kLanes / S, step_symbols = kLanes % S;
  std::uint64_t k0 = 0;
  bool ok = true;
  for (int c0 = 0; c0 < a.tokens && ok; c0 += kChunk) {
    const int m = a.tokens - c0 < kChunk ? a.tokens - c0 : kChunk;
    const std::uint64_t upto = static_cast<std::uint64_t>(c0 + m) * static_cast<std::uint64_t>(S);
    while (k0 < upto) {
      const bool active = k0 + static_cast<std::uint64_t>(lane) < count;
      const std::uint32_t slot = x & kSlotMask;
      const std::uint32_t e = a.slots[slot];
      std::uint32_t sym = entry_symbol(e);
      const bool escape = active && slot >= a.escape_start;
      if (active) x = decode_step(x, e);
      bool need = active && x < kLow;
      std::uint32_t mask = w.ballot(need);
      std::uint32_t word = window_word(w, cur, next, g0 + pos + popc(mask & below) - W);
      if (need) x = (x << 16) | word;
      pos += static_cast<std::uint64_t>(popc(mask));
      // The escapes' raw bytes, in lane order after the symbols.
      if (w.ballot(escape) != 0u) {
        if (escape) {
          sym = x & 255u;
          x >>= 8;
        }
        need = escape && x < kLow;
        mask = w.ballot(need);
        word = window_word(w, cur, next, g0 + pos + popc(mask & below) - W);
        if (need) x = (x << 16) | word;
        pos += static_cast<std::uint64_t>(popc(mask));
      }
      if (pos > nwords) {  // warp-uniform: pos is
        ok = false;
        break;
      }
      if (active) {
        std::uint8_t* r = a.tile + (i & (kChunk - 1)) * tile_row(a.dim);
        if (a.pairs) {
          store16(r + 2 * j, (sym & 15u) | ((sym >> 4) << 8));
        } else {
          r[j] = static_cast<std::uint8_t>(sym);
        }
      }
      if (g0 + pos - W >= static_cast<std::uint64_t>(kWindowWords)) {
        W += kWindowWords;
        cur = next;
        next = word32(W / 2 + kLanes + static_cast<std::uint64_t>(lane));
      }
      i += step_tokens;
      j += step_symbols;
      if (j >= S) {
        j -= S;
        ++i;
      }
      k0 += kLanes;
    }
    if (!ok) break;
    w.sync();
    consume(w, c0, m);
    w.sync();
  }
  return w.all(ok && pos == nwords && x == kLow);
}

// The encoder's table: per symbol s (256 values and the escape), frequency | cumulative << 16.
KVLAB_HOST_DEVICE constexpr std::uint32_t encode_entry(std::uint32_t frequency,
                                                       std::uint32_t cumulative) {
  return frequency | (cumulative << 16);
}

// The symbols of one block: symbol j of vector (token) i is code j, or the pair of codes 2j and
// 2j + 1 as a byte, low nibble first (a vector of odd dim ends in a pair whose second code is 0).
struct BlockCodes {
  const std::uint8_t* codes = nullptr;  // the block's first vector in [token][head][dim] codes
  std::uint64_t token_stride = 0;       // heads * dim
  int dim = 0;
  bool pairs = false;
  KVLAB_HOST_DEVICE std::uint32_t symbol(int i, int j) const {
    const std::uint8_t* v = codes + static_cast<std::uint64_t>(i) * token_stride;
    if (!pairs) return v[j];
    const int c = 2 * j;
    return static_cast<std::uint32_t>(v[c]) |
           (c + 1 < dim ? static_cast<std::uint32_t>(v[c + 1]) << 4 : 0u);
  }
};

// Encodes a block of `tokens` vectors: the format's encoder (docs/FORMAT.md, "Encoding"), rounds
// from last to first, in each the escapes' raw bytes and then the symbols, lanes from 31 down; a
// lane that must emit a word takes its place in that order from the ballot (the lanes above it
// go first). Calls emit(e, word) for the e-th word emitted, which the decoder reads at index
// words - 1 - e; gives the words emitted, and in `x` the lane's final state (its start state in
// the block). Warp-uniform result.
template <class Warp, class Emit>
KVLAB_HOST_DEVICE std::uint32_t encode_block(Warp& w, const BlockCodes& src, int tokens,
                                             const std::uint32_t* table, Emit&& emit,
                                             std::uint32_t& x) {
  const int lane = w.lane();
  const int S = symbols_per_vector(src.dim, src.pairs);
  const std::uint64_t count = static_cast<std::uint64_t>(tokens) * static_cast<std::uint64_t>(S);
  const std::uint32_t above = ~((2u << lane) - 1u);  // lane 31: 2 << 31 wraps to 0, none above
  std::uint32_t emitted = 0;
  x = kLow;
  for (std::uint64_t k0 = (count + kLanes - 1) / kLanes * kLanes; k0 > 0;) {
    k0 -= kLanes;
    const std::uint64_t k = k0 + static_cast<std::uint64_t>(lane);
    const bool active = k < count;
    std::uint32_t sym = 0;
    if (active) {
      sym = src.symbol(static_cast<int>(k / static_cast<std::uint64_t>(S)),
                       static_cast<int>(k % static_cast<std::uint64_t>(S)));
    }
    std::uint32_t e = table[sym];
    const bool escape = active && (e & 0xffffu) == 0u;
    bool need = escape && x >= (kLow >> 8) << 16;
    std::uint32_t mask = w.ballot(need);
    if (need) {
      emit(emitted + static_cast<std::uint32_t>(popc(mask & above)), x & 0xffffu);
      x >>= 16;
    }
    emitted += static_cast<std::uint32_t>(popc(mask));
    if (escape) {
      x = (x << 8) | sym;
      e = table[256];
    }
    const std::uint32_t f = e & 0xffffu;
    need = active && x >= ((kLow >> kProbBits) << 16) * f;
    mask = w.ballot(need);
    if (need) {
      emit(emitted + static_cast<std::uint32_t>(popc(mask & above)), x & 0xffffu);
      x >>= 16;
    }
    emitted += static_cast<std::uint32_t>(popc(mask));
    if (active) x = ((x / f) << kProbBits) + x % f + (e >> 16);
  }
  return emitted;
}

// q.k for the G query heads of a KV head over one block of keys (KVComp's per-channel step and
// minimum of the block folded into the query: q.(min + code * step) = sum q min + sum (q step)
// code). Lane t computes token t of each chunk.
template <int G>
struct Logits {
  const float* qf = nullptr;  // shared: [channel][G], q * step * scale, 0 past dim
  float bias[G] = {};         // sum over channels of q * min * scale
  const std::uint8_t* tile = nullptr;
  int row = 0, channels = 0;  // tile_row(dim); dim rounded up to 4
  float* logits = nullptr;    // [q_heads][tokens]: this KV head's G rows at head * G
  std::uint64_t tokens = 0, first = 0;

  // Fills qf for block (steps, mins at [channel] of this block and head) and the bias.
  template <class Warp>
  KVLAB_HOST_DEVICE void prepare(Warp& w, float* qf_out, const float* q, const float* steps,
                                 const float* mins, int dim, float scale) {
    float part[G];
    KVLAB_UNROLL
    for (int g = 0; g < G; ++g) part[g] = 0.f;
    for (int c = w.lane(); c < channels; c += kLanes) {
      const bool in = c < dim;
      const float st = in ? steps[c] * scale : 0.f, mn = in ? mins[c] * scale : 0.f;
      KVLAB_UNROLL
      for (int g = 0; g < G; ++g) {
        const float qv = in ? q[g * dim + c] : 0.f;
        qf_out[c * G + g] = qv * st;
        part[g] += qv * mn;
      }
    }
    KVLAB_UNROLL
    for (int g = 0; g < G; ++g) {
      float v = part[g];
      for (int o = 16; o > 0; o >>= 1) v += w.shfl_xor(v, o);
      bias[g] = v;
    }
    qf = qf_out;
    w.sync();
  }

  template <class Warp>
  KVLAB_HOST_DEVICE void operator()(Warp& w, int c0, int m) {
    const int t = w.lane();
    if (t >= m) return;
    const std::uint8_t* p = tile + t * row;
    float acc[G];
    KVLAB_UNROLL
    for (int g = 0; g < G; ++g) acc[g] = bias[g];
    for (int c = 0; c < channels; c += 4) {
      const std::uint32_t v = load32(p + c);
      for (int k = 0; k < 4; ++k) {
        const float code = static_cast<float>((v >> (8 * k)) & 255u);
        KVLAB_UNROLL
        for (int g = 0; g < G; ++g) acc[g] = fmaf(qf[(c + k) * G + g], code, acc[g]);
      }
    }
    KVLAB_UNROLL
    for (int g = 0; g < G; ++g)
      logits[static_cast<std::uint64_t>(g) * tokens + first + c0 + t] = acc[g];
  }
};

// softmax-weighted values of one KV head over the blocks a warp decodes (KVComp's per-token step
// and minimum: sum p (min + code * step) = sum p min + sum (p step) code). Lane l owns channel
// pairs 2 (l + 32 k), + 1; the sums stay in registers until flush().
template <int G>
struct Values {
  const float* steps = nullptr;  // [token][head]
  const float* mins = nullptr;
  const float* probs = nullptr;  // this KV head's G rows of [q_heads][tokens]
  float* weights = nullptr;      // shared: [kChunk][G], p * step of the chunk's tokens
  const std::uint8_t* tile = nullptr;
  int row = 0, dim = 0, heads = 0, head = 0;
  std::uint64_t tokens = 0, first = 0;
  float acc[kMaxPairs][2][G] = {};
  float bsum[G] = {};

  template <class Warp>
  KVLAB_HOST_DEVICE void operator()(Warp& w, int c0, int m) {
    const int t = w.lane();
    if (t < m) {
      const std::uint64_t tok = first + static_cast<std::uint64_t>(c0 + t);
      const std::uint64_t th =
          tok * static_cast<std::uint64_t>(heads) + static_cast<std::uint64_t>(head);
      const float st = steps[th], mn = mins[th];
      KVLAB_UNROLL
      for (int g = 0; g < G; ++g) {
        const float p = probs[static_cast<std::uint64_t>(g) * tokens + tok];
        weights[t * G + g] = p * st;
        bsum[g] = fmaf(p, mn, bsum[g]);
      }
    }
    w.sync();
    KVLAB_UNROLL
    for (int k = 0; k < kMaxPairs; ++k) {
      const int c = 2 * (t + kLanes * k);
      if (c >= dim) break;
      for (int n = 0; n < m; ++n) {
        const std::uint32_t two = load16(tile + n * row + c);
        const float x0 = static_cast<float>(two & 255u), x1 = static_cast<float>(two >> 8);
        KVLAB_UNROLL
        for (int g = 0; g < G; ++g) {
          const float wt = weights[n * G + g];
          acc[k][0][g] = fmaf(wt, x0, acc[k][0][g]);
          acc[k][1][g] = fmaf(wt, x1, acc[k][1][g]);
        }
      }
    }
  }

  // add(g, channel, value) for every channel the lane owns, the minimums' share included once.
  template <class Warp, class Add>
  KVLAB_HOST_DEVICE void flush(Warp& w, Add&& add) {
    float bias[G];
    KVLAB_UNROLL
    for (int g = 0; g < G; ++g) {
      float v = bsum[g];
      for (int o = 16; o > 0; o >>= 1) v += w.shfl_xor(v, o);
      bias[g] = v;
    }
    KVLAB_UNROLL
    for (int k = 0; k < kMaxPairs; ++k) {
      KVLAB_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int c = 2 * (w.lane() + kLanes * k) + h;
        if (c >= dim) continue;
        KVLAB_UNROLL
        for (int g = 0; g < G; ++g) add(g, c, acc[k][h][g] + bias[g]);
      }
    }
  }
};

}  // namespace kvlab::rans_warp
