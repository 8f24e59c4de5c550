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
    overloaded_.fetch_add(1, std::memory_order_relaxed);
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
  syncs_.fetch_add(1, std::memory_order_relaxed);
  const auto start = std::chrono::steady_clock::now();
  const Status synced = store_.sync();
  const std::uint64_t took = since_ns(start);
  sync_ns_.fetch_add(took, std::memory_order_relaxed);
  average_in(sync_ns_avg_, took);
  if (synced) return std::nullopt;
  failed_syncs_.fetch_add(1, std::memory_order_relaxed);
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
  constexpr auto relaxed = std::memory_order_relaxed;
  if (!result) {
    if (result.code() == Code::insufficient_credits) {
      reservation_conflicts_.fetch_add(1, relaxed);
      if (held_by_other_holds(result.error())) reservation_conflicts_held_.fetch_add(1, relaxed);
    }
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
    case HoldStatus::committed: holds_committed_.fetch_add(1, relaxed); break;
    case HoldStatus::released: holds_released_.fetch_add(1, relaxed); break;
    default: break;
  }
  if (hold->late_outcome == LateOutcome::charged) holds_late_charged_.fetch_add(1, relaxed);
  if (hold->late_outcome == LateOutcome::forgiven) holds_late_forgiven_.fetch_add(1, relaxed);
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
  split_batches_.fetch_add(1, std::memory_order_relaxed);
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
    apply_ns_.fetch_add(took, std::memory_order_relaxed);
    average_in(apply_ns_per_command_avg_, took / commands.size());
    batches_.fetch_add(1, std::memory_order_relaxed);
    commands_.fetch_add(commands.size(), std::memory_order_relaxed);
    if (committed) {
      TG_ASSERT(finished.results.size() == commands.size());
    } else {
      failed_batches_.fetch_add(1, std::memory_order_relaxed);
      if (committed.code() == Code::storage_full) disk_full_batches_.fetch_add(1, std::memory_order_relaxed);
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
      answered_inline_.fetch_add(1, std::memory_order_relaxed);  // before the callers can look
      answer(one, flush(one));
      continue;
    }
    committed_cv_.wait(committed_mu_, [&]() REQUIRES(committed_mu_) { return committed_.size() < kCommittedMax; });
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
  return GroupCommitStats{batches_.load(),
                          commands_.load(),
                          overloaded_.load(),
                          failed_batches_.load(),
                          syncs_.load(),
                          answered_inline_.load(),
                          apply_ns_.load(),
                          sync_ns_.load(),
                          split_batches_.load(),
                          OutcomeCounts{holds_committed_.load(), holds_released_.load(), holds_late_charged_.load(),
                                        holds_late_forgiven_.load(), reservation_conflicts_.load(),
                                        reservation_conflicts_held_.load()},
                          disk_full_batches_.load(),
                          failed_syncs_.load()};
}

std::size_t GroupCommitter::queue_depth() const {
  MutexLock lock(mu_);
  return queue_.size();
}

}  // namespace tollgate
