// tollgate ledger: the service — validate, group-commit, read, reap.
//
// Ledger is what the HTTP edge, the CLI's server and the tests call. It validates every command at
// the boundary (bad input: invalid_request, nothing reaches the store), fills in what the server
// decides (a new hold's id, the default TTL, the late-commit policy), and queues writes to the
// group committer. Reads go straight to the store. A background reaper expires overdue holds.
// The change feed's waiters (event_waiters.h) are woken after each durable batch.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/counters.h"
#include "core/thread_annotations.h"
#include "slices.h"
#include "core/validate.h"
#include "ledger/event_waiters.h"
#include "ledger/group_commit.h"
#include "ledger/key_directory.h"
#include "ledger/key_use.h"
#include "store/store.h"

namespace tollgate {

struct LedgerOptions {
  std::int64_t hold_ttl_ms_default = limits::kHoldTtlMsDefault;
  std::int64_t hold_ttl_ms_max = limits::kHoldTtlMsMaxDefault;
  LateCommitPolicy late_commit = LateCommitPolicy::charge;
  GroupCommitOptions group_commit;
  // The reaper runs every reaper_interval_ms; 0 starts no reaper thread (tests call reap_once()).
  std::int64_t reaper_interval_ms = limits::kReaperIntervalMsDefault;
  std::int64_t reaper_batch_max = limits::kReaperBatchMaxDefault;
  // Every audit_sample_interval_ms one account (in turn) is audited in the background: its events
  // folded and compared with its row and holds (design.md: invariants "sampled by the server").
  // 0: no sampler thread (tests call audit_sample_once()).
  std::int64_t audit_sample_interval_ms = 0;
  // The last use of API keys is written every this often (ledger/key_use.h); 0: no flusher thread
  // (tests call key_uses().flush(); stop() flushes either way).
  std::int64_t key_use_flush_interval_ms = limits::kKeyUseFlushIntervalMsDefault;
  // Seed of the hold-id generator; 0 seeds from the operating system.
  std::uint64_t id_seed = 0;
  // While a change-feed read waits (when_events_after), the store's last event id is read this
  // often: how soon a write of another instance on a shared database is seen.
  std::int64_t events_poll_interval_ms = limits::kEventsPollIntervalMsDefault;
  std::size_t event_waiters_max = limits::kEventWaitersMax;
  // Finished idempotency keys are deleted this long after they finished (coord/coord.h).
  std::int64_t idempotency_retention_ms = limits::kIdempotencyRetentionMsDefault;
  // The reaper's thread runs a bounded prune pass (finished idempotency keys past their retention,
  // idle shared rate-limit rows) this often; 0: never (tests call prune_once()).
  std::int64_t coord_prune_interval_ms = limits::kCoordPruneIntervalMsDefault;
};

// Checks options against each other; invalid_request names the bad one.
Status validate(const LedgerOptions& options);

// The ledger's own counters since start (the committer counts the rest: group_commit.h).
struct LedgerCounts {
  std::uint64_t holds_expired = 0;       // holds the reaper expired
  std::uint64_t lots_expired = 0;        // credit lots the reaper expired (a write may expire one first)
  std::uint64_t sampled_accounts = 0;    // accounts audited by the sampler
  std::uint64_t sampled_violations = 0;  // invariant violations the sampler found
  std::uint64_t audit_violations = 0;    // invariant violations audit() and audit_range() found
  std::uint64_t idempotency_keys_pruned = 0, rate_rows_pruned = 0;  // rows the prune pass deleted
};

// Where each counter of LedgerCounts is kept and shown (core/counters.h).
inline constexpr metrics::Family kInvariantViolationsFamily{
    "tollgate_invariant_violations_total", metrics::Type::counter,
    "Invariant violations found: by the server's sampled audit, or by GET /v1/audit."};
inline constexpr metrics::Family kCoordRowsPrunedFamily{
    "tollgate_coord_rows_pruned_total", metrics::Type::counter,
    "Rows the prune pass deleted: finished idempotency keys past their retention, idle shared rate-limit rows."};
inline constexpr auto kLedgerFields = std::to_array<metrics::Field<LedgerCounts>>({
    {&LedgerCounts::holds_expired, kHoldsEndedFamily, "outcome=\"expired\""},
    {&LedgerCounts::lots_expired,
     {"tollgate_lots_expired_total", metrics::Type::counter,
      "Credit lots whose unspent credits this instance's reaper expired (a write on the account may expire one first)."},
     ""},
    {&LedgerCounts::sampled_violations, kInvariantViolationsFamily, "source=\"sampled\""},
    {&LedgerCounts::audit_violations, kInvariantViolationsFamily, "source=\"audit\""},
    {&LedgerCounts::sampled_accounts,
     {"tollgate_audit_sampled_accounts_total", metrics::Type::counter, "Accounts audited by the server's sampler."},
     ""},
    {&LedgerCounts::idempotency_keys_pruned, kCoordRowsPrunedFamily, "kind=\"idempotency_key\""},
    {&LedgerCounts::rate_rows_pruned, kCoordRowsPrunedFamily, "kind=\"ratelimit\""},
});

// Whether this instance should be sent traffic (GET /readyz): the database answers and accepts
// writes, and the reaper ran within limits::kReaperIntervalsStaleMax reaper intervals (plus
// limits::kReaperStaleSlackMs). Each part says "ok" or why not.
struct Readiness {
  bool ready = false;
  std::string database;
  std::string reaper;
};

class Ledger {
 public:
  using Callback = GroupCommitter::Callback;

  // `store` and `clock` must outlive the ledger. `clock` times the reaper's runs (readiness).
  // The options must pass validate(options) (asserted).
  Ledger(Store& store, const Clock& clock, LedgerOptions options);
  ~Ledger();  // stop()

  // Validates `command`, completes it (hold id, default TTL, late-commit policy: the ledger's kinds
  // here, a slice's by its own `complete`) and queues it;
  // `done` is called once, after the batch holding it is durable (or at once when refused).
  void submit(Command command, Callback done);
  // The same, blocking the calling thread.
  CommandResult run(Command command);

  // Typed conveniences over run().
  Result<AccountOutcome> create_account(CreateAccountCommand command);
  Result<TransferOutcome> credit(CreditCommand command);
  Result<TransferOutcome> debit(DebitCommand command);
  Result<HoldOutcome> reserve(ReserveCommand command);
  Result<HoldOutcome> commit(CommitCommand command);
  Result<HoldOutcome> release(ReleaseCommand command);
  Result<HoldOutcome> extend(ExtendCommand command);
  Result<AccountOutcome> update_account(UpdateAccountCommand command);
  // Jobs (core/commands.h): the job row and its hold change in one batch.
  Result<JobOutcome> submit_job(SubmitJobCommand command);
  Result<JobOutcome> claim_job(ClaimJobCommand command);
  Result<JobOutcome> end_job(EndJobCommand command);
  // Coordination (coord/coord.h): locks, idempotency keys, shared rate limits — through the same
  // batches. An acquire of a lock held by another owner is refused in its batch too: the batch
  // writes nothing for it (3 bytes of WAL per refusal on PostgreSQL, the shared commit record), and
  // answering it from a read first was measured slower — one round trip per caller on a reader
  // connection instead of one statement per batch: 0.20x the refusals/s on PostgreSQL, 0.56x on
  // SQLite, and 0.37x / 0.77x the granted pairs/s (build/lock_bench, docs/internals/benchmarks.md).
  Result<coord::LockOutcome> lock(LockCommand command);
  Result<coord::IdempotencyOutcome> idempotency(IdempotencyCommand command);
  Result<coord::RateLimitOutcome> ratelimit(RateLimitCommand command);
  Result<coord::RowRead<coord::Lock>> get_lock(std::string_view key);
  // Locks by key (coord::CoordReads::list_locks): every key ever used, or only the held ones.
  Result<coord::LockPage> list_locks(const PageRequest& page, bool held_only);
  Result<coord::RowRead<coord::IdempotencyKey>> get_idempotency_key(std::string_view key);
  // One prune pass (at most limits::kIdempotencyPruneBatchMax rows of each kind).
  Result<coord::PruneOutcome> prune_once();

  // Webhook endpoints (webhooks/webhook_batch.h): created, changed, deleted and re-keyed through the
  // same batches (submit() the slice's commands); their reads (webhooks/webhook_reads.h), ids
  // checked here. The endpoints read carry their secrets: the edge never shows them.
  Result<webhooks::Endpoint> get_webhook_endpoint(std::string_view endpoint_id);
  Result<Page<webhooks::Endpoint>> list_webhook_endpoints(const PageRequest& page);
  Result<Page<webhooks::Delivery>> list_webhook_deliveries(std::string_view endpoint_id,
                                                           std::optional<webhooks::DeliveryStatus> status,
                                                           const PageRequest& page);
  // The webhook reads as they are, for the deliverer (webhooks/delivery_worker.h).
  webhooks::WebhookReads& webhook_reads() { return store_.webhooks(); }
  payments::PaymentReads& payment_reads() { return store_.payments(); }
  // The prices' reads (prices/price_reads.h): prices, their versions, what holds were priced at.
  prices::PriceReads& price_reads() { return store_.prices(); }

  // The reads of jobs (jobs/job_store.h); ids are checked here.
  Result<jobs::Job> get_job(std::string_view client_request_id);
  Result<Page<jobs::Job>> list_jobs(const jobs::JobQuery& query, const PageRequest& page);
  Result<std::vector<jobs::JobEntry>> job_history(std::string_view client_request_id);

  // Reads (the store's effective view).
  Result<Account> get_account(std::string_view account_id);
  Result<Hold> get_hold(std::string_view hold_id);
  // The paged lists and lookups (store/lists.h); ids are checked here (invalid_request naming the
  // parameter), pages by the store.
  Result<Page<Account>> list_accounts(const PageRequest& page);
  Result<Page<Hold>> list_holds(const HoldQuery& query, const PageRequest& page);
  Result<Page<KeySummary>> list_keys(std::optional<std::string_view> account_id, const PageRequest& page);
  Result<TransferRecord> get_transfer(std::string_view reference);
  // An account's credit lots in spending order (store/lists.h).
  Result<Page<lots::LotView>> list_lots(const LotQuery& query, const PageRequest& page);
  Result<EventPage> read_events(std::string_view account_id, std::int64_t after, std::int64_t limit);
  Result<AuditReport> audit(std::optional<std::string_view> account_id);
  // One part of a full audit: the accounts after `after` by id, at most `limit` (Store::audit_range).
  // A full audit is these parts in turn, from "" until has_more is false.
  Result<AuditPage> audit_range(std::string_view after, std::int64_t limit);
  // Invariant violations found by audit() and audit_range() (the sampler counts its own).
  std::uint64_t audit_violations() const { return counters_.get<&LedgerCounts::audit_violations>(); }
  // What the durable batches decided (holds ended, reservation conflicts), counted as answered.
  OutcomeCounts outcomes() const { return committer_.stats().outcomes; }
  // The ledger's own counters (each also readable alone above and below).
  LedgerCounts counters() const { return counters_.snapshot(); }

  // The change feed: every account's events after `after`, in commit order (Store::read_feed).
  Result<EventPage> read_feed(std::int64_t after, std::int64_t limit);
  // The feed's head: the largest event id read_feed() may answer now (0 when none; Store::last_event_id).
  Result<std::int64_t> last_event_id();
  // For a feed read that found nothing after `after` and may wait: calls `ready` once, as soon as
  // something newer is durable (also written by another instance), or at `deadline` — ok means
  // "read again now". Never blocks the calling thread; `ready` runs on the waiters' thread.
  void when_events_after(std::int64_t after, EventWaiters::TimePoint deadline, EventWaiters::Ready ready);
  // The same, blocking the calling thread (tests, the CLI): the next page after `after`, waiting up
  // to `wait_ms` for one that is not empty.
  Result<EventPage> read_feed_waiting(std::int64_t after, std::int64_t limit, std::int64_t wait_ms);
  // Answers every waiting feed read now (a server shutting down).
  void wake_event_waiters() { waiters_.wake_all(); }
  const EventWaiters& event_waiters() const { return waiters_; }

  // One reaper run: expires overdue holds in passes of reaper_batch_max until a pass finds fewer
  // (at most 100 passes). Returns how many holds it expired.
  Result<std::int64_t> reap_once();
  // When the reaper last finished a run (clock ms), or nullopt if it has not yet.
  std::optional<std::int64_t> reaper_last_run_ms() const;

  // Audits the next account in turn (by id, wrapping around). Returns the violations found (also
  // counted in sampled_violations()); an empty ledger audits nothing.
  Result<AuditReport> audit_sample_once();
  std::uint64_t sampled_accounts() const { return counters_.get<&LedgerCounts::sampled_accounts>(); }
  std::uint64_t sampled_violations() const { return counters_.get<&LedgerCounts::sampled_violations>(); }

  // Where the edge notes each use of an API key (written in the background, bounded: key_use.h).
  KeyUseRecorder& key_uses() { return key_uses_; }

  // Stops the reaper, writes the keys' last uses and what is queued, and refuses further writes
  // with `unavailable`.
  void stop();

  const LedgerOptions& options() const { return options_; }

  // Read roles for the server's wiring, metrics and workers (the store itself is not handed out:
  // every write goes through submit(), every read through a method that checks its input).
  // Figures from one snapshot of the store (metrics).
  Result<LedgerStats> stats();
  // The group committer's counters and its queue (metrics).
  GroupCommitStats write_stats() const { return committer_.stats(); }
  std::size_t write_queue_depth() const { return committer_.queue_depth(); }
  // Whether any admin key is stored (start-up generates one when none is configured).
  Result<bool> has_admin_key();
  // Where authentication looks keys up (key_directory.h); valid as long as the ledger.
  KeyDirectory& key_directory() { return keys_; }
  // Jobs not ended whose lease expired, oldest lease first, at most `limit` (1..1000): what
  // recovery claims (jobs/job_store.h).
  Result<std::vector<jobs::Job>> jobs_to_recover(std::int64_t limit);
  // Jobs pending and running (all instances'), from the index of unended jobs (metrics).
  Result<jobs::UnendedJobs> count_unended_jobs();
  // Readiness now: asks the database (ping) and reads the reaper's last run on the ledger's clock.
  Readiness readiness();

 private:
  // The store's key lookups, as the edge may see them.
  class StoreKeys final : public KeyDirectory {
   public:
    explicit StoreKeys(Store& store) : store_(store) {}
    Result<KeyLookup> find_key(std::string_view secret_sha256) override {
      return store_.find_key(secret_sha256);
    }

   private:
    Store& store_;
  };

  std::string next_hold_id_random();
  void reaper_loop();
  void sampler_loop();

  // Constant after construction.
  Store& store_;
  const Clock& clock_;
  const LedgerOptions options_;
  const ValidationLimits validation_;

  EventWaiters waiters_;  // before committer_, which wakes it
  GroupCommitter committer_;
  KeyUseRecorder key_uses_;  // writes through committer_
  StoreKeys keys_{store_};

  Mutex ids_mu_;
  std::mt19937_64 ids_ GUARDED_BY(ids_mu_);
  // What submit() fills into a slice's command (src/slices.h complete()); constant after construction.
  const batch::Completion completion_;

  std::atomic<std::int64_t> reaper_last_run_ms_{-1};
  Mutex reaper_mu_;
  CondVar reaper_wake_;
  bool reaper_stopping_ GUARDED_BY(reaper_mu_) = false;
  Mutex sample_mu_;
  std::string sample_cursor_ GUARDED_BY(sample_mu_);  // the last account sampled
  metrics::Counters<LedgerCounts, kLedgerFields> counters_;
  std::int64_t last_prune_ms_ = 0;  // the reaper thread's own

  std::once_flag stopped_;
  std::thread reaper_;  // last: started when everything above exists
  std::thread sampler_;
};

}  // namespace tollgate
