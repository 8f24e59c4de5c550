// tollgate webhooks: the signature of a delivery, per Standard Webhooks (api.md, Webhooks):
//   webhook-id:        evt_{event_id} (the same on every attempt: receivers deduplicate by it)
//   webhook-timestamp: the attempt's time, Unix seconds
//   webhook-signature: "v1," + base64(HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}")),
//                      key = the base64-decoded part of the secret after "whsec_"; during a
//                      rotation one such signature per secret, space-separated (webhook.h:
//                      signing_secrets).
// Pure functions (HMAC by OpenSSL; no clock, no randomness). Checked against the reference
// library's vectors in tests/webhooks/signature_test.cc.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace tollgate::webhooks {

// HMAC-SHA256 of `message` keyed by `key` (32 raw bytes), and a comparison whose time does not
// depend on where two strings differ (for signatures).
std::string hmac_sha256(std::string_view key, std::string_view message);
bool equal_in_constant_time(std::string_view a, std::string_view b);

// "evt_{event_id}": a delivery's webhook-id.
std::string webhook_id(std::int64_t event_id);

// The key a secret stands for: the base64-decoded part after "whsec_" (a secret without the prefix
// is decoded whole, as the reference library does); nullopt when that is not valid base64.
std::optional<std::string> secret_key(std::string_view secret);

// "v1,<base64 signature>" of one secret; nullopt when the secret does not decode.
std::optional<std::string> sign(std::string_view secret, std::string_view id, std::int64_t timestamp_s,
                                std::string_view body);
// The webhook-signature header: one "v1,…" per secret, space-separated, in the order given (every
// secret must decode: they are made by secret_from_random).
std::string signature_header(std::span<const std::string> secrets, std::string_view id, std::int64_t timestamp_s,
                             std::string_view body);

// Whether `header` carries a v1 signature of (id, timestamp, body) by `secret` (compared in constant
// time). No time-stamp tolerance here: a receiver's check, stated in the reference library.
bool verify(std::string_view header, std::string_view secret, std::string_view id, std::int64_t timestamp_s,
            std::string_view body);

}  // namespace tollgate::webhooks
