// The rules of locks, idempotency keys and GCRA rate limits (see coord.h).
#include "coord/coord.h"

#include <algorithm>
#include <limits>

#include "core/checked.h"
#include "core/limits.h"

namespace tollgate::coord {
namespace {

std::int64_t lease_end(std::int64_t now_ms, std::int64_t ttl_ms) {
  TG_ASSERT(ttl_ms >= 1 && ttl_ms <= limits::kLockTtlMsMax && ttl_ms <= limits::kIdempotencyTtlMsMax);
  const auto end = checked_add(now_ms, ttl_ms);
  TG_ASSERT(end.has_value());  // validated ttls are at most a day; now is a real time
  return *end;
}

Error with_expiry(Code code, std::string detail, std::int64_t expires_at_ms) {
  Error e = Error::make(code, std::move(detail));
  e.expires_at_ms = expires_at_ms;
  return e;
}

// Whether `c` names the holder: its owner and, when given, its fence.
bool names_holder(const Lock& lock, const LockCommand& c) {
  return lock.owner == c.owner && (!c.fence || *c.fence == lock.fence);
}

Error not_holder(const Lock& lock, const LockCommand& c, std::int64_t now_ms) {
  std::string why;
  if (!lock.owner) {
    why = "the lock is free";
  } else if (lock.owner != c.owner) {
    why = "another owner holds it now";
  } else if (c.fence && *c.fence != lock.fence) {
    why = "fence " + std::to_string(*c.fence) + " is not the holder's (" + std::to_string(lock.fence) + ")";
  } else {
    why = "its lease ran out " + std::to_string(now_ms - *lock.expires_at_ms) + " ms ago";
  }
  return Error::make(Code::lock_lost, "owner " + c.owner + " does not hold lock " + lock.key + ": " + why);
}

}  // namespace

bool is_held(const Lock& lock, std::int64_t now_ms) {
  return lock.owner.has_value() && lock.expires_at_ms.has_value() && *lock.expires_at_ms > now_ms;
}

std::string_view lock_op_name(LockOp op) {
  switch (op) {
    case LockOp::acquire: return "acquire";
    case LockOp::renew: return "renew";
    case LockOp::release: return "release";
    case LockOp::cancel: return "cancel";
  }
  ::tollgate::assert_fail("unreachable", __FILE__, __LINE__);
}

std::string_view lock_decision_name(LockDecision d) {
  switch (d) {
    case LockDecision::acquired: return "acquired";
    case LockDecision::taken_over: return "taken_over";
    case LockDecision::reacquired: return "reacquired";
    case LockDecision::renewed: return "renewed";
    case LockDecision::released: return "released";
    case LockDecision::cancelled: return "cancelled";
    case LockDecision::nothing_to_cancel: return "nothing_to_cancel";
    case LockDecision::stopped: return "stopped";
  }
  ::tollgate::assert_fail("unreachable", __FILE__, __LINE__);
}

namespace {
Result<LockOutcome> decide_lock_at(const std::optional<Lock>& row, const LockCommand& c, std::int64_t now_ms);
}  // namespace

Result<LockOutcome> decide_lock(const std::optional<Lock>& row, const LockCommand& c, std::int64_t now_ms) {
  auto decided = decide_lock_at(row, c, now_ms);
  if (decided) decided->now_ms = now_ms;
  return decided;
}

namespace {
Result<LockOutcome> decide_lock_at(const std::optional<Lock>& row, const LockCommand& c, std::int64_t now_ms) {
  const bool held = row && is_held(*row, now_ms);
  switch (c.op) {
    case LockOp::acquire: {
      if (held && row->owner != c.owner) {
        return with_expiry(Code::lock_held, "lock " + c.key + " is held by another owner", *row->expires_at_ms);
      }
      Lock lock = row.value_or(Lock{c.key});
      if (held) {  // the same owner again: same fence, lease renewed
        if (lock.cancelled) {  // it was asked to stop: it must not carry on as if nothing happened
          lock.owner.reset();
          lock.expires_at_ms.reset();
          lock.cancelled = false;
          lock.updated_at_ms = now_ms;
          return LockOutcome{std::move(lock), LockDecision::stopped, true};
        }
        lock.expires_at_ms = lease_end(now_ms, c.ttl_ms);
        lock.updated_at_ms = now_ms;
        return LockOutcome{std::move(lock), LockDecision::reacquired, true};
      }
      const bool took_over = row && row->owner.has_value();  // a lease that ran out
      const auto fence = checked_add(lock.fence, 1);
      TG_ASSERT(fence.has_value());
      lock.owner = c.owner;
      lock.fence = *fence;
      lock.expires_at_ms = lease_end(now_ms, c.ttl_ms);
      lock.cancelled = false;
      lock.updated_at_ms = now_ms;
      return LockOutcome{std::move(lock), took_over ? LockDecision::taken_over : LockDecision::acquired, true};
    }
    case LockOp::renew: {
      if (!row) return Error::make(Code::not_found, "no lock " + c.key);
      if (!held || !names_holder(*row, c)) return not_holder(*row, c, now_ms);
      Lock lock = *row;
      lock.updated_at_ms = now_ms;
      if (lock.cancelled) {
        lock.owner.reset();
        lock.expires_at_ms.reset();
        lock.cancelled = false;
        return LockOutcome{std::move(lock), LockDecision::stopped, true};
      }
      lock.expires_at_ms = lease_end(now_ms, c.ttl_ms);
      return LockOutcome{std::move(lock), LockDecision::renewed, true};
    }
    case LockOp::release: {
      if (!row) return Error::make(Code::not_found, "no lock " + c.key);
      // A holder whose lease ran out may still release as long as nobody took the lock over.
      if (!row->owner || !names_holder(*row, c)) return not_holder(*row, c, now_ms);
      Lock lock = *row;
      lock.owner.reset();
      lock.expires_at_ms.reset();
      lock.cancelled = false;
      lock.updated_at_ms = now_ms;
      return LockOutcome{std::move(lock), LockDecision::released, true};
    }
    case LockOp::cancel: {
      if (!row) return Error::make(Code::not_found, "no lock " + c.key);
      if (!held || row->cancelled) return LockOutcome{*row, LockDecision::nothing_to_cancel, false};
      Lock lock = *row;
      lock.cancelled = true;
      lock.updated_at_ms = now_ms;
      return LockOutcome{std::move(lock), LockDecision::cancelled, true};
    }
  }
  ::tollgate::assert_fail("unreachable", __FILE__, __LINE__);
}

}  // namespace

std::string_view idem_state_name(IdemState s) {
  switch (s) {
    case IdemState::started: return "started";
    case IdemState::finished: return "finished";
    case IdemState::abandoned: return "abandoned";
  }
  ::tollgate::assert_fail("unreachable", __FILE__, __LINE__);
}

std::optional<IdemState> parse_idem_state(std::string_view name) {
  if (name == "started") return IdemState::started;
  if (name == "finished") return IdemState::finished;
  if (name == "abandoned") return IdemState::abandoned;
  return std::nullopt;
}

std::string_view idem_decision_name(IdemDecision d) {
  switch (d) {
    case IdemDecision::started: return "started";
    case IdemDecision::replayed: return "replayed";
    case IdemDecision::finished: return "finished";
    case IdemDecision::abandoned: return "abandoned";
  }
  ::tollgate::assert_fail("unreachable", __FILE__, __LINE__);
}

Result<IdempotencyOutcome> decide_idempotency(const std::optional<IdempotencyKey>& row, const IdempotencyCommand& c,
                                              std::int64_t now_ms) {
  if (row && row->fingerprint != c.fingerprint) {
    return Error::make(Code::idempotency_mismatch,
                       "idempotency key " + c.key + " was begun with another fingerprint: a different request");
  }
  // finish and abandon naming an attempt act only on that attempt's claim.
  if (row && c.op != IdemOp::begin && c.attempt && *c.attempt != row->attempt) {
    return Error::make(Code::conflict, "idempotency key " + c.key + ": attempt " + std::to_string(*c.attempt) +
                                           " is not the current claim (attempt " + std::to_string(row->attempt) +
                                           "): its claim ran out and was taken over, or was given back");
  }
  switch (c.op) {
    case IdemOp::begin: {
      if (!row) {
        IdempotencyKey k{c.key, c.fingerprint, IdemState::started, std::nullopt, now_ms, lease_end(now_ms, c.ttl_ms),
                         std::nullopt, 1};
        return IdempotencyOutcome{std::move(k), IdemDecision::started, true, false};
      }
      if (row->state == IdemState::finished) return IdempotencyOutcome{*row, IdemDecision::replayed, false, false};
      if (row->state == IdemState::started && row->expires_at_ms > now_ms) {
        return with_expiry(Code::in_progress, "idempotency key " + c.key + " is claimed by a request still running",
                           row->expires_at_ms);
      }
      // A new claim: after an abandon (nothing was done), or over a claim that ran out unfinished
      // (something may have been done: taken_over).
      const bool taken_over = row->state == IdemState::started;
      IdempotencyKey k = *row;
      const auto attempt = checked_add(k.attempt, 1);
      TG_ASSERT(attempt.has_value());
      k.attempt = *attempt;
      k.state = IdemState::started;
      if (!taken_over) k.created_at_ms = now_ms;
      k.expires_at_ms = lease_end(now_ms, c.ttl_ms);
      return IdempotencyOutcome{std::move(k), IdemDecision::started, true, taken_over};
    }
    case IdemOp::finish: {
      if (!row) return Error::make(Code::not_found, "no idempotency key " + c.key + ": begin it first");
      if (row->state == IdemState::finished) return IdempotencyOutcome{*row, IdemDecision::finished, false, false};
      if (row->state == IdemState::abandoned) {
        return Error::make(Code::conflict, "idempotency key " + c.key + " was abandoned: begin it again first");
      }
      IdempotencyKey k = *row;
      k.state = IdemState::finished;
      k.response_json = c.response_json;
      k.finished_at_ms = now_ms;
      k.expires_at_ms = now_ms;
      return IdempotencyOutcome{std::move(k), IdemDecision::finished, true, false};
    }
    case IdemOp::abandon: {
      if (!row) return Error::make(Code::not_found, "no idempotency key " + c.key + ": nothing to abandon");
      if (row->state == IdemState::finished) {
        return Error::make(Code::conflict, "idempotency key " + c.key +
                                               " is finished: its response is replayed and cannot be abandoned");
      }
      if (row->state == IdemState::abandoned) return IdempotencyOutcome{*row, IdemDecision::abandoned, false, false};
      IdempotencyKey k = *row;
      k.state = IdemState::abandoned;
      k.expires_at_ms = now_ms;
      return IdempotencyOutcome{std::move(k), IdemDecision::abandoned, true, false};
    }
  }
  ::tollgate::assert_fail("unreachable", __FILE__, __LINE__);
}

std::int64_t GcraPolicy::emission_ns() const {
  TG_ASSERT(limit >= 1 && limit <= limits::kRateLimitMax && period_ms >= 1 && period_ms <= limits::kRateLimitPeriodMsMax);
  const std::int64_t period = period_ns();
  return (period + limit - 1) / limit;
}

GcraDecision gcra_check(const GcraPolicy& policy, std::optional<std::int64_t> tat_ns, std::int64_t cost,
                        std::int64_t now_ms) {
  TG_ASSERT(cost >= 1 && cost <= policy.limit);
  const std::int64_t t = policy.emission_ns();
  // The burst tolerance: `limit` units at once. limit·t ≥ period (t rounds up), so the sustained
  // rate is at most limit per period; limit·t ≤ period + limit < 2^46.
  const std::int64_t window = policy.limit * t;
  TG_ASSERT(now_ms >= 0 && now_ms <= std::numeric_limits<std::int64_t>::max() / 2'000'000);  // ns until 2116+
  const std::int64_t now = now_ms * 1'000'000;
  const std::int64_t tat = std::max(tat_ns.value_or(now), now);
  const std::int64_t new_tat = tat + cost * t;
  const auto ceil_ms = [](std::int64_t ns) { return (ns + 999'999) / 1'000'000; };
  GcraDecision d;
  if (new_tat - now > window) {  // beyond the burst tolerance: refused, nothing changes
    d.allowed = false;
    d.retry_after_ms = std::max<std::int64_t>(1, ceil_ms(new_tat - window - now));
    d.remaining = (window - (tat - now)) / t;
    d.reset_after_ms = ceil_ms(tat - now);
    return d;
  }
  d.allowed = true;
  d.new_tat_ns = new_tat;
  d.remaining = (window - (new_tat - now)) / t;
  d.reset_after_ms = ceil_ms(new_tat - now);
  return d;
}

}  // namespace tollgate::coord
