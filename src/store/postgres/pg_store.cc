#include "store/postgres/pg_store.h"

#include <algorithm>
#include <limits>

#include "core/invariants.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/rules.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_read.h"
#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"
#include "store/schema.h"

namespace tollgate {
namespace {

using pg::account_row;
using pg::account_view;
using pg::Conn;
using pg::hold_by_id;
using pg::kEventColumns;
using pg::kHoldColumns;
using pg::kKeyColumns;
using pg::kNowSql;
using pg::pg_failure;
using pg::PgError;
using pg::read_events_rows;
using pg::read_holds;
using pg::read_key;
using pg::Rows;

// --- schema ---------------------------------------------------------------------------------------
// The versions and their DDL: store/schema.cc. PostgreSQL's connection for schema::migrate().
class SchemaConn final : public schema::Connection {
 public:
  explicit SchemaConn(Conn& db) : db_(db) {}
  void exec(const std::string& sql) override { db_.exec(sql); }
  std::int64_t query_int(const std::string& sql) override { return db_.exec(sql).int64(0, 0); }

 private:
  Conn& db_;
};







int schema_version(Conn& db) {
  Rows exists = db.exec("SELECT to_regclass('schema_migrations') IS NOT NULL");
  if (exists.text(0, 0) != "t") return 0;
  Rows r = db.exec("SELECT coalesce(max(version), 0) FROM schema_migrations");
  return static_cast<int>(r.int64(0, 0));
}

// Reads the clock the store decides with.
std::int64_t clock_now(Conn& db, const Clock* clock) {
  if (clock) return clock->now_ms();
  return db.query(kNowSql).int64(0, 0);
}

}  // namespace

// Runs `body(conn, now_ms)` in one read-only snapshot; database failures become errors.
template <typename F>
auto PgStore::read(F&& body) -> decltype(body(std::declval<pg::Conn&>(), std::int64_t{})) {
  return pg::read_snapshot(readers_, options_.clock, std::forward<F>(body));
}

// --- open / migrate -------------------------------------------------------------------------------
PgStore::PgStore(PgOptions options)
    : options_(std::move(options)),
      readers_(
          options_.readers_max, options_.lease_wait_ms,
          [this] {
            return Conn::connect(options_.uri,
                                 pg::ConnectOptions{options_.connect_timeout_ms, options_.statement_timeout_ms});
          },
          [](const Conn& conn) { return conn.healthy(); }),
      lists_(readers_, options_.clock),
      jobs_(readers_, options_.clock),
      coord_(readers_, options_.clock) {}
PgStore::~PgStore() = default;

Result<std::unique_ptr<PgStore>> PgStore::open(const PgOptions& options) {
  if (options.uri.empty()) return invalid("the PostgreSQL URI is empty");
  if (options.readers_max < 1) return invalid("readers_max must be at least 1");
  if (options.lease_wait_ms < 0) return invalid("lease_wait_ms must be 0 or more");
  if (options.connect_timeout_ms < 1 || options.statement_timeout_ms < 1) {
    return invalid("database time-outs must be at least 1 ms");
  }
  try {
    auto db = Conn::connect(options.uri, pg::ConnectOptions{options.connect_timeout_ms, options.statement_timeout_ms});
    // Instances starting together: one migrates, the others wait for it and then find the
    // schema current. The lock is per schema, released at COMMIT.
    db->exec("BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('tollgate schema ' || current_schema(), 0))");
    try {
      SchemaConn schema_conn(*db);
      if (Status migrated = schema::migrate(schema::Dialect::postgres, schema_conn, clock_now(*db, options.clock),
                                            "the database");
          !migrated) {
        db->rollback();
        return migrated.error();
      }
      db->exec("COMMIT");
    } catch (...) {
      db->rollback();
      throw;
    }
    auto store = std::unique_ptr<PgStore>(new PgStore(options));
    store->writer_ = std::move(db);
    return store;
  } catch (const PgError& e) {
    return pg_failure(e);
  }
}

// --- writes ---------------------------------------------------------------------------------------
Status PgStore::apply(std::span<const Command> commands, std::vector<CommandResult>& results) {
  pg::PgBatchIo io(writer_, options_);
  return run_batch(io, commands, results, BatchRunOptions{options_.conflict_retries_max}, counters_);
}

// --- reads ----------------------------------------------------------------------------------------
Result<Account> PgStore::get_account(std::string_view account_id) {
  return read([&](Conn& db, std::int64_t now) -> Result<Account> {
    auto a = account_view(db, account_id, now);
    if (!a) return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
    return std::move(*a);
  });
}

Result<Hold> PgStore::get_hold(std::string_view hold_id) {
  return read([&](Conn& db, std::int64_t now) -> Result<Hold> {
    auto hold = hold_by_id(db, hold_id, /*for_update=*/false);
    if (!hold) return Error::make(Code::not_found, "hold " + std::string(hold_id) + " does not exist");
    return rules::hold_view(std::move(*hold), now);
  });
}

Result<EventPage> PgStore::read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kEventsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kEventsPageMax));
  }
  if (after < 0) return invalid("after must be 0 or a previous next_after");
  return read([&](Conn& db, std::int64_t) -> Result<EventPage> {
    if (!account_row(db, account_id, false)) {
      return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
    }
    static const std::string sql = std::string("SELECT ") + kEventColumns +
                                   " FROM events WHERE account_id = $1 AND event_id > $2 ORDER BY event_id LIMIT $3";
    EventPage page;
    page.next_after = after;
    page.events = read_events_rows(db.query(sql, account_id, after, limit));
    if (!page.events.empty()) page.next_after = page.events.back().event_id;
    return page;
  });
}

namespace {

// Audits the accounts `ids` (each exists) in the snapshot `db` reads.
AuditReport audit_accounts(Conn& db, const std::vector<std::string>& ids) {
  AuditReport report;
  static const std::string events_sql =
      std::string("SELECT ") + kEventColumns + " FROM events WHERE account_id = $1 ORDER BY event_id";
  for (const std::string& id : ids) {
    const auto row = account_row(db, id, false);
    TG_ASSERT(row.has_value());
    const std::vector<Event> events = read_events_rows(db.query(events_sql, id));
    Rows active = db.query("SELECT coalesce(sum(amount), 0), count(*) FROM holds "
                           "WHERE account_id = $1 AND status = 'active'",
                           id);
    for (auto& message : invariants::check_account(*row, events, active.int64(0, 0), active.int64(0, 1))) {
      report.violations.push_back(AuditViolation{id, std::move(message)});
    }
    ++report.accounts_checked;
  }
  return report;
}

}  // namespace
Result<EventPage> PgStore::read_feed(std::int64_t after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kEventsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kEventsPageMax));
  }
  if (after < 0) return invalid("after must be 0 or a previous next_after");
  // One snapshot: every event it shows committed after every lower id did (event_ids is taken
  // under a lock held until COMMIT, and a commit is visible before its locks are released), so the
  // page has no hole a later commit could fill.
  return read([&](Conn& db, std::int64_t) -> Result<EventPage> {
    static const std::string sql =
        std::string("SELECT ") + kEventColumns + " FROM events WHERE event_id > $1 ORDER BY event_id LIMIT $2";
    EventPage page;
    page.next_after = after;
    page.events = read_events_rows(db.query(sql, after, limit));
    if (!page.events.empty()) page.next_after = page.events.back().event_id;
    return page;
  });
}

Result<std::int64_t> PgStore::last_event_id() {
  return read([&](Conn& db, std::int64_t) -> Result<std::int64_t> {
    return db.exec("SELECT last_event_id FROM event_ids").int64(0, 0);
  });
}

Result<AuditReport> PgStore::audit(std::optional<std::string_view> account_id) {
  return read([&](Conn& db, std::int64_t) -> Result<AuditReport> {
    std::vector<std::string> ids;
    if (account_id) {
      if (!account_row(db, *account_id, false)) {
        return Error::make(Code::not_found, "account " + std::string(*account_id) + " does not exist");
      }
      ids.emplace_back(*account_id);
    } else {
      Rows r = db.exec("SELECT account_id FROM accounts ORDER BY account_id");
      for (int i = 0; i < r.size(); ++i) ids.push_back(r.text(i, 0));
    }
    return audit_accounts(db, ids);
  });
}

Result<AuditPage> PgStore::audit_range(std::string_view after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kHoldsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kHoldsPageMax));
  }
  return read([&](Conn& db, std::int64_t) -> Result<AuditPage> {
    Rows r = db.query("SELECT account_id FROM accounts WHERE account_id > $1 ORDER BY account_id LIMIT $2", after, limit);
    std::vector<std::string> ids;
    for (int i = 0; i < r.size(); ++i) ids.push_back(r.text(i, 0));
    AuditPage page;
    page.report = audit_accounts(db, ids);
    page.last_account_id = ids.empty() ? std::string(after) : ids.back();
    page.has_more = static_cast<std::int64_t>(ids.size()) == limit;
    return page;
  });
}

Result<std::optional<ApiKey>> PgStore::find_key(std::string_view secret_sha256) {
  return read([&](Conn& db, std::int64_t) -> Result<std::optional<ApiKey>> {
    static const std::string sql = std::string("SELECT ") + kKeyColumns + " FROM api_keys WHERE secret_sha256 = $1";
    Rows r = db.query(sql, secret_sha256);
    if (r.empty()) return std::optional<ApiKey>();
    return std::optional<ApiKey>(read_key(r, 0));
  });
}

Result<LedgerStats> PgStore::stats() {
  return read([&](Conn& db, std::int64_t now) -> Result<LedgerStats> {
    LedgerStats out;
    Rows holds = db.query(
        "SELECT count(*), min(created_at_ms) FROM holds WHERE status = 'active' AND expires_at_ms > $1", now);
    out.active_holds = holds.int64(0, 0);
    if (auto oldest = holds.optional_int64(0, 1)) out.oldest_active_hold_age_ms = std::max<std::int64_t>(0, now - *oldest);
    out.accounts = db.exec("SELECT count(*) FROM accounts").int64(0, 0);
    return out;
  });
}

Result<std::vector<std::string>> PgStore::list_account_ids(std::string_view after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kHoldsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kHoldsPageMax));
  }
  return read([&](Conn& db, std::int64_t) -> Result<std::vector<std::string>> {
    Rows r = db.query("SELECT account_id FROM accounts WHERE account_id > $1 ORDER BY account_id LIMIT $2", after, limit);
    std::vector<std::string> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(r.text(i, 0));
    return out;
  });
}

Result<bool> PgStore::has_admin_key() {
  return read([&](Conn& db, std::int64_t) -> Result<bool> {
    Rows r = db.exec("SELECT EXISTS (SELECT 1 FROM api_keys WHERE account_id IS NULL AND revoked_at_ms IS NULL)");
    return r.text(0, 0) == "t";
  });
}

Status PgStore::ping() {
  return read([&](Conn& db, std::int64_t) -> Status {
    const int version = schema_version(db);
    if (version != kSchemaVersion) {
      return Error::make(Code::unavailable, "schema version " + std::to_string(version) + ", expected " +
                                                std::to_string(kSchemaVersion));
    }
    return ok_status();
  });
}

std::int64_t PgStore::now_ms() {
  if (options_.clock) return options_.clock->now_ms();
  auto now = read([](Conn&, std::int64_t now) -> Result<std::int64_t> { return now; });
  return now ? *now : 0;
}

}  // namespace tollgate
