// Payments over HTTP, end to end (api.md "Payments"): a real tollgate process (SQLite, or PostgreSQL in
// the HttpSuitesOnPostgres run) configured with two Stripe signing secrets (a rotation), packs, the
// debt policy and a Standard Webhooks secret. A signed checkout credits once whatever the number of
// deliveries and whichever of its two events; refunds take back their share once each; a shortfall
// freezes until repaid; a dispute freezes; unknown accounts and payments answer 404 so the provider
// retries; every bad signature or body is refused by name and changes nothing. The signatures here
// are made by tollgate's own payments::stripe_signature, except in the tests named "OfficialLibrar…",
// whose signatures are made by code nobody here wrote: the `stripe` npm package's
// generateTestHeaderString and the Standard Webhooks reference library (tests/support/payment_signer.h).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "core/clock.h"
#include "http_test_support.h"
#include "payments/signature.h"
#include "support/backends.h"
#include "support/payment_signer.h"
#include "webhooks/signature.h"

namespace tollgate::httptest {
namespace {

constexpr const char* kSecretOld = "whsec_old_secret_for_the_rotation";
constexpr const char* kSecret = "whsec_current_stripe_signing_secret";
// Standard Webhooks: "whsec_" + base64 of 32 bytes.
constexpr const char* kWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

std::int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class HttpPayments : public ServerSuite<HttpPayments> {
 public:
  static void configure(ServerOptions& options) {
    static testing::TempDir dir;
    const std::string path = dir.file("payments.toml");
    std::ofstream(path) << "[payments.stripe]\n"
                           "signing_secrets = [\"" << kSecretOld << "\", \"" << kSecret << "\"]\n"
                           "refund_shortfall = \"debt\"\n"
                           "[payments.stripe.packs]\n"
                           "small = 10\n"
                           "large = 120\n"
                           "[payments.webhook]\n"
                           "secret = \"" << kWebhookSecret << "\"\n";
    options.extra_args = {"--config", path};
  }

 protected:
  // POST /v1/payments/stripe with the body signed by `secret` at `t` (now by default).
  HttpResponse stripe(const std::string& body, const std::string& secret = kSecret, std::int64_t t = 0) {
    if (t == 0) t = now_s();
    const std::string header = "t=" + std::to_string(t) + ",v1=" + payments::stripe_signature(secret, t, body);
    return post_stripe(body, header);
  }
  HttpResponse post_stripe(const std::string& body, const std::string& header) {
    HttpClient open(port());
    return open.post("/v1/payments/stripe", body, {{"Stripe-Signature", header}});
  }
  static std::string event(const std::string& type, json::object object, const std::string& id = "") {
    static int n = 0;
    json::object e{{"id", id.empty() ? "evt_" + std::to_string(++n) : id}, {"object", "event"}, {"type", type},
                   {"data", json::object{{"object", std::move(object)}}}};
    return json::serialize(e);
  }
  static json::object session(const std::string& id, const std::string& account, json::object metadata,
                              const std::string& status = "paid") {
    return json::object{{"id", id},          {"object", "checkout.session"}, {"client_reference_id", account},
                        {"payment_status", status}, {"payment_intent", "pi_" + id}, {"metadata", std::move(metadata)}};
  }
  static json::object charge(const std::string& session_id, std::int64_t refunded, std::int64_t amount) {
    return json::object{{"id", "ch_" + session_id}, {"object", "charge"}, {"payment_intent", "pi_" + session_id},
                        {"amount", amount}, {"amount_refunded", refunded}};
  }
  // A signed checkout.session.completed that buys `credits` for `account`; returns the session id.
  std::string buy(const std::string& account, std::int64_t credits) {
    const std::string id = unique("cs_test");
    const HttpResponse r = stripe(event("checkout.session.completed",
                                        session(id, account, {{"tollgate_credits", std::to_string(credits)}})));
    EXPECT_EQ(r.status, 200u) << r;
    return id;
  }
  std::size_t event_count(const std::string& account) {
    return admin().get("/v1/accounts/" + account + "/events").object().at("events").as_array().size();
  }
  HttpResponse webhook(const std::string& body, const std::string& id, std::int64_t t = 0,
                       const std::string& secret = kWebhookSecret) {
    if (t == 0) t = now_s();
    HttpClient open(port());
    const auto signature = webhooks::sign(secret, id, t, body);
    return open.post("/v1/payments/webhook", body,
                     {{"webhook-id", id}, {"webhook-timestamp", std::to_string(t)}, {"webhook-signature", *signature}});
  }
};

TEST_F(HttpPayments, ASignedCheckoutCreditsTheAccountOnceHoweverOftenItIsDelivered) {
  const std::string account = make_account(0);
  const std::string body = event("checkout.session.completed", session("cs_test_a1", account, {{"tollgate_pack", "small"}}));
  const HttpResponse first = stripe(body);
  ASSERT_EQ(first.status, 200u) << first;
  EXPECT_EQ(jstr(first.object(), "outcome"), "credited");
  EXPECT_EQ(jstr(first.object(), "payment_id"), "stripe:cs_test_a1");
  EXPECT_EQ(jint(first.object(), "credits"), 10);
  for (int i = 0; i < 4; ++i) {
    const HttpResponse again = stripe(body);
    ASSERT_EQ(again.status, 200u) << again;
    EXPECT_EQ(jstr(again.object(), "outcome"), "replayed");
  }
  // The async event of the same session credits nothing more.
  const HttpResponse async = stripe(event("checkout.session.async_payment_succeeded",
                                          session("cs_test_a1", account, {{"tollgate_pack", "small"}})));
  ASSERT_EQ(async.status, 200u) << async;
  EXPECT_EQ(jstr(async.object(), "outcome"), "replayed");
  const json::object a = get_account(account);
  EXPECT_EQ(jint(a, "available"), 10);
  EXPECT_EQ(jint(a, "purchased"), 10);
  EXPECT_EQ(event_count(account), 1u);
  // The credit is a transfer under stripe:{session}.
  const HttpResponse t = admin().get("/v1/transfers/stripe:cs_test_a1");
  ASSERT_EQ(t.status, 200u) << t;
  EXPECT_EQ(jint(t.object(), "amount"), 10);
}

TEST_F(HttpPayments, AnUnpaidSessionCreditsNothingUntilItsAsyncPaymentSucceeds) {
  const std::string account = make_account(0);
  const json::object s = session("cs_test_async", account, {{"tollgate_credits", "7"}}, "unpaid");
  const HttpResponse unpaid = stripe(event("checkout.session.completed", s));
  ASSERT_EQ(unpaid.status, 200u) << unpaid;
  EXPECT_TRUE(unpaid.object().at("pending").as_bool());
  EXPECT_EQ(jint(get_account(account), "available"), 0);
  const HttpResponse paid = stripe(event("checkout.session.async_payment_succeeded", s));
  ASSERT_EQ(paid.status, 200u) << paid;
  EXPECT_EQ(jstr(paid.object(), "outcome"), "credited");
  // A session that needed no payment (a 100% discount) credits nothing either: only "paid" does.
  const HttpResponse free = stripe(event("checkout.session.completed",
                                         session(unique("cs_test"), account, {{"tollgate_credits", "5"}}, "no_payment_required")));
  ASSERT_EQ(free.status, 200u) << free;
  EXPECT_TRUE(free.object().at("pending").as_bool());
  EXPECT_EQ(jint(get_account(account), "available"), 7);
}

TEST_F(HttpPayments, EitherSecretOfARotationIsAcceptedAndTheAccountMayBeNamedInMetadata) {
  const std::string account = make_account(0);
  json::object s = session(unique("cs_test"), "", {{"tollgate_account_id", account}, {"tollgate_pack", "large"}});
  s.erase("client_reference_id");
  const HttpResponse r = stripe(event("checkout.session.completed", s), kSecretOld);
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(jint(get_account(account), "available"), 120);
}

TEST_F(HttpPayments, BadSignaturesAreRefusedAndChangeNothing) {
  const std::string account = make_account(0);
  const std::string body = event("checkout.session.completed", session("cs_test_sig", account, {{"tollgate_credits", "5"}}));
  const std::int64_t t = now_s();
  struct Case {
    const char* name;
    std::string header;
    std::string body;
    const char* says;
  };
  const std::string good = payments::stripe_signature(kSecret, t, body);
  const Case cases[] = {
      {"no header", "", body, "missing"},
      {"wrong secret", "t=" + std::to_string(t) + ",v1=" + payments::stripe_signature("whsec_wrong", t, body), body,
       "matches"},
      {"changed body", "t=" + std::to_string(t) + ",v1=" + good, body + " ", "matches"},
      {"stale", "t=" + std::to_string(t - 301) + ",v1=" + payments::stripe_signature(kSecret, t - 301, body), body,
       "old"},
      {"from the future", "t=" + std::to_string(t + 400) + ",v1=" + payments::stripe_signature(kSecret, t + 400, body),
       body, "future"},
      {"no time stamp", "v1=" + good, body, "time stamp"},
      {"no v1", "t=" + std::to_string(t) + ",v0=" + good, body, "no v1"},
      {"garbage", "nonsense", body, "time stamp"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = post_stripe(c.body, c.header);
    EXPECT_EQ(r.status, 400u) << c.name << ": " << r;
    EXPECT_EQ(r.code(), "invalid_signature") << c.name;
    EXPECT_NE(r.body.find(c.says), std::string::npos) << c.name << ": " << r;
    EXPECT_EQ(r.body.find("whsec_"), std::string::npos) << c.name << ": a secret in the answer: " << r;
  }
  EXPECT_EQ(jint(get_account(account), "available"), 0);
  EXPECT_EQ(event_count(account), 0u);
  // The failures are counted.
  const HttpResponse m = admin().get("/metrics");
  EXPECT_NE(m.body.find("tollgate_payment_signature_failures_total{provider=\"stripe\"}"), std::string::npos);
  // Signed now, the same body is accepted.
  EXPECT_EQ(stripe(body).status, 200u);
  EXPECT_EQ(jint(get_account(account), "available"), 5);
}

TEST_F(HttpPayments, SignedButUnusableEventsAreRefusedByNameAndChangeNothing) {
  const std::string account = make_account(0);
  struct Case {
    const char* name;
    json::object metadata;
    const char* says;
  };
  const Case cases[] = {
      {"no credits", {}, "neither tollgate_credits nor tollgate_pack"},
      {"unknown pack", {{"tollgate_pack", "medium"}}, "medium is not a configured pack ([payments.stripe.packs]: large, small)"},
      {"both", {{"tollgate_pack", "small"}, {"tollgate_credits", "3"}}, "both"},
      {"zero", {{"tollgate_credits", "0"}}, "tollgate_credits must be an integer from 1"},
      {"negative", {{"tollgate_credits", "-4"}}, "tollgate_credits must be"},
      {"huge", {{"tollgate_credits", "9007199254740992"}}, "tollgate_credits must be"},
      {"not a number", {{"tollgate_credits", "ten"}}, "tollgate_credits must be"},
      {"no expiry days", {{"tollgate_credits", "3"}, {"tollgate_expires_in_days", "0"}}, "tollgate_expires_in_days must be"},
      {"negative expiry days", {{"tollgate_credits", "3"}, {"tollgate_expires_in_days", "-2"}}, "tollgate_expires_in_days must be"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = stripe(event("checkout.session.completed", session(unique("cs_test"), account, c.metadata)));
    EXPECT_EQ(r.status, 400u) << c.name << ": " << r;
    EXPECT_EQ(r.code(), "invalid_request") << c.name;
    EXPECT_NE(r.body.find(c.says), std::string::npos) << c.name << ": " << r;
  }
  // No account named; not JSON; no data.object.
  json::object anonymous = session(unique("cs_test"), "", {{"tollgate_credits", "3"}});
  anonymous.erase("client_reference_id");
  EXPECT_EQ(stripe(event("checkout.session.completed", anonymous)).status, 400u);
  EXPECT_EQ(stripe("{not json").status, 400u);
  EXPECT_EQ(stripe(R"({"id":"evt_x","type":"checkout.session.completed"})").status, 400u);
  EXPECT_EQ(jint(get_account(account), "available"), 0);
  EXPECT_EQ(event_count(account), 0u);
}

TEST_F(HttpPayments, ACheckoutWithExpiresInDaysMakesALotThatExpiresThatManyDaysAfterItsDelivery) {
  const std::string account = make_account(0);
  const std::int64_t sent_ms = now_s() * 1000;
  const HttpResponse paid = stripe(event("checkout.session.completed",
                                         session(unique("cs_test"), account,
                                                 {{"tollgate_credits", "7"}, {"tollgate_expires_in_days", "30"}})));
  ASSERT_EQ(paid.status, 200u) << paid;
  const std::int64_t answered_ms = (now_s() + 1) * 1000;
  const HttpResponse lots = admin().get("/v1/accounts/" + account + "/lots");
  ASSERT_EQ(lots.status, 200u) << lots;
  const json::array& listed = lots.object().at("lots").as_array();
  ASSERT_EQ(listed.size(), 1u) << lots;
  const json::object& lot = listed[0].as_object();
  EXPECT_EQ(jint(lot, "amount"), 7);
  const auto expires_at = parse_rfc3339_ms(jstr(lot, "expires_at"));
  ASSERT_TRUE(expires_at.has_value()) << lots;
  constexpr std::int64_t kThirtyDaysMs = 30LL * 86'400'000;
  EXPECT_GE(*expires_at, sent_ms + kThirtyDaysMs);
  EXPECT_LE(*expires_at, answered_ms + kThirtyDaysMs);
}

TEST_F(HttpPayments, AnUnknownAccountOrPaymentIsNotFoundSoTheProviderRetries) {
  const std::string account = "acct-created-later-" + unique("x");
  const std::string body = event("checkout.session.completed", session(unique("cs_test"), account, {{"tollgate_credits", "4"}}));
  const HttpResponse early = stripe(body);
  EXPECT_EQ(early.status, 404u) << early;
  EXPECT_EQ(early.code(), "not_found");
  ASSERT_EQ(admin().post("/v1/accounts", json::object{{"account_id", account}}).status, 201u);
  const HttpResponse retried = stripe(body);
  ASSERT_EQ(retried.status, 200u) << retried;
  EXPECT_EQ(jint(get_account(account), "available"), 4);
  const HttpResponse refund = stripe(event("charge.refunded", charge("cs_never_seen", 100, 100)));
  EXPECT_EQ(refund.status, 404u) << refund;
  const HttpResponse dispute = stripe(event("charge.dispute.created",
                                            json::object{{"id", "dp_1"}, {"object", "dispute"},
                                                         {"payment_intent", "pi_cs_never_seen"}, {"charge", "ch_x"}}));
  EXPECT_EQ(dispute.status, 404u) << dispute;
}

TEST_F(HttpPayments, OtherEventTypesAreAcknowledgedAndIgnored) {
  const HttpResponse r = stripe(event("customer.created", json::object{{"id", "cus_1"}}));
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.object().at("ignored").as_bool());
}

TEST_F(HttpPayments, TwoPartialRefundsAreTwoDebitsAndTheSameRefundAgainIsNothing) {
  const std::string account = make_account(0);
  const std::string id = buy(account, 100);
  const HttpResponse first = stripe(event("charge.refunded", charge(id, 300, 1000)));
  ASSERT_EQ(first.status, 200u) << first;
  EXPECT_EQ(jstr(first.object(), "outcome"), "taken_back");
  EXPECT_EQ(jint(first.object(), "owed"), 30);
  EXPECT_EQ(jint(first.object(), "taken_back"), 30);
  const HttpResponse again = stripe(event("charge.refunded", charge(id, 300, 1000)));
  ASSERT_EQ(again.status, 200u) << again;
  EXPECT_EQ(jstr(again.object(), "outcome"), "replayed");
  const HttpResponse second = stripe(event("charge.refunded", charge(id, 450, 1000)));
  ASSERT_EQ(second.status, 200u) << second;
  EXPECT_EQ(jint(second.object(), "taken_back"), 15);
  EXPECT_EQ(jint(get_account(account), "available"), 55);
  EXPECT_EQ(jint(get_account(account), "purchased"), 55);
  const auto events = admin().get("/v1/accounts/" + account + "/events").object().at("events").as_array();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(jstr(events[1].as_object(), "type"), "debited");
  EXPECT_EQ(jstr(events[1].as_object(), "reference"), "stripe:ch_" + id + ":refunded:300");
  EXPECT_EQ(jstr(events[2].as_object(), "reference"), "stripe:ch_" + id + ":refunded:450");
}

TEST_F(HttpPayments, ARefundOfSpentCreditsPutsTheAccountInDebtFrozenUntilACreditRepaysIt) {
  const std::string account = make_account(0);
  const std::string id = buy(account, 10);
  const std::string hold = jstr(make_hold(account, 8), "hold_id");
  ASSERT_EQ(admin().post("/v1/holds/" + hold + "/commit", json::object{{"amount", 8}}).status, 200u);
  const HttpResponse r = stripe(event("charge.refunded", charge(id, 500, 500)));
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.object().at("account_frozen").as_bool());
  json::object a = get_account(account);
  EXPECT_EQ(jint(a, "available"), -8);
  EXPECT_TRUE(a.at("frozen").as_bool());
  EXPECT_EQ(jstr(a, "frozen_reason"), "refund shortfall");
  const HttpResponse refused = admin().post("/v1/holds", json::object{{"account_id", account}, {"amount", 1},
                                                                      {"request_id", unique("r")}});
  EXPECT_EQ(refused.code(), "account_frozen") << refused;
  ASSERT_EQ(admin().post("/v1/accounts/" + account + "/credits", json::object{{"amount", 8}, {"reference", unique("t")}}).status,
            201u);
  a = get_account(account);
  EXPECT_FALSE(a.at("frozen").as_bool());
  EXPECT_TRUE(a.at("frozen_reason").is_null());
  const HttpResponse audit = admin().get("/v1/audit?account_id=" + account);
  ASSERT_EQ(audit.status, 200u) << audit;
  EXPECT_EQ(audit.object().at("violations").as_array().size(), 0u) << audit;
}

TEST_F(HttpPayments, ADisputeFreezesTheAccount) {
  const std::string account = make_account(0);
  const std::string id = buy(account, 10);
  const json::object dispute{{"id", "dp_" + id}, {"object", "dispute"}, {"payment_intent", "pi_" + id}, {"charge", "ch_" + id}};
  const HttpResponse r = stripe(event("charge.dispute.created", dispute));
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(jstr(r.object(), "outcome"), "frozen");
  const json::object a = get_account(account);
  EXPECT_TRUE(a.at("frozen").as_bool());
  EXPECT_EQ(jstr(a, "frozen_reason"), "payment disputed");
  EXPECT_EQ(jstr(stripe(event("charge.dispute.created", dispute)).object(), "outcome"), "replayed");
}

TEST_F(HttpPayments, AnotherProviderThroughStandardWebhooksCreditsOnceAndRefundsOnceEach) {
  const std::string account = make_account(0);
  const std::string pay = json::serialize(json::object{
      {"type", "payment.succeeded"}, {"payment_id", "order-1"}, {"account_id", account}, {"credits", 40}});
  const HttpResponse first = webhook(pay, "msg_1");
  ASSERT_EQ(first.status, 200u) << first;
  EXPECT_EQ(jstr(first.object(), "payment_id"), "payment:order-1");
  EXPECT_EQ(jstr(webhook(pay, "msg_1b").object(), "outcome"), "replayed");  // redelivered under a new id: still once
  const std::string refund = json::serialize(json::object{
      {"type", "payment.refunded"}, {"payment_id", "order-1"}, {"account_id", account}, {"credits", 15}});
  ASSERT_EQ(webhook(refund, "msg_2").status, 200u);
  EXPECT_EQ(jstr(webhook(refund, "msg_2").object(), "outcome"), "replayed");
  ASSERT_EQ(webhook(refund, "msg_3").status, 200u);  // a second refund of 15
  EXPECT_EQ(jint(get_account(account), "available"), 10);
  // Bad signatures, stale, lot fields, unknown payment.
  const HttpResponse bad = webhook(pay, "msg_4", 0, "whsec_c2VjcmV0LXRoYXQtaXMtbm90LWNvbmZpZ3VyZWQ=");
  EXPECT_EQ(bad.status, 400u) << bad;
  EXPECT_EQ(bad.code(), "invalid_signature");
  EXPECT_EQ(webhook(pay, "msg_5", now_s() - 3600).code(), "invalid_signature");
  HttpClient open(port());
  EXPECT_EQ(open.post("/v1/payments/webhook", pay).code(), "invalid_signature");
  const std::string bad_lot = json::serialize(json::object{{"type", "payment.succeeded"}, {"payment_id", "order-3"},
                                                           {"account_id", account}, {"credits", 5}, {"priority", 101}});
  const HttpResponse refused_lot = webhook(bad_lot, "msg_8");
  EXPECT_EQ(refused_lot.status, 400u) << refused_lot;
  EXPECT_NE(refused_lot.body.find("priority"), std::string::npos) << refused_lot;
  const std::string unknown = json::serialize(json::object{
      {"type", "payment.refunded"}, {"payment_id", "order-404"}, {"account_id", account}, {"credits", 1}});
  EXPECT_EQ(webhook(unknown, "msg_7").status, 404u);
  EXPECT_EQ(jint(get_account(account), "available"), 10);
  // A payment's credits make a lot with its terms, and its refund takes from that lot first.
  const std::string with_lot = json::serialize(json::object{{"type", "payment.succeeded"}, {"payment_id", "order-2"},
                                                            {"account_id", account}, {"credits", 5},
                                                            {"expires_at", "2030-01-01T00:00:00Z"}, {"priority", 90},
                                                            {"category", "promotional"}});
  ASSERT_EQ(webhook(with_lot, "msg_6").status, 200u);
  const HttpResponse lots = admin().get("/v1/accounts/" + account + "/lots?status=active");
  ASSERT_EQ(lots.status, 200u) << lots;
  const json::array& listed = lots.object().at("lots").as_array();
  ASSERT_FALSE(listed.empty());
  const json::object& last = listed.back().as_object();  // priority 90: spent last
  EXPECT_EQ(jstr(last, "reference"), "payment:order-2");
  EXPECT_EQ(jstr(last, "expires_at"), "2030-01-01T00:00:00.000Z");
  EXPECT_EQ(jstr(last, "category"), "promotional");
  const std::string refund_2 = json::serialize(json::object{
      {"type", "payment.refunded"}, {"payment_id", "order-2"}, {"account_id", account}, {"credits", 2}});
  ASSERT_EQ(webhook(refund_2, "msg_9").status, 200u);
  const HttpResponse after = admin().get("/v1/accounts/" + account + "/lots?status=active");
  EXPECT_EQ(jint(after.object().at("lots").as_array().back().as_object(), "available"), 3) << after;
  EXPECT_EQ(jint(get_account(account), "available"), 13);
}

TEST_F(HttpPayments, OfficialLibrariesSignaturesAreAcceptedAndTheirWrongOnesRefusedWithNothingChanged) {
  REQUIRE_PAYMENT_SIGNER();
  using testing::SignRequest;
  using testing::SignScheme;
  const std::string account = make_account(0);
  const std::string paid = event("checkout.session.completed", session(unique("cs_test"), account, {{"tollgate_credits", "6"}}));
  const std::string order = json::serialize(json::object{
      {"type", "payment.succeeded"}, {"payment_id", unique("order")}, {"account_id", account}, {"credits", 4}});
  const std::int64_t t = now_s();
  // One node process signs every payload: the good ones, and the ones that must be refused.
  const auto headers = testing::sign_payloads({
      {SignScheme::stripe, kSecret, paid, t, ""},                 // 0: accepted
      {SignScheme::stripe, kSecretOld, paid, t, ""},              // 1: the older secret of the rotation: accepted
      {SignScheme::stripe, "whsec_not_configured", paid, t, ""},  // 2: wrong secret
      {SignScheme::stripe, kSecret, paid + " ", t, ""},           // 3: signed another body
      {SignScheme::stripe, kSecret, paid, t - 600, ""},           // 4: stale
      {SignScheme::standard, kWebhookSecret, order, t, "msg_official_1"},                        // 5: accepted
      {SignScheme::standard, "whsec_c2VjcmV0LXRoYXQtaXMtbm90LWNvbmZpZ3VyZWQ=", order, t, "m2"},  // 6: wrong secret
      {SignScheme::standard, kWebhookSecret, order + " ", t, "msg_official_3"},                  // 7: another body
      {SignScheme::standard, kWebhookSecret, order, t - 600, "msg_official_4"},                  // 8: stale
  });
  ASSERT_EQ(headers.size(), 9u);
  HttpClient open(port());
  const auto refused = [&](const char* what, const std::string& target, const std::string& body,
                           const testing::Headers& h) {
    const HttpResponse r = open.post(target, body, h);
    EXPECT_EQ(r.status, 400u) << what << ": " << r;
    EXPECT_EQ(r.code(), "invalid_signature") << what;
  };
  refused("wrong secret", "/v1/payments/stripe", paid, headers[2]);
  refused("changed body", "/v1/payments/stripe", paid, headers[3]);
  refused("stale", "/v1/payments/stripe", paid, headers[4]);
  refused("missing header", "/v1/payments/stripe", paid, {});
  refused("wrong secret", "/v1/payments/webhook", order, headers[6]);
  refused("changed body", "/v1/payments/webhook", order, headers[7]);
  refused("stale", "/v1/payments/webhook", order, headers[8]);
  refused("missing headers", "/v1/payments/webhook", order, {});
  EXPECT_EQ(jint(get_account(account), "available"), 0);
  EXPECT_EQ(event_count(account), 0u);

  const HttpResponse stripe_ok = open.post("/v1/payments/stripe", paid, headers[0]);
  ASSERT_EQ(stripe_ok.status, 200u) << stripe_ok;
  EXPECT_EQ(jstr(stripe_ok.object(), "outcome"), "credited");
  const HttpResponse rotated = open.post("/v1/payments/stripe", paid, headers[1]);
  ASSERT_EQ(rotated.status, 200u) << rotated;
  EXPECT_EQ(jstr(rotated.object(), "outcome"), "replayed");
  const HttpResponse standard_ok = open.post("/v1/payments/webhook", order, headers[5]);
  ASSERT_EQ(standard_ok.status, 200u) << standard_ok;
  EXPECT_EQ(jstr(standard_ok.object(), "outcome"), "credited");
  EXPECT_EQ(jint(get_account(account), "available"), 10);
}

}  // namespace
}  // namespace tollgate::httptest
