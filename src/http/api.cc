#include "http/api.h"

#include <boost/url.hpp>

#include <cctype>
#include <chrono>
#include <map>
#include <vector>

#include "core/checked.h"
#include "core/limits.h"
#include "http/json_codec.h"

namespace tollgate::http {
namespace {

namespace urls = boost::urls;

Response json_response(unsigned status, const json::value& body) {
  Response r;
  r.status = status;
  r.body = json::serialize(body);
  return r;
}

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

// The parts of a request a route handler works with.
struct Call {
  std::vector<std::string> params;            // path parameters in order
  std::map<std::string, std::string> query;   // decoded; a repeated key keeps its last value
  Principal principal;
  std::string body;
};

using Handler = void (*)(Api&, Ledger&, Authenticator&, Metrics&, Call&, Reply&, Dispatch&);

struct Route {
  const char* method;
  const char* pattern;  // "/v1/holds/{}/commit": {} is a parameter
  const char* name;     // the template for metrics, docs and logs
  bool public_route;    // no key needed
};

// The routes of the API, as the OpenAPI document lists them.
constexpr Route kRoutes[] = {
    {"GET", "/healthz", "GET /healthz", true},
    {"GET", "/readyz", "GET /readyz", true},
    {"GET", "/metrics", "GET /metrics", true},
    {"GET", "/openapi.json", "GET /openapi.json", true},
    {"POST", "/v1/accounts", "POST /v1/accounts", false},
    {"GET", "/v1/accounts/{}", "GET /v1/accounts/{account_id}", false},
    {"POST", "/v1/accounts/{}/credits", "POST /v1/accounts/{account_id}/credits", false},
    {"POST", "/v1/accounts/{}/debits", "POST /v1/accounts/{account_id}/debits", false},
    {"GET", "/v1/accounts/{}/events", "GET /v1/accounts/{account_id}/events", false},
    {"POST", "/v1/accounts/{}/keys", "POST /v1/accounts/{account_id}/keys", false},
    {"DELETE", "/v1/keys/{}", "DELETE /v1/keys/{key_id}", false},
    {"POST", "/v1/holds", "POST /v1/holds", false},
    {"GET", "/v1/holds", "GET /v1/holds", false},
    {"GET", "/v1/holds/{}", "GET /v1/holds/{hold_id}", false},
    {"POST", "/v1/holds/{}/commit", "POST /v1/holds/{hold_id}/commit", false},
    {"POST", "/v1/holds/{}/release", "POST /v1/holds/{hold_id}/release", false},
    {"POST", "/v1/holds/{}/extend", "POST /v1/holds/{hold_id}/extend", false},
    {"GET", "/v1/audit", "GET /v1/audit", false},
};

std::vector<std::string> split_pattern(std::string_view pattern) {
  std::vector<std::string> out;
  std::size_t start = 1;
  while (start <= pattern.size()) {
    const std::size_t slash = pattern.find('/', start);
    const std::size_t end = slash == std::string_view::npos ? pattern.size() : slash;
    out.emplace_back(pattern.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Matches decoded path segments against a pattern; fills the parameters.
bool matches(const Route& route, const std::vector<std::string>& segments, std::vector<std::string>& params) {
  static const auto patterns = [] {
    std::vector<std::vector<std::string>> out;
    for (const Route& r : kRoutes) out.push_back(split_pattern(r.pattern));
    return out;
  }();
  const auto& pattern = patterns[static_cast<std::size_t>(&route - kRoutes)];
  if (pattern.size() != segments.size()) return false;
  params.clear();
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == "{}") {
      params.push_back(segments[i]);
    } else if (pattern[i] != segments[i]) {
      return false;
    }
  }
  return true;
}

Error not_found(std::string what) { return Error::make(Code::not_found, std::move(what) + " does not exist"); }
Error forbidden() { return Error::make(Code::forbidden, "this call needs the admin key"); }

// An account key sees only its own account: anything else answers 404, exactly as if it did not exist.
std::optional<Error> check_account_visible(const Principal& p, std::string_view account_id) {
  if (p.may_see(account_id)) return std::nullopt;
  return not_found("account " + std::string(account_id));
}

template <typename T>
const T& outcome(const CommandResult& r) {
  const T* v = std::get_if<T>(&r.value());
  TG_ASSERT(v != nullptr);
  return *v;
}

void count_hold_outcome(Metrics& m, const Hold& hold) {
  switch (hold.status) {
    case HoldStatus::committed: m.holds_committed.fetch_add(1, std::memory_order_relaxed); break;
    case HoldStatus::released: m.holds_released.fetch_add(1, std::memory_order_relaxed); break;
    default: break;
  }
  if (hold.late_outcome == LateOutcome::charged) m.holds_late_charged.fetch_add(1);
  if (hold.late_outcome == LateOutcome::forgiven) m.holds_late_forgiven.fetch_add(1);
}

// Submits a command and answers from the I/O thread: `respond` builds the answer from the result.
template <typename Respond>
void submit(Ledger& ledger, Metrics& metrics, Command command, Reply& reply, Dispatch& dispatch, Respond respond) {
  ledger.submit(std::move(command), [&metrics, reply = std::move(reply), dispatch, respond](CommandResult r) mutable {
    dispatch([&metrics, reply = std::move(reply), respond, r = std::move(r)]() mutable {
      if (!r) {
        if (r.code() == Code::insufficient_credits) metrics.reservation_conflicts.fetch_add(1, std::memory_order_relaxed);
        reply(problem(r.error()));
        return;
      }
      reply(respond(r));
    });
  });
}

Result<json::object> body_object(const Call& call) { return parse_object(call.body); }

// "application/json", in any case, with or without parameters ("; charset=utf-8").
bool is_json_media_type(std::string_view content_type) {
  std::string_view type = content_type.substr(0, content_type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t')) type.remove_prefix(1);
  constexpr std::string_view kJson = "application/json";
  if (type.size() != kJson.size()) return false;
  for (std::size_t i = 0; i < type.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(type[i])) != kJson[i]) return false;
  }
  return true;
}

#define TG_REPLY_IF_ERROR(expr)              \
  do {                                       \
    auto&& e_ = (expr);                      \
    if (!e_) return reply(problem(e_.error())); \
  } while (0)

// --- accounts ---------------------------------------------------------------------------------------
void create_account(Api&, Ledger& ledger, Authenticator&, Metrics& metrics, Call& call, Reply& reply, Dispatch& dispatch) {
  if (!call.principal.admin) return reply(problem(forbidden()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto account_id = f.id("account_id");
  TG_REPLY_IF_ERROR(account_id);
  auto overdraft = f.integer("overdraft_limit", 0, limits::kOverdraftLimitMax);
  TG_REPLY_IF_ERROR(overdraft);
  auto max_holds = f.integer("max_active_holds", 1, limits::kMaxActiveHoldsMax);
  TG_REPLY_IF_ERROR(max_holds);
  TG_REPLY_IF_ERROR(f.finish());
  submit(ledger, metrics, CreateAccountCommand{*account_id, overdraft->value_or(0), *max_holds}, reply, dispatch,
         [](const CommandResult& r) {
           const auto& o = outcome<AccountOutcome>(r);
           return value_response(o.created ? 201 : 200, o.account);
         });
}

void get_account(Api&, Ledger& ledger, Authenticator&, Metrics&, Call& call, Reply& reply, Dispatch&) {
  if (auto e = check_account_visible(call.principal, call.params[0])) return reply(problem(*e));
  auto account = ledger.get_account(call.params[0]);
  TG_REPLY_IF_ERROR(account);
  reply(value_response(200, *account));
}

template <bool kCredit>
void transfer(Api&, Ledger& ledger, Authenticator&, Metrics& metrics, Call& call, Reply& reply, Dispatch& dispatch) {
  if (!call.principal.admin) return reply(problem(forbidden()));
  if (auto s = check_id(call.params[0], "account_id"); !s) return reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto amount = f.amount("amount");
  TG_REPLY_IF_ERROR(amount);
  auto reference = f.id("reference");
  TG_REPLY_IF_ERROR(reference);
  Command command = CreditCommand{call.params[0], *amount, *reference};
  if (!kCredit) {
    auto reason = f.required_string("reason", limits::kReasonLengthMax);
    TG_REPLY_IF_ERROR(reason);
    command = DebitCommand{call.params[0], *amount, *reference, *reason};
  }
  TG_REPLY_IF_ERROR(f.finish());
  submit(ledger, metrics, std::move(command), reply, dispatch, [](const CommandResult& r) {
    const auto& o = outcome<TransferOutcome>(r);
    return written_response(o.created ? 201 : 200, [&](std::string& out) {
      out += "{\"event\":";
      append_json(out, o.event);
      out += ",\"account\":";
      append_json(out, o.account);
      out += '}';
    });
  });
}

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

void read_events(Api&, Ledger& ledger, Authenticator&, Metrics&, Call& call, Reply& reply, Dispatch&) {
  if (auto e = check_account_visible(call.principal, call.params[0])) return reply(problem(*e));
  TG_REPLY_IF_ERROR(known_query(call, {"after", "limit"}));
  auto after = query_int(call, "after", 0, 0, std::numeric_limits<std::int64_t>::max());
  TG_REPLY_IF_ERROR(after);
  auto limit = query_int(call, "limit", 100, 1, limits::kEventsPageMax);
  TG_REPLY_IF_ERROR(limit);
  auto page = ledger.read_events(call.params[0], *after, *limit);
  TG_REPLY_IF_ERROR(page);
  reply(written_response(200, [&](std::string& out) {
    out += "{\"events\":[";
    for (std::size_t i = 0; i < page->events.size(); ++i) {
      if (i > 0) out += ',';
      append_json(out, page->events[i]);
    }
    out += "],\"next_after\":";
    append_json_int(out, page->next_after);
    out += '}';
  }));
}

// --- keys -----------------------------------------------------------------------------------------------
void create_key(Api&, Ledger& ledger, Authenticator&, Metrics& metrics, Call& call, Reply& reply, Dispatch& dispatch) {
  if (!call.principal.admin) return reply(problem(forbidden()));
  if (auto s = check_id(call.params[0], "account_id"); !s) return reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  TG_REPLY_IF_ERROR(FieldReader(*body).finish());
  std::string secret = new_secret();
  submit(ledger, metrics, CreateKeyCommand{new_key_id(), call.params[0], sha256_hex(secret)}, reply, dispatch,
         [secret](const CommandResult& r) {
           const auto& o = outcome<KeyOutcome>(r);
           return json_response(201, json::object{{"key_id", o.key.key_id},
                                                  {"account_id", *o.key.account_id},
                                                  {"secret", secret},
                                                  {"created_at", format_rfc3339_ms(o.key.created_at_ms)}});
         });
}

void revoke_key(Api&, Ledger& ledger, Authenticator& auth, Metrics& metrics, Call& call, Reply& reply,
                Dispatch& dispatch) {
  if (!call.principal.admin) return reply(problem(forbidden()));
  if (auto s = check_id(call.params[0], "key_id"); !s) return reply(problem(s.error()));
  if (!call.body.empty()) {
    auto body = body_object(call);
    TG_REPLY_IF_ERROR(body);
    TG_REPLY_IF_ERROR(FieldReader(*body).finish());
  }
  submit(ledger, metrics, RevokeKeyCommand{call.params[0]}, reply, dispatch, [&auth](const CommandResult& r) {
    const auto& o = outcome<KeyOutcome>(r);
    auth.forget(o.key.key_id);
    json::object body{{"key_id", o.key.key_id}, {"revoked", true}};
    if (o.key.account_id) body["account_id"] = *o.key.account_id;
    if (o.key.revoked_at_ms) body["revoked_at"] = format_rfc3339_ms(*o.key.revoked_at_ms);
    return json_response(200, body);
  });
}

// --- holds ------------------------------------------------------------------------------------------
void reserve(Api&, Ledger& ledger, Authenticator&, Metrics& metrics, Call& call, Reply& reply, Dispatch& dispatch) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto account_id = f.id("account_id");
  TG_REPLY_IF_ERROR(account_id);
  auto amount = f.amount("amount");
  TG_REPLY_IF_ERROR(amount);
  auto request_id = f.id("request_id");
  TG_REPLY_IF_ERROR(request_id);
  auto ttl = f.integer("ttl_ms", limits::kHoldTtlMsMin, ledger.options().hold_ttl_ms_max);
  TG_REPLY_IF_ERROR(ttl);
  auto metadata = f.object("metadata", limits::kMetadataBytesMax);
  TG_REPLY_IF_ERROR(metadata);
  TG_REPLY_IF_ERROR(f.finish());
  if (auto e = check_account_visible(call.principal, *account_id)) return reply(problem(*e));
  submit(ledger, metrics,
         ReserveCommand{*account_id, *amount, *request_id, *ttl, metadata->value_or("{}"), ""}, reply, dispatch,
         [](const CommandResult& r) {
           const auto& o = outcome<HoldOutcome>(r);
           return value_response(o.created ? 201 : 200, o.hold);
         });
}

// Reads a hold for an account key's check: 404 unless the caller may see its account.
Result<Hold> visible_hold(Ledger& ledger, const Call& call) {
  auto hold = ledger.get_hold(call.params[0]);
  if (!hold) return hold.error();
  if (!call.principal.may_see(hold->account_id)) return not_found("hold " + call.params[0]);
  return hold;
}

void get_hold(Api&, Ledger& ledger, Authenticator&, Metrics&, Call& call, Reply& reply, Dispatch&) {
  auto hold = visible_hold(ledger, call);
  TG_REPLY_IF_ERROR(hold);
  reply(value_response(200, *hold));
}

void list_holds(Api&, Ledger& ledger, Authenticator&, Metrics&, Call& call, Reply& reply, Dispatch&) {
  TG_REPLY_IF_ERROR(known_query(call, {"account_id", "status", "limit"}));
  HoldFilter filter;
  if (auto it = call.query.find("account_id"); it != call.query.end()) {
    if (auto s = check_id(it->second, "account_id"); !s) return reply(problem(s.error()));
    filter.account_id = it->second;
  }
  if (auto it = call.query.find("status"); it != call.query.end()) {
    filter.status = parse_hold_status(it->second);
    if (!filter.status) return reply(problem(invalid("status must be active, committed, released or expired")));
  }
  auto limit = query_int(call, "limit", 100, 1, limits::kHoldsPageMax);
  TG_REPLY_IF_ERROR(limit);
  filter.limit = *limit;
  if (!call.principal.admin) {
    if (filter.account_id && *filter.account_id != *call.principal.account_id) {
      return reply(problem(not_found("account " + *filter.account_id)));
    }
    filter.account_id = call.principal.account_id;
  }
  auto holds = ledger.list_holds(filter);
  TG_REPLY_IF_ERROR(holds);
  reply(written_response(200, [&](std::string& out) {
    out += "{\"holds\":[";
    for (std::size_t i = 0; i < holds->size(); ++i) {
      if (i > 0) out += ',';
      append_json(out, (*holds)[i]);
    }
    out += "]}";
  }));
}

enum class HoldAction { commit, release, extend };

template <HoldAction kAction>
void change_hold(Api&, Ledger& ledger, Authenticator&, Metrics& metrics, Call& call, Reply& reply, Dispatch& dispatch) {
  if (auto s = check_id(call.params[0], "hold_id"); !s) return reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  Command command;
  if constexpr (kAction == HoldAction::commit) {
    auto amount = f.optional_amount("amount");
    TG_REPLY_IF_ERROR(amount);
    command = CommitCommand{call.params[0], *amount};
  } else if constexpr (kAction == HoldAction::release) {
    auto reason = f.string("reason", limits::kReasonLengthMax);
    TG_REPLY_IF_ERROR(reason);
    command = ReleaseCommand{call.params[0]};
  } else {
    auto ttl = f.required_integer("ttl_ms", limits::kHoldTtlMsMin, ledger.options().hold_ttl_ms_max);
    TG_REPLY_IF_ERROR(ttl);
    command = ExtendCommand{call.params[0], *ttl};
  }
  TG_REPLY_IF_ERROR(f.finish());
  if (!call.principal.admin) {
    auto hold = visible_hold(ledger, call);
    TG_REPLY_IF_ERROR(hold);
  }
  submit(ledger, metrics, std::move(command), reply, dispatch, [&metrics](const CommandResult& r) {
    const auto& o = outcome<HoldOutcome>(r);
    if (o.created && kAction != HoldAction::extend) count_hold_outcome(metrics, o.hold);
    return value_response(200, o.hold);
  });
}

// --- operations -------------------------------------------------------------------------------------
void audit(Api&, Ledger& ledger, Authenticator&, Metrics& metrics, Call& call, Reply& reply, Dispatch&) {
  if (!call.principal.admin) return reply(problem(forbidden()));
  TG_REPLY_IF_ERROR(known_query(call, {"account_id"}));
  std::optional<std::string> account;
  if (auto it = call.query.find("account_id"); it != call.query.end()) account = it->second;
  auto report = ledger.audit(account ? std::optional<std::string_view>(*account) : std::nullopt);
  TG_REPLY_IF_ERROR(report);
  metrics.invariant_violations.fetch_add(report->violations.size(), std::memory_order_relaxed);
  reply(value_response(200, *report));
}

}  // namespace

unsigned http_status(Code code) {
  switch (code) {
    case Code::ok: return 200;
    case Code::invalid_request: return 400;
    case Code::unauthorized: return 401;
    case Code::forbidden: return 403;
    case Code::not_found: return 404;
    case Code::conflict:
    case Code::insufficient_credits:
    case Code::too_many_holds:
    case Code::hold_committed:
    case Code::hold_released:
    case Code::hold_expired: return 409;
    case Code::idempotency_mismatch:
    case Code::overflow: return 422;
    case Code::overloaded:
    case Code::unavailable: return 503;
    case Code::internal: return 500;
  }
  return 500;
}

namespace {

const char* status_title(unsigned status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

Response problem_response(unsigned status, std::string_view code, std::string_view detail,
                          std::optional<std::int64_t> available, std::optional<std::int64_t> requested) {
  Response r = written_response(status, [&](std::string& out) {
    out += "{\"type\":\"https://tollgate.dev/errors/";
    out += code;  // a code name: [a-z_]
    out += "\",\"title\":\"";
    out += status_title(status);
    out += "\",\"status\":";
    append_json_int(out, status);
    out += ",\"detail\":";
    append_json_string(out, detail);
    out += ",\"code\":\"";
    out += code;
    out += '"';
    if (available) {
      out += ",\"available\":";
      append_json_int(out, *available);
    }
    if (requested) {
      out += ",\"requested\":";
      append_json_int(out, *requested);
    }
    out += '}';
  });
  r.content_type = "application/problem+json";
  r.code = std::string(code);
  if (status == 503) r.retry_after_s = 1;
  return r;
}

}  // namespace

Response problem(unsigned status, std::string_view code, std::string detail) {
  return problem_response(status, code, detail, std::nullopt, std::nullopt);
}

Response problem(const Error& error) {
  return problem_response(http_status(error.code), code_name(error.code), error.detail, error.available,
                          error.requested);
}

const std::vector<std::string>& Api::route_templates() {
  static const std::vector<std::string> out = [] {
    std::vector<std::string> v;
    for (const Route& r : kRoutes) v.emplace_back(r.name);
    return v;
  }();
  return out;
}

Api::Api(Ledger& ledger, Authenticator& auth, Metrics& metrics, const Clock& clock, ApiOptions options)
    : ledger_(ledger), auth_(auth), metrics_(metrics), clock_(clock), options_(std::move(options)) {}

void Api::handle(Request request, Reply reply, Dispatch dispatch) {
  auto parsed = urls::parse_origin_form(request.target);
  if (!parsed) return reply(problem(400, "invalid_request", "the request target is not a valid path"));
  Call call;
  std::vector<std::string> segments;
  for (auto segment : parsed->segments()) segments.emplace_back(segment);
  for (auto param : parsed->params()) call.query[std::string(param.key)] = std::string(param.value);

  const Route* route = nullptr;
  std::string allowed;
  for (const Route& r : kRoutes) {
    if (!matches(r, segments, call.params)) continue;
    if (request.method == r.method) {
      route = &r;
      break;
    }
    allowed += allowed.empty() ? r.method : std::string(", ") + r.method;
  }
  if (!route) {
    if (!allowed.empty()) {
      Response r = problem(405, "method_not_allowed", request.method + " is not allowed here; use " + allowed);
      r.allow = allowed;
      return reply(std::move(r));
    }
    return reply(problem(404, "not_found", "no such route: " + std::string(parsed->path())));
  }
  // Stamp every answer of this request with its route.
  Reply stamped = [reply = std::move(reply), index = static_cast<std::size_t>(route - kRoutes) + 1](Response r) {
    r.route = index;
    reply(std::move(r));
  };

  const std::string_view name = route->name;
  if (name == "GET /healthz") {
    Response r;
    r.body = "{\"status\":\"ok\"}";
    return stamped(std::move(r));
  }
  if (name == "GET /openapi.json") {
    Response r;
    r.body = options_.openapi_json;
    return stamped(std::move(r));
  }
  if (name == "GET /readyz") {
    json::object body;
    bool ready = true;
    if (auto ping = ledger_.store().ping(); !ping) {
      ready = false;
      body["database"] = ping.error().detail;
    } else {
      body["database"] = "ok";
    }
    const auto last = ledger_.reaper_last_run_ms();
    const std::int64_t age_ms = last ? clock_.now_ms() - *last : -1;
    if (!last || age_ms > 3 * options_.reaper_interval_ms + 1000) {
      ready = false;
      body["reaper"] = last ? "last ran " + std::to_string(age_ms) + " ms ago" : std::string("has not run yet");
    } else {
      body["reaper"] = "ok";
    }
    body["status"] = ready ? "ready" : "not ready";
    Response r = json_response(ready ? 200 : 503, body);
    if (!ready) r.retry_after_s = 1;
    return stamped(std::move(r));
  }
  if (name == "GET /metrics") {
    Response r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = options_.render_metrics ? options_.render_metrics() : std::string();
    return stamped(std::move(r));
  }

  auto principal = auth_.authenticate(request.authorization);
  if (!principal) return stamped(problem(principal.error()));
  if (request.method != "GET" && request.method != "DELETE" && !request.body.empty() &&
      !is_json_media_type(request.content_type)) {
    return stamped(problem(415, "unsupported_media_type", "the body must be application/json"));
  }
  call.principal = std::move(principal).value();
  call.body = std::move(request.body);

  static const std::map<std::string_view, Handler> kHandlers{
      {"POST /v1/accounts", &create_account},
      {"GET /v1/accounts/{account_id}", &get_account},
      {"POST /v1/accounts/{account_id}/credits", &transfer<true>},
      {"POST /v1/accounts/{account_id}/debits", &transfer<false>},
      {"GET /v1/accounts/{account_id}/events", &read_events},
      {"POST /v1/accounts/{account_id}/keys", &create_key},
      {"DELETE /v1/keys/{key_id}", &revoke_key},
      {"POST /v1/holds", &reserve},
      {"GET /v1/holds", &list_holds},
      {"GET /v1/holds/{hold_id}", &get_hold},
      {"POST /v1/holds/{hold_id}/commit", &change_hold<HoldAction::commit>},
      {"POST /v1/holds/{hold_id}/release", &change_hold<HoldAction::release>},
      {"POST /v1/holds/{hold_id}/extend", &change_hold<HoldAction::extend>},
      {"GET /v1/audit", &audit},
  };
  auto handler = kHandlers.find(name);
  TG_ASSERT(handler != kHandlers.end());
  handler->second(*this, ledger_, auth_, metrics_, call, stamped, dispatch);
}

}  // namespace tollgate::http
