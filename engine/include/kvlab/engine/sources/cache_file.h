// Loading and saving KV caches as files, choosing the format from the path: .safetensors,
// .npz, .npy (one [layers, 2, tokens, kv_heads, head_dim] array) or a directory of
// layers.{i}.key.npy / layers.{i}.value.npy files; and, by their magic whatever their name,
// llama.cpp sequence-state files (llama_state.h). Only safetensors is written.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>

#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/sources/llama_state.h"
#include "kvlab/engine/sources/safetensors.h"

namespace kvlab {

enum class CacheFileFormat { Safetensors, Npz, Npy, NpyDirectory };

std::string_view cache_file_format_name(CacheFileFormat format);  // "safetensors", "npz", ...
// The format the path names: a directory, or the extension (case-insensitive); nullopt for
// anything else. Only looks at the path (a stat for directories); never reads the file.
std::optional<CacheFileFormat> cache_file_format(const std::filesystem::path& path);

// Reads a cache in any supported format. Errors name the file and what is wrong with it.
// `llama_state` says how to read a llama.cpp state file (its heads, head_dim and rotation); the
// other formats ignore it.
Result<KvCache> load_cache_file(const std::filesystem::path& path, const ProgressFn& progress = {});
Result<KvCache> load_cache_file(const std::filesystem::path& path,
                                const LlamaStateOptions& llama_state,
                                const ProgressFn& progress = {});
// Reads a cache from bytes in memory (a download, a drag-and-drop, a fuzzer) with the same
// checks: `name`'s extension picks the format (.safetensors, .npz or .npy) and `name` stands for
// the file in messages; bytes starting with llama.cpp's state magic are read as a state file with
// default options (which need the heads given, so they give that error). The cache's source is
// "memory:" + name.
Result<KvCache> load_cache_bytes(std::span<const std::byte> bytes, std::string_view name,
                                 const ProgressFn& progress = {});
// Writes a .safetensors file atomically; any other extension is an error.
Status save_cache_file(const KvCache& cache, const std::filesystem::path& path);
// The same for a cache made and written a batch of layers at a time
// (save_safetensors_cache_by_layer).
Status save_cache_file_by_layer(const CacheFileLayout& layout, const std::filesystem::path& path,
                                int batch, const MakeLayersFn& make,
                                const ProgressFn& progress = {});

}  // namespace kvlab
