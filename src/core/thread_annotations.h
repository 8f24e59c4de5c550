// tollgate core: Clang's thread-safety analysis, and a mutex it understands.
//
// A member a mutex protects is declared GUARDED_BY(that mutex); a function that expects the mutex
// held is declared REQUIRES(it). Clang (-Wthread-safety, on by default for clang builds: CMake
// option TOLLGATE_THREAD_SAFETY) then refuses, at compile time, any read or write of such a member
// without the mutex held, and any call of such a function without it. With gcc every macro is
// empty and the types below are plain wrappers of the standard ones (no cost, no check).
//
// libstdc++'s std::mutex carries no annotations, so the analysis cannot see it locked: guarded
// state uses tollgate::Mutex, locked by a tollgate::MutexLock (scoped, like std::unique_lock:
// it may unlock and lock again), and waited on with a tollgate::CondVar (std::condition_variable
// over the Mutex's std::mutex: the same cost as before, no condition_variable_any).
//
// A wait's predicate is a lambda, which the analysis checks as a function of its own: one that
// reads guarded members says so, `[&]() REQUIRES(mu_) { return stopping_; }`.
//
// NO_THREAD_SAFETY_ANALYSIS turns the check off for one function: only where the analysis cannot
// express the locking, with a comment saying why.
//
// Thread safety: Mutex, MutexLock and CondVar are what std::mutex, std::unique_lock and
// std::condition_variable are (a MutexLock belongs to the thread that made it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define TOLLGATE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TOLLGATE_THREAD_ANNOTATION(x)
#endif

// A type that is a lock ("mutex").
#define CAPABILITY(x) TOLLGATE_THREAD_ANNOTATION(capability(x))
// A type whose objects hold a lock from construction to destruction (MutexLock).
#define SCOPED_CAPABILITY TOLLGATE_THREAD_ANNOTATION(scoped_lockable)
// A member read or written only with the given mutex held.
#define GUARDED_BY(x) TOLLGATE_THREAD_ANNOTATION(guarded_by(x))
// A pointer member whose pointee is read or written only with the given mutex held.
#define PT_GUARDED_BY(x) TOLLGATE_THREAD_ANNOTATION(pt_guarded_by(x))
// A function called only with the given mutexes held (it neither locks nor unlocks them).
#define REQUIRES(...) TOLLGATE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function called only without the given mutexes held (it locks them itself).
#define EXCLUDES(...) TOLLGATE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that returns with the given mutexes (none: the object itself) locked.
#define ACQUIRE(...) TOLLGATE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
// A function that returns with the given mutexes (none: the object itself) unlocked.
#define RELEASE(...) TOLLGATE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// TRY_ACQUIRE(result, mutexes...): a function that returns `result` when it locked the mutexes
// (none named: the object itself), and any other value when it did not.
#define TRY_ACQUIRE(...) TOLLGATE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// The function is not checked (say why at each use).
#define NO_THREAD_SAFETY_ANALYSIS TOLLGATE_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace tollgate {

// A std::mutex the analysis can see locked and unlocked.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex locked from construction to destruction (or to unlock(); lock() takes it again).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (locked_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Unlocks before the end of the scope (the lock must be held).
  void unlock() RELEASE() {
    locked_ = false;
    mu_.unlock();
  }
  // Locks again after unlock().
  void lock() ACQUIRE() {
    mu_.lock();
    locked_ = true;
  }

 private:
  Mutex& mu_;
  bool locked_ = true;
};

// A std::condition_variable waited on with a Mutex held (by a MutexLock or otherwise): each wait
// unlocks it while blocked and holds it again on return, as std::condition_variable::wait does.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

  // The analysis cannot see that std::condition_variable unlocks and relocks the std::mutex
  // inside: to it, `mu` is held throughout, which is what the caller observes. Every wait takes a
  // predicate (there is no bare wait): a wake-up that came before the wait, or a spurious one,
  // cannot then be mistaken for the condition. `stop_waiting` is called with `mu` held (annotate
  // the lambda REQUIRES(mu)).
  template <class Predicate>
  void wait(Mutex& mu, Predicate stop_waiting) REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted held(mu);
    cv_.wait(held.lock, std::move(stop_waiting));
  }
  // Returns stop_waiting() (false: the deadline passed first).
  template <class Clock, class Duration, class Predicate>
  bool wait_until(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline, Predicate stop_waiting)
      REQUIRES(mu) NO_THREAD_SAFETY_ANALYSIS {
    Adopted held(mu);
    return cv_.wait_until(held.lock, deadline, std::move(stop_waiting));
  }
  // Returns stop_waiting() (false: the timeout passed first).
  template <class Rep, class Period, class Predicate>
  bool wait_for(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout, Predicate stop_waiting) REQUIRES(mu)
      NO_THREAD_SAFETY_ANALYSIS {
    Adopted held(mu);
    return cv_.wait_for(held.lock, timeout, std::move(stop_waiting));
  }

 private:
  // The caller's lock as the std::unique_lock a std::condition_variable waits with; given back
  // (still locked, never unlocked here) when the wait returns or a predicate throws.
  struct Adopted {
    explicit Adopted(Mutex& mu) : lock(mu.mu_, std::adopt_lock) {}
    ~Adopted() { lock.release(); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;
    std::unique_lock<std::mutex> lock;
  };
  std::condition_variable cv_;
};

}  // namespace tollgate
