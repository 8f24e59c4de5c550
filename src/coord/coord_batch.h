// tollgate coordination: the coordination slice of a write batch (core/batch.h's seam) — lock,
// idempotency-key and shared rate-limit commands: which rows they read, what they decide, what
// they write. Pure: no I/O, no clock, no threads. The dialects' loaders and writers:
// store/sqlite/sqlite_coord.h, store/postgres/pg_coord.h.
//
// The rows are keyed on their own (a lock's key, an idempotency key, a policy's key): they touch
// no account, so the batch loads them by key — locked FOR UPDATE on PostgreSQL, in a fixed order
// (locks, idempotency keys, rate limits; each by key) so two batches cannot deadlock on them — and
// decides each command in order on the rows as the commands before it left them.
//
// Thread safety: plain values; a CoordState is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <tuple>

#include "coord/coord.h"
#include "core/batch.h"
#include "core/result.h"
#include "core/validate.h"

namespace tollgate::coord {

using RateKey = std::pair<std::string, std::string>;  // (policy, key)

// The rows a batch's coordination commands read. Sorted, free of duplicates.
struct CoordKeys {
  std::vector<std::string> locks;
  std::vector<std::string> idempotency;
  std::vector<RateKey> rates;
  std::int64_t prune_max = 0;          // finished idempotency keys and idle rate rows to load for pruning, at most (each)
  std::int64_t prune_retention_ms = 0;  // the longest retention of the batch's prune commands

  bool empty() const { return locks.empty() && idempotency.empty() && rates.empty() && prune_max == 0; }
};

// The rows the backend loaded (only those that exist).
struct CoordSnapshot {
  std::vector<Lock> locks;
  std::vector<IdempotencyKey> idempotency;
  std::vector<RateLimitRow> rates;
  // Idempotency keys that ended (finished, abandoned, or a claim that ran out) more than
  // prune_retention_ms ago — expires_at_ms < now − prune_retention_ms —, oldest first, at most
  // prune_max (on PostgreSQL: locked, SKIP LOCKED — another batch's rows are pruned next time).
  std::vector<IdempotencyKey> prunable;
  // Rate-limit rows with tat_ns ≤ now·1000 (idle), at most prune_max, likewise.
  std::vector<RateLimitRow> idle_rates;
};

template <typename Row>
struct RowChange {
  std::optional<Row> before;  // unset: a new row
  std::optional<Row> after;   // unset: the row is deleted
};

// What the batch writes: each changed row once, with the row it replaces (writes are guarded by
// `before`, so a row changed behind the batch's lock is a failure, never a lost update). In key order.
struct CoordEffects {
  std::vector<RowChange<Lock>> locks;
  std::vector<RowChange<IdempotencyKey>> idempotency;
  std::vector<RowChange<RateLimitRow>> rates;

  bool empty() const { return locks.empty() && idempotency.empty() && rates.empty(); }
};

class CoordState {
 public:
  CoordState(CoordSnapshot snapshot, std::int64_t now_ms);

  Result<LockOutcome> lock(const LockCommand& c);
  Result<IdempotencyOutcome> idempotency(const IdempotencyCommand& c);
  Result<RateLimitOutcome> rate(const RateLimitCommand& c);
  Result<PruneOutcome> prune(const PruneCoordCommand& c);

  CoordEffects effects() &&;

 private:
  template <typename Row>
  struct Slot {  // before: as loaded (unset: no row); now: as the batch left it (unset: none/deleted)
    std::optional<Row> before;
    std::optional<Row> now;
  };
  std::int64_t now_ms_;
  std::map<std::string, Slot<Lock>> locks_;
  std::map<std::string, Slot<IdempotencyKey>> idempotency_;
  std::map<RateKey, Slot<RateLimitRow>> rates_;
  std::vector<IdempotencyKey> prunable_;  // oldest first
  std::vector<RateLimitRow> idle_rates_;
};

// The keys of one command (CoordSlice::add_keys).
void add_keys(const LockCommand& c, CoordKeys& k);
void add_keys(const IdempotencyCommand& c, CoordKeys& k);
void add_keys(const RateLimitCommand& c, CoordKeys& k);
void add_keys(const PruneCoordCommand& c, CoordKeys& k);
void finish_keys(CoordKeys& k);  // sorts and removes duplicates

// --- the slice (core/batch.h's seam): no account involved, so the ledger's part is untouched ------
struct CoordSlice {
  using Commands = std::tuple<LockCommand, IdempotencyCommand, RateLimitCommand, PruneCoordCommand>;
  using Outcomes = std::tuple<LockOutcome, IdempotencyOutcome, RateLimitOutcome, PruneOutcome>;
  using Keys = CoordKeys;
  using Snapshot = CoordSnapshot;
  using Effects = CoordEffects;
  using State = CoordState;

  static void finish(CoordKeys& k) { finish_keys(k); }

  template <typename C>
  static void add_keys(const C& c, CoordKeys& k, batch::LedgerKeys& /*ledger*/) {
    coord::add_keys(c, k);
  }

  static Result<LockOutcome> decide(const LockCommand& c, CoordState& s, batch::LedgerBatch&) { return s.lock(c); }
  static Result<IdempotencyOutcome> decide(const IdempotencyCommand& c, CoordState& s, batch::LedgerBatch&) {
    return s.idempotency(c);
  }
  static Result<RateLimitOutcome> decide(const RateLimitCommand& c, CoordState& s, batch::LedgerBatch&) {
    return s.rate(c);
  }
  static Result<PruneOutcome> decide(const PruneCoordCommand& c, CoordState& s, batch::LedgerBatch&) {
    return s.prune(c);
  }

  static Status validate(const LockCommand& c, const ValidationLimits& limits);
  static Status validate(const IdempotencyCommand& c, const ValidationLimits& limits);
  static Status validate(const RateLimitCommand& c, const ValidationLimits& limits);
  static Status validate(const PruneCoordCommand& c, const ValidationLimits& limits);
};

}  // namespace tollgate::coord
