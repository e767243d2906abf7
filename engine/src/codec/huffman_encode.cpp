// Huffman streams written (docs/FORMAT.md): each vector's codes, or pairs of codes for a pair
// book, as the book's code words, bit-aligned one after another.
#include <algorithm>

#if defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#endif

#include "codec/codec_streams.h"

namespace kvlab::detail {

namespace {

// Appends `len` bits (`len` <= 56; fewer than 8 bits are pending) to the cursor's accumulator,
// stores it whole and moves on by the bytes it completed.
inline void put_bits(BitWriter::Cursor& c, std::uint64_t bits, unsigned len) {
  c.acc |= bits << c.pending;
  c.pending += len;
  store_le64(c.p, c.acc);
  c.p += c.pending >> 3;
  c.acc >>= c.pending & ~7u;
  c.pending &= 7;
}

// Writes codes [i, end) four at a time, then one at a time.
inline void put_codes(BitWriter::Cursor& c, const std::uint8_t* codes, int i, int end,
                      const HuffmanCodebook& book) {
  // Four codes joined before they meet the accumulator when they fit in 56 bits (always, but
  // for escapes), else two and two (<= 20 bits each): the chain through `pending` is one add
  // per four codes. Joining them first keeps the stream bit for bit what one code at a time
  // writes.
  const auto code = [&](int k) { return std::uint64_t{book.enc_bits(codes[k])}; };
  const auto length = [&](int k) { return static_cast<unsigned>(book.cost_bits(codes[k])); };
  for (; i + 4 <= end; i += 4) {
    const unsigned l0 = length(i), l1 = length(i + 1), l2 = length(i + 2), l3 = length(i + 3);
    const std::uint64_t first = code(i) | code(i + 1) << l0;
    const std::uint64_t second = code(i + 2) | code(i + 3) << l2;
    if (l0 + l1 + l2 + l3 <= 56) {
      put_bits(c, first | second << (l0 + l1), l0 + l1 + l2 + l3);
    } else {
      put_bits(c, first, l0 + l1);
      put_bits(c, second, l2 + l3);
    }
  }
  for (; i < end; ++i) put_bits(c, code(i), length(i));
}

#if defined(__AVX512BW__) && defined(__AVX512VL__)
constexpr int kVectorCodes = 32;

// 32 codes looked up in the book's enc_small table (two registers) and joined four by four in
// 64-bit lanes: group m's bits (codes 4m first, at bit 0) in bits[m], its length in lens[m]
// (at most 48). False, with nothing written, when a code is 64 or more or has no code of its
// own (an escape): the caller writes those 32 through the tables.
inline bool join_small_codes(const std::uint8_t* codes, __m512i table_lo, __m512i table_hi,
                             std::uint64_t* bits, std::uint64_t* lens) {
  const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
  if (_mm256_test_epi8_mask(c, _mm256_set1_epi8(static_cast<char>(0xc0))) != 0) return false;
  // Entry per code in 16-bit lanes: its bits, and its length in the top 4 bits (0: escaped).
  const __m512i e = _mm512_permutex2var_epi16(table_lo, _mm512_cvtepu8_epi16(c), table_hi);
  if (_mm512_testn_epi16_mask(e, _mm512_set1_epi16(static_cast<short>(0xf000))) != 0) {
    return false;
  }
  // Pairs in 32-bit lanes: the even code's bits, then the odd code's above them.
  const __m512i low12 = _mm512_set1_epi32(0xfff);
  const __m512i first_len = _mm512_and_si512(_mm512_srli_epi32(e, 12), _mm512_set1_epi32(0xf));
  const __m512i second = _mm512_srli_epi32(e, 16);
  const __m512i pair_bits = _mm512_or_si512(
      _mm512_and_si512(e, low12), _mm512_sllv_epi32(_mm512_and_si512(second, low12), first_len));
  const __m512i pair_len = _mm512_add_epi32(first_len, _mm512_srli_epi32(second, 12));
  // Fours in 64-bit lanes, the same way.
  const __m512i low32 = _mm512_set1_epi64(0xffffffff);
  const __m512i lead_len = _mm512_and_si512(pair_len, low32);
  _mm512_storeu_si512(
      bits, _mm512_or_si512(_mm512_and_si512(pair_bits, low32),
                            _mm512_sllv_epi64(_mm512_srli_epi64(pair_bits, 32), lead_len)));
  _mm512_storeu_si512(lens, _mm512_add_epi64(lead_len, _mm512_srli_epi64(pair_len, 32)));
  return true;
}
#endif

// Writes `dim` symbols of the book. Single-code books (KVComp's codes are below 64) look their
// codes up 32 at a time in registers, so the scalar part only adds finished groups of four to
// the stream; the stream is bit for bit the one put_codes writes.
void encode_symbols(const std::uint8_t* codes, int dim, const HuffmanCodebook& book,
                    BitWriter& out) {
  BitWriter::Cursor c = out.begin(static_cast<std::size_t>(dim) * kMaxStepBits / 8 + 8);
  int i = 0;
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  if (!book.pairs() && dim >= kVectorCodes) {
    const __m512i table_lo = _mm512_loadu_si512(book.enc_small().data());
    const __m512i table_hi = _mm512_loadu_si512(book.enc_small().data() + 32);
    // A piece of up to kPieceChunks chunks is looked up first and its groups written after:
    // reading a group back just after its 64-byte store would wait for the store to reach the
    // cache (a load inside a wide store is not forwarded), a wait the piece's other chunks hide.
    constexpr int kPieceChunks = 8;
    alignas(64) std::uint64_t bits[kPieceChunks][kVectorCodes / 4];
    alignas(64) std::uint64_t lens[kPieceChunks][kVectorCodes / 4];
    bool joined[kPieceChunks];
    while (i + kVectorCodes <= dim) {
      const int chunks = std::min(kPieceChunks, (dim - i) / kVectorCodes);
      for (int k = 0; k < chunks; ++k) {
        joined[k] =
            join_small_codes(codes + i + k * kVectorCodes, table_lo, table_hi, bits[k], lens[k]);
      }
      for (int k = 0; k < chunks; ++k, i += kVectorCodes) {
        if (!joined[k]) {
          put_codes(c, codes, i, i + kVectorCodes, book);
          continue;
        }
        for (int m = 0; m < kVectorCodes / 4; m += 2) {
          // Eight codes at once where they fit in 56 bits, as they do but for long codes.
          const auto l0 = static_cast<unsigned>(lens[k][m]);
          const auto l1 = static_cast<unsigned>(lens[k][m + 1]);
          if (l0 + l1 <= 56) {
            put_bits(c, bits[k][m] | bits[k][m + 1] << l0, l0 + l1);
          } else {
            put_bits(c, bits[k][m], l0);
            put_bits(c, bits[k][m + 1], l1);
          }
        }
      }
    }
  }
#endif
  put_codes(c, codes, i, dim, book);
  out.commit(c);
}

}  // namespace

void encode_huffman_vector(const std::uint8_t* codes, int dim, const HuffmanCodebook& book,
                           BitWriter& out) {
  if (!book.pairs()) {
    encode_symbols(codes, dim, book, out);
    return;
  }
  // Symbols in chunks through a small buffer; the stream is the same as all at once.
  constexpr int kChunk = 256;
  std::uint8_t syms[kChunk];
  const int whole = dim / 2;  // pairs of two codes; an odd dim adds one (code, 0)
  for (int p0 = 0; p0 < whole; p0 += kChunk) {
    const int n = std::min(kChunk, whole - p0);
    const std::uint8_t* c = codes + 2 * p0;
    for (int k = 0; k < n; ++k) syms[k] = static_cast<std::uint8_t>(c[2 * k] | (c[2 * k + 1] << 4));
    encode_symbols(syms, n, book, out);
  }
  if (dim % 2 != 0) {
    syms[0] = codes[dim - 1];
    encode_symbols(syms, 1, book, out);
  }
}

}  // namespace kvlab::detail
