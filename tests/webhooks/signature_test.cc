// Webhook signatures (webhooks/signature.h) against the reference implementation of Standard
// Webhooks: the vectors below were made by the `standardwebhooks` npm package (1.3.0), which nobody
// here wrote, with tests/webhooks/make_signature_vectors.js (run by hand: the suite needs no
// network). Also: the secrets a rotation leaves signing, with an injected time.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/limits.h"
#include "webhooks/signature.h"
#include "webhooks/webhook.h"

namespace tollgate::webhooks {
namespace {

struct Vector {
  const char* secret;
  const char* id;
  std::int64_t timestamp_s;
  const char* body;
  const char* signature;
};

// {secret, webhook-id, webhook-timestamp, body} → webhook-signature, by the reference library.
const Vector kVectors[] = {
    {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "evt_1", 1700000000, "{\"type\":\"credited\",\"timestamp\":\"2023-11-14T22:13:20.000Z\",\"data\":{\"event_id\":1}}", "v1,b/4UDvu32e205RKn/GTLMU0E51lOJS158ipovNr30pw="},
    {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "evt_9007199254740991", 1799999999, "{\"type\":\"balance_low\",\"data\":{\"account_id\":\"kiosk-7\",\"available_after\":3}}", "v1,jyi+QEeGnVRi4HHrIftmOjaEpemYMybPdKUsVs5G24k="},
    {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "evt_42", 0, "", "v1,gQj5aX+n+kEZDZ62efwdfKFGGDYQTOypLt73+7pmkno="},
    {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "evt_7", 1733500000, "{\"note\":\"caf\xc3\xa9"" \xe2\x80\x94"" \xc3\xbc""nicode\"}", "v1,9JEYOIOwOGiUKoUoHh/YxrDm5aemGQNGlzV1/Dt20bQ="},
    {"whsec_CzBVep/E6Q4zWH2ix+wRNluApcrvFDleg6jN8hc8YYY=", "evt_1", 1700000000, "{\"type\":\"credited\",\"timestamp\":\"2023-11-14T22:13:20.000Z\",\"data\":{\"event_id\":1}}", "v1,NLPvCKj9UcVilvKJTI4W/tztXS2t7OH+bKXsM6PbA0k="},
    {"whsec_CzBVep/E6Q4zWH2ix+wRNluApcrvFDleg6jN8hc8YYY=", "evt_9007199254740991", 1799999999, "{\"type\":\"balance_low\",\"data\":{\"account_id\":\"kiosk-7\",\"available_after\":3}}", "v1,7wrrl7EzqSN9SiT5AySIUEdNMqOCvgqSSMUO4XK6UHM="},
    {"whsec_CzBVep/E6Q4zWH2ix+wRNluApcrvFDleg6jN8hc8YYY=", "evt_42", 0, "", "v1,m9sm3RUQvB/meYJq+oOHPcnXTPEcAfCuLaz001uQ1Tg="},
    {"whsec_CzBVep/E6Q4zWH2ix+wRNluApcrvFDleg6jN8hc8YYY=", "evt_7", 1733500000, "{\"note\":\"caf\xc3\xa9"" \xe2\x80\x94"" \xc3\xbc""nicode\"}", "v1,ttJxgWAZDUEqjkY3ckw88jHvFt5sMqrlhCGIH40DHps="},
    {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "evt_1", 1700000000, "{\"type\":\"credited\",\"timestamp\":\"2023-11-14T22:13:20.000Z\",\"data\":{\"event_id\":1}}", "v1,Nh80Xrdxi5ViiUubSmymKxskmxa2zbHIDCAgsglm9z4="},
    {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "evt_9007199254740991", 1799999999, "{\"type\":\"balance_low\",\"data\":{\"account_id\":\"kiosk-7\",\"available_after\":3}}", "v1,gegmkLlJM5Q6FTnWO2Lw9i42tfWISBAJshTqPRGBzOA="},
    {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "evt_42", 0, "", "v1,rvzHCLB/jEentP6IIpaSqbj0UL4K9fPX5e1Ra5cTw0w="},
    {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "evt_7", 1733500000, "{\"note\":\"caf\xc3\xa9"" \xe2\x80\x94"" \xc3\xbc""nicode\"}", "v1,txd532knW71jArqTVWnIZ+GtrlcjOFK9rTcS7TNryIw="},
};

TEST(WebhookSignature, MatchesTheReferenceLibrarysVectors) {
  for (const Vector& v : kVectors) {
    EXPECT_EQ(sign(v.secret, v.id, v.timestamp_s, v.body), std::optional<std::string>(v.signature))
        << v.secret << " " << v.id << " " << v.timestamp_s;
    EXPECT_TRUE(verify(v.signature, v.secret, v.id, v.timestamp_s, v.body));
  }
}

TEST(WebhookSignature, AVerifierRefusesAChangedBodyIdTimestampOrSecret) {
  const Vector& v = kVectors[0];
  const std::string body = v.body;
  EXPECT_FALSE(verify(v.signature, v.secret, v.id, v.timestamp_s, body + " "));
  std::string changed = body;
  changed[changed.size() / 2] ^= 1;
  EXPECT_FALSE(verify(v.signature, v.secret, v.id, v.timestamp_s, changed));
  EXPECT_FALSE(verify(v.signature, v.secret, "evt_2", v.timestamp_s, v.body));
  EXPECT_FALSE(verify(v.signature, v.secret, v.id, v.timestamp_s + 1, v.body));
  EXPECT_FALSE(verify(v.signature, kVectors[4].secret, v.id, v.timestamp_s, v.body));
  EXPECT_FALSE(verify("v1,", v.secret, v.id, v.timestamp_s, v.body));
  EXPECT_FALSE(verify("", v.secret, v.id, v.timestamp_s, v.body));
}

TEST(WebhookSignature, DuringARotationTheHeaderCarriesBothSignaturesAndEitherSecretVerifies) {
  // kVectors[0] and [4]: the same message signed by the first and the second secret.
  const std::vector<std::string> secrets{kVectors[0].secret, kVectors[4].secret};
  const std::string header = signature_header(secrets, kVectors[0].id, kVectors[0].timestamp_s, kVectors[0].body);
  EXPECT_EQ(header, std::string(kVectors[0].signature) + " " + kVectors[4].signature);
  for (const std::string& s : secrets) EXPECT_TRUE(verify(header, s, kVectors[0].id, kVectors[0].timestamp_s, kVectors[0].body));
  EXPECT_FALSE(verify(header, kVectors[8].secret, kVectors[0].id, kVectors[0].timestamp_s, kVectors[0].body));
}

TEST(WebhookSignature, IdsAndSecretsHaveTheirForms) {
  EXPECT_EQ(webhook_id(42), "evt_42");
  const std::string random(limits::kWebhookSecretBytes, '\x01');
  const std::string secret = secret_from_random(random);
  EXPECT_EQ(secret.substr(0, 6), "whsec_");
  EXPECT_EQ(secret_key(secret), std::optional<std::string>(random));  // base64 back to the 32 bytes
  EXPECT_EQ(endpoint_id_from_random(std::string("\x01\x23\x45\x67\x89\xab\xcd\xef", 8)), "we_0123456789abcdef");
  EXPECT_FALSE(secret_key("whsec_not base64!").has_value());
  EXPECT_FALSE(sign("whsec_", "evt_1", 1, "{}").has_value());
}

TEST(WebhookRotation, ThePreviousSecretSignsFor24HoursThenOnlyTheNewOne) {
  Endpoint e;
  e.secret = "whsec_new";
  EXPECT_EQ(signing_secrets(e, 0), std::vector<std::string>{"whsec_new"});
  const std::int64_t rotated_at = 1'700'000'000'000;
  e.previous_secret = "whsec_old";
  e.previous_secret_until_ms = rotated_at + limits::kWebhookPreviousSecretMs;
  EXPECT_EQ(signing_secrets(e, rotated_at), (std::vector<std::string>{"whsec_new", "whsec_old"}));
  EXPECT_EQ(signing_secrets(e, rotated_at + limits::kWebhookPreviousSecretMs - 1),
            (std::vector<std::string>{"whsec_new", "whsec_old"}));
  EXPECT_EQ(signing_secrets(e, rotated_at + limits::kWebhookPreviousSecretMs), std::vector<std::string>{"whsec_new"});
  static_assert(limits::kWebhookPreviousSecretMs == 24LL * 3600 * 1000);
}

TEST(WebhookEndpoint, UrlsAreCheckedStrictly) {
  for (const char* good : {"http://example.com", "https://example.com/hooks?x=1", "HTTPS://a.b:8443/p",
                           "http://127.0.0.1:9000/tollgate", "http://[::1]:8080/", "https://host_name.internal"}) {
    EXPECT_TRUE(check_url(good, "url").ok()) << good;
  }
  for (const char* bad : {"", "example.com", "ftp://example.com", "file:///etc/passwd", "javascript://x",
                          "http://", "http:///path", "http://exa mple.com", "http://a:0/", "http://a:65536/",
                          "http://a:x/", "http://a:/", "http://user:pw@example.com/", "http://[::1/",
                          "http://example.com/#frag", "http://ex\x01ample.com", "https://[zz]/"}) {
    const Status s = check_url(bad, "url");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().detail.find("url"), std::string::npos) << s.error().detail;
  }
  EXPECT_FALSE(check_url("https://e.com/" + std::string(limits::kWebhookUrlBytesMax, 'a'), "url").ok());
  EXPECT_TRUE(check_url("https://e.com/" + std::string(limits::kWebhookUrlBytesMax - 14, 'a'), "url").ok());
}

TEST(WebhookEndpoint, EventTypesAreKnownNamedOnceAndSuggested) {
  EXPECT_TRUE(check_event_types({"credited", "balance_low"}, "event_types").ok());
  const Status unknown = check_event_types({"balance_lwo"}, "event_types");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().detail.find("did you mean balance_low?"), std::string::npos) << unknown.error().detail;
  EXPECT_FALSE(check_event_types({}, "event_types").ok());
  EXPECT_FALSE(check_event_types({""}, "event_types").ok());
  EXPECT_FALSE(check_event_types({"credited", "credited"}, "event_types").ok());
  EXPECT_EQ(event_type_names().size(), 15u);
  EXPECT_TRUE(check_event_types({"lot_expired"}, "event_types").ok());
  EXPECT_EQ(split_event_types(join_event_types({"a", "b"})), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(split_event_types("").empty());
  Endpoint all;
  EXPECT_TRUE(wants_event_type(all, "credited"));
  Endpoint some;
  some.event_types = {"debited"};
  EXPECT_FALSE(wants_event_type(some, "credited"));
  EXPECT_TRUE(wants_event_type(some, "debited"));
}

}  // namespace
}  // namespace tollgate::webhooks
