#include "store/sqlite/sqlite_db.h"

#include "core/result.h"

namespace tollgate::sqlite {
namespace {

[[noreturn]] void fail(sqlite3* db, int rc, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  throw SqlError(rc, message);
}

}  // namespace

bool SqlError::is_transient() const {
  switch (code_ & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_NOMEM:
    case SQLITE_READONLY:
      return true;
    default:
      return false;
  }
}

Stmt::Stmt(sqlite3* db, std::string_view sql) : db_(db) {
  const int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                    &stmt_, nullptr);
  if (rc != SQLITE_OK) fail(db, rc, "prepare '" + std::string(sql) + "'");
}

Stmt::~Stmt() { sqlite3_finalize(stmt_); }

void Stmt::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) fail(db_, rc, "bind");
}

void Stmt::bind(int index, std::string_view value) {
  const int rc = sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) fail(db_, rc, "bind");
}

void Stmt::bind(int index, const std::optional<std::int64_t>& value) {
  value ? bind(index, *value) : bind_null(index);
}

void Stmt::bind(int index, const std::optional<std::string>& value) {
  value ? bind(index, std::string_view(*value)) : bind_null(index);
}

void Stmt::bind_null(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) fail(db_, rc, "bind");
}

bool Stmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  fail(db_, rc, std::string("step '") + sqlite3_sql(stmt_) + "'");
}

// Bindings are not cleared: every use of a statement binds all of its parameters again.
void Stmt::reset() { sqlite3_reset(stmt_); }

std::optional<std::int64_t> Stmt::optional_int64(int column) const {
  if (is_null(column)) return std::nullopt;
  return int64(column);
}

std::string Stmt::text(int column) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  const int n = sqlite3_column_bytes(stmt_, column);
  return p ? std::string(p, static_cast<std::size_t>(n)) : std::string();
}

std::optional<std::string> Stmt::optional_text(int column) const {
  if (is_null(column)) return std::nullopt;
  return text(column);
}

Conn::Conn(const std::string& path, const OpenOptions& options) {
  const int flags = (options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
                    SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
  const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, options.vfs);
  if (rc != SQLITE_OK) {
    std::string message = "open " + path + ": " + (db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw SqlError(rc, message);
  }
  sqlite3_busy_timeout(db_, options.busy_timeout_ms);
  if (!options.read_only && options.page_size_bytes > 0) {
    exec(("PRAGMA page_size=" + std::to_string(options.page_size_bytes)).c_str());  // before the file is made
  }
  if (!options.read_only) exec("PRAGMA journal_mode=WAL");
  const std::string synchronous = std::string(options.synchronous);
  TG_ASSERT(synchronous == "FULL" || synchronous == "NORMAL");
  exec(("PRAGMA synchronous=" + synchronous).c_str());
  exec("PRAGMA foreign_keys=ON");
  exec("PRAGMA temp_store=MEMORY");
  const std::string cache = "PRAGMA cache_size=-" + std::to_string(options.cache_size_kib);
  exec(cache.c_str());
}

Conn::~Conn() {
  stmts_.clear();  // finalize before close
  if (db_) sqlite3_close_v2(db_);
}

Stmt& Conn::stmt(const char* sql) {
  auto it = stmts_.find(sql);
  if (it != stmts_.end()) return *it->second;
  auto [inserted, _] = stmts_.emplace(sql, std::make_unique<Stmt>(db_, sql));
  return *inserted->second;
}

void Conn::exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string message = std::string("exec '") + sql + "': " + (err ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    throw SqlError(rc, message);
  }
}

}  // namespace tollgate::sqlite
