// Where the model tests find their data, and how they skip when it is missing.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace kvlab::test {

inline std::filesystem::path smollm2() {
  return KVLAB_SMOLLM2;
}
inline std::filesystem::path gguf_types_dir() {
  return KVLAB_GGUF_TYPES_DIR;
}
// True when the README's test command runs: missing test data is then a failure, not a skip.
inline bool test_data_required() {
  const char* v = std::getenv("KVLAB_REQUIRE_TEST_DATA");
  return v && std::string(v) == "1";
}

}  // namespace kvlab::test

// Skips the test (or fails it, when test data is required) when `file` does not exist.
#define KVLAB_REQUIRE_FILE(file)                                                             \
  do {                                                                                       \
    const std::filesystem::path kvlab_required_{file};                                       \
    if (!std::filesystem::exists(kvlab_required_)) {                                         \
      if (::kvlab::test::test_data_required()) {                                             \
        FAIL() << kvlab_required_ << " is missing; run scripts/test_data.sh";                \
      } else {                                                                               \
        GTEST_SKIP() << kvlab_required_ << " is missing; run scripts/test_data.sh to fetch"; \
      }                                                                                      \
    }                                                                                        \
  } while (0)
