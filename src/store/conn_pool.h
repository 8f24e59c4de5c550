// tollgate store: a bounded pool of database connections for reads, shared by the backends.
//
// lease() hands out an idle connection, or opens a new one (with `open`) while fewer than `max`
// are open, or else waits for one to come back — at most `lease_wait_ms`: then it answers
// `unavailable` (every connection is busy for that long: the database is stuck or the readers are
// overloaded; the caller answers 503 instead of waiting without end). A lease gives its connection back when it goes —
// unless `healthy` says the connection broke: then it is closed, and a later lease opens a new one.
// `open` may throw (the backend's error); nothing is counted as open then.
//
// Thread safety: lease() may be called from any thread; a Lease belongs to one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <string>
#include <memory>
#include <mutex>
#include <vector>

#include "core/limits.h"
#include "core/result.h"
#include "core/thread_annotations.h"

namespace tollgate {

template <typename Conn>
class ConnPool {
 public:
  using Open = std::function<std::unique_ptr<Conn>()>;
  using Healthy = std::function<bool(const Conn&)>;

  ConnPool(int max, std::int64_t lease_wait_ms, Open open, Healthy healthy = {})
      : max_(max), lease_wait_ms_(lease_wait_ms), open_(std::move(open)), healthy_(std::move(healthy)) {
    TG_ASSERT(max_ >= 1);
    TG_ASSERT(lease_wait_ms_ >= 0);
  }
  ConnPool(const ConnPool&) = delete;
  ConnPool& operator=(const ConnPool&) = delete;

  class Lease {
   public:
    Lease(ConnPool& pool, std::unique_ptr<Conn> conn) : pool_(&pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) pool_->give_back(std::move(conn_));
    }
    Conn& operator*() { return *conn_; }

   private:
    ConnPool* pool_;
    std::unique_ptr<Conn> conn_;
  };

  // A connection, or `unavailable` when none came free within lease_wait_ms.
  Result<Lease> lease() {
    MutexLock lock(mu_);
    if (!cv_.wait_for(mu_, std::chrono::milliseconds(lease_wait_ms_),
                      [&]() REQUIRES(mu_) { return !idle_.empty() || open_count_ < max_; })) {
      return Error::make(Code::unavailable, "no database connection came free within " +
                                                std::to_string(lease_wait_ms_) + " ms (all " +
                                                std::to_string(max_) + " are busy)");
    }
    if (!idle_.empty()) {
      auto conn = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(conn));
    }
    ++open_count_;
    lock.unlock();
    try {
      return Lease(*this, open_());
    } catch (...) {
      MutexLock relock(mu_);
      --open_count_;
      cv_.notify_one();
      throw;
    }
  }

 private:
  void give_back(std::unique_ptr<Conn> conn) {
    const bool keep = !healthy_ || healthy_(*conn);
    if (!keep) conn.reset();  // closed outside the lock's critical work below
    MutexLock lock(mu_);
    if (keep) {
      idle_.push_back(std::move(conn));
    } else {
      --open_count_;
    }
    cv_.notify_one();
  }

  const int max_;
  const std::int64_t lease_wait_ms_;
  const Open open_;
  const Healthy healthy_;
  Mutex mu_;
  CondVar cv_;
  std::vector<std::unique_ptr<Conn>> idle_ GUARDED_BY(mu_);
  int open_count_ GUARDED_BY(mu_) = 0;  // idle + leased
};

}  // namespace tollgate
