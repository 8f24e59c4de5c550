// Webhook endpoint rows on PostgreSQL (see pg_webhooks.h; the table is schema version 10).
#include "store/postgres/pg_webhooks.h"

#include <string>

#include "store/postgres/pg_rows.h"

namespace tollgate::pg {

#define TG_ENDPOINT_COLUMNS                                                                  \
  "endpoint_id, url, event_types, account_id, description, status, secret, previous_secret, " \
  "previous_secret_until_ms, created_at_ms, updated_at_ms"

const char* const kEndpointColumns = TG_ENDPOINT_COLUMNS;

namespace {

const std::string kLockForCount =
    "SELECT pg_advisory_xact_lock(hashtextextended('tollgate webhook endpoints ' || current_schema(), 0))";
const std::string kLoadEndpoints = "SELECT " TG_ENDPOINT_COLUMNS
                                   " FROM webhook_endpoints WHERE endpoint_id = ANY($1::text[]) ORDER BY endpoint_id "
                                   "FOR UPDATE";
const std::string kCountEndpoints = "SELECT count(*) FROM webhook_endpoints";
const std::string kInsertEndpoint =
    "INSERT INTO webhook_endpoints (endpoint_id, url, event_types, account_id, description, status, secret, "
    "previous_secret, previous_secret_until_ms, created_at_ms, updated_at_ms) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::bigint, $10::bigint, $11::bigint)";
const std::string kUpdateEndpoint =
    "WITH u AS (UPDATE webhook_endpoints SET url = $2, event_types = $3, description = $4, status = $5, secret = $6, "
    "previous_secret = $7, previous_secret_until_ms = $8::bigint, updated_at_ms = $9::bigint "
    "WHERE endpoint_id = $1 AND updated_at_ms = $10::bigint AND secret = $11 AND status = $12 RETURNING 1) "
    "SELECT tollgate_assert(count(*) = 1, 'a webhook endpoint changed behind the batch''s lock') FROM u";
const std::string kDeleteEndpoint =
    "WITH d AS (DELETE FROM webhook_endpoints WHERE endpoint_id = $1 AND updated_at_ms = $2::bigint AND secret = $3 "
    "RETURNING 1) SELECT tollgate_assert(count(*) = 1, 'a webhook endpoint changed behind the batch''s lock') FROM d";

#undef TG_ENDPOINT_COLUMNS

webhooks::Endpoint read_endpoint(const Rows& r, int i) {
  const auto status = webhooks::parse_endpoint_status(r.text(i, 5));
  if (!status) throw PgError("XX000", false, "webhook endpoint " + r.text(i, 0) + " has status " + r.text(i, 5));
  return webhooks::Endpoint{r.text(i, 0),          r.text(i, 1),  webhooks::split_event_types(r.text(i, 2)),
                            r.optional_text(i, 3), r.text(i, 4),  *status,
                            r.text(i, 6),          r.optional_text(i, 7), r.optional_int64(i, 8),
                            r.int64(i, 9),         r.int64(i, 10)};
}

std::string status_of(const webhooks::Endpoint& e) { return std::string(webhooks::endpoint_status_name(e.status)); }

}  // namespace

WebhookLoads add_loads(const webhooks::WebhookKeys& keys, std::vector<Conn::Pipelined>& st) {
  WebhookLoads at;
  const auto add = [&](const std::string& sql, Params params) {
    st.push_back({&sql, std::move(params)});
    return st.size() - 1;
  };
  if (keys.count) add(kLockForCount, Params());
  if (!keys.ids.empty()) at.endpoints = add(kLoadEndpoints, Params(text_array(keys.ids)));
  if (keys.count) at.count = add(kCountEndpoints, Params());
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
}

void add_writes(const webhooks::WebhookEffects& e, std::vector<Conn::Pipelined>& st) {
  for (const auto& [before, after] : e.endpoints) {
    if (!before) {
      TG_ASSERT(after.has_value());
      const webhooks::Endpoint& n = *after;
      st.push_back({&kInsertEndpoint,
                    Params(n.endpoint_id, n.url, webhooks::join_event_types(n.event_types), n.account_id, n.description,
                           status_of(n), n.secret, n.previous_secret, n.previous_secret_until_ms, n.created_at_ms,
                           n.updated_at_ms)});
    } else if (!after) {
      st.push_back({&kDeleteEndpoint, Params(before->endpoint_id, before->updated_at_ms, before->secret)});
    } else {
      const webhooks::Endpoint& n = *after;
      st.push_back({&kUpdateEndpoint,
                    Params(n.endpoint_id, n.url, webhooks::join_event_types(n.event_types), n.description,
                           status_of(n), n.secret, n.previous_secret, n.previous_secret_until_ms, n.updated_at_ms,
                           before->updated_at_ms, before->secret, status_of(*before))});
    }
  }
}

}  // namespace tollgate::pg
