// The per-statement write path (see sqlite_write.h): store/execute.cc over one SQL statement per
// Transaction primitive. The differential tests' oracle.
#include <limits>
#include <string>

#include "core/limits.h"
#include "core/hold_id.h"
#include "core/log.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_write.h"
#include "store/transaction.h"

namespace tollgate::sqlite {
namespace {

// The largest balance (limits.h): the conditional writes keep every balance within it, as the rules do.
constexpr std::int64_t kMax = limits::kBalanceMax;

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
    return sqlite::account_row(db_, account_id);
  }
  std::optional<Account> account_view(std::string_view account_id, std::int64_t now_ms) override {
    return sqlite::account_view(db_, account_id, now_ms);
  }

  std::optional<Hold> hold_by_id(std::string_view hold_id) override { return sqlite::hold_by_id(db_, hold_id); }

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
                                   "ORDER BY expires_at_ms, seq LIMIT ?3";
    static const std::string all = std::string("SELECT ") + kHoldColumns +
                                   " FROM holds WHERE status = 'active' AND expires_at_ms <= ?1 "
                                   "ORDER BY expires_at_ms, seq LIMIT ?2";
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
                     "WHERE account_id = ?1 AND available >= ?2 AND NOT frozen"),
            account_id, amount);
    return updated_balances(db_, q, account_id);
  }

  std::optional<Balances> reserve_if_available(std::string_view account_id, std::int64_t amount) override {
    Query q(db_.stmt("UPDATE accounts SET available = available - ?2, reserved = reserved + ?2, "
                     "active_holds = active_holds + 1 "
                     "WHERE account_id = ?1 AND available - ?2 >= -overdraft_limit AND reserved <= ?3 - ?2 "
                     "AND (max_active_holds IS NULL OR active_holds < max_active_holds) AND NOT frozen"),
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

  void set_account_settings(std::string_view account_id, const AccountSettings& settings) override {
    Query q(db_.stmt("UPDATE accounts SET overdraft_limit = ?2, max_active_holds = ?3, frozen = ?4 WHERE account_id = ?1"),
            account_id, settings.overdraft_limit, settings.max_active_holds, std::int64_t{settings.frozen});
    q.step();
    TG_ASSERT(db_.changes() == 1);
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
                                      std::int64_t now_ms, const std::optional<std::string>& release_reason) override {
    TG_ASSERT(status == HoldStatus::committed || status == HoldStatus::released);
    const auto seq = hold_id_seq(hold_id);
    if (!seq) return std::nullopt;
    Query q(db_.stmt("UPDATE holds SET status = ?3, committed_amount = coalesce(?4, amount), closed_at_ms = ?5, "
                     "release_reason = ?6 "
                     "WHERE seq = ?1 AND hold_id = ?2 AND status = 'active' AND expires_at_ms > ?5 "
                     "AND amount >= coalesce(?4, amount)"),
            *seq, hold_id, hold_status_name(status), committed, now_ms, release_reason);
    q.step();
    if (db_.changes() == 0) return std::nullopt;
    auto before = sqlite::hold_by_id(db_, hold_id);  // the row after the update, by primary key
    TG_ASSERT(before.has_value() && before->status == status);
    before->status = HoldStatus::active;
    before->committed_amount = 0;
    before->closed_at_ms.reset();
    before->release_reason.reset();
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

  void set_key_last_used(std::string_view key_id, std::int64_t used_at_ms) override {
    Query q(db_.stmt("UPDATE api_keys SET last_used_at_ms = ?2 WHERE key_id = ?1"), key_id, used_at_ms);
    q.step();
    TG_ASSERT(db_.changes() == 1);
  }

  Event append_event(Event e) override {
    Stmt& insert = db_.stmt("INSERT INTO events (account_id, type, amount, hold_id, job_id, reference, at_ms, "
                            "available_after, reserved_after, used_after, reason, overdraft_limit, max_active_holds, "
                            "frozen, expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                            "?14, ?15)");
    bind_event_details(insert, 11, e);
    Query q(insert, e.account_id, event_type_name(e.type), e.amount, e.hold_id, e.job_id, e.reference, e.at_ms,
            e.available_after, e.reserved_after, e.used_after);
    q.step();
    e.event_id = db_.last_insert_rowid();
    return e;
  }

 private:
  Conn& db_;
  std::optional<std::int64_t> next_seq_;  // the seq of the next hold this transaction inserts
};

}  // namespace

Status apply_per_statement(Conn& db, const Clock& clock, std::span<const Command> commands,
                           std::vector<CommandResult>& results) {
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
      db.exec("BEGIN IMMEDIATE");
      const std::int64_t now = clock.now_ms();
      SqliteTransaction tx(db);
      for (current = 0; current < commands.size(); ++current) {
        if (dropped[current]) {
          results.push_back(Error::make(Code::internal, "the database refused this operation"));
          continue;
        }
        command_failed = true;
        results.push_back(execute(tx, commands[current], now));
        command_failed = false;
      }
      db.exec("COMMIT");  // durable after the store's sync()
      return ok_status();
    } catch (const SqlError& e) {
      sqlite3_exec(db.raw(), "ROLLBACK", nullptr, nullptr, nullptr);
      if (!command_failed || e.is_transient()) return sql_failure(e);  // BEGIN/COMMIT or I/O: the whole batch
      dropped[current] = true;
      log("error", "sqlite: operation " + std::to_string(current) + " of a batch failed and was dropped: " + e.what());
    }
  }
  TG_ASSERT(false && "apply: every command dropped and still failing");
}

}  // namespace tollgate::sqlite
