// The CUDA side of the engine, seen from C++ without CUDA headers: a compressed layer resident on
// the GPU in the docs/FORMAT.md layout, the ops on it, and the fast baselines. Every call checks
// every CUDA return code and turns a failure into an Error naming the op; nothing aborts.
// Without a usable GPU every entry point returns an Error saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::cuda {

// Ok when a GPU can run kernels; otherwise an Error with the driver's reason.
Status require_gpu();

// KVComp's quantizer settings (CompressedCacheConfig's meaning) for GPU compression.
struct GpuCompressOptions {
  int block_size = 64;                   // tokens per key block and codec block
  double rel_scale = 0.05;               // step = rel_scale * (max - min)
  CodecKind codec = CodecKind::Huffman;  // Huffman, rANS or BitPack
  int bitpack_width = 0;                 // BitPack: 2, 4, 8, or 0 for the smallest that fits
  // Huffman and rANS: codebooks to use (rANS: made with their table). Null: built on the host
  // from code histograms computed on the GPU (the prefill's histogram, as the CPU cache does).
  const HuffmanCodebook* key_book = nullptr;
  const HuffmanCodebook* value_book = nullptr;
};

// One layer's compressed keys and values on the GPU. Move-only.
class GpuLayer {
 public:
  struct Impl;
  GpuLayer();
  explicit GpuLayer(std::unique_ptr<Impl> impl);
  ~GpuLayer();
  GpuLayer(GpuLayer&&) noexcept;
  GpuLayer& operator=(GpuLayer&&) noexcept;

  int tokens() const;
  int kv_heads() const;
  int head_dim() const;
  CodecKind codec() const;
  // Bytes of payload, metadata, codebook tables and parameters held on the device.
  std::uint64_t compressed_bytes() const;
  Impl& impl() { return *m; }
  const Impl& impl() const { return *m; }

 private:
  std::unique_ptr<Impl> m;
};

// Uploads the compressed part of a CPU cache view (CompressedKvCache::view()); its buffered fp16
// tokens stay on the host. Cross-decoding: the GPU reads what the CPU encoded.
Result<GpuLayer> upload_layer(const CompressedKvView& view);

// Quantizes and encodes fp16 keys and values [tokens][kv_heads][head_dim] on the GPU, every
// token compressed (the last block may be short). The streams are the CPU encoder's bytes.
Result<GpuLayer> compress_layer(std::span<const std::uint16_t> keys,
                                std::span<const std::uint16_t> values, int tokens, int kv_heads,
                                int head_dim, const GpuCompressOptions& options);

// encode_codes() (code_codec.h) on the GPU, for Huffman, rANS and BitPack: the same bytes. Host
// codes [tokens][heads][dim] in, host EncodedCodes out.
Result<EncodedCodes> encode_codes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                  int dim, const CodecConfig& config, const HuffmanCodebook* book);

// The layer copied back to the host, in the engine's types: the CPU decodes what the GPU encoded.
struct HostLayer {
  int kv_heads = 0, head_dim = 0, block_size = 0;
  EncodedCodes keys, values;
  HuffmanCodebook key_book, value_book;  // Huffman and rANS
  std::vector<float> key_steps, key_mins, value_steps, value_mins;
  CompressedKvView view() const;
};
Result<HostLayer> download_layer(const GpuLayer& layer);

// Fused decode + attention for one query per head (decode step), GQA groups sharing decoded keys:
// q [q_heads][head_dim] -> logits [q_heads][tokens] = q.k / sqrt(head_dim); probs
// [q_heads][tokens] -> out [q_heads][head_dim]. Host arrays in and out. A corrupt stream is an
// Error naming the tensor and block.
Status attention_logits(const GpuLayer& layer, std::span<const float> q, int q_heads,
                        std::span<float> logits);
Status attention_values(const GpuLayer& layer, std::span<const float> probs, int q_heads,
                        std::span<float> out);

// Group quantization on the GPU (the engine's detail::quantize_groups rule): keys per channel
// over groups of `key_group_tokens` tokens, values per token over groups of
// `value_group_channels` channels (0: the whole head). Relative step (KVComp) or levels (KIVI).
struct GpuGroupSpec {
  int bits = 8;
  int key_group_tokens = 64;
  int value_group_channels = 0;
  bool relative = true;  // true: step = rel_scale * range; false: range / (2^bits - 1)
  double rel_scale = 0.05;
};
struct GroupCodes {
  std::vector<std::uint8_t> codes;  // one byte per code, [token][head][dim]
  std::vector<float> steps, mins;   // the engine's unit order
};
Result<GroupCodes> quantize_groups(std::span<const std::uint16_t> x_fp16, int tokens, int heads,
                                   int dim, TensorRole role, const GpuGroupSpec& spec);

}  // namespace kvlab::cuda
