// tollgate webhooks: a webhook endpoint — where tollgate will tell a system what happened (api.md,
// Webhooks) — and the pure checks of what a caller may register: the URL, the event types, the
// description. Delivery is not built yet: an endpoint is registered, read, changed, disabled,
// deleted and its secret rotated; signature.h signs a delivery's body with its secrets.
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
  std::int64_t updated_at_ms = 0;

  bool operator==(const Endpoint&) const = default;
};

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
