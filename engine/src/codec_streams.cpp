// Per-vector streams of the Huffman and per-group variable-width codecs (docs/FORMAT.md).
// Huffman decoding is table-driven from a 64-bit bit buffer refilled without branches. One
// stream is latency-bound (lookup -> shift -> lookup), so a block's vectors decode four at a
// time, and each lookup takes up to three codes (multi-symbol table). Streams whose loads cannot
// leave the buffer whatever their bits say decode without per-code checks and are checked once
// at the end; any failure re-decodes with the checked decoder, which names the problem.
#include <algorithm>
#include <cstring>

#include "codec_streams.h"

namespace kvlab::detail {

namespace {

constexpr std::uint32_t kIndexMask = HuffmanCodebook::kTableSize - 1;
constexpr std::uint32_t kEscapeSymbol = HuffmanCodebook::kEscape;
// Bits one table step can take: an escape code and its 8 raw bits.
constexpr std::uint64_t kMaxStepBits = HuffmanCodebook::kMaxCodeLength + 8;
// Vectors decoded side by side: enough independent chains to cover a lookup's latency while
// their state (4 registers each) still fits x86-64's 16 general registers with little spilling.
constexpr int kInterleave = 4;

// True when a stream starting at `start_bit` that takes at most kMaxStepBits per code of its
// `dim` codes keeps every 8-byte load inside data[0, readable), whatever its bits say: then it
// can be decoded without per-code bounds checks (checked once at the end instead). With
// `8 * next == pos + count` and count < 64, a refill at bit `pos` reads bytes below pos / 8 + 16.
bool loads_stay_inside(std::size_t readable, std::uint64_t start_bit, int dim) {
  return (start_bit + kMaxStepBits * static_cast<std::uint64_t>(dim)) / 8 + 16 <= readable;
}

// One Huffman stream decoded without bounds checks (see loads_stay_inside): a 64-bit buffer with
// branchless refill (F. Giesen, "Reading bits in far too many ways", variant 4); after a refill
// it holds >= 56 bits, enough for one table step. Invariant: 8 * (next - base) == pos + count.
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
  unsigned len = entry >> 9;
  std::uint32_t sym = entry & 0x1ff;
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

// Up to kMultiSymbols codes with one lookup in the multi-symbol table, without a refill: the
// buffer must hold >= 12 bits. Stores 4 bytes at `out` (the bytes past the decoded codes are
// overwritten by later steps), so the vector must have at least 4 codes left.
inline void multi_step(FastStream& s, const std::uint8_t* multi, const std::uint16_t* single) {
  std::uint32_t e;
  std::memcpy(&e, multi + 4 * (s.buf & kIndexMask), sizeof e);
  if ((e & 0xc0) == 0) [[unlikely]] {
    s = escape_step(s, single);
    return;
  }
  const std::uint32_t syms = e >> 8;
  std::memcpy(s.out, &syms, sizeof syms);
  s.out += (e >> 6) & 3;
  s.buf >>= e & 63;
  s.count -= e & 63;
}

// Steps per refill: after a refill >= 56 bits are buffered and a step takes at most 12 (escapes
// refill themselves), so 4 steps never run dry. They write at most 3 * 3 + 4 bytes.
constexpr int kStepsPerRefill = 4;
constexpr std::ptrdiff_t kRoomForSteps = 3 * (kStepsPerRefill - 1) + 4;

inline void multi_steps(FastStream& s, const std::uint8_t* multi, const std::uint16_t* single) {
  refill(s);
#pragma GCC unroll 4
  for (int j = 0; j < kStepsPerRefill; ++j) multi_step(s, multi, single);
}

// Decodes the rest of one stream up to `end_out`, then checks it used exactly `end_bit` bits.
bool finish_stream(FastStream& s, const std::uint8_t* base, std::uint8_t* end_out,
                   std::uint64_t end_bit, const std::uint8_t* multi, const std::uint16_t* single) {
  while (end_out - s.out >= kRoomForSteps) multi_steps(s, multi, single);
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

// kInterleave vectors in lock step while each has room for kStepsPerRefill steps, then each alone.
// False on any problem: the caller re-decodes with the checked decoder for the exact message.
bool decode_group_fast(const std::uint8_t* base, const std::uint64_t* bits, int dim,
                       std::uint8_t* const* outs, const std::uint8_t* multi,
                       const std::uint16_t* single) {
  FastStream s[kInterleave];
  for (int k = 0; k < kInterleave; ++k) s[k] = open_stream(base, bits[k], outs[k]);
  std::uint8_t* ends[kInterleave];
  for (int k = 0; k < kInterleave; ++k) ends[k] = outs[k] + dim;
  for (;;) {
    bool room = true;
    for (int k = 0; k < kInterleave; ++k) room &= ends[k] - s[k].out >= kRoomForSteps;
    if (!room) break;
    for (int k = 0; k < kInterleave; ++k) refill(s[k]);
#pragma GCC unroll 4
    for (int j = 0; j < kStepsPerRefill; ++j) {
#pragma GCC unroll 4
      for (int k = 0; k < kInterleave; ++k) multi_step(s[k], multi, single);
    }
  }
  // The streams end at different steps; keep them together one step per refill while each has
  // room for one, so less of the tail runs as a single latency-bound chain.
  for (;;) {
    bool room = true;
    for (int k = 0; k < kInterleave; ++k) room &= ends[k] - s[k].out >= 4;
    if (!room) break;
    for (int k = 0; k < kInterleave; ++k) {
      refill(s[k]);
      multi_step(s[k], multi, single);
    }
  }
  bool ok = true;
  for (int k = 0; k < kInterleave; ++k) {
    ok = ok && finish_stream(s[k], base, ends[k], bits[k + 1], multi, single);
  }
  return ok;
}

const std::uint8_t* multi_table(const HuffmanCodebook& book) {
  return reinterpret_cast<const std::uint8_t*>(book.decode_table() + HuffmanCodebook::kTableSize);
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

}  // namespace

void encode_huffman_vector(const std::uint8_t* codes, int dim, const HuffmanCodebook& book,
                           BitWriter& out) {
  // Two codes (<= 20 bits each) per 64-bit store: at most 7 + 40 bits are pending. The pair is
  // joined before it meets the accumulator, so the chain through `pending` is one add per pair.
  BitWriter::Cursor c = out.begin(static_cast<std::size_t>(dim) * kMaxStepBits / 8 + 8);
  int i = 0;
  for (; i < dim; i += 2) {
    const unsigned len0 = static_cast<unsigned>(book.cost_bits(codes[i]));
    std::uint64_t pair = book.enc_bits(codes[i]);
    unsigned len = len0;
    if (i + 1 < dim) {
      pair |= static_cast<std::uint64_t>(book.enc_bits(codes[i + 1])) << len0;
      len += static_cast<unsigned>(book.cost_bits(codes[i + 1]));
    }
    c.acc |= pair << c.pending;
    c.pending += len;
    store_le64(c.p, c.acc);
    c.p += c.pending >> 3;
    c.acc >>= c.pending & ~7u;
    c.pending &= 7;
  }
  out.commit(c);
}

DecodeProblem decode_huffman_vector(const std::uint8_t* data, std::size_t readable,
                                    std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                    const HuffmanCodebook& book, std::uint8_t* out) {
  if (loads_stay_inside(readable, start_bit, dim)) {
    FastStream s = open_stream(data, start_bit, out);
    if (finish_stream(s, data, out + dim, start_bit + bit_count, multi_table(book),
                      book.decode_table())) {
      return nullptr;
    }
  }
  return decode_huffman_checked(data, readable, start_bit, bit_count, dim, book, out);
}

BlockProblem decode_huffman_block(const std::uint8_t* data, std::size_t readable,
                                  std::uint64_t start_bit, const std::uint16_t* vector_bits,
                                  int count, int dim, const HuffmanCodebook& book,
                                  std::uint8_t* out, std::size_t out_stride) {
  const std::uint16_t* const single = book.decode_table();
  const std::uint8_t* const multi = multi_table(book);
  std::uint64_t bit = start_bit;
  int i = 0;
  for (; i + kInterleave <= count; i += kInterleave) {
    std::uint64_t bits[kInterleave + 1];  // start of each vector, then the group's end
    std::uint8_t* outs[kInterleave];
    for (int k = 0; k < kInterleave; ++k) {
      bits[k] = bit;
      bit += vector_bits[i + k];
      outs[k] = out + static_cast<std::size_t>(i + k) * out_stride;
    }
    bits[kInterleave] = bit;
    if (loads_stay_inside(readable, bits[kInterleave - 1], dim) &&
        decode_group_fast(data, bits, dim, outs, multi, single)) {
      continue;
    }
    for (int k = 0; k < kInterleave; ++k) {
      if (DecodeProblem p = decode_huffman_checked(data, readable, bits[k], vector_bits[i + k], dim,
                                                   book, outs[k])) {
        return {i + k, p};
      }
    }
  }
  for (; i < count; ++i) {
    if (DecodeProblem p = decode_huffman_vector(data, readable, bit, vector_bits[i], dim, book,
                                                out + static_cast<std::size_t>(i) * out_stride)) {
      return {i, p};
    }
    bit += vector_bits[i];
  }
  return {};
}

void encode_varwidth_vector(const std::uint8_t* codes, int dim, BitWriter& out) {
  // At most 8 bits per code plus a 4-bit header per 16 codes.
  BitWriter::Cursor c = out.begin(static_cast<std::size_t>(dim) * 2 + 8);
  auto put = [&c](std::uint32_t bits, unsigned count) {  // count <= 8
    c.acc |= static_cast<std::uint64_t>(bits) << c.pending;
    c.pending += count;
    if (c.pending >= 32) {
      store_le64(c.p, c.acc);
      c.p += 4;
      c.acc >>= 32;
      c.pending -= 32;
    }
  };
  for (int g = 0; g < dim; g += kVarWidthGroup) {
    const int n = std::min(kVarWidthGroup, dim - g);
    unsigned max_code = 0;
    for (int i = 0; i < n; ++i) max_code |= codes[g + i];  // same bit width as the maximum
    const auto width = static_cast<unsigned>(std::bit_width(max_code));
    put(width, 4);
    if (width == 0) continue;
    for (int i = 0; i < n; ++i) put(codes[g + i], width);
  }
  // Leave the BitWriter's invariant: fewer than 8 pending bits, the rest stored.
  store_le64(c.p, c.acc);
  c.p += c.pending >> 3;
  c.acc >>= c.pending & ~7u;
  c.pending &= 7;
  out.commit(c);
}

DecodeProblem decode_varwidth_vector(const std::uint8_t* data, std::size_t readable,
                                     std::uint64_t start_bit, std::uint32_t bit_count, int dim,
                                     std::uint8_t* out) {
  return with_bounded_stream(
      data, readable, start_bit, bit_count,
      [&](const std::uint8_t* base, std::uint64_t pos, std::uint64_t end) -> DecodeProblem {
        for (int g = 0; g < dim; g += kVarWidthGroup) {
          const int n = std::min(kVarWidthGroup, dim - g);
          if (pos + 4 > end) return "stream ends inside a group header";
          const auto width =
              static_cast<unsigned>((load_le64(base + (pos >> 3)) >> (pos & 7)) & 0xf);
          pos += 4;
          if (width > 8) return "group width header above 8 bits";
          if (pos + static_cast<std::uint64_t>(n) * width > end) {
            return "stream ends inside a group's codes";
          }
          const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
          for (int i = 0; i < n; ++i) {
            out[g + i] =
                static_cast<std::uint8_t>((load_le64(base + (pos >> 3)) >> (pos & 7)) & mask);
            pos += width;
          }
        }
        if (pos != end) return "bit count disagrees with the decoded codes";
        return nullptr;
      });
}

}  // namespace kvlab::detail
