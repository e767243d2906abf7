// RAII owners of SQLite's C handles (the way ggml-cpp.h wraps ggml's C API): a connection, a
// prepared statement and a transaction. Every SQLite status is checked and turned into a
// kvlab::Error that names the database file and the operation:
//   "/home/me/.local/share/kvlab/runs.sqlite: saving run: database is locked".
// Private to kvlab_store: no raw handle leaves this layer.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/core/result.h"

namespace kvlab::sqlite {

struct ConnectionCloser {
  // sqlite3_close_v2 defers the close until every statement is finalized, so it cannot fail
  // in a way a destructor could act on.
  void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
};

struct StatementFinalizer {
  // sqlite3_finalize only repeats the status of the last step, which was already checked.
  void operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }
};

class Statement {
 public:
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;

  // Parameters are 1-based, as in SQLite.
  Status bind(int index, std::int64_t value);
  Status bind(int index, std::string_view text);
  // One step: true when a row is ready, false when the statement has finished.
  Result<bool> step();
  // Steps to the end (INSERT, UPDATE, DELETE) and resets, so the statement can be bound again.
  Status run();
  Status reset();

  // Columns are 0-based, as in SQLite.
  std::int64_t column_int64(int column) const;
  // NULL reads as ""; an out-of-memory while converting is an error.
  Result<std::string> column_text(int column) const;

 private:
  friend class Database;
  Statement(sqlite3_stmt* stmt, std::string context)
      : m_stmt(stmt), m_context(std::move(context)) {}
  Error error(int rc) const;

  std::unique_ptr<sqlite3_stmt, StatementFinalizer> m_stmt;
  std::string m_context;  // "<path>: <operation>", the prefix of every error message
};

class Database {
 public:
  enum class Create { No, Yes };
  // Opens a read-write connection with extended result codes and a busy timeout, creating the
  // file when missing only with Create::Yes; reads nothing yet, so a file that is not a
  // database is reported by the first statement, not here.
  static Result<Database> open(const std::filesystem::path& path, int busy_timeout_ms,
                               Create create);

  Database(Database&&) noexcept = default;
  Database& operator=(Database&&) noexcept = default;

  const std::filesystem::path& path() const { return m_path; }

  Result<Statement> prepare(std::string_view sql, std::string_view operation);
  // Runs one or more statements that return no rows worth reading (schema SQL, pragmas).
  Status exec(const std::string& sql, std::string_view operation);
  // Runs a statement whose first row's first column is an integer (PRAGMA user_version).
  Result<std::int64_t> query_int(std::string_view sql, std::string_view operation);
  // Runs a statement and returns the first column of every row (PRAGMA integrity_check).
  Result<std::vector<std::string>> query_texts(std::string_view sql, std::string_view operation);

  std::int64_t last_insert_rowid() const;
  // Rows changed by the last INSERT/UPDATE/DELETE itself (not by cascades).
  std::int64_t changes() const;
  bool in_transaction() const;
  // True when the last failed call on this connection failed because another connection held
  // a lock it needed (SQLITE_BUSY or SQLITE_LOCKED, any extended code).
  bool last_error_was_busy() const;

  // "<path>: <operation>: <what>"
  Error error(std::string_view operation, std::string_view what) const;
  // "<path>: <operation>: <SQLite's message for the connection>"
  Error sqlite_error(std::string_view operation) const;

 private:
  Database(sqlite3* db, std::filesystem::path path) : m_db(db), m_path(std::move(path)) {}

  std::unique_ptr<sqlite3, ConnectionCloser> m_db;
  std::filesystem::path m_path;
};

// A transaction rolled back when it goes out of scope uncommitted (an early error return).
class Transaction {
 public:
  enum class Mode { Deferred, Immediate };

  // Immediate takes the write lock at BEGIN, so a writer waits for another (busy timeout) at
  // the start instead of failing at its first write with SQLITE_BUSY.
  static Result<Transaction> begin(Database& db, Mode mode, std::string_view operation);

  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  Status commit();
  Status rollback();

 private:
  Transaction(Database& db, std::string operation) : m_db(&db), m_operation(std::move(operation)) {}

  Database* m_db;
  std::string m_operation;
  bool m_open = true;
};

}  // namespace kvlab::sqlite
