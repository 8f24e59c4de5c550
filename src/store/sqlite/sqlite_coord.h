// tollgate store/sqlite: lock, idempotency-key and rate-limit rows (coord/coord_batch.h) — loaded
// and written inside the store's batch transaction (sqlite_batch.cc); their rows decoded for the
// shared reads too (store/reads.h).
//
// Thread safety: load_rows/write_rows run on the writer inside its transaction; the decoders are
// functions over the statement they are given.
#pragma once

#include "coord/coord_batch.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

// Loads the rows `keys` names (and the prune pass's candidates) into `out`.
void load_rows(Conn& db, const coord::CoordKeys& keys, std::int64_t now_ms, coord::CoordSnapshot& out);
// Writes `effects`, each change guarded by its `before` row (throws when a row changed behind the lock).
void write_rows(Conn& db, const coord::CoordEffects& effects);

// Column lists in the order read_lock / read_idem expect them, and the rows of a statement that
// selected them (a stored state that no longer parses throws SqlError(SQLITE_CORRUPT)).
extern const char* const kLockColumns;
extern const char* const kIdempotencyColumns;
coord::Lock read_lock(Stmt& s);
coord::IdempotencyKey read_idem(Stmt& s);

}  // namespace tollgate::sqlite
