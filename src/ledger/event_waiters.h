// tollgate ledger: waiting for the change feed without a thread per waiter.
//
// A feed read with wait_ms (GET /v1/events?after=&wait_ms=) that finds nothing newer than its
// cursor registers here instead of blocking its thread: when_events_after(after, deadline, ready)
// calls ready() exactly once — as soon as the store's last_event_id() is past `after` (something
// new is durable: read again), at the deadline (read again and answer what there is), or when the
// waiters stop. One thread serves every waiter. It checks the store's last event id
//   - when a waiter registers (a commit between the caller's empty read and its registration is
//     never missed),
//   - after each durable batch of this instance (notify_committed(), called by the group
//     committer: a cheap no-op while nobody waits),
//   - and every poll_interval while anyone waits: writes of other instances on a shared database.
// Waiters are bounded (limits::kEventWaitersMax): one more is answered `overloaded` at once.
//
// Thread safety: every method may be called from any thread. `ready` runs on the waiters' thread
// (or on the caller's, for an immediate refusal): keep it short — hand the work to another thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "core/result.h"
#include "core/thread_annotations.h"
#include "store/store.h"

namespace tollgate {

class EventWaiters {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // ok: read the feed again now. An error (overloaded, unavailable) answers the read.
  using Ready = std::function<void(Status)>;

  // `store` must outlive this object.
  EventWaiters(Store& store, std::chrono::milliseconds poll_interval, std::size_t waiters_max);
  ~EventWaiters();  // stop()
  EventWaiters(const EventWaiters&) = delete;
  EventWaiters& operator=(const EventWaiters&) = delete;

  void when_events_after(std::int64_t after, TimePoint deadline, Ready ready);
  // Something was committed and is durable (cheap when nobody waits).
  void notify_committed();
  // Answers every waiter now (ok: they read what there is) — a server that shuts down does not
  // wait out their deadlines. Later waiters wait as usual.
  void wake_all();
  // Answers every waiter (ok: they read what there is) and ends the thread; later waiters are
  // answered `unavailable`.
  void stop();

  std::size_t waiting() const { return count_.load(std::memory_order_relaxed); }
  // How many times the store's last event id was read (for tests: polls happen only while anyone waits).
  std::uint64_t checks() const { return checks_.load(std::memory_order_relaxed); }

 private:
  struct Waiter {
    std::int64_t after = 0;
    Ready ready;
  };
  void loop();

  // Constant after construction.
  Store& store_;
  const std::chrono::milliseconds poll_interval_;
  const std::size_t waiters_max_;

  mutable Mutex mu_;
  CondVar wake_;
  std::multimap<TimePoint, Waiter> waiters_ GUARDED_BY(mu_);  // by deadline
  bool check_pending_ GUARDED_BY(mu_) = false;
  bool wake_all_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::atomic<std::size_t> count_{0};         // waiters_.size(), readable without mu_
  std::atomic<std::uint64_t> checks_{0};
  std::once_flag joined_;
  std::thread thread_;  // last: started when everything above exists
};

}  // namespace tollgate
