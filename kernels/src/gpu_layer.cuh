// What a GpuLayer holds on the device: per K and V, the code streams in the docs/FORMAT.md layout
// (payload as 32-bit words so a decoder reads any bit position with two aligned loads), the block
// offsets and vector bit counts, the codebook's decode and encode tables, and the quantization
// parameters. Shared by the encoder, the fused decoders and the benchmark.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "cuda_check.cuh"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/word_stream.h"
#include "kvlab/kernels/gpu_kv.h"

namespace kvlab::cuda {

// Device tables of one codebook: a single-code Huffman book's, and the rANS table a book carries
// (pairs or single codes).
struct GpuBook {
  HuffmanCodebook host;
  DeviceArray<std::uint16_t> decode;  // 4096 entries: (length << 9) | symbol, 0 = no code
  // 4096 entries decoding up to two symbols per lookup (word_stream::fill_pair_table()).
  DeviceArray<std::uint32_t> decode2;
  DeviceArray<std::uint32_t> enc_bits;    // per value: pattern in stream order, escape included
  DeviceArray<std::uint8_t> enc_len;      // per value: bits, escape included
  DeviceArray<std::uint32_t> rans_slots;  // RansTable::slot_table(): 4096 entries
  DeviceArray<std::uint32_t> rans_enc;    // 257 rans_warp::encode_entry()s
  std::uint32_t rans_escape = 0;          // RansTable::escape_start()
  bool rans_pairs = false;
  // Keeps `book` on the host and uploads the tables that the codecs in `codecs` read (Huffman,
  // rANS; others need none): one host copy however many.
  Status upload(const HuffmanCodebook& book, std::initializer_list<CodecKind> codecs);

 private:
  Status upload_huffman();
  Status upload_rans();
};

// One tensor's streams.
struct GpuCodes {
  CodecKind kind = CodecKind::Huffman;
  int tokens = 0, heads = 0, dim = 0, block_size = 0, width = 0;
  std::uint64_t payload_bytes = 0;
  // payload_bytes as words, padded as word_stream.h says (word_stream::payload_words_for).
  DeviceArray<std::uint32_t> payload;
  DeviceArray<std::uint32_t> block_offsets;  // Huffman and rANS: one per block
  DeviceArray<std::uint16_t> vector_bits;    // Huffman: one per vector, block order
  int token_blocks() const { return block_size > 0 ? (tokens + block_size - 1) / block_size : 0; }
  int blocks() const { return token_blocks() * heads; }
  std::uint64_t payload_words() const { return payload.size(); }
  // Host EncodedCodes -> device, after validate_encoded().
  Status upload(const EncodedCodes& e);
  Result<EncodedCodes> download() const;
  std::uint64_t metadata_bytes() const;
};

}  // namespace kvlab::cuda

struct kvlab::cuda::GpuLayer::Impl {
  int kv_heads = 0, head_dim = 0, block_size = 0, tokens = 0;
  CodecKind codec = CodecKind::Huffman;
  GpuCodes keys, values;
  GpuBook key_book, value_book;  // Huffman and rANS
  // Keys: [token block][head][channel]; values: [token][head] (CompressedKvView's order).
  DeviceArray<float> key_steps, key_mins, value_steps, value_mins;
};
