// NumPy files as KV-cache sources (format: numpy.lib.format, versions 1.0, 2.0 and 3.0).
// Accepted element types, little-endian and C order only: '<f2' (float16), '<f4' (float32) and
// '<u2', which holds bfloat16 bit patterns (NumPy has no bfloat16; save with
// `arr.view(np.uint16)`). Three layouts:
//  - a .npz archive (np.savez or np.savez_compressed) with entries named like the safetensors
//    tensors: layers.{i}.key.npy, layers.{i}.value.npy, optional layers.{i}.query.npy;
//  - a directory holding the same names as separate .npy files;
//  - one .npy shaped [layers, 2, tokens, kv_heads, head_dim], keys then values.
// The model shape is inferred from the tensors (q_heads from the queries, else kv_heads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

struct NpyHeader {
  int major_version = 1, minor_version = 0;
  std::string descr;  // as in the file: "<f2"
  DType dtype = DType::F32;
  std::vector<std::uint64_t> shape;
  std::uint64_t data_offset = 0;  // size of the whole header: where the array data starts
  std::uint64_t data_bytes = 0;   // product(shape) * element size
};

// Headers larger than this are refused (NumPy itself refuses more than 10,000 by default).
inline constexpr std::uint64_t kMaxNpyHeaderBytes = 1u << 20;
// Enough leading bytes for npy_header_size() to work with.
inline constexpr std::size_t kNpyPrefixBytes = 12;

// From the first bytes of a .npy (kNpyPrefixBytes of them, or the whole file when shorter):
// the size of the whole header (magic, version, length field and dictionary text).
Result<std::uint64_t> npy_header_size(std::span<const std::byte> prefix, std::string_view label);
// Parses a header; `bytes` holds at least npy_header_size() bytes from the start of the .npy.
// Errors (naming `label`): bad magic, unknown version, garbage dictionary, missing or extra
// keys, fortran_order True, big-endian or unsupported dtypes, shapes whose size overflows.
Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes, std::string_view label);

// One .npy shaped [layers, 2, tokens, kv_heads, head_dim].
Result<KvCache> load_npy_cache(const std::filesystem::path& path, const ProgressFn& progress = {});
// A .npz whose entries are named layers.{i}.key.npy, ... (stored or deflated; CRCs checked).
Result<KvCache> load_npz_cache(const std::filesystem::path& path, const ProgressFn& progress = {});
// A directory of layers.{i}.key.npy, layers.{i}.value.npy (and .query.npy) files.
Result<KvCache> load_npy_directory_cache(const std::filesystem::path& dir,
                                         const ProgressFn& progress = {});

}  // namespace kvlab
