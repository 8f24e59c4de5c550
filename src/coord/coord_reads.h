// tollgate coordination: the reads of lock and idempotency-key rows, as one narrow interface every
// store backend implements (a role of the store, like store/lists.h). The rows are written through
// the store's batches (core/commands.h: LockCommand, IdempotencyCommand, RateLimitCommand,
// PruneCoordCommand); this interface only reads.
//
// Thread safety: every method may be called from any thread; each answers from one snapshot.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "coord/coord.h"
#include "core/result.h"
#include "store/lists.h"

namespace tollgate::coord {

// A row and the store's clock when it was read (so that "held" and "lease left" are decided on the
// store's clock, the one every instance shares).
template <typename Row>
struct RowRead {
  std::optional<Row> row;  // unset: no such row
  std::int64_t now_ms = 0;
};

// A page of locks, by key, and the store's clock when it was read.
struct LockPage {
  std::vector<Lock> locks;
  bool has_more = false;
  std::int64_t now_ms = 0;
};

class CoordReads {
 public:
  virtual ~CoordReads() = default;
  virtual Result<RowRead<Lock>> get_lock(std::string_view key) = 0;
  virtual Result<RowRead<IdempotencyKey>> get_idempotency_key(std::string_view key) = 0;
  // Locks with key > page.starting_after in bytewise key order, at most page.limit (store/lists.h's
  // paging: limit + 1 rows read, has_more exact). A lock's row is never deleted, so every key ever
  // used is listed; `held_only` keeps those whose lease is live on the store's clock (is_held). A
  // starting_after that names no lock: invalid_request (unknown_cursor); a bad limit: invalid_request.
  virtual Result<LockPage> list_locks(const PageRequest& page, bool held_only) = 0;
};

}  // namespace tollgate::coord
