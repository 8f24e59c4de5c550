// tollgate coordination: the in-memory GCRA table of a `local` rate-limit policy.
//
// One instance's budget per key (coord/coord.h's gcra_check), for low-risk flows where an attacker
// spreading attempts over instances is acceptable. The table is bounded: at most `max_keys` keys.
// A key whose tat is in the past is idle (it is as if it had never been seen: a fresh key has the
// same full budget), so idle keys are dropped first; when every key is busy, the least recently
// checked one is evicted (counted in evictions()) — it forgets that key's spent budget, a bounded
// under-count that memory must pay for: memory never grows with an attacker's number of keys.
//
// Thread safety: every method may be called from any thread (one mutex per table).
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>

#include "coord/coord.h"
#include "core/thread_annotations.h"

namespace tollgate::coord {

class LocalLimiter {
 public:
  LocalLimiter(GcraPolicy policy, std::size_t max_keys);

  // Counts `cost` (1..limit, asserted) for `key` at now_ms.
  GcraDecision check(std::string_view key, std::int64_t cost, std::int64_t now_ms);
  // What check() would decide now, without counting anything or touching the table's order.
  GcraDecision peek(std::string_view key, std::int64_t cost, std::int64_t now_ms) const;
  // Forgets `key` (its budget is full again).
  void reset(std::string_view key);

  std::size_t size() const;
  std::uint64_t evictions() const;
  const GcraPolicy& policy() const { return policy_; }

 private:
  struct Entry {
    std::int64_t tat_ns = 0;
    std::list<std::string>::iterator recency;  // in recency_, most recent first
  };
  void make_room(std::int64_t now_ns) REQUIRES(mu_);

  const GcraPolicy policy_;
  const std::size_t max_keys_;
  mutable Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ GUARDED_BY(mu_);
  std::list<std::string> recency_ GUARDED_BY(mu_);
  std::uint64_t evictions_ GUARDED_BY(mu_) = 0;
};

}  // namespace tollgate::coord
