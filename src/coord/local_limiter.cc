// The bounded in-memory GCRA table (see local_limiter.h).
#include "coord/local_limiter.h"

#include "core/limits.h"

namespace tollgate::coord {

LocalLimiter::LocalLimiter(GcraPolicy policy, std::size_t max_keys) : policy_(policy), max_keys_(max_keys) {
  TG_ASSERT(max_keys_ >= 1);
  (void)policy_.emission_ns();  // asserts the policy's bounds
}

GcraDecision LocalLimiter::check(std::string_view key, std::int64_t cost, std::int64_t now_ms) {
  MutexLock lock(mu_);
  auto it = entries_.find(std::string(key));
  std::optional<std::int64_t> tat;
  if (it != entries_.end()) tat = it->second.tat_ns;
  GcraDecision d = gcra_check(policy_, tat, cost, now_ms);
  if (!d.allowed) {
    // A refused check is a check: the key being hammered is the last one to forget.
    if (it != entries_.end()) recency_.splice(recency_.begin(), recency_, it->second.recency);
    return d;
  }
  if (it == entries_.end()) {
    if (entries_.size() >= max_keys_) make_room(now_ms * 1'000'000);
    recency_.emplace_front(key);
    it = entries_.emplace(std::string(key), Entry{*d.new_tat_ns, recency_.begin()}).first;
  } else {
    it->second.tat_ns = *d.new_tat_ns;
    recency_.splice(recency_.begin(), recency_, it->second.recency);
  }
  return d;
}

GcraDecision LocalLimiter::peek(std::string_view key, std::int64_t cost, std::int64_t now_ms) const {
  MutexLock lock(mu_);
  auto it = entries_.find(std::string(key));
  std::optional<std::int64_t> tat;
  if (it != entries_.end()) tat = it->second.tat_ns;
  return gcra_check(policy_, tat, cost, now_ms);
}

void LocalLimiter::make_room(std::int64_t now_ns) {
  // Idle keys first, from the least recently checked end, looking at a bounded number of them.
  std::size_t scanned = 0;
  for (auto r = recency_.end(); r != recency_.begin() && scanned < limits::kLocalRateScanKeysMax; ++scanned) {
    --r;
    auto e = entries_.find(*r);
    if (e->second.tat_ns <= now_ns) {
      entries_.erase(e);
      r = recency_.erase(r);
      return;
    }
  }
  // Every key looked at is busy: evict the least recently checked one.
  entries_.erase(recency_.back());
  recency_.pop_back();
  ++evictions_;
}

void LocalLimiter::reset(std::string_view key) {
  MutexLock lock(mu_);
  auto it = entries_.find(std::string(key));
  if (it == entries_.end()) return;
  recency_.erase(it->second.recency);
  entries_.erase(it);
}

std::size_t LocalLimiter::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

std::uint64_t LocalLimiter::evictions() const {
  MutexLock lock(mu_);
  return evictions_;
}

}  // namespace tollgate::coord
