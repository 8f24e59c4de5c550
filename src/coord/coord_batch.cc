// The coordination part of a batch (see coord_batch.h).
#include "coord/coord_batch.h"

#include <algorithm>

#include "core/checked.h"
#include "core/limits.h"

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

// --- validation at the service boundary ---------------------------------------------------------
#define TG_TRY(expr)                      \
  do {                                    \
    if (auto s_ = (expr); !s_) return s_; \
  } while (0)

namespace {

Status check_coord_ttl(std::int64_t ttl_ms, std::int64_t max, std::string_view field) {
  if (ttl_ms < 1 || ttl_ms > max) {
    return invalid(std::string(field) + " must be from 1 to " + std::to_string(max) + ", got " + std::to_string(ttl_ms));
  }
  return ok_status();
}

}  // namespace

Status CoordSlice::validate(const LockCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.key, "key"));
  if (c.op == LockOp::cancel) return ok_status();
  TG_TRY(check_id(c.owner, "owner"));
  if (c.fence && *c.fence < 1) return invalid("fence must be at least 1, got " + std::to_string(*c.fence));
  if (c.op == LockOp::release) return ok_status();
  return check_coord_ttl(c.ttl_ms, limits::kLockTtlMsMax, "ttl_ms");
}

Status CoordSlice::validate(const IdempotencyCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.key, "key"));
  if (c.fingerprint.empty()) return invalid("fingerprint must not be empty");
  TG_TRY(check_text(c.fingerprint, limits::kFingerprintLengthMax, "fingerprint"));
  if (c.attempt && *c.attempt < 1) return invalid("attempt must be at least 1, got " + std::to_string(*c.attempt));
  if (c.op == IdemOp::begin) return check_coord_ttl(c.ttl_ms, limits::kIdempotencyTtlMsMax, "ttl_ms");
  if (c.op == IdemOp::finish) {
    if (c.response_json.empty()) return invalid("response must be a JSON value");
    return check_text(c.response_json, limits::kIdempotencyResponseBytesMax, "response");
  }
  return ok_status();
}

Status CoordSlice::validate(const RateLimitCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.policy, "policy"));
  TG_TRY(check_id(c.key, "key"));
  if (c.op == RateOp::reset) return ok_status();
  if (c.gcra.limit < 1 || c.gcra.limit > limits::kRateLimitMax || c.gcra.period_ms < 1 ||
      c.gcra.period_ms > limits::kRateLimitPeriodMsMax || c.gcra.limit > c.gcra.period_ms * limits::kRateAttemptsPerMsMax) {
    return invalid("policy " + c.policy + " has no valid limit and period");
  }
  if (c.cost < 1 || c.cost > c.gcra.limit) {
    return invalid("cost must be from 1 to the policy's limit (" + std::to_string(c.gcra.limit) + "), got " +
                   std::to_string(c.cost));
  }
  return ok_status();
}

Status CoordSlice::validate(const PruneCoordCommand& c, const ValidationLimits&) {
  if (c.retention_ms < 1 || c.retention_ms > limits::kIdempotencyRetentionMsMax) {
    return invalid("retention_ms out of range: " + std::to_string(c.retention_ms));
  }
  if (c.max_rows < 1 || c.max_rows > limits::kIdempotencyPruneBatchMax) {
    return invalid("max_rows out of range: " + std::to_string(c.max_rows));
  }
  return ok_status();
}

#undef TG_TRY

}  // namespace tollgate::coord
