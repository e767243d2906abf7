// Helpers shared by the store tests: a fresh folder per test, file bytes, raw SQLite access for
// fixture databases, and sample runs.
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/store/runs_store.h"
#include "scratch_dir.h"

namespace kvlab::store_test {

// KVLAB_TEST_TMPDIR/<suite>.<test>.<pid>, emptied first.
inline std::filesystem::path fresh_dir() {
  return test::fresh_test_dir(KVLAB_TEST_TMPDIR);
}

inline std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A raw connection for building fixtures and looking under the store; fails the test on error.
class RawDb {
 public:
  explicit RawDb(const std::filesystem::path& path) {
    const int rc =
        sqlite3_open_v2(path.c_str(), &m_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
    EXPECT_EQ(rc, SQLITE_OK) << path;
  }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;
  ~RawDb() { sqlite3_close(m_db); }

  void exec(const std::string& sql) {
    char* message = nullptr;
    const int rc = sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &message);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (message != nullptr ? message : "");
    sqlite3_free(message);
  }

  // First column of every row, as text.
  std::vector<std::string> texts(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(m_db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
    while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(stmt, 0);
      out.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
    }
    sqlite3_finalize(stmt);
    return out;
  }

  std::string text(const std::string& sql) {
    auto all = texts(sql);
    return all.empty() ? std::string() : all.front();
  }

 private:
  sqlite3* m_db = nullptr;
};

inline NewRun sample_run(const std::string& label) {
  NewRun run;
  run.kind = "compression";
  run.source = "synthetic:llama3-8b";
  run.method = "kivi";
  run.label = label;
  run.params = {{"bits", 2}, {"group", 32}, {"residual", 128}};
  run.metrics = {{"ratio", 5.25},
                 {"error", {{"mse", 0.0012}, {"max_abs", 0.25}}},
                 {"per_layer", {{{"ratio", 5.0}}, {{"ratio", 5.5}}}}};
  run.artifacts = {{"histograms", {{"layer", 0}, {"counts", {1, 2, 3, 4}}}},
                   {"code_lengths", {3, 3, 4, 5, 5}}};
  return run;
}

}  // namespace kvlab::store_test
