// The shared body of the cache-file targets (fuzz_safetensors, fuzz_npy, fuzz_npz):
// load_cache_bytes under a name whose extension picks the reader, and its promise
// (test_file_fuzz.cpp): a cache that passes KvCache::validate(), or an error naming the file.
#pragma once

#include <string>

#include "fuzz_target.h"
#include "kvlab/engine/sources/cache_file.h"

namespace kvlab::fuzz {

inline int load_cache_file_bytes(const std::uint8_t* data, std::size_t size,
                                 std::string_view name) {
  auto cache = load_cache_bytes(as_bytes(data, size), name);
  if (!cache) {
    FUZZ_REQUIRE(cache.message().find(name) != std::string::npos, cache.message());
    return 0;
  }
  const Status valid = cache->validate();
  FUZZ_REQUIRE(valid.ok(), valid.message());
  FUZZ_REQUIRE(cache->source == "memory:" + std::string(name), cache->source);
  // Every stored byte is readable (a tensor reaching past its buffer faults under ASan here).
  for (const LayerKv& layer : cache->layers) {
    for (const Tensor* t : {&layer.key, &layer.value, &layer.query}) {
      if (t->nbytes() == 0) continue;
      volatile std::byte sink = t->data()[0] ^ t->data()[t->nbytes() - 1];
      (void)sink;
    }
  }
  return 0;
}

}  // namespace kvlab::fuzz
