// Entropy coding of uint8 quantization codes (the codes of QuantizedTensor, laid out
// [token][head][dim]) in KVComp's block layout (Jiang et al. 2025, "KVComp", Sec. 3.3): per head,
// blocks of `block_size` consecutive tokens; every vector (one token of one head, `dim` codes) is
// its own bit stream, so any block and any vector in it decodes on its own and blocks append
// without touching earlier bytes. Three codecs share the layout and this interface so they can be
// compared on the same data: fixed-width bit packing, per-group variable width, and canonical
// length-limited Huffman with a shared codebook; a fourth, interleaved rANS over the same book's
// symbols, codes a whole block as one stream of 32 lanes instead (no per-vector bit counts; a
// vector decodes with its block). The byte-exact contract is docs/FORMAT.md.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "kvlab/engine/codec/huffman_book.h"
#include "kvlab/engine/core/aligned.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

enum class CodecKind : std::uint8_t { BitPack = 0, VarWidth = 1, Huffman = 2, Rans = 3 };
// Every codec, in CodecKind order (the index of a codec's entry in per-codec arrays).
inline constexpr std::array<CodecKind, 4> kCodecKinds = {CodecKind::BitPack, CodecKind::VarWidth,
                                                         CodecKind::Huffman, CodecKind::Rans};
std::string_view codec_id(CodecKind kind);
// Codecs that code with a codebook (Huffman, and rANS with the book's table).
constexpr bool needs_book(CodecKind k) {
  return k == CodecKind::Huffman || k == CodecKind::Rans;
}  // "bitpack", "varwidth", "huffman", "rans"
Result<CodecKind> parse_codec(std::string_view id);

struct CodecConfig {
  CodecKind kind = CodecKind::Huffman;
  int block_size = 64;  // tokens per block, 1..65535
  // BitPack only: 2, 4 or 8; 0 picks the smallest of those that holds the largest code given to
  // encode_codes(). Later appends must fit the chosen width.
  int bitpack_width = 0;
};

// One K or V tensor's codes, encoded. Blocks are ordered token-block major, then head: block
// b = token_block * heads + head, so appending tokens only adds blocks at the end.
struct EncodedCodes {
  // The codec's own header (kind, width, block size): counted in metadata_bytes().
  static constexpr std::uint64_t kHeaderBytes = 4;

  CodecKind kind = CodecKind::Huffman;
  int tokens = 0, heads = 0, dim = 0, block_size = 0;
  int bitpack_width = 0;  // BitPack: 2, 4 or 8; else 0
  HugePageBytes payload;  // huge pages from 4 MiB up, no zero-fill on resize
  // Huffman and VarWidth: byte offset of each block in `payload`, and the bit count of every
  // vector in block order (a block's vectors are contiguous, token order). rANS keeps the
  // offsets only; BitPack keeps neither: its sizes follow from the shape and width.
  std::vector<std::uint32_t> block_offsets;
  std::vector<std::uint16_t> vector_bits;

  int token_blocks() const { return block_size > 0 ? (tokens + block_size - 1) / block_size : 0; }
  int block_count() const { return token_blocks() * heads; }
  std::uint64_t payload_bytes() const { return payload.size(); }
  // VarWidth's 4-bit group headers; they sit inside the payload (part of payload_bytes()).
  std::uint64_t header_bits() const;
  // Offsets, bit counts and the codec header. The Huffman codebook (or rANS table) is shared per
  // layer and K/V, so it is counted by its owner (codebook_bytes()).
  std::uint64_t metadata_bytes() const;
  std::uint64_t total_bytes() const { return payload_bytes() + metadata_bytes(); }
};

// Serialized bytes of the table a codec keeps per layer and K or V: the Huffman book's lengths,
// the rANS frequencies, or nothing.
std::uint64_t codebook_bytes(CodecKind kind);

// Encodes codes [tokens][heads][dim]. `book` is required for Huffman and rANS (which codes with
// book->rans(): a book made with its table) and ignored otherwise.
Result<EncodedCodes> encode_codes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                  int dim, const CodecConfig& config,
                                  const HuffmanCodebook* book = nullptr);

// The bytes encode_codes(codes, ...) would give (EncodedCodes::total_bytes()), and the same
// error where it would fail, counted without writing the streams: for a codec shown beside the
// one a run uses.
Result<std::uint64_t> encoded_bytes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                    int dim, const CodecConfig& config,
                                    const HuffmanCodebook* book = nullptr);

// Appends `tokens` new tokens [tokens][heads][dim] as new blocks. The existing tensor must end
// on a block boundary (tokens % block_size == 0) so no earlier byte changes; the result equals
// encoding all tokens at once.
Status append_tokens(EncodedCodes& encoded, std::span<const std::uint8_t> codes, int tokens,
                     const HuffmanCodebook* book = nullptr);

// Structural checks of everything but the bit streams' contents: sizes, offsets, bit counts.
Status validate_encoded(const EncodedCodes& encoded);

// Decodes the whole tensor into `out` (tokens*heads*dim codes, [token][head][dim]).
Status decode_codes(const EncodedCodes& encoded, const HuffmanCodebook* book,
                    std::span<std::uint8_t> out);
// Decodes tokens [first_token, last_token) into `out` ((last - first) * heads * dim codes): whole
// blocks, first_token a multiple of the block size and last_token one too or the tensor's end.
Status decode_token_range(const EncodedCodes& encoded, const HuffmanCodebook* book, int first_token,
                          int last_token, std::span<std::uint8_t> out);
// Decodes one vector (dim codes) reading only its block's metadata and its own bits.
Status decode_vector(const EncodedCodes& encoded, const HuffmanCodebook* book, int token, int head,
                     std::span<std::uint8_t> out);

}  // namespace kvlab
