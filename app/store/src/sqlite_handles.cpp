#include "sqlite_handles.h"

#include <utility>

#include <fmt/format.h>

#include "kvlab/engine/core/utf8.h"

namespace kvlab::sqlite {

namespace {

struct SqliteFree {
  void operator()(char* text) const noexcept { sqlite3_free(text); }
};

}  // namespace

// ---- Statement ---------------------------------------------------------------------------

Error Statement::error(int rc) const {
  sqlite3* db = sqlite3_db_handle(m_stmt.get());
  // The connection's message describes the last failed call on it, which is this one; the
  // code's generic text is the fallback.
  const char* what = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return make_error(fmt::format("{}: {}", m_context, what));
}

Status Statement::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(m_stmt.get(), index, value);
  if (rc != SQLITE_OK) return error(rc);
  return Ok{};
}

Status Statement::bind(int index, std::string_view text) {
  // The database holds text: bytes that are not UTF-8 (a label, a path) become U+FFFD here, the
  // one way into it. SQLITE_TRANSIENT: SQLite copies the text, so the buffer may go away.
  const std::string valid = valid_utf8(text);
  const int rc = sqlite3_bind_text64(m_stmt.get(), index, valid.data(), valid.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) return error(rc);
  return Ok{};
}

Result<bool> Statement::step() {
  const int rc = sqlite3_step(m_stmt.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return error(rc);
}

Status Statement::run() {
  for (;;) {
    auto row = step();
    if (!row) return row.error();
    if (!*row) break;
  }
  return reset();
}

Status Statement::reset() {
  const int rc = sqlite3_reset(m_stmt.get());
  if (rc != SQLITE_OK) return error(rc);
  return Ok{};
}

std::int64_t Statement::column_int64(int column) const {
  return sqlite3_column_int64(m_stmt.get(), column);
}

Result<std::string> Statement::column_text(int column) const {
  // Text first, then its length, in that order (SQLite's documented idiom).
  const unsigned char* text = sqlite3_column_text(m_stmt.get(), column);
  if (text == nullptr) {
    if (sqlite3_column_type(m_stmt.get(), column) == SQLITE_NULL) return std::string();
    return error(SQLITE_NOMEM);
  }
  const int size = sqlite3_column_bytes(m_stmt.get(), column);
  // A row written by an older version or damaged outside kvlab may hold any bytes: read as text.
  return valid_utf8(
      std::string_view(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size)));
}

// ---- Database ----------------------------------------------------------------------------

Result<Database> Database::open(const std::filesystem::path& path, int busy_timeout_ms,
                                Create create) {
  sqlite3* raw = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX |
                    (create == Create::Yes ? SQLITE_OPEN_CREATE : 0);
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  // Even a failed open usually hands back a handle that must be closed: own it first.
  Database db(raw, path);
  if (rc != SQLITE_OK) {
    const char* what = raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    return db.error("opening", what);
  }
  if (sqlite3_extended_result_codes(raw, 1) != SQLITE_OK) {
    return db.sqlite_error("enabling extended result codes");
  }
  if (sqlite3_busy_timeout(raw, busy_timeout_ms) != SQLITE_OK) {
    return db.sqlite_error("setting the busy timeout");
  }
  return db;
}

Result<Statement> Database::prepare(std::string_view sql, std::string_view operation) {
  sqlite3_stmt* raw = nullptr;
  const int rc =
      sqlite3_prepare_v2(m_db.get(), sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  Statement stmt(raw, fmt::format("{}: {}", m_path.string(), operation));
  if (rc != SQLITE_OK) return sqlite_error(operation);
  if (raw == nullptr) return error(operation, "empty SQL statement");
  return stmt;
}

Status Database::exec(const std::string& sql, std::string_view operation) {
  char* raw_message = nullptr;
  const int rc = sqlite3_exec(m_db.get(), sql.c_str(), nullptr, nullptr, &raw_message);
  std::unique_ptr<char, SqliteFree> message(raw_message);
  if (rc != SQLITE_OK) {
    return error(operation, message != nullptr ? message.get() : sqlite3_errstr(rc));
  }
  return Ok{};
}

Result<std::int64_t> Database::query_int(std::string_view sql, std::string_view operation) {
  auto stmt = prepare(sql, operation);
  if (!stmt) return stmt.error();
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return error(operation, "the query returned no row");
  const std::int64_t value = stmt->column_int64(0);
  KVLAB_TRY(stmt->run());
  return value;
}

Result<std::vector<std::string>> Database::query_texts(std::string_view sql,
                                                       std::string_view operation) {
  auto stmt = prepare(sql, operation);
  if (!stmt) return stmt.error();
  std::vector<std::string> texts;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    auto text = stmt->column_text(0);
    if (!text) return text.error();
    texts.push_back(std::move(*text));
  }
  return texts;
}

std::int64_t Database::last_insert_rowid() const {
  return sqlite3_last_insert_rowid(m_db.get());
}

std::int64_t Database::changes() const {
  return sqlite3_changes(m_db.get());
}

bool Database::in_transaction() const {
  return sqlite3_get_autocommit(m_db.get()) == 0;
}

bool Database::last_error_was_busy() const {
  const int primary = sqlite3_extended_errcode(m_db.get()) & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

Error Database::error(std::string_view operation, std::string_view what) const {
  return make_error(fmt::format("{}: {}: {}", m_path.string(), operation, what));
}

Error Database::sqlite_error(std::string_view operation) const {
  return error(operation, m_db != nullptr ? sqlite3_errmsg(m_db.get()) : "no connection");
}

// ---- Transaction -------------------------------------------------------------------------

Result<Transaction> Transaction::begin(Database& db, Mode mode, std::string_view operation) {
  const char* sql = mode == Mode::Immediate ? "BEGIN IMMEDIATE" : "BEGIN";
  KVLAB_TRY(db.exec(sql, operation));
  return Transaction(db, std::string(operation));
}

Transaction::Transaction(Transaction&& other) noexcept
    : m_db(other.m_db), m_operation(std::move(other.m_operation)), m_open(other.m_open) {
  other.m_open = false;
}

Transaction::~Transaction() {
  // Nobody is left to report a failed rollback to; SQLite rolls back on close in any case.
  if (m_open) (void)rollback();
}

Status Transaction::commit() {
  auto committed = m_db->exec("COMMIT", m_operation);
  // A failed COMMIT may leave the transaction open (SQLITE_BUSY); the destructor rolls it back.
  if (committed || !m_db->in_transaction()) m_open = false;
  return committed;
}

Status Transaction::rollback() {
  m_open = false;
  // SQLite may already have rolled back by itself after an I/O error or SQLITE_FULL.
  if (!m_db->in_transaction()) return Ok{};
  return m_db->exec("ROLLBACK", m_operation);
}

}  // namespace kvlab::sqlite
