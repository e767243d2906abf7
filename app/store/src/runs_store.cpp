#include "kvlab/store/runs_store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <system_error>
#include <thread>

#include "migrations.h"
#include "sqlite_handles.h"

#include "kvlab/engine/io/json_text.h"

namespace kvlab {

namespace {

constexpr int kBusyTimeoutMs = 10'000;

// Per connection, so every connection sets them. In WAL mode NORMAL loses no committed
// transaction when a process crashes, only (possibly) the last ones at a power loss; the
// database stays consistent either way.
constexpr const char* kConnectionPragmas = "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON";

// Milliseconds, so runs saved in the same second still sort newest first.
constexpr std::string_view kNowUtc = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

// Column order shared by list_runs and load_run, so read_summary can read both.
constexpr std::string_view kSummaryColumns =
    "id, created_at, kind, source, method, label, notes, tags, uid, metrics_json";

Result<std::string> to_json_text(const sqlite::Database& db, std::string_view operation,
                                 std::string_view what, const nlohmann::json& value) {
  try {
    return json_text(value);
  } catch (const nlohmann::json::exception& e) {  // a string that is not valid UTF-8
    return db.error(operation, fmt::format("{} cannot be written as JSON: {}", what, e.what()));
  }
}

Result<nlohmann::json> from_json_text(const sqlite::Database& db, std::string_view operation,
                                      std::string_view what, const std::string& text) {
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return db.error(operation, fmt::format("{} is not valid JSON", what));
  return value;
}

Status read_text(const sqlite::Statement& stmt, int column, std::string& out) {
  auto text = stmt.column_text(column);
  if (!text) return text.error();
  out = std::move(*text);
  return Ok{};
}

void add_damage(RunSummary& run, std::string_view what) {
  run.damage += run.damage.empty() ? std::string(what) : "; " + std::string(what);
}

Status read_summary(const sqlite::Database& db, std::string_view operation,
                    const sqlite::Statement& stmt, RunSummary& run) {
  run.id = stmt.column_int64(0);
  std::string* fields[] = {&run.created_at, &run.kind,  &run.source, &run.method,
                           &run.label,      &run.notes, &run.tags,   &run.uid};
  for (int i = 0; i < 8; ++i) {
    KVLAB_TRY(read_text(stmt, i + 1, *fields[i]));
  }
  std::string metrics;
  KVLAB_TRY(read_text(stmt, 9, metrics));
  auto parsed = from_json_text(db, operation, fmt::format("run {} metrics", run.id), metrics);
  run.metrics = parsed ? std::move(*parsed) : nlohmann::json::object();
  if (!parsed) add_damage(run, "metrics is not valid JSON");
  return Ok{};
}

Error not_found(const sqlite::Database& db, std::string_view operation, std::int64_t id) {
  return db.error(operation, fmt::format("run {} not found", id));
}

// Switching a new database to WAL needs an exclusive lock, and SQLite returns SQLITE_BUSY for
// it at once, without calling the busy handler, when another connection holds a shared lock
// (two processes opening a new file together). So retry here, for as long as the busy
// timeout would have waited. Once the file is in WAL mode (it is persistent) this is a no-op.
Status enable_wal(sqlite::Database& db) {
  constexpr std::string_view op = "enabling WAL";
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    auto mode = db.query_texts("PRAGMA journal_mode = WAL", op);
    if (mode) {
      if (!mode->empty() && mode->front() == "wal") return Ok{};
      return db.error(
          op, fmt::format("the journal mode stayed '{}'", mode->empty() ? "" : mode->front()));
    }
    if (!db.last_error_was_busy() || std::chrono::steady_clock::now() >= give_up) {
      return mode.error();
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

Error moved_from() {
  return make_error("runs store: used after being moved from");
}

// A run's params, metrics and artifacts as the JSON texts the tables hold, made before the write
// transaction starts (an error names the part that cannot be written).
struct RunJsonTexts {
  std::string params, metrics;
  std::vector<std::pair<std::string_view, std::string>> artifacts;
};

template <class Artifacts>
Result<RunJsonTexts> run_json_texts(const sqlite::Database& db, std::string_view op,
                                    const nlohmann::json& params, const nlohmann::json& metrics,
                                    const Artifacts& artifacts) {
  RunJsonTexts out;
  auto p = to_json_text(db, op, "params", params);
  if (!p) return p.error();
  out.params = std::move(*p);
  auto m = to_json_text(db, op, "metrics", metrics);
  if (!m) return m.error();
  out.metrics = std::move(*m);
  out.artifacts.reserve(artifacts.size());
  for (const auto& [name, data] : artifacts) {
    auto text = to_json_text(db, op, fmt::format("artifact '{}'", name), data);
    if (!text) return text.error();
    out.artifacts.emplace_back(name, std::move(*text));
  }
  return out;
}

// Inside the caller's transaction: one artifacts row per (name, JSON text).
Status insert_artifacts(sqlite::Database& db, std::string_view op, std::int64_t run_id,
                        const std::vector<std::pair<std::string_view, std::string>>& artifacts) {
  if (artifacts.empty()) return Ok{};
  auto add = db.prepare("INSERT INTO artifacts (run_id, name, data_json) VALUES (?1, ?2, ?3)", op);
  if (!add) return add.error();
  for (const auto& [name, text] : artifacts) {
    KVLAB_TRY(add->bind(1, run_id));
    KVLAB_TRY(add->bind(2, name));
    KVLAB_TRY(add->bind(3, std::string_view(text)));
    KVLAB_TRY(add->run());
  }
  return Ok{};
}

// Inside the caller's transaction: whether a run with this uid is stored.
Result<std::optional<std::int64_t>> run_with_uid(sqlite::Database& db, std::string_view op,
                                                 std::string_view uid) {
  auto stmt = db.prepare("SELECT id FROM runs WHERE uid = ?1", op);
  if (!stmt) return stmt.error();
  KVLAB_TRY(stmt->bind(1, uid));
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(stmt->column_int64(0));
}

// Inside the caller's transaction: the runs row and its artifacts; returns the row's id. `id` 0
// takes a new id, an empty created_at the time now, an empty uid a new random one.
Result<std::int64_t> insert_run(sqlite::Database& db, std::string_view op, std::int64_t id,
                                const RunSummary& run, const RunJsonTexts& texts) {
  auto insert = db.prepare(
      fmt::format("INSERT INTO runs (id, created_at, kind, source, method, label, notes, tags, "
                  "params_json, metrics_json, uid) VALUES (NULLIF(?1, 0), "
                  "COALESCE(NULLIF(?2, ''), {}), ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                  "COALESCE(NULLIF(?11, ''), lower(hex(randomblob(16)))))",
                  kNowUtc),
      op);
  if (!insert) return insert.error();
  KVLAB_TRY(insert->bind(1, id));
  const std::string_view values[] = {run.created_at, run.kind,  run.source, run.method,
                                     run.label,      run.notes, run.tags,   texts.params,
                                     texts.metrics,  run.uid};
  for (int i = 0; i < 10; ++i) {
    KVLAB_TRY(insert->bind(i + 2, values[i]));
  }
  KVLAB_TRY(insert->run());
  const std::int64_t row_id = db.last_insert_rowid();
  KVLAB_TRY(insert_artifacts(db, op, row_id, texts.artifacts));
  return row_id;
}

// Inside the caller's transaction: an error naming the run that has `uid` already; Ok for an
// empty uid (the insert makes a new one).
Status uid_free(sqlite::Database& db, std::string_view op, std::string_view uid) {
  if (uid.empty()) return Ok{};
  auto existing = run_with_uid(db, op, uid);
  if (!existing) return existing.error();
  if (!*existing) return Ok{};
  return db.error(
      op, fmt::format("run {} has the uid {} already; nothing was changed", **existing, uid));
}

}  // namespace

// The store keeps no connection between calls: every call opens one, does its work in one
// transaction and closes it. POSIX advisory locks belong to the process, and any close() of
// any descriptor of the database file or its -wal/-shm by other code in the same process (a file
// dialog sniffing the folder's files for icons or MIME types, a QFileInfo, a recent-files check)
// silently drops the locks a connection holds (sqlite.org/howtocorrupt.html, section 2.2). A
// connection kept open across user actions would then let another process believe it is alone,
// checkpoint and delete the WAL under it, and every later save of this process would go into
// the deleted file (lost at exit, its id handed out again by the other process). A connection
// that lives for one call only is exposed for milliseconds instead of for the whole session, and
// each call sees the files as they are now. Opening a connection costs tens of microseconds.
struct RunsStore::Impl {
  Impl(std::filesystem::path db_path, int version)
      : path(std::move(db_path)), schema_version(version) {}

  // A connection for one call: the file must exist (open() made it), foreign keys on.
  Result<sqlite::Database> connect() const {
    auto db = sqlite::Database::open(path, kBusyTimeoutMs, sqlite::Database::Create::No);
    if (!db) return db.error();
    if (auto pragmas = db->exec(kConnectionPragmas, "setting up the connection"); !pragmas) {
      return pragmas.error();
    }
    return db;
  }

  std::filesystem::path path;
  int schema_version;
};

RunsStore::RunsStore(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
RunsStore::RunsStore(RunsStore&&) noexcept = default;
RunsStore& RunsStore::operator=(RunsStore&&) noexcept = default;
RunsStore::~RunsStore() = default;

int RunsStore::latest_schema_version() {
  return store_schema::latest_version();
}

const std::filesystem::path& RunsStore::path() const {
  static const std::filesystem::path none;
  return m_impl ? m_impl->path : none;
}

int RunsStore::schema_version() const {
  return m_impl ? m_impl->schema_version : 0;
}

Result<RunsStore> RunsStore::open(const std::filesystem::path& path, OpenMode mode) {
  if (path.empty()) return make_error("runs store: the database path is empty");
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (mode == OpenMode::MustExist && !exists) {
    return make_error(fmt::format("{}: no runs database: the file does not exist{}", path.string(),
                                  ec ? fmt::format(" ({})", ec.message()) : std::string()));
  }
  if (const auto parent = path.parent_path(); !parent.empty() && !exists) {
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return make_error(
          fmt::format("{}: creating folder {}: {}", path.string(), parent.string(), ec.message()));
    }
  }
  auto db = sqlite::Database::open(
      path, kBusyTimeoutMs,
      mode == OpenMode::MustExist ? sqlite::Database::Create::No : sqlite::Database::Create::Yes);
  if (!db) return db.error();

  // Read-only checks first: garbage and databases from a newer kvlab are refused before the
  // journal mode (or anything else) is written. They run in one read transaction so the version
  // and the table count come from the same snapshot: another process may be creating the schema
  // at this moment, and seeing its tables without its version would look like a foreign file.
  KVLAB_TRY(db->exec("BEGIN", "checking the schema"));
  auto version = store_schema::read_version(*db);
  if (!version) return version.error();
  KVLAB_TRY(store_schema::check_not_newer(*db, *version));
  if (*version == 0) {
    // Version 0 with tables in it is some other program's database (a mistyped $KVLAB_DB):
    // refuse it rather than switch its journal mode and add kvlab's tables to it.
    auto tables = db->query_int("SELECT count(*) FROM sqlite_master", "checking the schema");
    if (!tables) return tables.error();
    if (*tables > 0) {
      return db->error("checking the schema",
                       "the file holds tables but no kvlab schema version; it is not a kvlab "
                       "runs database and was left untouched");
    }
  }
  KVLAB_TRY(db->exec("COMMIT", "checking the schema"));

  KVLAB_TRY(enable_wal(*db));
  if (auto pragmas = db->exec(kConnectionPragmas, "setting up the connection"); !pragmas) {
    return pragmas.error();
  }
  auto fk_on = db->query_int("PRAGMA foreign_keys", "enabling foreign keys");
  if (!fk_on) return fk_on.error();
  if (*fk_on != 1) return db->error("enabling foreign keys", "this SQLite lacks them");

  auto migrated = store_schema::migrate(*db);
  if (!migrated) return migrated.error();
  // The connection closes here: every call opens its own (see Impl).
  return RunsStore(std::make_unique<Impl>(path, *migrated));
}

Result<std::int64_t> RunsStore::save_run(const NewRun& run) {
  constexpr std::string_view op = "saving run";
  if (!m_impl) return moved_from();
  // Connected first (it takes no lock yet) so that errors below name the file.
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;

  // Validate and serialise before taking the write lock, so other writers wait less.
  std::set<std::string_view> names;
  for (const auto& [name, data] : run.artifacts) {
    if (!names.insert(name).second) {
      return db.error(op, fmt::format("artifact '{}' appears twice", name));
    }
  }
  auto texts = run_json_texts(db, op, run.params, run.metrics, run.artifacts);
  if (!texts) return texts.error();

  auto tx = sqlite::Transaction::begin(db, sqlite::Transaction::Mode::Immediate, op);
  if (!tx) return tx.error();
  KVLAB_TRY(uid_free(db, op, run.uid));
  RunSummary row;
  row.kind = run.kind;
  row.source = run.source;
  row.method = run.method;
  row.label = run.label;
  row.uid = run.uid;
  auto id = insert_run(db, op, 0, row, *texts);
  if (!id) return id.error();
  KVLAB_TRY(tx->commit());
  return *id;
}

Result<std::optional<std::int64_t>> RunsStore::find_run(std::string_view uid) const {
  const std::string op = fmt::format("finding the run with uid {}", uid);
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  return run_with_uid(*connection, op, uid);
}

Result<std::vector<RunSummary>> RunsStore::list_runs(int limit) const {
  constexpr std::string_view op = "listing runs";
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;

  auto stmt = db.prepare(fmt::format("SELECT {} FROM runs ORDER BY created_at DESC, id DESC "
                                     "LIMIT ?1",
                                     kSummaryColumns),
                         op);
  if (!stmt) return stmt.error();
  KVLAB_TRY(stmt->bind(1, std::int64_t{limit}));
  std::vector<RunSummary> runs;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    RunSummary run;
    KVLAB_TRY(read_summary(db, op, *stmt, run));
    runs.push_back(std::move(run));
  }
  return runs;
}

Result<RunRecord> RunsStore::load_run(std::int64_t id) const {
  const std::string op = fmt::format("loading run {}", id);
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;

  // One read transaction, so the run and its artifacts come from the same snapshot.
  auto tx = sqlite::Transaction::begin(db, sqlite::Transaction::Mode::Deferred, op);
  if (!tx) return tx.error();
  auto stmt = db.prepare(
      fmt::format("SELECT {}, params_json FROM runs WHERE id = ?1", kSummaryColumns), op);
  if (!stmt) return stmt.error();
  KVLAB_TRY(stmt->bind(1, id));
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return not_found(db, op, id);

  RunRecord run;
  KVLAB_TRY(read_summary(db, op, *stmt, run));
  std::string params;
  KVLAB_TRY(read_text(*stmt, 10, params));
  auto parsed = from_json_text(db, op, "params", params);
  run.params = parsed ? std::move(*parsed) : nlohmann::json::object();
  if (!parsed) add_damage(run, "params is not valid JSON");
  KVLAB_TRY(stmt->reset());

  auto artifacts =
      db.prepare("SELECT name, data_json FROM artifacts WHERE run_id = ?1 ORDER BY name", op);
  if (!artifacts) return artifacts.error();
  KVLAB_TRY(artifacts->bind(1, id));
  for (;;) {
    auto next = artifacts->step();
    if (!next) return next.error();
    if (!*next) break;
    std::string name;
    std::string data;
    KVLAB_TRY(read_text(*artifacts, 0, name));
    KVLAB_TRY(read_text(*artifacts, 1, data));
    auto value = from_json_text(db, op, fmt::format("artifact '{}'", name), data);
    if (!value) {
      add_damage(run, fmt::format("artifact '{}' is not valid JSON", name));
      continue;
    }
    run.artifacts.emplace(std::move(name), std::move(*value));
  }
  KVLAB_TRY(tx->commit());
  return run;
}

Status RunsStore::delete_run(std::int64_t id) {
  const std::string op = fmt::format("deleting run {}", id);
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;

  // One statement is its own transaction; ON DELETE CASCADE removes the artifacts with it.
  auto stmt = db.prepare("DELETE FROM runs WHERE id = ?1", op);
  if (!stmt) return stmt.error();
  KVLAB_TRY(stmt->bind(1, id));
  KVLAB_TRY(stmt->run());
  if (db.changes() == 0) return not_found(db, op, id);
  return Ok{};
}

Status RunsStore::restore_run(const RunRecord& run) {
  const std::string op = fmt::format("restoring run {}", run.id);
  if (!m_impl) return moved_from();
  // Connected first (it takes no lock yet) so that errors below name the file.
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;
  if (run.id <= 0) return db.error(op, "the run id must be positive");

  auto texts = run_json_texts(db, op, run.params, run.metrics, run.artifacts);
  if (!texts) return texts.error();

  auto tx = sqlite::Transaction::begin(db, sqlite::Transaction::Mode::Immediate, op);
  if (!tx) return tx.error();
  // Checked first for a message that says what happened; the primary key would refuse it too.
  auto taken = db.prepare("SELECT count(*) FROM runs WHERE id = ?1", op);
  if (!taken) return taken.error();
  KVLAB_TRY(taken->bind(1, run.id));
  KVLAB_TRY(taken->step());
  const std::int64_t existing = taken->column_int64(0);
  KVLAB_TRY(taken->reset());
  if (existing > 0) {
    return db.error(op, fmt::format("a run with id {} exists already (restored before, or the id "
                                    "was given to a newer run); nothing was changed",
                                    run.id));
  }
  KVLAB_TRY(uid_free(db, op, run.uid));
  auto id = insert_run(db, op, run.id, run, *texts);
  if (!id) return id.error();
  return tx->commit();
}

Result<ImportReport> RunsStore::import_runs(const std::filesystem::path& from) {
  const std::string op = fmt::format("importing runs from {}", from.string());
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;
  std::error_code ec;
  if (std::filesystem::equivalent(from, m_impl->path, ec)) {
    return db.error(op, "it is this database itself; nothing was changed");
  }
  auto source = RunsStore::open(from, OpenMode::MustExist);
  if (!source) return source.error();
  auto summaries = source->list_runs(-1);
  if (!summaries) return summaries.error();

  ImportReport report;
  report.from = from;
  auto tx = sqlite::Transaction::begin(db, sqlite::Transaction::Mode::Immediate, op);
  if (!tx) return tx.error();
  // Oldest first, so that the copies' ids follow the order the runs were made in.
  for (auto it = summaries->rbegin(); it != summaries->rend(); ++it) {
    auto existing = run_with_uid(db, op, it->uid);
    if (!existing) return existing.error();
    if (*existing) {
      ++report.skipped;
      continue;
    }
    auto run = source->load_run(it->id);
    if (!run) return run.error();
    // A damaged run is shown where it lies, never copied with its unreadable parts lost.
    if (!run->damage.empty()) {
      return db.error(
          op, fmt::format("{}: run {} cannot be copied: {}", from.string(), run->id, run->damage));
    }
    auto texts = run_json_texts(db, op, run->params, run->metrics, run->artifacts);
    if (!texts) return texts.error();
    auto id = insert_run(db, op, 0, *run, *texts);
    if (!id) return id.error();
    ++report.imported;
  }
  KVLAB_TRY(tx->commit());
  return report;
}

namespace {

// UPDATE runs SET <column> = text WHERE id = id, for one of the user's own text columns.
Status set_run_text(Result<sqlite::Database> connection, std::string_view column, std::int64_t id,
                    std::string_view text) {
  const std::string op = fmt::format("setting {} of run {}", column, id);
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;
  auto stmt = db.prepare(fmt::format("UPDATE runs SET {} = ?1 WHERE id = ?2", column), op);
  if (!stmt) return stmt.error();
  KVLAB_TRY(stmt->bind(1, text));
  KVLAB_TRY(stmt->bind(2, id));
  KVLAB_TRY(stmt->run());
  if (db.changes() == 0) return not_found(db, op, id);
  return Ok{};
}

}  // namespace

Status RunsStore::set_notes(std::int64_t id, std::string_view notes) {
  if (!m_impl) return moved_from();
  return set_run_text(m_impl->connect(), "notes", id, notes);
}

Status RunsStore::set_tags(std::int64_t id, std::string_view tags) {
  if (!m_impl) return moved_from();
  return set_run_text(m_impl->connect(), "tags", id, tags);
}

Status RunsStore::save_catalog_entry(std::string_view kind, std::string_view id,
                                     const nlohmann::json& entry) {
  const std::string op = fmt::format("saving {} '{}'", kind, id);
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;
  if (id.empty()) return db.error(op, "the id is empty");
  auto text = to_json_text(db, op, "the entry", entry);
  if (!text) return text.error();
  auto stmt = db.prepare(
      "INSERT INTO catalog (kind, id, entry_json) VALUES (?1, ?2, ?3) "
      "ON CONFLICT (kind, id) DO UPDATE SET entry_json = excluded.entry_json",
      op);
  if (!stmt) return stmt.error();
  KVLAB_TRY(stmt->bind(1, kind));
  KVLAB_TRY(stmt->bind(2, id));
  KVLAB_TRY(stmt->bind(3, std::string_view(*text)));
  return stmt->run();
}

Result<std::vector<nlohmann::json>> RunsStore::list_catalog_entries(std::string_view kind) const {
  const std::string op = fmt::format("listing the user's {} entries", kind);
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;
  auto stmt = db.prepare("SELECT id, entry_json FROM catalog WHERE kind = ?1 ORDER BY id", op);
  if (!stmt) return stmt.error();
  KVLAB_TRY(stmt->bind(1, kind));
  std::vector<nlohmann::json> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    std::string id, text;
    KVLAB_TRY(read_text(*stmt, 0, id));
    KVLAB_TRY(read_text(*stmt, 1, text));
    auto parsed = from_json_text(db, op, fmt::format("{} '{}'", kind, id), text);
    if (!parsed) return parsed.error();
    out.push_back(std::move(*parsed));
  }
  return out;
}

Status RunsStore::delete_catalog_entry(std::string_view kind, std::string_view id) {
  const std::string op = fmt::format("deleting {} '{}'", kind, id);
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;
  auto stmt = db.prepare("DELETE FROM catalog WHERE kind = ?1 AND id = ?2", op);
  if (!stmt) return stmt.error();
  KVLAB_TRY(stmt->bind(1, kind));
  KVLAB_TRY(stmt->bind(2, id));
  KVLAB_TRY(stmt->run());
  if (db.changes() == 0) return db.error(op, fmt::format("no {} '{}' is stored", kind, id));
  return Ok{};
}

Result<std::string> RunsStore::integrity_check() const {
  constexpr std::string_view op = "checking integrity";
  if (!m_impl) return moved_from();
  auto connection = m_impl->connect();
  if (!connection) return connection.error();
  sqlite::Database& db = *connection;

  auto problems = db.query_texts("PRAGMA integrity_check", op);
  if (!problems) return problems.error();
  if (problems->size() == 1 && problems->front() == "ok") problems->clear();

  // Rows that point at a missing parent: (table, rowid, parent table, constraint index).
  auto fk = db.prepare("PRAGMA foreign_key_check", op);
  if (!fk) return fk.error();
  for (;;) {
    auto row = fk->step();
    if (!row) return row.error();
    if (!*row) break;
    std::string table;
    std::string parent;
    KVLAB_TRY(read_text(*fk, 0, table));
    KVLAB_TRY(read_text(*fk, 2, parent));
    problems->push_back(fmt::format("foreign key: {} row {} refers to a missing {} row", table,
                                    fk->column_int64(1), parent));
  }
  if (problems->empty()) return std::string("ok");
  return fmt::format("{}", fmt::join(*problems, "\n"));
}

}  // namespace kvlab
