// tollgate store/sqlite: lock, idempotency-key and rate-limit rows (coord/coord_batch.h) — loaded
// and written inside the store's batch transaction (sqlite_batch.cc), and read on its readers.
//
// Thread safety: load_coord/write_coord run on the writer inside its transaction; SqliteCoordReads
// as CoordReads — any thread, each call leases its own reader connection.
#pragma once

#include "coord/coord_batch.h"
#include "coord/coord_reads.h"
#include "core/clock.h"
#include "store/conn_pool.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

// Loads the rows `keys` names (and the prune pass's candidates) into `out`.
void load_rows(Conn& db, const coord::CoordKeys& keys, std::int64_t now_ms, coord::CoordSnapshot& out);
// Writes `effects`, each change guarded by its `before` row (throws when a row changed behind the lock).
void write_rows(Conn& db, const coord::CoordEffects& effects);

class SqliteCoordReads final : public coord::CoordReads {
 public:
  // `readers` and `clock` must outlive this (both are the store's).
  SqliteCoordReads(ConnPool<Conn>& readers, const Clock& clock) : readers_(readers), clock_(clock) {}
  Result<coord::RowRead<coord::Lock>> get_lock(std::string_view key) override;
  Result<coord::RowRead<coord::IdempotencyKey>> get_idempotency_key(std::string_view key) override;
  Result<coord::LockPage> list_locks(const PageRequest& page, bool held_only) override;

 private:
  ConnPool<Conn>& readers_;
  const Clock& clock_;
};

}  // namespace tollgate::sqlite
