// What every fuzz target shares (docs/FUZZING.md). Each fuzz_<name>.cpp defines one entry point
// with libFuzzer's signature, named KVLAB_FUZZ_ENTRY: LLVMFuzzerTestOneInput in a libFuzzer
// binary (kvlab_fuzz_<name>), kvlab_fuzz_<name> in the replay driver, which links every target
// into one program (zstd's tests/fuzz/regression_driver.c does the same).
//
// A target feeds the bytes to the engine's real parser and returns 0. An Error result is a fine
// outcome; a crash, a sanitizer report or a broken promise of the API (FUZZ_REQUIRE) is the bug.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>

#ifndef KVLAB_FUZZ_ENTRY
#define KVLAB_FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

namespace kvlab::fuzz {

inline std::span<const std::byte> as_bytes(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

// A promise of the API the input broke: abort so that libFuzzer saves the input.
[[noreturn]] inline void contract_failed(const char* file, int line, const char* what,
                                         std::string_view detail) {
  std::fprintf(stderr, "%s:%d: fuzz contract failed: %s\n  %.*s\n", file, line, what,
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}
#define FUZZ_REQUIRE(cond, detail) \
  ((cond) ? (void)0 : ::kvlab::fuzz::contract_failed(__FILE__, __LINE__, #cond, (detail)))

// For loaders that only take a path: the bytes written to a file in the temporary folder, named
// after the process so that parallel fuzzers do not share it, and removed afterwards.
class TempFile {
 public:
  TempFile(std::string_view stem, std::string_view extension, std::span<const std::byte> bytes) {
    m_path = std::filesystem::temp_directory_path() /
             ("kvlab-fuzz-" + std::string(stem) + "-" + std::to_string(::getpid()) +
              std::string(extension));
    std::ofstream out(m_path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    FUZZ_REQUIRE(out.good(), m_path.string());
  }
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(m_path, ignored);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

}  // namespace kvlab::fuzz
