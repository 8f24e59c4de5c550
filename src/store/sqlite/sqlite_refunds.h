// tollgate store/sqlite: the refund slice's rows in a batch (refunds/refund_batch.h).
//
// Thread safety: one thread at a time, the store's writer inside its batch transaction.
#pragma once

#include "refunds/refund_batch.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

// The refunds the batch's request_ids name (sqlite_slices.h), and the new ones it made.
void load_rows(Conn& db, const refunds::RefundKeys& keys, std::int64_t now_ms, refunds::RefundSnapshot& out);
void write_rows(Conn& db, const refunds::RefundEffects& effects);

}  // namespace tollgate::sqlite
