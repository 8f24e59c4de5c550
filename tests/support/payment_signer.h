// Test support: payment notifications signed by code nobody here wrote — the official libraries in
// a real Node process (tests/webhooks/receiver/sign.mjs, whose header says what it does):
//   SignScheme::stripe    Stripe-Signature "t=…,v1=<hex>", by the `stripe` package's
//                         stripe.webhooks.generateTestHeaderString({payload, secret, timestamp})
//   SignScheme::standard  webhook-id, webhook-timestamp, webhook-signature "v1,<base64>", by the
//                         `standardwebhooks` package's new Webhook(secret).sign(id, date, payload)
// (versions pinned in tests/webhooks/receiver/package-lock.json).
//
// sign_payloads() runs `node sign.mjs` once for all its requests (a JSON array on stdin, one on
// stdout): sign many payloads in one call, as a process start costs about a third of a second.
//
// Where the signer is: TOLLGATE_PAYMENT_SIGNER, the absolute path of sign.mjs in a folder where
// tests/webhooks/receiver/install (or `npm ci`) has installed the pinned libraries (scripts/test
// does both). Without it a test skips —
// and fails under TOLLGATE_REQUIRE_PAYMENT_SIGNER=1 (CI): REQUIRE_PAYMENT_SIGNER below.
//
// Thread safety: the functions may be called from any thread (each call runs its own process).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tollgate::testing {

enum class SignScheme { stripe, standard };

struct SignRequest {
  SignScheme scheme = SignScheme::stripe;
  std::string secret;         // stripe: the endpoint's signing secret, keyed as its bytes;
                              // standard: "whsec_<base64 key>" (or the base64 key alone)
  std::string payload;        // the raw body, signed as sent; must be valid UTF-8
  std::int64_t timestamp_s = 0;  // Unix seconds, > 0 (stripe's library takes 0 to mean "now")
  std::string id;             // standard only: the webhook-id (must be non-empty there, empty for stripe)
};

// The headers to send with the payload, names as the providers spell them ("Stripe-Signature";
// "webhook-id", "webhook-timestamp", "webhook-signature"): what HttpClient's `headers` takes.
using Headers = std::map<std::string, std::string>;

// The signer script (TOLLGATE_PAYMENT_SIGNER) when it is set and the file exists; else nullopt.
std::optional<std::string> payment_signer_script();
// Whether it is there (payment_signer_script() has a value).
bool payment_signer_available();
// Whether this run must have it (TOLLGATE_REQUIRE_PAYMENT_SIGNER=1: CI).
bool payment_signer_required();

// One Headers per request, in order. Throws std::runtime_error (with the signer's stderr) if the
// signer is not configured, refuses a request (exit 2: e.g. a secret the library does not take),
// or answers anything but one object of string values per request. No requests: no process.
std::vector<Headers> sign_payloads(const std::vector<SignRequest>& requests);
// sign_payloads for one request.
Headers sign_payload(const SignRequest& request);

}  // namespace tollgate::testing

// In a test body: skips the test when TOLLGATE_PAYMENT_SIGNER names no signer — and fails it
// instead when the run must have one (TOLLGATE_REQUIRE_PAYMENT_SIGNER=1).
#define REQUIRE_PAYMENT_SIGNER()                                                                      \
  if (!::tollgate::testing::payment_signer_available()) {                                            \
    if (::tollgate::testing::payment_signer_required())                                              \
      FAIL() << "TOLLGATE_REQUIRE_PAYMENT_SIGNER=1 but TOLLGATE_PAYMENT_SIGNER names no sign.mjs";   \
    GTEST_SKIP() << "no payment signer: run tests/webhooks/receiver/install and set "               \
                    "TOLLGATE_PAYMENT_SIGNER to its sign.mjs (scripts/test does)";                  \
  }                                                                                                   \
  static_assert(true, "")
