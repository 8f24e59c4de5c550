#include "store/postgres/pg_conn.h"

#include <limits>
#include <string_view>

#include "core/parse.h"

namespace tollgate::pg {
namespace {

std::string error_text(PGconn* conn, const PGresult* result) {
  std::string message = result ? PQresultErrorMessage(result) : PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return message.empty() ? "no answer from the database" : message;
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// SQLSTATEs after which this connection must not be used again.
bool ends_connection(const std::string& sqlstate) {
  return starts_with(sqlstate, "08")   // connection exception
         || sqlstate == "57P01"        // admin_shutdown
         || sqlstate == "57P02"        // crash_shutdown
         || sqlstate == "57P03"        // cannot_connect_now
         || sqlstate == "25006";       // read_only_sql_transaction: a standby (after a fail-over)
}

}  // namespace

bool PgError::is_conflict() const {
  return sqlstate_ == "23505"     // unique_violation: another instance inserted the same key first
         || sqlstate_ == "40001"  // serialization_failure
         || sqlstate_ == "40P01";  // deadlock_detected
}

bool PgError::is_transient() const {
  return connection_lost_ || is_conflict() || ends_connection(sqlstate_) ||
         sqlstate_ == "57014"           // query_canceled: statement_timeout
         || sqlstate_ == "55P03"        // lock_not_available: lock_timeout
         || starts_with(sqlstate_, "53");  // insufficient resources
}

std::string Rows::text(int row, int column) const { return std::string(PQgetvalue(result_, row, column)); }

std::optional<std::string> Rows::optional_text(int row, int column) const {
  if (is_null(row, column)) return std::nullopt;
  return text(row, column);
}

std::int64_t Rows::int64(int row, int column) const {
  const char* v = PQgetvalue(result_, row, column);
  const char* end = v + PQgetlength(result_, row, column);
  const auto out = parse_int(std::string_view(v, static_cast<std::size_t>(end - v)),
                             std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
                             Sign::minus_allowed);
  if (!out) {
    throw PgError("XX000", false, "column " + std::to_string(column) + " is not an integer: '" + std::string(v) + "'");
  }
  return *out;
}

std::optional<std::int64_t> Rows::optional_int64(int row, int column) const {
  if (is_null(row, column)) return std::nullopt;
  return int64(row, column);
}

std::int64_t Rows::affected() const {
  const std::string_view n = PQcmdTuples(result_);  // "" for a command that counts no rows
  if (n.empty()) return 0;
  const auto count = parse_int(n, 0);
  if (!count) throw PgError("XX000", false, "the server's row count is not a count: '" + std::string(n) + "'");
  return *count;
}

std::vector<const char*> Params::pointers() const {
  std::vector<const char*> out;
  out.reserve(values_.size());
  for (const auto& v : values_) out.push_back(v ? v->c_str() : nullptr);
  return out;
}

std::unique_ptr<Conn> Conn::connect(const std::string& uri, const ConnectOptions& options) {
  const std::string connect_s = std::to_string(std::max(2, (options.connect_timeout_ms + 999) / 1000));
  const std::string tcp_ms = std::to_string(std::max(1000, options.statement_timeout_ms + options.connect_timeout_ms));
  // Entries before dbname are defaults the URI may override.
  const char* keys[] = {"connect_timeout", "tcp_user_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
                        "keepalives_count", "application_name", "dbname", nullptr};
  const char* values[] = {connect_s.c_str(), tcp_ms.c_str(), "1", "5", "2", "3", "tollgate", uri.c_str(), nullptr};
  PGconn* raw = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (raw == nullptr) throw PgError("08000", true, "could not allocate a database connection");
  if (PQstatus(raw) != CONNECTION_OK) {
    std::string message = "could not connect to the database: " + error_text(raw, nullptr);
    PQfinish(raw);
    throw PgError("08001", true, message);
  }
  std::unique_ptr<Conn> conn(new Conn(raw));
  const std::string timeout = std::to_string(options.statement_timeout_ms);
  conn->exec("SET statement_timeout = " + timeout + "; SET lock_timeout = " + timeout +
             "; SET idle_in_transaction_session_timeout = " + std::to_string(options.statement_timeout_ms * 4) +
             "; SET TIME ZONE 'UTC'; SET synchronous_commit = on; SET client_min_messages = warning; SET plan_cache_mode = force_generic_plan");
  return conn;
}

Conn::~Conn() { PQfinish(conn_); }

Rows Conn::check(PGresult* result, std::string_view what) {
  const ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return Rows(result);
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state ? state : "";
  std::string message = error_text(conn_, result) + " (in " + std::string(what.substr(0, 120)) + ")";
  PQclear(result);
  const bool lost = PQstatus(conn_) != CONNECTION_OK || sqlstate.empty() || ends_connection(sqlstate);
  if (lost) broken_ = true;
  throw PgError(std::move(sqlstate), lost, message);
}

Rows Conn::exec(const std::string& sql) { return check(PQexec(conn_, sql.c_str()), sql); }

const std::string& Conn::prepare(const std::string& sql) {
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    std::string name = "tg" + std::to_string(prepared_.size());
    check(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr), sql);
    it = prepared_.emplace(sql, std::move(name)).first;
  }
  return it->second;
}

Rows Conn::run_prepared(const std::string& sql, const Params& params) {
  const std::string& name = prepare(sql);
  const auto values = params.pointers();
  return check(PQexecPrepared(conn_, name.c_str(), params.count(), values.data(), nullptr, nullptr, 0), sql);
}

std::vector<Rows> Conn::pipeline(const std::vector<Pipelined>& statements, std::size_t& failed_index) {
  failed_index = 0;
  std::vector<const std::string*> names;
  names.reserve(statements.size());
  for (const auto& s : statements) names.push_back(&prepare(*s.sql));  // before: prepare is a round trip
  const auto lost = [&](std::string_view what) -> PgError {
    broken_ = true;
    return PgError("08006", true, "pipeline: " + std::string(what) + ": " + error_text(conn_, nullptr));
  };
  if (PQenterPipelineMode(conn_) != 1) throw lost("could not enter pipeline mode");
  for (std::size_t i = 0; i < statements.size(); ++i) {
    const auto values = statements[i].params.pointers();
    if (PQsendQueryPrepared(conn_, names[i]->c_str(), statements[i].params.count(), values.data(), nullptr, nullptr,
                            0) != 1) {
      throw lost("send");
    }
  }
  if (PQpipelineSync(conn_) != 1) throw lost("sync");
  // Every statement answers one result then a null; the sync answers PGRES_PIPELINE_SYNC.
  std::vector<Rows> out;
  out.reserve(statements.size());
  std::optional<PgError> first_error;
  for (std::size_t i = 0; i < statements.size(); ++i) {
    PGresult* result = PQgetResult(conn_);
    if (result == nullptr) throw lost("missing result");
    const ExecStatusType status = PQresultStatus(result);
    if (status == PGRES_PIPELINE_ABORTED) {
      PQclear(result);
    } else if (first_error) {
      PQclear(result);
    } else {
      try {
        out.push_back(check(result, *statements[i].sql));
      } catch (const PgError& e) {
        first_error = e;
        failed_index = i;
      }
    }
    while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);  // the null that ends this statement
  }
  PGresult* sync = PQgetResult(conn_);
  const bool synced = sync != nullptr && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
  PQclear(sync);
  if (!synced) throw lost("missing sync");
  if (PQexitPipelineMode(conn_) != 1) throw lost("could not leave pipeline mode");
  if (first_error) throw *first_error;
  if (out.size() != statements.size()) throw lost("a statement was aborted without an error");
  return out;
}

void Conn::rollback() noexcept {
  if (!healthy()) return;
  PGresult* r = PQexec(conn_, "ROLLBACK");
  if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) broken_ = true;
  PQclear(r);
}

std::string quote_identifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace tollgate::pg
