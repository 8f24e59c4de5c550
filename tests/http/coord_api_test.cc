// Locks, idempotency keys and rate limits over HTTP, end to end: a real tollgate process (SQLite, or
// PostgreSQL in the HttpSuitesOnPostgres run) with shared and local policies in its configuration —
// the contract of api.md's three sections, bad input refused by name with nothing changed, admin
// only, the decisions in /metrics — and, on PostgreSQL, three instances on one database: 20
// concurrent acquires make one holder, racing begins start one claim, 30 attempts at a shared
// policy of 5 admit exactly 5, fences increase across instances.
#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <functional>
#include <algorithm>
#include <latch>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_test_support.h"
#include "support/backends.h"

namespace tollgate::httptest {
namespace {

constexpr const char* kPolicies = R"(reaper_interval_ms = 200
[ratelimits.login]
limit = 5
period_ms = 60000
store = "shared"

[ratelimits.cheap]
limit = 3
period_ms = 60000
store = "local"

[ratelimits.small_table]
limit = 3
period_ms = 60000
store = "local"
keys_max = 4
)";

std::string write_config(const testing::TempDir& dir) {
  const std::string path = dir.file("tollgate.toml");
  std::ofstream(path) << kPolicies;
  return path;
}

std::string unique(std::string_view prefix) {
  static std::atomic<int> next{0};
  return std::string(prefix) + "-" + std::to_string(++next) + "-" + std::to_string(::getpid());
}

json::object lock_body(const std::string& owner, std::int64_t ttl_ms) {
  return json::object{{"owner", owner}, {"ttl_ms", ttl_ms}};
}

class HttpCoord : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    ServerOptions options = server_options();
    options.extra_args = {"--config", write_config(*dir_)};
    if (http_suites_on_postgres()) {
      const auto uri = testing::postgres_server_uri();
      if (!uri) {
        if (testing::postgres_required()) FAIL() << "TOLLGATE_REQUIRE_POSTGRES=1 but no TOLLGATE_TEST_POSTGRES";
        skip_ = true;
        return;
      }
      schema_ = new testing::PgSchema(*uri);
      options.database = schema_->uri();
    }
    try {
      server_ = new ServerProcess(options);
    } catch (const std::exception& e) {
      FAIL() << "the server did not start: " << e.what();
    }
    ASSERT_EQ(wait_until_ready(server_->port()).status, 200u) << server_->log();
  }

  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->stop(SIGTERM), 0) << server_->log();
      delete server_;
      server_ = nullptr;
    }
    delete schema_;
    schema_ = nullptr;
    delete dir_;
    dir_ = nullptr;
    skip_ = false;
  }

 protected:
  void SetUp() override {
    if (skip_) GTEST_SKIP() << "no PostgreSQL server";
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->running()) << server_->log();
    admin_ = std::make_unique<HttpClient>(server_->port(), kAdminKey);
  }

  HttpClient& admin() { return *admin_; }
  HttpResponse lock_call(const std::string& key, const std::string& op, const json::object& body) {
    return admin().post("/v1/locks/" + key + "/" + op, body);
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline testing::PgSchema* schema_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  static inline bool skip_ = false;
  std::unique_ptr<HttpClient> admin_;
};

TEST_F(HttpCoord, ALockIsHeldByOneOwnerRenewedWithItsFenceCancelledAndFreedAtTheNextRenew) {
  const std::string key = unique("gen-user");
  const HttpResponse got = lock_call(key, "acquire", lock_body("stream-1", 30'000));
  ASSERT_EQ(got.status, 200u) << got;
  EXPECT_EQ(jstr(got.object(), "key"), key);
  EXPECT_EQ(jstr(got.object(), "owner"), "stream-1");
  const std::int64_t fence = jint(got.object(), "fence");
  EXPECT_GE(fence, 1);
  EXPECT_FALSE(jstr(got.object(), "expires_at").empty());

  const HttpResponse held = lock_call(key, "acquire", lock_body("stream-2", 30'000));
  EXPECT_TRUE(is_problem(held, 409, "lock_held"));
  EXPECT_EQ(jstr(held.object(), "expires_at"), jstr(got.object(), "expires_at"));

  json::object renew = lock_body("stream-1", 30'000);
  renew["fence"] = fence;
  const HttpResponse renewed = lock_call(key, "renew", renew);
  ASSERT_EQ(renewed.status, 200u) << renewed;
  EXPECT_EQ(jint(renewed.object(), "fence"), fence);

  const HttpResponse cancelled = admin().post("/v1/locks/" + key + "/cancel", "");
  ASSERT_EQ(cancelled.status, 200u) << cancelled;
  EXPECT_TRUE(cancelled.object().at("cancelled").as_bool());
  EXPECT_TRUE(is_problem(lock_call(key, "renew", renew), 409, "lock_cancelled"));

  const HttpResponse read = admin().get("/v1/locks/" + key);
  ASSERT_EQ(read.status, 200u) << read;
  EXPECT_TRUE(read.object().at("owner").is_null());
  EXPECT_FALSE(read.object().at("held").as_bool());
  const HttpResponse next = lock_call(key, "acquire", lock_body("stream-2", 30'000));
  ASSERT_EQ(next.status, 200u) << next;
  EXPECT_EQ(jint(next.object(), "fence"), fence + 1);
  EXPECT_TRUE(is_problem(admin().get("/v1/locks/" + unique("never")), 404, "not_found"));
}

TEST_F(HttpCoord, AHolderWhoseLeaseRanOutIsToldItLostTheLockAndCannotTouchItsSuccessor) {
  const std::string key = unique("lease");
  const HttpResponse first = lock_call(key, "acquire", lock_body("w1", 150));
  ASSERT_EQ(first.status, 200u) << first;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const HttpResponse second = lock_call(key, "acquire", lock_body("w2", 30'000));
  ASSERT_EQ(second.status, 200u) << second;
  EXPECT_GT(jint(second.object(), "fence"), jint(first.object(), "fence"));

  json::object old = lock_body("w1", 30'000);
  old["fence"] = jint(first.object(), "fence");
  EXPECT_TRUE(is_problem(lock_call(key, "renew", old), 409, "lock_lost"));
  old.erase("ttl_ms");
  EXPECT_TRUE(is_problem(lock_call(key, "release", old), 409, "lock_lost"));
  const HttpResponse read = admin().get("/v1/locks/" + key);
  EXPECT_EQ(jstr(read.object(), "owner"), "w2");
  EXPECT_EQ(jstr(read.object(), "expires_at"), jstr(second.object(), "expires_at"));
}

TEST_F(HttpCoord, AnIdempotencyKeyStartsOnceIsInProgressThenReplaysItsStoredResponse) {
  const std::string key = unique("upgrade");
  const json::object begin{{"fingerprint", "plan=pro;user=42"}, {"ttl_ms", 30'000}};
  const HttpResponse started = admin().post("/v1/idempotency/" + key + "/begin", begin);
  ASSERT_EQ(started.status, 201u) << started;
  EXPECT_EQ(jstr(started.object(), "state"), "started");
  EXPECT_EQ(jint(started.object(), "attempt"), 1);
  EXPECT_FALSE(started.object().at("resumed").as_bool());

  const HttpResponse again = admin().post("/v1/idempotency/" + key + "/begin", begin);
  EXPECT_TRUE(is_problem(again, 409, "in_progress"));
  EXPECT_FALSE(jstr(again.object(), "expires_at").empty());
  const HttpResponse other = admin().post("/v1/idempotency/" + key + "/begin",
                                          json::object{{"fingerprint", "plan=max;user=42"}, {"ttl_ms", 30'000}});
  EXPECT_TRUE(is_problem(other, 422, "idempotency_mismatch"));

  const json::object charge{{"charge_id", "ch_1"}, {"amount", 300}};
  EXPECT_TRUE(is_problem(admin().post("/v1/idempotency/" + key + "/finish",
                                      json::object{{"fingerprint", "plan=pro;user=42"}, {"response", charge}, {"attempt", 2}}),
                         409, "conflict"))
      << "attempt 2 never claimed it";
  const HttpResponse finished = admin().post("/v1/idempotency/" + key + "/finish",
                                             json::object{{"fingerprint", "plan=pro;user=42"}, {"response", charge}, {"attempt", 1}});
  ASSERT_EQ(finished.status, 200u) << finished;
  const HttpResponse replay = admin().post("/v1/idempotency/" + key + "/begin", begin);
  ASSERT_EQ(replay.status, 200u) << replay;
  EXPECT_EQ(jstr(replay.object(), "state"), "finished");
  EXPECT_EQ(replay.object().at("response").as_object(), charge);
  EXPECT_TRUE(is_problem(admin().post("/v1/idempotency/" + key + "/abandon",
                                      json::object{{"fingerprint", "plan=pro;user=42"}}),
                         409, "conflict"));
}

TEST_F(HttpCoord, AbandonGivesAKeyBackAfterAFailureThatChargedNothing) {
  const std::string key = unique("upgrade");
  const json::object begin{{"fingerprint", "f"}, {"ttl_ms", 30'000}};
  ASSERT_EQ(admin().post("/v1/idempotency/" + key + "/begin", begin).status, 201u);
  const HttpResponse abandoned =
      admin().post("/v1/idempotency/" + key + "/abandon", json::object{{"fingerprint", "f"}});
  ASSERT_EQ(abandoned.status, 200u) << abandoned;
  EXPECT_EQ(jstr(abandoned.object(), "state"), "abandoned");
  const HttpResponse again = admin().post("/v1/idempotency/" + key + "/begin", begin);
  ASSERT_EQ(again.status, 201u) << again;
  EXPECT_EQ(jint(again.object(), "attempt"), 2);
  EXPECT_FALSE(again.object().at("resumed").as_bool());
}

TEST_F(HttpCoord, FinishAndAbandonOfAKeyNeverBegunAreBothNotFoundAndCreateNothing) {
  const std::string key = unique("never-begun");
  const json::object finish{{"fingerprint", "f"}, {"response", 1}};
  EXPECT_TRUE(is_problem(admin().post("/v1/idempotency/" + key + "/finish", finish), 404, "not_found"));
  const HttpResponse abandoned = admin().post("/v1/idempotency/" + key + "/abandon", json::object{{"fingerprint", "f"}});
  EXPECT_TRUE(is_problem(abandoned, 404, "not_found")) << abandoned;
  // Nothing was recorded: the first begin is attempt 1.
  const HttpResponse begun =
      admin().post("/v1/idempotency/" + key + "/begin", json::object{{"fingerprint", "f"}, {"ttl_ms", 30'000}});
  ASSERT_EQ(begun.status, 201u) << begun;
  EXPECT_EQ(jint(begun.object(), "attempt"), 1);
}

TEST_F(HttpCoord, ABeginAfterAClaimRanOutIsAResumedNewAttemptAndTheOldOneCannotFinish) {
  const std::string key = unique("upgrade");
  ASSERT_EQ(admin().post("/v1/idempotency/" + key + "/begin", json::object{{"fingerprint", "f"}, {"ttl_ms", 100}}).status,
            201u);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const HttpResponse resumed =
      admin().post("/v1/idempotency/" + key + "/begin", json::object{{"fingerprint", "f"}, {"ttl_ms", 30'000}});
  ASSERT_EQ(resumed.status, 201u) << resumed;
  EXPECT_EQ(jint(resumed.object(), "attempt"), 2);
  EXPECT_TRUE(resumed.object().at("resumed").as_bool()) << "the first attempt may have done the side effect";
  EXPECT_TRUE(is_problem(admin().post("/v1/idempotency/" + key + "/abandon", json::object{{"fingerprint", "f"}, {"attempt", 1}}),
                         409, "conflict"));
  EXPECT_EQ(admin().post("/v1/idempotency/" + key + "/finish",
                         json::object{{"fingerprint", "f"}, {"response", 1}, {"attempt", 2}})
                .status,
            200u);
}

TEST_F(HttpCoord, ASharedPolicyRefusesPastItsLimitWithRetryAfterAndResetGivesTheBudgetBack) {
  const std::string key = unique("account");
  for (int i = 1; i <= 5; ++i) {
    const HttpResponse r = admin().post("/v1/ratelimits/login/check", json::object{{"key", key}});
    ASSERT_EQ(r.status, 200u) << r;
    EXPECT_TRUE(r.object().at("allowed").as_bool());
    EXPECT_EQ(jint(r.object(), "remaining"), 5 - i);
    // Each unit is 60 s / 5; the server's clock moves a few ms between the checks.
    EXPECT_LE(jint(r.object(), "reset_after_ms"), 12'000 * i);
    EXPECT_GT(jint(r.object(), "reset_after_ms"), 12'000 * i - 1'000);
  }
  const HttpResponse refused = admin().post("/v1/ratelimits/login/check", json::object{{"key", key}});
  ASSERT_TRUE(is_problem(refused, 429, "rate_limited"));
  const std::int64_t retry_ms = jint(refused.object(), "retry_after_ms");
  EXPECT_GT(retry_ms, 11'000);
  EXPECT_LE(retry_ms, 12'000);
  EXPECT_EQ(refused.header("Retry-After"), std::to_string((retry_ms + 999) / 1000));

  ASSERT_EQ(admin().post("/v1/ratelimits/login/reset", json::object{{"key", key}}).status, 200u);
  const HttpResponse after = admin().post("/v1/ratelimits/login/check", json::object{{"key", key}, {"cost", 5}});
  ASSERT_EQ(after.status, 200u) << after;
  EXPECT_EQ(jint(after.object(), "remaining"), 0);
}

TEST_F(HttpCoord, ALocalPolicyCountsInTheInstancesMemoryWithTheSameAnswers) {
  const std::string key = unique("ip");
  const HttpResponse two = admin().post("/v1/ratelimits/cheap/check", json::object{{"key", key}, {"cost", 2}});
  ASSERT_EQ(two.status, 200u) << two;
  EXPECT_EQ(jint(two.object(), "remaining"), 1);
  EXPECT_TRUE(is_problem(admin().post("/v1/ratelimits/cheap/check", json::object{{"key", key}, {"cost", 2}}), 429,
                         "rate_limited"));
  ASSERT_EQ(admin().post("/v1/ratelimits/cheap/reset", json::object{{"key", key}}).status, 200u);
  EXPECT_EQ(admin().post("/v1/ratelimits/cheap/check", json::object{{"key", key}, {"cost", 3}}).status, 200u);
  EXPECT_TRUE(is_problem(admin().post("/v1/ratelimits/nope/check", json::object{{"key", key}}), 404, "not_found"));
}

TEST_F(HttpCoord, ALocalPolicyKeepsAtMostKeysMaxKeysForgettingTheLeastRecentlyChecked) {
  auto check = [&](const std::string& key) {
    return admin().post("/v1/ratelimits/small_table/check", json::object{{"key", key}}).status;
  };
  auto table_size = [&]() -> double {
    const HttpResponse m = admin().get("/metrics");
    const std::string series = R"(tollgate_ratelimit_local_keys{policy="small_table"} )";
    const auto at = m.body.find(series);
    return at == std::string::npos ? -1 : std::stod(m.body.substr(at + series.size()));
  };
  const std::string spent = unique("spent");
  for (int i = 0; i < 3; ++i) ASSERT_EQ(check(spent), 200u);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(check(unique("other")), 200u);  // four keys: the table's bound
  EXPECT_EQ(check(spent), 429u) << "within keys_max the spent budget is remembered";
  EXPECT_EQ(table_size(), 4);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(check(unique("flood")), 200u);
  EXPECT_EQ(table_size(), 4) << "twenty more keys: the table stays at keys_max";
  EXPECT_EQ(check(spent), 200u) << "the least recently checked key was forgotten: the price of a bounded table";
}

TEST_F(HttpCoord, BadInputIsRefusedByNameAndChangesNothing) {
  const std::string key = unique("bad");
  const HttpResponse got = lock_call(key, "acquire", lock_body("w1", 30'000));
  ASSERT_EQ(got.status, 200u) << got;
  const std::string base = "/v1/locks/" + key;
  struct Case {
    std::string target, body, field;  // `field`: named in the detail
  };
  const std::vector<Case> cases = {
      {base + "/acquire", "{not json", "JSON"},
      {base + "/acquire", R"({"owner":"w2","ttl_ms":1000,"extra":1})", "extra"},
      {base + "/acquire", R"({"owner":"w2","ttl_ms":"1000"})", "ttl_ms"},
      {base + "/acquire", R"({"owner":"w2","ttl_ms":0})", "ttl_ms"},
      {base + "/acquire", R"({"owner":"w2","ttl_ms":-5})", "ttl_ms"},
      {base + "/acquire", R"({"owner":"w2","ttl_ms":9007199254740993})", "ttl_ms"},
      {base + "/acquire", R"({"ttl_ms":1000})", "owner"},
      {base + "/acquire", R"({"owner":"w 2","ttl_ms":1000})", "owner"},
      {base + "/renew", R"({"owner":"w1","ttl_ms":1000,"fence":0})", "fence"},
      {base + "/release", R"({"owner":"w1","fence":1.5})", "fence"},
      {"/v1/locks/bad%20key/acquire", R"({"owner":"w1","ttl_ms":1000})", "key"},
      {"/v1/idempotency/" + key + "/begin", R"({"ttl_ms":1000})", "fingerprint"},
      {"/v1/idempotency/" + key + "/begin", R"({"fingerprint":"f"})", "ttl_ms"},
      {"/v1/idempotency/" + key + "/finish", R"({"fingerprint":"f"})", "response"},
      {"/v1/ratelimits/login/check", R"({"key":"k","cost":0})", "cost"},
      {"/v1/ratelimits/login/check", R"({"key":"k","cost":6})", "cost"},
      {"/v1/ratelimits/login/check", R"({"cost":1})", "key"},
      {"/v1/ratelimits/login/check", R"([1,2])", "object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.target + " " + c.body);
    const HttpResponse r = admin().post(c.target, c.body);
    EXPECT_TRUE(is_problem(r, 400, "invalid_request"));
    EXPECT_NE(jstr(r.object(), "detail").find(c.field), std::string::npos) << r;
  }
  const HttpResponse read = admin().get(base);
  EXPECT_EQ(jstr(read.object(), "owner"), "w1");
  EXPECT_EQ(jint(read.object(), "fence"), jint(got.object(), "fence"));
  EXPECT_EQ(jstr(read.object(), "expires_at"), jstr(got.object(), "expires_at"));
  // Nothing of the refused checks spent "k"'s budget.
  const HttpResponse k = admin().post("/v1/ratelimits/login/check", json::object{{"key", "k"}, {"cost", 5}});
  EXPECT_EQ(k.status, 200u) << k;
}

TEST_F(HttpCoord, TheyAreAdminCallsAccountKeysAreForbiddenAndNoKeyIsUnauthorized) {
  const std::string account = unique("acct");
  ASSERT_EQ(admin().post("/v1/accounts", json::object{{"account_id", account}}).status, 201u);
  const HttpResponse key = admin().post("/v1/accounts/" + account + "/keys", "");
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient kiosk(server_->port(), jstr(key.object(), "secret"));
  HttpClient nobody(server_->port());
  const std::string lock = unique("lock");
  const std::vector<std::pair<std::string, std::string>> calls = {
      {"/v1/locks/" + lock + "/acquire", R"({"owner":"w","ttl_ms":1000})"},
      {"/v1/locks/" + lock + "/cancel", ""},
      {"/v1/idempotency/" + lock + "/begin", R"({"fingerprint":"f","ttl_ms":1000})"},
      {"/v1/ratelimits/login/check", R"({"key":"k"})"},
  };
  for (const auto& [target, body] : calls) {
    SCOPED_TRACE(target);
    EXPECT_TRUE(is_problem(kiosk.post(target, body), 403, "forbidden"));
    EXPECT_TRUE(is_problem(nobody.post(target, body), 401, "unauthorized"));
  }
  EXPECT_TRUE(is_problem(kiosk.get("/v1/locks/" + lock), 403, "forbidden"));
  EXPECT_TRUE(is_problem(admin().get("/v1/locks/" + lock), 404, "not_found")) << "nothing was acquired";
}

TEST_F(HttpCoord, LocksAreListedByKeyInPagesWithOwnerFenceAndLeaseLeft) {
  const std::string prefix = unique("list");
  const std::string a = prefix + "-a", b = prefix + "-b", c = prefix + "-c";
  for (const std::string& key : {c, a, b}) {
    ASSERT_EQ(lock_call(key, "acquire", lock_body("owner-" + key, 30'000)).status, 200u);
  }
  ASSERT_EQ(lock_call(b, "release", json::object{{"owner", "owner-" + b}}).status, 200u);
  // Page through every lock, two at a time (other tests' locks are there too): each once, by key.
  std::vector<json::object> mine;
  std::vector<std::string> keys;
  std::string cursor;
  for (int pages = 0; pages < 1000; ++pages) {
    const HttpResponse r = admin().get("/v1/locks?limit=2" + (cursor.empty() ? "" : "&starting_after=" + cursor));
    ASSERT_EQ(r.status, 200u) << r;
    const json::array& page = r.object().at("locks").as_array();
    ASSERT_LE(page.size(), 2u);
    for (const auto& l : page) {
      keys.push_back(jstr(l.as_object(), "key"));
      if (keys.back().rfind(prefix, 0) == 0) mine.push_back(l.as_object());
    }
    if (!r.object().at("has_more").as_bool()) break;
    cursor = keys.back();
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end()) << "a key twice";
  ASSERT_EQ(mine.size(), 3u);
  EXPECT_EQ(jstr(mine[0], "key"), a);
  EXPECT_EQ(jstr(mine[0], "owner"), "owner-" + a);
  EXPECT_GE(jint(mine[0], "fence"), 1);
  EXPECT_TRUE(mine[0].at("held").as_bool());
  const std::int64_t left = jint(mine[0], "lease_left_ms");
  EXPECT_GT(left, 20'000);
  EXPECT_LE(left, 30'000);
  EXPECT_EQ(jstr(mine[1], "key"), b);
  EXPECT_TRUE(mine[1].at("owner").is_null());
  EXPECT_FALSE(mine[1].at("held").as_bool());
  EXPECT_TRUE(mine[1].at("lease_left_ms").is_null());
  EXPECT_EQ(jstr(mine[2], "key"), c);
  // held=true: the released one is left out; a single lock's read agrees.
  const HttpResponse held = admin().get("/v1/locks?held=true&limit=1000");
  ASSERT_EQ(held.status, 200u) << held;
  std::vector<std::string> held_mine;
  for (const auto& l : held.object().at("locks").as_array()) {
    if (jstr(l.as_object(), "key").rfind(prefix, 0) == 0) held_mine.push_back(jstr(l.as_object(), "key"));
  }
  EXPECT_EQ(held_mine, (std::vector<std::string>{a, c}));
  const HttpResponse one = admin().get("/v1/locks/" + a);
  ASSERT_EQ(one.status, 200u) << one;
  EXPECT_LE(jint(one.object(), "lease_left_ms"), left);
  // Bad parameters are refused by name.
  EXPECT_TRUE(is_problem(admin().get("/v1/locks?starting_after=" + unique("never")), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin().get("/v1/locks?held=yes"), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin().get("/v1/locks?limit=0"), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin().get("/v1/locks?owner=x"), 400, "invalid_request"));
}

TEST_F(HttpCoord, RateLimitPoliciesAreListedWithTheirParametersAndThisInstancesDecisions) {
  auto policies = [&] {
    const HttpResponse r = admin().get("/v1/ratelimits");
    EXPECT_EQ(r.status, 200u) << r;
    std::map<std::string, json::object> out;
    if (r.status != 200) return out;
    for (const auto& p : r.object().at("policies").as_array()) out[jstr(p.as_object(), "policy")] = p.as_object();
    return out;
  };
  const auto before = policies();
  ASSERT_EQ(before.size(), 3u);
  const json::object& login = before.at("login");
  EXPECT_EQ(jint(login, "limit"), 5);
  EXPECT_EQ(jint(login, "period_ms"), 60'000);
  EXPECT_EQ(jstr(login, "store"), "shared");
  EXPECT_TRUE(login.at("local_keys").is_null());
  EXPECT_EQ(jstr(before.at("cheap"), "store"), "local");
  EXPECT_EQ(jint(before.at("small_table"), "limit"), 3);
  // One check admitted and one refused on a local policy: its counters move by one each.
  const std::string key = unique("who");
  for (int i = 0; i < 4; ++i) admin().post("/v1/ratelimits/cheap/check", json::object{{"key", key}});
  const auto after = policies();
  EXPECT_EQ(jint(after.at("cheap"), "allowed"), jint(before.at("cheap"), "allowed") + 3);
  EXPECT_EQ(jint(after.at("cheap"), "limited"), jint(before.at("cheap"), "limited") + 1);
  EXPECT_GE(jint(after.at("cheap"), "local_keys"), 1);
  EXPECT_TRUE(is_problem(admin().get("/v1/ratelimits?policy=login"), 400, "invalid_request"));
  HttpClient nobody(server_->port());
  EXPECT_TRUE(is_problem(nobody.get("/v1/ratelimits"), 401, "unauthorized"));
  EXPECT_TRUE(is_problem(nobody.get("/v1/locks"), 401, "unauthorized"));
}

TEST_F(HttpCoord, TwentyConcurrentAcquiresOverHttpMakeExactlyOneHolder) {
  const std::string key = unique("one");
  constexpr int kClients = 20;
  std::latch go(kClients);
  std::atomic<int> ok{0}, held{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      HttpClient c(server_->port(), kAdminKey);
      c.connect();
      go.arrive_and_wait();
      const HttpResponse r = c.post("/v1/locks/" + key + "/acquire", lock_body("c" + std::to_string(i), 30'000));
      if (r.status == 200) ok.fetch_add(1);
      else if (r.status == 409 && r.code() == "lock_held") held.fetch_add(1);
      else other.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(held.load(), kClients - 1);
  EXPECT_EQ(other.load(), 0);
}

TEST_F(HttpCoord, MetricsCountDecisionsByOutcomeAndPolicyNeverByKey) {
  const std::string key = unique("metric-key");
  ASSERT_EQ(lock_call(key, "acquire", lock_body("m1", 30'000)).status, 200u);
  ASSERT_EQ(lock_call(key, "acquire", lock_body("m2", 30'000)).status, 409u);
  ASSERT_EQ(admin().post("/v1/ratelimits/cheap/check", json::object{{"key", key}}).status, 200u);
  const HttpResponse m = admin().get("/metrics");
  ASSERT_EQ(m.status, 200u);
  auto value_of = [&](const std::string& series) -> double {
    const auto at = m.body.find(series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(m.body.substr(at + series.size() + 1));
  };
  EXPECT_GE(value_of(R"(tollgate_lock_decisions_total{outcome="acquired"})"), 1);
  EXPECT_GE(value_of(R"(tollgate_lock_decisions_total{outcome="held"})"), 1);
  EXPECT_GE(value_of(R"(tollgate_ratelimit_decisions_total{policy="cheap",store="local",decision="allowed"})"), 1);
  EXPECT_GE(value_of(R"(tollgate_ratelimit_local_keys{policy="cheap"})"), 1);
  EXPECT_EQ(m.body.find(key), std::string::npos) << "a key is never a label";
}

// --- three instances on one PostgreSQL database -------------------------------------------------

class HttpCoordInstances : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_POSTGRES(server);
    schema_ = std::make_unique<testing::PgSchema>(server);
    for (int i = 0; i < 3; ++i) {
      ServerOptions options = server_options();
      options.database = schema_->uri();
      options.extra_args = {"--config", write_config(dir_)};
      options.start_timeout = std::chrono::milliseconds(30'000);
      instances_.push_back(std::make_unique<ServerProcess>(options));
      ASSERT_EQ(wait_until_ready(instances_.back()->port()).status, 200u) << instances_.back()->log();
    }
  }
  void TearDown() override {
    for (auto& s : instances_) EXPECT_EQ(s->stop(SIGTERM), 0) << s->log();
    instances_.clear();
    schema_.reset();
  }

  // `count` clients, spread over the instances in turn, each sending `request(i)` at the same moment.
  std::vector<HttpResponse> at_once(int count, const std::function<HttpResponse(HttpClient&, int)>& request) {
    std::vector<HttpResponse> out(count);
    std::latch go(count);
    std::vector<std::thread> threads;
    for (int i = 0; i < count; ++i) {
      threads.emplace_back([&, i] {
        HttpClient c(instances_[i % instances_.size()]->port(), kAdminKey);
        c.connect();
        go.arrive_and_wait();
        out[i] = request(c, i);
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::PgSchema> schema_;
  std::vector<std::unique_ptr<ServerProcess>> instances_;
};

TEST_F(HttpCoordInstances, TwentyConcurrentAcquiresOverThreeInstancesMakeExactlyOneHolder) {
  const auto answers = at_once(20, [](HttpClient& c, int i) {
    return c.post("/v1/locks/shared-key/acquire", lock_body("owner-" + std::to_string(i), 30'000));
  });
  int ok = 0, held = 0;
  for (const auto& r : answers) {
    if (r.status == 200) ++ok;
    else if (r.status == 409 && r.code() == "lock_held") ++held;
    else ADD_FAILURE() << r;
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(held, 19);
}

TEST_F(HttpCoordInstances, FencesIncreaseOverHoldersOnDifferentInstances) {
  std::int64_t last = 0;
  for (int round = 0; round < 6; ++round) {
    HttpClient c(instances_[round % 3]->port(), kAdminKey);
    const std::string owner = "holder-" + std::to_string(round);
    const HttpResponse got = c.post("/v1/locks/relay/acquire", lock_body(owner, 30'000));
    ASSERT_EQ(got.status, 200u) << got;
    ASSERT_GT(jint(got.object(), "fence"), last);
    last = jint(got.object(), "fence");
    HttpClient next(instances_[(round + 1) % 3]->port(), kAdminKey);
    const HttpResponse released =
        next.post("/v1/locks/relay/release", json::object{{"owner", owner}, {"fence", last}});
    ASSERT_EQ(released.status, 200u) << released;
  }
}

TEST_F(HttpCoordInstances, RacingBeginsOnThreeInstancesStartOneClaimAndTheFinishIsReplayedEverywhere) {
  const json::object begin{{"fingerprint", "plan=pro"}, {"ttl_ms", 30'000}};
  const auto answers = at_once(12, [&](HttpClient& c, int) { return c.post("/v1/idempotency/upgrade-7/begin", begin); });
  int started = 0, in_progress = 0;
  for (const auto& r : answers) {
    if (r.status == 201) ++started;
    else if (r.status == 409 && r.code() == "in_progress") ++in_progress;
    else ADD_FAILURE() << r;
  }
  EXPECT_EQ(started, 1);
  EXPECT_EQ(in_progress, 11);
  HttpClient second(instances_[1]->port(), kAdminKey);
  const json::object charge{{"charge_id", "ch_9"}};
  ASSERT_EQ(second.post("/v1/idempotency/upgrade-7/finish", json::object{{"fingerprint", "plan=pro"}, {"response", charge}})
                .status,
            200u);
  for (auto& s : instances_) {
    HttpClient c(s->port(), kAdminKey);
    const HttpResponse replay = c.post("/v1/idempotency/upgrade-7/begin", begin);
    ASSERT_EQ(replay.status, 200u) << replay;
    EXPECT_EQ(replay.object().at("response").as_object(), charge);
  }
}

TEST_F(HttpCoordInstances, ASharedPolicyOfFiveAdmitsExactlyFiveOfThirtyAttemptsSpreadOverThreeInstances) {
  const auto answers =
      at_once(30, [](HttpClient& c, int) { return c.post("/v1/ratelimits/login/check", json::object{{"key", "alice"}}); });
  int allowed = 0, limited = 0;
  for (const auto& r : answers) {
    if (r.status == 200) ++allowed;
    else if (r.status == 429 && r.code() == "rate_limited") ++limited;
    else ADD_FAILURE() << r;
  }
  EXPECT_EQ(allowed, 5);
  EXPECT_EQ(limited, 25);
}

}  // namespace
}  // namespace tollgate::httptest
