// RunsStore: every run the lab makes (compression, eviction, planning) kept in one SQLite file
// with its parameters, metrics and artifacts (histograms, code lengths, eviction maps), so any
// chart can be redrawn later. WAL, foreign keys, a 10 s busy timeout, writes in transactions,
// and forward schema migrations keyed by PRAGMA user_version. No Qt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/result.h"

namespace kvlab {

// What a caller hands to save_run; the store adds the id and the creation time.
struct NewRun {
  std::string kind;  // "compression", "eviction", "plan", ...
  std::string source;
  std::string method;
  std::string label;
  nlohmann::json params;
  nlohmann::json metrics;
  // Large per-run data by name ("histograms", "code_lengths", "eviction_map"); names unique.
  std::vector<std::pair<std::string, nlohmann::json>> artifacts;
  // The run's identity across databases. Empty: the store makes a random one (32 hex digits). A
  // sweep gives each item's key (sweep_plan.h), so that an item already in a database is
  // recognised and a merge of shards keeps one copy of it.
  std::string uid;
};

// One line of the runs list: enough for a table and for charts across runs, without artifacts.
struct RunSummary {
  std::int64_t id = 0;
  std::string created_at;  // UTC ISO-8601 with milliseconds: "2024-05-01T12:34:56.789Z"
  std::string kind;
  std::string source;
  std::string method;
  std::string label;
  std::string notes;
  std::string tags;  // comma-separated, as the user typed them
  std::string uid;   // unique in a database, the same in every database the run is copied to
  nlohmann::json metrics;
  // Empty, or what of the row could not be read ("metrics is not valid JSON"): a row damaged
  // outside kvlab is listed and shown with the rest, its unreadable parts empty, never an error
  // that hides the other runs.
  std::string damage;
};

// What RunsStore::import_runs did with one database.
struct ImportReport {
  std::filesystem::path from;
  int imported = 0;  // runs copied in
  int skipped = 0;   // runs whose uid the database held already
};

// A whole run.
struct RunRecord : RunSummary {
  nlohmann::json params;
  std::map<std::string, nlohmann::json> artifacts;
};

// $KVLAB_DB if set, else $XDG_DATA_HOME/kvlab/runs.sqlite, else ~/.local/share/kvlab/runs.sqlite.
std::filesystem::path default_db_path();

// A runs database. Movable, not copyable. It holds no connection between calls: each call
// opens one, works in one transaction and closes it, so code elsewhere in the process that
// opens and closes the file (a file dialog) cannot drop locks it relies on (runs_store.cpp says
// why). Its methods may be called from several threads at once; several processes may use the
// same file at once.
// Every error names the database file and the operation:
//   "/home/me/.local/share/kvlab/runs.sqlite: saving run: database is locked".
class RunsStore {
 public:
  enum class OpenMode {
    CreateIfMissing,  // for those who save: creates the parent folders and the file
    MustExist,        // for those who only read: a missing file is an error, nothing is created
  };
  // Opens the file (creating it and its folders when missing, if the mode allows), then
  // migrates the schema to the latest version. A missing file with MustExist ("PATH: no runs
  // database: the file does not exist"), a file that is not a SQLite database, or one whose
  // schema is newer than this program knows, is an error and is left unmodified.
  static Result<RunsStore> open(const std::filesystem::path& path,
                                OpenMode mode = OpenMode::CreateIfMissing);
  // The schema version this program creates and migrates to.
  static int latest_schema_version();

  RunsStore(RunsStore&&) noexcept;
  RunsStore& operator=(RunsStore&&) noexcept;
  RunsStore(const RunsStore&) = delete;
  RunsStore& operator=(const RunsStore&) = delete;
  ~RunsStore();

  const std::filesystem::path& path() const;
  int schema_version() const;  // PRAGMA user_version after migrations; 0 when moved from

  // Saves the run and all its artifacts in one transaction; returns the new run's id. An error
  // naming the uid when a run with the run's (non-empty) uid is stored already.
  Result<std::int64_t> save_run(const NewRun& run);
  // The id of the run with this uid, if one is stored.
  Result<std::optional<std::int64_t>> find_run(std::string_view uid) const;
  // Copies every run of the database `from` (artifacts, notes, tags, label and creation time
  // included; ids are this database's own) whose uid this database does not hold yet, in one
  // transaction: an error leaves this database as it was. `from` is opened as open() does
  // (MustExist: a missing file is an error), so a database of an older schema is migrated first.
  // Importing a database into itself is an error.
  Result<ImportReport> import_runs(const std::filesystem::path& from);
  // Newest first; a negative limit lists every run.
  Result<std::vector<RunSummary>> list_runs(int limit = 1000) const;
  // Error "run 42 not found" when there is no such run.
  Result<RunRecord> load_run(std::int64_t id) const;
  // Deletes the run and (by cascade) its artifacts; an error when there is no such run.
  Status delete_run(std::int64_t id);
  // Puts a run back exactly as load_run returned it before it was deleted: the same id,
  // created_at, kind, source, method, label, notes, tags, params, metrics and artifacts, in one
  // transaction (undo of delete_run). An error naming the id when a run with that id exists
  // (restored already, or the id was reused by a newer run), or when the id is not positive.
  Status restore_run(const RunRecord& run);
  Status set_notes(std::int64_t id, std::string_view notes);
  Status set_tags(std::int64_t id, std::string_view tags);

  // The user's own catalogue entries by kind ("gpu", "model") and id, as JSON: saving an id that
  // exists replaces it; listing is by id; deleting a missing one is an error.
  Status save_catalog_entry(std::string_view kind, std::string_view id,
                            const nlohmann::json& entry);
  Result<std::vector<nlohmann::json>> list_catalog_entries(std::string_view kind) const;
  Status delete_catalog_entry(std::string_view kind, std::string_view id);
  // "ok", or SQLite's integrity and foreign-key problems, one per line.
  Result<std::string> integrity_check() const;

 private:
  struct Impl;
  explicit RunsStore(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> m_impl;
};

}  // namespace kvlab
