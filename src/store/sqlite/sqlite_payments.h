// tollgate store/sqlite: the payment slice's rows in a batch (payments/payment_batch.h).
//
// Thread safety: one thread at a time, the store's writer inside its batch transaction.
#pragma once

#include "payments/payment_batch.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

// The payments and payment events the batch's keys name (sqlite_slices.h), and what it changed.
void load_rows(Conn& db, const payments::PaymentKeys& keys, std::int64_t now_ms, payments::PaymentSnapshot& out);
void write_rows(Conn& db, const payments::PaymentEffects& effects);

}  // namespace tollgate::sqlite
