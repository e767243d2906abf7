// Private: the KV-cache readers of each format, working on an InputFile so that the same code
// reads files and bytes in memory (cache_file.cpp dispatches to them). `model_name` is the
// shape's name when the file does not carry one; `source` goes to KvCache::source.
#pragma once

#include <string>

#include "io/file_io.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"

namespace kvlab::detail {

Result<KvCache> read_safetensors_cache(const InputFile& file, const std::string& model_name,
                                       std::string source, const ProgressFn& progress);
Result<KvCache> read_npz_cache(const InputFile& file, const std::string& model_name,
                               std::string source, const ProgressFn& progress);
Result<KvCache> read_npy_cache(const InputFile& file, const std::string& model_name,
                               std::string source, const ProgressFn& progress);

}  // namespace kvlab::detail
