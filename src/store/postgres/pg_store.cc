#include "store/postgres/pg_store.h"

#include <algorithm>
#include <limits>

#include "core/checked.h"
#include "core/invariants.h"
#include "core/limits.h"
#include "core/log.h"
#include "store/hold_id.h"
#include "store/postgres/pg_conn.h"
#include "store/transaction.h"

namespace tollgate {
namespace {

using pg::Conn;
using pg::PgError;
using pg::Rows;

// --- schema ---------------------------------------------------------------------------------------
// Migration N takes the schema from version N−1 to N. Never edit a shipped migration: add one.
// The same tables as SQLite's, with the same CHECK constraints; ids compare bytewise (COLLATE "C")
// so pages of account ids come in the same order on every backend.
constexpr const char* kMigrations[] = {
    // 1: accounts, holds, transfers, events
    R"sql(
CREATE TABLE accounts (
  account_id       text COLLATE "C" PRIMARY KEY,
  available        bigint NOT NULL,
  reserved         bigint NOT NULL CHECK (reserved >= 0),
  used             bigint NOT NULL CHECK (used >= 0),
  purchased        bigint NOT NULL,
  overdraft_limit  bigint NOT NULL CHECK (overdraft_limit >= 0),
  max_active_holds bigint CHECK (max_active_holds IS NULL OR max_active_holds >= 1),
  active_holds     bigint NOT NULL CHECK (active_holds >= 0),
  created_at_ms    bigint NOT NULL,
  CHECK (available + reserved + used = purchased),
  CHECK (available >= -overdraft_limit)
);

CREATE SEQUENCE holds_seq;
CREATE TABLE holds (
  seq              bigint PRIMARY KEY,             -- from holds_seq: creation order
  hold_id          text COLLATE "C" NOT NULL,      -- 'hold_<seq>_<random>': found by seq, checked whole
  account_id       text COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  request_id       text COLLATE "C" NOT NULL UNIQUE,
  amount           bigint NOT NULL CHECK (amount >= 1),
  committed_amount bigint NOT NULL CHECK (committed_amount >= 0 AND committed_amount <= amount),
  status           text NOT NULL CHECK (status IN ('active', 'committed', 'released', 'expired')),
  late_outcome     text CHECK (late_outcome IS NULL OR (status = 'expired' AND late_outcome IN ('charged', 'forgiven'))),
  created_at_ms    bigint NOT NULL,
  expires_at_ms    bigint NOT NULL,
  closed_at_ms     bigint,
  metadata         text NOT NULL
);
CREATE INDEX holds_by_account ON holds(account_id, seq);
CREATE INDEX holds_active_by_deadline ON holds(expires_at_ms) WHERE status = 'active';
CREATE INDEX holds_active_by_account ON holds(account_id, expires_at_ms) WHERE status = 'active';

CREATE TABLE transfers (
  reference   text COLLATE "C" PRIMARY KEY,
  account_id  text COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  kind        text NOT NULL CHECK (kind IN ('credited', 'debited')),
  amount      bigint NOT NULL CHECK (amount >= 1),
  reason      text NOT NULL,
  event_id    bigint NOT NULL
);

-- event_id: taken while the transaction holds the account's row lock (see pg_store.h), so one
-- account's events increase with commit order.
CREATE SEQUENCE events_seq;
CREATE TABLE events (
  event_id        bigint PRIMARY KEY DEFAULT nextval('events_seq'),
  account_id      text COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  type            text NOT NULL,
  amount          bigint NOT NULL CHECK (amount >= 0),
  hold_id         text,
  job_id          text,
  reference       text,
  at_ms           bigint NOT NULL,
  available_after bigint NOT NULL,
  reserved_after  bigint NOT NULL,
  used_after      bigint NOT NULL
);
CREATE INDEX events_by_account ON events(account_id, event_id);
CREATE FUNCTION events_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN RAISE EXCEPTION 'events are append-only'; END $$;
CREATE TRIGGER events_are_never_changed BEFORE UPDATE OR DELETE ON events
  FOR EACH ROW EXECUTE FUNCTION events_are_append_only();
CREATE TRIGGER events_are_never_truncated BEFORE TRUNCATE ON events
  FOR EACH STATEMENT EXECUTE FUNCTION events_are_append_only();
)sql",
    // 2: API keys (only the SHA-256 of a secret is stored)
    R"sql(
CREATE TABLE api_keys (
  key_id         text COLLATE "C" PRIMARY KEY,
  account_id     text COLLATE "C" REFERENCES accounts(account_id),   -- NULL: an admin key
  secret_sha256  text NOT NULL UNIQUE,
  created_at_ms  bigint NOT NULL,
  revoked_at_ms  bigint
);
)sql",
};
constexpr int kMigrationCount = static_cast<int>(std::size(kMigrations));
static_assert(kMigrationCount == PgStore::kSchemaVersion);

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
// Statements sent in one pipeline, at most (bounds the memory of one round trip).
constexpr std::size_t kPipelineMax = 256;
// The database's clock in ms since the epoch: the real time, not the transaction's start.
constexpr const char* kNowSql = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

// --- row mapping ----------------------------------------------------------------------------------
constexpr const char* kHoldColumns =
    "hold_id, account_id, request_id, amount, committed_amount, status, late_outcome, created_at_ms, "
    "expires_at_ms, closed_at_ms, metadata";

Hold read_hold(const Rows& r, int row) {
  Hold h;
  h.hold_id = r.text(row, 0);
  h.account_id = r.text(row, 1);
  h.request_id = r.text(row, 2);
  h.amount = r.int64(row, 3);
  h.committed_amount = r.int64(row, 4);
  const auto status = parse_hold_status(r.text(row, 5));
  const auto late = parse_late_outcome(r.optional_text(row, 6).value_or(""));
  if (!status || !late) throw PgError("XX000", false, "hold " + h.hold_id + " has an unknown status");
  h.status = *status;
  h.late_outcome = *late;
  h.created_at_ms = r.int64(row, 7);
  h.expires_at_ms = r.int64(row, 8);
  h.closed_at_ms = r.optional_int64(row, 9);
  h.metadata_json = r.text(row, 10);
  return h;
}

std::vector<Hold> read_holds(const Rows& r) {
  std::vector<Hold> out;
  out.reserve(r.size());
  for (int i = 0; i < r.size(); ++i) out.push_back(read_hold(r, i));
  return out;
}

constexpr const char* kEventColumns =
    "event_id, account_id, type, amount, hold_id, job_id, reference, at_ms, available_after, reserved_after, "
    "used_after";

Event read_event(const Rows& r, int row) {
  Event e;
  e.event_id = r.int64(row, 0);
  e.account_id = r.text(row, 1);
  const auto type = parse_event_type(r.text(row, 2));
  if (!type) throw PgError("XX000", false, "event " + std::to_string(e.event_id) + " has an unknown type");
  e.type = *type;
  e.amount = r.int64(row, 3);
  e.hold_id = r.optional_text(row, 4);
  e.job_id = r.optional_text(row, 5);
  e.reference = r.optional_text(row, 6);
  e.at_ms = r.int64(row, 7);
  e.available_after = r.int64(row, 8);
  e.reserved_after = r.int64(row, 9);
  e.used_after = r.int64(row, 10);
  return e;
}

std::vector<Event> read_events_rows(const Rows& r) {
  std::vector<Event> out;
  out.reserve(r.size());
  for (int i = 0; i < r.size(); ++i) out.push_back(read_event(r, i));
  return out;
}

constexpr const char* kAccountColumns =
    "account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds, active_holds, created_at_ms";

Account read_account(const Rows& r, int row) {
  Account a;
  a.account_id = r.text(row, 0);
  a.balances = Balances{r.int64(row, 1), r.int64(row, 2), r.int64(row, 3), r.int64(row, 4)};
  a.overdraft_limit = r.int64(row, 5);
  a.max_active_holds = r.optional_int64(row, 6);
  a.active_holds = r.int64(row, 7);
  a.created_at_ms = r.int64(row, 8);
  return a;
}

std::optional<Account> account_row(Conn& db, std::string_view account_id, bool for_update) {
  static const std::string plain = std::string("SELECT ") + kAccountColumns + " FROM accounts WHERE account_id = $1";
  static const std::string locked = plain + " FOR UPDATE";
  Rows r = db.query(for_update ? locked : plain, account_id);
  if (r.empty()) return std::nullopt;
  return read_account(r, 0);
}

// The account as a reader sees it at now_ms: overdue holds already count as available.
std::optional<Account> account_view(Conn& db, std::string_view account_id, std::int64_t now_ms) {
  static const std::string sql = std::string("SELECT ") + kAccountColumns +
                                 ", o.overdue_count, o.overdue_sum, o.oldest_live FROM accounts a, LATERAL ("
                                 "SELECT count(*) FILTER (WHERE expires_at_ms <= $2) AS overdue_count, "
                                 "coalesce(sum(amount) FILTER (WHERE expires_at_ms <= $2), 0) AS overdue_sum, "
                                 "min(created_at_ms) FILTER (WHERE expires_at_ms > $2) AS oldest_live "
                                 "FROM holds h WHERE h.account_id = a.account_id AND h.status = 'active') o "
                                 "WHERE a.account_id = $1";
  Rows r = db.query(sql, account_id, now_ms);
  if (r.empty()) return std::nullopt;
  Account a = read_account(r, 0);
  const std::int64_t overdue_count = r.int64(0, 9);
  const std::int64_t overdue_sum = r.int64(0, 10);
  a.balances.available += overdue_sum;
  a.balances.reserved -= overdue_sum;
  a.active_holds -= overdue_count;
  if (auto oldest = r.optional_int64(0, 11)) a.oldest_active_hold_age_ms = std::max<std::int64_t>(0, now_ms - *oldest);
  return a;
}

std::optional<Hold> hold_by_id(Conn& db, std::string_view hold_id, bool for_update) {
  static const std::string plain = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE seq = $1 AND hold_id = $2";
  static const std::string locked = plain + " FOR UPDATE";
  const auto seq = hold_id_seq(hold_id);
  if (!seq) return std::nullopt;
  Rows r = db.query(for_update ? locked : plain, *seq, hold_id);
  if (r.empty()) return std::nullopt;
  return read_hold(r, 0);
}

std::optional<Balances> balances_of(const Rows& r) {
  if (r.empty()) return std::nullopt;
  TG_ASSERT(r.size() == 1);
  Balances b{r.int64(0, 0), r.int64(0, 1), r.int64(0, 2), r.int64(0, 3)};
  TG_ASSERT(b.available + b.reserved + b.used == b.purchased);  // also a CHECK constraint
  return b;
}

constexpr const char* kKeyColumns = "key_id, account_id, secret_sha256, created_at_ms, revoked_at_ms";

ApiKey read_key(const Rows& r, int row) {
  return ApiKey{r.text(row, 0), r.optional_text(row, 1), r.text(row, 2), r.int64(row, 3), r.optional_int64(row, 4)};
}

// --- the write transaction on the writer connection ------------------------------------------------
class PgTransaction final : public Transaction {
  static std::int64_t must_seq(std::string_view hold_id) {
    const auto seq = hold_id_seq(hold_id);
    TG_ASSERT(seq.has_value());  // ids of holds this transaction read are well formed
    return *seq;
  }

 public:
  explicit PgTransaction(Conn& db) : db_(db) {}

  // Locked: the command may write the account next, and an event of it must be appended under its
  // row lock (pg_store.h).
  std::optional<Account> account_row(std::string_view account_id) override {
    return tollgate::account_row(db_, account_id, /*for_update=*/true);
  }
  std::optional<Account> account_view(std::string_view account_id, std::int64_t now_ms) override {
    return tollgate::account_view(db_, account_id, now_ms);
  }
  // Locked: a hold read here may be expired or settled next, and another instance may be doing
  // the same; the lock makes the second one see the first one's result.
  std::optional<Hold> hold_by_id(std::string_view hold_id) override {
    return tollgate::hold_by_id(db_, hold_id, /*for_update=*/true);
  }

  std::optional<Hold> hold_by_request(std::string_view request_id) override {
    static const std::string sql = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE request_id = $1";
    Rows r = db_.query(sql, request_id);
    if (r.empty()) return std::nullopt;
    return read_hold(r, 0);
  }

  std::optional<Transfer> transfer_by_reference(std::string_view reference) override {
    Rows r = db_.query("SELECT reference, account_id, kind, amount, reason, event_id FROM transfers WHERE reference = $1",
                       reference);
    if (r.empty()) return std::nullopt;
    Transfer t;
    t.reference = r.text(0, 0);
    t.account_id = r.text(0, 1);
    t.kind = r.text(0, 2) == "credited" ? EventType::credited : EventType::debited;
    t.amount = r.int64(0, 3);
    t.reason = r.text(0, 4);
    t.event_id = r.int64(0, 5);
    return t;
  }

  std::optional<Event> event_by_id(std::int64_t event_id) override {
    static const std::string sql = std::string("SELECT ") + kEventColumns + " FROM events WHERE event_id = $1";
    Rows r = db_.query(sql, event_id);
    if (r.empty()) return std::nullopt;
    return read_event(r, 0);
  }

  // SKIP LOCKED: holds another instance is expiring (or settling) right now are its work.
  std::vector<Hold> overdue_holds(std::optional<std::string_view> account_id, std::int64_t now_ms,
                                  std::int64_t limit) override {
    static const std::string one = std::string("SELECT ") + kHoldColumns +
                                   " FROM holds WHERE account_id = $1 AND status = 'active' AND expires_at_ms <= $2 "
                                   "ORDER BY expires_at_ms LIMIT $3 FOR UPDATE SKIP LOCKED";
    static const std::string all = std::string("SELECT ") + kHoldColumns +
                                   " FROM holds WHERE status = 'active' AND expires_at_ms <= $1 "
                                   "ORDER BY expires_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED";
    return read_holds(account_id ? db_.query(one, *account_id, now_ms, limit) : db_.query(all, now_ms, limit));
  }

  std::optional<Balances> credit_if_fits(std::string_view account_id, std::int64_t amount) override {
    return balances_of(db_.query(
        "UPDATE accounts SET available = available + $2, purchased = purchased + $2 "
        "WHERE account_id = $1 AND available <= $3::bigint - $2::bigint AND purchased <= $3::bigint - $2::bigint "
        "RETURNING available, reserved, used, purchased",
        account_id, amount, kMax));
  }

  std::optional<Balances> debit_if_available(std::string_view account_id, std::int64_t amount) override {
    return balances_of(db_.query(
        "UPDATE accounts SET available = available - $2, purchased = purchased - $2 "
        "WHERE account_id = $1 AND available >= $2::bigint RETURNING available, reserved, used, purchased",
        account_id, amount));
  }

  std::optional<Balances> reserve_if_available(std::string_view account_id, std::int64_t amount) override {
    return balances_of(db_.query(
        "UPDATE accounts SET available = available - $2, reserved = reserved + $2, active_holds = active_holds + 1 "
        "WHERE account_id = $1 AND available - $2::bigint >= -overdraft_limit AND reserved <= $3::bigint - $2::bigint "
        "AND (max_active_holds IS NULL OR active_holds < max_active_holds) "
        "RETURNING available, reserved, used, purchased",
        account_id, amount, kMax));
  }

  std::optional<Balances> late_charge_if_available(std::string_view account_id, std::int64_t amount) override {
    return balances_of(db_.query(
        "UPDATE accounts SET available = available - $2, used = used + $2 "
        "WHERE account_id = $1 AND available - $2::bigint >= -overdraft_limit AND used <= $3::bigint - $2::bigint "
        "RETURNING available, reserved, used, purchased",
        account_id, amount, kMax));
  }

  Balances end_hold_balances(std::string_view account_id, std::int64_t held, std::int64_t committed) override {
    TG_ASSERT(held >= 1 && committed >= 0 && committed <= held);
    auto after = balances_of(db_.query(
        "UPDATE accounts SET available = available + $2, reserved = reserved - $3, used = used + $4, "
        "active_holds = active_holds - 1 WHERE account_id = $1 RETURNING available, reserved, used, purchased",
        account_id, held - committed, held, committed));
    TG_ASSERT(after.has_value());
    return *after;
  }

  void insert_account(const Account& a) override {
    db_.query("INSERT INTO accounts (account_id, available, reserved, used, purchased, overdraft_limit, "
              "max_active_holds, active_holds, created_at_ms) VALUES ($1, 0, 0, 0, 0, $2, $3, 0, $4)",
              a.account_id, a.overdraft_limit, a.max_active_holds, a.created_at_ms);
  }

  std::string insert_hold(const Hold& h, std::string_view random) override {
    Rows r = db_.query(
        "INSERT INTO holds (seq, hold_id, account_id, request_id, amount, committed_amount, status, created_at_ms, "
        "expires_at_ms, metadata) SELECT s, 'hold_' || s || CASE WHEN $1 = '' THEN '' ELSE '_' || $1 END, "
        "$2, $3, $4, 0, 'active', $5, $6, $7 FROM (SELECT nextval('holds_seq') AS s) n RETURNING hold_id, seq",
        random, h.account_id, h.request_id, h.amount, h.created_at_ms, h.expires_at_ms, h.metadata_json);
    TG_ASSERT(r.size() == 1);
    std::string hold_id = r.text(0, 0);
    TG_ASSERT(hold_id == make_hold_id(r.int64(0, 1), random));  // the one shape every backend uses
    return hold_id;
  }

  std::optional<Hold> end_active_hold(std::string_view hold_id, HoldStatus status, std::optional<std::int64_t> committed,
                                      std::int64_t now_ms) override {
    TG_ASSERT(status == HoldStatus::committed || status == HoldStatus::released);
    static const std::string sql = std::string(
                                       "UPDATE holds SET status = $3, committed_amount = coalesce($4::bigint, amount), "
                                       "closed_at_ms = $5 WHERE seq = $1 AND hold_id = $2 AND status = 'active' "
                                       "AND expires_at_ms > $5 AND amount >= coalesce($4::bigint, amount) RETURNING ") +
                                   kHoldColumns;
    const auto seq = hold_id_seq(hold_id);
    if (!seq) return std::nullopt;
    Rows r = db_.query(sql, *seq, hold_id, hold_status_name(status), committed, now_ms);
    if (r.empty()) return std::nullopt;
    Hold before = read_hold(r, 0);  // the row after the update: turn it back into the one before
    TG_ASSERT(before.status == status);
    before.status = HoldStatus::active;
    before.committed_amount = 0;
    before.closed_at_ms.reset();
    return before;
  }

  void end_hold(std::string_view hold_id, HoldStatus status, std::int64_t committed_amount,
                std::int64_t closed_at_ms) override {
    TG_ASSERT(status != HoldStatus::active);
    Rows r = db_.query("UPDATE holds SET status = $3, committed_amount = $4, closed_at_ms = $5 "
                       "WHERE seq = $1 AND hold_id = $2 AND status = 'active'",
                       must_seq(hold_id), hold_id, hold_status_name(status), committed_amount, closed_at_ms);
    TG_ASSERT(r.affected() == 1);  // the row was read FOR UPDATE in this transaction
  }

  void settle_late(std::string_view hold_id, LateOutcome outcome, std::int64_t committed_amount) override {
    TG_ASSERT(outcome != LateOutcome::none);
    Rows r = db_.query("UPDATE holds SET late_outcome = $3, committed_amount = $4 "
                       "WHERE seq = $1 AND hold_id = $2 AND status = 'expired' AND late_outcome IS NULL",
                       must_seq(hold_id), hold_id, late_outcome_name(outcome), committed_amount);
    TG_ASSERT(r.affected() == 1);
  }

  void set_hold_expiry(std::string_view hold_id, std::int64_t expires_at_ms) override {
    Rows r = db_.query("UPDATE holds SET expires_at_ms = $3 WHERE seq = $1 AND hold_id = $2 AND status = 'active'",
                       must_seq(hold_id), hold_id, expires_at_ms);
    TG_ASSERT(r.affected() == 1);
  }

  void insert_transfer(const Transfer& t) override {
    db_.query("INSERT INTO transfers (reference, account_id, kind, amount, reason, event_id) "
              "VALUES ($1, $2, $3, $4, $5, $6)",
              t.reference, t.account_id, event_type_name(t.kind), t.amount, t.reason, t.event_id);
  }

  // Locked: a revoke may follow, and another instance may be revoking the same key.
  std::optional<ApiKey> key_by_id(std::string_view key_id) override {
    static const std::string sql = std::string("SELECT ") + kKeyColumns + " FROM api_keys WHERE key_id = $1 FOR UPDATE";
    Rows r = db_.query(sql, key_id);
    if (r.empty()) return std::nullopt;
    return read_key(r, 0);
  }

  void insert_key(const ApiKey& k) override {
    db_.query("INSERT INTO api_keys (key_id, account_id, secret_sha256, created_at_ms) VALUES ($1, $2, $3, $4)",
              k.key_id, k.account_id, k.secret_sha256, k.created_at_ms);
  }

  void revoke_key(std::string_view key_id, std::int64_t revoked_at_ms) override {
    Rows r = db_.query("UPDATE api_keys SET revoked_at_ms = $2 WHERE key_id = $1 AND revoked_at_ms IS NULL", key_id,
                       revoked_at_ms);
    TG_ASSERT(r.affected() == 1);
  }

  Event append_event(Event e) override {
    Rows r = db_.query("INSERT INTO events (account_id, type, amount, hold_id, job_id, reference, at_ms, "
                       "available_after, reserved_after, used_after) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) "
                       "RETURNING event_id",
                       e.account_id, event_type_name(e.type), e.amount, e.hold_id, e.job_id, e.reference, e.at_ms,
                       e.available_after, e.reserved_after, e.used_after);
    e.event_id = r.int64(0, 0);
    return e;
  }

 private:
  Conn& db_;
};

// --- fast paths: one statement per command, a batch's run of them pipelined in one round trip ----
// The common case of reserve (a new request_id that the conditional write accepts) and of commit
// and release (an active hold, not overdue, that covers the amount) fused into one statement each:
// the same writes, in the same order, as execute()'s fast paths over the primitives (the lookup
// for idempotency, the conditional UPDATE, the row, its event). When its case does not apply, a
// statement writes nothing and answers no row; the command then runs through execute() at its
// place in the batch. Because later statements of the pipeline were already sent, a statement that
// bails sets `tollgate.bail` to its run's number and every later statement of that run checks it
// first and does nothing: so the commands after it run after it, in order, as in execute().
// Events still follow the account row's lock: the INSERT reads the UPDATE's RETURNING row.
// A statement that did its work answers one row with the hold id (reserve) or the hold (commit,
// release) and the balances after; one that bailed answers a row of NULLs.
//
// $1 account, $2 amount, $3 request_id, $4 random part of the id, $5 now, $6 expiry, $7 metadata, $8 run
const std::string kFastReserveSql = R"sql(
WITH go AS (SELECT coalesce(current_setting('tollgate.bail', true), '') <> $8 AS ok),
acc AS (
  UPDATE accounts SET available = available - $2::bigint, reserved = reserved + $2::bigint,
                      active_holds = active_holds + 1
  WHERE account_id = $1 AND (SELECT ok FROM go)
    AND NOT EXISTS (SELECT 1 FROM holds WHERE request_id = $3)
    AND available - $2::bigint >= -overdraft_limit AND reserved <= 9223372036854775807 - $2::bigint
    AND (max_active_holds IS NULL OR active_holds < max_active_holds)
  RETURNING available, reserved, used, purchased),
h AS (
  INSERT INTO holds (seq, hold_id, account_id, request_id, amount, committed_amount, status, created_at_ms,
                     expires_at_ms, metadata)
  SELECT n.s, 'hold_' || n.s || CASE WHEN $4 = '' THEN '' ELSE '_' || $4 END, $1, $3, $2::bigint, 0, 'active',
         $5::bigint, $6::bigint, $7
  FROM acc, LATERAL (SELECT nextval('holds_seq') AS s) n
  RETURNING hold_id),
e AS (
  INSERT INTO events (account_id, type, amount, hold_id, at_ms, available_after, reserved_after, used_after)
  SELECT $1, 'reserved', $2::bigint, h.hold_id, $5::bigint, acc.available, acc.reserved, acc.used FROM acc, h
  RETURNING event_id)
SELECT h.hold_id, acc.available, acc.reserved, acc.used, acc.purchased, NULL::text
FROM acc, h, e
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, set_config('tollgate.bail', $8, true)
WHERE NOT EXISTS (SELECT 1 FROM acc)
)sql";

// $1 seq, $2 hold_id, $3 status, $4 committed (NULL: the whole hold), $5 now, $6 event type, $7 run
const std::string kFastEndSql = std::string(R"sql(
WITH go AS (SELECT coalesce(current_setting('tollgate.bail', true), '') <> $7 AS ok),
h AS (
  UPDATE holds SET status = $3, committed_amount = coalesce($4::bigint, amount), closed_at_ms = $5::bigint
  WHERE seq = $1::bigint AND hold_id = $2 AND status = 'active' AND expires_at_ms > $5::bigint
    AND amount >= coalesce($4::bigint, amount) AND (SELECT ok FROM go)
  RETURNING )sql") + kHoldColumns + R"sql(),
acc AS (
  UPDATE accounts a SET available = a.available + h.amount - h.committed_amount, reserved = a.reserved - h.amount,
                        used = a.used + h.committed_amount, active_holds = a.active_holds - 1
  FROM h WHERE a.account_id = h.account_id
  RETURNING a.available, a.reserved, a.used, a.purchased),
e AS (
  INSERT INTO events (account_id, type, amount, hold_id, at_ms, available_after, reserved_after, used_after)
  SELECT h.account_id, $6, CASE WHEN $6 = 'released' THEN h.amount ELSE h.committed_amount END, h.hold_id,
         $5::bigint, acc.available, acc.reserved, acc.used
  FROM h, acc RETURNING event_id)
SELECT h.*, acc.available, acc.reserved, acc.used, acc.purchased, NULL::text FROM h, acc, e
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       set_config('tollgate.bail', $7, true)
WHERE NOT EXISTS (SELECT 1 FROM h)
)sql";

// Whether `command` has a fused fast statement.
bool has_fast_form(const Command& command) {
  if (std::holds_alternative<ReserveCommand>(command) || std::holds_alternative<ReleaseCommand>(command)) return true;
  if (const auto* c = std::get_if<CommitCommand>(&command)) return !c->amount || amount_is_valid(*c->amount);
  return false;
}

// The fused statement of `command` (has_fast_form), for pipelining in run number `run`.
Conn::Pipelined fast_statement(const Command& command, std::int64_t now_ms, const std::string& run) {
  if (const auto* c = std::get_if<ReserveCommand>(&command)) {
    TG_ASSERT(c->ttl_ms.has_value());
    return {&kFastReserveSql, pg::Params(c->account_id, c->amount, c->request_id, c->hold_id_random, now_ms,
                                         now_ms + *c->ttl_ms, c->metadata_json.empty() ? "{}" : c->metadata_json,
                                         run)};
  }
  std::string_view hold_id;
  HoldStatus status = HoldStatus::released;
  std::optional<std::int64_t> committed;
  if (const auto* c = std::get_if<CommitCommand>(&command)) {
    hold_id = c->hold_id;
    status = HoldStatus::committed;
    committed = c->amount;
  } else {
    hold_id = std::get<ReleaseCommand>(command).hold_id;
    committed = 0;
  }
  // An id without a sequence number matches no row (seq 0 never exists): the slow path answers.
  const std::int64_t seq = hold_id_seq(hold_id).value_or(0);
  const EventType type = status == HoldStatus::committed ? EventType::committed : EventType::released;
  return {&kFastEndSql, pg::Params(seq, hold_id, hold_status_name(status), committed, now_ms, event_type_name(type), run)};
}

// The outcome of a fused statement's row, or nullopt when it bailed (no row with data).
std::optional<CommandResult> fast_outcome(const Command& command, const Rows& r, std::int64_t now_ms) {
  TG_ASSERT(r.size() == 1);
  if (r.is_null(0, 0)) return std::nullopt;
  if (const auto* c = std::get_if<ReserveCommand>(&command)) {
    Hold hold;
    hold.hold_id = r.text(0, 0);
    hold.account_id = c->account_id;
    hold.request_id = c->request_id;
    hold.amount = c->amount;
    hold.status = HoldStatus::active;
    hold.created_at_ms = now_ms;
    hold.expires_at_ms = now_ms + *c->ttl_ms;
    hold.metadata_json = c->metadata_json.empty() ? "{}" : c->metadata_json;
    TG_ASSERT(r.int64(0, 1) + r.int64(0, 2) + r.int64(0, 3) == r.int64(0, 4));
    return HoldOutcome{std::move(hold), true};
  }
  Hold hold = read_hold(r, 0);  // as it is now: committed or released, closed now
  TG_ASSERT(r.int64(0, 11) + r.int64(0, 12) + r.int64(0, 13) == r.int64(0, 14));
  return HoldOutcome{std::move(hold), true};
}

// Two instances' batches that lock the same accounts in opposite orders deadlock (PostgreSQL breaks
// it after deadlock_timeout, 1 s by default, and the loser re-runs). So every batch that writes
// locks the accounts it will write first, sorted by id, and only then their holds: the accounts its
// reserves, credits and debits name, those of the holds its commits, releases and extends name, and
// for the reaper's pass those of the overdue holds it is about to expire (holds that become overdue
// between this statement and the pass are the one gap left).
std::string pg_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// `now_ms`: the injected clock's time, or nullopt for the database's.
std::optional<Conn::Pipelined> account_lock_statement(std::span<const Command> commands,
                                                      std::optional<std::int64_t> now_ms) {
  static const std::string sql =
      "SELECT account_id FROM accounts WHERE account_id = ANY(ARRAY("
      "SELECT unnest($1::text[]) "
      "UNION ALL SELECT account_id FROM holds WHERE seq = ANY($2::bigint[]) "
      "UNION ALL (SELECT account_id FROM holds WHERE status = 'active' AND expires_at_ms <= "
      "coalesce($3::bigint, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) "
      "ORDER BY expires_at_ms LIMIT $4))) "
      "ORDER BY account_id FOR UPDATE";  // ARRAY(…): evaluated once, then primary-key lookups
  std::vector<std::string> accounts, seqs;
  std::int64_t overdue_max = 0;
  const auto hold = [&](std::string_view hold_id) {
    if (auto seq = hold_id_seq(hold_id)) seqs.push_back(std::to_string(*seq));
  };
  for (const Command& command : commands) {
    std::visit(
        [&](const auto& c) {
          using T = std::decay_t<decltype(c)>;
          if constexpr (std::is_same_v<T, ReserveCommand> || std::is_same_v<T, CreditCommand> ||
                        std::is_same_v<T, DebitCommand>) {
            accounts.push_back(c.account_id);
          } else if constexpr (std::is_same_v<T, CommitCommand> || std::is_same_v<T, ReleaseCommand> ||
                               std::is_same_v<T, ExtendCommand>) {
            hold(c.hold_id);
          } else if constexpr (std::is_same_v<T, ExpireOverdueCommand>) {
            overdue_max += c.max_holds;
          }
        },
        command);
  }
  std::sort(accounts.begin(), accounts.end());
  accounts.erase(std::unique(accounts.begin(), accounts.end()), accounts.end());
  if (accounts.empty() && seqs.empty() && overdue_max == 0) return std::nullopt;  // writes no account
  return Conn::Pipelined{&sql, pg::Params(pg_array(accounts), pg_array(seqs), now_ms, overdue_max)};
}

Error pg_failure(const PgError& e) {
  return Error::make(e.is_transient() ? Code::unavailable : Code::internal, std::string("database: ") + e.what());
}


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
  // A pooled connection may have died while idle (a database restart, a fail-over): a read is
  // safe to run again, once, on a new connection.
  for (int attempt = 0;; ++attempt) {
    try {
      auto lease = readers_.lease();
      Conn& db = *lease;
      try {
        std::int64_t now = 0;
        if (options_.clock) {
          db.exec("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
          now = options_.clock->now_ms();
        } else {
          now = db.exec(std::string("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; ") + kNowSql).int64(0, 0);
        }
        auto result = body(db, now);
        db.exec("COMMIT");
        return result;
      } catch (...) {
        db.rollback();
        throw;
      }
    } catch (const PgError& e) {
      if (e.connection_lost() && attempt == 0) continue;
      return pg_failure(e);
    }
  }
}

// --- open / migrate -------------------------------------------------------------------------------
PgStore::PgStore(PgOptions options)
    : options_(std::move(options)),
      readers_(
          options_.readers_max,
          [this] {
            return Conn::connect(options_.uri,
                                 pg::ConnectOptions{options_.connect_timeout_ms, options_.statement_timeout_ms});
          },
          [](const Conn& conn) { return conn.healthy(); }) {}
PgStore::~PgStore() = default;

Result<std::unique_ptr<PgStore>> PgStore::open(const PgOptions& options) {
  if (options.uri.empty()) return invalid("the PostgreSQL URI is empty");
  if (options.readers_max < 1) return invalid("readers_max must be at least 1");
  if (options.connect_timeout_ms < 1 || options.statement_timeout_ms < 1) {
    return invalid("database time-outs must be at least 1 ms");
  }
  try {
    auto db = Conn::connect(options.uri, pg::ConnectOptions{options.connect_timeout_ms, options.statement_timeout_ms});
    // Instances starting together: one migrates, the others wait for it and then find the
    // schema current. The lock is per schema, released at COMMIT.
    db->exec("BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('tollgate schema ' || current_schema(), 0))");
    try {
      const int version = schema_version(*db);
      if (version > kSchemaVersion) {
        db->rollback();
        return Error::make(Code::internal, "the database has schema version " + std::to_string(version) +
                                               ", newer than this tollgate (" + std::to_string(kSchemaVersion) +
                                               "): upgrade tollgate");
      }
      db->exec("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at_ms bigint NOT NULL)");
      for (int v = version + 1; v <= kSchemaVersion; ++v) {
        db->exec(kMigrations[v - 1]);
        db->query("INSERT INTO schema_migrations (version, applied_at_ms) VALUES ($1, $2)", std::int64_t{v},
                  clock_now(*db, options.clock));
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
// One attempt at the whole batch in one transaction. Throws PgError; `current` and
// `command_failed` tell the caller which command was running when it did.
Status PgStore::apply_once(std::span<const Command> commands, std::vector<bool>& dropped,
                           std::vector<CommandResult>& results, std::size_t& current, bool& command_failed) {
  results.clear();
  results.reserve(commands.size());
  command_failed = false;
  if (!writer_ || !writer_->healthy()) {
    writer_.reset();
    writer_ = Conn::connect(options_.uri, pg::ConnectOptions{options_.connect_timeout_ms, options_.statement_timeout_ms});
  }
  Conn& db = *writer_;
  // One round trip opens the transaction, reads the clock and locks the batch's accounts in order.
  static const std::string begin_sql = "BEGIN";
  static const std::string now_sql = kNowSql;
  std::vector<Conn::Pipelined> start;
  start.push_back({&begin_sql, pg::Params()});
  if (!options_.clock) start.push_back({&now_sql, pg::Params()});
  const std::optional<std::int64_t> injected_now =
      options_.clock ? std::optional<std::int64_t>(options_.clock->now_ms()) : std::nullopt;
  if (auto lock = account_lock_statement(commands, injected_now)) start.push_back(std::move(*lock));
  std::size_t start_failed = 0;
  const std::vector<Rows> started = db.pipeline(start, start_failed);
  const std::int64_t now = injected_now ? *injected_now : started[1].int64(0, 0);
  PgTransaction tx(db);
  int run = 0;
  current = 0;
  while (current < commands.size()) {
    if (dropped[current]) {
      results.push_back(Error::make(Code::internal, "the database refused this operation"));
      ++current;
      continue;
    }
    // A run of commands with a fused form: one round trip for all of them.
    std::size_t end = current;
    while (end < commands.size() && end - current < kPipelineMax && !dropped[end] && has_fast_form(commands[end])) ++end;
    if (end > current) {
      const std::string run_id = std::to_string(++run);
      std::vector<Conn::Pipelined> statements;
      statements.reserve(end - current);
      for (std::size_t i = current; i < end; ++i) statements.push_back(fast_statement(commands[i], now, run_id));
      std::size_t failed = 0;
      command_failed = true;
      std::vector<Rows> rows;
      try {
        rows = db.pipeline(statements, failed);
      } catch (const PgError&) {
        current += failed;
        throw;
      }
      command_failed = false;
      std::size_t done = 0;
      for (; done < rows.size(); ++done) {
        auto outcome = fast_outcome(commands[current + done], rows[done], now);
        if (!outcome) break;  // it bailed; the rest of the run did nothing
        results.push_back(std::move(*outcome));
      }
      current += done;
      if (current == end) continue;
    }
    // One command through execute(): no fused form, or the one that bailed.
    command_failed = true;
    results.push_back(execute(tx, commands[current], now));
    command_failed = false;
    ++current;
  }
  // Durable: synchronous_commit=on (set by the session). No statement time-out on the COMMIT: a
  // cancelled wait for a synchronous standby would still answer OK for a commit that is only on
  // the primary (PostgreSQL's "committed locally, but might not have been replicated"), and a
  // fail-over could then lose it. The COMMIT waits as long as the database does.
  Rows committed = db.exec("SET LOCAL statement_timeout = 0; COMMIT");
  if (committed.command_tag() != "COMMIT") {  // PostgreSQL answers ROLLBACK for a failed transaction
    throw PgError("XX000", false, "the transaction rolled back at COMMIT (" + committed.command_tag() + ")");
  }
  return ok_status();
}

Status PgStore::apply(std::span<const Command> commands, std::vector<CommandResult>& results) {
  // A batch that lost a race to another instance runs again (bounded); a command that fails
  // unexpectedly is answered `internal` and the batch runs again without it (each round drops
  // one, so this ends); a lost connection fails the whole batch as `unavailable`.
  std::vector<bool> dropped(commands.size(), false);
  int conflicts = 0;
  bool reconnected = false;
  for (std::size_t round = 0; round <= commands.size() + static_cast<std::size_t>(options_.conflict_retries_max) + 1;
       ++round) {
    std::size_t current = 0;
    bool command_failed = false;
    try {
      return apply_once(commands, dropped, results, current, command_failed);
    } catch (const PgError& e) {
      if (writer_) writer_->rollback();
      // The connection died (idle through a database restart, or mid-batch): run the batch once
      // more on a new one. Safe even when the COMMIT's answer was what got lost: every command is
      // idempotent (request_id, reference, hold state), so a batch that did commit replays.
      if (e.connection_lost() && !reconnected) {
        reconnected = true;
        writer_.reset();
        continue;
      }
      if (e.is_conflict() && conflicts < options_.conflict_retries_max) {
        ++conflicts;
        continue;
      }
      if (!command_failed || e.is_transient()) {
        if (!e.connection_lost()) log("warn", std::string("postgres: batch failed: ") + e.what());
        return pg_failure(e);
      }
      dropped[current] = true;
      log("error", "postgres: operation " + std::to_string(current) + " of a batch failed and was dropped: " + e.what());
    }
  }
  return Error::make(Code::unavailable, "database: the batch kept conflicting with other instances");
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
    return hold_view(std::move(*hold), now);
  });
}

Result<std::vector<Hold>> PgStore::list_holds(const HoldFilter& filter) {
  if (filter.limit < 1 || filter.limit > limits::kHoldsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kHoldsPageMax));
  }
  return read([&](Conn& db, std::int64_t now) -> Result<std::vector<Hold>> {
    if (filter.account_id && !account_row(db, *filter.account_id, false)) {
      return Error::make(Code::not_found, "account " + *filter.account_id + " does not exist");
    }
    // Filter on the effective status: an overdue active hold is listed as expired. The status
    // condition is written in SQL so that LIMIT applies after it.
    const std::optional<std::string> status =
        filter.status ? std::optional<std::string>(hold_status_name(*filter.status)) : std::nullopt;
    static const std::string sql =
        std::string("SELECT ") + kHoldColumns +
        " FROM holds WHERE ($1::text IS NULL OR account_id = $1) AND ($2::text IS NULL OR "
        "CASE WHEN status = 'active' AND expires_at_ms <= $3 THEN 'expired' ELSE status END = $2) "
        "ORDER BY seq DESC LIMIT $4";
    std::vector<Hold> out = read_holds(db.query(sql, filter.account_id, status, now, filter.limit));
    for (Hold& h : out) h = hold_view(std::move(h), now);
    return out;
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
      std::vector<std::string> found = invariants::check_balances(*row);
      for (auto& v : invariants::check_active_holds(*row, active.int64(0, 0), active.int64(0, 1))) found.push_back(v);
      for (auto& v : invariants::check_fold(*row, invariants::fold_events(events))) found.push_back(v);
      for (auto& message : found) report.violations.push_back(AuditViolation{id, std::move(message)});
      ++report.accounts_checked;
    }
    return report;
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
