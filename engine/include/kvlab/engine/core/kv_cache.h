// The KV cache of one sequence: per layer, keys and values [tokens, kv_heads, head_dim], plus
// optional decode-time query vectors [queries, q_heads, head_dim] that attend to every cached
// token (used for attention-level error metrics).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlab/engine/core/model_shape.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/core/rope.h"
#include "kvlab/engine/core/tensor.h"

namespace kvlab {

struct LayerKv {
  Tensor key;
  Tensor value;
  Tensor query;  // empty when the source has no queries
};

struct KvCache {
  ModelShape shape;
  std::vector<LayerKv> layers;
  // The token ids the cache was built from (a model capture); empty when unknown. Stored in
  // files as the I32 tensor "tokens" [tokens].
  std::vector<std::int32_t> token_ids;
  std::string source;  // where it came from, for run records ("synthetic:llama3-8b", "file:...")
  // How RoPE turned the keys, when the source knows (model captures, llama.cpp state files read
  // with their model; stored in cache files); disabled when unknown (synthetic presets). With
  // keys_pre_rope the keys are stored before RoPE (a capture with --pre-rope) and key_rope says
  // how the model turns them; otherwise they are stored after it.
  RopeSpec key_rope;
  bool keys_pre_rope = false;

  int tokens() const { return layers.empty() ? 0 : layers.front().key.tokens(); }
  bool has_queries() const;
  std::size_t stored_bytes() const;  // bytes the cache holds in its source dtype (K and V)
  std::size_t values_count() const;  // number of K and V elements
  // Checks every layer agrees with `shape` and with each other, and key_rope with the keys;
  // names the tensor that does not.
  Status validate() const;
};

}  // namespace kvlab
