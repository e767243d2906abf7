// Fuzz target: one .npy array [layers, 2, tokens, kv_heads, head_dim] (npy.h): the header dict and
// its shape, read from memory by load_cache_bytes as "fuzz.npy".
#include "fuzz_cache_file.h"

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  return kvlab::fuzz::load_cache_file_bytes(data, size, "fuzz.npy");
}
