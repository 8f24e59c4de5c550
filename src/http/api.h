// tollgate http: the v1 API — routes, authorization, the mapping of results to HTTP.
//
// The edge stays thin: it matches a request against the one route table (routes.h: method,
// pattern, access, handler), authenticates it and enforces the route's access, and hands it to the
// route's handler, which parses it (strictly), turns it into a ledger Command or read, and maps the
// Result to a JSON answer or an RFC 9457 problem document. It knows nothing about sockets
// (server.h) and nothing about SQL (the ledger and the store).
//
// handle() never waits on the database: a route that reads the store (routes.h, Runs::reader) and
// the look-up of a key that is not cached run on the reader executor (read_executor.h); writes are
// handed to the ledger and answered from its completion.
//
// Thread safety: handle() may be called from any thread; `reply` is called exactly once, from any
// thread (the server's Reply hands it to the connection's strand).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "config/proxies.h"
#include "coord/coord.h"
#include "coord/local_limiter.h"
#include "coord/rate_limits.h"
#include "config/config.h"
#include "core/clock.h"
#include "core/limits.h"
#include "http/auth.h"
#include "http/metrics.h"
#include "http/read_executor.h"
#include "jobs/job_service.h"
#include "ledger/ledger.h"

namespace tollgate::http {

struct Request {
  std::string method;  // "GET", "POST", "DELETE", …
  std::string target;  // path and query
  std::string authorization;
  std::string content_type;
  std::optional<std::string> idempotency_key;  // the Idempotency-Key header, when sent
  std::string if_none_match;                   // the If-None-Match header (the console's assets)
  std::string body;
  // The peer's IP address ("" when unknown); the API replaces it by the client's when the peer is
  // a trusted proxy (ApiOptions::trusted_proxies). Failed authentications are counted by it.
  std::string client_address;
  std::string x_forwarded_for;  // every X-Forwarded-For line, joined with ","
  std::string forwarded;        // every Forwarded line, joined with ","
  // A payment provider's signature headers (read only for /v1/payments/…; "" when absent).
  struct ProviderSignature {
    std::string stripe;             // Stripe-Signature
    std::string webhook_id;         // Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature
    std::string webhook_timestamp;
    std::string webhook_signature;
  } provider_signature;
};

struct Response {
  unsigned status = 200;
  std::string_view content_type = "application/json";  // a string with static storage
  std::string body;
  std::optional<int> retry_after_s;  // sets Retry-After
  std::string allow;                 // sets Allow (405)
  std::string_view headers;          // more header lines, each "\r\nName: value" (static storage)
  std::string etag;                  // sets ETag
  // The route, for metrics and logs: 0 unmatched, else 1 + its index in route_templates() (the
  // numbering http::Metrics is built with).
  std::size_t route = 0;
  std::string code;                  // the problem code, for logs ("" when successful)
  // For the log only: what a 5xx answer does not tell the caller (the database's address, SQL,
  // the driver's words). The server writes it into the request's log line, under its request id.
  std::string log_detail;
  // For the request log: the key that acted and the account the request concerns (the route's
  // {account_id}, or an account key's own account); "" when none.
  std::string key_id;
  std::string account_id;
};

using Reply = std::function<void(Response)>;
// Runs `work` on the thread that owns the request's connection.
using Dispatch = std::function<void(std::function<void()>)>;

// RFC 9457 problem document for an error. A 5xx answer says what the caller can do (retry, wait),
// never the internals: its detail goes to Response::log_detail, and the server adds the request's
// id to the document ("request_id", also sent as X-Request-Id) so that the log line can be found.
Response problem(const Error& error);
Response problem(unsigned status, std::string_view code, std::string detail);
unsigned http_status(Code code);

// Decisions of the lock and idempotency-key routes answered by this instance, by outcome: each
// coord::LockDecision and coord::IdemDecision (counted by its value; the names are its labels, in
// the enum's order), then the refusals. Relaxed: figures.
struct CoordCounters {
  // Refusals of a lock call, after the decisions.
  enum class LockRefusal : std::uint8_t { held, lost, not_found };
  enum class IdemRefusal : std::uint8_t { in_progress, mismatch };
  static constexpr std::size_t kLockDecisions = 8;  // coord::LockDecision's values
  static constexpr std::size_t kIdemDecisions = 4;  // coord::IdemDecision's values
  static constexpr std::array<std::string_view, kLockDecisions + 3> kLockOutcomes{
      "acquired", "taken_over", "reacquired", "renewed", "released", "cancelled", "nothing_to_cancel",
      "stopped", "held", "lost", "not_found"};
  static constexpr std::array<std::string_view, kIdemDecisions + 2> kIdemOutcomes{"started", "replayed", "finished",
                                                                                  "abandoned", "in_progress", "mismatch"};
  static_assert(static_cast<std::size_t>(coord::LockDecision::stopped) + 1 == kLockDecisions);
  static_assert(static_cast<std::size_t>(coord::IdemDecision::abandoned) + 1 == kIdemDecisions);
  std::array<std::atomic<std::uint64_t>, kLockOutcomes.size()> lock{};
  std::array<std::atomic<std::uint64_t>, kIdemOutcomes.size()> idempotency{};

  void count(coord::LockDecision d) { add(lock, static_cast<std::size_t>(d)); }
  void count(LockRefusal r) { add(lock, kLockDecisions + static_cast<std::size_t>(r)); }
  void count(coord::IdemDecision d) { add(idempotency, static_cast<std::size_t>(d)); }
  void count(IdemRefusal r) { add(idempotency, kIdemDecisions + static_cast<std::size_t>(r)); }

 private:
  template <typename Counts>
  static void add(Counts& counts, std::size_t index) {
    TG_ASSERT(index < counts.size());
    counts[index].fetch_add(1, std::memory_order_relaxed);
  }
};

struct ApiOptions {
  std::string openapi_json;                  // served at /openapi.json
  std::function<std::string()> render_metrics;  // the body of GET /metrics
  // Set: GET /metrics answers only `Authorization: Bearer <metrics_key>` or an admin key (401 else).
  std::optional<std::string> metrics_key;
  // The use cases of jobs (jobs/job_service.h), with this instance's workers; null: a service with
  // no workers (every provider is unknown: POST /v1/jobs answers invalid_request; reads, cancels and
  // waits still work).
  jobs::JobService* jobs = nullptr;
  // The rate limits this instance serves (coord/rate_limits.h); null: none (every policy is
  // unknown, 404).
  coord::RateLimits* ratelimits = nullptr;
  // Where the coordination routes count their decisions (for /metrics); null: not counted.
  CoordCounters* coord_counters = nullptr;
  // Peers whose forwarding headers name the client (config/proxies.h): the client's address is
  // the rightmost untrusted hop. Empty: the peer is the client.
  TrustedProxies trusted_proxies;
  // Failed authentications (missing, malformed, unknown or revoked keys) per client address: after
  // `auth_failures_limit` within `auth_failures_period_ms` (a GCRA budget that refills steadily), a
  // request from that address whose key is wrong answers 429 too_many_failed_auth with Retry-After
  // instead of 401. A valid key is never refused: it is checked (in the database if it must be) and
  // answered as from any address. Another address is never affected. An open route that checks a
  // key itself (GET /metrics with a metrics_key) counts too: its 401s are failures.
  // limit 0: no throttling. At most `auth_failures_addresses_max` addresses are remembered.
  std::int64_t auth_failures_limit = limits::kAuthFailuresLimitDefault;
  std::int64_t auth_failures_period_ms = limits::kAuthFailuresPeriodMsDefault;
  std::size_t auth_failures_addresses_max = limits::kAuthFailuresAddressesMax;
  // POST /v1/payments/stripe and /v1/payments/webhook (routes_payments.cc): their secrets, packs
  // and shortfall policy. Without secrets those routes refuse every event (invalid_signature).
  PaymentsConfig payments;
};

class Api {
 public:
  // Everything passed in must outlive the Api.
  // Reads run on `readers` (read_executor.h), never on the calling (I/O) thread.
  Api(Ledger& ledger, ReadExecutor& readers, Authenticator& auth, Metrics& metrics, const Clock& clock,
      ApiOptions options);

  // Never throws: an exception that escapes a handler (a bug) is noted (core/last_resort.h) and the
  // request answered 500 `internal`, as is a request whose work threw later, on a reader thread or
  // in a completion (its reply is guarded: dropped unanswered, it answers 500).
  void handle(Request request, Reply reply, Dispatch dispatch);
  // The failed-authentication table (null when throttling is off), for tests and metrics.
  const coord::LocalLimiter* auth_failures() const { return auth_failures_.get(); }
  // The server stops: reads that wait (the change feed's wait_ms) answer now with what there is.
  void begin_shutdown();

  // The route templates this API serves ("GET /v1/holds/{hold_id}"), for the OpenAPI check and the
  // metrics' labels.
  static const std::vector<std::string>& route_templates();

 private:
  Ledger& ledger_;
  ReadExecutor& readers_;
  Authenticator& auth_;
  Metrics& metrics_;
  const Clock& clock_;
  const ApiOptions options_;
  // The services the routes call: options_'s, or one of none (options_ left them null).
  std::unique_ptr<jobs::JobService> own_jobs_;
  std::unique_ptr<coord::RateLimits> own_ratelimits_;
  jobs::JobService& jobs_;
  coord::RateLimits& ratelimits_;
  std::unique_ptr<coord::LocalLimiter> auth_failures_;  // null: no throttling

  // handle() without its last-resort catch.
  void handle_unguarded(Request request, Reply reply, Dispatch dispatch);
  // A failed authentication from `address`: counted; 401 as before, or 429 once over the budget.
  Response refuse_auth(const Error& error, const std::string& address);
  // The same for a 401 `refused` that an open route answered itself (GET /metrics and its key).
  Response count_failed_auth(Response refused, const std::string& address);
};

}  // namespace tollgate::http
