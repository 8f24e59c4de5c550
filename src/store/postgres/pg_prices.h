// tollgate store/postgres: the price slice's rows in a batch (prices/price_batch.h).
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include <cstddef>
#include <vector>

#include "prices/price_batch.h"
#include "store/postgres/pg_conn.h"

namespace tollgate::pg {

// The current prices of the batch's features (and, when one is unknown, the first known features by
// name) and the priced holds of its request_ids (pg_slices.h). Each feature named is first taken as
// a transaction-scoped advisory lock (in feature order, after the accounts): exclusively by a batch
// that sets prices, so two instances pricing one feature make its versions one after the other and
// read each other's; shared by a batch that only reserves, so a price change and the reservations in
// flight on every instance are ordered (the change waits for those that read the old price; one
// that reads after the change committed sees the new price) while reservations never wait for each
// other.
struct PriceLoads {
  static constexpr std::size_t kNoLoad = static_cast<std::size_t>(-1);
  std::size_t prices = kNoLoad;  // the prices, the known features and the priced holds: one statement
};
PriceLoads add_loads(const prices::PriceKeys& keys, std::vector<Conn::Pipelined>& st);
void take_rows(const PriceLoads& at, const std::vector<Rows>& r, prices::PriceSnapshot& out);
void add_writes(const prices::PriceEffects& effects, std::vector<Conn::Pipelined>& st);

}  // namespace tollgate::pg
