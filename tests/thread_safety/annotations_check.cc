// Compiled (never linked or run) by the ThreadSafety.* tests (cmake/thread_safety_check.cmake), with
// clang -fsyntax-only -Wthread-safety -Werror=thread-safety:
//   - as it is (ThreadSafety.Correct), it must compile: every use below is a correct one, so a
//     failure of the other checks is the analysis refusing their violation, not something else;
//   - with -DTOLLGATE_CHECK_<name>, one deliberate violation is added, and the compile must fail
//     with the analysis's error naming it.
#include <chrono>
#include <cstdint>
#include <memory>

#include "core/thread_annotations.h"

namespace {

class Counter {
 public:
  void add(std::int64_t n) {
    tollgate::MutexLock lock(mu_);
    total_ += n;
    *last_ = n;
    changed_.notify_all();
  }

  std::int64_t total() const {
    tollgate::MutexLock lock(mu_);
    return total_;
  }

  // Waits until the total reaches `at_least` or 10 ms passed.
  bool wait_for_total(std::int64_t at_least) {
    tollgate::MutexLock lock(mu_);
    return changed_.wait_for(mu_, std::chrono::milliseconds(10), [&]() REQUIRES(mu_) { return total_ >= at_least; });
  }

  void reset() {
    tollgate::MutexLock lock(mu_);
    reset_locked();
    lock.unlock();
    lock.lock();  // held again: the member may be written
    total_ = 0;
  }

#ifdef TOLLGATE_CHECK_GuardedMember
  std::int64_t unlocked_total() const { return total_; }  // error: reading total_ without mu_
#endif
#ifdef TOLLGATE_CHECK_RequiresCaller
  void unlocked_reset() { reset_locked(); }  // error: calling reset_locked() without mu_
#endif
#ifdef TOLLGATE_CHECK_AfterUnlock
  void add_after_unlock(std::int64_t n) {
    tollgate::MutexLock lock(mu_);
    lock.unlock();
    total_ += n;  // error: writing total_ after the lock was given up
  }
#endif

 private:
  void reset_locked() REQUIRES(mu_) {
    total_ = 0;
    *last_ = 0;
  }

  mutable tollgate::Mutex mu_;
  tollgate::CondVar changed_;
  std::int64_t total_ GUARDED_BY(mu_) = 0;
  std::unique_ptr<std::int64_t> last_ PT_GUARDED_BY(mu_) = std::make_unique<std::int64_t>(0);
};

}  // namespace

// Uses every function above, so that none is unused.
std::int64_t thread_safety_check_use() {
  Counter c;
  c.add(2);
  c.reset();
  return c.total() + (c.wait_for_total(0) ? 1 : 0);
}
