#include "store/sqlite/sqlite_store.h"

#include <limits>
#include <chrono>
#include <cstdio>

#include "core/invariants.h"
#include "core/log.h"
#include "core/limits.h"
#include "store/hold_id.h"
#include "store/sqlite/sqlite_db.h"
#include "store/transaction.h"

namespace tollgate {
namespace {

using sqlite::Conn;
using sqlite::Query;
using sqlite::SqlError;
using sqlite::Stmt;

// --- schema ---------------------------------------------------------------------------------------
// Migration N takes the schema from version N−1 to N. Never edit a shipped migration: add one.
// The CHECK constraints repeat the invariants, so even a bug cannot store a broken row; the
// triggers keep the event log append-only.
constexpr const char* kMigrations[] = {
    // 1: accounts, holds, transfers, events
    R"sql(
CREATE TABLE accounts (
  account_id       TEXT    PRIMARY KEY,
  available        INTEGER NOT NULL,
  reserved         INTEGER NOT NULL CHECK (reserved >= 0),
  used             INTEGER NOT NULL CHECK (used >= 0),
  purchased        INTEGER NOT NULL,
  overdraft_limit  INTEGER NOT NULL CHECK (overdraft_limit >= 0),
  max_active_holds INTEGER CHECK (max_active_holds IS NULL OR max_active_holds >= 1),
  active_holds     INTEGER NOT NULL CHECK (active_holds >= 0),
  created_at_ms    INTEGER NOT NULL,
  CHECK (available + reserved + used = purchased),
  CHECK (available >= -overdraft_limit)
) WITHOUT ROWID;

CREATE TABLE holds (
  seq              INTEGER PRIMARY KEY,           -- creation order (newest first = seq DESC)
  hold_id          TEXT    NOT NULL,              -- 'hold_<seq>_<random>': found by seq, checked whole
  account_id       TEXT    NOT NULL REFERENCES accounts(account_id),
  request_id       TEXT    NOT NULL UNIQUE,
  amount           INTEGER NOT NULL CHECK (amount >= 1),
  committed_amount INTEGER NOT NULL CHECK (committed_amount >= 0 AND committed_amount <= amount),
  status           TEXT    NOT NULL CHECK (status IN ('active', 'committed', 'released', 'expired')),
  late_outcome     TEXT    CHECK (late_outcome IS NULL OR (status = 'expired' AND late_outcome IN ('charged', 'forgiven'))),
  created_at_ms    INTEGER NOT NULL,
  expires_at_ms    INTEGER NOT NULL,
  closed_at_ms     INTEGER,
  metadata         TEXT    NOT NULL
);
CREATE INDEX holds_by_account ON holds(account_id);   -- (account_id, seq): newest first per account
CREATE INDEX holds_active_by_deadline ON holds(expires_at_ms) WHERE status = 'active';
CREATE INDEX holds_active_by_account ON holds(account_id, expires_at_ms) WHERE status = 'active';

CREATE TABLE transfers (
  reference   TEXT    PRIMARY KEY,
  account_id  TEXT    NOT NULL REFERENCES accounts(account_id),
  kind        TEXT    NOT NULL CHECK (kind IN ('credited', 'debited')),
  amount      INTEGER NOT NULL CHECK (amount >= 1),
  reason      TEXT    NOT NULL,
  event_id    INTEGER NOT NULL
) WITHOUT ROWID;

-- event_id is the rowid: events are never deleted, so max(rowid)+1 increases strictly with commit
-- order (one writer); AUTOINCREMENT would only add a write per insert.
CREATE TABLE events (
  event_id        INTEGER PRIMARY KEY,
  account_id      TEXT    NOT NULL REFERENCES accounts(account_id),
  type            TEXT    NOT NULL,
  amount          INTEGER NOT NULL CHECK (amount >= 0),
  hold_id         TEXT,
  job_id          TEXT,
  reference       TEXT,
  at_ms           INTEGER NOT NULL,
  available_after INTEGER NOT NULL,
  reserved_after  INTEGER NOT NULL,
  used_after      INTEGER NOT NULL
);
CREATE INDEX events_by_account ON events(account_id);  -- (account_id, event_id)
CREATE TRIGGER events_are_never_updated BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_are_never_deleted BEFORE DELETE ON events
  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
)sql",
    // 2: API keys (only the SHA-256 of a secret is stored)
    R"sql(
CREATE TABLE api_keys (
  key_id         TEXT    PRIMARY KEY,
  account_id     TEXT    REFERENCES accounts(account_id),   -- NULL: an admin key
  secret_sha256  TEXT    NOT NULL UNIQUE,
  created_at_ms  INTEGER NOT NULL,
  revoked_at_ms  INTEGER
) WITHOUT ROWID;
)sql",
};
constexpr int kMigrationCount = static_cast<int>(std::size(kMigrations));
static_assert(kMigrationCount == SqliteStore::kSchemaVersion);

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

// --- row mapping ----------------------------------------------------------------------------------
constexpr const char* kHoldColumns =
    "hold_id, account_id, request_id, amount, committed_amount, status, late_outcome, created_at_ms, "
    "expires_at_ms, closed_at_ms, metadata";

Hold read_hold(Stmt& s, int first = 0) {
  Hold h;
  h.hold_id = s.text(first + 0);
  h.account_id = s.text(first + 1);
  h.request_id = s.text(first + 2);
  h.amount = s.int64(first + 3);
  h.committed_amount = s.int64(first + 4);
  const auto status = parse_hold_status(s.text(first + 5));
  const auto late = parse_late_outcome(s.optional_text(first + 6).value_or(""));
  if (!status || !late) throw SqlError(SQLITE_CORRUPT, "hold " + h.hold_id + " has an unknown status");
  h.status = *status;
  h.late_outcome = *late;
  h.created_at_ms = s.int64(first + 7);
  h.expires_at_ms = s.int64(first + 8);
  h.closed_at_ms = s.optional_int64(first + 9);
  h.metadata_json = s.text(first + 10);
  return h;
}

constexpr const char* kEventColumns =
    "event_id, account_id, type, amount, hold_id, job_id, reference, at_ms, available_after, reserved_after, "
    "used_after";

Event read_event(Stmt& s) {
  Event e;
  e.event_id = s.int64(0);
  e.account_id = s.text(1);
  const auto type = parse_event_type(s.text(2));
  if (!type) throw SqlError(SQLITE_CORRUPT, "event " + std::to_string(e.event_id) + " has an unknown type");
  e.type = *type;
  e.amount = s.int64(3);
  e.hold_id = s.optional_text(4);
  e.job_id = s.optional_text(5);
  e.reference = s.optional_text(6);
  e.at_ms = s.int64(7);
  e.available_after = s.int64(8);
  e.reserved_after = s.int64(9);
  e.used_after = s.int64(10);
  return e;
}

std::optional<Account> account_row(Conn& db, std::string_view account_id) {
  Query q(db.stmt("SELECT account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds, "
                  "active_holds, created_at_ms FROM accounts WHERE account_id = ?"),
          account_id);
  if (!q.step()) return std::nullopt;
  Stmt& s = q.row();
  Account a;
  a.account_id = s.text(0);
  a.balances = Balances{s.int64(1), s.int64(2), s.int64(3), s.int64(4)};
  a.overdraft_limit = s.int64(5);
  a.max_active_holds = s.optional_int64(6);
  a.active_holds = s.int64(7);
  a.created_at_ms = s.int64(8);
  return a;
}

// The account as a reader sees it at now_ms: overdue holds already count as available.
std::optional<Account> account_view(Conn& db, std::string_view account_id, std::int64_t now_ms) {
  auto a = account_row(db, account_id);
  if (!a) return a;
  Query q(db.stmt("SELECT count(*), coalesce(sum(amount), 0), "
                  "min(CASE WHEN expires_at_ms > ?2 THEN created_at_ms END) "
                  "FROM holds WHERE account_id = ?1 AND status = 'active'"),
          account_id, now_ms);
  TG_ASSERT(q.step());
  Query overdue(db.stmt("SELECT count(*), coalesce(sum(amount), 0) FROM holds "
                        "WHERE account_id = ?1 AND status = 'active' AND expires_at_ms <= ?2"),
                account_id, now_ms);
  TG_ASSERT(overdue.step());
  const std::int64_t overdue_count = overdue->int64(0);
  const std::int64_t overdue_sum = overdue->int64(1);
  a->balances.available += overdue_sum;
  a->balances.reserved -= overdue_sum;
  a->active_holds -= overdue_count;
  if (auto oldest = q->optional_int64(2)) a->oldest_active_hold_age_ms = std::max<std::int64_t>(0, now_ms - *oldest);
  return a;
}

std::optional<Hold> hold_by_id(Conn& db, std::string_view hold_id) {
  static const std::string sql = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE seq = ?1 AND hold_id = ?2";
  const auto seq = hold_id_seq(hold_id);
  if (!seq) return std::nullopt;
  Query q(db.stmt(sql.c_str()), *seq, hold_id);
  if (!q.step()) return std::nullopt;
  return read_hold(q.row());
}

// Runs a conditional UPDATE of one account row; when it changed the row, reads the balances back.
// (UPDATE … RETURNING would do it in one statement, but SQLite buffers RETURNING rows in an
// ephemeral table, which costs more than this primary-key read.)
std::optional<Balances> updated_balances(Conn& db, Query& update, std::string_view account_id) {
  update.step();
  if (db.changes() == 0) return std::nullopt;
  TG_ASSERT(db.changes() == 1);
  Query q(db.stmt("SELECT available, reserved, used, purchased FROM accounts WHERE account_id = ?1"), account_id);
  TG_ASSERT(q.step());
  Balances b{q->int64(0), q->int64(1), q->int64(2), q->int64(3)};
  TG_ASSERT(b.available + b.reserved + b.used == b.purchased);  // also a CHECK constraint
  return b;
}

constexpr const char* kKeyColumns = "key_id, account_id, secret_sha256, created_at_ms, revoked_at_ms";

ApiKey read_key(Stmt& s) {
  return ApiKey{s.text(0), s.optional_text(1), s.text(2), s.int64(3), s.optional_int64(4)};
}


// --- the write transaction on the writer connection ------------------------------------------------
class SqliteTransaction final : public Transaction {
  // Ids of holds this transaction read: they are well formed.
  static std::int64_t must_seq(std::string_view hold_id) {
    const auto seq = hold_id_seq(hold_id);
    TG_ASSERT(seq.has_value());
    return *seq;
  }

 public:
  explicit SqliteTransaction(Conn& db) : db_(db) {}

  std::optional<Account> account_row(std::string_view account_id) override {
    return tollgate::account_row(db_, account_id);
  }
  std::optional<Account> account_view(std::string_view account_id, std::int64_t now_ms) override {
    return tollgate::account_view(db_, account_id, now_ms);
  }

  std::optional<Hold> hold_by_id(std::string_view hold_id) override { return tollgate::hold_by_id(db_, hold_id); }

  std::optional<Hold> hold_by_request(std::string_view request_id) override {
    static const std::string sql = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE request_id = ?";
    Query q(db_.stmt(sql.c_str()), request_id);
    if (!q.step()) return std::nullopt;
    return read_hold(q.row());
  }

  std::optional<Transfer> transfer_by_reference(std::string_view reference) override {
    Query q(db_.stmt("SELECT reference, account_id, kind, amount, reason, event_id FROM transfers WHERE reference = ?"),
            reference);
    if (!q.step()) return std::nullopt;
    Transfer t;
    t.reference = q->text(0);
    t.account_id = q->text(1);
    t.kind = q->text(2) == "credited" ? EventType::credited : EventType::debited;
    t.amount = q->int64(3);
    t.reason = q->text(4);
    t.event_id = q->int64(5);
    return t;
  }

  std::optional<Event> event_by_id(std::int64_t event_id) override {
    static const std::string sql = std::string("SELECT ") + kEventColumns + " FROM events WHERE event_id = ?";
    Query q(db_.stmt(sql.c_str()), event_id);
    if (!q.step()) return std::nullopt;
    return read_event(q.row());
  }

  std::vector<Hold> overdue_holds(std::optional<std::string_view> account_id, std::int64_t now_ms,
                                  std::int64_t limit) override {
    static const std::string one = std::string("SELECT ") + kHoldColumns +
                                   " FROM holds WHERE account_id = ?1 AND status = 'active' AND expires_at_ms <= ?2 "
                                   "ORDER BY expires_at_ms LIMIT ?3";
    static const std::string all = std::string("SELECT ") + kHoldColumns +
                                   " FROM holds WHERE status = 'active' AND expires_at_ms <= ?1 "
                                   "ORDER BY expires_at_ms LIMIT ?2";
    std::vector<Hold> out;
    if (account_id) {
      Query q(db_.stmt(one.c_str()), *account_id, now_ms, limit);
      while (q.step()) out.push_back(read_hold(q.row()));
    } else {
      Query q(db_.stmt(all.c_str()), now_ms, limit);
      while (q.step()) out.push_back(read_hold(q.row()));
    }
    return out;
  }

  std::optional<Balances> credit_if_fits(std::string_view account_id, std::int64_t amount) override {
    Query q(db_.stmt("UPDATE accounts SET available = available + ?2, purchased = purchased + ?2 "
                     "WHERE account_id = ?1 AND available <= ?3 - ?2 AND purchased <= ?3 - ?2"),
            account_id, amount, kMax);
    return updated_balances(db_, q, account_id);
  }

  std::optional<Balances> debit_if_available(std::string_view account_id, std::int64_t amount) override {
    Query q(db_.stmt("UPDATE accounts SET available = available - ?2, purchased = purchased - ?2 "
                     "WHERE account_id = ?1 AND available >= ?2"),
            account_id, amount);
    return updated_balances(db_, q, account_id);
  }

  std::optional<Balances> reserve_if_available(std::string_view account_id, std::int64_t amount) override {
    Query q(db_.stmt("UPDATE accounts SET available = available - ?2, reserved = reserved + ?2, "
                     "active_holds = active_holds + 1 "
                     "WHERE account_id = ?1 AND available - ?2 >= -overdraft_limit AND reserved <= ?3 - ?2 "
                     "AND (max_active_holds IS NULL OR active_holds < max_active_holds)"),
            account_id, amount, kMax);
    return updated_balances(db_, q, account_id);
  }

  std::optional<Balances> late_charge_if_available(std::string_view account_id, std::int64_t amount) override {
    Query q(db_.stmt("UPDATE accounts SET available = available - ?2, used = used + ?2 "
                     "WHERE account_id = ?1 AND available - ?2 >= -overdraft_limit AND used <= ?3 - ?2"),
            account_id, amount, kMax);
    return updated_balances(db_, q, account_id);
  }

  Balances end_hold_balances(std::string_view account_id, std::int64_t held, std::int64_t committed) override {
    TG_ASSERT(held >= 1 && committed >= 0 && committed <= held);
    Query q(db_.stmt("UPDATE accounts SET available = available + ?2, reserved = reserved - ?3, used = used + ?4, "
                     "active_holds = active_holds - 1 WHERE account_id = ?1"),
            account_id, held - committed, held, committed);
    auto after = updated_balances(db_, q, account_id);
    TG_ASSERT(after.has_value());
    return *after;
  }

  void insert_account(const Account& a) override {
    Query q(db_.stmt("INSERT INTO accounts (account_id, available, reserved, used, purchased, overdraft_limit, "
                     "max_active_holds, active_holds, created_at_ms) VALUES (?1, 0, 0, 0, 0, ?2, ?3, 0, ?4)"),
            a.account_id, a.overdraft_limit, a.max_active_holds, a.created_at_ms);
    q.step();
  }

  std::string insert_hold(const Hold& h, std::string_view random) override {
    // One writer holds the write lock for the whole batch, so the next seq is max(seq) + 1, read
    // once per transaction (max(rowid) is one B-tree descent) and counted here after that.
    if (!next_seq_) {
      Query q(db_.stmt("SELECT coalesce(max(seq), 0) FROM holds"));
      TG_ASSERT(q.step());
      next_seq_ = q->int64(0) + 1;
    }
    const std::int64_t seq = (*next_seq_)++;
    const std::string hold_id = make_hold_id(seq, random);
    Query q(db_.stmt("INSERT INTO holds (seq, hold_id, account_id, request_id, amount, committed_amount, status, "
                     "created_at_ms, expires_at_ms, metadata) VALUES (?1, ?2, ?3, ?4, ?5, 0, 'active', ?6, ?7, ?8)"),
            seq, hold_id, h.account_id, h.request_id, h.amount, h.created_at_ms, h.expires_at_ms, h.metadata_json);
    q.step();
    return hold_id;
  }

  std::optional<Hold> end_active_hold(std::string_view hold_id, HoldStatus status, std::optional<std::int64_t> committed,
                                      std::int64_t now_ms) override {
    TG_ASSERT(status == HoldStatus::committed || status == HoldStatus::released);
    const auto seq = hold_id_seq(hold_id);
    if (!seq) return std::nullopt;
    Query q(db_.stmt("UPDATE holds SET status = ?3, committed_amount = coalesce(?4, amount), closed_at_ms = ?5 "
                     "WHERE seq = ?1 AND hold_id = ?2 AND status = 'active' AND expires_at_ms > ?5 "
                     "AND amount >= coalesce(?4, amount)"),
            *seq, hold_id, hold_status_name(status), committed, now_ms);
    q.step();
    if (db_.changes() == 0) return std::nullopt;
    auto before = tollgate::hold_by_id(db_, hold_id);  // the row after the update, by primary key
    TG_ASSERT(before.has_value() && before->status == status);
    before->status = HoldStatus::active;
    before->committed_amount = 0;
    before->closed_at_ms.reset();
    return before;
  }

  void end_hold(std::string_view hold_id, HoldStatus status, std::int64_t committed_amount,
                std::int64_t closed_at_ms) override {
    TG_ASSERT(status != HoldStatus::active);
    Query q(db_.stmt("UPDATE holds SET status = ?3, committed_amount = ?4, closed_at_ms = ?5 "
                     "WHERE seq = ?1 AND hold_id = ?2 AND status = 'active'"),
            must_seq(hold_id), hold_id, hold_status_name(status), committed_amount, closed_at_ms);
    q.step();
    TG_ASSERT(db_.changes() == 1);
  }

  void settle_late(std::string_view hold_id, LateOutcome outcome, std::int64_t committed_amount) override {
    TG_ASSERT(outcome != LateOutcome::none);
    Query q(db_.stmt("UPDATE holds SET late_outcome = ?3, committed_amount = ?4 "
                     "WHERE seq = ?1 AND hold_id = ?2 AND status = 'expired' AND late_outcome IS NULL"),
            must_seq(hold_id), hold_id, late_outcome_name(outcome), committed_amount);
    q.step();
    TG_ASSERT(db_.changes() == 1);
  }

  void set_hold_expiry(std::string_view hold_id, std::int64_t expires_at_ms) override {
    Query q(db_.stmt("UPDATE holds SET expires_at_ms = ?3 WHERE seq = ?1 AND hold_id = ?2 AND status = 'active'"),
            must_seq(hold_id), hold_id, expires_at_ms);
    q.step();
    TG_ASSERT(db_.changes() == 1);
  }

  void insert_transfer(const Transfer& t) override {
    Query q(db_.stmt("INSERT INTO transfers (reference, account_id, kind, amount, reason, event_id) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
            t.reference, t.account_id, event_type_name(t.kind), t.amount, t.reason, t.event_id);
    q.step();
  }

  std::optional<ApiKey> key_by_id(std::string_view key_id) override {
    static const std::string sql = std::string("SELECT ") + kKeyColumns + " FROM api_keys WHERE key_id = ?1";
    Query q(db_.stmt(sql.c_str()), key_id);
    if (!q.step()) return std::nullopt;
    return read_key(q.row());
  }

  void insert_key(const ApiKey& k) override {
    Query q(db_.stmt("INSERT INTO api_keys (key_id, account_id, secret_sha256, created_at_ms) VALUES (?1, ?2, ?3, ?4)"),
            k.key_id, k.account_id, k.secret_sha256, k.created_at_ms);
    q.step();
  }

  void revoke_key(std::string_view key_id, std::int64_t revoked_at_ms) override {
    Query q(db_.stmt("UPDATE api_keys SET revoked_at_ms = ?2 WHERE key_id = ?1 AND revoked_at_ms IS NULL"), key_id,
            revoked_at_ms);
    q.step();
    TG_ASSERT(db_.changes() == 1);
  }

  Event append_event(Event e) override {
    Query q(db_.stmt("INSERT INTO events (account_id, type, amount, hold_id, job_id, reference, at_ms, "
                     "available_after, reserved_after, used_after) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
            e.account_id, event_type_name(e.type), e.amount, e.hold_id, e.job_id, e.reference, e.at_ms,
            e.available_after, e.reserved_after, e.used_after);
    q.step();
    e.event_id = db_.last_insert_rowid();
    return e;
  }

 private:
  Conn& db_;
  std::optional<std::int64_t> next_seq_;  // the seq of the next hold this transaction inserts
};

Error unavailable_error(const SqlError& e) { return Error::make(Code::unavailable, std::string("database: ") + e.what()); }
Error internal_error(const SqlError& e) { return Error::make(Code::internal, std::string("database: ") + e.what()); }
Error sql_failure(const SqlError& e) { return e.is_transient() ? unavailable_error(e) : internal_error(e); }

int schema_version(Conn& db) {
  Query exists(db.stmt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"));
  TG_ASSERT(exists.step());
  if (exists->int64(0) == 0) return 0;
  Query q(db.stmt("SELECT coalesce(max(version), 0) FROM schema_migrations"));
  TG_ASSERT(q.step());
  return static_cast<int>(q->int64(0));
}

}  // namespace

// Runs `body` on a reader inside one read transaction (one snapshot); SQL failures become errors.
template <typename F>
auto SqliteStore::read(F&& body) -> decltype(body(std::declval<sqlite::Conn&>())) {
  try {
    auto lease = readers_.lease();
    Conn& db = *lease;
    db.exec("BEGIN");
    try {
      auto result = body(db);
      db.exec("COMMIT");
      return result;
    } catch (...) {
      sqlite3_exec(db.raw(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  } catch (const SqlError& e) {
    return sql_failure(e);
  }
}

// --- open / migrate -------------------------------------------------------------------------------
SqliteStore::SqliteStore(SqliteOptions options, const Clock& clock, std::unique_ptr<sqlite::Conn> writer)
    : options_(std::move(options)),
      clock_(clock),
      writer_(std::move(writer)),
      readers_(options_.readers_max, [this] {
        sqlite::OpenOptions open;
        open.read_only = true;
        open.busy_timeout_ms = options_.busy_timeout_ms;
        open.cache_size_kib = options_.cache_size_kib / 4;
        return std::make_unique<Conn>(options_.path, open);
      }) {
  if (options_.checkpoint_interval_ms > 0) checkpointer_ = std::thread([this] { checkpoint_loop(); });
}

SqliteStore::~SqliteStore() {
  {
    std::lock_guard lock(checkpoint_mu_);
    checkpoint_stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
}

void SqliteStore::checkpoint_loop() {
  std::unique_ptr<Conn> conn;
  std::unique_lock lock(checkpoint_mu_);
  while (!checkpoint_cv_.wait_for(lock, std::chrono::milliseconds(options_.checkpoint_interval_ms),
                                  [&] { return checkpoint_stopping_; })) {
    lock.unlock();
    try {
      if (!conn) {
        sqlite::OpenOptions open;
        open.busy_timeout_ms = 0;  // a passive checkpoint never waits
        open.cache_size_kib = 1024;
        conn = std::make_unique<Conn>(options_.path, open);
      }
      // PASSIVE: copies what it can without blocking the writer or readers; with
      // synchronous=FULL it syncs the database file, off the commit path.
      sqlite3_wal_checkpoint_v2(conn->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    } catch (const SqlError& e) {
      log("warn", std::string("sqlite checkpointer: ") + e.what());
      conn.reset();
    }
    lock.lock();
  }
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const SqliteOptions& options, const Clock& clock) {
  if (options.path.empty()) return invalid("the SQLite database path is empty");
  if (options.readers_max < 1) return invalid("readers_max must be at least 1");
  try {
    sqlite::OpenOptions open;
    open.busy_timeout_ms = options.busy_timeout_ms;
    open.cache_size_kib = options.cache_size_kib;
    auto writer = std::make_unique<Conn>(options.path, open);
    if (options.checkpoint_interval_ms > 0) {
      const std::string pages = "PRAGMA wal_autocheckpoint=" + std::to_string(options.wal_autocheckpoint_pages);
      writer->exec(pages.c_str());
    }
    writer->exec("PRAGMA journal_size_limit=67108864");  // truncate a WAL that grew past 64 MiB once reset
    {
      Query mode(writer->stmt("PRAGMA journal_mode"));
      if (!mode.step() || mode->text(0) != "wal") {
        return Error::make(Code::internal, "could not put " + options.path + " in WAL mode");
      }
    }
    writer->exec("BEGIN IMMEDIATE");
    try {
      const int version = schema_version(*writer);
      if (version > kSchemaVersion) {
        writer->exec("ROLLBACK");
        return Error::make(Code::internal, options.path + " has schema version " + std::to_string(version) +
                                               ", newer than this tollgate (" + std::to_string(kSchemaVersion) +
                                               "): upgrade tollgate");
      }
      writer->exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at_ms INTEGER NOT NULL)");
      for (int v = version + 1; v <= kSchemaVersion; ++v) {
        writer->exec(kMigrations[v - 1]);
        Query record(writer->stmt("INSERT INTO schema_migrations (version, applied_at_ms) VALUES (?1, ?2)"),
                     std::int64_t{v}, clock.now_ms());
        record.step();
      }
      writer->exec("COMMIT");
    } catch (...) {
      sqlite3_exec(writer->raw(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
    return std::unique_ptr<SqliteStore>(new SqliteStore(options, clock, std::move(writer)));
  } catch (const SqlError& e) {
    return sql_failure(e);
  }
}

// --- writes ---------------------------------------------------------------------------------------
Status SqliteStore::apply(std::span<const Command> commands, std::vector<CommandResult>& results) {
  // A command that fails unexpectedly (not a refusal: an SQL error in the middle of its writes) is
  // answered `internal` and the batch is run again without it, so it cannot take the others down.
  // Each round drops at least one command, so this loop ends.
  std::vector<bool> dropped(commands.size(), false);
  for (std::size_t round = 0; round <= commands.size(); ++round) {
    results.clear();
    results.reserve(commands.size());
    std::size_t current = 0;
    bool command_failed = false;
    try {
      writer_->exec("BEGIN IMMEDIATE");
      const std::int64_t now = clock_.now_ms();
      SqliteTransaction tx(*writer_);
      for (current = 0; current < commands.size(); ++current) {
        if (dropped[current]) {
          results.push_back(Error::make(Code::internal, "the database refused this operation"));
          continue;
        }
        command_failed = true;
        results.push_back(execute(tx, commands[current], now));
        command_failed = false;
      }
      writer_->exec("COMMIT");  // durable: WAL + synchronous=FULL
      return ok_status();
    } catch (const SqlError& e) {
      sqlite3_exec(writer_->raw(), "ROLLBACK", nullptr, nullptr, nullptr);
      if (!command_failed || e.is_transient()) return sql_failure(e);  // BEGIN/COMMIT or I/O: the whole batch
      dropped[current] = true;
      log("error", "sqlite: operation " + std::to_string(current) + " of a batch failed and was dropped: " + e.what());
    }
  }
  TG_ASSERT(false && "apply: every command dropped and still failing");
}

// --- reads ----------------------------------------------------------------------------------------
Result<Account> SqliteStore::get_account(std::string_view account_id) {
  const std::int64_t now = clock_.now_ms();
  return read([&](Conn& db) -> Result<Account> {
    auto a = account_view(db, account_id, now);
    if (!a) return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
    return std::move(*a);
  });
}

Result<Hold> SqliteStore::get_hold(std::string_view hold_id) {
  const std::int64_t now = clock_.now_ms();
  return read([&](Conn& db) -> Result<Hold> {
    auto hold = hold_by_id(db, hold_id);
    if (!hold) return Error::make(Code::not_found, "hold " + std::string(hold_id) + " does not exist");
    return hold_view(std::move(*hold), now);
  });
}

Result<std::vector<Hold>> SqliteStore::list_holds(const HoldFilter& filter) {
  if (filter.limit < 1 || filter.limit > limits::kHoldsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kHoldsPageMax));
  }
  const std::int64_t now = clock_.now_ms();
  return read([&](Conn& db) -> Result<std::vector<Hold>> {
    // Filter on the effective status: an overdue active hold is listed as expired.
    static const std::string by_account = std::string("SELECT ") + kHoldColumns +
                                          " FROM holds WHERE account_id = ?1 ORDER BY seq DESC";
    static const std::string all = std::string("SELECT ") + kHoldColumns + " FROM holds ORDER BY seq DESC";
    if (filter.account_id && !account_row(db, *filter.account_id)) {
      return Error::make(Code::not_found, "account " + *filter.account_id + " does not exist");
    }
    std::vector<Hold> out;
    Query q(db.stmt(filter.account_id ? by_account.c_str() : all.c_str()));
    if (filter.account_id) q->bind(1, std::string_view(*filter.account_id));
    while (static_cast<std::int64_t>(out.size()) < filter.limit && q.step()) {
      Hold h = hold_view(read_hold(q.row()), now);
      if (!filter.status || h.status == *filter.status) out.push_back(std::move(h));
    }
    return out;
  });
}

Result<EventPage> SqliteStore::read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kEventsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kEventsPageMax));
  }
  if (after < 0) return invalid("after must be 0 or a previous next_after");
  return read([&](Conn& db) -> Result<EventPage> {
    if (!account_row(db, account_id)) {
      return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
    }
    static const std::string sql = std::string("SELECT ") + kEventColumns +
                                   " FROM events WHERE account_id = ?1 AND event_id > ?2 ORDER BY event_id LIMIT ?3";
    EventPage page;
    page.next_after = after;
    Query q(db.stmt(sql.c_str()), account_id, after, limit);
    while (q.step()) page.events.push_back(read_event(q.row()));
    if (!page.events.empty()) page.next_after = page.events.back().event_id;
    return page;
  });
}

Result<AuditReport> SqliteStore::audit(std::optional<std::string_view> account_id) {
  return read([&](Conn& db) -> Result<AuditReport> {
    std::vector<std::string> ids;
    if (account_id) {
      if (!account_row(db, *account_id)) {
        return Error::make(Code::not_found, "account " + std::string(*account_id) + " does not exist");
      }
      ids.emplace_back(*account_id);
    } else {
      Query q(db.stmt("SELECT account_id FROM accounts ORDER BY account_id"));
      while (q.step()) ids.push_back(q->text(0));
    }
    AuditReport report;
    static const std::string events_sql =
        std::string("SELECT ") + kEventColumns + " FROM events WHERE account_id = ?1 ORDER BY event_id";
    for (const std::string& id : ids) {
      const auto row = account_row(db, id);
      TG_ASSERT(row.has_value());
      std::vector<Event> events;
      {
        Query q(db.stmt(events_sql.c_str()), id);
        while (q.step()) events.push_back(read_event(q.row()));
      }
      Query active(db.stmt("SELECT coalesce(sum(amount), 0), count(*) FROM holds "
                           "WHERE account_id = ?1 AND status = 'active'"),
                   id);
      TG_ASSERT(active.step());
      std::vector<std::string> found = invariants::check_balances(*row);
      for (auto& v : invariants::check_active_holds(*row, active->int64(0), active->int64(1))) found.push_back(v);
      for (auto& v : invariants::check_fold(*row, invariants::fold_events(events))) found.push_back(v);
      for (auto& message : found) report.violations.push_back(AuditViolation{id, std::move(message)});
      ++report.accounts_checked;
    }
    return report;
  });
}

Result<std::optional<ApiKey>> SqliteStore::find_key(std::string_view secret_sha256) {
  return read([&](Conn& db) -> Result<std::optional<ApiKey>> {
    static const std::string sql = std::string("SELECT ") + kKeyColumns + " FROM api_keys WHERE secret_sha256 = ?1";
    Query q(db.stmt(sql.c_str()), secret_sha256);
    if (!q.step()) return std::optional<ApiKey>();
    return std::optional<ApiKey>(read_key(q.row()));
  });
}

Result<LedgerStats> SqliteStore::stats() {
  const std::int64_t now = clock_.now_ms();
  return read([&](Conn& db) -> Result<LedgerStats> {
    LedgerStats out;
    Query holds(db.stmt("SELECT count(*), min(created_at_ms) FROM holds WHERE status = 'active' AND expires_at_ms > ?1"),
                now);
    TG_ASSERT(holds.step());
    out.active_holds = holds->int64(0);
    if (auto oldest = holds->optional_int64(1)) out.oldest_active_hold_age_ms = std::max<std::int64_t>(0, now - *oldest);
    Query accounts(db.stmt("SELECT count(*) FROM accounts"));
    TG_ASSERT(accounts.step());
    out.accounts = accounts->int64(0);
    return out;
  });
}

Result<std::vector<std::string>> SqliteStore::list_account_ids(std::string_view after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kHoldsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kHoldsPageMax));
  }
  return read([&](Conn& db) -> Result<std::vector<std::string>> {
    std::vector<std::string> out;
    Query q(db.stmt("SELECT account_id FROM accounts WHERE account_id > ?1 ORDER BY account_id LIMIT ?2"), after, limit);
    while (q.step()) out.push_back(q->text(0));
    return out;
  });
}

Result<bool> SqliteStore::has_admin_key() {
  return read([&](Conn& db) -> Result<bool> {
    Query q(db.stmt("SELECT EXISTS (SELECT 1 FROM api_keys WHERE account_id IS NULL AND revoked_at_ms IS NULL)"));
    TG_ASSERT(q.step());
    return q->int64(0) != 0;
  });
}

Status SqliteStore::ping() {
  return read([&](Conn& db) -> Status {
    const int version = schema_version(db);
    if (version != kSchemaVersion) {
      return Error::make(Code::unavailable, "schema version " + std::to_string(version) + ", expected " +
                                                std::to_string(kSchemaVersion));
    }
    return ok_status();
  });
}

}  // namespace tollgate
