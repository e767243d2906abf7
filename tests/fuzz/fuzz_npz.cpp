// Fuzz target: .npz archives (npy.h, zip_reader.cpp): stored, deflated and Zip64 members, each an
// .npy, read from memory by load_cache_bytes as "fuzz.npz".
#include "fuzz_cache_file.h"

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  return kvlab::fuzz::load_cache_file_bytes(data, size, "fuzz.npz");
}
