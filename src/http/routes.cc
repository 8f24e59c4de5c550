// The route table and the helpers route handlers share (routes.h).
#include "http/routes.h"

#include <array>
#include <memory>

#include "core/checked.h"
#include "core/limits.h"
#include "core/parse.h"
#include "core/suggest.h"

namespace tollgate::http {

namespace {

// The API, as the OpenAPI document lists it. Matched in order; the first row whose pattern and
// method fit wins.
constexpr std::array kRoutes{
    Route{"GET", "/healthz", kOpen, Runs::io, &healthz},
    Route{"GET", "/readyz", kOpen, Runs::reader, &readyz},
    Route{"GET", "/metrics", kOpen, Runs::reader, &prometheus_metrics},
    Route{"GET", "/openapi.json", kOpen, Runs::io, &openapi_document},
    Route{"GET", "/console", kOpen, Runs::io, &console_page},
    Route{"GET", "/console/{asset}", kOpen, Runs::io, &console_asset},
    Route{"POST", "/v1/accounts", needs(Scope::admin), Runs::io, &create_account},
    Route{"GET", "/v1/accounts", needs(Scope::admin_read), Runs::reader, &list_accounts},
    Route{"GET", "/v1/accounts/{account_id}", needs(Scope::read), Runs::reader, &get_account},
    Route{"PATCH", "/v1/accounts/{account_id}", needs(Scope::admin), Runs::io, &update_account},
    Route{"POST", "/v1/accounts/{account_id}/credits", needs(Scope::admin), Runs::io, &credit},
    Route{"POST", "/v1/accounts/{account_id}/debits", needs(Scope::admin), Runs::io, &debit},
    Route{"GET", "/v1/accounts/{account_id}/events", needs(Scope::read), Runs::reader, &account_events},
    Route{"GET", "/v1/accounts/{account_id}/lots", needs(Scope::read), Runs::reader, &list_lots},
    Route{"POST", "/v1/accounts/{account_id}/keys", needs(Scope::admin), Runs::io, &create_key},
    Route{"POST", "/v1/keys", needs(Scope::admin), Runs::io, &create_admin_key},
    Route{"GET", "/v1/key", kAnyKey, Runs::io, &calling_key},
    Route{"GET", "/v1/keys", needs(Scope::admin_read), Runs::reader, &list_keys},
    Route{"DELETE", "/v1/keys/{key_id}", needs(Scope::admin), Runs::io, &revoke_key},
    Route{"GET", "/v1/events", needs(Scope::admin_read), Runs::reader, &events_feed},
    Route{"GET", "/v1/transfers/{reference}", needs(Scope::read), Runs::reader, &get_transfer},
    Route{"POST", "/v1/holds", needs(Scope::holds_write), Runs::io, &reserve},
    Route{"POST", "/v1/holds/check", needs(Scope::holds_write), Runs::reader, &check_hold},
    Route{"GET", "/v1/holds", needs(Scope::read), Runs::reader, &list_holds},
    Route{"GET", "/v1/holds/{hold_id}", needs(Scope::read), Runs::reader, &get_hold},
    Route{"POST", "/v1/holds/{hold_id}/commit", needs(Scope::holds_write), Runs::io, &commit_hold},
    Route{"POST", "/v1/holds/{hold_id}/release", needs(Scope::holds_write), Runs::io, &release_hold},
    Route{"POST", "/v1/holds/{hold_id}/extend", needs(Scope::holds_write), Runs::io, &extend_hold},
    Route{"POST", "/v1/holds/{hold_id}/refund", needs(Scope::admin), Runs::io, &refund_hold},
    Route{"POST", "/v1/jobs", needs(Scope::jobs_write), Runs::io, &submit_job},
    Route{"GET", "/v1/jobs", needs(Scope::read), Runs::reader, &list_jobs},
    Route{"GET", "/v1/jobs/{client_request_id}", needs(Scope::read), Runs::reader, &get_job},
    Route{"POST", "/v1/jobs/{client_request_id}/cancel", needs(Scope::jobs_write), Runs::reader, &cancel_job},
    Route{"GET", "/v1/jobs/{client_request_id}/history", needs(Scope::read), Runs::reader, &job_history},
    Route{"POST", "/v1/jobs/{client_request_id}/refund", needs(Scope::admin), Runs::reader, &refund_job},
    Route{"POST", "/v1/payments/stripe", kOpen, Runs::reader, &stripe_payment},
    Route{"POST", "/v1/payments/webhook", kOpen, Runs::reader, &webhook_payment},
    Route{"POST", "/v1/locks/{key}/acquire", needs(Scope::admin), Runs::io, &acquire_lock},
    Route{"POST", "/v1/locks/{key}/renew", needs(Scope::admin), Runs::io, &renew_lock},
    Route{"POST", "/v1/locks/{key}/release", needs(Scope::admin), Runs::io, &release_lock},
    Route{"POST", "/v1/locks/{key}/cancel", needs(Scope::admin), Runs::io, &cancel_lock},
    Route{"GET", "/v1/locks", needs(Scope::admin_read), Runs::reader, &list_locks},
    Route{"GET", "/v1/locks/{key}", needs(Scope::admin_read), Runs::reader, &get_lock},
    Route{"POST", "/v1/idempotency/{key}/begin", needs(Scope::admin), Runs::io, &begin_idempotency},
    Route{"POST", "/v1/idempotency/{key}/finish", needs(Scope::admin), Runs::io, &finish_idempotency},
    Route{"POST", "/v1/idempotency/{key}/abandon", needs(Scope::admin), Runs::io, &abandon_idempotency},
    Route{"GET", "/v1/ratelimits", needs(Scope::admin_read), Runs::io, &list_ratelimits},
    Route{"POST", "/v1/ratelimits/{policy}/check", needs(Scope::admin), Runs::io, &check_ratelimit},
    Route{"POST", "/v1/ratelimits/{policy}/reset", needs(Scope::admin), Runs::io, &reset_ratelimit},
    Route{"POST", "/v1/webhook-endpoints", needs(Scope::admin), Runs::io, &create_webhook_endpoint},
    Route{"GET", "/v1/webhook-endpoints", needs(Scope::admin_read), Runs::reader, &list_webhook_endpoints},
    Route{"GET", "/v1/webhook-endpoints/{endpoint_id}", needs(Scope::admin_read), Runs::reader, &get_webhook_endpoint},
    Route{"PATCH", "/v1/webhook-endpoints/{endpoint_id}", needs(Scope::admin), Runs::io, &update_webhook_endpoint},
    Route{"DELETE", "/v1/webhook-endpoints/{endpoint_id}", needs(Scope::admin), Runs::io, &delete_webhook_endpoint},
    Route{"POST", "/v1/webhook-endpoints/{endpoint_id}/rotate-secret", needs(Scope::admin), Runs::io, &rotate_webhook_secret},
    Route{"GET", "/v1/webhook-endpoints/{endpoint_id}/deliveries", needs(Scope::admin_read), Runs::reader,
          &list_webhook_deliveries},
    Route{"POST", "/v1/webhook-endpoints/{endpoint_id}/replay", needs(Scope::admin), Runs::io, &replay_webhook_endpoint},
    Route{"PUT", "/v1/prices/{feature}", needs(Scope::admin), Runs::io, &put_price},
    Route{"GET", "/v1/prices", needs(Scope::admin_read), Runs::reader, &list_prices},
    Route{"GET", "/v1/prices/{feature}", needs(Scope::admin_read), Runs::reader, &get_price},
    Route{"GET", "/v1/prices/{feature}/versions", needs(Scope::admin_read), Runs::reader, &list_price_versions},
    Route{"GET", "/v1/audit", needs(Scope::admin_read), Runs::reader, &audit},
};

}  // namespace

std::span<const Route> routes() { return kRoutes; }

std::string route_template(const Route& route) { return std::string(route.method) + " " + route.pattern; }

Response json_response(unsigned status, const json::value& body) {
  Response r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

Error not_found(std::string what) { return Error::make(Code::not_found, std::move(what) + " does not exist"); }

std::optional<Error> check_account_visible(const Principal& p, std::string_view account_id) {
  if (p.may_see(account_id)) return std::nullopt;
  return not_found("account " + std::string(account_id));
}

Result<std::optional<std::string>> listed_account(const Call& call) {
  std::optional<std::string> account_id;
  if (auto it = call.query.find("account_id"); it != call.query.end()) {
    if (auto s = check_id(it->second, "account_id"); !s) return s.error();
    account_id = it->second;
  }
  if (call.principal.admin) return account_id;
  if (account_id) {
    if (auto e = check_account_visible(call.principal, *account_id)) return *e;
  }
  return call.principal.account_id;
}

Result<json::object> body_object(const Call& call) { return parse_object(call.body); }

Result<std::int64_t> query_int(const Call& call, const char* key, std::int64_t fallback, std::int64_t min,
                               std::int64_t max) {
  auto it = call.query.find(key);
  if (it == call.query.end()) return fallback;
  const auto n = parse_int(it->second, min, max);
  if (!n) return invalid(std::string(key) + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return *n;
}

void on_reader(Context& ctx, Call& call, Handler work) {
  auto moved = std::make_shared<Call>(std::move(call));
  const bool queued = ctx.readers.try_post([ctx, moved, work]() mutable { work(ctx, *moved); });
  if (!queued) moved->reply(overloaded_reads());
}

Response overloaded_reads() {
  return problem(Error::make(Code::overloaded, "too many reads are waiting; retry shortly"));
}

Result<std::string> id_or_idempotency_key(FieldReader& fields, const Call& call, std::string_view field) {
  if (!call.idempotency_key) return fields.id(field);
  if (auto s = check_id(*call.idempotency_key, "Idempotency-Key"); !s) return s.error();
  auto body = fields.optional_id(field);
  if (!body) return body.error();
  if (*body && **body != *call.idempotency_key) {
    return invalid("the Idempotency-Key header (" + *call.idempotency_key + ") and " + std::string(field) + " (" +
                   **body + ") differ: send one of them, or the same id in both");
  }
  return *call.idempotency_key;
}

Status known_query(const Call& call, std::initializer_list<const char*> keys) {
  for (const auto& [k, v] : call.query) {
    bool known = false;
    for (const char* key : keys) known |= k == key;
    if (!known) return invalid("unknown query parameter " + k + did_you_mean(k, keys));
  }
  return ok_status();
}

Result<PageRequest> page_request(const Call& call) {
  PageRequest page;
  auto limit = query_int(call, "limit", limits::kListPageDefault, 1, limits::kListPageMax);
  if (!limit) return limit.error();
  page.limit = *limit;
  if (auto it = call.query.find("starting_after"); it != call.query.end()) {
    if (auto s = check_id(it->second, "starting_after"); !s) return s.error();
    page.starting_after = it->second;
  }
  return page;
}

}  // namespace tollgate::http
