// tollgate payments: the signatures a payment provider's event must carry (api.md "Payments"),
// checked before anything in the body is read.
//
//   Stripe (POST /v1/payments/stripe): Stripe-Signature: "t=<unix seconds>,v1=<hex>[,v1=<hex>…]"
//     where v1 = hex(HMAC-SHA256(signing secret, "{t}.{raw body}")) — the secret's bytes as they are
//     written ("whsec_…"), as Stripe's own libraries use it. Any v1 by any configured secret passes
//     (several during a rotation); other schemes (v0) are ignored.
//   Standard Webhooks (POST /v1/payments/webhook): webhook-id, webhook-timestamp, webhook-signature
//     "v1,<base64>" (webhooks/signature.h's scheme, the secret "whsec_<base64>").
// Either is refused when its time stamp is further than `tolerance_ms` from now, in either
// direction (a replayed old event, or a clock far off).
//
// Every refusal is invalid_signature naming what was wrong (missing header, malformed, stale, no
// match) and never a secret. Checked against code nobody here wrote: the official `stripe` npm
// package and the Standard Webhooks reference library (tests/payments/payment_signature_test.cc).
//
// Thread safety: pure functions (no clock: `now_ms` is the caller's).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/result.h"

namespace tollgate::payments {

Status verify_stripe(std::string_view header, std::span<const std::string> secrets, std::string_view body,
                     std::int64_t now_ms, std::int64_t tolerance_ms);

// The three Standard Webhooks headers as received ("" when absent).
struct StandardHeaders {
  std::string_view id;
  std::string_view timestamp;
  std::string_view signature;
};
Status verify_standard(const StandardHeaders& headers, std::string_view secret, std::string_view body,
                       std::int64_t now_ms, std::int64_t tolerance_ms);

// Stripe's v1 for one secret (hex), for tests and the demo's signed checkout.
std::string stripe_signature(std::string_view secret, std::int64_t timestamp_s, std::string_view body);

}  // namespace tollgate::payments
