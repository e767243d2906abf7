// The runs database schema as an ordered list of forward migrations keyed by
// PRAGMA user_version (the pattern of iSH fs/fake-migrate.c and qBittorrent's
// dbresumedatastorage.cpp): migration i takes the schema from version i to i + 1.
#pragma once

#include <span>
#include <string_view>

#include "kvlab/engine/core/result.h"
#include "sqlite_handles.h"

namespace kvlab::store_schema {

struct Migration {
  std::string_view description;  // for error messages: "migrating schema to version 2 (...)"
  std::string_view sql;          // one or more statements; never BEGIN/COMMIT or user_version
};

std::span<const Migration> migrations();
inline int latest_version() {
  return static_cast<int>(migrations().size());
}

// Reads PRAGMA user_version; reading is all it does, so a file that is not a database, or one
// from a newer kvlab, is reported without being written to.
Result<int> read_version(sqlite::Database& db);

// Error when `version` is newer than this program knows.
Status check_not_newer(const sqlite::Database& db, int version);

// Applies every missing migration, each in its own BEGIN IMMEDIATE transaction together with
// its user_version bump, re-reading the version under the write lock so that two processes
// opening a new database at once apply each migration exactly once. Returns the final version.
Result<int> migrate(sqlite::Database& db);

}  // namespace kvlab::store_schema
