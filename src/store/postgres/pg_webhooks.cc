// Webhook endpoint and delivery rows on PostgreSQL (see pg_webhooks.h; the tables are schema versions 10
// and 11).
#include "store/postgres/pg_webhooks.h"

#include <string>

#include "store/postgres/pg_rows.h"

namespace tollgate::pg {

#define TG_ENDPOINT_COLUMNS                                                                  \
  "endpoint_id, url, event_types, account_id, description, status, secret, previous_secret, " \
  "previous_secret_until_ms, created_at_ms, updated_at_ms, delivery_cursor, delivery_fence, failing_since_ms"
#define TG_DELIVERY_COLUMNS                                                                         \
  "endpoint_id, event_id, event_type, account_id, event_at_ms, status, attempts, last_attempt_at_ms, " \
  "last_status_code, last_error, next_attempt_at_ms, created_at_ms"

const char* const kEndpointColumns = TG_ENDPOINT_COLUMNS;
const char* const kDeliveryColumns = TG_DELIVERY_COLUMNS;

namespace {

const std::string kLockForCount =
    "SELECT pg_advisory_xact_lock(hashtextextended('tollgate webhook endpoints ' || current_schema(), 0))";
const std::string kLoadEndpoints = "SELECT " TG_ENDPOINT_COLUMNS
                                   " FROM webhook_endpoints WHERE endpoint_id = ANY($1::text[]) ORDER BY endpoint_id "
                                   "FOR UPDATE";
const std::string kCountEndpoints = "SELECT count(*) FROM webhook_endpoints";
// The feed's head as this transaction sees it: an event committed later has a larger id (event ids
// increase in commit order), so an endpoint made here receives every event that follows it.
const std::string kFeedHead = "SELECT coalesce(max(event_id), 0) FROM events";
const std::string kLoadDeliveries = "SELECT " TG_DELIVERY_COLUMNS
                                    " FROM webhook_deliveries WHERE (endpoint_id, event_id) IN "
                                    "(SELECT * FROM unnest($1::text[], $2::bigint[]))";
const std::string kInsertEndpoint =
    "INSERT INTO webhook_endpoints (endpoint_id, url, event_types, account_id, description, status, secret, "
    "previous_secret, previous_secret_until_ms, created_at_ms, updated_at_ms, delivery_cursor, delivery_fence, "
    "failing_since_ms) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::bigint, $10::bigint, $11::bigint, $12::bigint, $13::bigint, "
    "$14::bigint)";
const std::string kUpdateEndpoint =
    "WITH u AS (UPDATE webhook_endpoints SET url = $2, event_types = $3, description = $4, status = $5, secret = $6, "
    "previous_secret = $7, previous_secret_until_ms = $8::bigint, updated_at_ms = $9::bigint, "
    "delivery_cursor = $13::bigint, delivery_fence = $14::bigint, failing_since_ms = $15::bigint "
    "WHERE endpoint_id = $1 AND updated_at_ms = $10::bigint AND secret = $11 AND status = $12 "
    "AND delivery_cursor = $16::bigint AND delivery_fence = $17::bigint RETURNING 1) "
    "SELECT tollgate_assert(count(*) = 1, 'a webhook endpoint changed behind the batch''s lock') FROM u";
const std::string kDeleteDeliveries = "DELETE FROM webhook_deliveries WHERE endpoint_id = $1";
const std::string kDeleteEndpoint =
    "WITH d AS (DELETE FROM webhook_endpoints WHERE endpoint_id = $1 AND updated_at_ms = $2::bigint AND secret = $3 "
    "AND delivery_cursor = $4::bigint AND delivery_fence = $5::bigint "
    "RETURNING 1) SELECT tollgate_assert(count(*) = 1, 'a webhook endpoint changed behind the batch''s lock') FROM d";
const std::string kInsertDeliveries =
    "INSERT INTO webhook_deliveries (" TG_DELIVERY_COLUMNS ") SELECT * FROM unnest($1::text[], $2::bigint[], "
    "$3::text[], $4::text[], $5::bigint[], $6::text[], $7::bigint[], $8::bigint[], $9::bigint[], $10::text[], "
    "$11::bigint[], $12::bigint[])";
const std::string kUpdateDelivery =
    "WITH u AS (UPDATE webhook_deliveries SET status = $3, attempts = $4::bigint, last_attempt_at_ms = $5::bigint, "
    "last_status_code = $6::bigint, last_error = $7, next_attempt_at_ms = $8::bigint "
    "WHERE endpoint_id = $1 AND event_id = $2::bigint AND status = $9 AND attempts = $10::bigint "
    "AND last_attempt_at_ms = $11::bigint RETURNING 1) "
    "SELECT tollgate_assert(count(*) = 1, 'a webhook delivery changed behind the batch''s lock') FROM u";

#undef TG_ENDPOINT_COLUMNS
#undef TG_DELIVERY_COLUMNS

webhooks::Endpoint read_endpoint(const Rows& r, int i) {
  const auto status = webhooks::parse_endpoint_status(r.text(i, 5));
  if (!status) throw PgError("XX000", false, "webhook endpoint " + r.text(i, 0) + " has status " + r.text(i, 5));
  return webhooks::Endpoint{r.text(i, 0),          r.text(i, 1),  webhooks::split_event_types(r.text(i, 2)),
                            r.optional_text(i, 3), r.text(i, 4),  *status,
                            r.text(i, 6),          r.optional_text(i, 7), r.optional_int64(i, 8),
                            r.int64(i, 9),         r.int64(i, 10), r.int64(i, 11),
                            r.int64(i, 12),        r.optional_int64(i, 13)};
}

webhooks::Delivery read_delivery(const Rows& r, int i) {
  const auto status = webhooks::parse_delivery_status(r.text(i, 5));
  if (!status) throw PgError("XX000", false, "webhook delivery of event " + r.text(i, 1) + " has status " + r.text(i, 5));
  return webhooks::Delivery{r.text(i, 0), r.int64(i, 1), r.text(i, 2), r.text(i, 3), r.int64(i, 4),
                            *status,      r.int64(i, 6), r.int64(i, 7), r.optional_int64(i, 8), r.text(i, 9),
                            r.optional_int64(i, 10), r.int64(i, 11)};
}

std::string status_of(const webhooks::Endpoint& e) { return std::string(webhooks::endpoint_status_name(e.status)); }
std::string status_of(const webhooks::Delivery& d) { return std::string(webhooks::delivery_status_name(d.status)); }

template <typename F>
auto column(const std::vector<const webhooks::Delivery*>& rows, F f) {
  std::vector<decltype(f(*rows.front()))> out;
  out.reserve(rows.size());
  for (const webhooks::Delivery* d : rows) out.push_back(f(*d));
  return out;
}

void add_delivery_writes(const std::vector<webhooks::DeliveryChange>& changes, std::vector<Conn::Pipelined>& st) {
  std::vector<const webhooks::Delivery*> inserts;
  for (const webhooks::DeliveryChange& c : changes) {
    if (!c.before) {
      inserts.push_back(&c.after);
      continue;
    }
    const webhooks::Delivery& n = c.after;
    const webhooks::Delivery& b = *c.before;
    st.push_back({&kUpdateDelivery, Params(n.endpoint_id, n.event_id, status_of(n), n.attempts, n.last_attempt_at_ms,
                                           n.last_status_code, n.last_error, n.next_attempt_at_ms, status_of(b),
                                           b.attempts, b.last_attempt_at_ms)});
  }
  if (inserts.empty()) return;
  using D = webhooks::Delivery;
  st.push_back({&kInsertDeliveries,
                Params(text_array(column(inserts, [](const D& d) { return d.endpoint_id; })),
                       int_array(column(inserts, [](const D& d) { return d.event_id; })),
                       text_array(column(inserts, [](const D& d) { return d.event_type; })),
                       text_array(column(inserts, [](const D& d) { return d.account_id; })),
                       int_array(column(inserts, [](const D& d) { return d.event_at_ms; })),
                       text_array(column(inserts, [](const D& d) { return status_of(d); })),
                       int_array(column(inserts, [](const D& d) { return d.attempts; })),
                       int_array(column(inserts, [](const D& d) { return d.last_attempt_at_ms; })),
                       int_array(column(inserts, [](const D& d) { return d.last_status_code; })),
                       text_array(column(inserts, [](const D& d) { return d.last_error; })),
                       int_array(column(inserts, [](const D& d) { return d.next_attempt_at_ms; })),
                       int_array(column(inserts, [](const D& d) { return d.created_at_ms; })))});
}

}  // namespace

WebhookLoads add_loads(const webhooks::WebhookKeys& keys, std::vector<Conn::Pipelined>& st) {
  WebhookLoads at;
  const auto add = [&](const std::string& sql, Params params) {
    st.push_back({&sql, std::move(params)});
    return st.size() - 1;
  };
  if (keys.count) add(kLockForCount, Params());
  if (!keys.ids.empty()) at.endpoints = add(kLoadEndpoints, Params(text_array(keys.ids)));
  if (keys.count) {
    at.count = add(kCountEndpoints, Params());
    at.head = add(kFeedHead, Params());
  }
  if (!keys.deliveries.empty()) {
    std::vector<std::string> endpoints;
    std::vector<std::int64_t> events;
    for (const auto& [endpoint_id, event_id] : keys.deliveries) {
      endpoints.push_back(endpoint_id);
      events.push_back(event_id);
    }
    at.deliveries = add(kLoadDeliveries, Params(text_array(endpoints), int_array(events)));
  }
  return at;
}

void take_rows(const WebhookLoads& at, const std::vector<Rows>& r, webhooks::WebhookSnapshot& out) {
  if (at.endpoints != WebhookLoads::kNoLoad) {
    for (int i = 0; i < r[at.endpoints].size(); ++i) out.endpoints.push_back(read_endpoint(r[at.endpoints], i));
  }
  if (at.count != WebhookLoads::kNoLoad) {
    TG_ASSERT(r[at.count].size() == 1);
    out.count = r[at.count].int64(0, 0);
  }
  if (at.head != WebhookLoads::kNoLoad) {
    TG_ASSERT(r[at.head].size() == 1);
    out.feed_head = r[at.head].int64(0, 0);
  }
  if (at.deliveries != WebhookLoads::kNoLoad) {
    for (int i = 0; i < r[at.deliveries].size(); ++i) out.deliveries.push_back(read_delivery(r[at.deliveries], i));
  }
}

void add_writes(const webhooks::WebhookEffects& e, std::vector<Conn::Pipelined>& st) {
  for (const auto& [before, after] : e.endpoints) {
    if (!before) {
      TG_ASSERT(after.has_value());
      const webhooks::Endpoint& n = *after;
      st.push_back({&kInsertEndpoint,
                    Params(n.endpoint_id, n.url, webhooks::join_event_types(n.event_types), n.account_id, n.description,
                           status_of(n), n.secret, n.previous_secret, n.previous_secret_until_ms, n.created_at_ms,
                           n.updated_at_ms, n.delivery_cursor, n.delivery_fence, n.failing_since_ms)});
    } else if (!after) {
      st.push_back({&kDeleteDeliveries, Params(before->endpoint_id)});
      st.push_back({&kDeleteEndpoint, Params(before->endpoint_id, before->updated_at_ms, before->secret,
                                             before->delivery_cursor, before->delivery_fence)});
    } else {
      const webhooks::Endpoint& n = *after;
      st.push_back({&kUpdateEndpoint,
                    Params(n.endpoint_id, n.url, webhooks::join_event_types(n.event_types), n.description,
                           status_of(n), n.secret, n.previous_secret, n.previous_secret_until_ms, n.updated_at_ms,
                           before->updated_at_ms, before->secret, status_of(*before), n.delivery_cursor,
                           n.delivery_fence, n.failing_since_ms, before->delivery_cursor, before->delivery_fence)});
    }
  }
  // After the endpoints: a new endpoint's row exists before its deliveries (their foreign key).
  add_delivery_writes(e.deliveries, st);
}

}  // namespace tollgate::pg
