// tollgate http: the route table and what a route handler works with (internal to src/http).
//
// Every route of the API is one row of routes(): {method, pattern, access, handler}. The table is
// the one source of the API's shape: Api::handle matches requests against it and enforces `access`
// before a handler runs, http::Metrics labels requests with its templates, and the OpenAPI test
// checks docs/openapi.json against it. Handlers live with their resource (routes_accounts.cc,
// routes_holds.cc, routes_keys.cc, routes_operations.cc) and see only a Context and a Call.
//
// A handler answers exactly once, through call.reply — at once, or later from a completion
// (call.dispatch runs that on the connection's strand).
//
// Thread safety: the table is constant; a Call belongs to one request.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "core/scopes.h"
#include "http/api.h"
#include "http/json_codec.h"
#include "http/read_executor.h"

namespace tollgate::http {

// Where a route's handler runs. `io`: on the I/O thread, for handlers that never wait — they
// parse and answer, or hand a command to the ledger. `reader`: on the reader executor
// (read_executor.h), for every handler that asks the store; a full read queue answers 503
// `overloaded` before the handler runs.
enum class Runs { io, reader };

// Who may call a route (api.md "Keys with scopes"): anyone (`open`: its handler checks what it needs
// itself — a provider's signature, the metrics key), any valid key (`any_key`), or a key whose
// scopes grant `scope` (scope_grants: admin everything, admin:read every read). An account key acts
// only on its own account: the handler answers 404 for another's, as if it did not exist. Every
// row of the table names one (Route has no default for it: a route without a Need does not compile).
struct Need {
  enum Kind : std::uint8_t { open, any_key, scoped };
  Kind kind;
  Scope scope;  // scoped only
};
inline constexpr Need kOpen{Need::open, Scope::admin};
inline constexpr Need kAnyKey{Need::any_key, Scope::admin};
constexpr Need needs(Scope scope) { return Need{Need::scoped, scope}; }

// What every handler may use; outlives every request.
struct Context {
  Ledger& ledger;
  ReadExecutor& readers;
  Authenticator& auth;
  Metrics& metrics;
  const Clock& clock;
  const ApiOptions& options;
  jobs::JobService& jobs;         // the use cases of jobs
  coord::RateLimits& ratelimits;  // the use cases of rate limits
};

// One request, as a handler sees it.
struct Call {
  std::vector<std::string> params;           // path parameters, in pattern order
  std::map<std::string, std::string> query;  // decoded; a repeated key keeps its last value
  Principal principal;                       // unset fields for an open route
  std::string body;
  std::string authorization;  // the Authorization header, for an open route that checks a key itself
  std::optional<std::string> idempotency_key;  // the Idempotency-Key header, when sent
  std::string if_none_match;                   // the If-None-Match header, for an open route
  Request::ProviderSignature provider_signature;  // a payment provider's signature headers, for an open route
  Reply reply;        // answer exactly once
  Dispatch dispatch;  // runs work on the request's connection strand
};

using Handler = void (*)(Context&, Call&);

struct Route {
  const char* method;
  const char* pattern;  // "/v1/holds/{hold_id}/commit": a {name} segment is a parameter
  Need need;
  Runs runs;
  Handler handler;
};

// The API: every route, in the order requests are matched.
std::span<const Route> routes();
// "POST /v1/holds/{hold_id}/commit": the template metrics, logs and docs name a route by.
std::string route_template(const Route& route);

// --- handlers, by resource ---------------------------------------------------------------------
// routes_operations.cc
void healthz(Context&, Call&);
void readyz(Context&, Call&);
void prometheus_metrics(Context&, Call&);
void openapi_document(Context&, Call&);
void audit(Context&, Call&);
// routes_console.cc
void console_page(Context&, Call&);
void console_asset(Context&, Call&);
// routes_accounts.cc
void create_account(Context&, Call&);
void get_account(Context&, Call&);
void credit(Context&, Call&);
void debit(Context&, Call&);
void account_events(Context&, Call&);
void list_accounts(Context&, Call&);
void get_transfer(Context&, Call&);
void update_account(Context&, Call&);
// routes_lots.cc
void list_lots(Context&, Call&);
// The terms a credit's body gives its lot: expires_at?, priority?, category? (refusals name the field).
Result<LotTerms> lot_terms(FieldReader& f);
// routes_events.cc
void events_feed(Context&, Call&);
// routes_keys.cc
void create_key(Context&, Call&);
void create_admin_key(Context&, Call&);
void calling_key(Context&, Call&);
void revoke_key(Context&, Call&);
void list_keys(Context&, Call&);
// routes_holds.cc
void reserve(Context&, Call&);
void list_holds(Context&, Call&);
void get_hold(Context&, Call&);
void commit_hold(Context&, Call&);
void release_hold(Context&, Call&);
void extend_hold(Context&, Call&);
// routes_jobs.cc
void submit_job(Context&, Call&);
void get_job(Context&, Call&);
void cancel_job(Context&, Call&);
void list_jobs(Context&, Call&);
void job_history(Context&, Call&);
// routes_coord.cc
void acquire_lock(Context&, Call&);
void renew_lock(Context&, Call&);
void release_lock(Context&, Call&);
void cancel_lock(Context&, Call&);
void get_lock(Context&, Call&);
void list_locks(Context&, Call&);
void list_ratelimits(Context&, Call&);
void begin_idempotency(Context&, Call&);
void finish_idempotency(Context&, Call&);
void abandon_idempotency(Context&, Call&);
void check_ratelimit(Context&, Call&);
void reset_ratelimit(Context&, Call&);
// routes_webhooks.cc
void create_webhook_endpoint(Context&, Call&);
void list_webhook_endpoints(Context&, Call&);
void get_webhook_endpoint(Context&, Call&);
void update_webhook_endpoint(Context&, Call&);
void delete_webhook_endpoint(Context&, Call&);
void rotate_webhook_secret(Context&, Call&);
void list_webhook_deliveries(Context&, Call&);
void replay_webhook_endpoint(Context&, Call&);

// routes_prices.cc
void put_price(Context&, Call&);
void get_price(Context&, Call&);
void list_prices(Context&, Call&);
void list_price_versions(Context&, Call&);
void check_hold(Context&, Call&);
// What a reservation (or its check) asks for: an account, and either an amount or a feature with an
// optional quantity.
struct WhatToReserve {
  std::string account_id;
  std::optional<std::int64_t> amount;
  std::optional<std::string> feature;
  std::optional<std::int64_t> quantity;
};
// Reads those four fields (FieldReader's rules: the caller still calls finish()).
Result<WhatToReserve> read_what_to_reserve(FieldReader& f);
// After finish(): exactly one of amount and feature, and quantity only with feature.
Status priced_or_amount(const WhatToReserve& what);
// routes_refunds.cc
void refund_hold(Context&, Call&);
void refund_job(Context&, Call&);
// routes_payments.cc
void stripe_payment(Context&, Call&);
void webhook_payment(Context&, Call&);

// --- what handlers share ------------------------------------------------------------------------
// An answer whose body `write(out)` appends (no intermediate JSON tree).
template <typename Write>
Response written_response(unsigned status, Write&& write) {
  Response r;
  r.status = status;
  r.body.reserve(512);
  write(r.body);
  return r;
}

template <typename T>
Response value_response(unsigned status, const T& value) {
  return written_response(status, [&](std::string& out) { append_json(out, value); });
}

Response json_response(unsigned status, const json::value& body);

// `what` + " does not exist" (404).
Error not_found(std::string what);
// An account key sees only its own account: anything else answers 404, exactly as if it did not exist.
std::optional<Error> check_account_visible(const Principal& p, std::string_view account_id);

// The account a list is filtered by: the query's `account_id` (checked), or none; for an account
// key always its own account (naming another one answers 404, as if it did not exist).
Result<std::optional<std::string>> listed_account(const Call& call);

// The request body as a JSON object (an empty body is an empty object).
Result<json::object> body_object(const Call& call);
// A query parameter: an integer in [min, max], or `fallback` when absent.
Result<std::int64_t> query_int(const Call& call, const char* key, std::int64_t fallback, std::int64_t min,
                               std::int64_t max);
// Refuses any query parameter not in `keys`.
Status known_query(const Call& call, std::initializer_list<const char*> keys);
// A list's paging parameters (api.md): `limit` (1..1000, default 100) and `starting_after` (an id).
Result<PageRequest> page_request(const Call& call);

// {"<name>":[…items…],"has_more":…}
template <typename T>
Response page_response(std::string_view name, const Page<T>& page) {
  return written_response(200, [&](std::string& out) {
    out += "{\"";
    out += name;
    out += "\":[";
    for (std::size_t i = 0; i < page.items.size(); ++i) {
      if (i > 0) out += ',';
      append_json(out, page.items[i]);
    }
    out += page.has_more ? "],\"has_more\":true}" : "],\"has_more\":false}";
  });
}

template <typename T>
const T& outcome(const CommandResult& r) {
  const T* v = std::get_if<T>(&r.value());
  TG_ASSERT(v != nullptr);
  return *v;
}

// Submits a command to the ledger and answers from the request's strand: `respond` builds the
// answer from a successful result; a refusal answers its problem document.
template <typename Respond>
void submit(Context& ctx, Call& call, Command command, Respond respond) {
  ctx.ledger.submit(std::move(command), [reply = std::move(call.reply), dispatch = call.dispatch,
                                         respond](CommandResult r) mutable {
    dispatch([reply = std::move(reply), respond, r = std::move(r)]() mutable {
      if (!r) return reply(problem(r.error()));
      reply(respond(r));
    });
  });
}

// Runs `work(ctx, call)` on the reader executor (it reads the store), or answers 503 `overloaded`
// when the read queue is full. For a handler that runs on the I/O thread and needs a read only
// sometimes (an account key's check of a hold's account).
void on_reader(Context& ctx, Call& call, Handler work);
// The answer when the read queue is full: 503 overloaded (with Retry-After).
Response overloaded_reads();

// The id a request names in its body field `field` (request_id, reference) or in its
// Idempotency-Key header, which may stand for it (api.md): both given and different is
// invalid_request naming both; the header's value is checked like an id.
Result<std::string> id_or_idempotency_key(FieldReader& fields, const Call& call, std::string_view field);

// Answers the error of a failed Result/Status and returns from the handler.
#define TG_REPLY_IF_ERROR(expr)                        \
  do {                                                 \
    auto&& e_ = (expr);                                \
    if (!e_) return call.reply(problem(e_.error()));   \
  } while (0)

}  // namespace tollgate::http
