// tollgate store: the reads of every backend, written once — the ledger's reads (accounts, holds,
// events, the feed, the audit, keys, stats), the lists and their paging (store/lists.h), the jobs'
// reads (jobs/job_store.h), the coordination reads (coord/coord_reads.h) and the webhook endpoints'
// (webhooks/webhook_reads.h).
//
// A backend gives a small set of read primitives (ReadSource, ReadConn, ReadRow below): run one
// read in one snapshot with the store's clock; run one statement with bound values and hand each
// row to a callback; decode a row of the schema's column lists. Everything around them — the
// validation of limits and cursors, the cursor's position, the limit + 1 paging, the error codes and
// texts, the audit's checks — is here, once. The SQL is written once too (ReadSql): the texts of a
// dialect differ only by how they name a parameter (?1 or $1::type) and by the placeholder clauses
// that keep a PostgreSQL prepared statement's parameter list fixed.
//
// Contract: a ReadConn and its rows are valid inside ReadSource::run's body only; a body may run
// more than once (a backend may retry a read on a new connection: PostgreSQL after a connection
// lost while idle), so it keeps no effects but its answer. Database failures inside a body are
// the backend's exceptions; run turns them into the Error it answers.
//
// Thread safety: ReadSource::run may be called from any thread (each call leases its own reader
// connection); a ReadConn belongs to the one body it was given to. The read classes below hold no
// state but their source: any thread, each call answers from one snapshot.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "coord/coord_reads.h"
#include "core/model.h"
#include "core/result.h"
#include "jobs/job_store.h"
#include "store/lists.h"
#include "store/schema.h"
#include "store/store.h"
#include "payments/payment_reads.h"
#include "prices/price_reads.h"
#include "webhooks/webhook_reads.h"

namespace tollgate::reads {

// A bound value: SQL NULL, an integer or a text.
class SqlValue {
 public:
  SqlValue(std::int64_t v) : v_(v) {}                      // NOLINT(google-explicit-constructor)
  SqlValue(std::string_view v) : v_(std::string(v)) {}     // NOLINT(google-explicit-constructor)
  SqlValue(const std::string& v) : v_(v) {}                // NOLINT(google-explicit-constructor)
  SqlValue(const char* v) : v_(std::string(v)) {}          // NOLINT(google-explicit-constructor)
  SqlValue(const std::optional<std::string>& v) {          // NOLINT(google-explicit-constructor)
    if (v) v_ = *v;
  }
  bool is_null() const { return std::holds_alternative<std::monostate>(v_); }
  const std::int64_t* integer() const { return std::get_if<std::int64_t>(&v_); }
  const std::string* text() const { return std::get_if<std::string>(&v_); }

 private:
  std::variant<std::monostate, std::int64_t, std::string> v_;
};
using SqlValues = std::initializer_list<SqlValue>;

// The statements of the reads in one dialect. Built once per dialect (static: the addresses stay).
using Dialect = schema::Dialect;  // the one list of dialects (store/schema.h)
struct ReadSql {
  std::string account_exists;       // 1 account_id
  std::string account_ids_after;    // 1 after, 2 limit
  std::string account_ids_all;
  std::string events_after;         // 1 account_id, 2 after, 3 limit
  std::string events_of_account;    // 1 account_id (the audit's: all, oldest first)
  std::string active_hold_totals;   // 1 account_id → sum, count
  std::string feed;                 // 1 after, 2 last id shown, 3 limit
  std::string key_by_secret;        // 1 secret_sha256
  std::string live_hold_stats;      // 1 now_ms → count, min(created_at_ms)
  std::string account_count;
  std::string has_admin_key;        // → 1 or 0
  std::vector<std::string> holds;   // by HoldQueryShape::index(); 1 account, 2 request, 3 now, 4 status, 5 seq, 6 limit
  std::string key_cursor;           // 1 key_id → account_id, created_at_ms
  std::string keys_of_account;      // 1 account_id, 2 created_at_ms, 3 key_id, 4 limit
  std::string keys_all;             // the same, 1 unused
  std::string transfer;             // 1 reference
  std::string job;                  // 1 client_request_id
  std::vector<std::string> jobs;    // [by_account + 2 * by_status]; 1 account, 2 status, 3 hold_seq, 4 limit
  std::string job_history;          // 1 client_request_id, 2 limit
  std::string jobs_to_recover;      // 1 now_ms, 2 limit
  std::string unended_jobs;         // → status, count
  std::string lock;                 // 1 key
  std::string idempotency_key;      // 1 key
  std::string locks_after;          // 1 after, 2 held_only (0/1), 3 now_ms, 4 limit
  std::string webhook_endpoint;     // 1 endpoint_id (the columns endpoint_of() decodes)
  std::string webhook_endpoints;    // 1 created_at_ms, 2 endpoint_id (after them), 3 limit
  std::string webhook_delivery;     // 1 endpoint_id, 2 event_id (the columns delivery_of() decodes)
  std::string webhook_deliveries;   // 1 endpoint_id, 2 event_id (before it), 3 limit; newest first
  std::string webhook_deliveries_in_status;  // 1 endpoint_id, 2 status, 3 event_id (before it), 4 limit
  std::string webhook_deliveries_due;        // 1 now_ms, 2 limit
  std::string webhook_oldest_pending;        // 1 endpoint_id → event_at_ms
  std::string payment;                       // 1 payment_id (the columns payment_of() decodes)
  std::string payment_by_provider;           // 1 provider, 2 provider_payment; oldest first
  std::string price;                         // 1 feature (feature, credits_per_unit, version, updated_at_ms)
  std::string prices_after;                  // 1 feature (after it), 2 limit
  std::string price_versions;                // 1 feature, 2 version (before it), 3 limit; newest first
  std::string priced_holds;                  // 1 hold_seqs, comma-separated (kPricedHoldColumns)
  std::string lot_by_seq;                    // 1 seq (kLotColumns)
  std::string lots_of_account;               // 1 account_id: every lot, by seq
  std::string active_hold_draws;             // 1 account_id → lots of its active holds that drew any
  std::string overdue_hold_draws;            // 1 account_id, 2 now_ms → the same, of its overdue holds
  // An account's lots in spending order after a position, by status filter (none, then each
  // lots::LotStatus): 1 account_id, 2 now_ms, 3 priority, 4 expires_at_ms or kLotNeverExpires,
  // 5 seq (the position after which to read), 6 limit.
  std::vector<std::string> lots;
};
const ReadSql& read_sql(Dialect dialect);

// One row of a statement's answer: typed columns by index (from 0), and the schema's rows decoded
// from the column lists their dialect's rows file names (a value that no longer parses throws).
class ReadRow {
 public:
  virtual ~ReadRow() = default;
  virtual std::int64_t int64(int column) const = 0;
  virtual std::optional<std::int64_t> optional_int64(int column) const = 0;
  virtual std::string text(int column) const = 0;
  virtual std::optional<std::string> optional_text(int column) const = 0;

  virtual Hold hold() const = 0;                            // kHoldColumns
  virtual Event event() const = 0;                          // kEventColumns
  virtual ApiKey key() const = 0;                           // kKeyColumns
  virtual TransferRecord transfer() const = 0;              // kTransferColumns
  virtual jobs::Job job() const = 0;                        // kJobColumns
  virtual jobs::JobEntry job_entry() const = 0;             // kJobEntryColumns
  virtual coord::Lock lock() const = 0;                     // kLockColumns
  virtual coord::IdempotencyKey idempotency_key() const = 0;  // kIdempotencyColumns
  virtual Lot lot() const = 0;                              // kLotColumns
};

// One connection inside one read snapshot.
class ReadConn {
 public:
  virtual ~ReadConn() = default;
  // Runs `sql` (a text of ReadSql, whose address is stable: a backend may cache by it) with
  // `values` bound in order to parameters 1, 2, …; calls `on_row` for each row of the answer.
  virtual void each(const std::string& sql, SqlValues values, const std::function<void(const ReadRow&)>& on_row) = 0;
  // The account row as stored (no overdue adjustment), or nullopt.
  virtual std::optional<Account> account_row(std::string_view account_id) = 0;
  // Accounts as a reader sees them at now_ms (overdue holds count as available): the one named,
  // or at most `limit` after `after` in account_id order.
  virtual std::optional<Account> account_view(std::string_view account_id, std::int64_t now_ms) = 0;
  virtual std::vector<Account> account_views(std::string_view after, std::int64_t limit, std::int64_t now_ms) = 0;
  // The hold with exactly this id (as stored), or nullopt.
  virtual std::optional<Hold> hold_by_id(std::string_view hold_id) = 0;
};

// A backend's readers: runs `body(conn, now_ms)` in one read snapshot, now_ms on the store's clock
// read once. Answers the body's failure as an Error (no retry of the body's own errors).
class ReadSource {
 public:
  virtual ~ReadSource() = default;
  virtual const ReadSql& sql() const = 0;  // the statements of this source's dialect
  virtual Status run(const std::function<void(ReadConn&, std::int64_t now_ms)>& body) = 0;
};


// --- the reads ------------------------------------------------------------------------------------
// The ledger's reads of Store (store/store.h), each as documented there.
class LedgerReads {
 public:
  explicit LedgerReads(ReadSource& source) : source_(source) {}
  Result<Account> get_account(std::string_view account_id);
  Result<Hold> get_hold(std::string_view hold_id);
  Result<EventPage> read_events(std::string_view account_id, std::int64_t after, std::int64_t limit);
  // Events after `after` up to `last_shown` (a backend that shows only durable events bounds it).
  Result<EventPage> read_feed(std::int64_t after, std::int64_t limit, std::int64_t last_shown);
  Result<AuditReport> audit(std::optional<std::string_view> account_id);
  Result<AuditPage> audit_range(std::string_view after, std::int64_t limit);
  Result<KeyLookup> find_key(std::string_view secret_sha256);
  Result<LedgerStats> stats();
  Result<std::vector<std::string>> list_account_ids(std::string_view after, std::int64_t limit);
  Result<bool> has_admin_key();

 private:
  ReadSource& source_;
};

class Lists final : public ListReads {
 public:
  explicit Lists(ReadSource& source) : source_(source) {}
  Result<Page<Account>> list_accounts(const PageRequest& page) override;
  Result<Page<Hold>> list_holds(const HoldQuery& query, const PageRequest& page) override;
  Result<Page<KeySummary>> list_keys(std::optional<std::string_view> account_id, const PageRequest& page) override;
  Result<TransferRecord> get_transfer(std::string_view reference) override;
  Result<Page<lots::LotView>> list_lots(const LotQuery& query, const PageRequest& page) override;

 private:
  ReadSource& source_;
};

class JobReads final : public jobs::JobReads {
 public:
  explicit JobReads(ReadSource& source) : source_(source) {}
  Result<jobs::Job> get_job(std::string_view client_request_id) override;
  Result<Page<jobs::Job>> list_jobs(const jobs::JobQuery& query, const PageRequest& page) override;
  Result<std::vector<jobs::JobEntry>> job_history(std::string_view client_request_id) override;
  Result<std::vector<jobs::Job>> jobs_to_recover(std::int64_t limit) override;
  Result<jobs::UnendedJobs> count_unended() override;

 private:
  ReadSource& source_;
};

class CoordReads final : public coord::CoordReads {
 public:
  explicit CoordReads(ReadSource& source) : source_(source) {}
  Result<coord::RowRead<coord::Lock>> get_lock(std::string_view key) override;
  Result<coord::RowRead<coord::IdempotencyKey>> get_idempotency_key(std::string_view key) override;
  Result<coord::LockPage> list_locks(const PageRequest& page, bool held_only) override;

 private:
  ReadSource& source_;
};

class WebhookReads final : public webhooks::WebhookReads {
 public:
  explicit WebhookReads(ReadSource& source) : source_(source) {}
  Result<webhooks::Endpoint> get_endpoint(std::string_view endpoint_id) override;
  Result<Page<webhooks::Endpoint>> list_endpoints(const PageRequest& page) override;
  Result<Page<webhooks::Delivery>> list_deliveries(std::string_view endpoint_id,
                                                   std::optional<webhooks::DeliveryStatus> status,
                                                   const PageRequest& page) override;
  Result<std::vector<webhooks::Delivery>> due_deliveries(std::int64_t limit) override;
  Result<std::optional<std::int64_t>> oldest_pending_event_at(std::string_view endpoint_id) override;

 private:
  ReadSource& source_;
};

class PaymentReads final : public payments::PaymentReads {
 public:
  explicit PaymentReads(ReadSource& source) : source_(source) {}
  Result<payments::Payment> get_payment(std::string_view payment_id) override;
  Result<payments::Payment> find_payment(payments::Provider provider, std::string_view provider_payment) override;

 private:
  ReadSource& source_;
};

class PriceReads final : public prices::PriceReads {
 public:
  explicit PriceReads(ReadSource& source) : source_(source) {}
  Result<prices::Price> get_price(std::string_view feature) override;
  Result<Page<prices::Price>> list_prices(const PageRequest& page) override;
  Result<Page<prices::Price>> list_versions(std::string_view feature, const PageRequest& page) override;
  Result<std::map<std::int64_t, prices::PricedHold>> priced_holds(std::span<const std::int64_t> hold_seqs) override;

 private:
  ReadSource& source_;
};

}  // namespace tollgate::reads
