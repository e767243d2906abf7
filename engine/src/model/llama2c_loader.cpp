// The llama2.c v0 checkpoint (Karpathy's llama2.c, export.py "legacy_export"): a header of seven
// int32 (dim, hidden_dim, layers, heads, kv_heads, vocab with its sign saying whether the
// classifier is shared, seq_len), then the float32 weights in a fixed order, memory-mapped and
// used in place. The tokenizer file beside it is llama_tokenizer.cpp's.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "io/file_mapping.h"
#include "kvlab/engine/model/llama_model.h"

namespace kvlab {

Result<LlamaModel> LlamaModel::load_llama2c(const std::filesystem::path& file) {
  const std::string path = file.string();
  auto mapping = detail::FileMapping::open(path);
  if (!mapping) return mapping.error();
  LlamaConfig c;
  constexpr std::size_t kHeader = 7 * sizeof(std::int32_t);
  if ((*mapping)->size() < kHeader) {
    return make_error(
        fmt::format("{}: {} bytes, too short for a llama2.c header", path, (*mapping)->size()));
  }
  std::int32_t h[7];
  std::memcpy(h, (*mapping)->data(), kHeader);
  c.dim = h[0], c.hidden_dim = h[1], c.layers = h[2], c.heads = h[3], c.kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab = std::abs(h[5]), c.seq_len = h[6];
  const auto bad = [&](const char* what) {
    return make_error(fmt::format(
        "{}: not a llama2.c v0 checkpoint: {} (dim {}, hidden {}, "
        "layers {}, heads {}, kv_heads {}, vocab {}, seq_len {})",
        path, what, c.dim, c.hidden_dim, c.layers, c.heads, c.kv_heads, c.vocab, c.seq_len));
  };
  if (c.dim <= 0 || c.hidden_dim <= 0 || c.layers <= 0 || c.heads <= 0 || c.kv_heads <= 0 ||
      c.vocab <= 0 || c.seq_len <= 0 || c.dim > 65536 || c.hidden_dim > 262144 || c.layers > 1024 ||
      c.vocab > 1 << 22 || c.seq_len > 1 << 22) {
    return bad("a header field is out of range");
  }
  if (c.dim % c.heads != 0 || c.heads % c.kv_heads != 0 || c.head_dim() % 2 != 0) {
    return bad("dim, heads and kv_heads do not divide");
  }
  const std::size_t L = c.layers, D = c.dim, F = c.hidden_dim, KV = c.kv_dim(), V = c.vocab;
  const std::size_t half_head = c.head_dim() / 2;
  const std::size_t floats = V * D + L * D + L * D * D + 2 * L * KV * D + L * D * D + L * D +
                             2 * L * F * D + L * D * F + D + 2 * c.seq_len * half_head +
                             (c.shared_classifier ? 0 : V * D);
  if ((*mapping)->size() != kHeader + floats * sizeof(float)) {
    return make_error(fmt::format("{}: {} bytes, but a llama2.c checkpoint of this shape has {}",
                                  path, (*mapping)->size(), kHeader + floats * sizeof(float)));
  }
  const float* p = reinterpret_cast<const float*>((*mapping)->data() + kHeader);
  const auto take = [&](std::size_t n) {
    const float* at = p;
    p += n;
    return at;
  };
  LlamaWeights w;
  w.embedding = take(V * D);
  w.layers.resize(L);
  const auto per_layer = [&](auto member, std::size_t n) {
    for (auto& l : w.layers) l.*member = take(n);
  };
  per_layer(&LlamaLayerWeights::attn_norm, D);
  per_layer(&LlamaLayerWeights::wq, D * D);
  per_layer(&LlamaLayerWeights::wk, KV * D);
  per_layer(&LlamaLayerWeights::wv, KV * D);
  per_layer(&LlamaLayerWeights::wo, D * D);
  per_layer(&LlamaLayerWeights::ffn_norm, D);
  per_layer(&LlamaLayerWeights::w1, F * D);
  per_layer(&LlamaLayerWeights::w2, D * F);
  per_layer(&LlamaLayerWeights::w3, F * D);
  w.final_norm = take(D);
  take(2 * c.seq_len * half_head);  // precomputed RoPE tables of old exports: recomputed here
  w.classifier = c.shared_classifier ? w.embedding : take(V * D);
  w.owner = std::shared_ptr<const detail::FileMapping>(std::move(*mapping));
  return from_weights(path, c, std::move(w));
}

}  // namespace kvlab
