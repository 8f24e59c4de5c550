// tollgate store/postgres: lock, idempotency-key and rate-limit rows (coord/coord_batch.h) — loaded
// FOR UPDATE in the batch's first round trip, written in its second (pg_batch.cc), and read on the
// store's readers.
//
// Thread safety: add_coord_loads/take_coord/add_coord_writes run on the writer's thread;
// PgCoordReads as CoordReads — any thread, each call leases its own reader connection.
#pragma once

#include <cstddef>
#include <vector>

#include "coord/coord_batch.h"
#include "coord/coord_reads.h"
#include "core/clock.h"
#include "store/conn_pool.h"
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

class PgCoordReads final : public coord::CoordReads {
 public:
  // `readers` (and `clock` when set) must outlive this. `clock` null: the database's clock.
  PgCoordReads(ConnPool<Conn>& readers, const Clock* clock) : readers_(readers), clock_(clock) {}
  Result<coord::RowRead<coord::Lock>> get_lock(std::string_view key) override;
  Result<coord::RowRead<coord::IdempotencyKey>> get_idempotency_key(std::string_view key) override;
  Result<coord::LockPage> list_locks(const PageRequest& page, bool held_only) override;

 private:
  ConnPool<Conn>& readers_;
  const Clock* const clock_;
};

}  // namespace tollgate::pg
