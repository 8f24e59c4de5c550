// tollgate store/postgres: the payment slice's rows in a batch (payments/payment_batch.h).
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include <cstddef>
#include <vector>

#include "payments/payment_batch.h"
#include "store/postgres/pg_conn.h"

namespace tollgate::pg {

// The payments and payment events the batch's keys name (pg_slices.h). Each payment id and event
// reference is first taken as a transaction-scoped advisory lock (payment ids, then references, each
// in order; after the accounts): a payment row is inserted once and its events only inserted, so two
// batches on two instances that both found one unused — the same payment named with two accounts —
// would both insert it; with the lock the second reads the first's row once it committed. A payment
// row changes only under its account's lock (every command names the payment's account).
struct PaymentLoads {
  static constexpr std::size_t kNoLoad = static_cast<std::size_t>(-1);
  std::size_t payments = kNoLoad;
  std::size_t events = kNoLoad;
};
PaymentLoads add_loads(const payments::PaymentKeys& keys, std::vector<Conn::Pipelined>& st);
void take_rows(const PaymentLoads& at, const std::vector<Rows>& r, payments::PaymentSnapshot& out);
void add_writes(const payments::PaymentEffects& effects, std::vector<Conn::Pipelined>& st);

}  // namespace tollgate::pg
