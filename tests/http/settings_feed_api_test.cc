// Over HTTP, against the real server process: PATCH /v1/accounts/{id} (overdraft_limit,
// max_active_holds, frozen, low_balance_threshold; account_updated events), balance notices
// (docs/api.md "Balance notices"), 409 account_frozen, the release reason on
// the hold and its event, the kiosk's two insufficient_credits messages, and the change feed
// GET /v1/events?after=&limit=&wait_ms=.
//
// One `tollgate serve` per suite (SQLite, or PostgreSQL with TOLLGATE_TEST_HTTP_BACKEND=postgres).
// Tests run one after another; a feed test starts from the feed's end as it finds it. Time bounds
// are hang detectors, never performance goals.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

using Steady = std::chrono::steady_clock;

class HttpSettingsAndFeed : public ServerSuite<HttpSettingsAndFeed> {
 protected:
  HttpResponse patch(const std::string& account, const json::object& body) {
    return admin().request("PATCH", "/v1/accounts/" + account, json::serialize(body));
  }
  std::vector<json::object> events_of(const std::string& account) {
    const HttpResponse r = admin().get("/v1/accounts/" + account + "/events?limit=1000");
    EXPECT_EQ(r.status, 200u) << r;
    std::vector<json::object> out;
    if (r.status != 200) return out;
    for (const auto& e : r.object().at("events").as_array()) out.push_back(e.as_object());
    return out;
  }
  // The feed's end now: follow it from 0 to where it stops.
  std::int64_t feed_end() {
    std::int64_t after = 0;
    for (;;) {
      const HttpResponse r = admin().get("/v1/events?limit=1000&after=" + std::to_string(after));
      EXPECT_EQ(r.status, 200u) << r;
      if (r.status != 200 || r.object().at("events").as_array().empty()) return after;
      after = jint(r.object(), "next_after");
    }
  }
};

// --- PATCH ----------------------------------------------------------------------------------------

TEST_F(HttpSettingsAndFeed, PatchChangesEachSettingAndRecordsAnAccountUpdatedEvent) {
  const std::string id = make_account(5);
  EXPECT_EQ(get_account(id).at("frozen"), false);

  HttpResponse r = patch(id, {{"overdraft_limit", 10}});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(jint(r.object(), "overdraft_limit"), 10);
  json::object e = events_of(id).back();
  EXPECT_EQ(jstr(e, "type"), "account_updated");
  EXPECT_EQ(jint(e, "amount"), 0);
  EXPECT_EQ(jint(e, "available_after"), 5);
  EXPECT_EQ(e.at("settings"), (json::value(json::object{{"overdraft_limit", 10}, {"max_active_holds", nullptr},
                                                        {"frozen", false}, {"low_balance_threshold", nullptr}})));

  r = patch(id, {{"max_active_holds", 2}});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(jint(r.object(), "max_active_holds"), 2);
  r = patch(id, {{"max_active_holds", nullptr}});  // null: no limit
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.object().at("max_active_holds").is_null());

  r = patch(id, {{"frozen", true}});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.object().at("frozen"), true);
  EXPECT_EQ(get_account(id).at("frozen"), true);
  e = events_of(id).back();
  EXPECT_EQ(e.at("settings"), (json::value(json::object{{"overdraft_limit", 10}, {"max_active_holds", nullptr},
                                                        {"frozen", true}, {"low_balance_threshold", nullptr}})));
  EXPECT_EQ(events_of(id).size(), 5u);  // the credit and four changes
}

TEST_F(HttpSettingsAndFeed, APatchThatChangesNothingIs200AndWritesNoEvent) {
  const std::string id = make_account(5, {{"overdraft_limit", 3}});
  const json::object before = account_state(id);
  const std::size_t events = events_of(id).size();
  for (const json::object& body : {json::object{}, json::object{{"overdraft_limit", 3}},
                                   json::object{{"frozen", false}, {"max_active_holds", nullptr}}}) {
    const HttpResponse r = patch(id, body);
    ASSERT_EQ(r.status, 200u) << r;
  }
  EXPECT_EQ(account_state(id), before);
  EXPECT_EQ(events_of(id).size(), events);
}

TEST_F(HttpSettingsAndFeed, LoweringTheOverdraftBelowWhatIsOverdrawnIs409ConflictAndChangesNothing) {
  const std::string id = make_account(2, {{"overdraft_limit", 10}});
  make_hold(id, 9);  // available -7
  const json::object before = account_state(id);
  const HttpResponse r = patch(id, {{"overdraft_limit", 6}});
  ASSERT_TRUE(is_problem(r, 409, "conflict")) << r;
  EXPECT_NE(jstr(r.object(), "detail").find("overdrawn by 7"), std::string::npos) << r;
  EXPECT_EQ(account_state(id), before);
  EXPECT_EQ(patch(id, {{"overdraft_limit", 7}}).status, 200u);
}

TEST_F(HttpSettingsAndFeed, BadPatchesAre400AndOnlyTheAdminMayPatch) {
  const std::string id = make_account(0);
  EXPECT_TRUE(is_problem(patch(id, {{"frozen", "yes"}}), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(patch(id, {{"overdraft_limit", -1}}), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(patch(id, {{"max_active_holds", 0}}), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(patch(id, {{"frozn", true}}), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(patch(unique("ghost"), {{"frozen", true}}), 404, "not_found"));
  const HttpResponse key = admin().post("/v1/accounts/" + id + "/keys", json::object{});
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient kiosk(port(), jstr(key.object(), "secret"));
  EXPECT_TRUE(is_problem(kiosk.request("PATCH", "/v1/accounts/" + id, R"({"frozen":true})"), 403, "forbidden"));
  EXPECT_EQ(get_account(id).at("frozen"), false);
}

// --- balance notices --------------------------------------------------------------------------------

std::vector<std::string> types_of(const std::vector<json::object>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(std::string(jstr(e, "type")));
  return out;
}

TEST_F(HttpSettingsAndFeed, ALowBalanceThresholdIsShownAndItsCrossingsAreEventsOfTheMovement) {
  const std::string id = make_account(10);
  EXPECT_TRUE(get_account(id).at("low_balance_threshold").is_null());  // none until set
  HttpResponse r = patch(id, {{"low_balance_threshold", 5}});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(jint(r.object(), "low_balance_threshold"), 5);
  EXPECT_EQ(jint(get_account(id), "low_balance_threshold"), 5);
  EXPECT_EQ(events_of(id).back().at("settings").as_object().at("low_balance_threshold"), 5);

  // 10 → 0: the debit, then balance_low and balance_depleted with its balances and no amount.
  ASSERT_EQ(admin().post("/v1/accounts/" + id + "/debits",
                         json::object{{"amount", 10}, {"reference", unique("all")}, {"reason", "test"}}).status, 201u);
  std::vector<json::object> events = events_of(id);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(types_of(std::vector<json::object>(events.end() - 3, events.end())),
            (std::vector<std::string>{"debited", "balance_low", "balance_depleted"}));
  for (auto e = events.end() - 2; e != events.end(); ++e) {
    EXPECT_EQ(jint(*e, "amount"), 0);
    EXPECT_EQ(jint(*e, "available_after"), 0);
    EXPECT_FALSE(e->contains("hold_id"));
    EXPECT_GT(jint(*e, "event_id"), jint(*(e - 1), "event_id"));
  }
  // A credit back to 7 (at least 5 again) recovers.
  ASSERT_EQ(admin().post("/v1/accounts/" + id + "/credits", json::object{{"amount", 7}, {"reference", unique("back")}}).status,
            201u);
  events = events_of(id);
  EXPECT_EQ(types_of(std::vector<json::object>(events.end() - 2, events.end())),
            (std::vector<std::string>{"credited", "balance_recovered"}));
  // The notices are in the change feed too, in commit order.
  const HttpResponse feed = admin().get("/v1/events?limit=1000&after=" + std::to_string(jint(events.front(), "event_id") - 1));
  ASSERT_EQ(feed.status, 200u) << feed;
  std::vector<std::string> feed_types;
  for (const auto& e : feed.object().at("events").as_array()) {
    if (jstr(e.as_object(), "account_id") == id) feed_types.push_back(std::string(jstr(e.as_object(), "type")));
  }
  EXPECT_EQ(feed_types, types_of(events));
}

TEST_F(HttpSettingsAndFeed, SettingAThresholdAlreadyCrossedWritesNoNoticeAndNullTurnsNoticesOff) {
  const std::string id = make_account(3);
  ASSERT_EQ(patch(id, {{"low_balance_threshold", 5}}).status, 200u);
  EXPECT_EQ(types_of(events_of(id)), (std::vector<std::string>{"credited", "account_updated"}));
  const HttpResponse off = patch(id, {{"low_balance_threshold", nullptr}});
  ASSERT_EQ(off.status, 200u) << off;
  EXPECT_TRUE(off.object().at("low_balance_threshold").is_null());
  make_hold(id, 3);  // 3 → 0: no threshold, no notice
  EXPECT_EQ(types_of(events_of(id)), (std::vector<std::string>{"credited", "account_updated", "account_updated", "reserved"}));
}

TEST_F(HttpSettingsAndFeed, ABadThresholdIs400NamingItAndChangesNothing) {
  const std::string id = make_account(10);
  ASSERT_EQ(patch(id, {{"low_balance_threshold", 4}}).status, 200u);
  const json::object before = account_state(id);
  const std::size_t events = events_of(id).size();
  for (const std::string value : {"0", "-3", "9007199254740992", "1e20", "2.5", "\"5\"", "true", "{}"}) {
    const HttpResponse r =
        admin().request("PATCH", "/v1/accounts/" + id, R"({"frozen":true,"low_balance_threshold":)" + value + "}");
    EXPECT_TRUE(is_problem(r, 400, "invalid_request")) << value << ": " << r;
    EXPECT_NE(r.body.find("low_balance_threshold"), std::string::npos) << value << ": " << r;
  }
  EXPECT_EQ(account_state(id), before);
  EXPECT_EQ(jint(get_account(id), "low_balance_threshold"), 4);
  EXPECT_EQ(events_of(id).size(), events);
}

TEST_F(HttpSettingsAndFeed, AFrozenAccountRefusesHoldsAndDebitsWith409WhileItsHoldsStillEnd) {
  const std::string id = make_account(20);
  const json::object a = make_hold(id, 3);
  const json::object b = make_hold(id, 4);
  ASSERT_EQ(patch(id, {{"frozen", true}}).status, 200u);
  const HttpResponse refused = admin().post("/v1/holds", json::object{{"account_id", id}, {"amount", 1},
                                                                     {"request_id", unique("req")}});
  ASSERT_TRUE(is_problem(refused, 409, "account_frozen")) << refused;
  EXPECT_NE(jstr(refused.object(), "detail").find("frozen"), std::string::npos);
  EXPECT_TRUE(is_problem(admin().post("/v1/accounts/" + id + "/debits",
                                      json::object{{"amount", 1}, {"reference", unique("d")}, {"reason", "refund"}}),
                         409, "account_frozen"));
  EXPECT_EQ(admin().post("/v1/accounts/" + id + "/credits", json::object{{"amount", 1}, {"reference", unique("c")}}).status,
            201u);
  EXPECT_EQ(admin().post("/v1/holds/" + jstr(a, "hold_id") + "/commit", json::object{}).status, 200u);
  EXPECT_EQ(admin().post("/v1/holds/" + jstr(b, "hold_id") + "/release", json::object{}).status, 200u);
  EXPECT_EQ(jint(get_account(id), "available"), 20 + 1 - 3);
}

// --- the release reason, the kiosk's messages ---------------------------------------------------

TEST_F(HttpSettingsAndFeed, TheReleaseReasonIsShownOnTheHoldAndOnItsEvent) {
  const std::string id = make_account(10);
  const std::string hold_id = jstr(make_hold(id, 2), "hold_id");
  const HttpResponse r =
      admin().post("/v1/holds/" + hold_id + "/release", json::object{{"reason", "the kiosk was closed"}});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(jstr(r.object(), "release_reason"), "the kiosk was closed");
  EXPECT_EQ(jstr(admin().get("/v1/holds/" + hold_id).object(), "release_reason"), "the kiosk was closed");
  const json::object e = events_of(id).back();
  EXPECT_EQ(jstr(e, "type"), "released");
  EXPECT_EQ(jstr(e, "reason"), "the kiosk was closed");
  // Without a reason: neither has one.
  const std::string other = jstr(make_hold(id, 1), "hold_id");
  const HttpResponse plain = admin().post("/v1/holds/" + other + "/release", json::object{});
  ASSERT_EQ(plain.status, 200u) << plain;
  EXPECT_FALSE(plain.object().contains("release_reason"));
  EXPECT_FALSE(events_of(id).back().contains("reason"));
}

// The extended event carries the hold's new deadline (api.md): the hold's expires_at after each
// extend, in the account's events and in the feed; no other event has one.
TEST_F(HttpSettingsAndFeed, AnExtendedEventCarriesTheHoldsNewExpiresAt) {
  const std::string id = make_account(10);
  const std::string hold_id = jstr(make_hold(id, 2), "hold_id");
  const std::int64_t feed_before = feed_end();
  for (const std::int64_t ttl_ms : {600'000, 1'200'000}) {
    const HttpResponse r = admin().post("/v1/holds/" + hold_id + "/extend", json::object{{"ttl_ms", ttl_ms}});
    ASSERT_EQ(r.status, 200u) << r;
    const std::string held_expires_at = jstr(admin().get("/v1/holds/" + hold_id).object(), "expires_at");
    EXPECT_EQ(jstr(r.object(), "expires_at"), held_expires_at);
    const json::object e = events_of(id).back();
    EXPECT_EQ(jstr(e, "type"), "extended") << json::serialize(e);
    EXPECT_EQ(jstr(e, "hold_id"), hold_id);
    EXPECT_EQ(jint(e, "amount"), 0);
    EXPECT_EQ(jstr(e, "expires_at"), held_expires_at) << json::serialize(e);
  }
  const HttpResponse feed = admin().get("/v1/events?limit=1000&after=" + std::to_string(feed_before));
  ASSERT_EQ(feed.status, 200u) << feed;
  int extended = 0;
  for (const auto& v : feed.object().at("events").as_array()) {
    const json::object& e = v.as_object();
    if (jstr(e, "type") != "extended") {
      EXPECT_FALSE(e.contains("expires_at")) << json::serialize(e);
      continue;
    }
    if (jstr(e, "hold_id") == hold_id) ++extended;
    EXPECT_TRUE(e.contains("expires_at")) << json::serialize(e);
  }
  EXPECT_EQ(extended, 2);
  for (const json::object& e : events_of(id)) {
    if (jstr(e, "type") != "extended") {
      EXPECT_FALSE(e.contains("expires_at")) << json::serialize(e);
    }
  }
}

TEST_F(HttpSettingsAndFeed, TheKioskDetailSaysWhetherAnythingIsAvailable) {
  const std::string id = make_account(3);
  HttpResponse r = admin().post("/v1/holds", json::object{{"account_id", id}, {"amount", 5}, {"request_id", unique("r")}});
  ASSERT_TRUE(is_problem(r, 409, "insufficient_credits")) << r;
  EXPECT_EQ(jstr(r.object(), "detail"), "Not enough credits: 3 available, 5 needed.");
  make_hold(id, 3);
  r = admin().post("/v1/holds", json::object{{"account_id", id}, {"amount", 1}, {"request_id", unique("r")}});
  ASSERT_TRUE(is_problem(r, 409, "insufficient_credits")) << r;
  EXPECT_EQ(jstr(r.object(), "detail"), "No credits available. Another device may be using this account right now.");
}

// --- the change feed ------------------------------------------------------------------------------

TEST_F(HttpSettingsAndFeed, TheFeedPagesEveryAccountsEventsInCommitOrder) {
  const std::int64_t start = feed_end();
  const std::string a = make_account(10);
  const std::string b = make_account(20);
  make_hold(a, 1);
  ASSERT_EQ(patch(b, {{"frozen", true}}).status, 200u);
  std::vector<std::pair<std::string, std::string>> seen;  // (account, type)
  std::int64_t after = start;
  for (int page = 0; page < 10; ++page) {
    const HttpResponse r = admin().get("/v1/events?limit=2&after=" + std::to_string(after));
    ASSERT_EQ(r.status, 200u) << r;
    const json::array& events = r.object().at("events").as_array();
    EXPECT_LE(events.size(), 2u);
    if (events.empty()) {
      EXPECT_EQ(jint(r.object(), "next_after"), after);
      break;
    }
    for (const auto& e : events) {
      EXPECT_GT(jint(e.as_object(), "event_id"), after);
      after = jint(e.as_object(), "event_id");
      seen.emplace_back(jstr(e.as_object(), "account_id"), jstr(e.as_object(), "type"));
    }
    EXPECT_EQ(jint(r.object(), "next_after"), after);
  }
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, std::string>>{
                      {a, "credited"}, {b, "credited"}, {a, "reserved"}, {b, "account_updated"}}));
}

TEST_F(HttpSettingsAndFeed, AWaitingFeedReadAnswersAsSoonAsSomethingIsCommitted) {
  const std::string id = make_account(0);
  const std::int64_t start = feed_end();
  HttpResponse waited;
  const auto began = Steady::now();
  std::thread follower([&] {
    HttpClient client(port(), kAdminKey, std::chrono::seconds(40));
    waited = client.get("/v1/events?wait_ms=30000&after=" + std::to_string(start));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // most likely waiting by now; either way correct
  ASSERT_EQ(admin().post("/v1/accounts/" + id + "/credits", json::object{{"amount", 4}, {"reference", unique("c")}}).status,
            201u);
  follower.join();
  ASSERT_EQ(waited.status, 200u) << waited;
  const json::array& events = waited.object().at("events").as_array();
  ASSERT_EQ(events.size(), 1u) << waited;
  EXPECT_EQ(jint(events[0].as_object(), "amount"), 4);
  EXPECT_LT(Steady::now() - began, std::chrono::seconds(30)) << "answered at its deadline, not at the commit";
}

TEST_F(HttpSettingsAndFeed, AWaitingFeedReadWithNothingNewAnswersEmptyAtItsDeadline) {
  const std::int64_t start = feed_end();
  const auto began = Steady::now();
  const HttpResponse r = admin().get("/v1/events?wait_ms=300&after=" + std::to_string(start));
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_TRUE(r.object().at("events").as_array().empty());
  EXPECT_EQ(jint(r.object(), "next_after"), start);
  EXPECT_GE(Steady::now() - began, std::chrono::milliseconds(300));
  EXPECT_TRUE(admin().get("/healthz").status == 200u);
}

TEST_F(HttpSettingsAndFeed, AfterLatestStartsAtTheHeadAndWaitsOnlyForWhatComesNext) {
  const std::string id = make_account(7);  // an event already there: latest must not answer it
  const HttpResponse head = admin().get("/v1/events?after=latest");
  ASSERT_EQ(head.status, 200u) << head;
  EXPECT_TRUE(head.object().at("events").as_array().empty()) << head;
  EXPECT_EQ(jint(head.object(), "next_after"), feed_end());
  // Waiting from the head: the next commit, and only it, comes back.
  HttpResponse waited;
  std::thread follower([&] {
    HttpClient client(port(), kAdminKey, std::chrono::seconds(40));
    waited = client.get("/v1/events?after=latest&wait_ms=30000");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(admin().post("/v1/accounts/" + id + "/credits", json::object{{"amount", 3}, {"reference", unique("c")}}).status,
            201u);
  follower.join();
  ASSERT_EQ(waited.status, 200u) << waited;
  const json::array& events = waited.object().at("events").as_array();
  ASSERT_EQ(events.size(), 1u) << waited;
  EXPECT_EQ(jstr(events[0].as_object(), "account_id"), id);
  EXPECT_EQ(jint(events[0].as_object(), "amount"), 3);
  EXPECT_EQ(jint(waited.object(), "next_after"), jint(events[0].as_object(), "event_id"));
  const HttpResponse bad = admin().get("/v1/events?after=newest");
  ASSERT_TRUE(is_problem(bad, 400, "invalid_request")) << bad;
  EXPECT_NE(jstr(bad.object(), "detail").find("or latest"), std::string::npos) << bad;
}

TEST_F(HttpSettingsAndFeed, TheFeedIsForTheAdminAndRefusesBadParameters) {
  EXPECT_TRUE(is_problem(admin().get("/v1/events?wait_ms=60001"), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin().get("/v1/events?limit=0"), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin().get("/v1/events?after=-1"), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin().get("/v1/events?since=3"), 400, "invalid_request"));
  const std::string id = make_account(0);
  const HttpResponse key = admin().post("/v1/accounts/" + id + "/keys", json::object{});
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient kiosk(port(), jstr(key.object(), "secret"));
  EXPECT_TRUE(is_problem(kiosk.get("/v1/events"), 403, "forbidden"));
  EXPECT_TRUE(is_problem(HttpClient(port()).get("/v1/events"), 401, "unauthorized"));
}

}  // namespace
}  // namespace tollgate::httptest
