// tollgate store: the one interface every storage backend implements.
//
// A Store keeps accounts, holds, credits/debits and the append-only event log durably. Writes come
// in batches (group commit): apply() takes commands in order, decides each with the effects of the
// ones before it visible, and commits all of them in ONE transaction; sync() then makes every
// committed batch durable with one flush, and nothing may be acknowledged before it returned.
// A command that is refused (insufficient credits, unknown hold, …) answers its error and changes
// nothing; it does not undo the others in its batch.
//
// Rules every implementation follows (checked by tests/store/conformance and the differential test):
//   - a batch is decided in memory under an exclusive lock on every account row it may change
//     (core/batch.h; store/batch_runner.h runs it the same way for every backend) — as safe as one
//     conditional write per command, since nobody else can change the row in between;
//   - a state change and its event are written in the same transaction;
//   - event_id increases strictly with commit order, over all accounts and every instance (the change
//     feed relies on it: a reader that sees event N committed sees every event below N);
//   - reads show an active hold past its deadline as expired (and its amount as available), whether
//     or not the reaper has run;
//   - time is the store's clock (now_ms): injected for SQLite, the database's for a shared database.
//
// Thread safety: apply() must be called by one thread at a time per Store (the group committer's
// writer); sync() by one thread at a time, concurrently with apply() (the group committer's syncer
// flushes batch k while the writer applies batch k+1). Every read may be called from any thread,
// concurrently with both.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "slices.h"
#include "core/model.h"
#include "core/result.h"
#include "store/lists.h"
#include "coord/coord_reads.h"
#include "jobs/job_store.h"
#include "payments/payment_reads.h"
#include "prices/price_reads.h"
#include "webhooks/webhook_reads.h"

namespace tollgate {

struct EventPage {
  std::vector<Event> events;
  std::int64_t next_after = 0;  // pass as `after` to read on; equals `after` when nothing was read
};

// Figures for metrics and readiness, from one snapshot.
struct LedgerStats {
  std::int64_t active_holds = 0;                         // not yet overdue
  std::optional<std::int64_t> oldest_active_hold_age_ms;  // unset when there is none
  std::int64_t accounts = 0;
};

struct AuditViolation {
  std::string account_id;
  std::string message;
};

struct AuditReport {
  std::int64_t accounts_checked = 0;
  std::vector<AuditViolation> violations;
};

// One part of a full audit (Store::audit_range).
struct AuditPage {
  AuditReport report;
  std::string last_account_id;  // the last account checked: the next part's `after` ("" when none was)
  bool has_more = false;        // the part was full: accounts after last_account_id may remain
};

class Store {
 public:
  virtual ~Store() = default;

  // Applies `commands` in order in one transaction and commits it; `results` gets one entry per
  // command. The commit is visible to reads at once but durable only once a later sync() returned.
  // Returns an error (unavailable, internal) only when the transaction as a whole could not commit:
  // then nothing of the batch happened and `results` must be ignored.
  virtual Status apply(std::span<const Command> commands, std::vector<CommandResult>& results) = 0;
  // Makes every batch whose apply() returned before this call durable (one flush for all of them).
  // An error (unavailable) means durability is unknown: the store refuses every later write, since a
  // failed flush may have dropped data the page cache still shows, until it is opened again.
  virtual Status sync() = 0;

  // Reads. Each answers from one consistent snapshot.
  virtual Result<Account> get_account(std::string_view account_id) = 0;
  virtual Result<Hold> get_hold(std::string_view hold_id) = 0;
  // Events of one account with event_id > after, oldest first, at most `limit`.
  // not_found if the account does not exist.
  virtual Result<EventPage> read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) = 0;
  // The change feed: events of every account with event_id > after, in event_id order (= commit
  // order), at most `limit` (1..limits::kEventsPageMax). Only events that are durable and can never
  // be joined by a lower id later, so a follower that resumes from next_after misses nothing and
  // sees nothing twice.
  virtual Result<EventPage> read_feed(std::int64_t after, std::int64_t limit) = 0;
  // The largest event_id read_feed() may answer now (0 when there is none): cheap, for waiters.
  virtual Result<std::int64_t> last_event_id() = 0;
  // Recomputes every account (or one) from its events and compares it with its row and its holds.
  virtual Result<AuditReport> audit(std::optional<std::string_view> account_id) = 0;
  // The same for the accounts whose id is greater than `after`, in id order, at most `limit`
  // (1..limits::kHoldsPageMax), in one snapshot: a full audit in parts that each take a bounded time.
  virtual Result<AuditPage> audit_range(std::string_view after, std::int64_t limit) = 0;
  // The paged lists and lookups (store/lists.h), a role of the same store: valid as long as it.
  virtual ListReads& lists() = 0;
  // The reads of jobs (jobs/job_store.h), a role of the same store: valid as long as it.
  virtual jobs::JobReads& jobs() = 0;
  // The reads of lock and idempotency-key rows (coord/coord_reads.h), a role of the same store.
  virtual coord::CoordReads& coord() = 0;
  // The reads of webhook endpoints (webhooks/webhook_reads.h), a role of the same store.
  virtual webhooks::WebhookReads& webhooks() = 0;
  // The payments' reads (payments/payment_reads.h).
  virtual payments::PaymentReads& payments() = 0;
  // The prices' reads (prices/price_reads.h).
  virtual prices::PriceReads& prices() = 0;

  virtual Result<LedgerStats> stats() = 0;
  // Account ids greater than `after`, in order, at most `limit` (1..limits::kHoldsPageMax).
  virtual Result<std::vector<std::string>> list_account_ids(std::string_view after, std::int64_t limit) = 0;

  // The API key whose secret hashes to `secret_sha256` (revoked ones too), or none; and the read's
  // time (the database's clock on PostgreSQL).
  virtual Result<KeyLookup> find_key(std::string_view secret_sha256) = 0;
  // Whether the generated admin key (kGeneratedAdminKeyId) is stored and not revoked (a first start
  // generates it when no admin key is configured).
  virtual Result<bool> has_admin_key() = 0;

  // The database answers, its schema is the one this binary expects, and writes are possible:
  // after a failed flush (storage_failed) a store is not ready until it is opened again.
  virtual Status ping() = 0;
  // The store's notion of now (ms since the epoch): every expiry decision uses it.
  virtual std::int64_t now_ms() = 0;
};

}  // namespace tollgate
