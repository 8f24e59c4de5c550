// The payment signer (support/payment_signer.h: tests/webhooks/receiver/sign.mjs on the official
// `stripe` and `standardwebhooks` npm packages) checked against what tollgate's payment endpoints
// will verify: the Stripe-Signature header's v1 is HMAC-SHA256 hex of "{t}.{payload}" keyed by the
// secret's bytes (computed here with OpenSSL), and the Standard Webhooks headers verify with
// tollgate's own webhooks::verify. So a payment test that sends what the signer made tests tollgate
// against the providers' libraries, and this suite says the signer is wired up as the tests assume.
//
// Needs the signer (TOLLGATE_PAYMENT_SIGNER, set by scripts/test after tests/webhooks/receiver/install): skipped without
// it, failed under TOLLGATE_REQUIRE_PAYMENT_SIGNER=1. No network: both libraries sign locally.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/limits.h"
#include "support/payment_signer.h"
#include "webhooks/signature.h"
#include "webhooks/webhook.h"

namespace tollgate::payment_signer_test {
namespace {

using testing::Headers;
using testing::SignRequest;
using testing::SignScheme;

// hex(HMAC-SHA256(key, message)), lower case: what Stripe's v1 signature is.
std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
           message.size(), mac, &length) == nullptr) {
    throw std::runtime_error("HMAC failed");
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += kDigits[mac[i] >> 4];
    out += kDigits[mac[i] & 0xf];
  }
  return out;
}

// The value of `key` in a Stripe-Signature header ("t=…,v1=…"); "" when absent.
std::string stripe_field(std::string_view header, std::string_view key) {
  std::size_t begin = 0;
  while (begin <= header.size()) {
    const std::size_t end = std::min(header.find(',', begin), header.size());
    const std::string_view part = header.substr(begin, end - begin);
    if (part.size() > key.size() && part.substr(0, key.size()) == key && part[key.size()] == '=') {
      return std::string(part.substr(key.size() + 1));
    }
    begin = end + 1;
  }
  return "";
}

std::string header(const Headers& headers, const std::string& name) {
  const auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

const std::string kStripeSecret = "whsec_stripe_endpoint_secret_0123456789";
const std::string kStandardSecret =
    webhooks::secret_from_random(std::string(limits::kWebhookSecretBytes, '\x5a'));
// Not ASCII and with JSON's escapes in it: the signature is over the bytes as sent.
const std::string kPayload =
    "{\"id\":\"evt_1\",\"object\":\"event\",\"type\":\"checkout.session.completed\",\"data\":{\"object\":"
    "{\"amount_total\":1500,\"note\":\"caf\xc3\xa9 \xe2\x80\x94 \\\"quoted\\\"\\n\"}}}";

TEST(PaymentSigner, StripeHeaderIsHmacSha256HexOfTimestampDotPayload) {
  REQUIRE_PAYMENT_SIGNER();
  const Headers headers =
      testing::sign_payload({.scheme = SignScheme::stripe, .secret = kStripeSecret, .payload = kPayload, .timestamp_s = 1767225600});
  ASSERT_EQ(headers.size(), 1u);
  const std::string value = header(headers, "Stripe-Signature");
  EXPECT_EQ(stripe_field(value, "t"), "1767225600") << value;
  EXPECT_EQ(stripe_field(value, "v1"), hmac_sha256_hex(kStripeSecret, "1767225600." + kPayload)) << value;
  EXPECT_EQ(value, "t=1767225600,v1=" + hmac_sha256_hex(kStripeSecret, "1767225600." + kPayload));
}

TEST(PaymentSigner, StandardHeadersVerifyWithTollgatesOwnCheck) {
  REQUIRE_PAYMENT_SIGNER();
  const Headers headers = testing::sign_payload({.scheme = SignScheme::standard, .secret = kStandardSecret,
                                                 .payload = kPayload, .timestamp_s = 1767225600, .id = "msg_1"});
  ASSERT_EQ(headers.size(), 3u);
  EXPECT_EQ(header(headers, "webhook-id"), "msg_1");
  EXPECT_EQ(header(headers, "webhook-timestamp"), "1767225600");
  const std::string signature = header(headers, "webhook-signature");
  EXPECT_EQ(signature.rfind("v1,", 0), 0u) << signature;
  EXPECT_TRUE(webhooks::verify(signature, kStandardSecret, "msg_1", 1767225600, kPayload)) << signature;
  // And tollgate's check is not trivially true: any other body, id, time or secret fails.
  EXPECT_FALSE(webhooks::verify(signature, kStandardSecret, "msg_1", 1767225600, kPayload + " "));
  EXPECT_FALSE(webhooks::verify(signature, kStandardSecret, "msg_2", 1767225600, kPayload));
  EXPECT_FALSE(webhooks::verify(signature, kStandardSecret, "msg_1", 1767225601, kPayload));
  EXPECT_FALSE(webhooks::verify(signature, webhooks::secret_from_random(std::string(limits::kWebhookSecretBytes, '\x5b')),
                                "msg_1", 1767225600, kPayload));
}

// Many requests of both schemes in one process: each answer is its own request's, in order.
TEST(PaymentSigner, ManyRequestsInOneRunAnswerInOrder) {
  REQUIRE_PAYMENT_SIGNER();
  std::vector<SignRequest> requests;
  for (int i = 0; i < 40; ++i) {
    const std::string payload = "{\"n\":" + std::to_string(i) + "}";
    const std::int64_t t = 1700000000 + i;
    if (i % 2 == 0) {
      requests.push_back({.scheme = SignScheme::stripe, .secret = kStripeSecret, .payload = payload, .timestamp_s = t});
    } else {
      requests.push_back({.scheme = SignScheme::standard, .secret = kStandardSecret, .payload = payload,
                          .timestamp_s = t, .id = "msg_" + std::to_string(i)});
    }
  }
  const std::vector<Headers> answers = testing::sign_payloads(requests);
  ASSERT_EQ(answers.size(), requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const SignRequest& r = requests[i];
    const std::string t = std::to_string(r.timestamp_s);
    if (r.scheme == SignScheme::stripe) {
      EXPECT_EQ(header(answers[i], "Stripe-Signature"), "t=" + t + ",v1=" + hmac_sha256_hex(r.secret, t + "." + r.payload))
          << "request " << i;
    } else {
      EXPECT_EQ(header(answers[i], "webhook-id"), r.id) << "request " << i;
      EXPECT_TRUE(webhooks::verify(header(answers[i], "webhook-signature"), r.secret, r.id, r.timestamp_s, r.payload))
          << "request " << i;
    }
  }
  EXPECT_TRUE(testing::sign_payloads({}).empty());
}

// A request the library refuses is an error with the signer's message, not headers.
TEST(PaymentSigner, RefusedRequestThrowsWithTheSignersMessage) {
  REQUIRE_PAYMENT_SIGNER();
  try {
    testing::sign_payload({.scheme = SignScheme::standard, .secret = "whsec_!!", .payload = "{}", .timestamp_s = 1, .id = "m"});
    ADD_FAILURE() << "a secret that is not base64 was signed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("refuses"), std::string::npos) << e.what();
  }
  EXPECT_THROW(testing::sign_payload({.scheme = SignScheme::stripe, .secret = kStripeSecret, .payload = "{}", .timestamp_s = 0}),
               std::runtime_error);  // stripe's library would take 0 as "now"
  EXPECT_THROW(testing::sign_payload({.scheme = SignScheme::stripe, .secret = kStripeSecret, .payload = "\xff", .timestamp_s = 1}),
               std::runtime_error);  // not UTF-8
}

}  // namespace
}  // namespace tollgate::payment_signer_test
