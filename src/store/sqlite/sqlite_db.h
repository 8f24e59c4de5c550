// tollgate store/sqlite: a thin RAII layer over the SQLite C API.
//
// Conn owns one sqlite3 connection and a cache of its prepared statements. Unexpected SQLite
// failures (I/O errors, a full disk, constraint violations that the code rules out) throw SqlError;
// the store turns them into Code::storage_full / Code::unavailable / Code::internal at its boundary. Expected outcomes
// (no row) are plain return values.
//
// Thread safety: a Conn and its statements belong to one thread at a time.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/limits.h"

namespace tollgate::sqlite {

class SqlError : public std::runtime_error {
 public:
  SqlError(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }
  // The database is busy, locked, out of space or failing I/O: the operation may succeed later.
  bool is_transient() const;
  // SQLITE_FULL: a write found no space (ENOSPC, or a short write) — transient, with a code of its own.
  bool is_disk_full() const { return (code_ & 0xff) == SQLITE_FULL; }

 private:
  int code_;
};

class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  void bind(int index, std::int64_t value);
  void bind(int index, std::string_view value);
  void bind(int index, const std::string& value) { bind(index, std::string_view(value)); }
  void bind(int index, const char* value) { bind(index, std::string_view(value)); }
  void bind(int index, const std::optional<std::int64_t>& value);
  void bind(int index, const std::optional<std::string>& value);
  void bind_null(int index);
  // Steps once: true when a row is ready, false when done. Throws SqlError on failure.
  bool step();
  void reset();

  std::int64_t int64(int column) const { return sqlite3_column_int64(stmt_, column); }
  bool is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
  std::optional<std::int64_t> optional_int64(int column) const;
  std::string text(int column) const;
  std::optional<std::string> optional_text(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Binds arguments 1..N, resets on destruction: one use of a cached statement.
class Query {
 public:
  template <typename... Args>
  Query(Stmt& stmt, const Args&... args) : stmt_(stmt) {  // NOLINT
    int index = 1;
    (stmt_.bind(index++, args), ...);
  }
  ~Query() { stmt_.reset(); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  bool step() { return stmt_.step(); }
  Stmt* operator->() { return &stmt_; }
  Stmt& row() { return stmt_; }

 private:
  Stmt& stmt_;
};

struct OpenOptions {
  bool read_only = false;
  int busy_timeout_ms = limits::kSqliteBusyTimeoutMsDefault;
  int cache_size_kib = limits::kSqliteCacheKibDefault;
  // PRAGMA synchronous: "FULL" flushes the WAL at every commit; "NORMAL" leaves that to the
  // caller (the store's sync()) and keeps the checkpoint order (WAL flushed before it is copied,
  // the database before the WAL restarts). Never "OFF".
  const char* synchronous = "FULL";
  const char* vfs = nullptr;  // the SQLite VFS by name; nullptr: the default one
  // The page size of a database this connection creates (ignored for an existing one). 0: SQLite's.
  int page_size_bytes = 0;
};

class Conn {
 public:
  // Opens (creating if asked and missing) with WAL, the given synchronous level, foreign keys on and
  // a busy time-out: every setting explicit, none left to defaults.
  Conn(const std::string& path, const OpenOptions& options);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // A cached prepared statement for `sql` (cached by its address: pass string literals).
  Stmt& stmt(const char* sql);
  void exec(const char* sql);
  std::int64_t changes() const { return sqlite3_changes64(db_); }
  std::int64_t last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
  sqlite3* raw() { return db_; }

 private:
  sqlite3* db_ = nullptr;
  std::unordered_map<const char*, std::unique_ptr<Stmt>> stmts_;
};

}  // namespace tollgate::sqlite
