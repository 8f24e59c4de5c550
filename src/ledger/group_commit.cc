#include "ledger/group_commit.h"

#include <chrono>

#include "core/last_resort.h"

namespace tollgate {
namespace {

std::uint64_t since_ns(std::chrono::steady_clock::time_point start) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
}

// A moving average that gives the newest sample 1/8 of the weight (the first sample: all of it).
void average_in(std::atomic<std::uint64_t>& average, std::uint64_t sample) {
  const std::uint64_t old = average.load(std::memory_order_relaxed);
  average.store(old == 0 ? sample : old - old / 8 + sample / 8, std::memory_order_relaxed);
}

}  // namespace

GroupCommitter::GroupCommitter(Store& store, GroupCommitOptions options, std::function<void()> after_durable)
    : store_(store), options_(options), after_durable_(std::move(after_durable)) {
  TG_ASSERT(options_.batch_max >= 1);
  TG_ASSERT(options_.queue_max >= options_.batch_max);
  syncer_ = std::thread([this] { syncer_loop(); });
  writer_ = std::thread([this] { writer_loop(); });
}

GroupCommitter::~GroupCommitter() { stop(); }

void GroupCommitter::submit(Command command, Callback done) {
  MutexLock lock(mu_);
  if (stopping_) {
    lock.unlock();
    done(Error::make(Code::unavailable, "the ledger is shutting down"));
    return;
  }
  if (queue_.size() >= options_.queue_max) {
    lock.unlock();
    counters_.add<&GroupCommitStats::overloaded>();
    done(Error::make(Code::overloaded, "too many operations are waiting to be written; retry with the same id"));
    return;
  }
  const bool was_empty = queue_.empty();
  queue_.push_back(Pending{std::move(command), std::move(done)});
  lock.unlock();
  if (was_empty) wake_writer_.notify_one();
}

CommandResult GroupCommitter::submit_and_wait(Command command) {
  return wait_for_result([&](Callback done) { submit(std::move(command), std::move(done)); });
}

void GroupCommitter::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_writer_.notify_one();
  std::call_once(joined_, [this] {
    writer_.join();  // applies everything queued, then tells the syncer it is done
    syncer_.join();  // flushes and answers everything applied
  });
}

std::optional<Error> GroupCommitter::flush(const std::deque<Finished>& batches) {
  bool any_committed = false;
  for (const Finished& f : batches) any_committed = any_committed || !f.batch_error;
  if (!any_committed) return std::nullopt;
  counters_.add<&GroupCommitStats::syncs>();
  const auto start = std::chrono::steady_clock::now();
  const Status synced = store_.sync();
  const std::uint64_t took = since_ns(start);
  counters_.add<&GroupCommitStats::sync_ns>(took);
  average_in(sync_ns_avg_, took);
  if (synced) return std::nullopt;
  counters_.add<&GroupCommitStats::failed_syncs>();
  return synced.error();
}

void GroupCommitter::answer(std::deque<Finished>& batches, const std::optional<Error>& flush_error) {
  bool durable = false;
  for (Finished& batch : batches) {
    durable = durable || (!batch.batch_error && !flush_error);
    for (std::size_t i = 0; i < batch.callbacks.size(); ++i) {
      // A callback that throws is a bug (last_resort.h): noted; the others are still answered.
      if (batch.batch_error) {
        run_last_resort("a ledger completion", [&] { batch.callbacks[i](*batch.batch_error); });
      } else if (flush_error) {
        // Committed, but whether it is on disk is unknown: the caller retries with the same id.
        run_last_resort("a ledger completion", [&] { batch.callbacks[i](*flush_error); });
      } else {
        count_outcome(batch.results[i]);
        run_last_resort("a ledger completion", [&] { batch.callbacks[i](std::move(batch.results[i])); });
      }
    }
  }
  if (durable && after_durable_) after_durable_();
}

void GroupCommitter::count_outcome(const CommandResult& result) {
  if (!result) {
    if (result.code() == Code::insufficient_credits) {
      outcome_counters_.add<&OutcomeCounts::reservation_conflicts>();
      if (held_by_other_holds(result.error())) outcome_counters_.add<&OutcomeCounts::reservation_conflicts_held>();
    }
    return;
  }
  if (const auto* o = std::get_if<RefundOutcome>(&result.value()); o != nullptr && o->created) {
    outcome_counters_.add<&OutcomeCounts::refunds>();
    outcome_counters_.add<&OutcomeCounts::refunded_credits>(static_cast<std::uint64_t>(o->refund.amount));
    return;
  }
  const Hold* hold = nullptr;
  if (const auto* o = std::get_if<HoldOutcome>(&result.value()); o != nullptr && o->created) {
    hold = &o->hold;  // not a replay that changed nothing
  } else {
    hold = slice_ended_hold(result.value());  // a slice's command that ended a hold it owns
  }
  if (hold == nullptr) return;
  // A reservation or an extension leaves its hold active; a commit or release ends it.
  switch (hold->status) {
    case HoldStatus::committed: outcome_counters_.add<&OutcomeCounts::holds_committed>(); break;
    case HoldStatus::released: outcome_counters_.add<&OutcomeCounts::holds_released>(); break;
    default: break;
  }
  if (hold->late_outcome == LateOutcome::charged) outcome_counters_.add<&OutcomeCounts::holds_late_charged>();
  if (hold->late_outcome == LateOutcome::forgiven) outcome_counters_.add<&OutcomeCounts::holds_late_forgiven>();
}

std::size_t GroupCommitter::batch_size(std::size_t waiting) {
  const std::size_t all = std::min(waiting, options_.batch_max);
  if (all < 2) return all;
  {
    MutexLock lock(committed_mu_);
    if (!committed_.empty() || syncing_) return all;  // a flush is under way: this batch overlaps it
  }
  const std::uint64_t apply_ns = apply_ns_per_command_avg_.load(std::memory_order_relaxed);
  const std::uint64_t sync_ns = sync_ns_avg_.load(std::memory_order_relaxed);
  if (apply_ns == 0 || sync_ns == 0) return all;  // nothing measured yet
  // Halves overlap: each stage takes max(apply of half, flush) instead of apply + flush, for the
  // price of one more batch (its fixed cost and its own flush). That pays while the flush is shorter
  // than applying everything and long enough to hide much work — not at all when the store's commit
  // already flushed and sync() has nothing to do (PostgreSQL).
  const std::uint64_t apply_all_ns = apply_ns * all;
  if (sync_ns >= apply_all_ns || sync_ns < apply_all_ns / 8) return all;
  counters_.add<&GroupCommitStats::split_batches>();
  return (all + 1) / 2;
}

void GroupCommitter::writer_loop() {
  std::vector<Command> commands;
  commands.reserve(options_.batch_max);
  for (;;) {
    Finished finished;
    finished.callbacks.reserve(options_.batch_max);
    {
      MutexLock lock(mu_);
      wake_writer_.wait(mu_, [&]() REQUIRES(mu_) { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, and everything queued is written
      const std::size_t n = batch_size(queue_.size());
      for (std::size_t i = 0; i < n; ++i) {
        commands.push_back(std::move(queue_.front().command));
        finished.callbacks.push_back(std::move(queue_.front().done));
        queue_.pop_front();
      }
    }
    const auto start = std::chrono::steady_clock::now();
    const Status committed = store_.apply(commands, finished.results);
    const std::uint64_t took = since_ns(start);
    counters_.add<&GroupCommitStats::apply_ns>(took);
    average_in(apply_ns_per_command_avg_, took / commands.size());
    counters_.add<&GroupCommitStats::batches>();
    counters_.add<&GroupCommitStats::commands>(commands.size());
    if (committed) {
      TG_ASSERT(finished.results.size() == commands.size());
    } else {
      counters_.add<&GroupCommitStats::failed_batches>();
      if (committed.code() == Code::storage_full) counters_.add<&GroupCommitStats::disk_full_batches>();
      finished.results.clear();
      finished.batch_error = committed.error();
    }
    commands.clear();
    // A lone caller: nothing else waits to be written and every earlier batch is answered. Flush
    // and answer here: a hand-off to the syncer would only add its wake-up to the flush.
    bool alone = false;
    {
      MutexLock lock(mu_);
      alone = queue_.empty();
    }
    MutexLock lock(committed_mu_);
    if (alone && committed_.empty() && !syncing_) {
      lock.unlock();
      std::deque<Finished> one;
      one.push_back(std::move(finished));
      counters_.add<&GroupCommitStats::answered_inline>();  // before the callers can look
      answer(one, flush(one));
      continue;
    }
    committed_cv_.wait(committed_mu_, [&]() REQUIRES(committed_mu_) { return committed_.size() < limits::kCommittedBatchesMax; });
    committed_.push_back(std::move(finished));
    lock.unlock();
    committed_cv_.notify_all();
  }
  {
    MutexLock lock(committed_mu_);
    writer_done_ = true;
  }
  committed_cv_.notify_all();
}

void GroupCommitter::syncer_loop() {
  for (;;) {
    std::deque<Finished> batches;
    {
      MutexLock lock(committed_mu_);
      committed_cv_.wait(committed_mu_, [&]() REQUIRES(committed_mu_) { return writer_done_ || !committed_.empty(); });
      if (committed_.empty()) return;  // the writer is done and everything is answered
      batches.swap(committed_);
      syncing_ = true;
    }
    committed_cv_.notify_all();  // room for the writer
    // Every batch here committed before this flush starts: one flush makes all of them durable.
    answer(batches, flush(batches));
    MutexLock lock(committed_mu_);
    syncing_ = false;
  }
}

GroupCommitStats GroupCommitter::stats() const {
  GroupCommitStats out = counters_.snapshot();
  out.outcomes = outcome_counters_.snapshot();
  return out;
}

std::size_t GroupCommitter::queue_depth() const {
  MutexLock lock(mu_);
  return queue_.size();
}

}  // namespace tollgate
