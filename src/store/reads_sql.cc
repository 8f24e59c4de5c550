// The statements of the shared reads (store/reads.h), written once: a dialect changes only how a
// parameter is named and the clauses that name a parameter a statement does not filter on.
//
// Every list reads limit + 1 rows in its order from an index, never sorting: accounts by their
// primary key; holds by seq (per account through holds_by_account, request_id through its unique
// index); keys through api_keys_newest_first / api_keys_by_account, a row-value range; jobs through
// jobs_by_account / jobs_by_status / jobs_by_account_status. One statement per combination of
// filters, so that every plan (PostgreSQL's generic plans too) can use its index.
#include <array>
#include <string>

#include "store/postgres/pg_coord.h"
#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_webhooks.h"
#include "store/reads.h"
#include "store/sqlite/sqlite_coord.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_webhooks.h"

namespace tollgate::reads {
namespace {

// The column lists of one dialect's row decoders (the same names; a dialect may cast).
struct Columns {
  const char* hold;
  const char* event;
  const char* key;
  const char* transfer;
  const char* job;
  const char* job_entry;
  const char* lock;
  const char* idempotency_key;
  const char* endpoint;
  const char* delivery;
  const char* lot;
};

class Writer {
 public:
  explicit Writer(Dialect dialect) : dialect_(dialect) {}
  Dialect dialect() const { return dialect_; }

  // Parameter n: ?n on SQLite; $n (with its type when given) on PostgreSQL.
  std::string p(int n, const char* type = nullptr) const {
    if (dialect_ == Dialect::sqlite) return "?" + std::to_string(n);
    std::string out = "$" + std::to_string(n);
    if (type != nullptr) out += std::string("::") + type;
    return out;
  }
  // A parameter the statement does not filter on: PostgreSQL prepares a fixed list of parameters
  // (`$n IS NULL OR true` is folded away by its planner); SQLite numbers them and needs nothing.
  std::string unused(int n, const char* type) const {
    if (dialect_ == Dialect::sqlite) return "";
    return " AND (" + p(n, type) + " IS NULL OR true)";
  }

 private:
  Dialect dialect_;
};

std::vector<std::string> holds_statements(const Writer& w, const Columns& c) {
  std::vector<std::string> out(kHoldQueryShapes);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const HoldQueryShape shape = HoldQueryShape::of(i);
    std::string sql = std::string("SELECT ") + c.hold + " FROM holds WHERE seq < " + w.p(5, "bigint");
    sql += shape.by_account ? " AND account_id = " + w.p(1, "text") : w.unused(1, "text");
    sql += shape.by_request ? " AND request_id = " + w.p(2, "text") : w.unused(2, "text");
    switch (shape.status) {
      case HoldStatusFilter::stored: sql += " AND status = " + w.p(4, "text") + w.unused(3, "bigint"); break;
      case HoldStatusFilter::live:
        sql += " AND status = 'active' AND expires_at_ms > " + w.p(3, "bigint") + w.unused(4, "text");
        break;
      case HoldStatusFilter::expired_or_overdue:
        sql += " AND (status = 'expired' OR (status = 'active' AND expires_at_ms <= " + w.p(3, "bigint") + "))" +
               w.unused(4, "text");
        break;
      case HoldStatusFilter::any: sql += w.unused(3, "bigint") + w.unused(4, "text"); break;
    }
    out[i] = sql + " ORDER BY seq DESC LIMIT " + w.p(6, "bigint");
  }
  return out;
}

std::vector<std::string> jobs_statements(const Writer& w, const Columns& c) {
  std::vector<std::string> out(4);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::string sql = std::string("SELECT ") + c.job + " FROM jobs WHERE hold_seq < " + w.p(3, "bigint");
    sql += (i & 1) != 0 ? " AND account_id = " + w.p(1, "text") : w.unused(1, "text");
    sql += (i & 2) != 0 ? " AND status = " + w.p(2, "text") : w.unused(2, "text");
    out[i] = sql + " ORDER BY hold_seq DESC LIMIT " + w.p(4);
  }
  return out;
}

// Lots in spending order: (priority, expires_at or never, seq) after the cursor's, of one account
// (through lots_of_account; an account's lots are few enough to order in memory).
void lot_statements(const Writer& w, const Columns& c, ReadSql& s) {
  s.lot_by_seq = std::string("SELECT ") + c.lot + " FROM lots WHERE seq = " + w.p(1, "bigint");
  s.lots_of_account = std::string("SELECT ") + c.lot + " FROM lots WHERE account_id = " + w.p(1) + " ORDER BY seq";
  s.active_hold_draws = "SELECT lots FROM holds WHERE account_id = " + w.p(1) + " AND status = 'active' AND lots IS NOT NULL";
  s.overdue_hold_draws = "SELECT lots FROM holds WHERE account_id = " + w.p(1) +
                         " AND status = 'active' AND expires_at_ms <= " + w.p(2, "bigint") + " AND lots IS NOT NULL";
  const std::string never = std::to_string(kLotNeverExpires);
  const std::string expires = "coalesce(expires_at_ms, " + never + ")";
  const std::string now = w.p(2, "bigint");
  const std::array<std::string, 4> filters = {
      "",
      " AND live = 1 AND " + expires + " > " + now,  // active
      " AND " + expires + " <= " + now,             // expired
      " AND live = 0 AND " + expires + " > " + now,  // spent
  };
  s.lots.clear();
  for (std::size_t i = 0; i < filters.size(); ++i) {
    std::string sql = std::string("SELECT ") + c.lot + " FROM lots WHERE account_id = " + w.p(1, "text") +
                      " AND (priority, " + expires + ", seq) > (" + w.p(3, "bigint") + ", " + w.p(4, "bigint") +
                      ", " + w.p(5, "bigint") + ")" + filters[i];
    if (i == 0) sql += w.unused(2, "bigint");
    s.lots.push_back(sql + " ORDER BY priority, " + expires + ", seq LIMIT " + w.p(6, "bigint"));
  }
}

void ledger_statements(const Writer& w, const Columns& c, ReadSql& s) {
  const std::string events = std::string("SELECT ") + c.event + " FROM events WHERE ";
  s.account_exists = "SELECT 1 FROM accounts WHERE account_id = " + w.p(1);
  s.account_ids_after =
      "SELECT account_id FROM accounts WHERE account_id > " + w.p(1) + " ORDER BY account_id LIMIT " + w.p(2);
  s.account_ids_all = "SELECT account_id FROM accounts ORDER BY account_id";
  s.events_after =
      events + "account_id = " + w.p(1) + " AND event_id > " + w.p(2) + " ORDER BY event_id LIMIT " + w.p(3);
  s.events_of_account = events + "account_id = " + w.p(1) + " ORDER BY event_id";
  s.active_hold_totals =
      "SELECT coalesce(sum(amount), 0), count(*) FROM holds WHERE account_id = " + w.p(1) + " AND status = 'active'";
  s.feed = events + "event_id > " + w.p(1) + " AND event_id <= " + w.p(2) + " ORDER BY event_id LIMIT " + w.p(3);
  s.key_by_secret = std::string("SELECT ") + c.key + " FROM api_keys WHERE secret_sha256 = " + w.p(1);
  s.live_hold_stats =
      "SELECT count(*), min(created_at_ms) FROM holds WHERE status = 'active' AND expires_at_ms > " + w.p(1);
  s.account_count = "SELECT count(*) FROM accounts";
  s.has_admin_key =
      "SELECT CASE WHEN EXISTS (SELECT 1 FROM api_keys WHERE key_id = '" + std::string(kGeneratedAdminKeyId) +
      "' AND account_id IS NULL AND revoked_at_ms IS NULL) THEN 1 ELSE 0 END";
  s.transfer = std::string("SELECT ") + c.transfer +
               " FROM transfers t JOIN events e ON e.event_id = t.event_id WHERE t.reference = " + w.p(1);
}

void list_statements(const Writer& w, const Columns& c, ReadSql& s) {
  s.holds = holds_statements(w, c);
  s.key_cursor = "SELECT account_id, created_at_ms FROM api_keys WHERE key_id = " + w.p(1);
  const std::string keys = "SELECT key_id, account_id, created_at_ms, last_used_at_ms, revoked_at_ms, scopes, expires_at_ms, name "
                           "FROM api_keys WHERE ";
  const std::string position = "(created_at_ms, key_id) < (" + w.p(2) + ", " + w.p(3) + ")";
  const std::string newest_first = " ORDER BY created_at_ms DESC, key_id DESC LIMIT " + w.p(4);
  s.keys_of_account = keys + "account_id = " + w.p(1) + " AND " + position + newest_first;
  s.keys_all = keys + position + w.unused(1, "text") + newest_first;
  s.job = std::string("SELECT ") + c.job + " FROM jobs WHERE client_request_id = " + w.p(1);
  s.jobs = jobs_statements(w, c);
  s.job_history = std::string("SELECT ") + c.job_entry + " FROM job_history WHERE client_request_id = " + w.p(1) +
                  " ORDER BY entry_id LIMIT " + w.p(2);
  s.jobs_to_recover = std::string("SELECT ") + c.job + " FROM jobs WHERE status IN ('pending', 'running') AND " +
                      "lease_expires_at_ms <= " + w.p(1) + " ORDER BY lease_expires_at_ms LIMIT " + w.p(2);
  s.unended_jobs = "SELECT status, count(*) FROM jobs WHERE status IN ('pending', 'running') GROUP BY status";
  s.lock = std::string("SELECT ") + c.lock + " FROM locks WHERE key = " + w.p(1);
  s.idempotency_key = std::string("SELECT ") + c.idempotency_key + " FROM idempotency_keys WHERE key = " + w.p(1);
  s.locks_after = std::string("SELECT ") + c.lock + " FROM locks WHERE key > " + w.p(1) + " AND (" +
                  w.p(2, "bigint") + " = 0 OR (owner IS NOT NULL AND expires_at_ms > " + w.p(3, "bigint") +
                  ")) ORDER BY key LIMIT " + w.p(4, "bigint");
  // Endpoints in the order they were made (at most limits::kWebhookEndpointsMax: a sort is cheap).
  s.webhook_endpoint = std::string("SELECT ") + c.endpoint + " FROM webhook_endpoints WHERE endpoint_id = " + w.p(1);
  s.webhook_endpoints = std::string("SELECT ") + c.endpoint + " FROM webhook_endpoints WHERE (created_at_ms, endpoint_id) > (" +
                        w.p(1, "bigint") + ", " + w.p(2, "text") + ") ORDER BY created_at_ms, endpoint_id LIMIT " +
                        w.p(3, "bigint");
  // Deliveries: by the primary key (endpoint_id, event_id), or by (endpoint_id, status, event_id).
  const std::string deliveries = std::string("SELECT ") + c.delivery + " FROM webhook_deliveries WHERE endpoint_id = ";
  s.webhook_delivery = deliveries + w.p(1) + " AND event_id = " + w.p(2, "bigint");
  s.webhook_deliveries = deliveries + w.p(1) + " AND event_id < " + w.p(2, "bigint") +
                         " ORDER BY event_id DESC LIMIT " + w.p(3, "bigint");
  s.webhook_deliveries_in_status = deliveries + w.p(1) + " AND status = " + w.p(2) + " AND event_id < " +
                                   w.p(3, "bigint") + " ORDER BY event_id DESC LIMIT " + w.p(4, "bigint");
  s.webhook_deliveries_due = std::string("SELECT ") + c.delivery +
                             " FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at_ms <= " +
                             w.p(1, "bigint") + " ORDER BY next_attempt_at_ms LIMIT " + w.p(2, "bigint");
  s.webhook_oldest_pending = "SELECT event_at_ms FROM webhook_deliveries WHERE endpoint_id = " + w.p(1) +
                             " AND status = 'pending' ORDER BY event_id LIMIT 1";
  // Payments: by the primary key, or by the provider's id through payments_by_provider_payment.
  const std::string payments = "SELECT payment_id, provider, provider_payment, account_id, credits, "
                               "refunded_credits, taken_back, created_at_ms, updated_at_ms FROM payments WHERE ";
  s.payment = payments + "payment_id = " + w.p(1);
  s.payment_by_provider = payments + "provider = " + w.p(1) + " AND provider_payment = " + w.p(2) +
                          " ORDER BY created_at_ms, payment_id LIMIT 1";
  lot_statements(w, c, s);
}

// Prices by their primary key (a feature), their versions through (feature, version), priced holds
// by their key (hold_seq): a page's holds in one statement, their seqs as one comma-separated text.
void price_statements(const Writer& w, ReadSql& s) {
  const std::string prices = "SELECT feature, credits_per_unit, version, updated_at_ms FROM prices WHERE ";
  s.price = prices + "feature = " + w.p(1);
  s.prices_after = prices + "feature > " + w.p(1) + " ORDER BY feature LIMIT " + w.p(2, "bigint");
  s.price_versions = "SELECT feature, credits_per_unit, version, created_at_ms FROM price_versions WHERE feature = " +
                     w.p(1) + " AND version < " + w.p(2, "bigint") + " ORDER BY version DESC LIMIT " +
                     w.p(3, "bigint");
  const std::string seqs = w.dialect() == Dialect::sqlite
                               ? "p.hold_seq IN (SELECT value FROM json_each('[' || ?1 || ']'))"
                               : "p.hold_seq = ANY(string_to_array($1::text, ',')::bigint[])";
  s.priced_holds = "SELECT p.hold_seq, h.request_id, h.hold_id, h.account_id, p.feature, p.quantity, p.unit_price, "
                   "p.price_version FROM priced_holds p JOIN holds h ON h.seq = p.hold_seq WHERE " + seqs;
}

ReadSql build(Dialect dialect, const Columns& columns) {
  const Writer w(dialect);
  ReadSql s;
  ledger_statements(w, columns, s);
  list_statements(w, columns, s);
  price_statements(w, s);
  return s;
}

}  // namespace

const ReadSql& read_sql(Dialect dialect) {
  static const ReadSql sqlite_sql =
      build(Dialect::sqlite, Columns{sqlite::kHoldColumns, sqlite::kEventColumns, sqlite::kKeyColumns,
                                     sqlite::kTransferColumns, sqlite::kJobColumns, sqlite::kJobEntryColumns,
                                     sqlite::kLockColumns, sqlite::kIdempotencyColumns,
                                     sqlite::kEndpointColumns, sqlite::kDeliveryColumns, sqlite::kLotColumns});
  static const ReadSql pg_sql = build(Dialect::postgres, Columns{pg::kHoldColumns, pg::kEventColumns, pg::kKeyColumns,
                                                                 pg::kTransferColumns, pg::kJobColumns,
                                                                 pg::kJobEntryColumns, pg::kLockColumns,
                                                                 pg::kIdempotencyColumns, pg::kEndpointColumns,
                                                                 pg::kDeliveryColumns, pg::kLotColumns});
  return dialect == Dialect::sqlite ? sqlite_sql : pg_sql;
}

}  // namespace tollgate::reads
