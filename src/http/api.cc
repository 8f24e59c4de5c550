#include "http/api.h"

#include <algorithm>
#include <boost/url.hpp>

#include <atomic>
#include <cctype>
#include <memory>
#include <vector>

#include "core/checked.h"
#include "core/last_resort.h"
#include "core/log.h"
#include "http/routes.h"

namespace tollgate::http {
namespace {

namespace urls = boost::urls;

// A route's pattern split into segments ("{name}" segments are parameters), built once per route.
const std::vector<std::vector<std::string>>& route_segments() {
  static const auto segments = [] {
    std::vector<std::vector<std::string>> out;
    for (const Route& route : routes()) {
      std::vector<std::string> parts;
      const std::string_view pattern = route.pattern;
      std::size_t start = 1;
      while (start <= pattern.size()) {
        const std::size_t slash = pattern.find('/', start);
        const std::size_t end = slash == std::string_view::npos ? pattern.size() : slash;
        parts.emplace_back(pattern.substr(start, end - start));
        start = end + 1;
      }
      out.push_back(std::move(parts));
    }
    return out;
  }();
  return segments;
}

bool is_parameter(std::string_view segment) { return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}'; }

// Matches decoded path segments against route `index`'s pattern; fills the parameters.
bool matches(std::size_t index, const std::vector<std::string>& segments, std::vector<std::string>& params) {
  const auto& pattern = route_segments()[index];
  if (pattern.size() != segments.size()) return false;
  params.clear();
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (is_parameter(pattern[i])) {
      params.push_back(segments[i]);
    } else if (pattern[i] != segments[i]) {
      return false;
    }
  }
  return true;
}

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
    case Code::account_frozen:
    case Code::hold_committed:
    case Code::hold_released:
    case Code::hold_expired:
    case Code::lock_held:
    case Code::lock_lost:
    case Code::lock_cancelled:
    case Code::in_progress:
    case Code::refund_exceeds_charge: return 409;
    case Code::invalid_signature: return 400;
    case Code::rate_limited: return 429;
    case Code::idempotency_mismatch:
    case Code::overflow: return 422;
    case Code::overloaded:
    case Code::unavailable:
    case Code::storage_full:
    case Code::storage_failed: return 503;
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
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// What a caller can do about a 5xx answer, in its words; the error's own detail (which may hold the
// database's address, SQL or driver text) is for the log only. overloaded is the server's own words.
std::string_view caller_detail(std::string_view code) {
  if (code == "unavailable") {
    return "the service is unavailable right now (its database cannot be reached, or it is stopping); retry in a "
           "few seconds with the same request id (nothing is done twice)";
  }
  if (code == "storage_full") {
    return "the service's disk is full, so nothing was written; retry later with the same request id (reads still work)";
  }
  if (code == "storage_failed") {
    return "the service could not write durably and takes no writes until its operator restarts it; retry later "
           "with the same request id (reads still work)";
  }
  return "an internal error; retry with the same request id, or give the operator this request_id";
}

Response problem_response(unsigned status, std::string_view code, std::string_view detail,
                          std::optional<std::int64_t> available, std::optional<std::int64_t> requested,
                          std::optional<std::int64_t> expires_at_ms = std::nullopt,
                          std::optional<std::int64_t> retry_after_ms = std::nullopt,
                          std::optional<Scope> missing_scope = std::nullopt) {
  std::string log_detail;
  if (status >= 500 && code != "overloaded") {
    log_detail = std::string(detail);
    detail = caller_detail(code);
  }
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
    if (expires_at_ms) {
      out += ",\"expires_at\":";
      append_json_time(out, *expires_at_ms);
    }
    if (retry_after_ms) {
      out += ",\"retry_after_ms\":";
      append_json_int(out, *retry_after_ms);
    }
    if (missing_scope) {
      out += ",\"missing_scope\":";
      append_json_string(out, scope_name(*missing_scope));
    }
    out += '}';
  });
  r.content_type = "application/problem+json";
  r.code = std::string(code);
  r.log_detail = std::move(log_detail);
  if (status == 503) r.retry_after_s = 1;
  // Retry-After is in whole seconds: rounded up, so a client that honours it is never early.
  if (retry_after_ms) r.retry_after_s = static_cast<int>(std::min<std::int64_t>((*retry_after_ms + 999) / 1000, 1 << 30));
  return r;
}

}  // namespace

Response problem(unsigned status, std::string_view code, std::string detail) {
  return problem_response(status, code, detail, std::nullopt, std::nullopt);
}

// 403: the key's scopes do not grant the route's (api.md "Keys with scopes"): the answer names it.
Response forbidden_scope(Scope needed, const Principal& principal) {
  const std::string has = scopes_text(principal.scopes);
  const std::string detail = "this call needs the scope " + std::string(scope_name(needed)) + "; this key (" +
                             principal.key_id + ") has " + (has.empty() ? std::string("none") : has);
  return problem_response(403, code_name(Code::forbidden), detail, std::nullopt, std::nullopt, std::nullopt,
                          std::nullopt, needed);
}

Response problem(const Error& error) {
  return problem_response(http_status(error.code), code_name(error.code), error.detail, error.available,
                          error.requested, error.expires_at_ms, error.retry_after_ms);
}

const std::vector<std::string>& Api::route_templates() {
  static const std::vector<std::string> out = [] {
    std::vector<std::string> v;
    for (const Route& r : routes()) v.push_back(route_template(r));
    return v;
  }();
  return out;
}

Api::Api(Ledger& ledger, ReadExecutor& readers, Authenticator& auth, Metrics& metrics, const Clock& clock,
         ApiOptions options)
    : ledger_(ledger),
      readers_(readers),
      auth_(auth),
      metrics_(metrics),
      clock_(clock),
      options_(std::move(options)),
      own_jobs_(options_.jobs ? nullptr : std::make_unique<jobs::JobService>(ledger, nullptr)),
      own_ratelimits_(options_.ratelimits ? nullptr : std::make_unique<coord::RateLimits>(ledger, clock, nullptr)),
      jobs_(options_.jobs ? *options_.jobs : *own_jobs_),
      ratelimits_(options_.ratelimits ? *options_.ratelimits : *own_ratelimits_) {
  if (options_.auth_failures_limit > 0) {
    auth_failures_ = std::make_unique<coord::LocalLimiter>(
        coord::GcraPolicy{options_.auth_failures_limit, options_.auth_failures_period_ms},
        std::max<std::size_t>(1, options_.auth_failures_addresses_max));
  }
}

namespace {

Response too_many_failed_auth(std::int64_t retry_after_ms) {
  // Like every 429: retry_after_ms in the body, Retry-After (whole seconds, rounded up) in the head.
  return problem_response(429, "too_many_failed_auth",
                          "too many failed authentications from this address; retry after " +
                              std::to_string((retry_after_ms + 999) / 1000) + " s with a valid key",
                          std::nullopt, std::nullopt, std::nullopt, retry_after_ms);
}

}  // namespace

Response Api::refuse_auth(const Error& error, const std::string& address) {
  if (error.code != Code::unauthorized) return problem(error);  // the database could not tell: not a failure
  return count_failed_auth(problem(error), address);
}

Response Api::count_failed_auth(Response refused, const std::string& address) {
  if (auth_failures_) {
    const auto d = auth_failures_->check(address, 1, clock_.now_ms());
    if (!d.allowed) {
      metrics_.edge.add<&EdgeCounts::auth_throttled>();
      return too_many_failed_auth(d.retry_after_ms);
    }
  }
  metrics_.edge.add<&EdgeCounts::auth_failures>();
  return refused;
}

namespace {

// Runs the route's handler: here, or on the reader executor if it reads the store and this is not
// a reader thread already.
void run_handler(const Route& route, Context& ctx, Call& call, bool on_reader_thread) {
  if (route.runs == Runs::reader && !on_reader_thread) return on_reader(ctx, call, route.handler);
  route.handler(ctx, call);
}

// The request's reply, guarded: when every copy of it is gone and none was called — the work that
// held it threw (the last-resort catch noted that: core/last_resort.h) or dropped it — the request
// is answered 500 `internal`, so that a bug costs one request, never its connection's silence.
// Copies share one guard; calling any of them counts as answered.
Reply guarded(Reply reply) {
  struct Guard {
    Reply reply;
    std::atomic<bool> answered{false};
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    explicit Guard(Reply r) : reply(std::move(r)) {}
    ~Guard() {
      if (answered.load(std::memory_order_acquire)) return;
      // Says nothing about the cause: that is in the log, beside the count on /metrics.
      run_last_resort("the unanswered-request guard", [&] {
        log("error", "bug: a request was left unanswered; it is answered 500 internal");
        reply(problem(Error::make(Code::internal, "the server failed while answering this request; nothing is known "
                                                  "about whether it took effect: retry it with the same id")));
      });
    }
  };
  auto guard = std::make_shared<Guard>(std::move(reply));
  return [guard](Response r) {
    guard->answered.store(true, std::memory_order_release);
    guard->reply(std::move(r));
  };
}

// Every answer of a request is stamped with its route and, once known, who acted on which account.
// Guarded again, so that a 500 for a reply dropped unanswered carries the route too.
Reply stamped(Reply reply, std::size_t route_index, std::string key_id, std::string account_id) {
  return guarded([reply = std::move(reply), route_index, key_id = std::move(key_id),
                  account_id = std::move(account_id)](Response r) {
    r.route = route_index;
    r.key_id = key_id;
    r.account_id = account_id;
    reply(std::move(r));
  });
}

// The rest of a request to a route that needs a key, once the key is resolved.
void authorized(const Route& route, std::size_t route_index, Context& ctx, Call& call, Request& request, Reply& reply,
                Result<Principal> principal, bool on_reader_thread) {
  if (!principal) {
    call.reply = stamped(std::move(reply), route_index, "", "");
    return call.reply(problem(principal.error()));
  }
  // The account the request concerns: an account key's own, or the route's {account_id} (a valid id).
  std::string account = principal->account_id.value_or("");
  if (account.empty() && std::string_view(route.pattern).find("{account_id}") != std::string_view::npos &&
      check_id(call.params[0], "account_id")) {
    account = call.params[0];
  }
  call.reply = stamped(std::move(reply), route_index, principal->key_id, std::move(account));
  if (request.method != "GET" && request.method != "HEAD" && request.method != "DELETE" && !request.body.empty() &&
      !is_json_media_type(request.content_type)) {
    return call.reply(problem(415, "unsupported_media_type", "the body must be application/json"));
  }
  if (route.need.kind == Need::scoped && !scope_grants(principal->scopes, route.need.scope)) {
    return call.reply(forbidden_scope(route.need.scope, *principal));
  }
  call.principal = std::move(principal).value();
  call.body = std::move(request.body);
  run_handler(route, ctx, call, on_reader_thread);
}

}  // namespace

void Api::begin_shutdown() { ledger_.wake_event_waiters(); }

void Api::handle(Request request, Reply reply, Dispatch dispatch) {
  // The session's boundary: an exception escaping the handlers is a bug, noted here; the request,
  // whose reply the unwinding dropped, answers 500 `internal` through its guard. The caller goes on.
  run_last_resort("a request handler",
                  [&] { handle_unguarded(std::move(request), guarded(std::move(reply)), std::move(dispatch)); });
}

void Api::handle_unguarded(Request request, Reply reply, Dispatch dispatch) {
  request.client_address =
      options_.trusted_proxies.client_address(request.client_address, request.x_forwarded_for, request.forwarded);
  auto parsed = urls::parse_origin_form(request.target);
  if (!parsed) return reply(problem(400, "invalid_request", "the request target is not a valid path"));
  Call call;
  std::vector<std::string> segments;
  for (auto segment : parsed->segments()) segments.emplace_back(segment);
  for (auto param : parsed->params()) call.query[std::string(param.key)] = std::string(param.value);

  const auto table = routes();
  const Route* route = nullptr;
  std::string allowed;
  // HEAD is GET without the body (RFC 9110 §9.3.2): it runs the GET route — same status, same
  // headers, same Content-Length — and the server sends no body (http/server.cc).
  const std::string_view method = request.method == "HEAD" ? std::string_view("GET") : std::string_view(request.method);
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (!matches(i, segments, call.params)) continue;
    if (method == table[i].method) {
      route = &table[i];
      break;
    }
    allowed += allowed.empty() ? table[i].method : std::string(", ") + table[i].method;
    if (std::string_view(table[i].method) == "GET") allowed += ", HEAD";
  }
  if (!route) {
    if (!allowed.empty()) {
      Response r = problem(405, "method_not_allowed", request.method + " is not allowed here; use " + allowed);
      r.allow = allowed;
      return reply(std::move(r));
    }
    return reply(problem(404, "not_found", "no such route: " + std::string(parsed->path())));
  }
  const std::size_t route_index = static_cast<std::size_t>(route - table.data()) + 1;
  call.dispatch = std::move(dispatch);
  call.idempotency_key = std::move(request.idempotency_key);
  Context context{ledger_, readers_, auth_, metrics_, clock_, options_, jobs_, ratelimits_};

  if (route->need.kind == Need::open) {
    call.reply = stamped(std::move(reply), route_index, "", "");
    if (!request.authorization.empty()) {
      // A key sent to an open route is checked by its handler (GET /metrics): guesses count.
      call.reply = [this, address = request.client_address, inner = std::move(call.reply)](Response r) {
        if (r.status == 401) r = count_failed_auth(std::move(r), address);
        inner(std::move(r));
      };
    }
    call.body = std::move(request.body);
    call.authorization = std::move(request.authorization);
    call.if_none_match = std::move(request.if_none_match);
    call.provider_signature = std::move(request.provider_signature);
    return run_handler(*route, context, call, false);
  }
  if (auto principal = auth_.authenticate_cached(request.authorization)) {
    if (!*principal) {
      return stamped(std::move(reply), route_index, "", "")(refuse_auth(principal->error(), request.client_address));
    }
    return authorized(*route, route_index, context, call, request, reply, std::move(*principal), false);
  }
  // Only the database knows this key (not cached yet): ask it on a reader thread, and go on there —
  // also from an address over its failure budget, so that a valid key is never refused; a wrong
  // one answers 429 there (refuse_auth).
  struct Pending {
    Call call;
    Request request;
    Reply reply;
  };
  auto pending = std::make_shared<Pending>(Pending{std::move(call), std::move(request), std::move(reply)});
  const bool queued = readers_.try_post([this, route, route_index, context, pending]() mutable {
    auto principal = context.auth.authenticate(pending->request.authorization);
    if (!principal) {
      return stamped(std::move(pending->reply), route_index, "", "")(
          refuse_auth(principal.error(), pending->request.client_address));
    }
    authorized(*route, route_index, context, pending->call, pending->request, pending->reply, std::move(principal), true);
  });
  if (!queued) stamped(std::move(pending->reply), route_index, "", "")(overloaded_reads());
}

}  // namespace tollgate::http
