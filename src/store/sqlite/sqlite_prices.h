// tollgate store/sqlite: the price slice's rows in a batch (prices/price_batch.h).
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include <cstdint>

#include "prices/price_batch.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

// The current prices of the batch's features (and, when one is unknown, the first known features by
// name), the priced holds of its request_ids (sqlite_slices.h); what it changed.
void load_rows(Conn& db, const prices::PriceKeys& keys, std::int64_t now_ms, prices::PriceSnapshot& out);
void write_rows(Conn& db, const prices::PriceEffects& effects);

}  // namespace tollgate::sqlite
