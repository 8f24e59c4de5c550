// tollgate core: time is injected.
//
// Every decision about time (hold expiry, reaper deadlines) reads a Clock, never the system clock
// directly, so tests drive time instead of sleeping. Times are milliseconds since the Unix epoch,
// UTC (`_ms` in every name that carries one).
//
// Thread safety: every Clock is safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time in milliseconds since the Unix epoch.
  virtual std::int64_t now_ms() const = 0;
};

// The machine's real-time clock.
class SystemClock final : public Clock {
 public:
  std::int64_t now_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that only moves when a test moves it.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_ms = 1'767'225'600'000) : now_ms_(start_ms) {}  // 2026-01-01
  std::int64_t now_ms() const override { return now_ms_.load(std::memory_order_acquire); }
  void advance_ms(std::int64_t delta_ms) { now_ms_.fetch_add(delta_ms, std::memory_order_acq_rel); }
  void set_ms(std::int64_t t_ms) { now_ms_.store(t_ms, std::memory_order_release); }

 private:
  std::atomic<std::int64_t> now_ms_;
};

// RFC 3339 UTC with milliseconds: "2026-01-01T00:00:00.000Z".
std::string format_rfc3339_ms(std::int64_t t_ms);
// The same into `out` (24 characters, "2026-01-01T00:00:00.000Z"); returns how many were written.
std::size_t format_rfc3339_ms(std::int64_t t_ms, char (&out)[32]);
// An RFC 3339 date-time ("2026-01-01T00:00:00Z", "2026-01-01T01:00:00.5+01:00"; `T`/`t`, `Z`/`z`),
// as ms since the epoch, fractions past the millisecond dropped; years 1970–9999. nullopt for
// anything else (a date alone, no offset, a 61st second, February 30th).
std::optional<std::int64_t> parse_rfc3339_ms(std::string_view text);

}  // namespace tollgate
