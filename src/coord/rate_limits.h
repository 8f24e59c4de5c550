// tollgate coordination: the use case of rate limits — check and reset one key of a configured
// policy (api.md, Rate limits).
//
// The edge names a policy and a key; RateLimits chooses where the budget lives: a `local` policy
// is decided in this instance's memory (LocalLimiter) at once, on the calling thread; a `shared`
// one is a RateLimitCommand in the ledger's batches (one budget for every instance), answered
// once it is durable. Either way each check is counted once, by outcome, in its policy's counters
// (policies.h), which GET /v1/ratelimits and /metrics read.
//
// Thread safety: every method may be called from any thread. A shared policy's `done` runs on the
// ledger's callback thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "coord/coord.h"
#include "coord/policies.h"
#include "core/clock.h"
#include "core/result.h"

namespace tollgate {
class Ledger;
}

namespace tollgate::coord {

// What a check decided: the attempt is admitted, or refused until retry_after_ms.
enum class RateOutcome : std::uint8_t { allowed, limited };
RateOutcome rate_outcome(const GcraDecision& decision);

class RateLimits {
 public:
  using CheckDone = std::function<void(Result<GcraDecision>)>;
  using ResetDone = std::function<void(Status)>;

  // `ledger` and `clock` must outlive this, and `policies` when given (null: none is configured).
  RateLimits(Ledger& ledger, const Clock& clock, const RatePolicies* policies);

  // The policy named `name`: invalid_request when the name is malformed, not_found (naming where
  // policies are configured) when no policy has it.
  Result<RatePolicy*> find(std::string_view name) const;
  // Every configured policy (none when null).
  const RatePolicies* policies() const { return policies_; }

  // One attempt of `cost` (1..policy.gcra.limit, checked by the caller) for `key`. The answer is the
  // decision when allowed, rate_limited (with retry_after_ms) when limited, or a refusal of the
  // batch (unavailable, overloaded …) for a shared policy. Local: returned at once and `done` is
  // never called. Shared: nullopt is returned and `done` is called once, after the batch.
  std::optional<Result<GcraDecision>> check(RatePolicy& policy, const std::string& key, std::int64_t cost,
                                            CheckDone done);
  // Forgets `key`'s spent budget: at once for a local policy (returned; `done` never called), through
  // a batch for a shared one (nullopt returned; `done` called once, after it).
  std::optional<Status> reset(RatePolicy& policy, const std::string& key, ResetDone done);

 private:
  Ledger& ledger_;
  const Clock& clock_;
  const RatePolicies* const policies_;  // constant after construction; may be null
};

}  // namespace tollgate::coord
