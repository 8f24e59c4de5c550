#include "ledger/event_waiters.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/last_resort.h"
#include "core/log.h"

namespace tollgate {

EventWaiters::EventWaiters(Store& store, std::chrono::milliseconds poll_interval, std::size_t waiters_max)
    : store_(store), poll_interval_(poll_interval), waiters_max_(waiters_max) {
  TG_ASSERT(poll_interval_.count() >= 1 && waiters_max_ >= 1);
  thread_ = std::thread([this] { loop(); });
}

EventWaiters::~EventWaiters() { stop(); }

void EventWaiters::when_events_after(std::int64_t after, TimePoint deadline, Ready ready) {
  MutexLock lock(mu_);
  if (stopping_) {
    lock.unlock();
    ready(Error::make(Code::unavailable, "the ledger is shutting down"));
    return;
  }
  if (waiters_.size() >= waiters_max_) {
    lock.unlock();
    ready(Error::make(Code::overloaded, "too many reads wait for new events; retry later"));
    return;
  }
  waiters_.emplace(deadline, Waiter{after, std::move(ready)});
  count_.store(waiters_.size(), std::memory_order_relaxed);
  check_pending_ = true;
  lock.unlock();
  wake_.notify_one();
}

void EventWaiters::notify_committed() {
  if (count_.load(std::memory_order_relaxed) == 0) return;
  {
    MutexLock lock(mu_);
    check_pending_ = true;
  }
  wake_.notify_one();
}

void EventWaiters::wake_all() {
  {
    MutexLock lock(mu_);
    wake_all_ = true;
  }
  wake_.notify_one();
}

void EventWaiters::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  std::call_once(joined_, [this] { thread_.join(); });
}

void EventWaiters::loop() {
  using Clock = std::chrono::steady_clock;
  std::vector<Ready> due;
  MutexLock lock(mu_);
  TimePoint next_poll = Clock::now() + poll_interval_;
  for (;;) {
    // Sleep until a check is asked for, the next poll, or the earliest deadline — with nobody
    // waiting, until someone registers.
    const auto woken = [&]() REQUIRES(mu_) { return stopping_ || check_pending_ || wake_all_; };
    if (!woken()) {
      if (waiters_.empty()) {
        wake_.wait(mu_, woken);
      } else {
        const TimePoint until = std::min(next_poll, waiters_.begin()->first);
        wake_.wait_until(mu_, until, woken);
      }
    }
    if (stopping_) break;
    const TimePoint now = Clock::now();
    const bool check = !waiters_.empty() && (check_pending_ || now >= next_poll);
    check_pending_ = false;
    std::optional<std::int64_t> last;
    if (check) {
      next_poll = now + poll_interval_;
      lock.unlock();
      checks_.fetch_add(1, std::memory_order_relaxed);
      Result<std::int64_t> read = store_.last_event_id();
      if (read) {
        last = *read;
      } else {
        log("warn", "change feed: reading the last event id failed: " + read.error().detail);
      }
      lock.lock();
    }
    const TimePoint after_check = Clock::now();
    const bool all = wake_all_;
    wake_all_ = false;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (all || (last && it->second.after < *last) || it->first <= after_check) {
        due.push_back(std::move(it->second.ready));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
    count_.store(waiters_.size(), std::memory_order_relaxed);
    if (due.empty()) continue;
    lock.unlock();
    for (Ready& ready : due) run_last_resort("an event waiter", [&] { ready(ok_status()); });
    due.clear();
    lock.lock();
  }
  // Stopping: every waiter reads what there is.
  for (auto& [deadline, waiter] : waiters_) due.push_back(std::move(waiter.ready));
  waiters_.clear();
  count_.store(0, std::memory_order_relaxed);
  lock.unlock();
  for (Ready& ready : due) run_last_resort("an event waiter", [&] { ready(ok_status()); });
}

}  // namespace tollgate
