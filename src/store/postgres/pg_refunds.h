// tollgate store/postgres: the refund slice's rows in a batch (refunds/refund_batch.h).
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include <cstddef>
#include <vector>

#include "refunds/refund_batch.h"
#include "store/postgres/pg_conn.h"

namespace tollgate::pg {

// The refunds the batch's request_ids name (pg_slices.h). Each request_id is first taken as a
// transaction-scoped advisory lock (in request_id order, after the accounts): a refund row is only
// inserted, never changed, so two batches that both found a request_id unused — refunds of two
// holds on two accounts under one request_id — would both insert it; with the lock the second
// reads the first's row once it committed, and answers idempotency_mismatch.
struct RefundLoads {
  static constexpr std::size_t kNoLoad = static_cast<std::size_t>(-1);
  std::size_t refunds = kNoLoad;
};
RefundLoads add_loads(const refunds::RefundKeys& keys, std::vector<Conn::Pipelined>& st);
void take_rows(const RefundLoads& at, const std::vector<Rows>& r, refunds::RefundSnapshot& out);
void add_writes(const refunds::RefundEffects& effects, std::vector<Conn::Pipelined>& st);

}  // namespace tollgate::pg
