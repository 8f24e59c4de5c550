// tollgate coordination: the rate-limit policies an instance serves — each named, with its GCRA
// limit and period, kept `shared` (in the store, one budget for every instance: RateLimitCommand)
// or `local` (this instance's bounded memory: LocalLimiter) — and their decision counters.
//
// Thread safety: the set is constant after construction; limiters and counters are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "coord/coord.h"
#include "coord/local_limiter.h"

namespace tollgate::coord {

struct RatePolicySpec {
  std::string name;
  GcraPolicy gcra;
  bool shared = true;
  std::size_t local_keys_max = 0;  // local: the table's bound (0: limits::kLocalRateKeysMaxDefault)
};

struct RatePolicy {
  std::string name;
  GcraPolicy gcra;
  bool shared = true;
  std::unique_ptr<LocalLimiter> local;  // local policies only
  std::atomic<std::uint64_t> allowed{0}, limited{0};  // decisions answered by this instance
};

class RatePolicies {
 public:
  RatePolicies() = default;
  explicit RatePolicies(const std::vector<RatePolicySpec>& specs);

  // The policy, or nullptr when none has that name.
  RatePolicy* find(std::string_view name) const;
  // Every policy, by name.
  const std::map<std::string, std::unique_ptr<RatePolicy>, std::less<>>& all() const { return policies_; }

 private:
  std::map<std::string, std::unique_ptr<RatePolicy>, std::less<>> policies_;
};

}  // namespace tollgate::coord
