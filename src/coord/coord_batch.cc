// The coordination part of a batch (see coord_batch.h).
#include "coord/coord_batch.h"

#include <algorithm>

#include "core/checked.h"

namespace tollgate::coord {
namespace {

template <typename T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

void add_keys(const LockCommand& c, CoordKeys& k) { k.locks.push_back(c.key); }
void add_keys(const IdempotencyCommand& c, CoordKeys& k) { k.idempotency.push_back(c.key); }
void add_keys(const RateLimitCommand& c, CoordKeys& k) { k.rates.emplace_back(c.policy, c.key); }
void add_keys(const PruneCoordCommand& c, CoordKeys& k) {
  const auto total = checked_add(k.prune_max, c.max_rows);
  TG_ASSERT(total.has_value());
  k.prune_max = *total;
  k.prune_retention_ms = std::max(k.prune_retention_ms, c.retention_ms);
}
void finish_keys(CoordKeys& k) {
  sort_unique(k.locks);
  sort_unique(k.idempotency);
  sort_unique(k.rates);
}

CoordState::CoordState(CoordSnapshot s, std::int64_t now_ms)
    : now_ms_(now_ms), prunable_(std::move(s.prunable)), idle_rates_(std::move(s.idle_rates)) {
  for (Lock& l : s.locks) {
    const std::string key = l.key;
    locks_.try_emplace(key, Slot<Lock>{l, std::move(l)});
  }
  for (IdempotencyKey& i : s.idempotency) {
    const std::string key = i.key;
    idempotency_.try_emplace(key, Slot<IdempotencyKey>{i, std::move(i)});
  }
  for (RateLimitRow& r : s.rates) {
    RateKey key{r.policy, r.key};
    rates_.try_emplace(std::move(key), Slot<RateLimitRow>{r, std::move(r)});
  }
}

Result<LockOutcome> CoordState::lock(const LockCommand& c) {
  Slot<Lock>& slot = locks_[c.key];  // a key never used: both unset
  auto decided = decide_lock(slot.now, c, now_ms_);
  if (decided && decided->changed) slot.now = decided->lock;
  return decided;
}

Result<IdempotencyOutcome> CoordState::idempotency(const IdempotencyCommand& c) {
  Slot<IdempotencyKey>& slot = idempotency_[c.key];
  auto decided = decide_idempotency(slot.now, c, now_ms_);
  if (decided && decided->changed) slot.now = decided->row;
  return decided;
}

Result<RateLimitOutcome> CoordState::rate(const RateLimitCommand& c) {
  Slot<RateLimitRow>& slot = rates_[RateKey{c.policy, c.key}];
  if (c.op == RateOp::reset) {
    slot.now.reset();
    GcraDecision full;
    full.allowed = true;
    return RateLimitOutcome{full};
  }
  std::optional<std::int64_t> tat;
  if (slot.now) tat = slot.now->tat_ns;
  GcraDecision d = gcra_check(c.gcra, tat, c.cost, now_ms_);
  if (d.allowed) slot.now = RateLimitRow{c.policy, c.key, *d.new_tat_ns};
  return RateLimitOutcome{d};
}

Result<PruneOutcome> CoordState::prune(const PruneCoordCommand& c) {
  PruneOutcome out;
  const auto cutoff = checked_sub(now_ms_, c.retention_ms);
  TG_ASSERT(cutoff.has_value());
  std::size_t i = 0;
  for (; i < prunable_.size() && out.pruned_keys < c.max_rows; ++i) {
    const IdempotencyKey& row = prunable_[i];
    Slot<IdempotencyKey>& slot = idempotency_.try_emplace(row.key, Slot<IdempotencyKey>{row, row}).first->second;
    // A row an earlier command of this batch changed is decided on as it is now.
    if (!slot.now || slot.now->expires_at_ms >= *cutoff) {
      continue;
    }
    slot.now.reset();
    ++out.pruned_keys;
  }
  prunable_.erase(prunable_.begin(), prunable_.begin() + static_cast<std::ptrdiff_t>(i));
  std::size_t j = 0;
  for (; j < idle_rates_.size() && out.pruned_rates < c.max_rows; ++j) {
    const RateLimitRow& row = idle_rates_[j];
    Slot<RateLimitRow>& slot =
        rates_.try_emplace(RateKey{row.policy, row.key}, Slot<RateLimitRow>{row, row}).first->second;
    if (!slot.now || slot.now->tat_ns > now_ms_ * 1'000'000) continue;
    slot.now.reset();
    ++out.pruned_rates;
  }
  idle_rates_.erase(idle_rates_.begin(), idle_rates_.begin() + static_cast<std::ptrdiff_t>(j));
  return out;
}

CoordEffects CoordState::effects() && {
  CoordEffects e;
  auto collect = [](auto& slots, auto& out) {
    for (auto& [key, slot] : slots) {
      if (slot.before == slot.now) continue;
      out.push_back({std::move(slot.before), std::move(slot.now)});
    }
  };
  collect(locks_, e.locks);
  collect(idempotency_, e.idempotency);
  collect(rates_, e.rates);
  return e;
}

}  // namespace tollgate::coord
