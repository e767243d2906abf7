// A streaming compressed KV cache for one layer, as KVComp keeps it during decoding (Jiang et al.
// 2025, "KVComp", Sec. 3.2-3.3): the prefill is quantized (keys per channel over blocks of
// `block_size` tokens, values per token over the whole head) and entropy-coded at once with one
// codebook per K and V built from its histogram; afterwards one token arrives per decode step and
// waits in an uncompressed fp16 buffer. When the buffer overflows `buffer_size` tokens, its whole
// blocks are quantized and appended as new blocks with the same codebooks, so no earlier byte
// changes. Memory is accounted by component after every step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/core/tensor.h"

namespace kvlab {

struct CompressedCacheConfig {
  int block_size = 64;      // tokens per key block and per codec block
  int buffer_size = 128;    // fp16 buffer capacity; a multiple of block_size, >= block_size
  double rel_scale = 0.05;  // KVComp's relative error bound: step = rel_scale * (max - min)
  // Huffman (KVComp), rANS over the same book's symbols, or BitPack (the fixed-width baseline);
  // VarWidth is not supported here.
  CodecKind codec = CodecKind::Huffman;
  // BitPack only: 2, 4 or 8, or 0 to take the smallest width holding the first compressed codes.
  // Codes appended later must fit (with rel_scale >= 1/15 every code fits 4 bits).
  int bitpack_width = 0;
  // Huffman: code pairs of codes as one symbol where the prefill's codes all fit 4 bits and that
  // is smaller (choose_codebook(); docs/FORMAT.md, "Pair symbols"). Off for a cache the CUDA
  // backend will read (Backend::huffman_pairs()).
  bool huffman_pairs = true;
};

// Bytes held by the cache, by component; everything stored counts.
struct CacheMemory {
  std::uint64_t payload = 0;       // entropy-coded (or packed) code streams, K and V
  std::uint64_t metadata = 0;      // codec headers, block offsets, vector bit counts
  std::uint64_t codebooks = 0;     // serialized Huffman codebooks or rANS tables (K and V)
  std::uint64_t quant_params = 0;  // float steps and minimums
  std::uint64_t buffer = 0;        // fp16 rows of the uncompressed buffer, K and V
  std::uint64_t total() const { return payload + metadata + codebooks + quant_params + buffer; }
};

// A read-only view of a compressed layer: what fused attention reads. The cache hands one out;
// tests build their own over corrupted copies.
struct CompressedKvView {
  int kv_heads = 0, head_dim = 0, block_size = 0;
  int compressed_tokens = 0, buffered_tokens = 0;
  const EncodedCodes* keys = nullptr;  // null when nothing is compressed yet
  const EncodedCodes* values = nullptr;
  const HuffmanCodebook* key_book = nullptr;  // Huffman and rANS only
  const HuffmanCodebook* value_book = nullptr;
  // Keys: per key block tb, heads*head_dim floats ([tb][head][channel]). Values: per token,
  // kv_heads floats ([token][head]).
  std::span<const float> key_steps, key_mins, value_steps, value_mins;
  // fp16 buffer rows, [buffered_tokens][kv_heads][head_dim].
  std::span<const std::uint16_t> buffer_keys, buffer_values;

  int tokens() const { return compressed_tokens + buffered_tokens; }
};

class CompressedKvCache {
 public:
  // Checks the configuration and shape; the cache starts empty.
  static Result<CompressedKvCache> create(const CompressedCacheConfig& config, int kv_heads,
                                          int head_dim);

  // The prefill [tokens, kv_heads, head_dim], once, before any append. Its whole blocks are
  // compressed now and the codebooks are built from their codes; the tail (tokens % block_size)
  // waits in the buffer. With no whole block, the codebooks come from the first flush.
  Status prefill(const TensorView& keys, const TensorView& values);
  // Room for `tokens` tokens in every part that grows (steps, minimums, the streams' offsets and
  // bit counts, and the payload at 8 bits a code, what a bit-packed code takes at most), as
  // llama.cpp allocates its context up front: the cache then grows in place, without the copies
  // and freed blocks of a doubling vector. Pages not yet written are not resident.
  void reserve(int tokens);
  // One decode step: kv_heads * head_dim floats each, stored as fp16 in the buffer.
  Status append(std::span<const float> key_row, std::span<const float> value_row);

  int tokens() const { return m_compressed + buffered_tokens(); }
  int compressed_tokens() const { return m_compressed; }
  int buffered_tokens() const;
  int kv_heads() const { return m_heads; }
  int head_dim() const { return m_dim; }
  const CompressedCacheConfig& config() const { return m_config; }
  bool has_codebooks() const { return m_config.codec != CodecKind::BitPack && m_compressed > 0; }

  CacheMemory memory() const;
  CompressedKvView view() const;

  // Reconstructs every token, [tokens][kv_heads][head_dim] floats each: the compressed part
  // decoded and dequantized, the buffer converted from fp16.
  Status dequantize_all(std::span<float> keys, std::span<float> values) const;
  // Tokens [first, last) of the same reconstruction, (last - first) rows each, decoding only the
  // blocks they lie in: `first` starts a block where it is compressed.
  Status dequantize_rows(int first, int last, std::span<float> keys, std::span<float> values) const;

 private:
  CompressedCacheConfig m_config;
  int m_heads = 0, m_dim = 0;
  int m_compressed = 0;
  bool m_prefilled = false;
  HuffmanCodebook m_key_book, m_value_book;
  EncodedCodes m_key_codes, m_value_codes;
  std::vector<float> m_key_steps, m_key_mins, m_value_steps, m_value_mins;
  std::vector<std::uint16_t> m_buffer_keys, m_buffer_values;  // fp16 rows, oldest first

  int m_reserved = 0;  // tokens reserve() made room for

  Status compress_rows(const TensorView& keys, const TensorView& values);
  void reserve_streams();
  Status flush_whole_blocks();
};

}  // namespace kvlab
