// The route table and the helpers route handlers share (routes.h).
#include "http/routes.h"

#include <array>

#include "core/checked.h"

namespace tollgate::http {

namespace {

// The API, as the OpenAPI document lists it. Matched in order; the first row whose pattern and
// method fit wins.
constexpr std::array kRoutes{
    Route{"GET", "/healthz", Access::open, &healthz},
    Route{"GET", "/readyz", Access::open, &readyz},
    Route{"GET", "/metrics", Access::open, &prometheus_metrics},
    Route{"GET", "/openapi.json", Access::open, &openapi_document},
    Route{"POST", "/v1/accounts", Access::admin, &create_account},
    Route{"GET", "/v1/accounts/{account_id}", Access::account, &get_account},
    Route{"PATCH", "/v1/accounts/{account_id}", Access::admin, &update_account},
    Route{"POST", "/v1/accounts/{account_id}/credits", Access::admin, &credit},
    Route{"POST", "/v1/accounts/{account_id}/debits", Access::admin, &debit},
    Route{"GET", "/v1/accounts/{account_id}/events", Access::account, &account_events},
    Route{"POST", "/v1/accounts/{account_id}/keys", Access::admin, &create_key},
    Route{"DELETE", "/v1/keys/{key_id}", Access::admin, &revoke_key},
    Route{"GET", "/v1/events", Access::admin, &events_feed},
    Route{"POST", "/v1/holds", Access::account, &reserve},
    Route{"GET", "/v1/holds", Access::account, &list_holds},
    Route{"GET", "/v1/holds/{hold_id}", Access::account, &get_hold},
    Route{"POST", "/v1/holds/{hold_id}/commit", Access::account, &commit_hold},
    Route{"POST", "/v1/holds/{hold_id}/release", Access::account, &release_hold},
    Route{"POST", "/v1/holds/{hold_id}/extend", Access::account, &extend_hold},
    Route{"GET", "/v1/audit", Access::admin, &audit},
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

Result<json::object> body_object(const Call& call) { return parse_object(call.body); }

Result<std::int64_t> query_int(const Call& call, const char* key, std::int64_t fallback, std::int64_t min,
                               std::int64_t max) {
  auto it = call.query.find(key);
  if (it == call.query.end()) return fallback;
  const std::string& text = it->second;
  std::int64_t n = 0;
  bool ok = !text.empty() && text.size() <= 19;
  for (char c : text) ok = ok && c >= '0' && c <= '9';
  if (ok) n = std::stoll(text);
  if (!ok || n < min || n > max) {
    return invalid(std::string(key) + " must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
  }
  return n;
}

Status known_query(const Call& call, std::initializer_list<const char*> keys) {
  for (const auto& [k, v] : call.query) {
    bool known = false;
    for (const char* key : keys) known |= k == key;
    if (!known) return invalid("unknown query parameter " + k);
  }
  return ok_status();
}

}  // namespace tollgate::http
