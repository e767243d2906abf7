// A fresh, empty folder for the running test: ctest runs every test (and every instance of a
// parameterised test) as its own process, possibly in parallel, so the folder is named after the
// test and the process.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>

namespace kvlab::test {

// root/<prefix.><suite>.<test>.<pid>, emptied first.
inline std::filesystem::path fresh_test_dir(const std::filesystem::path& root,
                                            std::string_view prefix = {}) {
  std::string name(prefix);
  if (!name.empty()) name += '.';
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    name += std::string(info->test_suite_name()) + "." + info->name() + ".";
  }
  name += std::to_string(static_cast<long>(::getpid()));
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const std::filesystem::path dir = root / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kvlab::test
