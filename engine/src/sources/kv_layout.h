// Private: maps named tensors found in a file (safetensors, .npz entries, .npy files) onto the
// KV-cache layout `layers.{i}.key` / `.value` [tokens, kv_heads, head_dim] and optional
// `layers.{i}.query` [queries, q_heads, head_dim], validating names, shapes and dtypes, then
// builds the KvCache reading each tensor's bytes straight into its storage.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/file_mapping.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"

namespace kvlab::detail {

enum class KvRole : std::uint8_t { Key, Value, Query };

// A tensor as a file describes it, before any data is read.
struct TensorDesc {
  std::string name;                  // "layers.3.key"
  std::optional<DType> dtype;        // empty when the file's dtype has no KV equivalent
  std::string dtype_text;            // the dtype as the file spells it, for messages
  std::vector<std::uint64_t> shape;  // as stored
};

// Which tensor (index into the TensorDesc list) holds each part of each layer.
struct KvLayout {
  ModelShape shape;
  struct Layer {
    std::size_t key = 0, value = 0;
    std::optional<std::size_t> query;
  };
  std::vector<Layer> layers;
};

// Largest layer index accepted in a tensor name (real models have at most a few hundred).
inline constexpr int kMaxLayers = 4096;

// Parses "layers.{i}.key|value|query"; nullopt for anything else.
struct KvName {
  int layer = 0;
  KvRole role = KvRole::Key;
};
std::optional<KvName> parse_kv_name(std::string_view name);
// True for names the KV layout claims ("layers." prefix); other tensors in a file are ignored.
inline bool is_kv_candidate(std::string_view name) {
  return name.starts_with("layers.");
}

// Metadata keys (safetensors __metadata__), all string values.
inline constexpr std::string_view kMetaFormat = "kvlab.format";
inline constexpr std::string_view kMetaModel = "kvlab.model";
inline constexpr std::string_view kMetaLayers = "kvlab.layers";
inline constexpr std::string_view kMetaQHeads = "kvlab.q_heads";
inline constexpr std::string_view kMetaKvHeads = "kvlab.kv_heads";
inline constexpr std::string_view kMetaHeadDim = "kvlab.head_dim";
inline constexpr std::string_view kMetaSource = "kvlab.source";
// How RoPE turned the keys (rope_spec_to_json), and "true" when they are stored before it.
inline constexpr std::string_view kMetaKeyRope = "kvlab.key_rope";
inline constexpr std::string_view kMetaKeysPreRope = "kvlab.keys_pre_rope";

// `label` names the file in messages; `default_name` is the model name when the metadata has
// none. Tensors whose names do not start with "layers." are ignored.
Result<KvLayout> plan_kv_layout(std::string_view label, std::span<const TensorDesc> tensors,
                                const std::map<std::string, std::string>& metadata,
                                const std::string& default_name);

// Fills `out` (exactly the tensor's bytes) with the data of tensors[index].
using ReadTensorFn = std::function<Status(std::size_t index, std::span<std::byte> out)>;

// A file mapped whole (null when it could not be, or the bytes are in memory), and the file
// offset where each tensor's bytes start.
struct MappedTensors {
  std::shared_ptr<const FileMapping> mapping;
  std::function<std::uint64_t(std::size_t index)> offset;
};

// Builds the cache and checks it with KvCache::validate(), reporting progress (cancellable). With
// a mapping, a tensor whose bytes lie in it aligned to its dtype is read in place
// (Tensor::borrowed: the run streams it from the file, and memory holds only what it touches);
// every other tensor is allocated and filled with `read`.
Result<KvCache> build_kv_cache(std::string_view label, const KvLayout& layout,
                               std::span<const TensorDesc> tensors, const ReadTensorFn& read,
                               const ProgressFn& progress, std::string source,
                               const MappedTensors& mapped = {});

// "[2, 3, 4]"
std::string shape_text(std::span<const std::uint64_t> shape);

}  // namespace kvlab::detail
