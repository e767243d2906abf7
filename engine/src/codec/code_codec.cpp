// KVComp's block layout for code streams (Jiang et al. 2025, Sec. 3.3; docs/FORMAT.md): per head,
// blocks of `block_size` tokens; inside a block each vector is its own bit stream, bit-aligned
// after the previous one; a u16 bit count per vector and a u32 byte offset per block let any
// block or vector decode alone, and new blocks only ever go at the end of the payload.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include "codec/bitpack.h"
#include "codec/codec_streams.h"
#include "codec/rans_streams.h"
#include "kvlab/engine/codec/block_layout.h"
#include "kvlab/engine/codec/code_codec.h"

namespace kvlab {

namespace {

// Codecs whose blocks sit at byte offsets (all but BitPack); of those, the ones with a bit count
// per vector (all but rANS, whose block is one interleaved stream).
constexpr bool has_streams(CodecKind k) {
  return k == CodecKind::Huffman || k == CodecKind::VarWidth || k == CodecKind::Rans;
}
constexpr bool has_vector_bits(CodecKind k) {
  return k == CodecKind::Huffman || k == CodecKind::VarWidth;
}

// Where block b sits (block_layout.h, shared with the CUDA encoder and kernels).
using BlockPlace = block_layout::Place;
BlockPlace place_of(const EncodedCodes& e, int b) {
  return block_layout::place_of(b, e.heads, e.tokens, e.block_size);
}

std::string block_name(const EncodedCodes& e, int b) {
  const BlockPlace p = place_of(e, b);
  return fmt::format("{} codes: block {} (head {}, tokens {}..{})", codec_id(e.kind), b, p.head,
                     p.first_token, p.first_token + p.tokens - 1);
}

std::uint64_t bitpack_block_bytes(int tokens, int dim, int width) {
  return block_layout::packed_bytes(tokens, dim, width);
}

std::uint64_t bitpack_block_offset(const EncodedCodes& e, int b) {
  const BlockPlace p = place_of(e, b);
  return block_layout::bitpack_block_offset(p.token_block, p.head, e.heads, e.block_size, p.tokens,
                                            e.dim, e.bitpack_width);
}

Status check_shape(std::string_view what, int tokens, int heads, int dim, int block_size) {
  if (tokens < 0 || heads < 0 || dim < 0) {
    return make_error(fmt::format("{}: negative shape [{}, {}, {}]", what, tokens, heads, dim));
  }
  if (block_size < 1 || block_size > 65535) {
    return make_error(fmt::format("{}: block size {} outside 1..65535", what, block_size));
  }
  // Vector and block indices stay in int; element counts in size_t.
  const std::uint64_t vectors =
      static_cast<std::uint64_t>(tokens) * static_cast<std::uint64_t>(heads);
  if (vectors > static_cast<std::uint64_t>(std::numeric_limits<int>::max()) ||
      vectors * static_cast<std::uint64_t>(dim) > (std::uint64_t{1} << 40)) {
    return make_error(fmt::format("{}: shape [{}, {}, {}] too large", what, tokens, heads, dim));
  }
  return Ok{};
}

bool valid_width(int w) {
  return w == 2 || w == 4 || w == 8;
}

// The problem with the header fields and array sizes, if any (O(1)).
Status check_header(const EncodedCodes& e) {
  const std::string_view what = "encoded codes";
  KVLAB_TRY(check_shape(what, e.tokens, e.heads, e.dim, e.block_size));
  if (e.kind == CodecKind::BitPack) {
    if (!valid_width(e.bitpack_width)) {
      return make_error(fmt::format("bitpack codes: width {} is not 2, 4 or 8", e.bitpack_width));
    }
    if (!e.block_offsets.empty() || !e.vector_bits.empty()) {
      return make_error("bitpack codes: offsets or bit counts present (bitpack keeps none)");
    }
    return Ok{};
  }
  if (!has_streams(e.kind)) return make_error("encoded codes: unknown codec kind");
  if (e.bitpack_width != 0) {
    return make_error(
        fmt::format("{} codes: bitpack width {} set", codec_id(e.kind), e.bitpack_width));
  }
  if (e.block_offsets.size() != static_cast<std::size_t>(e.block_count())) {
    return make_error(fmt::format("{} codes: {} block offsets for {} blocks", codec_id(e.kind),
                                  e.block_offsets.size(), e.block_count()));
  }
  const std::uint64_t vectors =
      has_vector_bits(e.kind) ? static_cast<std::uint64_t>(e.tokens) * e.heads : 0;
  if (e.vector_bits.size() != vectors) {
    return make_error(fmt::format("{} codes: {} vector bit counts for {} vectors", codec_id(e.kind),
                                  e.vector_bits.size(), vectors));
  }
  return Ok{};
}

// Checks block b of a stream codec: its byte range lies in the payload, follows the previous
// block and holds exactly its vectors' bits rounded up to a byte. Gives its first byte.
Status check_block(const EncodedCodes& e, int b, std::uint64_t& begin) {
  const BlockPlace p = place_of(e, b);
  begin = e.block_offsets[static_cast<std::size_t>(b)];
  const std::uint64_t end = detail::block_end(e, b);
  if (b == 0 && begin != 0) {
    return make_error(fmt::format("{}: offset {} is not 0", block_name(e, b), begin));
  }
  if (begin > e.payload.size() || end > e.payload.size()) {
    return make_error(fmt::format("{}: byte range {}..{} past the payload end {}", block_name(e, b),
                                  begin, end, e.payload.size()));
  }
  if (end < begin) {
    return make_error(
        fmt::format("{}: offsets not increasing ({} then {})", block_name(e, b), begin, end));
  }
  if (e.kind == CodecKind::Rans) {
    if (end - begin < detail::kRansStateBytes || (end - begin) % 2 != 0) {
      return make_error(
          fmt::format("{}: {} bytes are not its 32 lane states and whole 16-bit words",
                      block_name(e, b), end - begin));
    }
    return Ok{};
  }
  std::uint64_t bits = 0;
  for (int i = 0; i < p.tokens; ++i)
    bits += e.vector_bits[p.first_vector + static_cast<std::uint64_t>(i)];
  if ((bits + 7) / 8 != end - begin) {
    return make_error(
        fmt::format("{}: vector bit counts sum to {} bits but the block holds {} bytes",
                    block_name(e, b), bits, end - begin));
  }
  return Ok{};
}

Status decode_one(const EncodedCodes& e, const HuffmanCodebook* book, int b, int i,
                  std::uint64_t start_bit, std::uint8_t* out) {
  const BlockPlace p = place_of(e, b);
  const std::uint16_t bits = e.vector_bits[p.first_vector + static_cast<std::uint64_t>(i)];
  const detail::DecodeProblem problem =
      e.kind == CodecKind::Huffman
          ? detail::decode_huffman_vector(e.payload.data(), e.payload.size(), start_bit, bits,
                                          e.dim, *book, out)
          : detail::decode_varwidth_vector(e.payload.data(), e.payload.size(), start_bit, bits,
                                           e.dim, out);
  if (problem == nullptr) return Ok{};
  return make_error(fmt::format("{}, vector {} (token {}, {} bits): {}", block_name(e, b), i,
                                p.first_token + i, bits, problem));
}

Status need_book(const EncodedCodes& e, const HuffmanCodebook* book) {
  if (needs_book(e.kind) && (book == nullptr || book->decode_table() == nullptr)) {
    return make_error(fmt::format("{} codes: no codebook given", codec_id(e.kind)));
  }
  if (e.kind == CodecKind::Rans && book->rans() == nullptr) {
    return make_error("rans codes: the codebook carries no rANS table");
  }
  return Ok{};
}

// A vector's symbols: its codes, or (pair book) its codes two to a byte, low nibble first, an
// odd last code alone (docs/FORMAT.md, "Pair symbols"). Gives the symbol count.
int vector_symbols(const std::uint8_t* codes, int dim, bool pairs, std::uint8_t* out) {
  if (!pairs) {
    std::memcpy(out, codes, static_cast<std::size_t>(dim));
    return dim;
  }
  int j = 0;
  for (int i = 0; i + 1 < dim; i += 2) {
    out[j++] = static_cast<std::uint8_t>(codes[i] | codes[i + 1] << 4);
  }
  if (dim % 2 != 0) out[j++] = codes[dim - 1];
  return j;
}

// The symbols of block (tokens [t0, t0 + n), head h) of codes [tokens][heads][dim], vector after
// vector, into `symbols`.
void block_symbols(const std::uint8_t* first, int n, std::size_t row, int dim, bool pairs,
                   std::vector<std::uint8_t>& symbols) {
  const int per_vector = pairs ? (dim + 1) / 2 : dim;
  symbols.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(per_vector));
  for (int i = 0; i < n; ++i) {
    vector_symbols(first + static_cast<std::size_t>(i) * row, dim, pairs,
                   symbols.data() + static_cast<std::size_t>(i) * per_vector);
  }
}

// The inverse of vector_symbols for a whole block: `n` vectors of `per_vector` symbols each into
// `dim` codes at out + i * row.
void block_codes(const std::uint8_t* symbols, int n, int per_vector, int dim, bool pairs,
                 std::uint8_t* out, std::size_t row) {
  for (int i = 0; i < n; ++i) {
    const std::uint8_t* s = symbols + static_cast<std::size_t>(i) * per_vector;
    std::uint8_t* o = out + static_cast<std::size_t>(i) * row;
    if (pairs) {
      detail::pair_symbols_to_codes(s, dim, o);
    } else {
      std::memcpy(o, s, static_cast<std::size_t>(dim));
    }
  }
}

// Decodes rANS blocks [b0, b1), whose byte ranges the caller has checked (check_block), into
// their codes at `out`, the block of token `first_token`'s first vector at out[0] (vector i of a
// block at its token's row). Blocks decode several at a time (detail::decode_rans_blocks);
// `symbols` is scratch.
Status decode_rans(const EncodedCodes& e, const HuffmanCodebook& book, int b0, int b1,
                   int first_token, std::uint8_t* out, std::size_t row,
                   std::vector<std::uint8_t>& symbols) {
  constexpr int kMaxBatch = 16;
  const int per_vector = book.symbols_per_vector(e.dim);
  const std::size_t block_symbols =
      static_cast<std::size_t>(e.block_size) * static_cast<std::size_t>(per_vector);
  // Up to 16 blocks at a time, in at most 4 MiB of scratch whatever the block size.
  const int batch = static_cast<int>(std::clamp<std::size_t>(
      (std::size_t{4} << 20) / std::max<std::size_t>(1, block_symbols), 1, kMaxBatch));
  symbols.resize(static_cast<std::size_t>(batch) * block_symbols);
  detail::RansJob jobs[kMaxBatch];
  for (int first = b0; first < b1; first += batch) {
    const int n = std::min(batch, b1 - first);
    for (int k = 0; k < n; ++k) {
      const int b = first + k;
      const std::uint64_t begin = e.block_offsets[static_cast<std::size_t>(b)];
      const std::uint64_t end = detail::block_end(e, b);
      const BlockPlace p = place_of(e, b);
      jobs[k] = {e.payload.data() + begin, end - begin,
                 static_cast<std::size_t>(p.tokens) * static_cast<std::size_t>(per_vector),
                 book.rans(), symbols.data() + static_cast<std::size_t>(k) * block_symbols};
    }
    detail::decode_rans_blocks(jobs, static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) {
      const int b = first + k;
      if (jobs[k].problem != nullptr) {
        return make_error(fmt::format("{}: {}", block_name(e, b), jobs[k].problem));
      }
      const BlockPlace p = place_of(e, b);
      block_codes(jobs[k].out, p.tokens, per_vector, e.dim, book.pairs(),
                  out + static_cast<std::size_t>(p.first_token - first_token) * row +
                      static_cast<std::size_t>(p.head) * static_cast<std::size_t>(e.dim),
                  row);
    }
  }
  return Ok{};
}

}  // namespace

void detail::pair_symbols_to_codes(const std::uint8_t* symbols, int dim, std::uint8_t* out) {
  int k = 0;
#if defined(__AVX512BW__) && defined(__AVX512CD__)
  for (; k + 64 <= dim; k += 64) {  // 32 symbols: each byte's nibbles to two bytes
    const __m512i w =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(symbols + k / 2)));
    const __m512i lo = _mm512_and_si512(w, _mm512_set1_epi16(0x0f));
    const __m512i hi = _mm512_slli_epi16(_mm512_srli_epi16(w, 4), 8);
    _mm512_storeu_si512(out + k, _mm512_or_si512(lo, hi));
  }
#elif defined(__AVX2__)
  for (; k + 32 <= dim; k += 32) {  // 16 symbols
    const __m256i w =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(symbols + k / 2)));
    const __m256i lo = _mm256_and_si256(w, _mm256_set1_epi16(0x0f));
    const __m256i hi = _mm256_slli_epi16(_mm256_srli_epi16(w, 4), 8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), _mm256_or_si256(lo, hi));
  }
#endif
  for (; k < dim; ++k) {
    const std::uint8_t b = symbols[k / 2];
    out[k] = static_cast<std::uint8_t>(k % 2 == 0 ? b & 0x0f : b >> 4);
  }
}

std::string_view codec_id(CodecKind kind) {
  switch (kind) {
    case CodecKind::BitPack:
      return "bitpack";
    case CodecKind::VarWidth:
      return "varwidth";
    case CodecKind::Huffman:
      return "huffman";
    case CodecKind::Rans:
      return "rans";
  }
  return "unknown";
}

std::uint64_t codebook_bytes(CodecKind kind) {
  return kind == CodecKind::Huffman ? HuffmanCodebook::kSerializedBytes
         : kind == CodecKind::Rans  ? RansTable::kSerializedBytes
                                    : 0;
}

Result<CodecKind> parse_codec(std::string_view id) {
  for (CodecKind k : kCodecKinds) {
    if (codec_id(k) == id) return k;
  }
  return make_error(
      fmt::format("unknown codec '{}' (expected bitpack, varwidth, huffman or rans)", id));
}

std::uint64_t EncodedCodes::header_bits() const {
  if (kind != CodecKind::VarWidth) return 0;
  const std::uint64_t groups =
      (static_cast<std::uint64_t>(dim) + detail::kVarWidthGroup - 1) / detail::kVarWidthGroup;
  return static_cast<std::uint64_t>(tokens) * heads * groups * 4;
}

std::uint64_t EncodedCodes::metadata_bytes() const {
  return kHeaderBytes + block_offsets.size() * sizeof(std::uint32_t) +
         vector_bits.size() * sizeof(std::uint16_t);
}

namespace {

// The empty tensor encode_codes starts from: kind, shape and BitPack's width.
Result<EncodedCodes> start_encoding(std::span<const std::uint8_t> codes, int tokens, int heads,
                                    int dim, const CodecConfig& config) {
  if (Status st = check_shape("encode codes", tokens, heads, dim, config.block_size); !st) {
    return st.error();
  }
  EncodedCodes e;
  e.kind = config.kind;
  e.heads = heads;
  e.dim = dim;
  e.block_size = config.block_size;
  if (config.kind == CodecKind::BitPack) {
    e.bitpack_width = config.bitpack_width;
    if (e.bitpack_width == 0) {
      const std::uint8_t max_code =
          codes.empty() ? 0 : *std::max_element(codes.begin(), codes.end());
      e.bitpack_width = max_code < 4 ? 2 : max_code < 16 ? 4 : 8;
    } else if (!valid_width(e.bitpack_width)) {
      return make_error(
          fmt::format("encode codes: bitpack width {} is not 0, 2, 4 or 8", config.bitpack_width));
    }
  } else if (!has_streams(config.kind)) {
    return make_error("encode codes: unknown codec kind");
  }
  return e;
}

// What append_tokens checks before it writes: the header, the shape, the book, the tensor's end
// on a block boundary, and that every code fits the codec.
Status check_append(const EncodedCodes& e, std::span<const std::uint8_t> codes, int tokens,
                    const HuffmanCodebook* book) {
  KVLAB_TRY(check_header(e));
  KVLAB_TRY(check_shape("append codes", tokens, e.heads, e.dim, e.block_size));
  KVLAB_TRY(need_book(e, book));
  if (e.tokens % e.block_size != 0) {
    return make_error(fmt::format(
        "{} codes: cannot append after {} tokens: the last block is partial (block size {})",
        codec_id(e.kind), e.tokens, e.block_size));
  }
  if (static_cast<std::uint64_t>(e.tokens) + tokens > std::numeric_limits<int>::max()) {
    return make_error(fmt::format("{} codes: too many tokens", codec_id(e.kind)));
  }
  const std::size_t row = static_cast<std::size_t>(e.heads) * static_cast<std::size_t>(e.dim);
  if (codes.size() != static_cast<std::size_t>(tokens) * row) {
    return make_error(fmt::format("{} codes: {} codes given for [{}, {}, {}]", codec_id(e.kind),
                                  codes.size(), tokens, e.heads, e.dim));
  }
  // The largest code first (a loop the compiler vectorizes), the offending one only if needed.
  std::uint8_t largest = 0;
  if (e.kind == CodecKind::BitPack || (needs_book(e.kind) && book->pairs())) {
    for (const std::uint8_t c : codes) largest = std::max(largest, c);
  }
  if (e.kind == CodecKind::BitPack && largest >= (1u << e.bitpack_width)) {
    const unsigned limit = 1u << e.bitpack_width;
    for (std::size_t i = 0; i < codes.size(); ++i) {
      if (codes[i] >= limit) {
        return make_error(fmt::format("bitpack codes: code {} at token {} does not fit {} bits",
                                      codes[i], e.tokens + static_cast<int>(i / row),
                                      e.bitpack_width));
      }
    }
  }
  if (needs_book(e.kind) && largest > 15) {
    for (std::size_t i = 0; i < codes.size(); ++i) {
      if (codes[i] > 15) {
        return make_error(fmt::format(
            "{} codes: code {} at token {} does not fit the codebook's 4-bit pair symbols "
            "(it was built from codes below 16)",
            codec_id(e.kind), codes[i], e.tokens + static_cast<int>(i / row)));
      }
    }
  }
  return Ok{};
}

std::string payload_too_large(CodecKind kind, int token) {
  return fmt::format(
      "{} codes: payload passes 4 GiB at token {}: u32 block offsets cannot address it",
      codec_id(kind), token);
}

std::string vector_too_long(CodecKind kind, int token, int head, std::uint64_t bits) {
  return fmt::format("{} codes: token {}, head {} takes {} bits, more than a u16 bit count holds",
                     codec_id(kind), token, head, bits);
}

// Bits one vector's stream takes, as encode_varwidth_vector or encode_huffman_vector write it.
std::uint64_t stream_bits(CodecKind kind, const std::uint8_t* codes, int dim,
                          const HuffmanCodebook* book) {
  std::uint64_t bits = 0;
  if (kind == CodecKind::VarWidth) {
    int g = 0;
#if defined(__AVX512BW__) && defined(__AVX512CD__)
    static_assert(detail::kVarWidthGroup == 16, "a group is one 128-bit lane");
    if (dim >= 64) {
      // Four groups a register: each lane's bytes OR-ed into its first byte, the width of that
      // byte from its leading zeros, and the widths summed once at the end.
      __m512i widths = _mm512_setzero_si512();
      for (; g + 64 <= dim; g += 64) {
        __m512i x = _mm512_loadu_si512(codes + g);
        x = _mm512_or_si512(x, _mm512_bsrli_epi128(x, 8));
        x = _mm512_or_si512(x, _mm512_bsrli_epi128(x, 4));
        x = _mm512_or_si512(x, _mm512_bsrli_epi128(x, 2));
        x = _mm512_or_si512(x, _mm512_bsrli_epi128(x, 1));
        const __m512i lane_or = _mm512_maskz_and_epi32(0x1111, x, _mm512_set1_epi32(0xff));
        widths = _mm512_add_epi32(
            widths, _mm512_sub_epi32(_mm512_set1_epi32(32), _mm512_lzcnt_epi32(lane_or)));
      }
      bits = 16 * static_cast<std::uint64_t>(_mm512_reduce_add_epi32(widths)) +
             4 * static_cast<std::uint64_t>(g / 16);
    }
#endif
    for (; g < dim; g += detail::kVarWidthGroup) {
      const int n = std::min(detail::kVarWidthGroup, dim - g);
      unsigned max_code = 0;
      for (int i = 0; i < n; ++i) max_code |= codes[g + i];
      bits += 4 + static_cast<std::uint64_t>(n) * static_cast<unsigned>(std::bit_width(max_code));
    }
    return bits;
  }
  if (!book->pairs()) return detail::sum_code_bits(codes, dim, detail::decode_tables(*book).cost);
  int i = 0;
  for (; i + 2 <= dim; i += 2) {
    bits += static_cast<unsigned>(
        book->cost_bits(static_cast<std::uint8_t>(codes[i] | (codes[i + 1] << 4))));
  }
  if (i < dim) bits += static_cast<unsigned>(book->cost_bits(codes[i]));
  return bits;
}

}  // namespace

Result<EncodedCodes> encode_codes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                  int dim, const CodecConfig& config, const HuffmanCodebook* book) {
  auto e = start_encoding(codes, tokens, heads, dim, config);
  if (!e) return e;
  // Room for the whole payload up front: growing it block by block copied it and faulted fresh
  // pages in again at every doubling, half of a Huffman encode's time. BitPack's size is exact;
  // a stream codec's is the most its vectors can take (pages it does not write are never
  // touched, so the excess costs address space, not memory).
  const auto heads64 = static_cast<std::uint64_t>(heads);
  const int full = tokens / e->block_size, rest = tokens % e->block_size;
  std::uint64_t most = 0;
  if (e->kind == CodecKind::BitPack) {
    most = block_layout::bitpack_payload_bytes(tokens, heads, dim, e->block_size, e->bitpack_width);
  } else if (e->kind == CodecKind::Rans) {
    // A symbol takes at most 16 bits plus an escape's 8 and a word; the states per block.
    const std::uint64_t blocks = heads64 * static_cast<std::uint64_t>(full + (rest > 0 ? 1 : 0));
    most = static_cast<std::uint64_t>(tokens) * heads64 * static_cast<std::uint64_t>(dim) * 5 +
           blocks * detail::kRansStateBytes;
  } else {
    const auto d = static_cast<std::uint64_t>(dim);
    const std::uint64_t vector_bytes =
        (e->kind == CodecKind::Huffman
             ? d * detail::kMaxStepBits
             : d * 8 + 4 * ((d + detail::kVarWidthGroup - 1) / detail::kVarWidthGroup)) /
            8 +
        1;
    const std::uint64_t blocks = heads64 * static_cast<std::uint64_t>(full + (rest > 0 ? 1 : 0));
    most = static_cast<std::uint64_t>(tokens) * heads64 * vector_bytes + blocks +
           detail::BitWriter::headroom(3 * d + 16);  // above any begin() of the encoders
  }
  e->payload.reserve(static_cast<std::size_t>(most));
  KVLAB_TRY(append_tokens(*e, codes, tokens, book));
  return e;
}

Result<std::uint64_t> encoded_bytes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                    int dim, const CodecConfig& config,
                                    const HuffmanCodebook* book) {
  auto e = start_encoding(codes, tokens, heads, dim, config);
  if (!e) return e.error();
  KVLAB_TRY(check_append(*e, codes, tokens, book));
  const std::size_t row = static_cast<std::size_t>(heads) * static_cast<std::size_t>(dim);
  std::uint64_t payload = 0, blocks = 0;
  std::vector<std::uint8_t> symbols;
  std::vector<std::uint16_t> words;
  for (int t0 = 0; t0 < tokens; t0 += e->block_size) {
    const int n = std::min(e->block_size, tokens - t0);
    for (int h = 0; h < heads; ++h) {
      if (e->kind == CodecKind::BitPack) {
        payload += bitpack_block_bytes(n, dim, e->bitpack_width);
        continue;
      }
      if (payload > std::numeric_limits<std::uint32_t>::max()) {
        return make_error(payload_too_large(e->kind, t0));
      }
      ++blocks;
      const std::uint8_t* first =
          codes.data() + static_cast<std::size_t>(t0) * row + static_cast<std::size_t>(h) * dim;
      if (e->kind == CodecKind::Rans) {
        block_symbols(first, n, row, dim, book->pairs(), symbols);
        payload += detail::rans_block_bytes(symbols.data(), symbols.size(), *book->rans(), words);
        continue;
      }
      std::uint64_t bits = 0;
      for (int i = 0; i < n; ++i) {
        const std::uint64_t b =
            stream_bits(e->kind, first + static_cast<std::size_t>(i) * row, dim, book);
        if (b > std::numeric_limits<std::uint16_t>::max()) {
          return make_error(vector_too_long(e->kind, t0 + i, h, b));
        }
        bits += b;
      }
      payload += (bits + 7) / 8;
    }
  }
  const std::uint64_t vectors = has_vector_bits(e->kind) ? std::uint64_t(tokens) * heads : 0;
  return payload + EncodedCodes::kHeaderBytes + blocks * sizeof(std::uint32_t) +
         vectors * sizeof(std::uint16_t);
}

Status append_tokens(EncodedCodes& e, std::span<const std::uint8_t> codes, int tokens,
                     const HuffmanCodebook* book) {
  KVLAB_TRY(check_append(e, codes, tokens, book));
  const std::size_t row = static_cast<std::size_t>(e.heads) * static_cast<std::size_t>(e.dim);

  // Encode into the tail of the arrays; on failure, cut them back so nothing changed.
  const std::size_t old_payload = e.payload.size();
  const std::size_t old_offsets = e.block_offsets.size();
  const std::size_t old_bits = e.vector_bits.size();
  auto fail = [&](std::string message) -> Status {
    e.payload.resize(old_payload);
    e.block_offsets.resize(old_offsets);
    e.vector_bits.resize(old_bits);
    return make_error(std::move(message));
  };
  const std::size_t dim = static_cast<std::size_t>(e.dim);
  std::vector<std::uint8_t> symbols;
  std::vector<std::uint16_t> words;
  for (int t0 = 0; t0 < tokens; t0 += e.block_size) {
    const int n = std::min(e.block_size, tokens - t0);
    for (int h = 0; h < e.heads; ++h) {
      const std::uint8_t* first =
          codes.data() + static_cast<std::size_t>(t0) * row + static_cast<std::size_t>(h) * dim;
      if (e.kind == CodecKind::BitPack) {
        const std::size_t at = e.payload.size();
        e.payload.resize(at + bitpack_block_bytes(n, e.dim, e.bitpack_width), 0);
        for (int i = 0; i < n; ++i) {
          detail::pack_codes(first + static_cast<std::size_t>(i) * row, dim, e.bitpack_width,
                             e.payload.data() + at, static_cast<std::size_t>(i) * dim);
        }
        continue;
      }
      if (e.payload.size() > std::numeric_limits<std::uint32_t>::max()) {
        return fail(payload_too_large(e.kind, e.tokens + t0));
      }
      e.block_offsets.push_back(static_cast<std::uint32_t>(e.payload.size()));
      if (e.kind == CodecKind::Rans) {
        block_symbols(first, n, row, e.dim, book->pairs(), symbols);
        detail::encode_rans_block(symbols.data(), symbols.size(), *book->rans(), e.payload, words);
        continue;
      }
      detail::BitWriter writer(e.payload);
      for (int i = 0; i < n; ++i) {
        const std::uint64_t before = writer.bits_written();
        const std::uint8_t* vec = first + static_cast<std::size_t>(i) * row;
        if (e.kind == CodecKind::Huffman) {
          detail::encode_huffman_vector(vec, e.dim, *book, writer);
        } else {
          detail::encode_varwidth_vector(vec, e.dim, writer);
        }
        const std::uint64_t bits = writer.bits_written() - before;
        if (bits > std::numeric_limits<std::uint16_t>::max()) {
          return fail(vector_too_long(e.kind, e.tokens + t0 + i, h, bits));
        }
        e.vector_bits.push_back(static_cast<std::uint16_t>(bits));
      }
      writer.flush();
    }
  }
  e.tokens += tokens;
  return Ok{};
}

Status validate_encoded(const EncodedCodes& e) {
  KVLAB_TRY(check_header(e));
  if (e.kind == CodecKind::BitPack) {
    const std::uint64_t expect =
        e.block_count() == 0 ? 0
                             : bitpack_block_offset(e, e.block_count() - 1) +
                                   bitpack_block_bytes(place_of(e, e.block_count() - 1).tokens,
                                                       e.dim, e.bitpack_width);
    if (e.payload.size() != expect) {
      return make_error(fmt::format("bitpack codes: payload has {} bytes, the shape needs {}",
                                    e.payload.size(), expect));
    }
    return Ok{};
  }
  for (int b = 0; b < e.block_count(); ++b) {
    std::uint64_t begin = 0;
    KVLAB_TRY(check_block(e, b, begin));
  }
  return Ok{};
}

Status decode_codes(const EncodedCodes& e, const HuffmanCodebook* book,
                    std::span<std::uint8_t> out) {
  return decode_token_range(e, book, 0, e.tokens, out);
}

Status decode_token_range(const EncodedCodes& e, const HuffmanCodebook* book, int first_token,
                          int last_token, std::span<std::uint8_t> out) {
  KVLAB_TRY(validate_encoded(e));
  KVLAB_TRY(need_book(e, book));
  if (first_token < 0 || first_token > last_token || last_token > e.tokens ||
      first_token % e.block_size != 0 ||
      (last_token % e.block_size != 0 && last_token != e.tokens)) {
    return make_error(fmt::format(
        "{} codes: tokens {}..{} are not whole blocks of {} within the tensor's {} tokens",
        codec_id(e.kind), first_token, last_token, e.block_size, e.tokens));
  }
  const std::size_t row = static_cast<std::size_t>(e.heads) * static_cast<std::size_t>(e.dim);
  if (out.size() != static_cast<std::size_t>(last_token - first_token) * row) {
    return make_error(fmt::format("{} codes: output holds {} codes, tokens {}..{} have {}",
                                  codec_id(e.kind), out.size(), first_token, last_token,
                                  static_cast<std::size_t>(last_token - first_token) * row));
  }
  const std::size_t dim = static_cast<std::size_t>(e.dim);
  std::vector<std::uint8_t> symbols;
  const int first_block = first_token / e.block_size * e.heads;
  const int end_block = (last_token + e.block_size - 1) / e.block_size * e.heads;
  if (e.kind == CodecKind::Rans) {
    return decode_rans(e, *book, first_block, end_block, first_token, out.data(), row, symbols);
  }
  for (int b = first_block; b < end_block; ++b) {
    const BlockPlace p = place_of(e, b);
    std::uint8_t* first = out.data() + static_cast<std::size_t>(p.first_token - first_token) * row +
                          static_cast<std::size_t>(p.head) * dim;
    if (e.kind == CodecKind::BitPack) {
      const std::uint8_t* src = e.payload.data() + bitpack_block_offset(e, b);
      for (int i = 0; i < p.tokens; ++i) {
        detail::unpack_codes(src, static_cast<std::size_t>(i) * dim, dim, e.bitpack_width,
                             first + static_cast<std::size_t>(i) * row);
      }
      continue;
    }
    std::uint64_t bit =
        8 * static_cast<std::uint64_t>(e.block_offsets[static_cast<std::size_t>(b)]);
    if (e.kind == CodecKind::Huffman) {  // a block's vectors decode interleaved
      const detail::BlockProblem bp = detail::decode_huffman_block(
          e.payload.data(), e.payload.size(), bit, e.vector_bits.data() + p.first_vector, p.tokens,
          e.dim, *book, first, row);
      if (bp.problem == nullptr) continue;
      return make_error(fmt::format(
          "{}, vector {} (token {}, {} bits): {}", block_name(e, b), bp.vector,
          p.first_token + bp.vector,
          e.vector_bits[p.first_vector + static_cast<std::uint64_t>(bp.vector)], bp.problem));
    }
    for (int i = 0; i < p.tokens; ++i) {
      if (Status st = decode_one(e, book, b, i, bit, first + static_cast<std::size_t>(i) * row);
          !st) {
        return st;
      }
      bit += e.vector_bits[p.first_vector + static_cast<std::uint64_t>(i)];
    }
  }
  return Ok{};
}

Status decode_vector(const EncodedCodes& e, const HuffmanCodebook* book, int token, int head,
                     std::span<std::uint8_t> out) {
  KVLAB_TRY(check_header(e));
  KVLAB_TRY(need_book(e, book));
  if (token < 0 || token >= e.tokens || head < 0 || head >= e.heads) {
    return make_error(fmt::format("{} codes: vector (token {}, head {}) outside [{}, {}]",
                                  codec_id(e.kind), token, head, e.tokens, e.heads));
  }
  if (out.size() != static_cast<std::size_t>(e.dim)) {
    return make_error(fmt::format("{} codes: output holds {} codes, a vector has {}",
                                  codec_id(e.kind), out.size(), e.dim));
  }
  const int b = (token / e.block_size) * e.heads + head;
  const int i = token % e.block_size;
  if (e.kind == CodecKind::BitPack) {
    const BlockPlace p = place_of(e, b);
    const std::uint64_t begin = bitpack_block_offset(e, b);
    if (begin + bitpack_block_bytes(p.tokens, e.dim, e.bitpack_width) > e.payload.size()) {
      return make_error(
          fmt::format("{}: past the payload end {}", block_name(e, b), e.payload.size()));
    }
    detail::unpack_codes(e.payload.data() + begin, static_cast<std::size_t>(i) * e.dim,
                         static_cast<std::size_t>(e.dim), e.bitpack_width, out.data());
    return Ok{};
  }
  std::uint64_t begin = 0;
  KVLAB_TRY(check_block(e, b, begin));
  if (e.kind == CodecKind::Rans) {  // one stream per block: the whole block decodes
    const BlockPlace p = place_of(e, b);
    const std::size_t row = static_cast<std::size_t>(e.heads) * static_cast<std::size_t>(e.dim);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(p.tokens) * row), symbols;
    KVLAB_TRY(decode_rans(e, *book, b, b + 1, p.first_token, codes.data(), row, symbols));
    std::memcpy(out.data(),
                codes.data() + static_cast<std::size_t>(i) * row +
                    static_cast<std::size_t>(head) * static_cast<std::size_t>(e.dim),
                static_cast<std::size_t>(e.dim));
    return Ok{};
  }
  const BlockPlace p = place_of(e, b);
  std::uint64_t bit = 8 * begin;
  for (int k = 0; k < i; ++k) bit += e.vector_bits[p.first_vector + static_cast<std::uint64_t>(k)];
  return decode_one(e, book, b, i, bit, out.data());
}

}  // namespace kvlab
