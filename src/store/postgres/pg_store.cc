#include "store/postgres/pg_store.h"

#include <limits>

#include "core/log.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_read.h"
#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"
#include "store/schema.h"

namespace tollgate {
namespace {

using pg::Conn;
using pg::kNowSql;
using pg::pg_failure;
using pg::PgError;
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
      source_(readers_, options_.clock),
      ledger_(source_),
      lists_(source_),
      jobs_(source_),
      coord_(source_),
      webhooks_(source_),
      payments_(source_),
      prices_(source_) {}
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
Result<Account> PgStore::get_account(std::string_view account_id) { return ledger_.get_account(account_id); }

Result<Hold> PgStore::get_hold(std::string_view hold_id) { return ledger_.get_hold(hold_id); }

Result<EventPage> PgStore::read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) {
  return ledger_.read_events(account_id, after, limit);
}

// One snapshot: every event it shows committed after every lower id did (event_ids is taken under a
// lock held until COMMIT, and a commit is visible before its locks are released), so the page has
// no hole a later commit could fill. Every committed event is shown.
Result<EventPage> PgStore::read_feed(std::int64_t after, std::int64_t limit) {
  return ledger_.read_feed(after, limit, std::numeric_limits<std::int64_t>::max());
}

Result<std::int64_t> PgStore::last_event_id() {
  return read([&](Conn& db, std::int64_t) -> Result<std::int64_t> {
    return db.exec("SELECT last_event_id FROM event_ids").int64(0, 0);
  });
}

Result<AuditReport> PgStore::audit(std::optional<std::string_view> account_id) { return ledger_.audit(account_id); }

Result<AuditPage> PgStore::audit_range(std::string_view after, std::int64_t limit) {
  return ledger_.audit_range(after, limit);
}

Result<KeyLookup> PgStore::find_key(std::string_view secret_sha256) { return ledger_.find_key(secret_sha256); }

Result<LedgerStats> PgStore::stats() { return ledger_.stats(); }

Result<std::vector<std::string>> PgStore::list_account_ids(std::string_view after, std::int64_t limit) {
  return ledger_.list_account_ids(after, limit);
}

Result<bool> PgStore::has_admin_key() { return ledger_.has_admin_key(); }

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
