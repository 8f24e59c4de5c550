// tollgate store/postgres: lock, idempotency-key and rate-limit rows (coord/coord_batch.h) — loaded
// FOR UPDATE in the batch's first round trip, written in its second (pg_batch.cc); their rows
// decoded for the shared reads too (store/reads.h).
//
// Thread safety: add_loads/take_rows/add_writes run on the writer's thread; the decoders are
// functions over the result they are given.
#pragma once

#include <cstddef>
#include <vector>

#include "coord/coord_batch.h"
#include "store/postgres/pg_conn.h"

namespace tollgate::pg {

// Where the loads of one batch sit in its pipeline (kNoLoad: not sent).
struct CoordLoads {
  static constexpr std::size_t kNoLoad = static_cast<std::size_t>(-1);
  std::size_t locks = kNoLoad, idempotency = kNoLoad, rates = kNoLoad, prunable = kNoLoad, idle_rates = kNoLoad;
};

// Appends the loads `keys` needs to `st` (after the batch's own: the rows are locked in the order
// locks, idempotency keys, rate limits, each by key, so two batches cannot deadlock on them). The
// statements read the batch's `now` from the transaction (set before them).
CoordLoads add_loads(const coord::CoordKeys& keys, std::vector<Conn::Pipelined>& st);
// Reads the answers of those loads.
void take_rows(const CoordLoads& at, const std::vector<Rows>& r, coord::CoordSnapshot& out);
// Appends the writes of `effects` to `st`, each guarded by its `before` row (a row changed behind
// the batch's lock fails the transaction).
void add_writes(const coord::CoordEffects& effects, std::vector<Conn::Pipelined>& st);

// Column lists in the order read_lock / read_idem expect them, and the rows of a result that
// selected them (a stored state that no longer parses throws PgError XX000).
extern const char* const kLockColumns;
extern const char* const kIdempotencyColumns;
coord::Lock read_lock(const Rows& r, int row);
coord::IdempotencyKey read_idem(const Rows& r, int row);

}  // namespace tollgate::pg
