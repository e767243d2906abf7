#include "migrations.h"

#include <fmt/format.h>

#include <array>

namespace kvlab::store_schema {

namespace {

// Append only: a shipped migration is never edited, since databases in the field already ran
// it. To change the schema, add an entry at the end.
constexpr std::array kMigrations = {
    Migration{"runs and their artifacts",
              R"sql(
CREATE TABLE runs (
  id           INTEGER PRIMARY KEY,
  created_at   TEXT NOT NULL,             -- UTC ISO-8601, 2024-05-01T12:34:56.789Z
  kind         TEXT NOT NULL,             -- 'compression', 'eviction', 'plan', ...
  source       TEXT NOT NULL,
  method       TEXT NOT NULL,
  label        TEXT NOT NULL DEFAULT '',
  params_json  TEXT NOT NULL,
  metrics_json TEXT NOT NULL
);
CREATE TABLE artifacts (
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name      TEXT NOT NULL,
  data_json TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
);
)sql"},
    Migration{"run notes and an index for newest-first listing",
              R"sql(
ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_by_created_at ON runs(created_at);
)sql"},
    Migration{"the user's own catalogue entries (GPUs, imported models)",
              R"sql(
CREATE TABLE catalog (
  kind       TEXT NOT NULL,              -- 'gpu', 'model'
  id         TEXT NOT NULL,
  entry_json TEXT NOT NULL,
  PRIMARY KEY (kind, id)
);
)sql"},
    Migration{"tags per run",
              R"sql(
ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT '';  -- comma-separated, as typed
)sql"},
    Migration{"a unique id per run, so that runs merged from other databases are not duplicated",
              R"sql(
ALTER TABLE runs ADD COLUMN uid TEXT NOT NULL DEFAULT '';  -- 32 hex digits, or a sweep item's key
UPDATE runs SET uid = lower(hex(randomblob(16))) WHERE uid = '';
CREATE UNIQUE INDEX runs_by_uid ON runs(uid);
)sql"},
};

}  // namespace

std::span<const Migration> migrations() {
  return kMigrations;
}

Result<int> read_version(sqlite::Database& db) {
  auto version = db.query_int("PRAGMA user_version", "reading the schema version");
  if (!version) return version.error();
  return static_cast<int>(*version);
}

Status check_not_newer(const sqlite::Database& db, int version) {
  if (version <= latest_version()) return Ok{};
  return db.error("checking the schema version",
                  fmt::format("the database has schema version {}, newer than the {} this "
                              "kvlab knows; it was left untouched (use a newer kvlab)",
                              version, latest_version()));
}

Result<int> migrate(sqlite::Database& db) {
  auto version = read_version(db);
  if (!version) return version.error();
  KVLAB_TRY(check_not_newer(db, *version));
  while (*version < latest_version()) {
    const int target = *version + 1;
    const Migration& migration = kMigrations[static_cast<std::size_t>(*version)];
    const std::string operation =
        fmt::format("migrating schema to version {} ({})", target, migration.description);

    auto tx = sqlite::Transaction::begin(db, sqlite::Transaction::Mode::Immediate, operation);
    if (!tx) return tx.error();
    // Another process may have migrated while this one waited for the write lock.
    version = read_version(db);
    if (!version) return version.error();
    KVLAB_TRY(check_not_newer(db, *version));
    if (*version >= target) {
      KVLAB_TRY(tx->commit());
      continue;
    }
    if (auto applied = db.exec(std::string(migration.sql), operation); !applied) {
      return applied.error();
    }
    if (auto bumped = db.exec(fmt::format("PRAGMA user_version = {}", target), operation);
        !bumped) {
      return bumped.error();
    }
    KVLAB_TRY(tx->commit());
    version = target;
  }
  return *version;
}

}  // namespace kvlab::store_schema
