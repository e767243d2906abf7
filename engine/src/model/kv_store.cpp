// The runner's stored caches (kv_store.h).
#include "kvlab/engine/model/kv_store.h"

#include <fmt/format.h>

#include <vector>

#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/model/llama_model.h"
#include "model/llama_attention.h"

namespace kvlab {

KvStore::~KvStore() = default;

Status KvStore::check_append(int layer, int layers, int pos, int n, int stored) {
  if (layer < 0 || layer >= layers || n <= 0) {
    return make_error(fmt::format("KV store: layer {} of {}, {} new tokens", layer, layers, n));
  }
  if (pos != stored) {
    return make_error(fmt::format("KV store, layer {}: new tokens at position {} after {} stored",
                                  layer, pos, stored));
  }
  return Ok{};
}

namespace {

class KvCompStore final : public KvStore {
 public:
  KvCompStore(const LlamaConfig& model, const CompressedCacheConfig& config,
              std::vector<CompressedKvCache> layers)
      : m_heads(model.heads),
        m_kv_heads(model.kv_heads),
        m_head_dim(model.head_dim()),
        m_config(config),
        m_layers(std::move(layers)) {}

  Status append_and_attend(int layer, int pos, int n, const float* q, float* keys, float* values,
                           float* out) override {
    const int layers = static_cast<int>(m_layers.size());
    KVLAB_TRY(check_append(layer, layers, pos, n, tokens(layer)));
    CompressedKvCache& cache = m_layers[static_cast<std::size_t>(layer)];
    const int kv = m_kv_heads * m_head_dim, qd = m_heads * m_head_dim;
    if (pos == 0) {
      // The prompt reads its own exact keys and values, then is compressed at once (its whole
      // blocks coded with codebooks built from them; the tail waits in the fp16 buffer).
      detail::AttentionArgs args;
      args.layer = layer;
      args.heads = m_heads, args.kv_heads = m_kv_heads, args.head_dim = m_head_dim;
      args.pos = 0, args.n = n;
      args.q = q, args.keys = keys, args.values = values;
      KVLAB_TRY(detail::causal_attention(args, m_scratch, out));
      return append(layer, 0, n, keys, values);
    }
    if (n > 1) {
      // A later chunk of the prompt (llama.cpp's micro-batches): as the prompt, it reads its own
      // exact rows, beside the cache before it read a tile of whole blocks at a time, and is
      // stored after (its blocks flushed with the codebooks of the first chunk's).
      detail::TiledAttentionArgs args;
      args.heads = m_heads, args.kv_heads = m_kv_heads, args.head_dim = m_head_dim;
      args.pos = pos, args.n = n, args.q = q;
      args.tile = (detail::kTiledAttentionTokens + m_config.block_size - 1) / m_config.block_size *
                  m_config.block_size;
      args.new_keys = keys, args.new_values = values;
      args.read = [&](int first, int last, float* k, float* v) -> Status {
        const auto count = static_cast<std::size_t>(last - first) * kv;
        return cache.dequantize_rows(first, last, {k, count}, {v, count});
      };
      KVLAB_TRY(detail::tiled_causal_attention(args, m_tiled, out));
      return append(layer, pos, n, keys, values);
    }
    // A decode step: stored, then attending over everything stored up to it.
    for (int i = 0; i < n; ++i) {
      const auto row = static_cast<std::size_t>(i);
      KVLAB_TRY(append(layer, pos + i, 1, keys + row * kv, values + row * kv));
      KVLAB_TRY(fused_attention(cache.view(), {q + row * qd, static_cast<std::size_t>(qd)}, m_heads,
                                {out + row * qd, static_cast<std::size_t>(qd)}, m_fused_scratch));
    }
    return Ok{};
  }

  Status append(int layer, int pos, int n, float* keys, float* values) override {
    KVLAB_TRY(check_append(layer, static_cast<int>(m_layers.size()), pos, n, tokens(layer)));
    CompressedKvCache& cache = m_layers[static_cast<std::size_t>(layer)];
    const int kv = m_kv_heads * m_head_dim;
    const auto count = static_cast<std::size_t>(n) * kv;
    if (pos == 0) {
      return cache.prefill(TensorView::of_floats({keys, count}, m_kv_heads, m_head_dim),
                           TensorView::of_floats({values, count}, m_kv_heads, m_head_dim));
    }
    for (int i = 0; i < n; ++i) {
      const auto row = static_cast<std::size_t>(i) * kv;
      KVLAB_TRY(cache.append({keys + row, static_cast<std::size_t>(kv)},
                             {values + row, static_cast<std::size_t>(kv)}));
    }
    return Ok{};
  }

  std::uint64_t bytes() const override {
    std::uint64_t total = 0;
    for (const CompressedKvCache& c : m_layers) total += c.memory().total();
    return total;
  }

  std::uint64_t fp16_bytes() const override {
    std::uint64_t total = 0;
    for (const CompressedKvCache& c : m_layers) {
      total += 2ull * 2ull * static_cast<std::uint64_t>(c.tokens()) *
               static_cast<std::uint64_t>(m_kv_heads * m_head_dim);
    }
    return total;
  }

  std::string label() const override {
    return fmt::format("kvcomp B={} rel={} + {}", m_config.block_size, m_config.rel_scale,
                       codec_id(m_config.codec));
  }

  Status dequantize_layer(int layer, std::span<float> keys,
                          std::span<float> values) const override {
    if (layer < 0 || layer >= static_cast<int>(m_layers.size())) {
      return make_error(fmt::format("KV store: no layer {}", layer));
    }
    return m_layers[static_cast<std::size_t>(layer)].dequantize_all(keys, values);
  }

  int tokens(int layer) const override {
    return layer >= 0 && layer < static_cast<int>(m_layers.size())
               ? m_layers[static_cast<std::size_t>(layer)].tokens()
               : 0;
  }

 private:
  int m_heads, m_kv_heads, m_head_dim;
  CompressedCacheConfig m_config;
  std::vector<CompressedKvCache> m_layers;
  detail::AttentionScratch m_scratch;
  detail::TiledAttentionScratch m_tiled;
  std::vector<float> m_fused_scratch;
};

}  // namespace

Result<std::unique_ptr<KvStore>> make_kvcomp_store(const LlamaConfig& model,
                                                   const CompressedCacheConfig& config,
                                                   int max_tokens) {
  std::vector<CompressedKvCache> layers;
  layers.reserve(static_cast<std::size_t>(model.layers));
  for (int l = 0; l < model.layers; ++l) {
    auto cache = CompressedKvCache::create(config, model.kv_heads, model.head_dim());
    if (!cache) return make_error("KVComp cache: " + cache.message());
    if (max_tokens > 0) cache->reserve(max_tokens);
    layers.push_back(std::move(*cache));
  }
  return std::unique_ptr<KvStore>(new KvCompStore(model, config, std::move(layers)));
}

}  // namespace kvlab
