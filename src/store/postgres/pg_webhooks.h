// tollgate store/postgres: webhook endpoint and delivery rows (webhooks/webhook_batch.h) — loaded FOR UPDATE in
// the batch's first round trip, written in its second (pg_batch.cc); the shared reads decode the
// same columns (store/reads.cc).
//
// Thread safety: add_loads/take_rows/add_writes run on the writer's thread.
#pragma once

#include <cstddef>
#include <vector>

#include "store/postgres/pg_conn.h"
#include "webhooks/webhook_batch.h"

namespace tollgate::pg {

// Where the loads of one batch sit in its pipeline (kNoLoad: not sent).
struct WebhookLoads {
  static constexpr std::size_t kNoLoad = static_cast<std::size_t>(-1);
  std::size_t endpoints = kNoLoad, count = kNoLoad, head = kNoLoad, deliveries = kNoLoad;
};

// Appends the loads `keys` needs to `st`. A batch that counts the endpoints (a create) first takes
// the endpoints' transaction-scoped advisory lock, so that two batches (of two instances) cannot
// both see room for one more; the named rows are locked FOR UPDATE in id order. The named deliveries
// are read after their endpoints (every write of a delivery holds its endpoint's row lock).
WebhookLoads add_loads(const webhooks::WebhookKeys& keys, std::vector<Conn::Pipelined>& st);
void take_rows(const WebhookLoads& at, const std::vector<Rows>& r, webhooks::WebhookSnapshot& out);
// Appends the writes of `effects` to `st`, each guarded by its `before` row.
void add_writes(const webhooks::WebhookEffects& effects, std::vector<Conn::Pipelined>& st);

// The endpoint columns, in the order the shared reads decode them (store/reads.cc: endpoint_of).
extern const char* const kEndpointColumns;
// The delivery columns, likewise (store/reads.cc: delivery_of).
extern const char* const kDeliveryColumns;

}  // namespace tollgate::pg
