// Huffman streams written (docs/FORMAT.md): each vector's codes, or pairs of codes for a pair
// book, as the book's code words, bit-aligned one after another.
#include <algorithm>

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

// Writes `dim` symbols of the book.
void encode_symbols(const std::uint8_t* codes, int dim, const HuffmanCodebook& book,
                    BitWriter& out) {
  // Four codes joined before they meet the accumulator when they fit in 56 bits (always, but
  // for escapes), else two and two (<= 20 bits each): the chain through `pending` is one add
  // per four codes. Joining them first keeps the stream bit for bit what one code at a time
  // writes.
  BitWriter::Cursor c = out.begin(static_cast<std::size_t>(dim) * kMaxStepBits / 8 + 8);
  const auto code = [&](int i) { return std::uint64_t{book.enc_bits(codes[i])}; };
  const auto length = [&](int i) { return static_cast<unsigned>(book.cost_bits(codes[i])); };
  int i = 0;
  for (; i + 4 <= dim; i += 4) {
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
  for (; i < dim; ++i) put_bits(c, code(i), length(i));
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
