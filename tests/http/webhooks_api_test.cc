// Webhook endpoints over HTTP, end to end: a real tollgate process (SQLite, or PostgreSQL in the
// HttpSuitesOnPostgres run) — every route of api.md's "Webhooks" table (register,
// list, read, change, delete, rotate the secret), admin only, the secret shown by the create and the
// rotation and by nothing else, bad input refused by name with nothing stored, and the limit.
// Their deliveries and replay: bad input refused by name (delivery itself: tests/webhooks).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/limits.h"
#include "http_test_support.h"
#include "webhooks/signature.h"

namespace tollgate::httptest {
namespace {

class HttpWebhooks : public ServerSuite<HttpWebhooks> {
 protected:
  json::object create(json::object body) {
    const HttpResponse r = admin().post("/v1/webhook-endpoints", body);
    EXPECT_EQ(r.status, 201u) << r;
    return r.object();
  }
  std::string endpoints_body() {
    const HttpResponse r = admin().get("/v1/webhook-endpoints?limit=1000");
    EXPECT_EQ(r.status, 200u) << r;
    return r.body;
  }
  void delete_all() {
    const HttpResponse r = admin().get("/v1/webhook-endpoints?limit=1000");
    ASSERT_EQ(r.status, 200u) << r;
    for (const auto& e : r.object().at("endpoints").as_array()) {
      const std::string id(e.as_object().at("endpoint_id").as_string());
      EXPECT_EQ(admin().del("/v1/webhook-endpoints/" + id).status, 200u);
    }
  }
};

TEST_F(HttpWebhooks, AnEndpointIsRegisteredWithASecretShownOnceThenReadChangedAndDeleted) {
  const std::string account = make_account(0);
  const json::object made = create(json::object{{"url", "https://hooks.example/tollgate"},
                                                {"event_types", json::array{"balance_low", "balance_depleted"}},
                                                {"account_id", account},
                                                {"description", "tell the kiosk owner"}});
  const std::string id = jstr(made, "endpoint_id");
  EXPECT_EQ(id.substr(0, 3), "we_");
  EXPECT_EQ(jstr(made, "url"), "https://hooks.example/tollgate");
  EXPECT_EQ(made.at("event_types"), (json::array{"balance_low", "balance_depleted"}));
  EXPECT_EQ(jstr(made, "account_id"), account);
  EXPECT_EQ(jstr(made, "status"), "enabled");
  EXPECT_EQ(jstr(made, "description"), "tell the kiosk owner");
  const std::string secret = jstr(made, "secret");
  ASSERT_EQ(secret.substr(0, 6), "whsec_");
  EXPECT_EQ(webhooks::secret_key(secret)->size(), limits::kWebhookSecretBytes);

  // Reads never show a secret.
  const HttpResponse one = admin().get("/v1/webhook-endpoints/" + id);
  ASSERT_EQ(one.status, 200u) << one;
  EXPECT_FALSE(one.object().contains("secret"));
  EXPECT_EQ(one.body.find("whsec_"), std::string::npos) << one.body;
  json::object without_secret = made;
  without_secret.erase("secret");
  EXPECT_EQ(one.object(), without_secret);
  const HttpResponse list = admin().get("/v1/webhook-endpoints");
  ASSERT_EQ(list.status, 200u) << list;
  EXPECT_EQ(list.body.find("whsec_"), std::string::npos);
  bool listed = false;
  for (const auto& e : list.object().at("endpoints").as_array()) listed |= jstr(e.as_object(), "endpoint_id") == id;
  EXPECT_TRUE(listed);
  EXPECT_FALSE(list.object().at("has_more").as_bool());

  // PATCH changes what it names; null event_types means every type again.
  const HttpResponse disabled = admin().request("PATCH", "/v1/webhook-endpoints/" + id,
                                                R"({"status":"disabled","url":"http://10.0.0.7:9000/in"})");
  ASSERT_EQ(disabled.status, 200u) << disabled;
  EXPECT_EQ(jstr(disabled.object(), "status"), "disabled");
  EXPECT_EQ(jstr(disabled.object(), "url"), "http://10.0.0.7:9000/in");
  EXPECT_EQ(disabled.object().at("event_types"), made.at("event_types"));
  EXPECT_FALSE(disabled.object().contains("secret"));
  const HttpResponse all_types =
      admin().request("PATCH", "/v1/webhook-endpoints/" + id, R"({"event_types":null,"status":"enabled"})");
  ASSERT_EQ(all_types.status, 200u) << all_types;
  EXPECT_TRUE(all_types.object().at("event_types").is_null());
  EXPECT_EQ(jstr(all_types.object(), "status"), "enabled");

  // DELETE: 200, then it is gone.
  const HttpResponse deleted = admin().del("/v1/webhook-endpoints/" + id);
  ASSERT_EQ(deleted.status, 200u) << deleted;
  EXPECT_EQ(jstr(deleted.object(), "endpoint_id"), id);
  EXPECT_TRUE(deleted.object().at("deleted").as_bool());
  EXPECT_TRUE(is_problem(admin().get("/v1/webhook-endpoints/" + id), 404, "not_found"));
  EXPECT_TRUE(is_problem(admin().del("/v1/webhook-endpoints/" + id), 404, "not_found"));
}

TEST_F(HttpWebhooks, RotatingGivesANewSecretAndTheOldOneSignsBesideItUntilItsTime) {
  const json::object made = create(json::object{{"url", "https://hooks.example/r"}});
  const std::string id = jstr(made, "endpoint_id");
  EXPECT_TRUE(made.at("event_types").is_null());
  EXPECT_TRUE(made.at("account_id").is_null());
  EXPECT_TRUE(made.at("previous_secret_expires_at").is_null());
  const HttpResponse rotated = admin().post("/v1/webhook-endpoints/" + id + "/rotate-secret", "");
  ASSERT_EQ(rotated.status, 200u) << rotated;
  const std::string secret = jstr(rotated.object(), "secret");
  EXPECT_EQ(secret.substr(0, 6), "whsec_");
  EXPECT_NE(secret, jstr(made, "secret"));
  EXPECT_FALSE(jstr(rotated.object(), "previous_secret_expires_at").empty());
  const HttpResponse read = admin().get("/v1/webhook-endpoints/" + id);
  EXPECT_EQ(jstr(read.object(), "previous_secret_expires_at"), jstr(rotated.object(), "previous_secret_expires_at"));
  EXPECT_EQ(read.body.find("whsec_"), std::string::npos);
  EXPECT_TRUE(is_problem(admin().post("/v1/webhook-endpoints/we_0000000000000000/rotate-secret", ""), 404, "not_found"));
}

TEST_F(HttpWebhooks, OnlyAnAdminKeyMayTouchThem) {
  const std::string account = make_account(0);
  const HttpResponse key = admin().post("/v1/accounts/" + account + "/keys", json::object{});
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient client(port(), jstr(key.object(), "secret"));
  EXPECT_TRUE(is_problem(client.get("/v1/webhook-endpoints"), 403, "forbidden"));
  EXPECT_TRUE(is_problem(client.post("/v1/webhook-endpoints", json::object{{"url", "https://h.example/"}}), 403,
                         "forbidden"));
  EXPECT_TRUE(is_problem(client.del("/v1/webhook-endpoints/we_0000000000000000"), 403, "forbidden"));
  HttpClient nobody(port());
  EXPECT_TRUE(is_problem(nobody.get("/v1/webhook-endpoints"), 401, "unauthorized"));
}

TEST_F(HttpWebhooks, BadInputIsRefusedNamingTheFieldAndNothingIsStored) {
  const std::string before = endpoints_body();
  struct Case {
    std::string method, target, body;
    unsigned status;
    std::string code, names;  // `names`: a word the detail must carry
  };
  const std::string missing = "/v1/webhook-endpoints/we_0000000000000000";
  const std::vector<Case> cases{
      {"POST", "/v1/webhook-endpoints", R"({"url":"ftp://h.example/"})", 400, "invalid_request", "url"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"not a url"})", 400, "invalid_request", "url"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://"})", 400, "invalid_request", "url"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/)" + std::string(2100, 'a') + R"("})", 400,
       "invalid_request", "url"},
      {"POST", "/v1/webhook-endpoints", R"({"url":1})", 400, "invalid_request", "url"},
      {"POST", "/v1/webhook-endpoints", R"({})", 400, "invalid_request", "url"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/","event_types":["balance_lo"]})", 400,
       "invalid_request", "did you mean balance_low"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/","event_types":[]})", 400, "invalid_request",
       "event_types"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/","event_types":["credited","credited"]})", 400,
       "invalid_request", "twice"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/","event_types":"credited"})", 400,
       "invalid_request", "event_types"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/","event_types":[1]})", 400, "invalid_request",
       "event_types"},
      {"POST", "/v1/webhook-endpoints",
       R"({"url":"https://h.example/","description":")" + std::string(limits::kWebhookDescriptionBytesMax + 1, 'd') + R"("})",
       400, "invalid_request", "description"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/","account_id":"no-such-account"})", 404,
       "not_found", "no-such-account"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/","account_id":"a b"})", 400, "invalid_request",
       "account_id"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/","secret":"whsec_mine"})", 400,
       "invalid_request", "secret"},
      {"POST", "/v1/webhook-endpoints", R"({"url":"https://h.example/")", 400, "invalid_request", "JSON"},
      {"PATCH", missing, R"({"status":"paused"})", 400, "invalid_request", "status"},
      {"PATCH", missing, R"({"url":"gopher://x"})", 400, "invalid_request", "url"},
      {"PATCH", missing, R"({"event_types":["nope"]})", 400, "invalid_request", "event_types"},
      {"PATCH", missing, R"({"account_id":"x"})", 400, "invalid_request", "account_id"},
      {"PATCH", missing, R"({"status":"disabled"})", 404, "not_found", "we_0000000000000000"},
      {"GET", missing, "", 404, "not_found", "we_0000000000000000"},
      {"GET", "/v1/webhook-endpoints?limit=0", "", 400, "invalid_request", "limit"},
      {"GET", "/v1/webhook-endpoints?starting_after=we_0000000000000000", "", 400, "invalid_request", ""},
      {"GET", "/v1/webhook-endpoints?colour=red", "", 400, "invalid_request", "colour"},
      {"DELETE", missing, "", 404, "not_found", "we_0000000000000000"},
      {"POST", missing + "/rotate-secret", R"({"x":1})", 400, "invalid_request", "x"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = admin().request(c.method, c.target, c.body);
    EXPECT_TRUE(is_problem(r, c.status, c.code)) << c.method << " " << c.target << " " << c.body.substr(0, 120);
    if (r.status >= 400 && !c.names.empty()) {
      EXPECT_NE(r.body.find(c.names), std::string::npos) << r.body << " should name " << c.names;
    }
  }
  EXPECT_EQ(endpoints_body(), before) << "a refused request changed the endpoints";
}

// The two routes of delivery: GET …/deliveries and POST …/replay refuse bad input by name, an
// unknown endpoint with 404, and a refused replay changes nothing (the endpoint's cursor stays).
TEST_F(HttpWebhooks, BadInputToDeliveriesAndReplayIsRefusedByNameAndChangesNothing) {
  const json::object made = create(json::object{{"url", "https://hooks.example/deliveries"}});
  const std::string id = jstr(made, "endpoint_id");
  const std::string path = "/v1/webhook-endpoints/" + id;
  const HttpResponse before = admin().get(path);
  ASSERT_EQ(before.status, 200u) << before;
  const HttpResponse none = admin().get(path + "/deliveries");
  ASSERT_EQ(none.status, 200u) << none;
  EXPECT_EQ(none.object().at("deliveries").as_array().size(), 0u);
  struct Case {
    std::string method, target, body;
    unsigned status;
    std::string code, names;  // `names`: a word the detail must carry
  };
  const std::string missing = "/v1/webhook-endpoints/we_0000000000000000";
  const std::vector<Case> cases{
      {"GET", path + "/deliveries?status=bogus", "", 400, "invalid_request", "status"},
      {"GET", path + "/deliveries?limit=0", "", 400, "invalid_request", "limit"},
      {"GET", path + "/deliveries?limit=x", "", 400, "invalid_request", "limit"},
      {"GET", path + "/deliveries?starting_after=garbage", "", 400, "invalid_request", "garbage"},
      {"GET", path + "/deliveries?starting_after=evt_12345", "", 400, "invalid_request", "evt_12345"},
      {"GET", path + "/deliveries?colour=red", "", 400, "invalid_request", "colour"},
      {"GET", missing + "/deliveries", "", 404, "not_found", "we_0000000000000000"},
      {"GET", "/v1/webhook-endpoints/a%20b/deliveries", "", 400, "invalid_request", "endpoint_id"},
      {"POST", path + "/replay", R"({"after":-1})", 400, "invalid_request", "after"},
      {"POST", path + "/replay", R"({"after":"x"})", 400, "invalid_request", "after"},
      {"POST", path + "/replay", R"({"after":1.5})", 400, "invalid_request", "after"},
      {"POST", path + "/replay", R"({})", 400, "invalid_request", "after"},
      {"POST", path + "/replay", "", 400, "invalid_request", ""},
      {"POST", path + "/replay", R"({"after":0,"colour":"red"})", 400, "invalid_request", "colour"},
      {"POST", path + "/replay", R"({"after":0)", 400, "invalid_request", "JSON"},
      {"POST", missing + "/replay", R"({"after":0})", 404, "not_found", "we_0000000000000000"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = admin().request(c.method, c.target, c.body);
    EXPECT_TRUE(is_problem(r, c.status, c.code)) << c.method << " " << c.target << " " << c.body << ": " << r;
    if (r.status >= 400 && !c.names.empty()) {
      EXPECT_NE(r.body.find(c.names), std::string::npos) << r.body << " should name " << c.names;
    }
  }
  const HttpResponse after = admin().get(path);
  ASSERT_EQ(after.status, 200u) << after;
  EXPECT_EQ(after.body, before.body) << "a refused request changed the endpoint";
  // And a good replay is accepted (202) with the endpoint as it is now (from its own cursor: no event
  // is sent again).
  const HttpResponse replay = admin().post(path + "/replay", json::object{{"after", before.object().at("delivery_cursor")}});
  EXPECT_EQ(replay.status, 202u) << replay;
  EXPECT_EQ(jstr(replay.object(), "endpoint_id"), id);
}

TEST_F(HttpWebhooks, AtMostTheLimitOfEndpointsAreKept) {
  delete_all();
  std::vector<std::string> ids;
  for (std::int64_t i = 0; i < limits::kWebhookEndpointsMax; ++i) {
    ids.push_back(jstr(create(json::object{{"url", "https://h.example/" + std::to_string(i)}}), "endpoint_id"));
  }
  const std::string before = endpoints_body();
  const HttpResponse refused = admin().post("/v1/webhook-endpoints", json::object{{"url", "https://h.example/x"}});
  EXPECT_TRUE(is_problem(refused, 400, "invalid_request"));
  EXPECT_NE(refused.body.find(std::to_string(limits::kWebhookEndpointsMax)), std::string::npos) << refused.body;
  EXPECT_EQ(endpoints_body(), before);
  // Paged in the order they were made.
  std::vector<std::string> listed;
  std::string after;
  for (;;) {
    const HttpResponse page = admin().get("/v1/webhook-endpoints?limit=30" + (after.empty() ? "" : "&starting_after=" + after));
    ASSERT_EQ(page.status, 200u) << page;
    for (const auto& e : page.object().at("endpoints").as_array()) listed.push_back(jstr(e.as_object(), "endpoint_id"));
    if (!page.object().at("has_more").as_bool()) break;
    after = listed.back();
  }
  EXPECT_EQ(std::set<std::string>(listed.begin(), listed.end()), std::set<std::string>(ids.begin(), ids.end()));
  EXPECT_EQ(listed.size(), ids.size());
  delete_all();
}

}  // namespace
}  // namespace tollgate::httptest
