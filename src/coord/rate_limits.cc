#include "coord/rate_limits.h"

#include <utility>

#include "core/checked.h"
#include "ledger/ledger.h"

namespace tollgate::coord {
namespace {

// Counts the decision in its policy and answers it: the decision, or rate_limited.
Result<GcraDecision> counted(RatePolicy& p, const GcraDecision& d) {
  switch (rate_outcome(d)) {
    case RateOutcome::allowed:
      p.allowed.fetch_add(1, std::memory_order_relaxed);
      return d;
    case RateOutcome::limited:
      p.limited.fetch_add(1, std::memory_order_relaxed);
      break;
  }
  Error e = Error::make(Code::rate_limited, "rate limit " + p.name + " refused the attempt: retry in " +
                                                std::to_string(d.retry_after_ms) + " ms");
  e.retry_after_ms = d.retry_after_ms;
  return e;
}

}  // namespace

RateOutcome rate_outcome(const GcraDecision& decision) {
  return decision.allowed ? RateOutcome::allowed : RateOutcome::limited;
}

RateLimits::RateLimits(Ledger& ledger, const Clock& clock, const RatePolicies* policies)
    : ledger_(ledger), clock_(clock), policies_(policies) {}

Result<RatePolicy*> RateLimits::find(std::string_view name) const {
  if (auto s = check_id(name, "policy"); !s) return s.error();
  RatePolicy* p = policies_ ? policies_->find(name) : nullptr;
  if (p == nullptr) {
    return Error::make(Code::not_found, "rate-limit policy " + std::string(name) +
                                            " is not configured (see [ratelimits.NAME] in the configuration)");
  }
  return p;
}

std::optional<Result<GcraDecision>> RateLimits::check(RatePolicy& p, const std::string& key, std::int64_t cost,
                                                      CheckDone done) {
  TG_ASSERT(cost >= 1 && cost <= p.gcra.limit);
  if (!p.shared) {
    TG_ASSERT(p.local != nullptr);  // every local policy has its table (policies.h)
    return counted(p, p.local->check(key, cost, clock_.now_ms()));
  }
  ledger_.submit(RateLimitCommand{RateOp::check, p.name, p.gcra, key, cost},
                 [&p, done = std::move(done)](CommandResult r) {
                   if (!r) return done(r.error());
                   const auto* o = std::get_if<RateLimitOutcome>(&r.value());
                   TG_ASSERT(o != nullptr);  // a rate-limit command answers a RateLimitOutcome
                   done(counted(p, o->decision));
                 });
  return std::nullopt;
}

std::optional<Status> RateLimits::reset(RatePolicy& p, const std::string& key, ResetDone done) {
  if (!p.shared) {
    TG_ASSERT(p.local != nullptr);
    p.local->reset(key);
    return ok_status();
  }
  ledger_.submit(RateLimitCommand{RateOp::reset, p.name, p.gcra, key, 1}, [done = std::move(done)](CommandResult r) {
    if (!r) return done(r.error());
    done(ok_status());
  });
  return std::nullopt;
}

}  // namespace tollgate::coord
