// tollgate http: the reader executor — where every read of the store runs, off the I/O threads.
//
// The I/O threads parse, authorize and answer; they never wait on the database (server.h). A read
// (a GET that asks the store, /readyz's ping, an audit) is posted here: a fixed pool of threads —
// as many as the store has reader connections, so a task that starts finds a connection free —
// takes tasks from a bounded queue in order. A full queue refuses the task (try_post() false): the
// edge answers 503 `overloaded` with Retry-After instead of letting the queue grow.
//
// A long read runs in parts: a running task queues its next part with continue_with(), at the back
// of the queue, behind the reads that arrived meanwhile, so one audit of every account never holds
// a reader thread for long. A continuation is never refused — it replaces the part that just ran —
// so the queue holds at most queue_max + threads tasks.
//
// stop(): the tasks queued (and their continuations) run, then the threads end; try_post() refuses
// from then on.
//
// Thread safety: every method may be called from any thread; continue_with() only from a task
// running on this executor.
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

#include "core/thread_annotations.h"

namespace tollgate::http {

class ReadExecutor {
 public:
  using Task = std::function<void()>;

  // Starts `threads` threads (≥ 1); at most `queue_max` (≥ 1) tasks wait.
  ReadExecutor(int threads, std::size_t queue_max);
  ~ReadExecutor();  // stop()
  ReadExecutor(const ReadExecutor&) = delete;
  ReadExecutor& operator=(const ReadExecutor&) = delete;

  // Queues `task`; false (and `task` dropped) when queue_max tasks wait already or after stop().
  [[nodiscard]] bool try_post(Task task);
  // Queues the next part of the running task (never refused; see above).
  void continue_with(Task task);

  void stop();

  std::size_t queue_depth() const;
  std::uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void run();

  const std::size_t queue_max_;
  mutable Mutex mu_;
  CondVar wake_;
  std::deque<Task> queue_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::atomic<std::uint64_t> refused_{0};
  std::once_flag joined_;
  std::vector<std::thread> threads_;  // last: started when everything above exists
};

}  // namespace tollgate::http
