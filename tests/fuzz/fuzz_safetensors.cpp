// Fuzz target: safetensors KV caches (safetensors.h): the JSON header, the tensor index and the
// kvlab.* metadata, read from memory by load_cache_bytes as "fuzz.safetensors".
#include "fuzz_cache_file.h"

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  return kvlab::fuzz::load_cache_file_bytes(data, size, "fuzz.safetensors");
}
