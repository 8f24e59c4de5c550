// Webhook endpoint rows on SQLite (see sqlite_webhooks.h; the table is schema version 10).
#include "store/sqlite/sqlite_webhooks.h"

#include <string>

#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {

const char* const kEndpointColumns =
    "endpoint_id, url, event_types, account_id, description, status, secret, previous_secret, "
    "previous_secret_until_ms, created_at_ms, updated_at_ms";

namespace {

webhooks::Endpoint read_endpoint(Stmt& r) {
  const auto status = webhooks::parse_endpoint_status(r.text(5));
  if (!status) throw SqlError(SQLITE_CORRUPT, "webhook endpoint " + r.text(0) + " has status " + r.text(5));
  return webhooks::Endpoint{r.text(0), r.text(1), webhooks::split_event_types(r.text(2)), r.optional_text(3),
                            r.text(4), *status,   r.text(6),  r.optional_text(7),  r.optional_int64(8),
                            r.int64(9), r.int64(10)};
}

std::string status_of(const webhooks::Endpoint& e) { return std::string(webhooks::endpoint_status_name(e.status)); }

}  // namespace

void load_rows(Conn& db, const webhooks::WebhookKeys& keys, std::int64_t, webhooks::WebhookSnapshot& out) {
  static const std::string by_id =
      std::string("SELECT ") + kEndpointColumns + " FROM webhook_endpoints WHERE endpoint_id = ?1";
  for (const std::string& id : keys.ids) {
    Query q(db.stmt(by_id.c_str()), id);
    if (q.step()) out.endpoints.push_back(read_endpoint(q.row()));
  }
  if (keys.count) {
    Query q(db.stmt("SELECT count(*) FROM webhook_endpoints"));
    TG_ASSERT(q.step());
    out.count = q->int64(0);
  }
}

void write_rows(Conn& db, const webhooks::WebhookEffects& e) {
  for (const auto& [before, after] : e.endpoints) {
    if (!before) {
      TG_ASSERT(after.has_value());
      const webhooks::Endpoint& n = *after;
      Query q(db.stmt("INSERT INTO webhook_endpoints (endpoint_id, url, event_types, account_id, description, status, "
                      "secret, previous_secret, previous_secret_until_ms, created_at_ms, updated_at_ms) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
              n.endpoint_id, n.url, webhooks::join_event_types(n.event_types), n.account_id, n.description,
              status_of(n), n.secret, n.previous_secret, n.previous_secret_until_ms, n.created_at_ms, n.updated_at_ms);
      q.step();
      continue;
    }
    const webhooks::Endpoint& b = *before;
    if (!after) {
      Query q(db.stmt("DELETE FROM webhook_endpoints WHERE endpoint_id = ?1 AND updated_at_ms = ?2 AND secret = ?3"),
              b.endpoint_id, b.updated_at_ms, b.secret);
      q.step();
      expect_one_change(db, "webhook endpoint " + b.endpoint_id);
      continue;
    }
    const webhooks::Endpoint& n = *after;
    Query q(db.stmt("UPDATE webhook_endpoints SET url = ?2, event_types = ?3, description = ?4, status = ?5, secret = ?6, "
                    "previous_secret = ?7, previous_secret_until_ms = ?8, updated_at_ms = ?9 "
                    "WHERE endpoint_id = ?1 AND updated_at_ms = ?10 AND secret = ?11 AND status = ?12"),
            n.endpoint_id, n.url, webhooks::join_event_types(n.event_types), n.description, status_of(n), n.secret,
            n.previous_secret, n.previous_secret_until_ms, n.updated_at_ms, b.updated_at_ms, b.secret, status_of(b));
    q.step();
    expect_one_change(db, "webhook endpoint " + n.endpoint_id);
  }
}

}  // namespace tollgate::sqlite
