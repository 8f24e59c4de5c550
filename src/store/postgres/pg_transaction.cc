// The per-statement write path of the PostgreSQL store (see pg_write.h): store/execute.cc over one
// SQL statement per Transaction primitive, rows locked as they are read. The differential tests'
// oracle.
#include <limits>
#include <string>

#include "core/limits.h"
#include "core/batch.h"
#include "slices.h"
#include "core/hold_id.h"
#include "core/log.h"
#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"
#include "store/transaction.h"

namespace tollgate::pg {
namespace {

// The largest balance (limits.h): the conditional writes keep every balance within it, as the rules do.
constexpr std::int64_t kMax = limits::kBalanceMax;

std::optional<Balances> balances_of(const Rows& r) {
  if (r.empty()) return std::nullopt;
  TG_ASSERT(r.size() == 1);
  Balances b{r.int64(0, 0), r.int64(0, 1), r.int64(0, 2), r.int64(0, 3)};
  TG_ASSERT(b.available + b.reserved + b.used == b.purchased);  // also a CHECK constraint
  return b;
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
    return pg::account_row(db_, account_id, /*for_update=*/true);
  }
  std::optional<Account> account_view(std::string_view account_id, std::int64_t now_ms) override {
    return pg::account_view(db_, account_id, now_ms);
  }
  // Locked: a hold read here may be expired or settled next, and another instance may be doing
  // the same; the lock makes the second one see the first one's result.
  std::optional<Hold> hold_by_id(std::string_view hold_id) override {
    return pg::hold_by_id(db_, hold_id, /*for_update=*/true);
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
                                   "ORDER BY expires_at_ms, seq LIMIT $3 FOR UPDATE SKIP LOCKED";
    static const std::string all = std::string("SELECT ") + kHoldColumns +
                                   " FROM holds WHERE status = 'active' AND expires_at_ms <= $1 "
                                   "ORDER BY expires_at_ms, seq LIMIT $2 FOR UPDATE SKIP LOCKED";
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
        "WHERE account_id = $1 AND available >= $2::bigint AND NOT frozen "
        "RETURNING available, reserved, used, purchased",
        account_id, amount));
  }

  std::optional<Balances> reserve_if_available(std::string_view account_id, std::int64_t amount) override {
    return balances_of(db_.query(
        "UPDATE accounts SET available = available - $2, reserved = reserved + $2, active_holds = active_holds + 1 "
        "WHERE account_id = $1 AND available - $2::bigint >= -overdraft_limit AND reserved <= $3::bigint - $2::bigint "
        "AND (max_active_holds IS NULL OR active_holds < max_active_holds) AND NOT frozen "
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

  void set_account_settings(std::string_view account_id, const AccountSettings& settings) override {
    Rows r = db_.query("UPDATE accounts SET overdraft_limit = $2, max_active_holds = $3, frozen = $4::boolean "
                       "WHERE account_id = $1",
                       account_id, settings.overdraft_limit, settings.max_active_holds,
                       settings.frozen ? "true" : "false");
    TG_ASSERT(r.affected() == 1);  // the row was read FOR UPDATE in this transaction
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
                                      std::int64_t now_ms, const std::optional<std::string>& release_reason) override {
    TG_ASSERT(status == HoldStatus::committed || status == HoldStatus::released);
    static const std::string sql = std::string(
                                       "UPDATE holds SET status = $3, committed_amount = coalesce($4::bigint, amount), "
                                       "closed_at_ms = $5, release_reason = $6 WHERE seq = $1 AND hold_id = $2 AND "
                                       "status = 'active' AND expires_at_ms > $5 AND amount >= coalesce($4::bigint, "
                                       "amount) RETURNING ") +
                                   kHoldColumns;
    const auto seq = hold_id_seq(hold_id);
    if (!seq) return std::nullopt;
    Rows r = db_.query(sql, *seq, hold_id, hold_status_name(status), committed, now_ms, release_reason);
    if (r.empty()) return std::nullopt;
    Hold before = read_hold(r, 0);  // the row after the update: turn it back into the one before
    TG_ASSERT(before.status == status);
    before.status = HoldStatus::active;
    before.committed_amount = 0;
    before.closed_at_ms.reset();
    before.release_reason.reset();
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

  void set_key_last_used(std::string_view key_id, std::int64_t used_at_ms) override {
    Rows r = db_.query("UPDATE api_keys SET last_used_at_ms = $2 WHERE key_id = $1", key_id, used_at_ms);
    TG_ASSERT(r.affected() == 1);
  }

  // The id from event_ids, as the batch path takes it (pg_store.h). Taken here mid-transaction,
  // not last: the oracle runs alone on its database.
  Event append_event(Event e) override {
    const std::optional<std::string> frozen =
        e.settings ? std::optional<std::string>(e.settings->frozen ? "true" : "false") : std::nullopt;
    Rows r = db_.query("WITH n AS (UPDATE event_ids SET last_event_id = last_event_id + 1 RETURNING last_event_id) "
                       "INSERT INTO events (event_id, account_id, type, amount, hold_id, job_id, reference, at_ms, "
                       "available_after, reserved_after, used_after, reason, overdraft_limit, max_active_holds, "
                       "frozen, expires_at_ms) SELECT n.last_event_id, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, "
                       "$12, $13, $14::boolean, $15::bigint FROM n RETURNING event_id",
                       e.account_id, event_type_name(e.type), e.amount, e.hold_id, e.job_id, e.reference, e.at_ms,
                       e.available_after, e.reserved_after, e.used_after, e.reason,
                       e.settings ? std::optional<std::int64_t>(e.settings->overdraft_limit) : std::nullopt,
                       e.settings ? e.settings->max_active_holds : std::nullopt, frozen, e.expires_at_ms);
    e.event_id = r.int64(0, 0);
    return e;
  }

 private:
  Conn& db_;
};

// Opens the transaction, reads the clock and locks every account the batch may write, in id order
// (the same set the batch path locks: batch::keys_of). Returns now.
std::int64_t begin(Conn& db, std::span<const Command> commands, const Clock* clock) {
  static const std::string begin_sql = "BEGIN";
  static const std::string now_sql = kNowSql;
  static const std::string lock_sql =
      "SELECT account_id FROM accounts WHERE account_id = ANY(ARRAY("
      "SELECT unnest($1::text[]) UNION SELECT account_id FROM holds WHERE seq = ANY($2::bigint[]) "
      "UNION (SELECT account_id FROM holds WHERE status = 'active' AND expires_at_ms <= $3::bigint "
      "ORDER BY expires_at_ms, seq LIMIT $4))) ORDER BY account_id FOR UPDATE";
  std::vector<Conn::Pipelined> start;
  start.push_back({&begin_sql, Params()});
  std::size_t failed = 0;
  std::int64_t now = 0;
  if (clock) {
    now = clock->now_ms();
    db.pipeline(start, failed);
  } else {
    start.push_back({&now_sql, Params()});
    now = db.pipeline(start, failed)[1].int64(0, 0);
  }
  const batch::Keys keys = batch::keys_of(commands);
  db.query(lock_sql, text_array(keys.accounts), int_array(keys.hold_seqs), now, keys.overdue_max);
  return now;
}

}  // namespace

Status apply_per_statement(std::unique_ptr<Conn>& writer, const PgOptions& options, std::span<const Command> commands,
                           std::vector<CommandResult>& results) {
  // A batch that lost a race runs again (bounded); a command that fails unexpectedly is answered
  // `internal` and the batch runs again without it (each round drops one, so this ends); a lost
  // connection: once more on a new one.
  std::vector<bool> dropped(commands.size(), false);
  int conflicts = 0;
  bool reconnected = false;
  for (std::size_t round = 0; round <= commands.size() + static_cast<std::size_t>(options.conflict_retries_max) + 1;
       ++round) {
    std::size_t current = 0;
    bool command_failed = false;
    try {
      results.clear();
      if (!writer || !writer->healthy()) {
        writer.reset();
        writer = Conn::connect(options.uri, ConnectOptions{options.connect_timeout_ms, options.statement_timeout_ms});
      }
      const std::int64_t now = begin(*writer, commands, options.clock);
      PgTransaction tx(*writer);
      for (current = 0; current < commands.size(); ++current) {
        if (dropped[current]) {
          results.push_back(Error::make(Code::internal, "the database refused this operation"));
          continue;
        }
        command_failed = true;
        results.push_back(execute(tx, commands[current], now));
        command_failed = false;
      }
      Rows committed = writer->exec("SET LOCAL statement_timeout = 0; COMMIT");
      if (committed.command_tag() != "COMMIT") {
        throw PgError("XX000", false, "the transaction rolled back at COMMIT (" + committed.command_tag() + ")");
      }
      return ok_status();
    } catch (const PgError& e) {
      if (writer) writer->rollback();
      if (e.connection_lost() && !reconnected) {
        reconnected = true;
        writer.reset();
        continue;
      }
      if (e.is_conflict() && conflicts < options.conflict_retries_max) {
        ++conflicts;
        continue;
      }
      if (!command_failed || e.is_transient()) return pg_failure(e);
      dropped[current] = true;
      log("error", "postgres: operation " + std::to_string(current) + " of a batch failed and was dropped: " + e.what());
    }
  }
  return Error::make(Code::unavailable, "database: the batch kept conflicting with other instances");
}

}  // namespace tollgate::pg
