// Keys with scopes and expiry over HTTP (api.md "Keys with scopes"), end to end on a real server:
// every route of the route table against a key of each scope — allowed, or 403 naming the scope it
// needs (generated from http::routes(), so a route added later is covered by adding it); creating
// keys with scopes, a name and an expiry, and the bad input that stores nothing; a read key that
// sees its account and cannot reserve; an admin:read key that reads everything and changes
// nothing; an expired key refused with 401 even while this instance has it cached.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/scopes.h"
#include "http/http_test_support.h"
#include "http/routes.h"

namespace tollgate::httptest {
namespace {

using ::testing::HasSubstr;

class HttpScopes : public ServerSuite<HttpScopes> {
 protected:
  // A new key: POST body `body` to `target`; its secret (the test fails without one).
  std::string new_key(const std::string& target, const json::object& body) {
    const HttpResponse r = admin().post(target, body);
    EXPECT_EQ(r.status, 201u) << target << " " << r;
    return r.status == 201 ? jstr(r.object(), "secret") : std::string();
  }
  std::string account_key(const std::string& account, std::vector<std::string> scopes) {
    json::array names(scopes.begin(), scopes.end());
    return new_key("/v1/accounts/" + account + "/keys", json::object{{"scopes", names}});
  }
  std::string admin_key(const std::string& scope) {
    return new_key("/v1/keys", json::object{{"scopes", json::array{json::string(scope)}}});
  }
  std::size_t key_count() {
    const HttpResponse r = admin().get("/v1/keys?limit=100");
    EXPECT_EQ(r.status, 200u) << r;
    return r.object().at("keys").as_array().size();
  }
};

// The route's path with every {parameter} filled: the account's id for {account_id}, "x" elsewhere.
std::string path_of(const http::Route& route, const std::string& account) {
  std::string path = route.pattern;
  for (std::size_t open = path.find('{'); open != std::string::npos; open = path.find('{')) {
    const std::size_t close = path.find('}', open);
    const std::string name = path.substr(open + 1, close - open - 1);
    path.replace(open, close - open + 1, name == "account_id" ? account : "x");
  }
  return path;
}

TEST_F(HttpScopes, EveryRouteAllowsTheScopesThatGrantItAndRefusesOthersWith403NamingTheScope) {
  const std::string account = make_account(5);
  struct Caller {
    std::string what;
    ScopeSet scopes;
    std::string secret;
  };
  std::vector<Caller> callers{
      {"account key [read]", ScopeSet{Scope::read}, account_key(account, {"read"})},
      {"account key [holds:write]", ScopeSet{Scope::holds_write}, account_key(account, {"holds:write"})},
      {"account key [jobs:write]", ScopeSet{Scope::jobs_write}, account_key(account, {"jobs:write"})},
      {"admin key [admin:read]", ScopeSet{Scope::admin_read}, admin_key("admin:read")},
      {"admin key [admin]", ScopeSet{Scope::admin}, admin_key("admin")},
  };
  int checked = 0, refused = 0;
  for (const http::Route& route : http::routes()) {
    if (route.need.kind == http::Need::open) continue;  // no key asked: its handler checks what it needs
    const std::string path = path_of(route, account);
    const std::string body = std::string(route.method) == "GET" || std::string(route.method) == "DELETE" ? "" : "{}";
    for (const Caller& caller : callers) {
      HttpClient client(port(), caller.secret);
      const HttpResponse r = client.request(route.method, path, body, body.empty() ? std::map<std::string, std::string>{}
                                                                                    : std::map<std::string, std::string>{{"Content-Type", "application/json"}});
      const std::string where = http::route_template(route) + " with an " + caller.what + ": " + r.body;
      ASSERT_NE(r.status, 401u) << where;
      const bool granted = route.need.kind == http::Need::any_key || scope_grants(caller.scopes, route.need.scope);
      if (granted) {
        EXPECT_NE(r.status, 403u) << where;
      } else {
        ++refused;
        ASSERT_TRUE(is_problem(r, 403, "forbidden")) << where;
        EXPECT_EQ(jstr(r.object(), "missing_scope"), scope_name(route.need.scope)) << where;
        EXPECT_THAT(jstr(r.object(), "detail"), HasSubstr("needs the scope " + std::string(scope_name(route.need.scope))))
            << where;
      }
      ++checked;
    }
  }
  EXPECT_GT(refused, 100) << "most of " << checked << " calls are outside one scope or another";
  // Whatever the admin key (and, for its reads, the admin:read key) was let through changed only
  // what a {} body can change — nothing here: the account is as it was.
  EXPECT_EQ(jint(get_account(account), "available"), 5);
}

TEST_F(HttpScopes, AReadKeySeesItsAccountAndCannotReserveOrSeeAnother) {
  const std::string mine = make_account(10);
  const std::string other = make_account(10);
  HttpClient screen(port(), account_key(mine, {"read"}));
  EXPECT_EQ(screen.get("/v1/accounts/" + mine).status, 200u);
  EXPECT_EQ(screen.get("/v1/accounts/" + mine + "/events").status, 200u);
  EXPECT_TRUE(is_problem(screen.get("/v1/accounts/" + other), 404, "not_found"));
  const HttpResponse reserve =
      screen.post("/v1/holds", json::object{{"account_id", mine}, {"amount", 1}, {"request_id", unique("r")}});
  ASSERT_TRUE(is_problem(reserve, 403, "forbidden")) << reserve;
  EXPECT_EQ(jstr(reserve.object(), "missing_scope"), "holds:write");
  EXPECT_EQ(jint(get_account(mine), "available"), 10);
  EXPECT_EQ(jint(get_account(mine), "reserved"), 0);
  // And the key says what it is.
  const HttpResponse me = screen.get("/v1/key");
  ASSERT_EQ(me.status, 200u) << me;
  EXPECT_EQ(me.object().at("scopes"), (json::array{"read"}));
  EXPECT_EQ(jstr(me.object(), "account_id"), mine);
}

TEST_F(HttpScopes, AnAdminReadKeyReadsEverythingAndChangesNothing) {
  const std::string account = make_account(7);
  HttpClient looker(port(), admin_key("admin:read"));
  EXPECT_EQ(looker.get("/v1/accounts").status, 200u);
  EXPECT_EQ(looker.get("/v1/accounts/" + account).status, 200u);
  EXPECT_EQ(looker.get("/v1/keys").status, 200u);
  EXPECT_EQ(looker.get("/v1/audit?account_id=" + account).status, 200u);
  const HttpResponse credit =
      looker.post("/v1/accounts/" + account + "/credits", json::object{{"amount", 5}, {"reference", unique("c")}});
  ASSERT_TRUE(is_problem(credit, 403, "forbidden")) << credit;
  EXPECT_EQ(jstr(credit.object(), "missing_scope"), "admin");
  const HttpResponse key = looker.post("/v1/keys", json::object{{"scopes", json::array{"admin"}}});
  ASSERT_TRUE(is_problem(key, 403, "forbidden")) << "an admin:read key cannot make itself an admin key";
  EXPECT_EQ(jint(get_account(account), "available"), 7);
}

TEST_F(HttpScopes, AKeyWithoutScopesHasAllThreeAccountScopesAsBefore) {
  const std::string account = make_account(3);
  const HttpResponse created = admin().post("/v1/accounts/" + account + "/keys", "");
  ASSERT_EQ(created.status, 201u) << created;
  EXPECT_EQ(created.object().at("scopes"), (json::array{"holds:write", "jobs:write", "read"}));
  EXPECT_TRUE(created.object().at("expires_at").is_null());
  HttpClient kiosk(port(), jstr(created.object(), "secret"));
  const HttpResponse hold =
      kiosk.post("/v1/holds", json::object{{"account_id", account}, {"amount", 1}, {"request_id", unique("r")}});
  EXPECT_EQ(hold.status, 201u) << hold;
}

TEST_F(HttpScopes, KeysCarryANameAndAnExpiryAndAreListedWithThem) {
  const std::string account = make_account(0);
  const std::string expires_at = format_rfc3339_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                       std::chrono::system_clock::now().time_since_epoch())
                                                       .count() +
                                                   86'400'000);
  const HttpResponse created = admin().post(
      "/v1/accounts/" + account + "/keys",
      json::object{{"scopes", json::array{"read", "holds:write"}}, {"name", "kiosk 3 screen"}, {"expires_at", expires_at}});
  ASSERT_EQ(created.status, 201u) << created;
  EXPECT_EQ(created.object().at("scopes"), (json::array{"holds:write", "read"}));
  EXPECT_EQ(jstr(created.object(), "name"), "kiosk 3 screen");
  EXPECT_EQ(jstr(created.object(), "expires_at"), expires_at);
  const HttpResponse listed = admin().get("/v1/keys?account_id=" + account);
  ASSERT_EQ(listed.status, 200u) << listed;
  const auto& key = listed.object().at("keys").as_array().at(0).as_object();
  EXPECT_EQ(jstr(key, "key_id"), jstr(created.object(), "key_id"));
  EXPECT_EQ(key.at("scopes"), (json::array{"holds:write", "read"}));
  EXPECT_EQ(jstr(key, "name"), "kiosk 3 screen");
  EXPECT_EQ(jstr(key, "expires_at"), expires_at);
}

TEST_F(HttpScopes, BadKeyRequestsAreRefusedByNameAndStoreNothing) {
  const std::string account = make_account(0);
  const std::string keys = "/v1/accounts/" + account + "/keys";
  const std::size_t before = key_count();
  struct Case {
    std::string target;
    std::string body;
    std::string detail;
  };
  const std::vector<Case> cases{
      {keys, R"({"scopes":["reed"]})", R"(unknown scope "reed"; did you mean "read"?)"},
      {keys, R"({"scopes":["holds:wrte"]})", R"(did you mean "holds:write"?)"},
      {keys, R"({"scopes":[]})", "at least one scope"},
      {keys, R"({"scopes":["read","read"]})", "twice"},
      {keys, R"({"scopes":"read"})", "scopes must be an array"},
      {keys, R"({"scopes":["admin"]})", "admin and admin:read are for admin keys"},
      {keys, R"({"scopes":["read","admin:read"]})", "admin and admin:read are for admin keys"},
      {keys, R"({"expires_at":"2020-01-01T00:00:00Z"})", "expires_at must be in the future"},
      {keys, R"({"expires_at":"tomorrow"})", "expires_at must be an RFC 3339 date-time"},
      {keys, R"({"expires_at":"2030-01-01"})", "expires_at must be an RFC 3339 date-time"},
      {keys, R"({"name":""})", "name must not be empty"},
      {keys, R"({"name":")" + std::string(101, 'n') + R"("})", "name must be at most 100 bytes"},
      {"/v1/keys", R"({})", "scopes is required"},
      {"/v1/keys", R"({"scopes":["read"]})", "holds:write, jobs:write and read are for account keys"},
      {"/v1/keys", R"({"scopes":["admin","admin:read"]})", R"(["admin"] or ["admin:read"])"},
      {"/v1/keys", R"({"scopes":["admni"]})", R"(did you mean "admin"?)"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = admin().post(c.target, c.body, {{"Content-Type", "application/json"}});
    ASSERT_TRUE(is_problem(r, 400, "invalid_request")) << c.target << " " << c.body << ": " << r;
    EXPECT_THAT(jstr(r.object(), "detail"), HasSubstr(c.detail)) << c.body;
  }
  EXPECT_TRUE(is_problem(admin().post("/v1/accounts/nobody-here/keys", "{}"), 404, "not_found"));
  EXPECT_EQ(key_count(), before) << "a refused key was stored";
}

TEST_F(HttpScopes, AnExpiredKeyIs401EvenWhileCached) {
  const std::string account = make_account(2);
  const std::int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  const std::int64_t expires_at_ms = now_ms + 1'500;
  const std::string secret = new_key("/v1/accounts/" + account + "/keys",
                                     json::object{{"expires_at", format_rfc3339_ms(expires_at_ms)}});
  HttpClient kiosk(port(), secret);
  ASSERT_EQ(kiosk.get("/v1/accounts/" + account).status, 200u);  // found in the database, now cached
  // Keep it in the cache (each use within the cache's second), up to the expiry and past it.
  HttpResponse last;
  for (int i = 0; i < 40; ++i) {
    last = kiosk.get("/v1/accounts/" + account);
    if (last.status == 401) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(is_problem(last, 401, "unauthorized")) << last;
  EXPECT_THAT(jstr(last.object(), "detail"), HasSubstr("expired at " + format_rfc3339_ms(expires_at_ms)));
  const std::int64_t refused_at_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GE(refused_at_ms, expires_at_ms - 50) << "refused before it expired (clocks of one machine)";
  EXPECT_EQ(kiosk.get("/v1/key").status, 401u);
}

}  // namespace
}  // namespace tollgate::httptest
