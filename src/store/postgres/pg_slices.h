// tollgate store/postgres: the loaders and writers of the feature slices (src/slices.h) in the
// PostgreSQL dialect — one set per slice, found by overload from PgBatchIo (a slice without its set
// does not compile). All of them add statements to the batch's pipelines:
//   L add_loads(const S::Keys&, std::vector<Conn::Pipelined>&)   round trip 1, after the ledger's
//       loads (its accounts locked in id order first); L says where its results are. A slice's
//       rows that may change are read FOR UPDATE, in key order.
//   void take_rows(const L&, const std::vector<Rows>&, S::Snapshot&)
//   void add_writes(const S::Effects&, std::vector<Conn::Pipelined>&)   after the ledger's accounts
//       and holds, before its keys and events; each changed row guarded by its `before` values.
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include "store/postgres/pg_coord.h"  // coord::CoordSlice
#include "store/postgres/pg_jobs.h"   // jobs::JobSlice
#include "store/postgres/pg_webhooks.h"  // webhooks::WebhookSlice
#include "store/postgres/pg_refunds.h"  // refunds::RefundSlice
#include "store/postgres/pg_payments.h"  // payments::PaymentSlice
#include "store/postgres/pg_prices.h"  // prices::PriceSlice
