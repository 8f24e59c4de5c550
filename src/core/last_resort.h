// tollgate core: the last-resort catch — where an exception that escaped a handler or a callback ends.
//
// Expected failures are values (result.h) and bugs are assertions; an exception that reaches one of
// the threads' outer loops (an I/O thread, a reader thread, the group-commit thread, the event
// waiters' thread) is neither: it is a bug that did not assert (a throwing library call nobody
// guarded). Without a catch it reaches std::terminate and takes every request of the instance down
// with it. run_last_resort() catches it there instead, logs it (level error, where and what) and
// counts it — tollgate_http_unhandled_exceptions_total on /metrics, an alert, because reaching it
// is a bug — and the thread goes on serving. The request whose work threw is answered 500 `internal`
// by its reply guard (http/api.cc), not here: this layer knows no requests.
//
// Thread safety: every function may be called from any thread; the count is one process-wide atomic.
#pragma once

#include <cstdint>
#include <string_view>

namespace tollgate {

// Call only inside a catch block: logs the exception being handled (its what() when it is a
// std::exception) with `where`, and counts it. Never throws.
void note_unhandled_exception(std::string_view where) noexcept;

// Exceptions noted since the process started.
std::uint64_t unhandled_exceptions_total() noexcept;

// Runs `work()`; an exception it throws is noted (above) and swallowed. False when it threw.
template <typename Work>
bool run_last_resort(std::string_view where, Work&& work) noexcept {
  try {
    work();
    return true;
  } catch (...) {
    note_unhandled_exception(where);
    return false;
  }
}

}  // namespace tollgate
