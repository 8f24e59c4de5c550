// tollgate ledger: group commit — many callers, one writer, one flush per batch.
//
// Callers on any thread submit() commands. One writer thread takes every command waiting at that
// moment (at most batch_max), hands them to Store::apply() — one transaction, in submission order,
// each seeing the effects of the ones before it — and only after the commit is durable are the
// callers answered. A completion thread runs the callbacks of a committed batch while the writer
// already applies the next one. The queue is bounded: when queue_max commands wait already,
// submit() answers `overloaded` at once instead of waiting.
//
// Thread safety: every method may be called from any thread. Callbacks run on the completion
// thread (keep them short: hand the result to another thread), or on the caller's thread for an
// immediate `overloaded` / `unavailable` answer.
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

#include "core/commands.h"
#include "core/limits.h"
#include "store/store.h"

namespace tollgate {

struct GroupCommitOptions {
  std::size_t queue_max = limits::kWriteQueueDefault;  // commands waiting, at most
  std::size_t batch_max = limits::kBatchMaxDefault;    // commands in one transaction, at most
};

struct GroupCommitStats {
  std::uint64_t batches = 0;
  std::uint64_t commands = 0;
  std::uint64_t overloaded = 0;       // submissions refused because the queue was full
  std::uint64_t failed_batches = 0;   // transactions that did not commit (every caller got the error)
};

// Calls `submit(callback)` and blocks (without spinning) until the callback delivered the result.
template <typename Submit>
CommandResult wait_for_result(Submit&& submit) {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<CommandResult> out;
  submit([&](CommandResult r) {
    std::lock_guard lock(mu);
    out.emplace(std::move(r));
    cv.notify_one();  // under the lock: `cv` lives on the waiter's stack
  });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return out.has_value(); });
  return std::move(*out);
}

class GroupCommitter {
 public:
  using Callback = std::function<void(CommandResult)>;

  // Starts the writer and completion threads. `store` must outlive this object.
  GroupCommitter(Store& store, GroupCommitOptions options);
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
  struct Finished {  // a batch whose transaction ended, waiting for its callbacks to run
    std::vector<Callback> callbacks;
    std::vector<CommandResult> results;  // empty when the whole batch failed
    std::optional<Error> batch_error;
  };
  void writer_loop();
  void completion_loop();

  // Constant after construction.
  Store& store_;
  const GroupCommitOptions options_;

  mutable std::mutex mu_;
  std::condition_variable wake_writer_;
  std::deque<Pending> queue_;  // protected by mu_
  bool stopping_ = false;      // protected by mu_

  // The hand-off from the writer to the completion thread: at most kFinishedMax batches wait, so
  // a slow callback slows the writer instead of growing memory.
  static constexpr std::size_t kFinishedMax = 4;
  std::mutex finished_mu_;
  std::condition_variable finished_cv_;
  std::deque<Finished> finished_;  // protected by finished_mu_
  bool writer_done_ = false;       // protected by finished_mu_

  std::atomic<std::uint64_t> batches_{0}, commands_{0}, overloaded_{0}, failed_batches_{0};
  std::once_flag joined_;
  std::thread completer_;  // started after everything above exists
  std::thread writer_;
};

}  // namespace tollgate
