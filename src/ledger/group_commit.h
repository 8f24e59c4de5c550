// tollgate ledger: group commit — many callers, one writer, one flush per batch.
//
// Callers on any thread submit() commands. One writer thread takes every command waiting at that
// moment (at most batch_max), hands them to Store::apply() — one transaction, in submission order,
// each seeing the effects of the ones before it — and only after the commit is durable answers each
// caller. The queue is bounded: when queue_max commands wait already, submit() answers `overloaded`
// at once instead of waiting.
//
// Thread safety: submit() and run()/stop() may be called from any thread. Callbacks run on the writer
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

class GroupCommitter {
 public:
  using Callback = std::function<void(CommandResult)>;

  // Starts the writer thread. `store` must outlive this object.
  GroupCommitter(Store& store, GroupCommitOptions options);
  ~GroupCommitter();  // stop()
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Queues `command`; `done` is called exactly once with its result after the batch is durable.
  void submit(Command command, Callback done);
  // Blocks the calling thread until the command is durable or refused.
  CommandResult submit_and_wait(Command command);

  // Applies what is queued, then ends the writer. Later submissions answer `unavailable`.
  void stop();

  GroupCommitStats stats() const;
  std::size_t queue_depth() const;

 private:
  struct Pending {
    Command command;
    Callback done;
  };
  void writer_loop();

  // Constant after construction.
  Store& store_;
  const GroupCommitOptions options_;

  mutable std::mutex mu_;
  std::condition_variable wake_writer_;
  std::deque<Pending> queue_;  // protected by mu_
  bool stopping_ = false;      // protected by mu_

  std::atomic<std::uint64_t> batches_{0}, commands_{0}, overloaded_{0}, failed_batches_{0};
  std::once_flag joined_;
  std::thread writer_;  // last: started after everything above exists
};

}  // namespace tollgate
