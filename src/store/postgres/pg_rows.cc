// Row mapping and small reads shared by the PostgreSQL store's parts (see pg_rows.h).
#include "store/postgres/pg_rows.h"

#include <algorithm>

#include "core/hold_id.h"
#include "core/lots.h"
#include "core/result.h"
#include "core/rules.h"

namespace tollgate::pg {

const char* const kNowSql = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

// --- row mapping ----------------------------------------------------------------------------------
const char* const kHoldColumns =
    "hold_id, account_id, request_id, amount, committed_amount, status, late_outcome, created_at_ms, "
    "expires_at_ms, closed_at_ms, metadata, release_reason, refunded_amount, lots";

Hold read_hold(const Rows& r, int row, int first) {
  Hold h;
  h.hold_id = r.text(row, first + 0);
  h.account_id = r.text(row, first + 1);
  h.request_id = r.text(row, first + 2);
  h.amount = r.int64(row, first + 3);
  h.committed_amount = r.int64(row, first + 4);
  const auto status = parse_hold_status(r.text(row, first + 5));
  const auto late = parse_late_outcome(r.optional_text(row, first + 6).value_or(""));
  if (!status || !late) throw PgError("XX000", false, "hold " + h.hold_id + " has an unknown status");
  h.status = *status;
  h.late_outcome = *late;
  h.created_at_ms = r.int64(row, first + 7);
  h.expires_at_ms = r.int64(row, first + 8);
  h.closed_at_ms = r.optional_int64(row, first + 9);
  h.metadata_json = r.text(row, first + 10);
  h.release_reason = r.optional_text(row, first + 11);
  h.refunded_amount = r.int64(row, first + 12);
  auto draws = lots::parse_draws(r.optional_text(row, first + 13).value_or(""));
  if (!draws) throw PgError("XX000", false, "hold " + h.hold_id + " has unreadable lots");
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

Event read_event(const Rows& r, int row, int first) {
  Event e;
  e.event_id = r.int64(row, first + 0);
  e.account_id = r.text(row, first + 1);
  const auto type = parse_event_type(r.text(row, first + 2));
  if (!type) throw PgError("XX000", false, "event " + std::to_string(e.event_id) + " has an unknown type");
  e.type = *type;
  e.amount = r.int64(row, first + 3);
  e.hold_id = r.optional_text(row, first + 4);
  e.job_id = r.optional_text(row, first + 5);
  e.reference = r.optional_text(row, first + 6);
  e.at_ms = r.int64(row, first + 7);
  e.available_after = r.int64(row, first + 8);
  e.reserved_after = r.int64(row, first + 9);
  e.used_after = r.int64(row, first + 10);
  e.reason = r.optional_text(row, first + 11);
  if (const auto frozen = r.optional_text(row, first + 14)) {  // account_updated: the settings after it
    const auto overdraft_limit = r.optional_int64(row, first + 12);
    if (!overdraft_limit) throw PgError("XX000", false, "event " + std::to_string(e.event_id) + " has no overdraft_limit");
    e.settings = AccountSettings{*overdraft_limit, r.optional_int64(row, first + 13), *frozen == "t",
                                 r.optional_int64(row, first + 16)};
  }
  e.expires_at_ms = r.optional_int64(row, first + 15);  // extended: the hold's new deadline
  e.expired_after = r.int64(row, first + 17);
  e.lot_seq = r.optional_int64(row, first + 18);
  return e;
}

const char* const kAccountColumns =
    "account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds, active_holds, created_at_ms, "
    "frozen, low_balance_threshold, frozen_reason, expired";
constexpr int kAccountColumnCount = 13;  // read_account() reads columns 0..12; a view's own follow

Account read_account(const Rows& r, int row) {
  Account a;
  a.account_id = r.text(row, 0);
  a.balances = Balances{r.int64(row, 1), r.int64(row, 2), r.int64(row, 3), r.int64(row, 4)};
  a.overdraft_limit = r.int64(row, 5);
  a.max_active_holds = r.optional_int64(row, 6);
  a.active_holds = r.int64(row, 7);
  a.created_at_ms = r.int64(row, 8);
  a.frozen = r.text(row, 9) == "t";
  a.low_balance_threshold = r.optional_int64(row, 10);
  a.frozen_reason = r.optional_text(row, 11);
  a.balances.expired = r.int64(row, 12);
  return a;
}

std::optional<Account> account_row(Conn& db, std::string_view account_id, bool for_update) {
  static const std::string plain = std::string("SELECT ") + kAccountColumns + " FROM accounts WHERE account_id = $1";
  static const std::string locked = plain + " FOR UPDATE";
  Rows r = db.query(for_update ? locked : plain, account_id);
  if (r.empty()) return std::nullopt;
  return read_account(r, 0);
}

// The accounts as a reader sees them at $2: the row, its overdue holds' count and sum, its oldest live hold.
const std::string kAccountViewSql = std::string("SELECT ") + kAccountColumns +
                                    ", o.overdue_count, o.overdue_sum, o.oldest_live, ol.overdue_lots, hl.held_in_overdue FROM accounts a, LATERAL ("
                                    "SELECT count(*) FILTER (WHERE expires_at_ms <= $2) AS overdue_count, "
                                    "coalesce(sum(amount) FILTER (WHERE expires_at_ms <= $2), 0) AS overdue_sum, "
                                    "min(created_at_ms) FILTER (WHERE expires_at_ms > $2) AS oldest_live "
                                    "FROM holds h WHERE h.account_id = a.account_id AND h.status = 'active') o, LATERAL ("
                                    "SELECT coalesce(sum(l.available), 0) AS overdue_lots FROM lots l "
                                    "WHERE l.account_id = a.account_id AND l.live = 1 AND l.available > 0 AND l.expires_at_ms <= $2) ol, "
                                    "LATERAL (SELECT coalesce(sum(split_part(d, ':', 2)::bigint), 0) AS held_in_overdue "
                                    "FROM holds h2 CROSS JOIN LATERAL unnest(string_to_array(h2.lots, ',')) d "
                                    "JOIN lots l2 ON l2.seq = split_part(d, ':', 1)::bigint "
                                    "WHERE h2.account_id = a.account_id AND h2.status = 'active' AND h2.expires_at_ms <= $2 "
                                    "AND h2.lots IS NOT NULL AND l2.expires_at_ms <= $2) hl ";

Account read_account_view(const Rows& r, int row, std::int64_t now_ms) {
  Account a = rules::account_view(read_account(r, row), r.int64(row, kAccountColumnCount),
                                  r.int64(row, kAccountColumnCount + 1));
  if (auto oldest = r.optional_int64(row, kAccountColumnCount + 2)) a.oldest_active_hold_age_ms = std::max<std::int64_t>(0, now_ms - *oldest);
  return lots::account_view(std::move(a), r.int64(row, kAccountColumnCount + 3), r.int64(row, kAccountColumnCount + 4));
}

// The account as a reader sees it at now_ms: overdue holds already count as available.
std::optional<Account> account_view(Conn& db, std::string_view account_id, std::int64_t now_ms) {
  static const std::string sql = kAccountViewSql + "WHERE a.account_id = $1";
  Rows r = db.query(sql, account_id, now_ms);
  if (r.empty()) return std::nullopt;
  return read_account_view(r, 0, now_ms);
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

const char* const kLotColumns =
    "seq, account_id, reference, category, priority, expires_at_ms, amount, available, reserved, used, expired, "
    "created_at_ms";

Lot read_lot(const Rows& r, int row) {
  Lot lot;
  lot.seq = r.int64(row, 0);
  lot.account_id = r.text(row, 1);
  lot.reference = r.optional_text(row, 2);
  const auto category = parse_lot_category(r.text(row, 3));
  if (!category) throw PgError("XX000", false, "lot " + lot_id(lot.seq) + " has an unknown category");
  lot.terms = LotTerms{r.optional_int64(row, 5), r.int64(row, 4), *category};
  lot.amount = r.int64(row, 6);
  lot.available = r.int64(row, 7);
  lot.reserved = r.int64(row, 8);
  lot.used = r.int64(row, 9);
  lot.expired = r.int64(row, 10);
  lot.created_at_ms = r.int64(row, 11);
  return lot;
}

const char* const kKeyColumns = "key_id, account_id, secret_sha256, created_at_ms, revoked_at_ms, last_used_at_ms, scopes, expires_at_ms, name";

ApiKey read_key(const Rows& r, int row) {
  ApiKey k{r.text(row, 0),  r.optional_text(row, 1),  r.text(row, 2),
           r.int64(row, 3), r.optional_int64(row, 4), r.optional_int64(row, 5)};
  const auto scopes = stored_scopes(r.optional_text(row, 6), k.account_id.has_value());
  if (!scopes) throw PgError("XX000", false, "key " + k.key_id + " has unknown scopes");
  k.scopes = *scopes;
  k.expires_at_ms = r.optional_int64(row, 7);
  k.name = r.optional_text(row, 8);
  return k;
}

const char* const kJobColumns =
    "client_request_id, account_id, cost, provider, input, status, hold_id, attempts, result, error, charged, "
    "created_at_ms, updated_at_ms, lease_owner, lease_expires_at_ms";
const char* const kJobEntryColumns = "client_request_id, at_ms, kind, attempt, detail";

jobs::Job read_job(const Rows& r, int row) {
  jobs::Job j;
  j.client_request_id = r.text(row, 0);
  j.account_id = r.text(row, 1);
  j.cost = r.int64(row, 2);
  j.provider = r.text(row, 3);
  j.input_json = r.text(row, 4);
  const auto status = jobs::parse_job_status(r.text(row, 5));
  if (!status) throw PgError("XX000", false, "job " + j.client_request_id + " has an unknown status");
  j.status = *status;
  j.hold_id = r.text(row, 6);
  j.attempts = static_cast<int>(r.int64(row, 7));
  j.result_json = r.optional_text(row, 8);
  j.error = r.optional_text(row, 9);
  j.charged = r.text(row, 10) == "t";
  j.created_at_ms = r.int64(row, 11);
  j.updated_at_ms = r.int64(row, 12);
  j.lease_owner = r.optional_text(row, 13);
  j.lease_expires_at_ms = r.optional_int64(row, 14);
  return j;
}

jobs::JobEntry read_job_entry(const Rows& r, int row) {
  jobs::JobEntry e;
  e.client_request_id = r.text(row, 0);
  e.at_ms = r.int64(row, 1);
  e.kind = r.text(row, 2);
  if (auto attempt = r.optional_int64(row, 3)) e.attempt = static_cast<int>(*attempt);
  e.detail = r.text(row, 4);
  return e;
}

const char* const kTransferColumns = "t.reference, t.account_id, t.kind, t.amount, t.reason, " TG_EVENT_COLUMNS_OF_E;

std::pair<Transfer, Event> read_transfer(const Rows& r, int row) {
  Transfer t;
  t.reference = r.text(row, 0);
  t.account_id = r.text(row, 1);
  const auto kind = parse_event_type(r.text(row, 2));
  if (kind != EventType::credited && kind != EventType::debited) {
    throw PgError("XX000", false, "transfer " + t.reference + " has an unknown kind");
  }
  t.kind = *kind;
  t.amount = r.int64(row, 3);
  t.reason = r.text(row, 4);
  Event e = read_event(r, row, 5);
  t.event_id = e.event_id;
  return {std::move(t), std::move(e)};
}

namespace {

void append_quoted(std::string& out, std::string_view item) {
  out += '"';
  for (char c : item) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

}  // namespace

std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    append_quoted(out, items[i]);
  }
  return out + "}";
}

std::string text_array(const std::vector<std::optional<std::string>>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    if (items[i]) {
      append_quoted(out, *items[i]);
    } else {
      out += "NULL";
    }
  }
  return out + "}";
}

std::string int_array(const std::vector<std::int64_t>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(items[i]);
  }
  return out + "}";
}

std::string int_array(const std::vector<std::optional<std::int64_t>>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += items[i] ? std::to_string(*items[i]) : std::string("NULL");
  }
  return out + "}";
}

std::string bool_array(const std::vector<bool>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) out += std::string(i > 0 ? "," : "") + (items[i] ? "t" : "f");
  return out + "}";
}

std::string bool_array(const std::vector<std::optional<bool>>& items) {
  std::string out = "{";
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += std::string(i > 0 ? "," : "") + (!items[i] ? "NULL" : *items[i] ? "t" : "f");
  }
  return out + "}";
}

Error pg_failure(const PgError& e) {
  if (e.is_disk_full()) {
    return Error::make(Code::storage_full, std::string("the database's disk is full; nothing was written: ") + e.what());
  }
  return Error::make(e.is_transient() ? Code::unavailable : Code::internal, std::string("database: ") + e.what());
}

}  // namespace tollgate::pg
