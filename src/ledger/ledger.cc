#include "ledger/ledger.h"

#include "core/checked.h"
#include "core/limits.h"
#include "core/log.h"

#include <openssl/rand.h>

#include <cstdio>

namespace tollgate {
namespace {

template <typename T>
Result<T> as(CommandResult r) {
  if (!r) return r.error();
  auto* v = std::get_if<T>(&r.value());
  TG_ASSERT(v != nullptr);  // each command answers its own outcome type
  return std::move(*v);
}

// The random parts that must not be guessed (batch::Completion::random_bytes): the OS CSPRNG.
std::string secure_random_bytes(std::size_t n) {
  std::string out(n, '\0');
  TG_ASSERT(RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) == 1);
  return out;
}

std::uint64_t seed_from(std::uint64_t seed) {
  if (seed != 0) return seed;
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

Status validate(const LedgerOptions& o) {
  if (o.hold_ttl_ms_max < limits::kHoldTtlMsMin || o.hold_ttl_ms_max > limits::kHoldTtlMsMax) {
    return invalid("hold_ttl_ms_max must be from 1 to " + std::to_string(limits::kHoldTtlMsMax));
  }
  if (o.hold_ttl_ms_default < limits::kHoldTtlMsMin || o.hold_ttl_ms_default > o.hold_ttl_ms_max) {
    return invalid("hold_ttl_ms_default must be from 1 to hold_ttl_ms_max (" + std::to_string(o.hold_ttl_ms_max) + ")");
  }
  if (o.reaper_interval_ms < 0 || o.reaper_interval_ms > limits::kReaperIntervalMsMax) {
    return invalid("reaper_interval_ms must be from 0 to " + std::to_string(limits::kReaperIntervalMsMax));
  }
  if (o.audit_sample_interval_ms < 0) return invalid("audit_sample_interval_ms must be 0 or more");
  if (o.idempotency_retention_ms < 1 || o.idempotency_retention_ms > limits::kIdempotencyRetentionMsMax) {
    return invalid("idempotency_retention_ms must be from 1 to " + std::to_string(limits::kIdempotencyRetentionMsMax));
  }
  if (o.coord_prune_interval_ms < 0) return invalid("coord_prune_interval_ms must be 0 or more");
  if (o.key_use_flush_interval_ms < 0) return invalid("key_use_flush_interval_ms must be 0 or more");
  if (o.reaper_batch_max < 1 || o.reaper_batch_max > limits::kReaperBatchMax) {
    return invalid("reaper_batch_max must be from 1 to " + std::to_string(limits::kReaperBatchMax));
  }
  if (o.group_commit.batch_max < 1 || o.group_commit.queue_max < o.group_commit.batch_max) {
    return invalid("the write queue must hold at least one batch");
  }
  if (o.events_poll_interval_ms < 1 || o.events_poll_interval_ms > limits::kEventsPollIntervalMsMax) {
    return invalid("events_poll_interval_ms must be from 1 to " + std::to_string(limits::kEventsPollIntervalMsMax));
  }
  if (o.event_waiters_max < 1 || o.event_waiters_max > limits::kEventWaitersMax) {
    return invalid("event_waiters_max must be from 1 to " + std::to_string(limits::kEventWaitersMax));
  }
  return ok_status();
}

Ledger::Ledger(Store& store, const Clock& clock, LedgerOptions options)
    : store_(store),
      clock_(clock),
      options_(options),
      validation_{options.hold_ttl_ms_max},
      waiters_(store, std::chrono::milliseconds(options.events_poll_interval_ms), options.event_waiters_max),
      committer_(store, options.group_commit, [this] { waiters_.notify_committed(); }),
      key_uses_(*this, clock, options.key_use_flush_interval_ms),
      ids_(seed_from(options.id_seed)),
      completion_{options.hold_ttl_ms_default, options.late_commit, [this] { return next_hold_id_random(); },
                  &secure_random_bytes} {
  TG_ASSERT(validate(options_).ok());
  if (options_.reaper_interval_ms > 0) reaper_ = std::thread([this] { reaper_loop(); });
  if (options_.audit_sample_interval_ms > 0) sampler_ = std::thread([this] { sampler_loop(); });
}

Ledger::~Ledger() { stop(); }

void Ledger::stop() {
  std::call_once(stopped_, [this] {
    key_uses_.stop();  // its last write goes through the committer, still running
    {
      MutexLock lock(reaper_mu_);
      reaper_stopping_ = true;
    }
    reaper_wake_.notify_all();
    if (reaper_.joinable()) reaper_.join();
    if (sampler_.joinable()) sampler_.join();
    committer_.stop();
    waiters_.stop();
  });
}

std::string Ledger::next_hold_id_random() {
  std::uint64_t random;
  {
    MutexLock lock(ids_mu_);
    random = ids_();
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(random));
  return buf;
}

void Ledger::submit(Command command, Callback done) {
  if (auto s = validate(command, validation_); !s) {
    done(s.error());
    return;
  }
  if (auto* r = std::get_if<ReserveCommand>(&command)) {
    if (!r->ttl_ms) r->ttl_ms = options_.hold_ttl_ms_default;
    r->hold_id_random = next_hold_id_random();
  } else if (auto* c = std::get_if<CommitCommand>(&command)) {
    c->late_commit = options_.late_commit;
  } else {
    complete(command, completion_);  // a slice's kind: what it needs of the configuration
  }
  committer_.submit(std::move(command), std::move(done));
}

CommandResult Ledger::run(Command command) {
  return wait_for_result([&](Callback done) { submit(std::move(command), std::move(done)); });
}

Result<AccountOutcome> Ledger::create_account(CreateAccountCommand c) { return as<AccountOutcome>(run(std::move(c))); }
Result<TransferOutcome> Ledger::credit(CreditCommand c) { return as<TransferOutcome>(run(std::move(c))); }
Result<TransferOutcome> Ledger::debit(DebitCommand c) { return as<TransferOutcome>(run(std::move(c))); }
Result<HoldOutcome> Ledger::reserve(ReserveCommand c) { return as<HoldOutcome>(run(std::move(c))); }
Result<HoldOutcome> Ledger::commit(CommitCommand c) { return as<HoldOutcome>(run(std::move(c))); }
Result<HoldOutcome> Ledger::release(ReleaseCommand c) { return as<HoldOutcome>(run(std::move(c))); }
Result<HoldOutcome> Ledger::extend(ExtendCommand c) { return as<HoldOutcome>(run(std::move(c))); }
Result<AccountOutcome> Ledger::update_account(UpdateAccountCommand c) { return as<AccountOutcome>(run(std::move(c))); }

Result<JobOutcome> Ledger::submit_job(SubmitJobCommand c) { return as<JobOutcome>(run(std::move(c))); }
Result<JobOutcome> Ledger::claim_job(ClaimJobCommand c) { return as<JobOutcome>(run(std::move(c))); }
Result<JobOutcome> Ledger::end_job(EndJobCommand c) { return as<JobOutcome>(run(std::move(c))); }

Result<jobs::Job> Ledger::get_job(std::string_view client_request_id) {
  if (auto s = check_id(client_request_id, "client_request_id"); !s) return s.error();
  return store_.jobs().get_job(client_request_id);
}

Result<Page<jobs::Job>> Ledger::list_jobs(const jobs::JobQuery& query, const PageRequest& page) {
  if (query.account_id) {
    if (auto s = check_id(*query.account_id, "account_id"); !s) return s.error();
  }
  if (page.starting_after) {
    if (auto s = check_id(*page.starting_after, "starting_after"); !s) return s.error();
  }
  return store_.jobs().list_jobs(query, page);
}

Result<std::vector<jobs::JobEntry>> Ledger::job_history(std::string_view client_request_id) {
  if (auto s = check_id(client_request_id, "client_request_id"); !s) return s.error();
  return store_.jobs().job_history(client_request_id);
}

Result<Account> Ledger::get_account(std::string_view account_id) {
  if (auto s = check_id(account_id, "account_id"); !s) return s.error();
  return store_.get_account(account_id);
}

Result<Hold> Ledger::get_hold(std::string_view hold_id) {
  if (auto s = check_id(hold_id, "hold_id"); !s) return s.error();
  return store_.get_hold(hold_id);
}

Result<Page<Account>> Ledger::list_accounts(const PageRequest& page) {
  if (page.starting_after) {
    if (auto s = check_id(*page.starting_after, "starting_after"); !s) return s.error();
  }
  return store_.lists().list_accounts(page);
}

Result<Page<Hold>> Ledger::list_holds(const HoldQuery& query, const PageRequest& page) {
  if (query.account_id) {
    if (auto s = check_id(*query.account_id, "account_id"); !s) return s.error();
  }
  if (query.request_id) {
    if (auto s = check_id(*query.request_id, "request_id"); !s) return s.error();
  }
  if (page.starting_after) {
    if (auto s = check_id(*page.starting_after, "starting_after"); !s) return s.error();
  }
  return store_.lists().list_holds(query, page);
}

Result<Page<KeySummary>> Ledger::list_keys(std::optional<std::string_view> account_id, const PageRequest& page) {
  if (account_id) {
    if (auto s = check_id(*account_id, "account_id"); !s) return s.error();
  }
  if (page.starting_after) {
    if (auto s = check_id(*page.starting_after, "starting_after"); !s) return s.error();
  }
  return store_.lists().list_keys(account_id, page);
}

Result<Page<lots::LotView>> Ledger::list_lots(const LotQuery& query, const PageRequest& page) {
  if (auto s = check_id(query.account_id, "account_id"); !s) return s.error();
  if (page.starting_after) {
    if (auto s = check_id(*page.starting_after, "starting_after"); !s) return s.error();
  }
  return store_.lists().list_lots(query, page);
}

Result<TransferRecord> Ledger::get_transfer(std::string_view reference) {
  if (auto s = check_id(reference, "reference"); !s) return s.error();
  return store_.lists().get_transfer(reference);
}

Result<EventPage> Ledger::read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) {
  if (auto s = check_id(account_id, "account_id"); !s) return s.error();
  return store_.read_events(account_id, after, limit);
}

Result<EventPage> Ledger::read_feed(std::int64_t after, std::int64_t limit) { return store_.read_feed(after, limit); }

Result<std::int64_t> Ledger::last_event_id() { return store_.last_event_id(); }

void Ledger::when_events_after(std::int64_t after, EventWaiters::TimePoint deadline, EventWaiters::Ready ready) {
  waiters_.when_events_after(after, deadline, std::move(ready));
}

Result<EventPage> Ledger::read_feed_waiting(std::int64_t after, std::int64_t limit, std::int64_t wait_ms) {
  if (wait_ms < 0 || wait_ms > limits::kEventsWaitMsMax) {
    return invalid("wait_ms must be from 0 to " + std::to_string(limits::kEventsWaitMsMax));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    auto page = store_.read_feed(after, limit);
    if (!page || !page->events.empty() || std::chrono::steady_clock::now() >= deadline) return page;
    Mutex mu;
    CondVar cv;
    std::optional<Status> woke;  // under `mu` (a local: the analysis checks members only)
    waiters_.when_events_after(after, deadline, [&](Status s) {
      MutexLock lock(mu);
      woke.emplace(std::move(s));
      cv.notify_one();  // under the lock: `cv` lives on this stack
    });
    MutexLock lock(mu);
    cv.wait(mu, [&] { return woke.has_value(); });
    if (!*woke) return woke->error();
  }
}

Result<AuditReport> Ledger::audit(std::optional<std::string_view> account_id) {
  if (account_id) {
    if (auto s = check_id(*account_id, "account_id"); !s) return s.error();
  }
  auto report = store_.audit(account_id);
  if (report) counters_.add<&LedgerCounts::audit_violations>(report->violations.size());
  return report;
}

Result<AuditPage> Ledger::audit_range(std::string_view after, std::int64_t limit) {
  auto page = store_.audit_range(after, limit);
  if (page) counters_.add<&LedgerCounts::audit_violations>(page->report.violations.size());
  return page;
}

Result<std::int64_t> Ledger::reap_once() {
  std::int64_t total = 0;
  for (int pass = 0; pass < limits::kReaperPassesMax; ++pass) {
    CommandResult r = committer_.submit_and_wait(ExpireOverdueCommand{options_.reaper_batch_max});
    if (!r) return r.error();
    const ExpireOutcome& o = std::get<ExpireOutcome>(r.value());
    total += o.expired;
    counters_.add<&LedgerCounts::holds_expired>(static_cast<std::uint64_t>(o.expired));
    counters_.add<&LedgerCounts::lots_expired>(static_cast<std::uint64_t>(o.lots_expired));
    if (o.expired < options_.reaper_batch_max && o.lots_expired < options_.reaper_batch_max) break;
  }
  reaper_last_run_ms_.store(clock_.now_ms(), std::memory_order_release);
  return total;
}

Result<LedgerStats> Ledger::stats() { return store_.stats(); }

Result<bool> Ledger::has_admin_key() { return store_.has_admin_key(); }

Result<std::vector<jobs::Job>> Ledger::jobs_to_recover(std::int64_t limit) {
  TG_ASSERT(limit >= 1);  // the runner asks for its free slots, never for none
  return store_.jobs().jobs_to_recover(limit);
}

Result<jobs::UnendedJobs> Ledger::count_unended_jobs() { return store_.jobs().count_unended(); }

Readiness Ledger::readiness() {
  Readiness r;
  r.ready = true;
  if (auto ping = store_.ping(); !ping) {
    r.ready = false;
    // Readiness is an open route: the database's address and the driver's words go to the log only.
    r.database = ping.error().code == Code::storage_failed
                     ? "storage failed: this instance takes no writes until it is restarted"
                     : "unavailable";
    tollgate::log("warn", "readyz: the database is unavailable: " + ping.error().detail);
  } else {
    r.database = "ok";
  }
  const auto last = reaper_last_run_ms();
  const std::int64_t age_ms = last ? clock_.now_ms() - *last : -1;
  const std::int64_t stale_ms = limits::kReaperIntervalsStaleMax * options_.reaper_interval_ms + limits::kReaperStaleSlackMs;
  if (!last || age_ms > stale_ms) {
    r.ready = false;
    r.reaper = last ? "last ran " + std::to_string(age_ms) + " ms ago" : std::string("has not run yet");
  } else {
    r.reaper = "ok";
  }
  return r;
}

std::optional<std::int64_t> Ledger::reaper_last_run_ms() const {
  const std::int64_t t = reaper_last_run_ms_.load(std::memory_order_acquire);
  if (t < 0) return std::nullopt;
  return t;
}

Result<AuditReport> Ledger::audit_sample_once() {
  MutexLock lock(sample_mu_);
  auto next = store_.list_account_ids(sample_cursor_, 1);
  if (!next) return next.error();
  if (next->empty() && !sample_cursor_.empty()) {  // past the last account: start again
    sample_cursor_.clear();
    next = store_.list_account_ids(sample_cursor_, 1);
    if (!next) return next.error();
  }
  if (next->empty()) return AuditReport{};
  sample_cursor_ = next->front();
  auto report = store_.audit(std::string_view(sample_cursor_));
  if (!report) return report.error();
  counters_.add<&LedgerCounts::sampled_accounts>();
  counters_.add<&LedgerCounts::sampled_violations>(report->violations.size());
  for (const auto& v : report->violations) log("error", "sampled audit: " + v.account_id + ": " + v.message);
  return report;
}

void Ledger::sampler_loop() {
  MutexLock lock(reaper_mu_);
  while (!reaper_wake_.wait_for(reaper_mu_, std::chrono::milliseconds(options_.audit_sample_interval_ms),
                                [&]() REQUIRES(reaper_mu_) { return reaper_stopping_; })) {
    lock.unlock();
    if (auto r = audit_sample_once(); !r) log("warn", "sampled audit: " + r.error().detail);
    lock.lock();
  }
}

Result<coord::LockOutcome> Ledger::lock(LockCommand command) {
  return as<coord::LockOutcome>(run(std::move(command)));
}

Result<coord::IdempotencyOutcome> Ledger::idempotency(IdempotencyCommand command) {
  return as<coord::IdempotencyOutcome>(run(std::move(command)));
}

Result<coord::RateLimitOutcome> Ledger::ratelimit(RateLimitCommand command) {
  return as<coord::RateLimitOutcome>(run(std::move(command)));
}

Result<coord::RowRead<coord::Lock>> Ledger::get_lock(std::string_view key) {
  if (auto s = check_id(key, "key"); !s) return s.error();
  return store_.coord().get_lock(key);
}

Result<coord::LockPage> Ledger::list_locks(const PageRequest& page, bool held_only) {
  return store_.coord().list_locks(page, held_only);
}

Result<webhooks::Endpoint> Ledger::get_webhook_endpoint(std::string_view endpoint_id) {
  if (auto s = check_id(endpoint_id, "endpoint_id"); !s) return s.error();
  return store_.webhooks().get_endpoint(endpoint_id);
}

Result<Page<webhooks::Endpoint>> Ledger::list_webhook_endpoints(const PageRequest& page) {
  return store_.webhooks().list_endpoints(page);
}

Result<Page<webhooks::Delivery>> Ledger::list_webhook_deliveries(std::string_view endpoint_id,
                                                                 std::optional<webhooks::DeliveryStatus> status,
                                                                 const PageRequest& page) {
  if (auto valid = check_id(endpoint_id, "endpoint_id"); !valid) return valid.error();
  return store_.webhooks().list_deliveries(endpoint_id, status, page);
}

Result<coord::RowRead<coord::IdempotencyKey>> Ledger::get_idempotency_key(std::string_view key) {
  if (auto s = check_id(key, "key"); !s) return s.error();
  return store_.coord().get_idempotency_key(key);
}

Result<coord::PruneOutcome> Ledger::prune_once() {
  auto r = as<coord::PruneOutcome>(
      run(PruneCoordCommand{options_.idempotency_retention_ms, limits::kIdempotencyPruneBatchMax}));
  if (r) {
    counters_.add<&LedgerCounts::idempotency_keys_pruned>(static_cast<std::uint64_t>(r->pruned_keys));
    counters_.add<&LedgerCounts::rate_rows_pruned>(static_cast<std::uint64_t>(r->pruned_rates));
  }
  return r;
}

void Ledger::reaper_loop() {
  MutexLock lock(reaper_mu_);
  while (!reaper_stopping_) {
    lock.unlock();
    if (auto r = reap_once(); !r) {
      log("error", "reaper: " + r.error().detail);
    }
    const std::int64_t now = clock_.now_ms();
    if (options_.coord_prune_interval_ms > 0 && now - last_prune_ms_ >= options_.coord_prune_interval_ms) {
      last_prune_ms_ = now;
      // Passes of at most kIdempotencyPruneBatchMax rows each, again while a pass found a full
      // batch, at most kCoordPrunePassesMax times per interval (a bound on the reaper's time).
      for (int pass = 0; pass < limits::kCoordPrunePassesMax; ++pass) {
        auto r = prune_once();
        if (!r) {
          log("error", "prune: " + r.error().detail);
          break;
        }
        if (r->pruned_keys < limits::kIdempotencyPruneBatchMax && r->pruned_rates < limits::kIdempotencyPruneBatchMax) break;
      }
    }
    lock.lock();
    reaper_wake_.wait_for(reaper_mu_, std::chrono::milliseconds(options_.reaper_interval_ms),
                          [&]() REQUIRES(reaper_mu_) { return reaper_stopping_; });
  }
}

}  // namespace tollgate
