// Safetensors files (https://huggingface.co/docs/safetensors): a u64 little-endian header length
// N, N bytes of JSON, then the tensor data; each tensor's "data_offsets" [begin, end) are
// relative to the start of the data.
//
// Two layers: the generic index (every tensor's name, dtype, shape and byte range, validated
// against the file) that any safetensors file has, model checkpoints included; and on top of it
// the KV-cache layout kvlab reads and writes:
//   layers.{i}.key, layers.{i}.value  [tokens, kv_heads, head_dim]
//   layers.{i}.query (optional)       [queries, q_heads, head_dim]
// in F16, BF16 or F32, with the model shape in __metadata__ (string values): kvlab.format
// ("kv-cache/1"), kvlab.model, kvlab.layers, kvlab.q_heads, kvlab.kv_heads, kvlab.head_dim,
// kvlab.source. Without metadata the shape is inferred from the tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

// Every element type the safetensors format defines.
enum class SafetensorsDType : std::uint8_t {
  Bool,
  U8,
  I8,
  F8_E4M3,
  F8_E5M2,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64
};
std::string_view safetensors_dtype_name(SafetensorsDType t);  // as in the file: "F16", "BF16"
std::optional<SafetensorsDType> parse_safetensors_dtype(std::string_view name);
std::size_t safetensors_dtype_size(SafetensorsDType t);  // bytes per element
// The KV-cache dtype for F16, BF16 and F32; nullopt for the others.
std::optional<DType> kv_dtype(SafetensorsDType t);

struct SafetensorsEntry {
  std::string name;
  SafetensorsDType dtype = SafetensorsDType::F32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  // [begin, end) relative to the start of the data
  std::uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsIndex {
  std::filesystem::path path;
  std::uint64_t file_size = 0;
  std::uint64_t data_offset = 0;  // 8 + header length: where the data starts in the file
  std::map<std::string, std::string> metadata;  // __metadata__
  std::vector<SafetensorsEntry> tensors;        // ordered by begin offset
  const SafetensorsEntry* find(std::string_view name) const;
};

// Headers larger than this are refused (real checkpoints have a few hundred KB at most).
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1000 * 1000;

// Reads and validates the header: JSON syntax, every entry's dtype, shape and data_offsets,
// shape product x dtype size == byte range length (without overflow), ranges inside the data
// and not overlapping, metadata values being strings. Messages name the file and the tensor.
Result<SafetensorsIndex> read_safetensors_index(const std::filesystem::path& path);
// The same on a header already in memory: `json` is the N header bytes, `data_size` the bytes
// after the header, `label` names the file in messages.
Result<SafetensorsIndex> parse_safetensors_header(std::string_view json, std::uint64_t data_size,
                                                  std::string_view label);
// Reads one tensor's bytes, as stored (little-endian), into `out` (exactly entry.nbytes()).
Status read_safetensors_tensor(const SafetensorsIndex& index, const SafetensorsEntry& entry,
                               std::span<std::byte> out);

// Reads a KV cache. Tensors keep the file's dtype. Tensors not named "layers.*" are ignored.
// The cache's source is "file:" + path.
Result<KvCache> load_safetensors_cache(const std::filesystem::path& path,
                                       const ProgressFn& progress = {});
// Writes the cache (after KvCache::validate()) with the metadata above, the header padded with
// spaces to a multiple of 8 bytes. Atomic: PATH.tmp is written, synced and renamed over PATH.
Status save_safetensors_cache(const KvCache& cache, const std::filesystem::path& path);

// A cache too large to hold whole, described for writing layer by layer: everything a file holds
// besides the tensors' bytes.
struct CacheFileLayout {
  ModelShape shape;  // shape.layers: how many layers the file gets
  int tokens = 0;
  int queries = 0;  // query vectors per layer; 0: none
  DType dtype = DType::F16;
  std::string source;
  RopeSpec key_rope;
  bool keys_pre_rope = false;
};
// Fills out.size() layers from layer `first` on, with tensors of the layout's shapes and dtype.
using MakeLayersFn = std::function<Status(int first, std::span<LayerKv> out)>;
// Writes the header, then makes `batch` layers at a time and writes them, holding no more than
// one batch; atomically, as save_safetensors_cache. Progress is per batch; a cancel leaves no
// file.
Status save_safetensors_cache_by_layer(const CacheFileLayout& layout,
                                       const std::filesystem::path& path, int batch,
                                       const MakeLayersFn& make, const ProgressFn& progress = {});

}  // namespace kvlab
