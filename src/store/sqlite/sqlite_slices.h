// tollgate store/sqlite: the loaders and writers of the feature slices (src/slices.h) in the
// SQLite dialect — one pair per slice, found by overload from SqliteBatchIo (a slice without its
// pair does not compile). Each runs inside the batch's BEGIN IMMEDIATE on the writer connection:
//   void load_rows(Conn&, const S::Keys&, std::int64_t now_ms, S::Snapshot&)   after the ledger's rows
//   void write_rows(Conn&, const S::Effects&)   after the ledger's rows; each changed row guarded by
//                                               its `before` values (none changed: a failure)
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include "store/sqlite/sqlite_coord.h"  // coord::CoordSlice
#include "store/sqlite/sqlite_jobs.h"   // jobs::JobSlice
#include "store/sqlite/sqlite_webhooks.h"  // webhooks::WebhookSlice
#include "store/sqlite/sqlite_refunds.h"  // refunds::RefundSlice
#include "store/sqlite/sqlite_payments.h"  // payments::PaymentSlice
#include "store/sqlite/sqlite_prices.h"  // prices::PriceSlice
