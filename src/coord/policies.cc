#include "coord/policies.h"

#include "core/limits.h"

namespace tollgate::coord {

RatePolicies::RatePolicies(const std::vector<RatePolicySpec>& specs) {
  TG_ASSERT(specs.size() <= limits::kRatePoliciesMax);
  for (const RatePolicySpec& s : specs) {
    auto p = std::make_unique<RatePolicy>();
    p->name = s.name;
    p->gcra = s.gcra;
    p->shared = s.shared;
    if (!s.shared) {
      p->local = std::make_unique<LocalLimiter>(
          s.gcra, s.local_keys_max == 0 ? limits::kLocalRateKeysMaxDefault : s.local_keys_max);
    }
    policies_.emplace(s.name, std::move(p));
  }
}

RatePolicy* RatePolicies::find(std::string_view name) const {
  auto it = policies_.find(name);
  return it == policies_.end() ? nullptr : it->second.get();
}

}  // namespace tollgate::coord
