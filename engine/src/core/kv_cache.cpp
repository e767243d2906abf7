#include "kvlab/engine/core/kv_cache.h"

#include <fmt/format.h>

namespace kvlab {

Status ModelShape::validate() const {
  if (layers <= 0 || q_heads <= 0 || kv_heads <= 0 || head_dim <= 0) {
    return make_error(fmt::format(
        "model shape '{}': layers, q_heads, kv_heads and head_dim must be positive (got {}, {}, "
        "{}, {})",
        name, layers, q_heads, kv_heads, head_dim));
  }
  if (q_heads % kv_heads != 0) {
    return make_error(
        fmt::format("model shape '{}': q_heads ({}) must be a multiple of kv_heads ({})", name,
                    q_heads, kv_heads));
  }
  return Ok{};
}

bool KvCache::has_queries() const {
  return !layers.empty() && !layers.front().query.empty();
}

std::size_t KvCache::stored_bytes() const {
  std::size_t n = 0;
  for (const auto& l : layers) n += l.key.nbytes() + l.value.nbytes();
  return n;
}

std::size_t KvCache::values_count() const {
  std::size_t n = 0;
  for (const auto& l : layers) n += l.key.elements() + l.value.elements();
  return n;
}

Status KvCache::validate() const {
  KVLAB_TRY(shape.validate());
  if (static_cast<int>(layers.size()) != shape.layers) {
    return make_error(fmt::format("KV cache '{}': shape says {} layers but {} are present", source,
                                  shape.layers, layers.size()));
  }
  const int t = tokens();
  const bool queries = has_queries();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerKv& l = layers[i];
    const auto check = [&](const Tensor& x, const char* what, int heads,
                           bool check_tokens) -> Status {
      if (x.heads() != heads || x.dim() != shape.head_dim || (check_tokens && x.tokens() != t)) {
        return make_error(
            fmt::format("KV cache '{}': layers.{}.{} is [{}, {}, {}], expected [{}, {}, {}]",
                        source, i, what, x.tokens(), x.heads(), x.dim(),
                        check_tokens ? std::to_string(t) : "queries", heads, shape.head_dim));
      }
      return Ok{};
    };
    KVLAB_TRY(check(l.key, "key", shape.kv_heads, true));
    KVLAB_TRY(check(l.value, "value", shape.kv_heads, true));
    if (queries != !l.query.empty()) {
      return make_error(fmt::format("KV cache '{}': layers.{} {} queries while layer 0 {}", source,
                                    i, l.query.empty() ? "has no" : "has",
                                    queries ? "has them" : "does not"));
    }
    if (queries) {
      KVLAB_TRY(check(l.query, "query", shape.q_heads, false));
    }
  }
  if (keys_pre_rope && !key_rope.enabled()) {
    return make_error(fmt::format("KV cache '{}': keys before RoPE, but not which RoPE", source));
  }
  if (auto ok = key_rope.check(t, shape.head_dim); !ok) {
    return make_error(fmt::format("KV cache '{}': {}", source, ok.message()));
  }
  return Ok{};
}

}  // namespace kvlab
