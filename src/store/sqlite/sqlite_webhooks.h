// tollgate store/sqlite: webhook endpoint and delivery rows (webhooks/webhook_batch.h) — loaded and written inside
// the store's batch transaction (sqlite_batch.cc); the shared reads decode the same columns
// (store/reads.cc).
//
// Thread safety: load_rows/write_rows run on the writer inside its transaction.
#pragma once

#include "store/sqlite/sqlite_db.h"
#include "webhooks/webhook_batch.h"

namespace tollgate::sqlite {

// Loads the rows `keys` names (the endpoints, the count and the feed's head, the deliveries) into `out`.
void load_rows(Conn& db, const webhooks::WebhookKeys& keys, std::int64_t now_ms, webhooks::WebhookSnapshot& out);
// Writes `effects`, each change guarded by its `before` row (throws when a row changed behind the lock).
void write_rows(Conn& db, const webhooks::WebhookEffects& effects);

// The endpoint columns, in the order the shared reads decode them (store/reads.cc: endpoint_of).
extern const char* const kEndpointColumns;
// The delivery columns, likewise (store/reads.cc: delivery_of).
extern const char* const kDeliveryColumns;

}  // namespace tollgate::sqlite
