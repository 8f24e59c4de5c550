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

#include "coord/coord.h"
#include "core/result.h"

namespace tollgate::coord {

// A row and the store's clock when it was read (so that "held" and "lease left" are decided on the
// store's clock, the one every instance shares).
template <typename Row>
struct RowRead {
  std::optional<Row> row;  // unset: no such row
  std::int64_t now_ms = 0;
};

class CoordReads {
 public:
  virtual ~CoordReads() = default;
  virtual Result<RowRead<Lock>> get_lock(std::string_view key) = 0;
  virtual Result<RowRead<IdempotencyKey>> get_idempotency_key(std::string_view key) = 0;
};

}  // namespace tollgate::coord
