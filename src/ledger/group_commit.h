// tollgate ledger: group commit — many callers, one writer, one flush for many batches.
//
// Callers on any thread submit() commands. One writer thread takes every command waiting at that
// moment (at most batch_max) and hands them to Store::apply() — one transaction, in submission
// order, each seeing the effects of the ones before it — which commits without waiting for the
// disk. A syncer thread then makes the committed batches durable with one Store::sync() (every batch
// committed before the sync started) and only then answers their callers, while the writer already
// applies the next batch: the flush of batch k overlaps the work of batch k+1.
//
// Overlap needs two batches in flight. When every waiting caller is in one batch (closed-loop callers
// fall into step) and the syncer is idle, the writer takes only half of what waits if a flush takes
// less time than applying all of it but more than an eighth of that (both measured, moving
// averages): the second half is applied while the first is flushed, and the halves stay out of step.
//
// No penalty for a lone caller: when nothing else waits to be written and the syncer is idle, the
// writer flushes and answers the batch itself — no thread hand-off on top of the flush — and a
// caller that submits its next command from its callback finds the writer already there.
//
// The queue is bounded: when queue_max commands wait already, submit() answers `overloaded` at once
// instead of waiting; at most limits::kCommittedBatchesMax committed batches wait for the syncer.
//
// Thread safety: every method may be called from any thread. Callbacks run on the writer or the
// syncer thread (keep them short: hand the result to another thread), or on the caller's thread for
// an immediate `overloaded` / `unavailable` answer. A batch's callbacks run after every earlier
// batch's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "slices.h"
#include "core/counters.h"
#include "core/limits.h"
#include "core/thread_annotations.h"
#include "store/store.h"

namespace tollgate {

struct GroupCommitOptions {
  std::size_t queue_max = limits::kWriteQueueDefault;  // commands waiting, at most
  std::size_t batch_max = limits::kBatchMaxDefault;    // commands in one transaction, at most
};

// What the durable batches decided, counted as their callers are answered (for /metrics): every
// command, whoever submitted it. A command whose batch failed, or whose flush failed, is not counted.
struct OutcomeCounts {
  std::uint64_t holds_committed = 0;  // commits that ended a hold (not replays of one)
  std::uint64_t holds_released = 0;   // releases that ended a hold
  std::uint64_t holds_late_charged = 0, holds_late_forgiven = 0;  // commits of expired holds, by policy
  std::uint64_t reservation_conflicts = 0;  // answers of insufficient_credits
  std::uint64_t reservation_conflicts_held = 0;  // of those, held_by_other_holds (result.h)
  std::uint64_t refunds = 0;           // refunds that gave credits back (not replays of one)
  std::uint64_t refunded_credits = 0;  // the credits they gave back
};

// Holds ended, by outcome: these counts, and the reaper's expirations (ledger.h).
inline constexpr metrics::Family kHoldsEndedFamily{"tollgate_holds_ended_total", metrics::Type::counter,
                                                   "Holds ended through this instance, by outcome."};
// Where each count of OutcomeCounts is kept and shown (core/counters.h).
inline constexpr auto kOutcomeFields = std::to_array<metrics::Field<OutcomeCounts>>({
    {&OutcomeCounts::holds_committed, kHoldsEndedFamily, "outcome=\"committed\""},
    {&OutcomeCounts::holds_released, kHoldsEndedFamily, "outcome=\"released\""},
    {&OutcomeCounts::holds_late_charged, kHoldsEndedFamily, "outcome=\"late_charged\""},
    {&OutcomeCounts::holds_late_forgiven, kHoldsEndedFamily, "outcome=\"late_forgiven\""},
    {&OutcomeCounts::reservation_conflicts,
     {"tollgate_reservation_conflicts_total", metrics::Type::counter, "Answers of insufficient_credits."}, ""},
    {&OutcomeCounts::reservation_conflicts_held,
     {"tollgate_reservation_conflicts_held_total", metrics::Type::counter,
      "Answers of insufficient_credits whose account had the credits, reserved by other holds."},
     ""},
    {&OutcomeCounts::refunds,
     {"tollgate_refunds_total", metrics::Type::counter, "Refunds of a charge made through this instance."}, ""},
    {&OutcomeCounts::refunded_credits,
     {"tollgate_refunded_credits_total", metrics::Type::counter,
      "Credits given back by refunds made through this instance (used to available)."},
     ""},
});

struct GroupCommitStats {
  std::uint64_t batches = 0;
  std::uint64_t commands = 0;
  std::uint64_t overloaded = 0;       // submissions refused because the queue was full
  std::uint64_t failed_batches = 0;   // transactions that did not commit (every caller got the error)
  std::uint64_t syncs = 0;            // Store::sync() calls (each made one or more batches durable)
  std::uint64_t answered_inline = 0;  // batches the writer flushed and answered itself (lone caller)
  std::uint64_t apply_ns = 0;         // wall time in Store::apply() (load, decide, write, COMMIT)
  std::uint64_t sync_ns = 0;          // wall time in Store::sync() (the flush)
  std::uint64_t split_batches = 0;    // batches that took half of what waited, to overlap the flush
  OutcomeCounts outcomes;
  std::uint64_t disk_full_batches = 0;  // of failed_batches, those the store refused as storage_full
  std::uint64_t failed_syncs = 0;       // Store::sync() calls that failed (storage_failed: fsyncgate)
};

// Where each counter of GroupCommitStats is kept and shown (core/counters.h; outcomes: kOutcomeFields).
inline constexpr metrics::Family kStorageFailuresFamily{
    "tollgate_storage_failures_total", metrics::Type::counter,
    "Storage faults: write transactions refused for a full disk, flushes that failed (writes stop)."};
inline constexpr auto kGroupCommitFields = std::to_array<metrics::Field<GroupCommitStats>>({
    {&GroupCommitStats::batches,
     {"tollgate_group_commit_batches_total", metrics::Type::counter, "Write transactions committed or tried."}, ""},
    {&GroupCommitStats::commands,
     {"tollgate_group_commit_operations_total", metrics::Type::counter, "Operations written through group commit."},
     ""},
    {&GroupCommitStats::overloaded,
     {"tollgate_group_commit_overloaded_total", metrics::Type::counter, "Operations refused: write queue full."}, ""},
    {&GroupCommitStats::failed_batches,
     {"tollgate_group_commit_failed_batches_total", metrics::Type::counter, "Write transactions that failed."}, ""},
    {&GroupCommitStats::disk_full_batches, kStorageFailuresFamily, "kind=\"disk_full\""},
    {&GroupCommitStats::failed_syncs, kStorageFailuresFamily, "kind=\"flush\""},
    // Not on /metrics (benchmarks and tests read them).
    {&GroupCommitStats::syncs, {}, ""},
    {&GroupCommitStats::answered_inline, {}, ""},
    {&GroupCommitStats::apply_ns, {}, ""},
    {&GroupCommitStats::sync_ns, {}, ""},
    {&GroupCommitStats::split_batches, {}, ""},
});

// Calls `submit(callback)` and blocks (without spinning) until the callback delivered the result.
template <typename Submit>
CommandResult wait_for_result(Submit&& submit) {
  Mutex mu;
  CondVar cv;
  std::optional<CommandResult> out;  // under `mu` (a local: the analysis checks members only)
  submit([&](CommandResult r) {
    MutexLock lock(mu);
    out.emplace(std::move(r));
    cv.notify_one();  // under the lock: `cv` lives on the waiter's stack
  });
  MutexLock lock(mu);
  cv.wait(mu, [&] { return out.has_value(); });
  return std::move(*out);
}

class GroupCommitter {
 public:
  using Callback = std::function<void(CommandResult)>;

  // Starts the writer and completion threads. `store` must outlive this object. `after_durable`
  // (optional) runs after the callers of each flushed batch were answered, on the thread that
  // answered them (keep it short): the ledger wakes the change feed's waiters with it.
  GroupCommitter(Store& store, GroupCommitOptions options, std::function<void()> after_durable = {});
  ~GroupCommitter();  // stop()
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Queues `command`; `done` is called exactly once with its result after the batch is durable.
  void submit(Command command, Callback done);
  // Blocks the calling thread until the command is durable or refused.
  CommandResult submit_and_wait(Command command);

  // Applies and answers what is queued, then ends both threads. Later submissions answer
  // `unavailable`.
  void stop();

  GroupCommitStats stats() const;
  std::size_t queue_depth() const;

 private:
  struct Pending {
    Command command;
    Callback done;
  };
  struct Finished {  // a batch whose transaction ended, waiting for its flush and its answers
    std::vector<Callback> callbacks;
    std::vector<CommandResult> results;  // empty when the whole batch failed
    std::optional<Error> batch_error;
  };
  void writer_loop();
  void syncer_loop();
  // How many of `waiting` commands the writer takes now (see the header comment on overlap).
  std::size_t batch_size(std::size_t waiting);
  // Runs the callbacks of `batches` (in order): their results, or `flush_error` for the committed
  // ones if the flush failed, or each failed batch's error; then after_durable_ if any was durable.
  // Counts each delivered result's outcome (OutcomeCounts) before its callback runs.
  void answer(std::deque<Finished>& batches, const std::optional<Error>& flush_error);
  void count_outcome(const CommandResult& result);
  // One sync() for `batches` (none if every one of them failed: nothing to flush); its error.
  std::optional<Error> flush(const std::deque<Finished>& batches);

  // Constant after construction.
  Store& store_;
  const GroupCommitOptions options_;
  const std::function<void()> after_durable_;

  mutable Mutex mu_;
  CondVar wake_writer_;
  std::deque<Pending> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;

  // The hand-off from the writer to the syncer: at most limits::kCommittedBatchesMax batches wait,
  // so a slow disk or a slow callback slows the writer instead of growing memory.
  Mutex committed_mu_;
  CondVar committed_cv_;
  std::deque<Finished> committed_ GUARDED_BY(committed_mu_);
  bool syncing_ GUARDED_BY(committed_mu_) = false;  // the syncer holds batches it has not answered
  bool writer_done_ GUARDED_BY(committed_mu_) = false;

  metrics::Counters<GroupCommitStats, kGroupCommitFields> counters_;
  metrics::Counters<OutcomeCounts, kOutcomeFields> outcome_counters_;
  // Moving averages (1/8 weight to the newest): apply() time per command, and one sync().
  std::atomic<std::uint64_t> apply_ns_per_command_avg_{0}, sync_ns_avg_{0};
  std::once_flag joined_;
  std::thread syncer_;  // started after everything above exists
  std::thread writer_;
};

}  // namespace tollgate
