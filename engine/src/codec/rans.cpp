// Interleaved rANS blocks (docs/FORMAT.md, "rANS streams"). Decoding is round by round: in a
// round every lane that has a symbol decodes it and, in lane order, reads a word where its state
// fell below 2^16; then the lanes whose symbol was the escape take its 8 raw bits (and a word
// where needed), again in lane order. The encoder runs the same steps backwards.
#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define KVLAB_RANS_AVX512 1
#elif defined(__AVX2__)
#include <immintrin.h>
#define KVLAB_RANS_AVX2 1
#endif

#include "codec/rans_streams.h"

namespace kvlab::detail {

namespace {

constexpr std::uint32_t kSlotMask = rans_warp::kSlotMask;

// Runs the encoder, leaving the final states in `x` and the words, in emission order, in
// `words` (the decoder reads them last to first).
void run_encoder(const std::uint8_t* symbols, std::size_t count, const RansTable& table,
                 std::uint32_t* x, std::vector<std::uint16_t>& words) {
  words.clear();
  std::fill(x, x + kRansLanes, kRansLow);
  const std::size_t rounds = (count + kRansLanes - 1) / kRansLanes;
  for (std::size_t r = rounds; r-- > 0;) {
    const std::size_t base = r * kRansLanes;
    const int active = static_cast<int>(std::min<std::size_t>(kRansLanes, count - base));
    // The escapes' raw bytes were decoded last in the round: encode them first.
    for (int l = active - 1; l >= 0; --l) {
      const std::uint8_t s = symbols[base + static_cast<std::size_t>(l)];
      if (table.frequency(s) != 0) continue;
      if (x[l] >= (kRansLow >> 8) << 16) {
        words.push_back(static_cast<std::uint16_t>(x[l]));
        x[l] >>= 16;
      }
      x[l] = (x[l] << 8) | s;
    }
    for (int l = active - 1; l >= 0; --l) {
      const std::uint8_t s = symbols[base + static_cast<std::size_t>(l)];
      const int sym = table.frequency(s) != 0 ? s : RansTable::kEscape;
      const std::uint32_t f = table.frequency(sym);
      if (x[l] >= ((kRansLow >> RansTable::kProbBits) << 16) * f) {
        words.push_back(static_cast<std::uint16_t>(x[l]));
        x[l] >>= 16;
      }
      x[l] = ((x[l] / f) << RansTable::kProbBits) + x[l] % f + table.cumulative(sym);
    }
  }
}

inline std::uint32_t load_le32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
  return v;
}

inline std::uint16_t load_le16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap16(v);
  return v;
}

constexpr const char* kWordsRunOut = "rans block: the words run out before the last symbol";
constexpr const char* kWordsLeft = "rans block: words left over after the last symbol";
constexpr const char* kBadEnd = "rans block: a lane does not end in its start state";
constexpr const char* kBadSize = "rans block: shorter than its 32 states, or an odd word";

// The escapes of one round, lanes in order: 8 raw bits each, then a word where the state fell
// below 2^16. `pos` counts the words read.
bool finish_escapes(std::uint32_t* x, std::uint32_t escapes, const std::uint8_t* words,
                    std::size_t nwords, std::size_t& pos, std::uint8_t* out) {
  while (escapes != 0) {
    const int l = std::countr_zero(escapes);
    escapes &= escapes - 1;
    out[l] = static_cast<std::uint8_t>(x[l]);
    x[l] >>= 8;
    if (x[l] < kRansLow) {
      if (pos >= nwords) return false;
      x[l] = (x[l] << 16) | load_le16(words + 2 * pos++);
    }
  }
  return true;
}

}  // namespace

void encode_rans_block(const std::uint8_t* symbols, std::size_t count, const RansTable& table,
                       HugePageBytes& out, std::vector<std::uint16_t>& words) {
  std::uint32_t x[kRansLanes];
  run_encoder(symbols, count, table, x, words);
  const std::size_t at = out.size();
  out.resize(at + kRansStateBytes + 2 * words.size());
  std::uint8_t* p = out.data() + at;
  for (int l = 0; l < kRansLanes; ++l) {
    std::uint32_t v = x[l];
    if constexpr (std::endian::native == std::endian::big) v = __builtin_bswap32(v);
    std::memcpy(p + 4 * l, &v, 4);
  }
  p += kRansStateBytes;
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::uint16_t w = words[words.size() - 1 - i];
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap16(w);
    std::memcpy(p + 2 * i, &w, 2);
  }
}

std::size_t rans_block_bytes(const std::uint8_t* symbols, std::size_t count, const RansTable& table,
                             std::vector<std::uint16_t>& words) {
  std::uint32_t x[kRansLanes];
  run_encoder(symbols, count, table, x, words);
  return kRansStateBytes + 2 * words.size();
}

const char* decode_rans_block_scalar(const std::uint8_t* block, std::size_t bytes,
                                     std::size_t count, const RansTable& table, std::uint8_t* out) {
  if (bytes < kRansStateBytes || (bytes - kRansStateBytes) % 2 != 0) return kBadSize;
  std::uint32_t x[kRansLanes];
  for (int l = 0; l < kRansLanes; ++l) x[l] = load_le32(block + 4 * l);
  const std::uint8_t* words = block + kRansStateBytes;
  const std::size_t nwords = (bytes - kRansStateBytes) / 2;
  std::size_t pos = 0;
  const std::uint32_t* slots = table.slot_table();
  const std::uint32_t escape = table.escape_start();
  for (std::size_t base = 0; base < count; base += kRansLanes) {
    const int active = static_cast<int>(std::min<std::size_t>(kRansLanes, count - base));
    std::uint32_t escapes = 0;
    for (int l = 0; l < active; ++l) {
      const std::uint32_t slot = x[l] & kSlotMask;
      const std::uint32_t e = slots[slot];
      x[l] = rans_warp::decode_step(x[l], e);
      out[base + static_cast<std::size_t>(l)] =
          static_cast<std::uint8_t>(rans_warp::entry_symbol(e));
      if (slot >= escape) escapes |= 1u << l;
      if (x[l] < kRansLow) {
        if (pos >= nwords) return kWordsRunOut;
        x[l] = (x[l] << 16) | load_le16(words + 2 * pos++);
      }
    }
    if (!finish_escapes(x, escapes, words, nwords, pos, out + base)) return kWordsRunOut;
  }
  if (pos != nwords) return kWordsLeft;
  for (int l = 0; l < kRansLanes; ++l) {
    if (x[l] != kRansLow) return kBadEnd;
  }
  return nullptr;
}

#if defined(KVLAB_RANS_AVX512)

namespace {

// One register of 16 lanes through a round's symbol step and its words: `active` the lanes with
// a symbol. Gives the lanes whose symbol was the escape; false in `ok` when the words run out.
inline __mmask16 step16(__m512i& x, __mmask16 active, const std::uint32_t* slots,
                        __m512i escape_start, const std::uint8_t* words, std::size_t nwords,
                        std::size_t& pos, std::uint8_t* out, bool& ok) {
  const __m512i slot = _mm512_and_si512(x, _mm512_set1_epi32(kSlotMask));
  const __m512i e = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), active, slot, slots, 4);
  const __m512i f = _mm512_and_si512(_mm512_srli_epi32(e, 8), _mm512_set1_epi32(kSlotMask));
  const __m512i next = _mm512_add_epi32(
      _mm512_mullo_epi32(f, _mm512_srli_epi32(x, RansTable::kProbBits)), _mm512_srli_epi32(e, 20));
  x = _mm512_mask_mov_epi32(x, active, next);
  _mm512_mask_cvtepi32_storeu_epi8(out, active, e);
  const __mmask16 need = _mm512_mask_cmplt_epu32_mask(active, x, _mm512_set1_epi32(kRansLow));
  const auto k = static_cast<std::size_t>(std::popcount(static_cast<unsigned>(need)));
  if (k > nwords - pos) {
    ok = false;
    return 0;
  }
  // The next 16 words, those past the block's end masked off (a masked load does not fault).
  const std::size_t left = nwords - pos;
  const __mmask16 readable = left >= 16 ? 0xffff : static_cast<__mmask16>((1u << left) - 1);
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(readable, words + 2 * pos));
  x = _mm512_mask_or_epi32(x, need, _mm512_slli_epi32(x, 16), _mm512_maskz_expand_epi32(need, w));
  pos += k;
  return _mm512_mask_cmpge_epu32_mask(active, slot, escape_start);
}

// G blocks side by side: each round's symbol step is a chain of dependent operations (the
// gather's latency above all), so one block's two registers leave the core mostly waiting;
// interleaving blocks gives it 2 * G independent chains.
template <int G>
void decode_group(RansJob* jobs) {
  __m512i x0[G], x1[G];
  std::size_t pos[G], nwords[G], end = 0;
  const std::uint8_t* words[G];
  bool live[G];
  for (int g = 0; g < G; ++g) {
    RansJob& j = jobs[g];
    j.problem = nullptr;
    live[g] = j.bytes >= kRansStateBytes && (j.bytes - kRansStateBytes) % 2 == 0;
    if (!live[g]) {
      j.problem = kBadSize;
      x0[g] = x1[g] = _mm512_setzero_si512();
      continue;
    }
    x0[g] = _mm512_loadu_si512(j.block);
    x1[g] = _mm512_loadu_si512(j.block + 64);
    words[g] = j.block + kRansStateBytes;
    nwords[g] = (j.bytes - kRansStateBytes) / 2;
    pos[g] = 0;
    end = std::max(end, j.count);
  }
  const std::uint32_t* slots = jobs[0].table->slot_table();
  const __m512i escape_start = _mm512_set1_epi32(static_cast<int>(jobs[0].table->escape_start()));
  for (std::size_t base = 0; base < end; base += kRansLanes) {
    for (int g = 0; g < G; ++g) {
      RansJob& j = jobs[g];
      if (!live[g] || base >= j.count) continue;
      const std::size_t active = std::min<std::size_t>(kRansLanes, j.count - base);
      const auto m0 = static_cast<__mmask16>(active >= 16 ? 0xffff : (1u << active) - 1);
      const auto m1 = static_cast<__mmask16>(active >= 32  ? 0xffff
                                             : active > 16 ? (1u << (active - 16)) - 1
                                                           : 0);
      bool ok = true;
      std::uint8_t* out = j.out + base;
      const __mmask16 e0 =
          step16(x0[g], m0, slots, escape_start, words[g], nwords[g], pos[g], out, ok);
      const __mmask16 e1 = m1 != 0 ? step16(x1[g], m1, slots, escape_start, words[g], nwords[g],
                                            pos[g], out + 16, ok)
                                   : 0;
      if ((e0 | e1) != 0 && ok) [[unlikely]] {
        alignas(64) std::uint32_t x[kRansLanes];
        _mm512_store_si512(x, x0[g]);
        _mm512_store_si512(x + 16, x1[g]);
        const std::uint32_t escapes = static_cast<std::uint32_t>(e0) | std::uint32_t{e1} << 16;
        ok = finish_escapes(x, escapes, words[g], nwords[g], pos[g], out);
        x0[g] = _mm512_load_si512(x);
        x1[g] = _mm512_load_si512(x + 16);
      }
      if (!ok) {
        j.problem = kWordsRunOut;
        live[g] = false;
      }
    }
  }
  const __m512i low = _mm512_set1_epi32(kRansLow);
  for (int g = 0; g < G; ++g) {
    if (!live[g]) continue;
    if (pos[g] != nwords[g]) {
      jobs[g].problem = kWordsLeft;
    } else if (_mm512_cmpneq_epu32_mask(x0[g], low) != 0 ||
               _mm512_cmpneq_epu32_mask(x1[g], low) != 0) {
      jobs[g].problem = kBadEnd;
    }
  }
}

}  // namespace

void decode_rans_blocks(RansJob* jobs, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) decode_group<4>(jobs + i);
  for (; i < n; ++i) decode_group<1>(jobs + i);
}

#elif defined(KVLAB_RANS_AVX2)

namespace {

static_assert(kRansLow == 1u << 16 && kRansLanes == 32);

// For each set of lanes (a bit each) that take a word in a round, each lane's word among the
// next eight: the number of taking lanes below it. AVX2 has no expanding load; a permute by this
// row does its work.
struct ExpandTable {
  alignas(32) std::int32_t index[256][8];
  constexpr ExpandTable() : index{} {
    for (int m = 0; m < 256; ++m) {
      int k = 0;
      for (int l = 0; l < 8; ++l) index[m][l] = (m >> l) & 1 ? k++ : 0;
    }
  }
};
constexpr ExpandTable kExpand{};

// Lanes (a bit each) as a vector mask, and back.
inline __m256i lanes_of(unsigned bits) {
  const __m256i one_each = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), one_each),
                            one_each);
}
inline unsigned bits_of(__m256i lanes) {
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(lanes)));
}

// One register of 8 lanes through a round's symbol step and its words, as step16 does for 16:
// `active` the lanes with a symbol, always the lowest ones. Gives the lanes whose symbol was the
// escape; false in `ok` when the words run out.
inline unsigned step8(__m256i& x, unsigned active, const std::uint32_t* slots, __m256i escape_start,
                      const std::uint8_t* words, std::size_t nwords, std::size_t& pos,
                      std::uint8_t* out, bool& ok) {
  const __m256i act = lanes_of(active);
  const __m256i slot = _mm256_and_si256(x, _mm256_set1_epi32(kSlotMask));
  const __m256i e = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(),
                                                reinterpret_cast<const int*>(slots), slot, act, 4);
  const __m256i f = _mm256_and_si256(_mm256_srli_epi32(e, 8), _mm256_set1_epi32(kSlotMask));
  const __m256i next = _mm256_add_epi32(
      _mm256_mullo_epi32(f, _mm256_srli_epi32(x, RansTable::kProbBits)), _mm256_srli_epi32(e, 20));
  x = _mm256_blendv_epi8(x, next, act);
  // Each lane's symbol (the entry's low byte), the eight packed into the low 8 bytes.
  const __m256i low_bytes = _mm256_shuffle_epi8(
      e, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12,
                          -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
  const __m128i symbols = _mm256_castsi256_si128(
      _mm256_permutevar8x32_epi32(low_bytes, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0)));
  if (active == 0xff) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), symbols);
  } else {
    alignas(16) std::uint8_t some[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(some), symbols);
    std::memcpy(out, some, static_cast<std::size_t>(std::popcount(active)));
  }
  // x < 2^16: the lanes that take a word.
  const unsigned need =
      bits_of(_mm256_cmpeq_epi32(_mm256_srli_epi32(x, 16), _mm256_setzero_si256())) & active;
  const auto k = static_cast<std::size_t>(std::popcount(need));
  if (k > nwords - pos) {
    ok = false;
    return 0;
  }
  // The next eight words (those past the block's end read as zeros), each to its lane. Without a
  // branch on `need`: some lane of eight takes a word in most rounds, at no predictable one.
  const std::size_t left = nwords - pos;
  __m128i w16;
  if (left >= 8) [[likely]] {
    w16 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(words + 2 * pos));
  } else {
    alignas(16) std::uint16_t tail[8] = {};
    std::memcpy(tail, words + 2 * pos, 2 * left);
    w16 = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
  }
  const __m256i w = _mm256_permutevar8x32_epi32(
      _mm256_cvtepu16_epi32(w16),
      _mm256_load_si256(reinterpret_cast<const __m256i*>(kExpand.index[need])));
  x = _mm256_blendv_epi8(x, _mm256_or_si256(_mm256_slli_epi32(x, 16), w), lanes_of(need));
  pos += k;
  // slot >= escape_start (both below 2^13: a signed compare is exact).
  return bits_of(_mm256_cmpgt_epi32(slot, _mm256_sub_epi32(escape_start, _mm256_set1_epi32(1)))) &
         active;
}

// G blocks side by side, each as four registers of eight lanes (decode_group's AVX-512 twin
// above has two of sixteen): the independent chains hide the gathers' latency.
template <int G>
void decode_group(RansJob* jobs) {
  constexpr int kRegs = kRansLanes / 8;
  __m256i x[G][kRegs];
  std::size_t pos[G], nwords[G], end = 0;
  const std::uint8_t* words[G];
  bool live[G];
  for (int g = 0; g < G; ++g) {
    RansJob& j = jobs[g];
    j.problem = nullptr;
    live[g] = j.bytes >= kRansStateBytes && (j.bytes - kRansStateBytes) % 2 == 0;
    if (!live[g]) {
      j.problem = kBadSize;
      for (int r = 0; r < kRegs; ++r) x[g][r] = _mm256_setzero_si256();
      continue;
    }
    for (int r = 0; r < kRegs; ++r) {
      x[g][r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(j.block + 32 * r));
    }
    words[g] = j.block + kRansStateBytes;
    nwords[g] = (j.bytes - kRansStateBytes) / 2;
    pos[g] = 0;
    end = std::max(end, j.count);
  }
  const std::uint32_t* slots = jobs[0].table->slot_table();
  const __m256i escape_start = _mm256_set1_epi32(static_cast<int>(jobs[0].table->escape_start()));
  for (std::size_t base = 0; base < end; base += kRansLanes) {
    for (int g = 0; g < G; ++g) {
      RansJob& j = jobs[g];
      if (!live[g] || base >= j.count) continue;
      const std::size_t active = std::min<std::size_t>(kRansLanes, j.count - base);
      bool ok = true;
      std::uint8_t* out = j.out + base;
      std::uint32_t escapes = 0;
      for (int r = 0; r < kRegs && ok; ++r) {
        const std::size_t first = 8 * static_cast<std::size_t>(r);
        if (active <= first) break;
        const unsigned lanes = active - first >= 8 ? 0xffu : (1u << (active - first)) - 1;
        escapes |=
            step8(x[g][r], lanes, slots, escape_start, words[g], nwords[g], pos[g], out + first, ok)
            << first;
      }
      if (escapes != 0 && ok) [[unlikely]] {
        alignas(32) std::uint32_t lanes[kRansLanes];
        for (int r = 0; r < kRegs; ++r) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(lanes + 8 * r), x[g][r]);
        }
        ok = finish_escapes(lanes, escapes, words[g], nwords[g], pos[g], out);
        for (int r = 0; r < kRegs; ++r) {
          x[g][r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes + 8 * r));
        }
      }
      if (!ok) {
        j.problem = kWordsRunOut;
        live[g] = false;
      }
    }
  }
  const __m256i low = _mm256_set1_epi32(static_cast<int>(kRansLow));
  for (int g = 0; g < G; ++g) {
    if (!live[g]) continue;
    if (pos[g] != nwords[g]) {
      jobs[g].problem = kWordsLeft;
      continue;
    }
    for (int r = 0; r < kRegs; ++r) {
      if (bits_of(_mm256_cmpeq_epi32(x[g][r], low)) != 0xffu) jobs[g].problem = kBadEnd;
    }
  }
}

}  // namespace

void decode_rans_blocks(RansJob* jobs, std::size_t n) {
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) decode_group<4>(jobs + i);
  for (; i < n; ++i) decode_group<1>(jobs + i);
}

#else

void decode_rans_blocks(RansJob* jobs, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    RansJob& j = jobs[i];
    j.problem = decode_rans_block_scalar(j.block, j.bytes, j.count, *j.table, j.out);
  }
}

#endif

const char* decode_rans_block(const std::uint8_t* block, std::size_t bytes, std::size_t count,
                              const RansTable& table, std::uint8_t* out) {
  RansJob job{block, bytes, count, &table, out, nullptr};
  decode_rans_blocks(&job, 1);
  return job.problem;
}

}  // namespace kvlab::detail
