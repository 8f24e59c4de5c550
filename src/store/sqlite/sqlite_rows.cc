// Row mapping and small reads shared by the SQLite store's parts (see sqlite_rows.h).
#include "store/sqlite/sqlite_rows.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/hold_id.h"
#include "core/lots.h"
#include "core/result.h"
#include "core/rules.h"

namespace tollgate::sqlite {

// --- row mapping ----------------------------------------------------------------------------------
const char* const kHoldColumns =
    "hold_id, account_id, request_id, amount, committed_amount, status, late_outcome, created_at_ms, "
    "expires_at_ms, closed_at_ms, metadata, release_reason, refunded_amount, lots";

Hold read_hold(Stmt& s, int first) {
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
  h.release_reason = s.optional_text(first + 11);
  h.refunded_amount = s.int64(first + 12);
  auto draws = lots::parse_draws(s.optional_text(first + 13).value_or(""));
  if (!draws) throw SqlError(SQLITE_CORRUPT, "hold " + h.hold_id + " has unreadable lots");
  h.lots = std::move(*draws);
  return h;
}

const char* const kEventColumns =
    "event_id, account_id, type, amount, hold_id, job_id, reference, at_ms, available_after, reserved_after, "
    "used_after, reason, overdraft_limit, max_active_holds, frozen, expires_at_ms, low_balance_threshold, "
    "expired_after, lot_seq";
#define TG_EVENT_COLUMNS_OF_E                                                                             \
  "e.event_id, e.account_id, e.type, e.amount, e.hold_id, e.job_id, e.reference, e.at_ms, e.available_after, " \
  "e.reserved_after, e.used_after, e.reason, e.overdraft_limit, e.max_active_holds, e.frozen, e.expires_at_ms, " \
  "e.low_balance_threshold, e.expired_after, e.lot_seq"
const char* const kEventColumnsOfE = TG_EVENT_COLUMNS_OF_E;

Event read_event(Stmt& s, int first) {
  Event e;
  e.event_id = s.int64(first + 0);
  e.account_id = s.text(first + 1);
  const auto type = parse_event_type(s.text(first + 2));
  if (!type) throw SqlError(SQLITE_CORRUPT, "event " + std::to_string(e.event_id) + " has an unknown type");
  e.type = *type;
  e.amount = s.int64(first + 3);
  e.hold_id = s.optional_text(first + 4);
  e.job_id = s.optional_text(first + 5);
  e.reference = s.optional_text(first + 6);
  e.at_ms = s.int64(first + 7);
  e.available_after = s.int64(first + 8);
  e.reserved_after = s.int64(first + 9);
  e.used_after = s.int64(first + 10);
  e.reason = s.optional_text(first + 11);
  if (const auto frozen = s.optional_int64(first + 14)) {  // account_updated: the settings after it
    const auto overdraft_limit = s.optional_int64(first + 12);
    if (!overdraft_limit) throw SqlError(SQLITE_CORRUPT, "event " + std::to_string(e.event_id) + " has no overdraft_limit");
    e.settings = AccountSettings{*overdraft_limit, s.optional_int64(first + 13), *frozen != 0,
                                 s.optional_int64(first + 16)};
  }
  e.expires_at_ms = s.optional_int64(first + 15);  // extended: the hold's new deadline
  e.expired_after = s.int64(first + 17);
  e.lot_seq = s.optional_int64(first + 18);
  return e;
}

const char* const kLotColumns =
    "seq, account_id, reference, category, priority, expires_at_ms, amount, available, reserved, used, expired, "
    "created_at_ms";

Lot read_lot(Stmt& s) {
  Lot lot;
  lot.seq = s.int64(0);
  lot.account_id = s.text(1);
  lot.reference = s.optional_text(2);
  const auto category = parse_lot_category(s.text(3));
  if (!category) throw SqlError(SQLITE_CORRUPT, "lot " + lot_id(lot.seq) + " has an unknown category");
  lot.terms = LotTerms{s.optional_int64(5), s.int64(4), *category};
  lot.amount = s.int64(6);
  lot.available = s.int64(7);
  lot.reserved = s.int64(8);
  lot.used = s.int64(9);
  lot.expired = s.int64(10);
  lot.created_at_ms = s.int64(11);
  return lot;
}

const char* const kJobColumns =
    "client_request_id, account_id, cost, provider, input, status, hold_id, attempts, result, error, charged, "
    "created_at_ms, updated_at_ms, lease_owner, lease_expires_at_ms";
const char* const kJobEntryColumns = "client_request_id, at_ms, kind, attempt, detail";

jobs::Job read_job(Stmt& s) {
  jobs::Job j;
  j.client_request_id = s.text(0);
  j.account_id = s.text(1);
  j.cost = s.int64(2);
  j.provider = s.text(3);
  j.input_json = s.text(4);
  const auto status = jobs::parse_job_status(s.text(5));
  if (!status) throw SqlError(SQLITE_CORRUPT, "job " + j.client_request_id + " has an unknown status");
  j.status = *status;
  j.hold_id = s.text(6);
  j.attempts = static_cast<int>(s.int64(7));
  j.result_json = s.optional_text(8);
  j.error = s.optional_text(9);
  j.charged = s.int64(10) != 0;
  j.created_at_ms = s.int64(11);
  j.updated_at_ms = s.int64(12);
  j.lease_owner = s.optional_text(13);
  j.lease_expires_at_ms = s.optional_int64(14);
  return j;
}

jobs::JobEntry read_job_entry(Stmt& s) {
  jobs::JobEntry e;
  e.client_request_id = s.text(0);
  e.at_ms = s.int64(1);
  e.kind = s.text(2);
  if (auto attempt = s.optional_int64(3)) e.attempt = static_cast<int>(*attempt);
  e.detail = s.text(4);
  return e;
}

std::optional<jobs::Job> job_row(Conn& db, std::string_view client_request_id) {
  static const std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE client_request_id = ?1";
  Query q(db.stmt(sql.c_str()), client_request_id);
  if (!q.step()) return std::nullopt;
  return read_job(q.row());
}

std::optional<Account> account_row(Conn& db, std::string_view account_id) {
  Query q(db.stmt("SELECT account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds, "
                  "active_holds, created_at_ms, frozen, low_balance_threshold, frozen_reason, expired FROM accounts "
                  "WHERE account_id = ?"),
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
  a.frozen = s.int64(9) != 0;
  a.low_balance_threshold = s.optional_int64(10);
  a.frozen_reason = s.optional_text(11);
  a.balances.expired = s.int64(12);
  return a;
}

// The account as a reader sees it at now_ms: overdue holds already count as available.
std::optional<Account> account_view(Conn& db, std::string_view account_id, std::int64_t now_ms) {
  auto a = account_row(db, account_id);
  if (!a) return a;
  // One pass over the account's active holds: the overdue ones' count and sum, the oldest live one.
  Query q(db.stmt("SELECT count(*) FILTER (WHERE expires_at_ms <= ?2), "
                  "coalesce(sum(amount) FILTER (WHERE expires_at_ms <= ?2), 0), "
                  "min(created_at_ms) FILTER (WHERE expires_at_ms > ?2) "
                  "FROM holds WHERE account_id = ?1 AND status = 'active'"),
          account_id, now_ms);
  TG_ASSERT(q.step());
  a = rules::account_view(*a, q->int64(0), q->int64(1));
  if (auto oldest = q->optional_int64(2)) a->oldest_active_hold_age_ms = std::max<std::int64_t>(0, now_ms - *oldest);
  // Overdue lots: their available credits, and what overdue holds drew from them, are expired.
  Query lots(db.stmt("SELECT seq, available FROM lots WHERE account_id = ?1 AND live = 1 AND expires_at_ms <= ?2"),
             account_id, now_ms);
  std::vector<std::int64_t> overdue_lots;
  std::int64_t overdue_available = 0;
  while (lots.step()) {
    overdue_lots.push_back(lots->int64(0));
    overdue_available += lots->int64(1);
  }
  std::int64_t from_overdue = 0;
  if (!overdue_lots.empty()) {
    Query held(db.stmt("SELECT lots FROM holds WHERE account_id = ?1 AND status = 'active' AND expires_at_ms <= ?2 "
                       "AND lots IS NOT NULL"),
               account_id, now_ms);
    while (held.step()) {
      const auto draws = lots::parse_draws(held->text(0));
      if (!draws) throw SqlError(SQLITE_CORRUPT, "a hold of account " + std::string(account_id) + " has unreadable lots");
      for (const LotDraw& d : *draws) {
        if (std::find(overdue_lots.begin(), overdue_lots.end(), d.lot_seq) != overdue_lots.end()) from_overdue += d.amount;
      }
    }
  }
  return lots::account_view(std::move(*a), overdue_available, from_overdue);
}

std::optional<Hold> hold_by_id(Conn& db, std::string_view hold_id) {
  static const std::string sql = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE seq = ?1 AND hold_id = ?2";
  const auto seq = hold_id_seq(hold_id);
  if (!seq) return std::nullopt;
  Query q(db.stmt(sql.c_str()), *seq, hold_id);
  if (!q.step()) return std::nullopt;
  return read_hold(q.row());
}

const char* const kKeyColumns = "key_id, account_id, secret_sha256, created_at_ms, revoked_at_ms, last_used_at_ms, scopes, expires_at_ms, name";

ApiKey read_key(Stmt& s) {
  ApiKey k{s.text(0), s.optional_text(1), s.text(2), s.int64(3), s.optional_int64(4), s.optional_int64(5)};
  const auto scopes = stored_scopes(s.optional_text(6), k.account_id.has_value());
  if (!scopes) throw SqlError(SQLITE_CORRUPT, "key " + k.key_id + " has unknown scopes");
  k.scopes = *scopes;
  k.expires_at_ms = s.optional_int64(7);
  k.name = s.optional_text(8);
  return k;
}

const char* const kTransferColumns = "t.reference, t.account_id, t.kind, t.amount, t.reason, " TG_EVENT_COLUMNS_OF_E;

std::pair<Transfer, Event> read_transfer(Stmt& s) {
  Transfer t;
  t.reference = s.text(0);
  t.account_id = s.text(1);
  const auto kind = parse_event_type(s.text(2));
  if (kind != EventType::credited && kind != EventType::debited) {
    throw SqlError(SQLITE_CORRUPT, "transfer " + t.reference + " has an unknown kind");
  }
  t.kind = *kind;
  t.amount = s.int64(3);
  t.reason = s.text(4);
  Event e = read_event(s, 5);
  t.event_id = e.event_id;
  return {std::move(t), std::move(e)};
}

}  // namespace tollgate::sqlite
