// Per-vector streams of the Huffman and per-group variable-width codecs (docs/FORMAT.md).
// Huffman decoding is table-driven from a 64-bit bit buffer, each lookup taking up to three codes
// (multi-symbol table). One stream is latency-bound (lookup -> shift -> lookup), so a block is
// cut into four runs of consecutive vectors that decode side by side. A block's vectors follow
// each other bit-aligned, so each run is one continuous stream: it decodes into a scratch buffer
// without stopping at vector ends (no ragged ends per vector, no per-code checks), and afterwards
// each vector's codes must take exactly its bit count. Loads stay inside the payload (or a padded
// copy near its end) whatever the bits say; any failure re-decodes the vectors one by one with
// the checked decoder, which names the problem.
#include <algorithm>
#include <cstring>

#if defined(__SSE2__) || (defined(__AVX512VBMI__) && defined(__AVX512BW__))
#include <immintrin.h>
#endif

#include "codec/codec_streams.h"
#include "kvlab/engine/codec/table_entry.h"

namespace kvlab::detail {

namespace {

constexpr std::uint32_t kIndexMask = HuffmanCodebook::kTableSize - 1;
constexpr std::uint32_t kEscapeSymbol = HuffmanCodebook::kEscape;

// True when a stream starting at `start_bit` that takes at most kMaxStepBits per code of its
// `dim` codes keeps every 8-byte load inside data[0, readable), whatever its bits say: then it
// can be decoded without per-code bounds checks (checked once at the end instead). With
// `8 * next == pos + count` and count < 64, a refill at bit `pos` reads bytes below pos / 8 + 16.
bool loads_stay_inside(std::size_t readable, std::uint64_t start_bit, std::uint64_t codes) {
  return (start_bit + kMaxStepBits * codes) / 8 + 16 <= readable;
}

// One Huffman stream decoded without bounds checks: a 64-bit buffer with branchless refill
// (F. Giesen, "Reading bits in far too many ways", variant 4); after a refill it holds >= 56
// bits, enough for four multi-symbol steps. Invariant: 8 * (next - base) == pos + count.
struct FastStream {
  const std::uint8_t* next;
  std::uint64_t buf;
  unsigned count;
  std::uint8_t* out;  // where the next code goes
  bool bad;           // met bits that are no code
};

FastStream open_stream(const std::uint8_t* base, std::uint64_t pos, std::uint8_t* out) {
  return {base + (pos >> 3) + 7, load_le64(base + (pos >> 3)) >> (pos & 7),
          56 - static_cast<unsigned>(pos & 7), out, false};
}

std::uint64_t stream_pos(const FastStream& s, const std::uint8_t* base) {
  return 8 * static_cast<std::uint64_t>(s.next - base) - s.count;
}

inline void refill(FastStream& s) {
  s.buf |= load_le64(s.next) << s.count;  // count < 64 here, so the shift is defined
  s.next += (63 - s.count) >> 3;
  s.count |= 56;
}

// One code through the single-symbol table (refilled before); false on bits that are no code.
inline bool single_code(FastStream& s, const std::uint16_t* single) {
  const std::uint16_t entry = single[s.buf & kIndexMask];
  unsigned len = table_entry::single_length(entry);
  std::uint32_t sym = table_entry::single_symbol(entry);
  if (len == 0) return false;
  if (sym == kEscapeSymbol) {
    sym = static_cast<std::uint32_t>(s.buf >> len) & 0xff;
    len += 8;
  }
  *s.out++ = static_cast<std::uint8_t>(sym);
  s.buf >>= len;
  s.count -= len;
  return true;
}

// The rare step: the next code is the escape or no code. Refills before and after, so it leaves
// >= 56 bits. A bad code marks the stream and still moves on one code, so loops end.
// Takes and gives the state by value so the hot loop's streams can stay in registers.
[[gnu::noinline]] FastStream escape_step(FastStream s, const std::uint16_t* single) {
  refill(s);
  if (!single_code(s, single)) {
    s.bad = true;
    *s.out++ = 0;
  }
  refill(s);
  return s;
}

// Up to kMultiSymbols codes with one lookup in the multi-symbol table (DecodeTables), without a
// refill: the buffer must hold >= 12 bits. Stores 4 bytes at `out`: the codes, then bytes that
// later steps overwrite, so `out` needs 4 writable bytes.
inline void multi_step(FastStream& s, const DecodeTables& t, const std::uint16_t* single) {
  const std::size_t i = s.buf & kIndexMask;
  const unsigned n = t.len_count[2 * i + 1];
  if (n == 0) [[unlikely]] {  // escape or no code
    s = escape_step(s, single);
    return;
  }
  std::memcpy(s.out, t.syms + 4 * i, 4);
  const unsigned len = t.len_count[2 * i];
  s.out += n;
  s.buf >>= len;
  s.count -= len;
}

// Steps per refill: after a refill >= 56 bits are buffered and a step takes at most 12 (escapes
// refill themselves), so 4 steps never run dry. They write at most 3 * 3 + 4 bytes.
constexpr int kStepsPerRefill = 4;
constexpr std::ptrdiff_t kRoomForSteps = 3 * (kStepsPerRefill - 1) + 4;

// Decodes one vector's stream in place up to `end_out` (nothing is written past it), then checks
// it used exactly `end_bit` bits.
bool finish_stream(FastStream& s, const std::uint8_t* base, std::uint8_t* end_out,
                   std::uint64_t end_bit, const DecodeTables& multi, const std::uint16_t* single) {
  while (end_out - s.out >= kRoomForSteps) {
    refill(s);
#pragma GCC unroll 4
    for (int j = 0; j < kStepsPerRefill; ++j) multi_step(s, multi, single);
  }
  while (end_out - s.out >= 4) {
    refill(s);
    multi_step(s, multi, single);
  }
  while (s.out < end_out) {
    refill(s);
    if (!single_code(s, single)) return false;
  }
  return !s.bad && stream_pos(s, base) == end_bit;
}

// The checked decoder: every code's start is checked against the stream's end, and loads go
// through with_bounded_stream. Gives the exact problem for corrupt streams.
DecodeProblem decode_huffman_checked(const std::uint8_t* data, std::size_t readable,
                                     std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                     const HuffmanCodebook& book, std::uint8_t* out) {
  const std::uint16_t* const table = book.decode_table();
  return with_bounded_stream(data, readable, start_bit, bit_count,
                             [table, dim, out](const std::uint8_t* base, std::uint64_t pos,
                                               const std::uint64_t end) -> DecodeProblem {
                               FastStream s = open_stream(base, pos, out);
                               for (int i = 0; i < dim; ++i) {
                                 // A valid stream never starts a code at or past its end; a corrupt
                                 // one may.
                                 if (stream_pos(s, base) >= end)
                                   return "stream ends before its last code";
                                 refill(s);
                                 if (!single_code(s, table))
                                   return "bits that are no code of the codebook";
                               }
                               if (stream_pos(s, base) != end)
                                 return "bit count disagrees with the decoded codes";
                               return nullptr;
                             });
}

// ---- Runs: a block's vectors as four continuous streams decoded side by side ----

// Runs side by side; their state (3 registers each) and the table fit x86-64's 16 registers.
constexpr int kRuns = 4;
// Codes one chunk of a block decodes through the scratch buffer (a block larger than that goes
// chunk by chunk): 16 KiB of codes stays in L1 beside the 24 KiB of hot tables.
constexpr std::size_t kChunkCodes = 16384;
// Scratch bytes before each run's codes: a step may start at the previous run's last code and
// store 4 bytes past it, and run 0's end - kLockRoom must stay inside the buffer.
constexpr std::size_t kRunGap = 32;
// A run stays in the lock-step loop while all kStepsPerRefill steps of a round start before its
// end: each step takes at most 3 codes, so the first must start more than 3 * 3 codes before it.
constexpr std::ptrdiff_t kLockRoom = 3 * (kStepsPerRefill - 1);

// GCC's SLP vectorizer packs a run's position and buffer into one SSE register and moves them
// back and forth every step (measured: ~25% slower); the hot loop is scalar by design.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-tree-slp-vectorize")
#endif

// A run's stream is kept as its bit position and a buffer of the bits from there, reloaded from
// the position once per round (>= 57 bits, enough for kStepsPerRefill steps): three registers per
// run, so four runs and the table fit x86-64's registers.
struct RunStream {
  std::uint64_t pos;
  std::uint64_t buf;
  std::uint8_t* out;  // where the next code goes
};

struct Run {
  RunStream s;
  std::uint8_t* end;    // end of the run's codes in the scratch buffer
  std::uint8_t* limit;  // end - kLockRoom: below it a whole round fits
};

struct RunTables {
  const std::uint8_t* base;
  DecodeTables multi;
  const std::uint16_t* single;
  bool* bad;  // set when a run meets bits that are no code, or a non-canonical escape
};

inline void reload(RunStream& s, const std::uint8_t* base) {
  s.buf = load_le64(base + (s.pos >> 3)) >> (s.pos & 7);
}

// The rare step of a run: the next code is the escape or no code. Bits that are no code set
// `bad` and write a 0 (so loops still end); so does an escape of a value that has a code of its
// own, which no encoder writes: then every code a run decodes took exactly its cost_bits, which
// the vector checks rely on. Leaves the buffer reloaded.
[[gnu::noinline]] RunStream run_escape_step(RunStream s, const RunTables& t) {
  const std::uint16_t entry = t.single[s.buf & kIndexMask];
  unsigned len = table_entry::single_length(entry);
  std::uint32_t sym = table_entry::single_symbol(entry);
  if (len == 0) {
    *t.bad = true;
    sym = 0;
  } else if (sym == kEscapeSymbol) {
    sym = static_cast<std::uint32_t>(s.buf >> len) & 0xff;
    len += 8;
    if (t.multi.cost[sym] != len) *t.bad = true;
  }
  *s.out++ = static_cast<std::uint8_t>(sym);
  s.pos += len;
  reload(s, t.base);
  return s;
}

// One multi-symbol step of a run (the buffer holds >= 12 bits; 4 bytes written at `out`): three
// loads from the index, no shifts or masks of the entry.
inline void run_step(RunStream& s, const RunTables& t) {
  const std::size_t i = s.buf & kIndexMask;
  const unsigned n = t.multi.len_count[2 * i + 1];
  if (n == 0) [[unlikely]] {  // escape or no code
    s = run_escape_step(s, t);
    return;
  }
  std::memcpy(s.out, t.multi.syms + 4 * i, 4);
  const unsigned len = t.multi.len_count[2 * i];
  s.out += n;
  s.buf >>= len;
  s.pos += len;
}

// The last codes of a run (at most kLockRoom left), one step per reload, alone.
void finish_run(Run& r, const RunTables& t) {
  while (r.s.out < r.end) {
    reload(r.s, t.base);
    run_step(r.s, t);
  }
}

// One round: reload every run, then kStepsPerRefill steps of each, interleaved.
template <int N>
inline void round(RunStream* s, const RunTables& t) {
  for (int k = 0; k < N; ++k) reload(s[k], t.base);
  for (int k = 0; k < N; ++k) run_step(s[k], t);
  for (int k = 0; k < N; ++k) run_step(s[k], t);
  for (int k = 0; k < N; ++k) run_step(s[k], t);
  for (int k = 0; k < N; ++k) run_step(s[k], t);
}
static_assert(kStepsPerRefill == 4, "round() takes four steps per reload");

// N runs in lock step until one of them comes within kLockRoom codes of its end.
template <int N>
void lock_step(Run* runs, const RunTables& t) {
  RunStream s[N];
  std::uint8_t* limit[N];
  for (int k = 0; k < N; ++k) {
    s[k] = runs[k].s;
    limit[k] = runs[k].limit;
  }
  // A round moves a run's output on by at most kCodesPerRound: run as many rounds as the run
  // nearest its limit surely has, without looking at the limits in between (they would take
  // registers the rounds need), then look again.
  constexpr std::ptrdiff_t kCodesPerRound = kMultiSymbols * kStepsPerRefill;
  for (;;) {
    std::ptrdiff_t room = limit[0] - s[0].out;
    for (int k = 1; k < N; ++k) room = std::min(room, limit[k] - s[k].out);
    if (room <= 0) break;
    for (std::ptrdiff_t r = (room + kCodesPerRound - 1) / kCodesPerRound; r > 0; --r) {
      round<N>(s, t);
    }
  }
  for (int k = 0; k < N; ++k) runs[k].s = s[k];
}

// Decodes the runs side by side, finishing each alone as it nears its end and going on with the
// others.
void decode_runs(Run* runs, int count, const RunTables& t) {
  while (count > 0) {
    switch (count) {
      case 4:
        lock_step<4>(runs, t);
        break;
      case 3:
        lock_step<3>(runs, t);
        break;
      case 2:
        lock_step<2>(runs, t);
        break;
      default:
        lock_step<1>(runs, t);
        break;
    }
    for (int k = 0; k < count;) {
      if (runs[k].s.out >= runs[k].limit) {
        finish_run(runs[k], t);
        runs[k] = runs[--count];
      } else {
        ++k;
      }
    }
  }
}

static_assert(kRuns == 4, "decode_runs dispatches on up to four runs");

// memcpy of a vector's codes, inlined as 32-byte moves (a libc call per 128-byte vector cost
// several percent of the decode).
inline void copy_codes(std::uint8_t* dst, const std::uint8_t* src, std::size_t n) {
  std::size_t j = 0;
  for (; j + 32 <= n; j += 32) std::memcpy(dst + j, src + j, 32);
  if (j < n) std::memcpy(dst + j, src + j, n - j);
}

// Decodes the `count` (count * dim <= kChunkCodes) consecutive vectors of a chunk that starts at
// bit `start_bit` of `base` into `out` with stride `out_stride`; the caller has checked that
// loads up to kMaxStepBits bits per code of the longest run (plus a step) past the chunk's end
// stay inside the buffer. False when the chunk is corrupt.
//
// The runs do not stop at vector ends, so each vector is checked afterwards: a run starts at its
// first vector's start bit and every code it decodes takes exactly its cost_bits (escapes of
// values with a code of their own, and bits that are no code, fail the run: run_escape_step), so
// vector i ends where it should exactly when its codes' cost_bits sum to vector_bits[i] and all
// earlier vectors of the run do too.
bool decode_chunk_fast(const std::uint8_t* base, std::uint64_t start_bit,
                       const std::uint16_t* vector_bits, int count, int dim,
                       const HuffmanCodebook& book, std::uint8_t* out, std::size_t out_stride) {
  alignas(64) std::uint8_t scratch[kChunkCodes + (kRuns + 1) * kRunGap];
  bool bad = false;
  const RunTables t{base, decode_tables(book), book.decode_table(), &bad};
  const int runs_count = std::min(kRuns, count);
  Run runs[kRuns];
  int first[kRuns + 1];  // first vector of each run, then the chunk's end
  std::uint8_t* at[kRuns];
  for (int k = 0; k <= runs_count; ++k) first[k] = count * k / runs_count;
  std::uint64_t bit = start_bit;
  for (int k = 0; k < runs_count; ++k) {
    at[k] = scratch + kRunGap * (static_cast<std::size_t>(k) + 1) +
            static_cast<std::size_t>(first[k]) * static_cast<std::size_t>(dim);
    Run& r = runs[k];
    r.s = {bit, 0, at[k]};
    r.end = at[k] + static_cast<std::ptrdiff_t>(first[k + 1] - first[k]) * dim;
    r.limit = r.end - kLockRoom;
    for (int i = first[k]; i < first[k + 1]; ++i) bit += vector_bits[i];
  }
  decode_runs(runs, runs_count, t);
  if (bad) return false;
  for (int k = 0; k < runs_count; ++k) {
    for (int i = first[k]; i < first[k + 1]; ++i) {
      const std::uint8_t* codes = at[k] + static_cast<std::ptrdiff_t>(i - first[k]) * dim;
      if (sum_code_bits(codes, static_cast<std::size_t>(dim), t.multi.cost) != vector_bits[i]) {
        return false;
      }
      copy_codes(out + static_cast<std::size_t>(i) * out_stride, codes,
                 static_cast<std::size_t>(dim));
    }
  }
  return true;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

// Decodes one stream of `dim` symbols.
DecodeProblem decode_symbols(const std::uint8_t* data, std::size_t readable,
                             std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                             const HuffmanCodebook& book, std::uint8_t* out) {
  if (loads_stay_inside(readable, start_bit, static_cast<std::uint64_t>(dim))) {
    FastStream s = open_stream(data, start_bit, out);
    if (finish_stream(s, data, out + dim, start_bit + bit_count, decode_tables(book),
                      book.decode_table())) {
      return nullptr;
    }
  }
  return decode_huffman_checked(data, readable, start_bit, bit_count, dim, book, out);
}

}  // namespace

BlockProblem decode_huffman_symbols(const std::uint8_t* data, std::size_t readable,
                                    std::uint64_t start_bit, const std::uint16_t* vector_bits,
                                    int count, int dim, const HuffmanCodebook& book,
                                    std::uint8_t* out, std::size_t out_stride) {
  std::vector<std::uint8_t> padded;  // a chunk's bytes with room for any load, near the end
  std::uint64_t bit = start_bit;
  const bool runs_fit = dim > 0 && static_cast<std::size_t>(dim) * kRuns <= kChunkCodes;
  const int chunk = runs_fit ? static_cast<int>(kChunkCodes / static_cast<std::size_t>(dim)) : 1;
  for (int i0 = 0; i0 < count; i0 += chunk) {
    const int n = std::min(chunk, count - i0);
    std::uint64_t end_bit = bit;
    for (int i = 0; i < n; ++i) end_bit += vector_bits[i0 + i];
    std::uint8_t* const first_out = out + static_cast<std::size_t>(i0) * out_stride;
    if (runs_fit) {
      // A run decodes its codes and at most one more step without checks: from a start at most
      // end_bit, at most kMaxStepBits bits per code.
      const std::uint64_t reach =
          static_cast<std::uint64_t>((n + kRuns - 1) / kRuns) * static_cast<std::uint64_t>(dim) +
          kMultiSymbols;
      bool ok;
      if (loads_stay_inside(readable, end_bit, reach)) {
        ok = decode_chunk_fast(data, bit, vector_bits + i0, n, dim, book, first_out, out_stride);
      } else {  // near the end of the payload: decode from a zero-padded copy of the chunk
        const std::uint64_t first_byte = bit / 8;
        const std::uint64_t bytes = (end_bit + 7) / 8 - first_byte;
        padded.assign(bytes + (kMaxStepBits * reach) / 8 + 16, 0);
        if (bytes > 0) std::memcpy(padded.data(), data + first_byte, bytes);
        ok = decode_chunk_fast(padded.data(), bit - 8 * first_byte, vector_bits + i0, n, dim, book,
                               first_out, out_stride);
      }
      if (ok) {
        bit = end_bit;
        continue;
      }
    }
    // Vector by vector: the chunk is corrupt (find the first bad vector and why), or too wide.
    for (int i = 0; i < n; ++i) {
      std::uint8_t* const o = first_out + static_cast<std::size_t>(i) * out_stride;
      const DecodeProblem p =
          runs_fit ? decode_huffman_checked(data, readable, bit, vector_bits[i0 + i], dim, book, o)
                   : decode_symbols(data, readable, bit, vector_bits[i0 + i], dim, book, o);
      if (p != nullptr) return {i0 + i, p};
      bit += vector_bits[i0 + i];
    }
  }
  return {};
}

namespace {

// Pair symbols (first | second << 4) back into `dim` codes; an odd dim drops the last pair's
// second code.
void split_pairs(const std::uint8_t* syms, int dim, std::uint8_t* out) {
  const int pairs = dim / 2;
  int i = 0;
#if defined(__SSE2__)
  const __m128i low4 = _mm_set1_epi8(0x0f);
  for (; i + 16 <= pairs; i += 16) {
    const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(syms + i));
    const __m128i first = _mm_and_si128(s, low4);
    const __m128i second = _mm_and_si128(_mm_srli_epi16(s, 4), low4);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), _mm_unpacklo_epi8(first, second));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i + 16),
                     _mm_unpackhi_epi8(first, second));
  }
#endif
  for (; i < pairs; ++i) {
    out[2 * i] = syms[i] & 0x0f;
    out[2 * i + 1] = static_cast<std::uint8_t>(syms[i] >> 4);
  }
  if (dim % 2 != 0) out[dim - 1] = syms[pairs] & 0x0f;
}

// Bytes for the symbols of a pair book on their way to codes: kBytes on the stack, more on the
// heap.
class SymbolScratch {
 public:
  static constexpr int kBytes = 4096;
  std::uint8_t* get(int n) {
    if (n <= kBytes) return m_local;
    m_heap.resize(static_cast<std::size_t>(n));
    return m_heap.data();
  }

 private:
  std::uint8_t m_local[kBytes];
  std::vector<std::uint8_t> m_heap;
};

}  // namespace

DecodeProblem decode_huffman_vector(const std::uint8_t* data, std::size_t readable,
                                    std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                    const HuffmanCodebook& book, std::uint8_t* out) {
  if (!book.pairs()) return decode_symbols(data, readable, start_bit, bit_count, dim, book, out);
  const int n = book.symbols_per_vector(dim);
  SymbolScratch scratch;
  std::uint8_t* const syms = scratch.get(n);
  if (DecodeProblem p = decode_symbols(data, readable, start_bit, bit_count, n, book, syms)) {
    return p;
  }
  split_pairs(syms, dim, out);
  return nullptr;
}

BlockProblem decode_huffman_block(const std::uint8_t* data, std::size_t readable,
                                  std::uint64_t start_bit, const std::uint16_t* vector_bits,
                                  int count, int dim, const HuffmanCodebook& book,
                                  std::uint8_t* out, std::size_t out_stride) {
  if (!book.pairs()) {
    return decode_huffman_symbols(data, readable, start_bit, vector_bits, count, dim, book, out,
                                  out_stride);
  }
  // A few vectors' symbols at a time into scratch, then split into their rows.
  const int n = book.symbols_per_vector(dim);
  const int per = n > 0 ? std::max(1, SymbolScratch::kBytes / n) : count;
  SymbolScratch scratch;
  std::uint8_t* const syms = scratch.get(per * n);
  std::uint64_t bit = start_bit;
  for (int i0 = 0; i0 < count; i0 += per) {
    const int m = std::min(per, count - i0);
    const BlockProblem bp = decode_huffman_symbols(data, readable, bit, vector_bits + i0, m, n,
                                                   book, syms, static_cast<std::size_t>(n));
    // On failure the vectors before the bad one are decoded (as the single-code path leaves
    // them): split those too.
    const int good = bp.problem != nullptr ? bp.vector : m;
    for (int i = 0; i < good; ++i) {
      split_pairs(syms + static_cast<std::size_t>(i) * static_cast<std::size_t>(n), dim,
                  out + static_cast<std::size_t>(i0 + i) * out_stride);
      bit += vector_bits[i0 + i];
    }
    if (bp.problem != nullptr) return {i0 + bp.vector, bp.problem};
  }
  return {};
}

}  // namespace kvlab::detail
