// tollgate webhooks: a webhook endpoint — where tollgate will tell a system what happened (api.md,
// Webhooks) — and the pure checks of what a caller may register: the URL, the event types, the
// description; and the delivery of events to it: each endpoint's progress through the change feed
// (its cursor), each event's delivery (attempts, outcome, the next attempt) and the retry schedule —
// the rows that webhook_batch.h writes and delivery_worker.h drives. signature.h signs a delivery's
// body with the endpoint's secrets.
//
// The secret is stored as it was shown (`whsec_` + base64 of 32 random bytes), not hashed: signing
// needs it. It is protected at rest as the ledger is (the SQLite file's mode, the PostgreSQL role's
// grants), never logged, and shown only by the create and the rotation that made it.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace tollgate::webhooks {

enum class EndpointStatus : std::uint8_t { enabled, disabled };

std::string_view endpoint_status_name(EndpointStatus status);
std::optional<EndpointStatus> parse_endpoint_status(std::string_view name);

struct Endpoint {
  std::string endpoint_id;               // "we_" + 16 hex characters
  std::string url;                       // http or https (check_url)
  std::vector<std::string> event_types;  // the filter, in the order given; empty: every type
  std::optional<std::string> account_id;  // the filter: only this account's events; unset: every account
  std::string description;
  EndpointStatus status = EndpointStatus::enabled;
  std::string secret;                          // "whsec_…": signs every delivery
  std::optional<std::string> previous_secret;  // the one before the last rotation, signing beside it
  std::optional<std::int64_t> previous_secret_until_ms;  // … until then (set together with it)
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;  // changed by the callers' commands, not by delivery's progress
  // Delivery's progress. Every matching event with event_id <= delivery_cursor has a delivery (a
  // row, attempted at least once); those after it are still to be sent. A new endpoint starts at
  // the feed's head when it was made: it receives the events that follow its registration.
  std::int64_t delivery_cursor = 0;
  // The largest delivery-lock fence that recorded progress here: a deliverer holding an older fence
  // (it lost the lock) is refused, so two instances never both move the cursor.
  std::int64_t delivery_fence = 0;
  // The first failed attempt since the last delivered one; unset when the last attempt delivered
  // (or none failed). Failing for limits::kWebhookDisableAfterFailingMs disables the endpoint.
  std::optional<std::int64_t> failing_since_ms;

  bool operator==(const Endpoint&) const = default;
};

// --- delivery -------------------------------------------------------------------------------------

enum class DeliveryStatus : std::uint8_t {
  pending,    // the last attempt failed; another is scheduled (next_attempt_at_ms)
  delivered,  // an attempt was answered 2xx within the time-out
  failed,     // every attempt of the schedule failed: no more are made (a replay sends it again)
};
std::string_view delivery_status_name(DeliveryStatus status);
std::optional<DeliveryStatus> parse_delivery_status(std::string_view name);

// One event's delivery to one endpoint (api.md: GET /v1/webhook-endpoints/{id}/deliveries). The
// webhook-id the receiver sees is webhook_id(event_id) (signature.h): the same on every attempt.
struct Delivery {
  std::string endpoint_id;
  std::int64_t event_id = 0;
  std::string event_type;
  std::string account_id;
  std::int64_t event_at_ms = 0;
  DeliveryStatus status = DeliveryStatus::pending;
  std::int64_t attempts = 0;                        // made so far (>= 1 once the row exists)
  std::int64_t last_attempt_at_ms = 0;
  std::optional<std::int64_t> last_status_code;    // the last answer's HTTP status; unset: no answer
  std::string last_error;                           // why the last attempt failed ("" when delivered)
  std::optional<std::int64_t> next_attempt_at_ms;  // set iff pending
  std::int64_t created_at_ms = 0;                   // the first attempt

  bool operator==(const Delivery&) const = default;
};

// What one attempt to deliver an event saw (recorded by RecordDeliveriesCommand).
struct DeliveryAttempt {
  std::int64_t event_id = 0;
  std::string event_type;
  std::string account_id;
  std::int64_t event_at_ms = 0;
  std::int64_t at_ms = 0;                    // when the attempt began
  bool delivered = false;                    // answered 2xx within the time-out
  std::optional<std::int64_t> status_code;  // the answer's status; unset: no answer
  std::string error;                         // why it failed ("" when delivered)
  // The retry's jitter, in thousandths of its delay: -100..100 (±10%); drawn by the deliverer.
  std::int64_t jitter_permille = 0;
  // A retry of a pending delivery: its attempts when the retry began. Unset: a fresh send (the cursor
  // passed the event: its first send, or a replay's), which starts a new run of the schedule.
  std::optional<std::int64_t> retry_of_attempts;

  bool operator==(const DeliveryAttempt&) const = default;
};

// The delays after the 1st, 2nd, … failed attempt (api.md: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h):
// an event is tried at most kDeliveryRetryDelaysMs.size() + 1 times.
inline constexpr std::int64_t kDeliveryRetryDelaysMs[] = {5'000,      300'000,     1'800'000,  7'200'000,
                                                          18'000'000, 36'000'000, 36'000'000};
inline constexpr std::int64_t kDeliveryJitterPermilleMax = 100;

// When the attempt after `attempts` failed ones is due, from a failed attempt at `at_ms`: the
// schedule's delay scaled by (1000 + jitter_permille) / 1000; nullopt when the schedule is used up
// (the delivery has failed). attempts >= 1; |jitter_permille| <= kDeliveryJitterPermilleMax.
std::optional<std::int64_t> next_attempt_at_ms(std::int64_t attempts, std::int64_t at_ms, std::int64_t jitter_permille);

// Whether the endpoint wants `event`'s delivery: its type passes the type filter and its account
// the account filter.
bool wants_event(const Endpoint& endpoint, std::string_view event_type, std::string_view account_id);

// "we_" + the 16 hex characters of 8 random bytes.
std::string endpoint_id_from_random(std::string_view random_bytes);
// "whsec_" + base64 (standard, padded) of the random bytes: the Standard Webhooks form.
std::string secret_from_random(std::string_view random_bytes);

// The secrets that sign a delivery made at now_ms: the current one, and the previous one while its
// window lasts (previous_secret_until_ms > now_ms). The current one first.
std::vector<std::string> signing_secrets(const Endpoint& endpoint, std::int64_t now_ms);

// The endpoint as a reader sees it at now_ms: a previous secret whose window has ended is gone (as
// it no longer signs), so reads never show an expiry in the past.
Endpoint endpoint_view(Endpoint endpoint, std::int64_t now_ms);

// Whether `event_type` passes the endpoint's filter (an empty filter passes every type).
bool wants_event_type(const Endpoint& endpoint, std::string_view event_type);

// The event type names a filter may name (core/model.h's, in their order).
const std::vector<std::string>& event_type_names();

// invalid_request naming `field` unless `url` is an absolute http or https URL of at most
// limits::kWebhookUrlBytesMax bytes: a host (a name, an IPv4 address or a bracketed IPv6 one), an
// optional port 1–65535, no user name or password, no space or control character, no fragment.
Status check_url(std::string_view url, std::string_view field);
// invalid_request naming `field` unless `types` names at least one type, each a known event type
// (the nearest suggested), none twice.
Status check_event_types(const std::vector<std::string>& types, std::string_view field);
// Event types as stored: joined by ',' ("" for every type), and back.
std::string join_event_types(const std::vector<std::string>& types);
std::vector<std::string> split_event_types(std::string_view stored);

}  // namespace tollgate::webhooks
