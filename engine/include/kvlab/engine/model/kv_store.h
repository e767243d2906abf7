// A KV cache held by the runner in a method's stored form (issue 47): LlamaModel::State::kv_store.
// The runner hands each layer's new keys (after RoPE) and values to the store instead of keeping
// floats, and its attention reads the store: the bytes a decode step reads are the bytes the
// method keeps, and the memory held is the store's real allocations.
//
// The KVComp store keeps each layer as a CompressedKvCache (codec/compressed_cache.h, KVComp's
// streaming cache: the prompt quantized and entropy-coded at prefill, later tokens in an fp16
// buffer flushed a block at a time) and attends with the fused kernels that decode the streams
// inside the dot products (attention/fused_attention.h). As the KVComp paper's engine does, the
// prompt's own attention reads the exact keys and values of the prompt; they are compressed right
// after, and every later token reads the compressed cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

struct LlamaConfig;

class KvStore {
 public:
  virtual ~KvStore();
  // The n new tokens of `layer` at positions pos..pos + n - 1: their keys (after RoPE) and values
  // [n][kv_heads * head_dim] are stored, and out [n][heads * head_dim] receives each one's causal
  // attention softmax(q . k / sqrt(head_dim)) . v over every stored position up to its own, from
  // q [n][heads * head_dim] (after RoPE). Positions arrive in order, each layer once per forward.
  virtual Status append_and_attend(int layer, int pos, int n, const float* q, const float* keys,
                                   const float* values, float* out) = 0;
  // Bytes the store holds now, every component counted (codes, metadata, codebooks, parameters,
  // buffers), from what it allocated.
  virtual std::uint64_t bytes() const = 0;
  // The same tokens as fp16 keys and values.
  virtual std::uint64_t fp16_bytes() const = 0;
  // "kvcomp B=64 rel=0.05 + huffman", as method labels read.
  virtual std::string label() const = 0;
  // Every stored token of `layer` reconstructed ([tokens][kv_heads * head_dim] each): what the
  // attention reads, for references and tests.
  virtual Status dequantize_layer(int layer, std::span<float> keys,
                                  std::span<float> values) const = 0;
  virtual int tokens(int layer) const = 0;
};

// The KVComp store for a model of this shape. Errors name what the configuration gets wrong.
Result<std::unique_ptr<KvStore>> make_kvcomp_store(const LlamaConfig& model,
                                                   const CompressedCacheConfig& config);

}  // namespace kvlab
