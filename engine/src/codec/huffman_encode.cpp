// Huffman streams written (docs/FORMAT.md): each vector's codes, or pairs of codes for a pair
// book, as the book's code words, bit-aligned one after another.
#include <algorithm>

#include "codec/codec_streams.h"

namespace kvlab::detail {

namespace {

// Writes `dim` symbols of the book.
void encode_symbols(const std::uint8_t* codes, int dim, const HuffmanCodebook& book,
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
