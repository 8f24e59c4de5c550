// The batch path of the SQLite store (see sqlite_write.h and store/batch_runner.h).
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/hold_id.h"
#include "core/lots.h"
#include "store/sqlite/sqlite_slices.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {
namespace {

// A row the batch read changed before its write: impossible while the writer holds the database.
[[noreturn]] void changed_behind_the_lock(const std::string& what) {
  throw SqlError(SQLITE_CORRUPT, what + " changed behind the batch's lock");
}

std::vector<Hold> holds_of(Query& q) {
  std::vector<Hold> out;
  while (q.step()) out.push_back(read_hold(q.row()));
  return out;
}

}  // namespace

void expect_one_change(Conn& db, const std::string& what) {
  if (db.changes() != 1) changed_behind_the_lock(what);
}

void bind_draws(Stmt& s, int index, const std::vector<LotDraw>& draws) {
  if (draws.empty()) {
    s.bind_null(index);
  } else {
    s.bind(index, lots::draws_text(draws));
  }
}

void bind_event_details(Stmt& s, int first, const Event& e) {
  s.bind(first, e.reason);
  if (e.settings) {
    s.bind(first + 1, e.settings->overdraft_limit);
    s.bind(first + 2, e.settings->max_active_holds);
    s.bind(first + 3, std::int64_t{e.settings->frozen});
    s.bind(first + 5, e.settings->low_balance_threshold);
  } else {
    s.bind_null(first + 1);
    s.bind_null(first + 2);
    s.bind_null(first + 3);
    s.bind_null(first + 5);
  }
  s.bind(first + 4, e.expires_at_ms);
}

Error sql_failure(const SqlError& e) {
  if (e.is_disk_full()) {
    return Error::make(Code::storage_full, std::string("the database's disk is full; nothing was written: ") + e.what());
  }
  return Error::make(e.is_transient() ? Code::unavailable : Code::internal, std::string("database: ") + e.what());
}

batch::Snapshot SqliteBatchIo::begin_and_load(const batch::Keys& keys) {
  db_.exec("BEGIN IMMEDIATE");  // the one writer: every row below is the batch's own until COMMIT
  batch::Snapshot s;
  s.now_ms = clock_.now_ms();

  static const std::string by_request = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE request_id = ?1";
  static const std::string overdue_of = std::string("SELECT ") + kHoldColumns +
                                        " FROM holds WHERE account_id = ?1 AND status = 'active' AND "
                                        "expires_at_ms <= ?2 ORDER BY expires_at_ms, seq LIMIT ?3";
  static const std::string overdue_all = std::string("SELECT ") + kHoldColumns +
                                         " FROM holds WHERE status = 'active' AND expires_at_ms <= ?1 "
                                         "ORDER BY expires_at_ms, seq LIMIT ?2";
  static const std::string transfer = std::string("SELECT ") + kTransferColumns +
                                      " FROM transfers t JOIN events e ON e.event_id = t.event_id WHERE t.reference = ?1";
  static const std::string key = std::string("SELECT ") + kKeyColumns + " FROM api_keys WHERE key_id = ?1";

  // Holds first: the accounts of the holds named are accounts the batch may change.
  std::vector<std::string> accounts = keys.accounts;
  for (const std::string& id : keys.hold_ids) {
    if (auto h = hold_by_id(db_, id)) {
      accounts.push_back(h->account_id);
      s.holds.push_back(std::move(*h));
    }
  }
  for (const std::string& request_id : keys.request_ids) {
    Query q(db_.stmt(by_request.c_str()), request_id);
    if (q.step()) s.holds.push_back(read_hold(q.row()));
  }
  std::sort(accounts.begin(), accounts.end());
  accounts.erase(std::unique(accounts.begin(), accounts.end()), accounts.end());
  std::unordered_set<std::string> loaded;  // accounts that exist, in s.accounts
  std::int64_t overdue_loaded = 0;
  // Each account the batch names may expire its overdue holds (a refused reservation or debit).
  for (const std::string& id : accounts) {
    auto row = account_row(db_, id);
    if (!row) continue;
    loaded.insert(id);
    s.accounts.push_back(std::move(*row));
    Query q(db_.stmt(overdue_of.c_str()), id, s.now_ms, keys.overdue_per_account_max());
    for (Hold& h : holds_of(q)) {
      ++overdue_loaded;
      s.holds.push_back(std::move(h));
    }
  }
  // The reaper's pass: the oldest overdue holds of any account, and their accounts.
  if (keys.overdue_max > 0) {
    Query q(db_.stmt(overdue_all.c_str()), s.now_ms, keys.reaper_load_max(overdue_loaded));
    for (Hold& h : holds_of(q)) {
      if (loaded.insert(h.account_id).second) {
        auto row = account_row(db_, h.account_id);
        if (!row) throw SqlError(SQLITE_CORRUPT, "hold " + h.hold_id + " has no account");
        s.accounts.push_back(std::move(*row));
      }
      s.holds.push_back(std::move(h));
    }
  }
  load_lots(keys, s, loaded);
  for (const std::string& reference : keys.references) {
    Query q(db_.stmt(transfer.c_str()), reference);
    if (q.step()) s.transfers.push_back(read_transfer(q.row()));
  }
  for (const std::string& id : keys.view_accounts) {
    if (loaded.count(id) == 0) continue;
    batch::AccountView v;
    v.account_id = id;
    {
      Query q(db_.stmt("SELECT count(*), coalesce(sum(amount), 0) FROM holds "
                       "WHERE account_id = ?1 AND status = 'active' AND expires_at_ms <= ?2"),
              id, s.now_ms);
      TG_ASSERT(q.step());
      v.overdue_count = q->int64(0);
      v.overdue_sum = q->int64(1);
    }
    Query live(db_.stmt("SELECT created_at_ms, seq FROM holds WHERE account_id = ?1 AND status = 'active' "
                        "AND expires_at_ms > ?2 ORDER BY created_at_ms, seq LIMIT ?3"),
               id, s.now_ms, keys.oldest_live_needed());
    while (live.step()) v.oldest_live.emplace_back(live->int64(0), live->int64(1));
    s.views.push_back(std::move(v));
  }
  for (const std::string& id : keys.key_ids) {
    Query q(db_.stmt(key.c_str()), id);
    if (q.step()) s.keys.push_back(read_key(q.row()));
  }
  // Each slice's rows, by its loader for this dialect (sqlite_slices.h), in registration order.
  batch::for_each_slice(keys, s, [&](const auto& k, auto& rows) { load_rows(db_, k, s.now_ms, rows); });
  if (keys.new_holds_max > 0) {
    // The one writer: the next sequence numbers are the ones after the largest (one B-tree descent).
    Query q(db_.stmt("SELECT coalesce(max(seq), 0) FROM holds"));
    TG_ASSERT(q.step());
    const std::int64_t last = q->int64(0);
    for (std::int64_t i = 1; i <= keys.new_holds_max; ++i) s.new_hold_seqs.push_back(last + i);
  }
  if (keys.new_lots_max > 0) {
    Query q(db_.stmt("SELECT coalesce(max(seq), 0) FROM lots"));
    TG_ASSERT(q.step());
    const std::int64_t last = q->int64(0);
    for (std::int64_t i = 1; i <= keys.new_lots_max; ++i) s.new_lot_seqs.push_back(last + i);
  }
  return s;
}

void SqliteBatchIo::load_lots(const batch::Keys& keys, batch::Snapshot& s, std::unordered_set<std::string>& loaded) {
  static const std::string live = std::string("SELECT ") + kLotColumns +
                                  " FROM lots WHERE account_id = ?1 AND live = 1";
  static const std::string by_seq = std::string("SELECT ") + kLotColumns + " FROM lots WHERE seq = ?1";
  // The reaper's pass: the accounts of the oldest overdue lots are locked (the one writer) and loaded.
  if (keys.overdue_max > 0) {
    Query q(db_.stmt("SELECT account_id FROM lots WHERE live = 1 AND expires_at_ms IS NOT NULL AND "
                     "expires_at_ms <= ?1 AND available > 0 ORDER BY expires_at_ms, seq LIMIT ?2"),
            s.now_ms, keys.overdue_max);
    while (q.step()) {
      std::string id = q->text(0);
      if (!loaded.insert(id).second) continue;
      auto row = account_row(db_, id);
      if (!row) throw SqlError(SQLITE_CORRUPT, "a lot of account " + id + " has no account");
      s.accounts.push_back(std::move(*row));
    }
  }
  for (const Account& a : s.accounts) {
    Query q(db_.stmt(live.c_str()), a.account_id);
    while (q.step()) s.lots.push_back(read_lot(q.row()));
  }
  // What the loaded holds drew, for a refund (it gives back to a spent lot too).
  if (!keys.refunds) return;
  for (const Hold& h : s.holds) {
    if (loaded.count(h.account_id) == 0) continue;  // a hold the batch only answers (a reserve's replay)
    for (const LotDraw& d : h.lots) {
      Query q(db_.stmt(by_seq.c_str()), d.lot_seq);
      if (!q.step()) throw SqlError(SQLITE_CORRUPT, "hold " + h.hold_id + " drew from a lot that does not exist");
      s.lots.push_back(read_lot(q.row()));
    }
  }
}

std::vector<std::int64_t> SqliteBatchIo::write_and_commit(const batch::Effects& e) {
  for (const Account& a : e.new_accounts) {
    Query q(db_.stmt("INSERT INTO accounts (account_id, available, reserved, used, purchased, overdraft_limit, "
                     "max_active_holds, active_holds, created_at_ms, frozen, low_balance_threshold, frozen_reason, "
                     "expired) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"),
            a.account_id, a.balances.available, a.balances.reserved, a.balances.used, a.balances.purchased,
            a.overdraft_limit, a.max_active_holds, a.active_holds, a.created_at_ms, std::int64_t{a.frozen},
            a.low_balance_threshold, a.frozen_reason, a.balances.expired);
    q.step();
  }
  for (const auto& [before, after] : e.changed_accounts) {
    const Balances& b = before.balances;
    const Balances& n = after.balances;
    Query q(db_.stmt("UPDATE accounts SET available = ?2, reserved = ?3, used = ?4, purchased = ?5, "
                     "active_holds = ?6, overdraft_limit = ?7, max_active_holds = ?8, frozen = ?14, "
                     "low_balance_threshold = ?15, frozen_reason = ?16, expired = ?17 "
                     "WHERE account_id = ?1 AND available = ?9 AND reserved = ?10 AND used = ?11 AND purchased = ?12 "
                     "AND active_holds = ?13 AND expired = ?18"),
            after.account_id, n.available, n.reserved, n.used, n.purchased, after.active_holds,
            after.overdraft_limit, after.max_active_holds, b.available, b.reserved, b.used, b.purchased,
            before.active_holds, std::int64_t{after.frozen}, after.low_balance_threshold, after.frozen_reason,
            n.expired, b.expired);
    q.step();
    expect_one_change(db_, "account " + after.account_id);
  }
  insert_rows(db_,
              "INSERT INTO holds (seq, hold_id, account_id, request_id, amount, committed_amount, status, "
              "late_outcome, created_at_ms, expires_at_ms, closed_at_ms, metadata, release_reason, lots)",
              14, e.new_holds, [](Stmt& s, int i, const Hold& h) {
                const auto seq = hold_id_seq(h.hold_id);
                TG_ASSERT(seq.has_value());
                TG_ASSERT(h.refunded_amount == 0);  // a new hold has charged nothing (the column's default)
                s.bind(i, *seq);
                s.bind(i + 1, h.hold_id);
                s.bind(i + 2, h.account_id);
                s.bind(i + 3, h.request_id);
                s.bind(i + 4, h.amount);
                s.bind(i + 5, h.committed_amount);
                s.bind(i + 6, hold_status_name(h.status));
                if (h.late_outcome == LateOutcome::none) {
                  s.bind_null(i + 7);
                } else {
                  s.bind(i + 7, late_outcome_name(h.late_outcome));
                }
                s.bind(i + 8, h.created_at_ms);
                s.bind(i + 9, h.expires_at_ms);
                s.bind(i + 10, h.closed_at_ms);
                s.bind(i + 11, h.metadata_json);
                s.bind(i + 12, h.release_reason);
                bind_draws(s, i + 13, h.lots);
              });
  for (const auto& [before, after] : e.changed_holds) {
    const auto seq = hold_id_seq(after.hold_id);
    TG_ASSERT(seq.has_value());
    Query q(db_.stmt("UPDATE holds SET status = ?3, committed_amount = ?4, late_outcome = nullif(?5, ''), "
                     "expires_at_ms = ?6, closed_at_ms = ?7, release_reason = ?12, refunded_amount = ?13, "
                     "lots = nullif(?15, '') "
                     "WHERE seq = ?1 AND hold_id = ?2 AND status = ?8 AND committed_amount = ?9 "
                     "AND coalesce(late_outcome, '') = ?10 AND expires_at_ms = ?11 AND refunded_amount = ?14"),
            *seq, after.hold_id, hold_status_name(after.status), after.committed_amount,
            late_outcome_name(after.late_outcome), after.expires_at_ms, after.closed_at_ms,
            hold_status_name(before.status), before.committed_amount, late_outcome_name(before.late_outcome),
            before.expires_at_ms, after.release_reason, after.refunded_amount, before.refunded_amount,
            lots::draws_text(after.lots));
    q.step();
    expect_one_change(db_, "hold " + after.hold_id);
  }
  std::vector<std::int64_t> ids;
  ids.reserve(e.events.size());
  if (!e.events.empty()) {
    // The one writer: ids continue after the largest, in the batch's order (commit order).
    Query last(db_.stmt("SELECT coalesce(max(event_id), 0) FROM events"));
    TG_ASSERT(last.step());
    const std::int64_t first = last->int64(0) + 1;
    for (std::size_t i = 0; i < e.events.size(); ++i) ids.push_back(first + static_cast<std::int64_t>(i));
    insert_rows(db_,
                "INSERT INTO events (event_id, account_id, type, amount, hold_id, job_id, reference, at_ms, "
                "available_after, reserved_after, used_after, reason, overdraft_limit, max_active_holds, frozen, "
                "expires_at_ms, low_balance_threshold, expired_after, lot_seq)",
                19, e.events, [&, index = std::size_t{0}](Stmt& s, int i, const Event& ev) mutable {
                  s.bind(i, ids[index++]);
                  s.bind(i + 1, ev.account_id);
                  s.bind(i + 2, event_type_name(ev.type));
                  s.bind(i + 3, ev.amount);
                  s.bind(i + 4, ev.hold_id);
                  s.bind(i + 5, ev.job_id);
                  s.bind(i + 6, ev.reference);
                  s.bind(i + 7, ev.at_ms);
                  s.bind(i + 8, ev.available_after);
                  s.bind(i + 9, ev.reserved_after);
                  s.bind(i + 10, ev.used_after);
                  bind_event_details(s, i + 11, ev);
                  s.bind(i + 17, ev.expired_after);
                  s.bind(i + 18, ev.lot_seq);
                });
  }
  for (const auto& [t, event_index] : e.transfers) {
    Query q(db_.stmt("INSERT INTO transfers (reference, account_id, kind, amount, reason, event_id) "
                     "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
            t.reference, t.account_id, event_type_name(t.kind), t.amount, t.reason, ids.at(event_index));
    q.step();
  }
  for (const ApiKey& k : e.new_keys) {
    Query q(db_.stmt("INSERT INTO api_keys (key_id, account_id, secret_sha256, created_at_ms, revoked_at_ms, "
                     "last_used_at_ms, scopes, expires_at_ms, name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"),
            k.key_id, k.account_id, k.secret_sha256, k.created_at_ms, k.revoked_at_ms, k.last_used_at_ms,
            scopes_text(k.scopes), k.expires_at_ms, k.name);
    q.step();
  }
  for (const auto& [before, after] : e.changed_keys) {
    // A key changes when revoked or used: its id, account, secret, creation, scopes, expiry and name
    // never change.
    TG_ASSERT(before.key_id == after.key_id && before.account_id == after.account_id &&
              before.secret_sha256 == after.secret_sha256 && before.created_at_ms == after.created_at_ms &&
              before.scopes == after.scopes && before.expires_at_ms == after.expires_at_ms && before.name == after.name);
    Query q(db_.stmt("UPDATE api_keys SET revoked_at_ms = ?2, last_used_at_ms = ?3 "
                     "WHERE key_id = ?1 AND revoked_at_ms IS ?4 AND last_used_at_ms IS ?5"),
            after.key_id, after.revoked_at_ms, after.last_used_at_ms, before.revoked_at_ms, before.last_used_at_ms);
    q.step();
    expect_one_change(db_, "key " + after.key_id);
  }
  write_lots(e);
  // Each slice's rows, by its writer for this dialect (sqlite_slices.h), in registration order.
  batch::for_each_slice(e, [&](const auto& effects) { write_rows(db_, effects); });
  db_.exec("COMMIT");  // durable once the store's sync() returns (synchronous=NORMAL)
  if (!ids.empty()) last_event_id_ = std::max(last_event_id_, ids.back());
  return ids;
}

void SqliteBatchIo::write_lots(const batch::Effects& e) {
  insert_rows(db_,
              "INSERT INTO lots (seq, account_id, reference, category, priority, expires_at_ms, amount, available, "
              "reserved, used, expired, created_at_ms, live)",
              13, e.new_lots, [](Stmt& s, int i, const Lot& lot) {
                s.bind(i, lot.seq);
                s.bind(i + 1, lot.account_id);
                s.bind(i + 2, lot.reference);
                s.bind(i + 3, lot_category_name(lot.terms.category));
                s.bind(i + 4, lot.terms.priority);
                s.bind(i + 5, lot.terms.expires_at_ms);
                s.bind(i + 6, lot.amount);
                s.bind(i + 7, lot.available);
                s.bind(i + 8, lot.reserved);
                s.bind(i + 9, lot.used);
                s.bind(i + 10, lot.expired);
                s.bind(i + 11, lot.created_at_ms);
                s.bind(i + 12, std::int64_t{lot_is_live(lot)});
              });
  for (const auto& [before, after] : e.changed_lots) {
    // A lot's balances change; its account, reference, terms and creation never do.
    TG_ASSERT(before.seq == after.seq && before.account_id == after.account_id && before.terms == after.terms);
    // `live` is SET only when it changes: SQLite rewrites the entries of an index whose key or WHERE
    // names a SET column, and lots_live and lots_overdue name only `live` (schema 16).
    // (The same eleven parameters in both; the second reads `live` from the balances it sets.)
    const char* sql = lot_is_live(after) == lot_is_live(before)
                          ? "UPDATE lots SET amount = ?2, available = ?3, reserved = ?4, used = ?5, expired = ?6 "
                            "WHERE seq = ?1 AND amount = ?7 AND available = ?8 AND reserved = ?9 AND used = ?10 "
                            "AND expired = ?11"
                          : "UPDATE lots SET amount = ?2, available = ?3, reserved = ?4, used = ?5, expired = ?6, "
                            "live = (?3 > 0 OR ?4 > 0) WHERE seq = ?1 AND amount = ?7 AND available = ?8 AND "
                            "reserved = ?9 AND used = ?10 AND expired = ?11";
    Query q(db_.stmt(sql), after.seq, after.amount, after.available, after.reserved, after.used, after.expired,
            before.amount, before.available, before.reserved, before.used, before.expired);
    q.step();
    expect_one_change(db_, "lot " + lot_id(after.seq));
  }
}

void SqliteBatchIo::rollback() noexcept {
  if (!sqlite3_get_autocommit(db_.raw())) sqlite3_exec(db_.raw(), "ROLLBACK", nullptr, nullptr, nullptr);
}

FailureKind SqliteBatchIo::classify(const std::exception& failure) const {
  const auto* e = dynamic_cast<const SqlError*>(&failure);
  // The one writer never loses a race; busy, I/O and a full disk may pass.
  return e && e->is_transient() ? FailureKind::transient : FailureKind::permanent;
}

Error SqliteBatchIo::to_error(const std::exception& failure) const {
  if (const auto* e = dynamic_cast<const SqlError*>(&failure)) return sql_failure(*e);
  return Error::make(Code::internal, std::string("store: ") + failure.what());
}

}  // namespace tollgate::sqlite
