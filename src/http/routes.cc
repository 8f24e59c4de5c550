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
    Route{"GET", "/healthz", Access::open, Runs::io, &healthz},
    Route{"GET", "/readyz", Access::open, Runs::reader, &readyz},
    Route{"GET", "/metrics", Access::open, Runs::reader, &prometheus_metrics},
    Route{"GET", "/openapi.json", Access::open, Runs::io, &openapi_document},
    Route{"GET", "/console", Access::open, Runs::io, &console_page},
    Route{"GET", "/console/{asset}", Access::open, Runs::io, &console_asset},
    Route{"POST", "/v1/accounts", Access::admin, Runs::io, &create_account},
    Route{"GET", "/v1/accounts", Access::admin, Runs::reader, &list_accounts},
    Route{"GET", "/v1/accounts/{account_id}", Access::account, Runs::reader, &get_account},
    Route{"PATCH", "/v1/accounts/{account_id}", Access::admin, Runs::io, &update_account},
    Route{"POST", "/v1/accounts/{account_id}/credits", Access::admin, Runs::io, &credit},
    Route{"POST", "/v1/accounts/{account_id}/debits", Access::admin, Runs::io, &debit},
    Route{"GET", "/v1/accounts/{account_id}/events", Access::account, Runs::reader, &account_events},
    Route{"POST", "/v1/accounts/{account_id}/keys", Access::admin, Runs::io, &create_key},
    Route{"GET", "/v1/keys", Access::admin, Runs::reader, &list_keys},
    Route{"DELETE", "/v1/keys/{key_id}", Access::admin, Runs::io, &revoke_key},
    Route{"GET", "/v1/events", Access::admin, Runs::reader, &events_feed},
    Route{"GET", "/v1/transfers/{reference}", Access::account, Runs::reader, &get_transfer},
    Route{"POST", "/v1/holds", Access::account, Runs::io, &reserve},
    Route{"GET", "/v1/holds", Access::account, Runs::reader, &list_holds},
    Route{"GET", "/v1/holds/{hold_id}", Access::account, Runs::reader, &get_hold},
    Route{"POST", "/v1/holds/{hold_id}/commit", Access::account, Runs::io, &commit_hold},
    Route{"POST", "/v1/holds/{hold_id}/release", Access::account, Runs::io, &release_hold},
    Route{"POST", "/v1/holds/{hold_id}/extend", Access::account, Runs::io, &extend_hold},
    Route{"POST", "/v1/holds/{hold_id}/refund", Access::admin, Runs::io, &refund_hold},
    Route{"POST", "/v1/jobs", Access::account, Runs::io, &submit_job},
    Route{"GET", "/v1/jobs", Access::account, Runs::reader, &list_jobs},
    Route{"GET", "/v1/jobs/{client_request_id}", Access::account, Runs::reader, &get_job},
    Route{"POST", "/v1/jobs/{client_request_id}/cancel", Access::account, Runs::reader, &cancel_job},
    Route{"GET", "/v1/jobs/{client_request_id}/history", Access::account, Runs::reader, &job_history},
    Route{"POST", "/v1/jobs/{client_request_id}/refund", Access::admin, Runs::reader, &refund_job},
    Route{"POST", "/v1/payments/stripe", Access::open, Runs::reader, &stripe_payment},
    Route{"POST", "/v1/payments/webhook", Access::open, Runs::reader, &webhook_payment},
    Route{"POST", "/v1/locks/{key}/acquire", Access::admin, Runs::io, &acquire_lock},
    Route{"POST", "/v1/locks/{key}/renew", Access::admin, Runs::io, &renew_lock},
    Route{"POST", "/v1/locks/{key}/release", Access::admin, Runs::io, &release_lock},
    Route{"POST", "/v1/locks/{key}/cancel", Access::admin, Runs::io, &cancel_lock},
    Route{"GET", "/v1/locks", Access::admin, Runs::reader, &list_locks},
    Route{"GET", "/v1/locks/{key}", Access::admin, Runs::reader, &get_lock},
    Route{"POST", "/v1/idempotency/{key}/begin", Access::admin, Runs::io, &begin_idempotency},
    Route{"POST", "/v1/idempotency/{key}/finish", Access::admin, Runs::io, &finish_idempotency},
    Route{"POST", "/v1/idempotency/{key}/abandon", Access::admin, Runs::io, &abandon_idempotency},
    Route{"GET", "/v1/ratelimits", Access::admin, Runs::io, &list_ratelimits},
    Route{"POST", "/v1/ratelimits/{policy}/check", Access::admin, Runs::io, &check_ratelimit},
    Route{"POST", "/v1/ratelimits/{policy}/reset", Access::admin, Runs::io, &reset_ratelimit},
    Route{"POST", "/v1/webhook-endpoints", Access::admin, Runs::io, &create_webhook_endpoint},
    Route{"GET", "/v1/webhook-endpoints", Access::admin, Runs::reader, &list_webhook_endpoints},
    Route{"GET", "/v1/webhook-endpoints/{endpoint_id}", Access::admin, Runs::reader, &get_webhook_endpoint},
    Route{"PATCH", "/v1/webhook-endpoints/{endpoint_id}", Access::admin, Runs::io, &update_webhook_endpoint},
    Route{"DELETE", "/v1/webhook-endpoints/{endpoint_id}", Access::admin, Runs::io, &delete_webhook_endpoint},
    Route{"POST", "/v1/webhook-endpoints/{endpoint_id}/rotate-secret", Access::admin, Runs::io, &rotate_webhook_secret},
    Route{"GET", "/v1/webhook-endpoints/{endpoint_id}/deliveries", Access::admin, Runs::reader,
          &list_webhook_deliveries},
    Route{"POST", "/v1/webhook-endpoints/{endpoint_id}/replay", Access::admin, Runs::io, &replay_webhook_endpoint},
    Route{"GET", "/v1/audit", Access::admin, Runs::reader, &audit},
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
