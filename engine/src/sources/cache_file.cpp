#include "kvlab/engine/sources/cache_file.h"

#include <algorithm>
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "kvlab/engine/model/gguf_model.h"
#include "kvlab/engine/sources/npy.h"
#include "kvlab/engine/sources/safetensors.h"
#include "sources/cache_readers.h"

namespace kvlab {

namespace {

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

}  // namespace

std::string_view cache_file_format_name(CacheFileFormat format) {
  switch (format) {
    case CacheFileFormat::Safetensors:
      return "safetensors";
    case CacheFileFormat::Npz:
      return "npz";
    case CacheFileFormat::Npy:
      return "npy";
    case CacheFileFormat::NpyDirectory:
      return "npy directory";
  }
  return "?";
}

std::optional<CacheFileFormat> cache_file_format(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return CacheFileFormat::NpyDirectory;
  const std::string ext = lower_extension(path);
  if (ext == ".safetensors") return CacheFileFormat::Safetensors;
  if (ext == ".npz") return CacheFileFormat::Npz;
  if (ext == ".npy") return CacheFileFormat::Npy;
  return std::nullopt;
}

Result<KvCache> load_cache_file(const std::filesystem::path& path, const ProgressFn& progress) {
  return load_cache_file(path, LlamaStateOptions{}, progress);
}

Result<KvCache> load_cache_file(const std::filesystem::path& path,
                                const LlamaStateOptions& llama_state, const ProgressFn& progress) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    return make_error(fmt::format("{}: no such file or directory", path.string()));
  }
  // llama.cpp names its state files freely (slot.bin, prompt.cache, ...): the magic decides.
  if (std::filesystem::is_regular_file(status) && is_llama_state_file(path)) {
    return load_llama_state(path, llama_state, progress);
  }
  // A model is not a cache: say what the file is and where it belongs.
  const bool regular = std::filesystem::is_regular_file(status);
  if (regular && is_gguf_file(path)) {
    return make_error(fmt::format(
        "{}: a GGUF model, not a KV cache; capture a cache from it (the 'model capture…' source, "
        "or kvlab capture --model {} --out CACHE.safetensors) or describe it (kvlab sources "
        "info {})",
        path.string(), path.string(), path.string()));
  }
  if (regular && lower_extension(path) == ".gguf") {
    return make_error(fmt::format(
        "{}: named .gguf but not a GGUF file (it does not start with the bytes 'GGUF'); a "
        "damaged or partial download?",
        path.string()));
  }
  const auto format = cache_file_format(path);
  if (!format) {
    return make_error(fmt::format(
        "{}: unsupported file type '{}' (expected .safetensors, .npz, .npy, a directory of .npy "
        "files, or a llama.cpp state file)",
        path.string(), path.extension().string()));
  }
  switch (*format) {
    case CacheFileFormat::Safetensors:
      return load_safetensors_cache(path, progress);
    case CacheFileFormat::Npz:
      return load_npz_cache(path, progress);
    case CacheFileFormat::Npy:
      return load_npy_cache(path, progress);
    case CacheFileFormat::NpyDirectory:
      return load_npy_directory_cache(path, progress);
  }
  return make_error(fmt::format("{}: unsupported file type", path.string()));
}

Result<KvCache> load_cache_bytes(std::span<const std::byte> bytes, std::string_view name,
                                 const ProgressFn& progress) {
  const std::filesystem::path path(name);
  const std::string ext = lower_extension(path);
  const auto file = detail::InputFile::from_memory(bytes, std::string(name));
  std::string source = "memory:" + std::string(name);
  if (bytes.size() >= 4 && std::to_integer<char>(bytes[0]) == 'q' &&
      std::to_integer<char>(bytes[1]) == 's' && std::to_integer<char>(bytes[2]) == 'g' &&
      std::to_integer<char>(bytes[3]) == 'g') {  // kLlamaStateSeqMagic, little-endian
    return load_llama_state_bytes(bytes, name, LlamaStateOptions{}, progress);
  }
  if (ext == ".safetensors") {
    return detail::read_safetensors_cache(file, path.stem().string(), std::move(source), progress);
  }
  if (ext == ".npz") {
    return detail::read_npz_cache(file, path.stem().string(), std::move(source), progress);
  }
  if (ext == ".npy") {
    return detail::read_npy_cache(file, path.stem().string(), std::move(source), progress);
  }
  return make_error(
      fmt::format("{}: unsupported file type '{}' (expected .safetensors, .npz or .npy)", name,
                  path.extension().string()));
}

namespace {

Status check_writable_format(const std::filesystem::path& path) {
  if (lower_extension(path) != ".safetensors") {
    return make_error(
        fmt::format("{}: cannot write '{}' files; caches are saved as .safetensors only",
                    path.string(), path.extension().string()));
  }
  return Ok{};
}

}  // namespace

Status save_cache_file(const KvCache& cache, const std::filesystem::path& path) {
  KVLAB_TRY(check_writable_format(path));
  return save_safetensors_cache(cache, path);
}

Status save_cache_file_by_layer(const CacheFileLayout& layout, const std::filesystem::path& path,
                                int batch, const MakeLayersFn& make, const ProgressFn& progress) {
  KVLAB_TRY(check_writable_format(path));
  return save_safetensors_cache_by_layer(layout, path, batch, make, progress);
}

}  // namespace kvlab
