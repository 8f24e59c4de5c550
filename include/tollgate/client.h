// tollgate client: a thin, typed C++ wrapper around tollgate's HTTP API (docs/api.md; the retry
// policy, the same in every tollgate client, in docs/reference/retries.md).
//
// What it is. One `Client` talks to one tollgate server over plain HTTP/1.1 (`http://host:port`;
// there is no TLS — reach a remote server through a TLS-terminating proxy or tunnel on the local
// host). Each method is one call of the API: it sends the request, waits for the answer and hands
// back a `Response` that holds exactly one of
//   - the parsed JSON body (boost::json::value) and the HTTP status of a 2xx answer;
//   - a `Problem`: the server's RFC 9457 refusal or failure (status, code, detail, and
//     available/requested when the server sent them);
//   - a `TransportError`: no HTTP answer at all (invalid base URL, connect failure, time-out, lost
//     connection, an answer that is not HTTP or not JSON).
// Nothing throws for an expected failure; the JSON shapes are the server's, unchanged.
//
// Connection. One keep-alive connection, opened on first use and reused by every later call. A
// connection that fails is closed, and the next attempt opens a new one. A connection that the
// server had closed while it sat idle (its idle time-out, or its graceful shutdown) is noticed when
// a request on it fails before any byte of an answer arrived; the request is then sent once more at
// once on a new connection, without counting as an attempt (the server never reads a request from a
// connection it is closing while idle).
//
// Time-outs (per attempt). `connect_timeout` bounds opening a TCP connection; `request_timeout`
// bounds sending the request and reading the whole answer. Resolving a host name is not bounded
// by them (it is the system resolver's); an IP address is never resolved.
//
// Retry policy (docs/reference/retries.md) — what to do next depends on why a call failed:
//   - Failed connect (refused, unreachable, connect_timeout passed), time-out, lost connection, or
//     an answer 502, 503 or 504 (a balancer whose upstreams restart; a server that lost its
//     database: `unavailable`, `overloaded`, `storage_full`, `storage_failed`): the request is sent
//     again with exactly the same method, path and body — hence the same request_id, reference,
//     client_request_id or hold id, which the server deduplicates: safe by design ("retrying the
//     same request with the same id is always safe"). Before attempt n+1 the client waits a random
//     time between half and all of backoff_initial × 2^(n−1) (capped at backoff_max); a
//     Retry-After header (or a document's retry_after_ms) raises the wait to it. No wait is started
//     that would end more than `budget` after the call began, and at most `attempts_max` attempts
//     are made; then the last answer or failure is reported. An attempt under way is bounded by its
//     own time-outs: worst case for one call, budget + connect_timeout + request_timeout (defaults:
//     10 s + 12 s), unless Options::call_timeout bounds the whole call (the CLI's --timeout-ms).
//   - Calls without such an id (Resend::only_if_unsent: extend, create_key / create_admin_key, begin_idempotency,
//     check_ratelimit) are sent again only when they certainly never reached the server (connect
//     failed); a time-out, a lost connection or a 502/503/504 is reported at once (create_key: the
//     worst outcome of a lost answer is an unused key, which revoke removes; extend: the hold's
//     expiry moved once, or not — look with get_hold).
//   - 409 `insufficient_credits` on reserve: asked once more at once (same request_id), then
//     reported. No back-off: an empty balance does not refill by waiting; the caller decides.
//   - Every other 4xx (and 500): reported at once — the request must change, not be repeated.
//   - Coordination calls (locks, idempotency keys, rate limits) are resent like the hold calls
//     when sending them twice does what sending them once does: acquire_lock (the same owner again:
//     the same fence), renew_lock, release_lock, cancel_lock, finish_idempotency,
//     abandon_idempotency, reset_ratelimit and the reads. Two are not, and are sent again only when
//     they certainly never reached the server (as create_key): begin_idempotency (a second begin
//     of a claim the first one made answers in_progress — the caller's own claim, mistaken for
//     another's) and check_ratelimit (every check counts an attempt). A resend after a lost answer
//     may report the outcome of the first attempt in other words: release_lock answers lock_lost
//     (the first attempt released it), renew_lock of a cancelled lock answers lock_lost instead of
//     lock_cancelled (the first one freed it) — either way the caller no longer holds the lock.
//   - reserve without a request_id: the client makes one ONCE per logical call
//     (`<request_id_prefix><16 random hex digits>`), so all its attempts reuse it. A caller that
//     wants to repeat a failed reserve later (e.g. after exit) should pass its own request_id
//     (new_request_id() makes one).
//
// Thread safety: a Client is not thread-safe (it owns one connection and one I/O context); use one
// Client per thread, or guard it. Distinct Clients share nothing and may be used concurrently.
// Response, Problem and TransportError are plain values.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tollgate::client {

struct RetryPolicy {
  // No wait before another attempt is started that would end more than this after the call began.
  // 0: never repeat (but the stale-connection resend, which is no attempt).
  std::chrono::milliseconds budget{10000};
  // Attempts of one call in all, the first included, for failures that are safe to repeat
  // (time-out, connect failure, lost connection, 502/503/504). At least 1; 1 means "never repeat".
  int attempts_max = 20;
  // The wait before the second attempt (a random time between half and all of it); doubled before
  // each further one, never above backoff_max. A Retry-After may ask for a longer wait.
  std::chrono::milliseconds backoff_initial{100};
  std::chrono::milliseconds backoff_max{2000};
  // reserve answered 409 insufficient_credits: ask once more, at once, before reporting it.
  bool retry_insufficient_credits_once = true;
};

struct Options {
  // "http://host:port" or "https://host:port" (port defaults to 80 or 443; a trailing "/" is
  // allowed; no path, query or user info). https: TLS 1.2 or 1.3, the server's certificate checked
  // against tls_ca_file (or the system's CAs) and against the host — name or IP address — of the URL.
  std::string base_url = "http://127.0.0.1:8080";
  // https only: a PEM file of the CA certificate(s) to trust instead of the system's (a private CA,
  // or a self-signed server certificate). Empty: the system's CAs. Set for an http URL: refused.
  std::string tls_ca_file;
  // Sent as "Authorization: Bearer <key>"; empty sends no Authorization header (401 for every
  // call but healthz).
  std::string key;
  std::chrono::milliseconds connect_timeout{2000};
  std::chrono::milliseconds request_timeout{10000};
  // The whole call's time limit, every attempt, back-off wait and reconnect included; 0: none (the
  // per-attempt time-outs and the retry policy alone bound it). Each attempt's connect and request
  // time-outs are cut to what is left of it, no back-off wait runs past it, and once it has run
  // out the call ends with TransportFailure::timeout ("... time limit of N ms ..."), having made
  // the attempts that fitted. A long poll (get_job with wait_ms) is bounded by it too.
  std::chrono::milliseconds call_timeout{0};
  RetryPolicy retry;
  // Prefix of the request_ids the client makes for reserve (1–128 of [A-Za-z0-9._:@-] in all).
  std::string request_id_prefix = "client-";
};

// The server refused or failed a call: its problem document, decoded.
struct Problem {
  unsigned status = 0;
  std::string code;    // the stable, machine-readable part ("insufficient_credits"); "http_<status>"
                       // when the answer was not a problem document (e.g. from a proxy)
  std::string title;
  std::string detail;  // human-readable; for insufficient_credits, showable to a kiosk user as is
  std::optional<std::int64_t> available;       // insufficient_credits
  std::optional<std::int64_t> requested;       // insufficient_credits
  // rate_limited: the document's exact retry_after_ms (the attempt would be admitted after it);
  // otherwise the Retry-After header (whole seconds) when the server sent one (e.g. 503).
  std::optional<std::int64_t> retry_after_ms;
  std::optional<std::string> expires_at;       // lock_held, in_progress: when the other's lease or claim ends
  // forbidden because of the key's scopes: the scope the call needs (holds:write, jobs:write, read,
  // admin or admin:read); unset for any other refusal.
  std::optional<std::string> missing_scope;
  boost::json::value body;                     // the whole document as sent (null if not JSON)
};

enum class TransportFailure {
  invalid_url,      // Options::base_url is not http(s)://host:port, or tls_ca_file unreadable — nothing was sent
  resolve,          // the host name did not resolve
  connect,          // no TCP connection (refused, unreachable, or connect_timeout passed)
  tls,              // https: the certificate was refused or the handshake failed (never retried)
  timeout,          // connected, but no complete answer within request_timeout
  connection_lost,  // the connection broke while the request was sent or its answer read
  bad_response,     // the answer was not HTTP, too large, or a 2xx JSON answer that did not parse
};

struct TransportError {
  TransportFailure failure = TransportFailure::connect;
  std::string message;  // e.g. "connect to 127.0.0.1:8080: Connection refused"
};

std::string_view failure_name(TransportFailure failure);

// The outcome of one logical call (after its retries): exactly one of a 2xx answer, a problem or a
// transport error.
class Response {
 public:
  static Response success(unsigned status, boost::json::value body);
  static Response refused(Problem problem);
  static Response failed(TransportError error);

  bool ok() const noexcept { return std::holds_alternative<Success>(value_); }
  bool is_problem() const noexcept { return std::holds_alternative<Problem>(value_); }
  bool is_transport_error() const noexcept { return std::holds_alternative<TransportError>(value_); }

  // The HTTP status of the final answer; 0 for a transport error.
  unsigned status() const noexcept;
  // The parsed body of a 2xx answer (a JSON string holding the raw text when the answer was not
  // JSON, e.g. /metrics). Requires ok().
  const boost::json::value& json() const;
  // Requires is_problem().
  const Problem& problem() const;
  // Requires is_transport_error().
  const TransportError& transport_error() const;
  // The problem's code, or the transport failure's name; "" when ok().
  std::string code() const;
  // One line for a person: "code: detail (available A, requested R)" — or "(expires_at T)",
  // "(retry_after_ms N)" when the document has them — or the transport message; "" when ok().
  std::string describe() const;

  // How many attempts the call took (1 when it succeeded or failed at once).
  int attempts() const noexcept { return attempts_; }
  void set_attempts(int attempts) noexcept { attempts_ = attempts; }

 private:
  struct Success {
    unsigned status;
    boost::json::value body;
  };
  explicit Response(std::variant<Success, Problem, TransportError> value) : value_(std::move(value)) {}
  std::variant<Success, Problem, TransportError> value_;
  int attempts_ = 1;
};

struct CreateAccountRequest {
  std::string account_id;
  std::optional<std::int64_t> overdraft_limit;   // server default 0
  std::optional<std::int64_t> max_active_holds;  // server default: no limit
};

// PATCH /v1/accounts/{id}: only the settings that are set change.
struct UpdateAccountRequest {
  std::optional<std::int64_t> overdraft_limit;
  // Set to nullopt: remove the limit (sent as null); unset: unchanged.
  std::optional<std::optional<std::int64_t>> max_active_holds;
  std::optional<bool> frozen;  // a frozen account refuses new holds and debits (409 account_frozen)
  // Balance notices (balance_low, balance_depleted, balance_recovered events) when `available`
  // crosses it. Set to nullopt: no notices (sent as null); unset: unchanged.
  std::optional<std::optional<std::int64_t>> low_balance_threshold;
};

// POST /v1/accounts/{id}/credits: the credit and the lot it makes (api.md, Credit lots). Unset lot
// fields are not sent: the server's defaults (no expiry, priority 50, category paid).
struct CreditRequest {
  std::int64_t amount = 0;
  std::string reference;                  // the purchase's id: the same reference again adds nothing
  std::optional<std::string> expires_at;  // RFC 3339, in the future: the lot's unspent credits expire then
  std::optional<std::int64_t> priority;   // 0–100, lower is spent first
  std::optional<std::string> category;    // "paid" | "promotional"
};

// A webhook endpoint to register (api.md, Webhooks). Empty event_types, no account_id: every event.
// What a new key may do and for how long (api.md, Keys). Every field is optional: an account key
// created with none may do everything its account allows (holds:write, jobs:write, read) and never
// expires. An admin key (create_admin_key) needs its scopes: {"admin"} or {"admin:read"}.
struct CreateKeyRequest {
  // Account keys: any of holds:write, jobs:write, read (no duplicates); empty: not sent (all three).
  std::vector<std::string> scopes;
  std::optional<std::string> expires_at;  // RFC 3339, in the future; after it the key answers 401
  std::optional<std::string> name;        // 1–100 bytes, shown in key lists
};

struct CreateWebhookEndpointRequest {
  std::string url;  // http or https
  std::vector<std::string> event_types;
  std::optional<std::string> account_id;
  std::optional<std::string> description;
};

// What to change of a webhook endpoint; unset: unchanged.
struct UpdateWebhookEndpointRequest {
  std::optional<std::string> url;
  // Set to nullopt: every event type again (sent as null).
  std::optional<std::optional<std::vector<std::string>>> event_types;
  std::optional<std::string> description;
  std::optional<std::string> status;  // "enabled" | "disabled"
};

struct ReserveRequest {
  std::string account_id;
  std::int64_t amount = 0;  // by amount (feature unset)
  std::string request_id;               // empty: the client makes one (see the retry policy)
  std::optional<std::int64_t> ttl_ms;   // server default hold_ttl_ms
  std::optional<boost::json::object> metadata;
  // Or by feature (amount ignored): quantity (server default 1) × the feature's price, frozen on the
  // hold. Last, so that code initializing the fields above in order still compiles.
  std::optional<std::string> feature;
  std::optional<std::int64_t> quantity;
};

// A refund of a charge (admin; api.md "Refunds of a charge").
struct RefundRequest {
  std::optional<std::int64_t> amount;  // unset: everything charged and not refunded yet
  std::string reason;                  // required: why the credits are given back
  std::string request_id;              // empty: the client makes one (sent on every attempt)
};

// Paging of every list: at most `limit` items after the item `starting_after` (the id of the last
// item of the previous page); the answer's `has_more` says whether to ask again.
struct PageRequest {
  std::optional<std::int64_t> limit;         // server default 100, at most 1000
  std::optional<std::string> starting_after;
};

struct ListHoldsRequest {
  std::optional<std::string> account_id;
  std::optional<std::string> status;      // active | committed | released | expired
  std::optional<std::int64_t> limit;      // server default 100, at most 1000
  std::optional<std::string> request_id;  // the hold of that request (a lost answer: look, do not re-post)
  std::optional<std::string> starting_after;  // a hold_id: the last one of the previous page
};

// POST /v1/jobs: reserve `cost` on the account, then tollgate calls `provider` with `input`.
struct SubmitJobRequest {
  std::string client_request_id;  // empty: the client makes one (request_id_prefix + 16 hex digits)
  std::string account_id;
  std::int64_t cost = 0;
  std::string provider;          // a provider named in the server's configuration
  boost::json::value input = boost::json::object{};  // any JSON value: what the provider is sent
};

// GET /v1/webhook-endpoints/{id}/deliveries: one endpoint's deliveries, newest event first.
struct ListWebhookDeliveriesRequest {
  std::optional<std::string> status;  // pending | delivered | failed
  PageRequest page;                   // starting_after: a delivery's webhook_id (evt_…)
};

// POST /v1/holds/check: what a reservation of `amount`, or of `quantity` × `feature`, would meet now.
struct CheckHoldRequest {
  std::string account_id;
  std::optional<std::int64_t> amount;
  std::optional<std::string> feature;
  std::optional<std::int64_t> quantity;
};

// GET /v1/accounts/{id}/lots: the account's lots in spending order.
struct ListLotsRequest {
  std::optional<std::string> status;  // active | expired | spent; unset: all
  PageRequest page;                   // starting_after: a lot_id
};

struct ListJobsRequest {
  std::optional<std::string> account_id;
  std::optional<std::string> status;  // pending | running | completed | failed | cancelled
  PageRequest page;                   // starting_after: a client_request_id
};

// Who holds a lock: what to pass to renew_lock and release_lock. Take it from acquire_lock's answer
// (LockHolder::from), so that the fence goes with every later call: a holder whose lease ran out,
// and whose lock someone else then took — even under the same owner name, e.g. a restarted worker —
// gets 409 lock_lost instead of renewing or releasing its successor's lock.
struct LockHolder {
  std::string key;
  std::string owner;
  std::optional<std::int64_t> fence;  // unset: only the owner name is checked (not recommended)

  // The holder that a 2xx answer of acquire_lock or renew_lock names (key, owner, fence); nullopt
  // for any other answer (a refusal, a transport error, a lock that nobody holds).
  static std::optional<LockHolder> from(const Response& answer);
};

// Whether a call may be sent again after it may already have reached the server.
enum class Resend {
  safe,            // carries an id (or reads): repeat on time-out, lost connection, 502/503/504
  only_if_unsent,  // repeat only when it certainly never reached the server (connect failed)
};

class Client {
 public:
  explicit Client(Options options);
  ~Client();
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Why Options cannot work (e.g. "the scheme must be http or https"), or nullptr. Every call of a client
  // with a configuration error answers a TransportError (invalid_url) and sends nothing.
  const std::string* configuration_error() const noexcept;
  const Options& options() const noexcept;
  // The retry policy of the calls made from now on (one call: set it before, set it back after).
  // A policy with attempts_max < 1 or a negative budget is refused: false, nothing changed.
  bool set_retry(const RetryPolicy& retry);

  // --- accounts and credits (admin key, but get_account and events also with the account's key)
  Response create_account(const CreateAccountRequest& request);
  Response get_account(std::string_view account_id);
  Response credit(std::string_view account_id, std::int64_t amount, std::string_view reference);
  // The same with the lot's expires_at, priority and category (api.md, Credit lots): 201 {event,
  // account}, event.lot_id the new lot (none when the credit only paid the account's debt).
  Response credit(std::string_view account_id, const CreditRequest& request);
  Response debit(std::string_view account_id, std::int64_t amount, std::string_view reference,
                 std::string_view reason);
  // GET /v1/accounts/{id}/lots?status=&limit=&starting_after= — {lots, has_more}, in spending order
  // (lowest priority, soonest expiry, oldest); each {lot_id, reference, category, priority, amount,
  // available, reserved, used, expired, expires_at?, created_at, status}.
  Response list_lots(std::string_view account_id, const ListLotsRequest& request = {});
  // GET /v1/accounts?limit=&starting_after= — {accounts, has_more}, by account_id ascending.
  Response list_accounts(const PageRequest& page = {});
  // GET /v1/transfers/{reference} — the credit or debit recorded under it (a lost answer: look).
  Response get_transfer(std::string_view reference);
  // PATCH /v1/accounts/{id} (admin key) — 200 with the account; the same settings again change nothing.
  Response update_account(std::string_view account_id, const UpdateAccountRequest& request);
  // GET /v1/accounts/{id}/events?after=&limit= — oldest first; continue with `next_after`.
  Response events(std::string_view account_id, std::int64_t after = 0, std::optional<std::int64_t> limit = {});
  // GET /v1/events?after=&limit=&wait_ms= (admin key) — every account's events in commit order;
  // store `next_after` and pass it as `after` to miss nothing and see nothing twice. With wait_ms,
  // an empty answer waits until something new is durable (keep request_timeout above wait_ms).
  Response feed(std::int64_t after = 0, std::optional<std::int64_t> limit = {},
                std::optional<std::int64_t> wait_ms = {});
  // GET /v1/events?after=latest (admin key) — no events; its `next_after` is the feed's head, to
  // follow from there (what comes next, nothing already there).
  Response feed_head();

  // --- keys (admin key)
  // POST /v1/accounts/{id}/keys — 201 {key_id, account_id, secret, scopes, name, expires_at,
  // created_at}: the only answer with the secret. Scopes come back in the canonical order
  // (holds:write, jobs:write, read).
  Response create_key(std::string_view account_id, const CreateKeyRequest& request = {});
  // POST /v1/keys (admin scope) — 201 the same shape with account_id null; request.scopes must be
  // {"admin"} or {"admin:read"} (admin:read: every read, no change at all).
  Response create_admin_key(const CreateKeyRequest& request);
  // GET /v1/key (any valid key) — the calling key: {key_id, account_id, scopes, name, expires_at,
  // created_at}; the configured admin key answers key_id "admin", scopes ["admin"].
  Response get_key();
  Response revoke_key(std::string_view key_id);
  // GET /v1/keys?account_id=&limit=&starting_after= — {keys, has_more}, newest first, never secrets.
  Response list_keys(std::optional<std::string> account_id = {}, const PageRequest& page = {});

  // --- webhook endpoints (api.md, Webhooks; admin key). The secret (whsec_…) is in the answers of
  // create and rotate only; no read shows it.
  // POST /v1/webhook-endpoints — 201 the endpoint and its secret. Not resent once it may have
  // reached the server (a second one would be a second endpoint): list, and delete the extra one.
  Response create_webhook_endpoint(const CreateWebhookEndpointRequest& request);
  // GET /v1/webhook-endpoints?limit=&starting_after= — {endpoints, has_more}, in creation order.
  Response list_webhook_endpoints(const PageRequest& page = {});
  Response get_webhook_endpoint(std::string_view endpoint_id);
  // PATCH /v1/webhook-endpoints/{id} — 200 the endpoint (absolute values: safe to resend).
  Response update_webhook_endpoint(std::string_view endpoint_id, const UpdateWebhookEndpointRequest& request);
  // DELETE /v1/webhook-endpoints/{id} — 200 {endpoint_id, deleted: true} (a resend after a lost
  // answer is 404: it was deleted).
  Response delete_webhook_endpoint(std::string_view endpoint_id);
  // POST /v1/webhook-endpoints/{id}/rotate-secret — 200 the endpoint and its new secret; the old
  // one signs beside it for 24 h. Not resent once it may have reached the server.
  Response rotate_webhook_secret(std::string_view endpoint_id);
  // GET /v1/webhook-endpoints/{id}/deliveries?status=&limit=&starting_after= — {deliveries,
  // has_more}, newest event first; each {webhook_id, event_id, status, attempts, last_status_code,
  // last_error, next_attempt_at, …}.
  Response list_webhook_deliveries(std::string_view endpoint_id, const ListWebhookDeliveriesRequest& request = {});
  // POST /v1/webhook-endpoints/{id}/replay {after} — 202 the endpoint: every event after the feed
  // cursor `after` (0: the whole feed) that it wants is sent again, with its webhook-id unchanged.
  // Resent on a lost answer: a second replay to the same cursor sends the same events again, which
  // the receiver deduplicates by webhook-id.
  Response replay_webhook_endpoint(std::string_view endpoint_id, std::int64_t after);

  // --- holds
  Response reserve(const ReserveRequest& request);
  Response commit(std::string_view hold_id, std::optional<std::int64_t> amount = {});
  // POST /v1/holds/{id}/commit {quantity} — a hold reserved by feature: quantity × its frozen unit price.
  Response commit_quantity(std::string_view hold_id, std::int64_t quantity);
  // POST /v1/holds/check — 200 {allowed, available, requested, reason?, detail?, …}; writes nothing.
  Response check_hold(const CheckHoldRequest& request);

  // --- prices (admin)
  // PUT /v1/prices/{feature} {credits_per_unit} — 201 a new version, 200 the same price again
  // (absolute: safe to resend).
  Response set_price(std::string_view feature, std::int64_t credits_per_unit);
  Response get_price(std::string_view feature);
  // GET /v1/prices?limit=&starting_after= — {prices, has_more}, by feature.
  Response list_prices(const PageRequest& page = {});
  // GET /v1/prices/{feature}/versions — {versions, has_more}, newest first (starting_after: a version).
  Response list_price_versions(std::string_view feature, const PageRequest& page = {});
  Response release(std::string_view hold_id, std::optional<std::string> reason = {});
  Response extend(std::string_view hold_id, std::int64_t ttl_ms);
  Response get_hold(std::string_view hold_id);
  Response list_holds(const ListHoldsRequest& request = {});
  // POST /v1/holds/{hold_id}/refund (admin) — 200 the hold with its refunded_amount: credits it
  // charged, given back (used → available). One request_id per call, sent on every attempt: a resent
  // refund moves nothing more. 409 refund_exceeds_charge, 409 conflict (nothing charged, or a job's
  // hold: refund_job).
  Response refund_hold(std::string_view hold_id, const RefundRequest& request);
  // POST /v1/jobs/{client_request_id}/refund (admin) — the same for a completed job: 200 the job with
  // refunded_amount.
  Response refund_job(std::string_view client_request_id, const RefundRequest& request);

  // --- jobs (api.md, Jobs). Every job call is idempotent by its client_request_id, so each is
  // resent on time-out, lost connection or 503 like the hold calls.
  // POST /v1/jobs — 202 the new job (pending); 200 the job as it is now when the same
  // client_request_id was already submitted. Without a client_request_id the client makes one
  // ONCE per call (all attempts reuse it); a caller that may retry later should pass its own.
  Response submit_job(const SubmitJobRequest& request);
  // GET /v1/jobs/{id}?wait_ms= — with wait_ms (0–60000), the server answers as soon as the job
  // ends or the wait is over. The request time-out of this call is raised to wait_ms + the
  // configured request_timeout, so a long poll is not cut short.
  Response get_job(std::string_view client_request_id, std::optional<std::int64_t> wait_ms = {});
  // POST /v1/jobs/{id}/cancel — 200 the job: cancelled, or its end state if it had already ended.
  Response cancel_job(std::string_view client_request_id);
  // GET /v1/jobs?account_id=&status=&limit=&starting_after= — {jobs, has_more}, newest first.
  Response list_jobs(const ListJobsRequest& request = {});
  // GET /v1/jobs/{id}/history — {entries: [{at, kind, attempt?, detail}]}, oldest first.
  Response job_history(std::string_view client_request_id);

  // --- locks (api.md, Locks; admin key). Every answer of a lock call that succeeds is the lock as
  // it is now: {key, owner, fence, expires_at, held, cancelled}. `fence` strictly increases each
  // time the key changes hands; pass it to a downstream that refuses the fences below the highest
  // it saw.
  // POST /v1/locks/{key}/acquire — 200 held by `owner` until now + ttl_ms (1 ms to 1 day). Held by
  // another owner: 409 lock_held (Problem::expires_at: when that lease ends). The same owner again:
  // 200, the same fence, the lease renewed — unless the lock was cancelled: 409 lock_cancelled,
  // and the lock is freed.
  Response acquire_lock(std::string_view key, std::string_view owner, std::int64_t ttl_ms);
  // POST /v1/locks/{key}/renew — 200 the lease runs until now + ttl_ms. Not the holder any more
  // (another owner or fence, a lease that ran out, a free lock): 409 lock_lost. Cancelled: 409
  // lock_cancelled — stop the work; the lock is freed. A key never used: 404.
  Response renew_lock(const LockHolder& holder, std::int64_t ttl_ms);
  // POST /v1/locks/{key}/release — 200 the lock is free (its fence is kept: the next holder gets a
  // higher one). Not the holder: 409 lock_lost. A lease that ran out may still be released as long
  // as nobody took the lock over.
  Response release_lock(const LockHolder& holder);
  // POST /v1/locks/{key}/cancel — 200: the holder is asked to stop (its next renew answers
  // lock_cancelled, which frees the lock); a lock that is not held is answered as it is
  // (cancelled: false). A key never used: 404.
  Response cancel_lock(std::string_view key);
  // GET /v1/locks/{key} — 200 the lock (held: whether a lease is live now); 404 never used.
  Response get_lock(std::string_view key);

  // --- idempotency keys for the caller's own side effects (api.md; admin key). `fingerprint`
  // (1–256 bytes) names the request: the same key with another fingerprint is 422
  // idempotency_mismatch, for every call.
  // POST /v1/idempotency/{key}/begin — 201 {key, state: "started", attempt, resumed, expires_at}: go
  // ahead (resumed: this claim took over one that ran out unfinished — ask downstream first), then
  // finish (or abandon) before ttl_ms (1 ms to 1 day) runs out — after that another begin takes
  // the claim over. 200 {state: "finished", response, finished_at}: done before — use `response`,
  // do not do it again. Claimed and not expired: 409 in_progress (Problem::expires_at). Not resent
  // once it may have reached the server (see the retry policy).
  Response begin_idempotency(std::string_view key, std::string_view fingerprint, std::int64_t ttl_ms);
  // POST /v1/idempotency/{key}/finish — 200 {state: "finished", response}: `response` (any JSON
  // value but null, at most 32 KiB serialized) is stored and replayed to every later begin. A key
  // already finished keeps its first response. Never begun: 404; abandoned: 409 conflict. With
  // `attempt` (the begin's), only that claim is finished: a claim taken over since is 409 conflict.
  Response finish_idempotency(std::string_view key, std::string_view fingerprint, const boost::json::value& response,
                              std::optional<std::int64_t> attempt = std::nullopt);
  // POST /v1/idempotency/{key}/abandon — 200 {key, state: "abandoned"}: the claim is given back
  // (after a failure that did nothing), so a later begin starts afresh; a key not claimed is
  // answered the same. Finished: 409 conflict (its response is replayed and stays). With `attempt`,
  // only that claim is given back (409 conflict if another attempt holds the key now).
  Response abandon_idempotency(std::string_view key, std::string_view fingerprint,
                               std::optional<std::int64_t> attempt = std::nullopt);

  // --- rate limits (api.md; admin key). `policy` is named in the server's configuration
  // ([ratelimits.NAME]; another name: 404); `key` is what is limited (a user, an address…).
  // POST /v1/ratelimits/{policy}/check — 200 {allowed: true, remaining, reset_after_ms, limit,
  // period_ms}; refused: 429 rate_limited with Problem::retry_after_ms (exact, from the document).
  // `cost` (server default 1) is 1 to the policy's limit. Not resent once it may have reached the
  // server (every check counts).
  Response check_ratelimit(std::string_view policy, std::string_view key, std::optional<std::int64_t> cost = {});
  // POST /v1/ratelimits/{policy}/reset — 200 {policy, key, reset: true}: the key has its full
  // budget again (e.g. after a good login).
  Response reset_ratelimit(std::string_view policy, std::string_view key);

  // --- operations
  Response audit(std::optional<std::string> account_id = {});  // admin key
  Response healthz();

  // Any other call of the API, with the same connection, time-outs and retry policy. `target` is
  // the path and query, already encoded; `body` (may be null) is sent as application/json.
  Response call(std::string_view method, std::string_view target, const boost::json::value* body,
                Resend resend = Resend::safe);
  // The same with a body sent byte for byte as given (as application/json; empty: an empty body)
  // and further header fields — e.g. a payment provider's event, whose signature covers the body's
  // exact bytes (POST /v1/payments/stripe with Stripe-Signature). A field named in `headers`
  // replaces the client's own (Authorization, Content-Type, …); Content-Length is the body's. An
  // empty name, a name with ':', CR or LF, or a value with CR or LF answers a TransportError
  // (invalid_url) and sends nothing.
  using Header = std::pair<std::string, std::string>;
  Response call_raw(std::string_view method, std::string_view target, std::string body,
                    const std::vector<Header>& headers = {}, Resend resend = Resend::safe);

  // A fresh random id: `prefix` followed by 16 hex digits (64 bits from the OS's random source).
  static std::string new_request_id(std::string_view prefix);
  // Percent-encodes one path segment or query value (unreserved characters, ':' and '@' stay).
  static std::string encode_component(std::string_view text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::client
