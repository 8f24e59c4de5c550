// Webhook endpoint and delivery rows on SQLite (see sqlite_webhooks.h; the tables are schema versions 10
// and 11).
#include "store/sqlite/sqlite_webhooks.h"

#include <string>

#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {

const char* const kEndpointColumns =
    "endpoint_id, url, event_types, account_id, description, status, secret, previous_secret, "
    "previous_secret_until_ms, created_at_ms, updated_at_ms, delivery_cursor, delivery_fence, failing_since_ms";
const char* const kDeliveryColumns =
    "endpoint_id, event_id, event_type, account_id, event_at_ms, status, attempts, last_attempt_at_ms, "
    "last_status_code, last_error, next_attempt_at_ms, created_at_ms";

namespace {

webhooks::Endpoint read_endpoint(Stmt& r) {
  const auto status = webhooks::parse_endpoint_status(r.text(5));
  if (!status) throw SqlError(SQLITE_CORRUPT, "webhook endpoint " + r.text(0) + " has status " + r.text(5));
  return webhooks::Endpoint{r.text(0),  r.text(1),  webhooks::split_event_types(r.text(2)), r.optional_text(3),
                            r.text(4),  *status,    r.text(6),  r.optional_text(7),  r.optional_int64(8),
                            r.int64(9), r.int64(10), r.int64(11), r.int64(12), r.optional_int64(13)};
}

webhooks::Delivery read_delivery(Stmt& r) {
  const auto status = webhooks::parse_delivery_status(r.text(5));
  if (!status) throw SqlError(SQLITE_CORRUPT, "webhook delivery of event " + r.text(1) + " has status " + r.text(5));
  return webhooks::Delivery{r.text(0), r.int64(1),          r.text(2),  r.text(3),           r.int64(4),
                            *status,   r.int64(6),          r.int64(7), r.optional_int64(8), r.text(9),
                            r.optional_int64(10), r.int64(11)};
}

std::string status_of(const webhooks::Endpoint& e) { return std::string(webhooks::endpoint_status_name(e.status)); }
std::string status_of(const webhooks::Delivery& d) { return std::string(webhooks::delivery_status_name(d.status)); }

void write_endpoint(Conn& db, const webhooks::EndpointChange& change) {
  const auto& [before, after] = change;
  if (!before) {
    TG_ASSERT(after.has_value());
    const webhooks::Endpoint& n = *after;
    Query q(db.stmt("INSERT INTO webhook_endpoints (endpoint_id, url, event_types, account_id, description, status, "
                    "secret, previous_secret, previous_secret_until_ms, created_at_ms, updated_at_ms, delivery_cursor, "
                    "delivery_fence, failing_since_ms) "
                    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"),
            n.endpoint_id, n.url, webhooks::join_event_types(n.event_types), n.account_id, n.description, status_of(n),
            n.secret, n.previous_secret, n.previous_secret_until_ms, n.created_at_ms, n.updated_at_ms,
            n.delivery_cursor, n.delivery_fence, n.failing_since_ms);
    q.step();
    return;
  }
  const webhooks::Endpoint& b = *before;
  if (!after) {
    Query deliveries(db.stmt("DELETE FROM webhook_deliveries WHERE endpoint_id = ?1"), b.endpoint_id);
    deliveries.step();
    Query q(db.stmt("DELETE FROM webhook_endpoints WHERE endpoint_id = ?1 AND updated_at_ms = ?2 AND secret = ?3 "
                    "AND delivery_cursor = ?4 AND delivery_fence = ?5"),
            b.endpoint_id, b.updated_at_ms, b.secret, b.delivery_cursor, b.delivery_fence);
    q.step();
    expect_one_change(db, "webhook endpoint " + b.endpoint_id);
    return;
  }
  const webhooks::Endpoint& n = *after;
  Query q(db.stmt("UPDATE webhook_endpoints SET url = ?2, event_types = ?3, description = ?4, status = ?5, secret = ?6, "
                  "previous_secret = ?7, previous_secret_until_ms = ?8, updated_at_ms = ?9, delivery_cursor = ?13, "
                  "delivery_fence = ?14, failing_since_ms = ?15 "
                  "WHERE endpoint_id = ?1 AND updated_at_ms = ?10 AND secret = ?11 AND status = ?12 "
                  "AND delivery_cursor = ?16 AND delivery_fence = ?17"),
          n.endpoint_id, n.url, webhooks::join_event_types(n.event_types), n.description, status_of(n), n.secret,
          n.previous_secret, n.previous_secret_until_ms, n.updated_at_ms, b.updated_at_ms, b.secret, status_of(b),
          n.delivery_cursor, n.delivery_fence, n.failing_since_ms, b.delivery_cursor, b.delivery_fence);
  q.step();
  expect_one_change(db, "webhook endpoint " + n.endpoint_id);
}

void write_delivery(Conn& db, const webhooks::DeliveryChange& change) {
  const webhooks::Delivery& n = change.after;
  if (!change.before) {
    Query q(db.stmt("INSERT INTO webhook_deliveries (endpoint_id, event_id, event_type, account_id, event_at_ms, "
                    "status, attempts, last_attempt_at_ms, last_status_code, last_error, next_attempt_at_ms, "
                    "created_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
            n.endpoint_id, n.event_id, n.event_type, n.account_id, n.event_at_ms, status_of(n), n.attempts,
            n.last_attempt_at_ms, n.last_status_code, n.last_error, n.next_attempt_at_ms, n.created_at_ms);
    q.step();
    return;
  }
  const webhooks::Delivery& b = *change.before;
  Query q(db.stmt("UPDATE webhook_deliveries SET status = ?3, attempts = ?4, last_attempt_at_ms = ?5, "
                  "last_status_code = ?6, last_error = ?7, next_attempt_at_ms = ?8 "
                  "WHERE endpoint_id = ?1 AND event_id = ?2 AND status = ?9 AND attempts = ?10 "
                  "AND last_attempt_at_ms = ?11"),
          n.endpoint_id, n.event_id, status_of(n), n.attempts, n.last_attempt_at_ms, n.last_status_code, n.last_error,
          n.next_attempt_at_ms, status_of(b), b.attempts, b.last_attempt_at_ms);
  q.step();
  expect_one_change(db, "webhook delivery of event " + std::to_string(n.event_id) + " to " + n.endpoint_id);
}

}  // namespace

void load_rows(Conn& db, const webhooks::WebhookKeys& keys, std::int64_t, webhooks::WebhookSnapshot& out) {
  static const std::string by_id =
      std::string("SELECT ") + kEndpointColumns + " FROM webhook_endpoints WHERE endpoint_id = ?1";
  for (const std::string& id : keys.ids) {
    Query q(db.stmt(by_id.c_str()), id);
    if (q.step()) out.endpoints.push_back(read_endpoint(q.row()));
  }
  if (keys.count) {
    Query count(db.stmt("SELECT count(*) FROM webhook_endpoints"));
    TG_ASSERT(count.step());
    out.count = count->int64(0);
    Query head(db.stmt("SELECT coalesce(max(event_id), 0) FROM events"));
    TG_ASSERT(head.step());
    out.feed_head = head->int64(0);
  }
  static const std::string delivery = std::string("SELECT ") + kDeliveryColumns +
                                      " FROM webhook_deliveries WHERE endpoint_id = ?1 AND event_id = ?2";
  for (const auto& [endpoint_id, event_id] : keys.deliveries) {
    Query q(db.stmt(delivery.c_str()), endpoint_id, event_id);
    if (q.step()) out.deliveries.push_back(read_delivery(q.row()));
  }
}

void write_rows(Conn& db, const webhooks::WebhookEffects& e) {
  // New endpoints before their deliveries; a deleted endpoint's deliveries go with it (write_endpoint).
  for (const webhooks::EndpointChange& change : e.endpoints) write_endpoint(db, change);
  for (const webhooks::DeliveryChange& change : e.deliveries) write_delivery(db, change);
}

}  // namespace tollgate::sqlite
