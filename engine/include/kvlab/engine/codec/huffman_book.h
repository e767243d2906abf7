// Code statistics and the canonical, length-limited Huffman codebook KVComp shares across a
// layer's K or V blocks (docs/FORMAT.md, "Codebook", "Pair symbols", "Escape"). The block layout
// and the codecs that use it are code_codec.h's; the per-vector streams are the private
// codec_streams.h's, which need only this header.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvlab/engine/codec/rans_table.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

using CodeCounts = std::array<std::uint64_t, 256>;

// Counts of each code value.
CodeCounts count_codes(std::span<const std::uint8_t> codes);
// Order-0 Shannon entropy in bits per code: the lower bound of any code-by-code coder.
double shannon_entropy_bits(const CodeCounts& histogram);

// Counts of each pair of consecutive codes (2i, 2i+1) inside each vector of `dim` codes, as the
// byte first | second << 4 (a vector of odd length ends in a pair whose second code is 0). Every
// code must be below 16; the caller checks.
CodeCounts count_code_pairs(std::span<const std::uint8_t> codes, int dim);

// A canonical Huffman code over 256 byte symbols plus an escape symbol, with code lengths at
// most kMaxCodeLength so one lookup in a 2^12-entry table decodes a symbol. A symbol is either
// one code value, or (pairs()) a pair of codes below 16 as the byte first | second << 4: then
// each lookup yields two codes per symbol, and the code lengths, whole bits per pair, come
// within ~1% of the entropy where whole bits per code cannot (docs/FORMAT.md, "Pair symbols").
// Symbols that never appeared in the histogram the book was built from are written as the
// escape code followed by the 8-bit symbol, so codes appended after the prefill always encode
// (docs/FORMAT.md, "Escape").
class HuffmanCodebook {
 public:
  static constexpr int kMaxCodeLength = 12;
  static constexpr int kSymbols = 257;  // 256 code values + escape
  static constexpr int kEscape = 256;
  static constexpr int kTableSize = 1 << kMaxCodeLength;
  static constexpr std::size_t kSerializedBytes = (kSymbols + 1) / 2;  // 4 bits per length

  // An empty book: every length 0. Usable only after assignment from a factory.
  HuffmanCodebook() = default;

  // Optimal length-limited code (package-merge) for the histogram of symbols (of codes, or of
  // count_code_pairs() when `pairs`); the escape gets weight 1. With `with_rans`, also the rANS
  // table of the same histogram (RansTable::from_histogram), which CodecKind::Rans codes with.
  static Result<HuffmanCodebook> from_histogram(const CodeCounts& histogram, bool pairs = false,
                                                bool with_rans = false);
  // Rebuilds a book from its 257 code lengths (0 = no code), checking Kraft's inequality, the
  // length limit and that every symbol is encodable (its own code or the escape).
  static Result<HuffmanCodebook> from_lengths(std::span<const std::uint8_t> lengths,
                                              bool pairs = false);
  static Result<HuffmanCodebook> deserialize(std::span<const std::uint8_t> bytes);
  // 257 lengths, two per byte, low nibble first, then the pair flag in the last byte's high
  // nibble (0 = single codes, 1 = pairs): kSerializedBytes bytes.
  std::vector<std::uint8_t> serialize() const;
  std::uint64_t serialized_bytes() const { return kSerializedBytes; }

  // True when a symbol is a pair of codes below 16 (first | second << 4).
  bool pairs() const { return m_pairs; }
  // Symbols a vector of `dim` codes takes: dim, or (dim + 1) / 2 for pairs.
  int symbols_per_vector(int dim) const { return m_pairs ? (dim + 1) / 2 : dim; }

  // Code length of a symbol (0..256); 0 when the symbol has no code of its own.
  int length(int symbol) const { return m_lengths[static_cast<std::size_t>(symbol)]; }
  const std::array<std::uint8_t, kSymbols>& lengths() const { return m_lengths; }
  // Canonical code value of a symbol, most significant bit = first bit on the stream.
  std::uint32_t code(int symbol) const { return m_codes[static_cast<std::size_t>(symbol)]; }
  // Bits spent on one symbol, the escape and its 8 raw bits included.
  int cost_bits(std::uint8_t value) const { return m_enc_len[value]; }
  // Sum over coded symbols of 2^-length; at most 1.
  double kraft_sum() const;

  // Encoder table: bit pattern in stream order (first bit = bit 0) and its length, per value.
  std::uint32_t enc_bits(std::uint8_t value) const { return m_enc_bits[value]; }
  // The same for values below 64 with a code of their own, packed for vector lookups:
  // enc_bits | cost_bits << 12 (both fit, as kMaxCodeLength is 12); 0 for an escaped value.
  const std::array<std::uint16_t, 64>& enc_small() const { return m_enc_small; }
  // Decoder table indexed by the next 12 stream bits: (length << 9) | symbol, 0 = invalid code.
  const std::uint16_t* decode_table() const { return m_table.data(); }

  // The same symbols' frequencies for the rANS codec (CodecKind::Rans), or null: only books made
  // for it carry one (from_histogram's `with_rans`, use_rans), so a Huffman cache holds no rANS
  // tables. Its serialized table replaces this book's when a tensor is rANS-coded
  // (RansTable::kSerializedBytes).
  const RansTable* rans() const { return m_rans ? &*m_rans : nullptr; }
  // Codes rANS tensors with `table` (built from the same histogram, or a stored table read back
  // with RansTable::deserialize); its symbol kind must be this book's.
  Status use_rans(RansTable table);

 private:
  Status build_tables();

  std::array<std::uint8_t, kSymbols> m_lengths{};
  std::array<std::uint32_t, kSymbols> m_codes{};
  std::array<std::uint32_t, 256> m_enc_bits{};
  std::array<std::uint8_t, 256> m_enc_len{};
  std::array<std::uint16_t, 64> m_enc_small{};
  std::vector<std::uint16_t> m_table;
  std::optional<RansTable> m_rans;
  bool m_pairs = false;
};

// The book KVComp keeps for a layer's K or V (docs/FORMAT.md, "Pair symbols"), built from the
// prefill's codes [vectors][dim]. `max_code` is the largest code the quantizer can give this
// tensor, later tokens included (kvcomp_max_code()), not the largest the prefill happens to hold:
// a pair book cannot code a code above 15, and a constant prefill holds only zeros. The book
// codes pairs when max_code < 16 and the pair book codes the prefill in fewer bits than the
// single-code book; else it is the single-code book (pass 255 to ask for that one). `counts` is
// count_codes(codes), which the caller has usually counted already.
// `with_rans`: the chosen book also carries the rANS table of its histogram (CodecKind::Rans).
Result<HuffmanCodebook> choose_codebook(std::span<const std::uint8_t> codes, int dim, int max_code,
                                        const CodeCounts& counts, bool with_rans = false);

// Mean bits a code of each value takes when `codes` [vectors][dim] go through `book`, escapes
// included (0 for values that do not occur). Single-code books give each value its cost_bits; a
// pair book splits each pair's bits evenly between its two codes. `counts` is count_codes(codes).
std::array<double, 256> mean_code_bits(std::span<const std::uint8_t> codes, int dim,
                                       const HuffmanCodebook& book, const CodeCounts& counts);

}  // namespace kvlab
