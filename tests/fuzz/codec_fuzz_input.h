// The bytes the code-stream target reads: one EncodedCodes and its codebook laid end to end, as
// docs/FORMAT.md lays out each part (little-endian). The 4-byte tensor header is FORMAT.md's; the
// shape, which the quantizer's header carries in a real cache, and the array counts come next so
// that the fuzzer can make them disagree with the data, as test_codec_fuzz.cpp's corruptions do:
//
//   u8 kind, u8 bitpack width, u16 block_size        FORMAT.md "Tensor header"
//   i16 tokens, i8 heads, i8 dim                     signed: negative shapes are inputs too
//   u16 offset count, u16 bit-count count
//   129 bytes: the serialised codebook               kind 2 (huffman) only
//   386 bytes: the serialised rANS table             kind 3 (rans) only
//   u32 block_offsets[], u16 vector_bits[]           FORMAT.md "Metadata arrays"
//   the payload: every remaining byte
//
// make_codec_corpus.cpp writes real encodings this way; fuzz_code_codec.cpp reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kvlab/engine/codec/code_codec.h"

namespace kvlab::fuzz {

struct CodecFuzzInput {
  EncodedCodes encoded;
  // Absent: not huffman or rans, or the book is refused. A rans tensor's book is an empty
  // histogram's of the table's symbol kind, coding with the table read (use_rans).
  std::optional<HuffmanCodebook> book;
};

inline constexpr std::size_t kCodecFuzzHeaderBytes = 12;

// nullopt when the bytes end before the arrays they announce.
inline std::optional<CodecFuzzInput> read_codec_fuzz_input(std::span<const std::uint8_t> in) {
  if (in.size() < kCodecFuzzHeaderBytes) return std::nullopt;
  const auto u16 = [&](std::size_t at) {
    return static_cast<std::uint16_t>(in[at] | in[at + 1] << 8);
  };
  CodecFuzzInput out;
  EncodedCodes& e = out.encoded;
  e.kind = static_cast<CodecKind>(in[0] % 4);
  e.bitpack_width = in[1];
  e.block_size = u16(2);
  e.tokens = static_cast<std::int16_t>(u16(4));
  e.heads = static_cast<std::int8_t>(in[6]);
  e.dim = static_cast<std::int8_t>(in[7]);
  const std::size_t offsets = u16(8), bits = u16(10);
  std::size_t at = kCodecFuzzHeaderBytes;
  if (e.kind == CodecKind::Huffman) {
    if (in.size() - at < HuffmanCodebook::kSerializedBytes) return std::nullopt;
    auto book = HuffmanCodebook::deserialize(in.subspan(at, HuffmanCodebook::kSerializedBytes));
    if (book) out.book = std::move(*book);
    at += HuffmanCodebook::kSerializedBytes;
  } else if (e.kind == CodecKind::Rans) {
    if (in.size() - at < RansTable::kSerializedBytes) return std::nullopt;
    auto table = RansTable::deserialize(in.subspan(at, RansTable::kSerializedBytes));
    if (table) {
      auto book = HuffmanCodebook::from_histogram(CodeCounts{}, table->pairs());
      if (book && book->use_rans(std::move(*table)).ok()) out.book = std::move(*book);
    }
    at += RansTable::kSerializedBytes;
  }
  if (in.size() - at < offsets * 4 + bits * 2) return std::nullopt;
  for (std::size_t i = 0; i < offsets; ++i, at += 4) {
    e.block_offsets.push_back(
        static_cast<std::uint32_t>(u16(at) | std::uint32_t{u16(at + 2)} << 16));
  }
  for (std::size_t i = 0; i < bits; ++i, at += 2) e.vector_bits.push_back(u16(at));
  e.payload.assign(in.begin() + static_cast<std::ptrdiff_t>(at), in.end());
  return out;
}

inline std::vector<std::uint8_t> write_codec_fuzz_input(const EncodedCodes& e,
                                                        const HuffmanCodebook* book) {
  std::vector<std::uint8_t> out;
  const auto put16 = [&](std::uint32_t v) {
    out.push_back(static_cast<std::uint8_t>(v));
    out.push_back(static_cast<std::uint8_t>(v >> 8));
  };
  out.push_back(static_cast<std::uint8_t>(e.kind));
  out.push_back(static_cast<std::uint8_t>(e.bitpack_width));
  put16(static_cast<std::uint32_t>(e.block_size));
  put16(static_cast<std::uint32_t>(e.tokens));
  out.push_back(static_cast<std::uint8_t>(e.heads));
  out.push_back(static_cast<std::uint8_t>(e.dim));
  put16(static_cast<std::uint32_t>(e.block_offsets.size()));
  put16(static_cast<std::uint32_t>(e.vector_bits.size()));
  if (needs_book(e.kind)) {
    const auto bytes = e.kind == CodecKind::Huffman ? book->serialize() : book->rans()->serialize();
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  for (const std::uint32_t o : e.block_offsets) put16(o & 0xFFFF), put16(o >> 16);
  for (const std::uint16_t b : e.vector_bits) put16(b);
  out.insert(out.end(), e.payload.begin(), e.payload.end());
  return out;
}

}  // namespace kvlab::fuzz
