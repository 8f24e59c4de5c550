// Refunds of a committed hold over HTTP, end to end (api.md "Refunds of a charge"): a real tollgate
// process (SQLite, or PostgreSQL in the HttpSuitesOnPostgres run). A refund gives back what a
// charged hold took, in part or in whole, once per request_id, never more than it charged; only an
// admin key refunds; every bad input is refused by name and changes nothing. (A job's refund:
// jobs_api_test.cc; the rules on every backend: tests/refunds.)
#include <gtest/gtest.h>

#include <string>

#include "http_test_support.h"

namespace tollgate::httptest {
namespace {

class HttpRefunds : public ServerSuite<HttpRefunds> {
 protected:
  // An account with `credits`, and a hold of `amount` on it committed with `committed`.
  std::pair<std::string, std::string> charged(std::int64_t credits, std::int64_t amount, std::int64_t committed) {
    const std::string account = make_account(credits);
    const std::string hold_id = jstr(make_hold(account, amount), "hold_id");
    const HttpResponse c = admin().post("/v1/holds/" + hold_id + "/commit", json::object{{"amount", committed}});
    EXPECT_EQ(c.status, 200u) << c;
    return {account, hold_id};
  }
  HttpResponse refund(const std::string& hold_id, json::object body) {
    return admin().post("/v1/holds/" + hold_id + "/refund", body);
  }
};

TEST_F(HttpRefunds, ARefundGivesBackPartOfTheChargeThenTheRestAndThenNothingMore) {
  const auto [account, hold_id] = charged(100, 30, 20);
  const HttpResponse part = refund(hold_id, {{"amount", 5}, {"reason", "the print jammed"}, {"request_id", unique("rf")}});
  ASSERT_EQ(part.status, 200u) << part;
  EXPECT_EQ(jstr(part.object(), "hold_id"), hold_id);
  EXPECT_EQ(jstr(part.object(), "status"), "committed");
  EXPECT_EQ(jint(part.object(), "committed_amount"), 20);
  EXPECT_EQ(jint(part.object(), "refunded_amount"), 5);
  json::object a = get_account(account);
  EXPECT_EQ(jint(a, "available"), 85);
  EXPECT_EQ(jint(a, "used"), 15);
  EXPECT_EQ(jint(a, "purchased"), 100);  // credits come back, not money

  // The event: refunded, tied to the hold, with the reason and the refund's request_id.
  const HttpResponse events = admin().get("/v1/accounts/" + account + "/events");
  ASSERT_EQ(events.status, 200u) << events;
  const json::object last = events.object().at("events").as_array().back().as_object();
  EXPECT_EQ(jstr(last, "type"), "refunded");
  EXPECT_EQ(jint(last, "amount"), 5);
  EXPECT_EQ(jstr(last, "hold_id"), hold_id);
  EXPECT_EQ(jstr(last, "reason"), "the print jammed");
  EXPECT_EQ(jint(last, "used_after"), 15);

  const HttpResponse rest = refund(hold_id, {{"reason", "complaint"}, {"request_id", unique("rf")}});
  ASSERT_EQ(rest.status, 200u) << rest;
  EXPECT_EQ(jint(rest.object(), "refunded_amount"), 20);
  EXPECT_EQ(jint(get_account(account), "available"), 100);

  const json::object before = account_state(account);
  const HttpResponse more = refund(hold_id, {{"reason", "again"}, {"request_id", unique("rf")}});
  EXPECT_EQ(more.status, 409u) << more;
  EXPECT_EQ(more.code(), "refund_exceeds_charge");
  EXPECT_NE(more.body.find("nothing is left to refund"), std::string::npos) << more;
  EXPECT_EQ(account_state(account), before);
}

TEST_F(HttpRefunds, TheSameRequestIdAgainMovesNothingAndWithOtherParametersIsAMismatch) {
  const auto [account, hold_id] = charged(50, 10, 10);
  const std::string request_id = unique("rf");
  ASSERT_EQ(refund(hold_id, {{"amount", 3}, {"reason", "jammed"}, {"request_id", request_id}}).status, 200u);
  const json::object after_first = account_state(account);
  const HttpResponse again = refund(hold_id, {{"amount", 3}, {"reason", "jammed"}, {"request_id", request_id}});
  ASSERT_EQ(again.status, 200u) << again;
  EXPECT_EQ(jint(again.object(), "refunded_amount"), 3);
  // The Idempotency-Key header may stand for request_id.
  const HttpResponse header = admin().post("/v1/holds/" + hold_id + "/refund",
                                           json::object{{"amount", 3}, {"reason", "jammed"}},
                                           {{"Idempotency-Key", request_id}});
  ASSERT_EQ(header.status, 200u) << header;
  EXPECT_EQ(jint(header.object(), "refunded_amount"), 3);
  EXPECT_EQ(account_state(account), after_first);

  const HttpResponse other = refund(hold_id, {{"amount", 4}, {"reason", "jammed"}, {"request_id", request_id}});
  EXPECT_EQ(other.status, 422u) << other;
  EXPECT_EQ(other.code(), "idempotency_mismatch");
  const auto [account2, hold2] = charged(50, 10, 10);
  const HttpResponse other_hold = refund(hold2, {{"amount", 3}, {"reason", "jammed"}, {"request_id", request_id}});
  EXPECT_EQ(other_hold.status, 422u) << other_hold;
  EXPECT_EQ(account_state(account), after_first);
  EXPECT_EQ(jint(get_account(account2), "used"), 10);
}

TEST_F(HttpRefunds, OnlyAChargedHoldRefundsAndNeverMoreThanItCharged) {
  const std::string account = make_account(40);
  const std::string active = jstr(make_hold(account, 5), "hold_id");
  const std::string released = jstr(make_hold(account, 5), "hold_id");
  ASSERT_EQ(admin().post("/v1/holds/" + released + "/release", json::object{}).status, 200u);
  const json::object before = account_state(account);
  for (const std::string& hold : {active, released}) {
    const HttpResponse r = refund(hold, {{"reason", "x"}, {"request_id", unique("rf")}});
    EXPECT_EQ(r.status, 409u) << r;
    EXPECT_EQ(r.code(), "conflict") << r;
  }
  const auto [other, committed] = charged(40, 10, 6);
  const HttpResponse over = refund(committed, {{"amount", 7}, {"reason", "x"}, {"request_id", unique("rf")}});
  EXPECT_EQ(over.status, 409u) << over;
  EXPECT_EQ(over.code(), "refund_exceeds_charge");
  EXPECT_NE(over.body.find("at most 6 can be refunded, not 7"), std::string::npos) << over;
  const HttpResponse unknown = refund("hold_999999_0123456789abcdef", {{"reason", "x"}, {"request_id", unique("rf")}});
  EXPECT_EQ(unknown.status, 404u) << unknown;
  EXPECT_EQ(account_state(account), before);
  EXPECT_EQ(jint(get_account(other), "used"), 6);
}

TEST_F(HttpRefunds, BadInputIsRefusedByNameAndChangesNothing) {
  const auto [account, hold_id] = charged(30, 10, 10);
  const json::object before = account_state(account);
  struct Case {
    std::string body;
    std::string names;  // in the detail
  };
  const std::string rid = unique("rf");
  const Case cases[] = {
      {R"({"reason":"x","request_id":")" + rid + R"(","amount":0})", "amount"},
      {R"({"reason":"x","request_id":")" + rid + R"(","amount":-3})", "amount"},
      {R"({"reason":"x","request_id":")" + rid + R"(","amount":9007199254740992})", "amount"},
      {R"({"reason":"x","request_id":")" + rid + R"(","amount":"3"})", "amount"},
      {R"({"reason":"x","request_id":")" + rid + R"(","amount":2.5})", "amount"},
      {R"({"request_id":")" + rid + R"("})", "reason"},
      {R"({"reason":"","request_id":")" + rid + R"("})", "reason"},
      {R"({"reason":"x"})", "request_id"},
      {R"({"reason":"x","request_id":"has space"})", "request_id"},
      {R"({"reason":"x","request_id":")" + rid + R"(","refund_all":true})", "refund_all"},
      {R"({"reason":"x","request_id":")" + rid + R"(")", "JSON"},
      {R"([1,2])", "object"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = admin().post("/v1/holds/" + hold_id + "/refund", c.body);
    EXPECT_EQ(r.status, 400u) << c.body << " → " << r;
    EXPECT_EQ(r.code(), "invalid_request") << c.body;
    EXPECT_NE(r.body.find(c.names), std::string::npos) << c.body << " → " << r;
  }
  const HttpResponse bad_id = admin().post("/v1/holds/has%20space/refund", json::object{{"reason", "x"}, {"request_id", rid}});
  EXPECT_EQ(bad_id.status, 400u) << bad_id;
  const HttpResponse huge = admin().post("/v1/holds/" + hold_id + "/refund", std::string(70 * 1024, ' '));
  EXPECT_EQ(huge.status, 413u) << huge;
  // No key; an account key (a kiosk must not refund itself).
  HttpClient anonymous(port());
  EXPECT_EQ(anonymous.post("/v1/holds/" + hold_id + "/refund", json::object{{"reason", "x"}, {"request_id", rid}}).status, 401u);
  const HttpResponse key = admin().post("/v1/accounts/" + account + "/keys", json::object{});
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient kiosk(port(), jstr(key.object(), "secret"));
  const HttpResponse forbidden = kiosk.post("/v1/holds/" + hold_id + "/refund", json::object{{"reason", "x"}, {"request_id", rid}});
  EXPECT_EQ(forbidden.status, 403u) << forbidden;
  EXPECT_EQ(forbidden.code(), "forbidden");
  EXPECT_EQ(account_state(account), before);
  // The request_id refused above was never used: it refunds now.
  EXPECT_EQ(refund(hold_id, {{"reason", "x"}, {"request_id", rid}}).status, 200u);
}

TEST_F(HttpRefunds, MetricsCountRefundsAndTheCreditsGivenBack) {
  const auto metric = [&](const std::string& name) -> std::int64_t {
    const HttpResponse m = admin().get("/metrics");
    EXPECT_EQ(m.status, 200u);
    const std::size_t at = m.body.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(m.body.substr(at + name.size() + 2));
  };
  const std::int64_t refunds = metric("tollgate_refunds_total");
  const std::int64_t credits = metric("tollgate_refunded_credits_total");
  ASSERT_GE(refunds, 0);
  const auto [account, hold_id] = charged(30, 10, 8);
  const std::string rid = unique("rf");
  ASSERT_EQ(refund(hold_id, {{"amount", 3}, {"reason", "x"}, {"request_id", rid}}).status, 200u);
  ASSERT_EQ(refund(hold_id, {{"amount", 3}, {"reason", "x"}, {"request_id", rid}}).status, 200u);  // a replay
  ASSERT_EQ(refund(hold_id, {{"reason", "x"}, {"request_id", unique("rf")}}).status, 200u);
  EXPECT_EQ(metric("tollgate_refunds_total"), refunds + 2);
  EXPECT_EQ(metric("tollgate_refunded_credits_total"), credits + 8);
}

}  // namespace
}  // namespace tollgate::httptest
