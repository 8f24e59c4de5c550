// tollgate core: expected failures as values.
//
// Every operation that can fail because of what a caller asked for (a bad amount, an unknown hold,
// not enough credits) returns a Result<T>: either the value or an Error with a precise, stable Code.
// Bugs are not Errors: they are assertions (TG_ASSERT) and stop the process.
//
// Codes are chosen by what the caller should do next:
//   - fix the request and do not retry:           invalid_request, not_found, idempotency_mismatch, conflict, overflow
//   - wait for the state to change, then retry:   insufficient_credits, too_many_holds, account_frozen
//   - the hold has ended; nothing to retry:       hold_committed, hold_released, hold_expired
//   - ask for less (or nothing more):             refund_exceeds_charge
//   - retry the same request (same id) later:     overloaded, unavailable, storage_full
//   - retry on another instance, or after an operator restarted this one: storage_failed
//   - report it:                                  internal
//   - bring a valid key:                          unauthorized, forbidden
//   - sign it with a configured secret, now:      invalid_signature (a payment provider's event)
// The string form of a Code (code_name) is the `code` field of the HTTP problem document: stable.
//
// Thread safety: plain values; safe to copy between threads.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace tollgate {

// Assertions for programmer errors. Never fire on user input; always on, also in release builds,
// because a ledger that continues after a broken invariant does more damage than one that stops.
[[noreturn]] inline void assert_fail(const char* expr, const char* file, int line) {
  std::fprintf(stderr, "tollgate: assertion failed: %s at %s:%d\n", expr, file, line);
  std::abort();
}
#define TG_ASSERT(expr) ((expr) ? (void)0 : ::tollgate::assert_fail(#expr, __FILE__, __LINE__))

enum class Code : std::uint8_t {
  ok = 0,
  invalid_request,       // malformed input: bad amount, bad id, amount > hold, ... (HTTP 400)
  not_found,             // no such account / hold (HTTP 404)
  conflict,              // exists already with other settings (HTTP 409)
  idempotency_mismatch,  // same request id / reference, other parameters (HTTP 422)
  insufficient_credits,  // not enough available credits (HTTP 409)
  too_many_holds,        // max_active_holds reached (HTTP 409)
  account_frozen,        // the account is frozen: no new holds, no debits (HTTP 409)
  hold_committed,        // the hold is committed; it cannot be released or changed (HTTP 409)
  hold_released,         // the hold is released; it cannot be committed or extended (HTTP 409)
  hold_expired,          // the hold expired (late commit rejected, or extend) (HTTP 409)
  overflow,              // a balance would leave the int64 range (HTTP 422)
  overloaded,            // the write queue is full; retry later with the same id (HTTP 503)
  unavailable,           // the database cannot be reached; nothing happened; retry (HTTP 503)
  internal,              // a bug or corruption; the operation did not happen (HTTP 500)
  unauthorized,          // no key, or a key that is unknown or revoked (HTTP 401)
  forbidden,             // an account key on an admin call (HTTP 403)
  lock_held,             // the lock is held by another owner (HTTP 409, with expires_at)
  lock_lost,             // not the lock's holder (any more): its lease ran out or it was taken over (HTTP 409)
  lock_cancelled,        // the lock was cancelled: the holder must stop; the lock is now free (HTTP 409)
  in_progress,           // the idempotency key is claimed by a request still running (HTTP 409, with expires_at)
  rate_limited,          // the rate limit refused the attempt (HTTP 429, with retry_after_ms)
  storage_full,          // the database's disk is full: nothing was written; retry when space returns (HTTP 503)
  storage_failed,        // a flush to disk failed: this instance refuses writes until restarted (HTTP 503)
  refund_exceeds_charge, // a refund of more than the hold charged and was not refunded yet (HTTP 409)
  invalid_signature,     // a payment provider's event whose signature is missing, wrong or stale (HTTP 400)
};

constexpr std::string_view code_name(Code code) {
  switch (code) {
    case Code::ok: return "ok";
    case Code::invalid_request: return "invalid_request";
    case Code::not_found: return "not_found";
    case Code::conflict: return "conflict";
    case Code::idempotency_mismatch: return "idempotency_mismatch";
    case Code::insufficient_credits: return "insufficient_credits";
    case Code::too_many_holds: return "too_many_holds";
    case Code::account_frozen: return "account_frozen";
    case Code::hold_committed: return "hold_committed";
    case Code::hold_released: return "hold_released";
    case Code::hold_expired: return "hold_expired";
    case Code::overflow: return "overflow";
    case Code::overloaded: return "overloaded";
    case Code::unavailable: return "unavailable";
    case Code::internal: return "internal";
    case Code::unauthorized: return "unauthorized";
    case Code::forbidden: return "forbidden";
    case Code::lock_held: return "lock_held";
    case Code::lock_lost: return "lock_lost";
    case Code::lock_cancelled: return "lock_cancelled";
    case Code::in_progress: return "in_progress";
    case Code::rate_limited: return "rate_limited";
    case Code::storage_full: return "storage_full";
    case Code::storage_failed: return "storage_failed";
    case Code::refund_exceeds_charge: return "refund_exceeds_charge";
    case Code::invalid_signature: return "invalid_signature";
  }
  return "internal";
}

// The messages a kiosk can show as they are when a reservation or a debit is refused for want of
// credits (api.md): one when nothing is available, one naming both figures when some are.
inline constexpr std::string_view kInsufficientCreditsDetail =
    "No credits available. Another device may be using this account right now.";
inline std::string insufficient_credits_detail(std::int64_t available, std::int64_t requested) {
  if (available <= 0) return std::string(kInsufficientCreditsDetail);
  return "Not enough credits: " + std::to_string(available) + " available, " + std::to_string(requested) +
         " needed.";
}

struct Error {
  Code code = Code::internal;
  std::string detail;  // human-readable: names what was wrong
  // For insufficient_credits: the account's available credits at the moment of the decision and
  // the amount that was asked for.
  std::optional<std::int64_t> available;
  std::optional<std::int64_t> requested;
  // For lock_held and in_progress: when the holder's lease (the claim) runs out (ms since the epoch).
  std::optional<std::int64_t> expires_at_ms;
  // For rate_limited: how long until the same attempt would be admitted.
  std::optional<std::int64_t> retry_after_ms;
  // For insufficient_credits: the account's reserved credits at the decision (other holds').
  std::optional<std::int64_t> reserved;

  static Error make(Code code, std::string detail) {
    TG_ASSERT(code != Code::ok);
    return Error{code, std::move(detail), std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  }
  static Error insufficient(std::int64_t available, std::int64_t requested, std::int64_t reserved) {
    return Error{Code::insufficient_credits, insufficient_credits_detail(available, requested), available, requested,
                 std::nullopt, std::nullopt, reserved};
  }
};

// An insufficient_credits refusal whose account had the credits, but reserved by other holds:
// available + reserved ≥ requested. Many of these while balances are not low is the signature of a
// race or a client bug (a second hold taken for one action), not of customers out of credits.
inline bool held_by_other_holds(const Error& e) {
  return e.code == Code::insufficient_credits && e.available && e.requested && e.reserved && *e.reserved > 0 &&
         *e.available + *e.reserved >= *e.requested;  // each bounded by 2^53: no overflow
}

inline Error invalid(std::string detail) { return Error::make(Code::invalid_request, std::move(detail)); }

// Result<T>: a T or an Error. Access to the wrong alternative is a bug (asserted).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}     // NOLINT(google-explicit-constructor)
  // From anything a T can be made of (an alternative of a variant T, say).
  template <typename U>
    requires(!std::is_same_v<std::decay_t<U>, T> && !std::is_same_v<std::decay_t<U>, Error> &&
             !std::is_same_v<std::decay_t<U>, Result> && std::is_constructible_v<T, U &&>)
  Result(U&& value) : v_(std::in_place_index<0>, std::forward<U>(value)) {}  // NOLINT

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const T& value() const& { TG_ASSERT(ok()); return std::get<0>(v_); }
  T& value() & { TG_ASSERT(ok()); return std::get<0>(v_); }
  T&& value() && { TG_ASSERT(ok()); return std::get<0>(std::move(v_)); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const& { TG_ASSERT(!ok()); return std::get<1>(v_); }
  Error&& error() && { TG_ASSERT(!ok()); return std::get<1>(std::move(v_)); }
  Code code() const { return ok() ? Code::ok : error().code; }

 private:
  std::variant<T, Error> v_;
};

// Status: a Result without a value.
struct Ok {};
using Status = Result<Ok>;
inline Status ok_status() { return Ok{}; }

}  // namespace tollgate
