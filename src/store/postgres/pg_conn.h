// tollgate store/postgres: a thin RAII layer over libpq.
//
// Conn owns one connection and the statements it prepared (by SQL text, on first use). Parameters
// and results travel as text. Unexpected failures throw PgError, which tells the store what kind
// of failure it was: the connection is gone (reconnect, answer `unavailable`), the transaction lost
// a race with another instance (run the batch again), or anything else (a bug or a broken schema).
//
// Every connection has explicit time-outs: connecting (connect_timeout), each statement
// (statement_timeout, lock_timeout) and the socket itself (tcp_user_timeout, keep-alives), so no
// call waits forever on a database that vanished.
//
// Thread safety: a Conn belongs to one thread at a time.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/limits.h"

namespace tollgate::pg {

class PgError : public std::runtime_error {
 public:
  PgError(std::string sqlstate, bool connection_lost, const std::string& what)
      : std::runtime_error(what), sqlstate_(std::move(sqlstate)), connection_lost_(connection_lost) {}
  const std::string& sqlstate() const { return sqlstate_; }
  // The connection is unusable (lost, or the server shut down / is read-only after a fail-over).
  bool connection_lost() const { return connection_lost_; }
  // Another transaction won a race (unique violation, serialization failure, deadlock): the
  // same work run again in a new transaction sees the winner's effects.
  bool is_conflict() const;
  // The database may answer later: connection trouble, shutdown, time-outs, resources.
  bool is_transient() const;
  // 53100 disk_full: the server found no space ("could not extend file", ENOSPC on a temporary file).
  bool is_disk_full() const { return sqlstate_ == "53100"; }

 private:
  std::string sqlstate_;
  bool connection_lost_;
};

struct ConnectOptions {
  int connect_timeout_ms = limits::kPgConnectTimeoutMsDefault;  // to open a connection (libpq rounds up to whole seconds, min 2)
  int statement_timeout_ms = limits::kPgStatementTimeoutMsDefault;  // any one statement, and any lock wait
};

// One result set; columns by index, values as text.
class Rows {
 public:
  explicit Rows(PGresult* result) : result_(result) {}
  Rows(Rows&& other) noexcept : result_(other.result_) { other.result_ = nullptr; }
  Rows& operator=(Rows&&) = delete;
  ~Rows() { PQclear(result_); }

  int size() const { return PQntuples(result_); }
  bool empty() const { return size() == 0; }
  bool is_null(int row, int column) const { return PQgetisnull(result_, row, column) != 0; }
  std::string text(int row, int column) const;
  std::optional<std::string> optional_text(int row, int column) const;
  std::int64_t int64(int row, int column) const;  // throws PgError if not an integer
  std::optional<std::int64_t> optional_int64(int row, int column) const;
  // Rows changed by an INSERT/UPDATE/DELETE without RETURNING.
  std::int64_t affected() const;
  // The command tag: "COMMIT", "ROLLBACK", "UPDATE 1", …
  std::string command_tag() const { return PQcmdStatus(result_); }

 private:
  PGresult* result_;
};

// Statement parameters, converted to text once.
class Params {
 public:
  template <typename... Args>
  explicit Params(const Args&... args) {
    values_.reserve(sizeof...(args));
    (add(args), ...);
  }
  // The values as given (nullopt: NULL), already text.
  static Params of_text(std::vector<std::optional<std::string>> values) {
    Params p;
    p.values_ = std::move(values);
    return p;
  }
  int count() const { return static_cast<int>(values_.size()); }
  // Pointers valid while this object lives.
  std::vector<const char*> pointers() const;

 private:
  void add(std::int64_t v) { values_.emplace_back(std::to_string(v)); }
  void add(int v) { add(static_cast<std::int64_t>(v)); }
  void add(std::string_view v) { values_.emplace_back(std::string(v)); }
  void add(const std::string& v) { values_.emplace_back(v); }
  void add(const char* v) { values_.emplace_back(std::string(v)); }
  void add(const std::optional<std::int64_t>& v) {
    if (v) add(*v); else values_.emplace_back(std::nullopt);
  }
  void add(const std::optional<std::string>& v) {
    if (v) add(*v); else values_.emplace_back(std::nullopt);
  }

  std::vector<std::optional<std::string>> values_;
};

class Conn {
 public:
  // Connects to `uri` (a libpq URI or key=value string; its own settings win over `options`),
  // and sets the session's time-outs and UTC. Throws PgError (connection_lost) on failure.
  static std::unique_ptr<Conn> connect(const std::string& uri, const ConnectOptions& options);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Runs `sql` (prepared on this connection on first use; pass the same text each time).
  template <typename... Args>
  Rows query(const std::string& sql, const Args&... args) {
    return run_prepared(sql, Params(args...));
  }
  Rows query(const std::string& sql, const Params& params) { return run_prepared(sql, params); }
  // Runs `statements` (SQL text, parameters) in pipeline mode: all sent, then all answered, in ONE
  // round trip, each executed in order on the server. Returns one Rows per statement. On a
  // failure throws the PgError of the first failing statement (later ones did not run) and sets
  // `failed_index` to its position.
  struct Pipelined {
    const std::string* sql;
    Params params;
  };
  std::vector<Rows> pipeline(const std::vector<Pipelined>& statements, std::size_t& failed_index);
  // Runs one or more statements without parameters; returns the last result.
  Rows exec(const std::string& sql);
  // Rolls back whatever transaction is open; never throws (a lost connection is marked bad).
  void rollback() noexcept;
  // False once the connection broke: the owner drops it and connects again.
  bool healthy() const { return PQstatus(conn_) == CONNECTION_OK && !broken_; }

 private:
  explicit Conn(PGconn* conn) : conn_(conn) {}
  Rows run_prepared(const std::string& sql, const Params& params);
  const std::string& prepare(const std::string& sql);  // the statement's name, prepared once
  Rows check(PGresult* result, std::string_view what);

  PGconn* conn_;
  bool broken_ = false;
  std::unordered_map<std::string, std::string> prepared_;  // SQL text → statement name
};

// A SQL identifier ("…" with quotes doubled).
std::string quote_identifier(std::string_view name);

}  // namespace tollgate::pg
