// Every integer query parameter of every route, against the real server process, with every
// boundary value: 2^31, 2^53, 2^63 − 1, 2^63, 2^63 + 1, 2^64, 19 and 20 digits, signs, spaces,
// empty, an exponent. One of them (GET /v1/holds?limit=9223372036854775808, any key) used to abort
// the server: std::stoll threw std::out_of_range for the 19-digit values ≥ 2^63. Each answer is
// 400 invalid_request naming the parameter, or the route's success where the value is in range;
// with an account key and with the admin key; and the server answers the next request.
//
// Also: ids "." and ".." are refused wherever an id is read (a URL path cannot carry them).
//
// The cases are generated from two tables (routes × values), not written per route.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/limits.h"
#include "core/parse.h"
#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

// Which key a route accepts.
enum class Access { account, admin_only };

// One integer query parameter of one route.
struct IntParam {
  const char* route;   // the route's template, for messages
  std::string target;  // the path (with its other query parameters, if any), without the parameter
  const char* name;    // the parameter
  std::int64_t min;
  std::int64_t max;
  Access access;
  unsigned valid_status;  // the answer to a value in [min, max] (a job that does not exist: 404)
};

// One value, as the server must read it (`text`; sent percent-encoded).
struct Value {
  const char* label;
  std::string text;
};

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

const std::vector<Value>& values() {
  static const std::vector<Value> v{
      {"1", "1"},
      {"2^31", "2147483648"},
      {"2^53", "9007199254740992"},
      {"2^63-1", "9223372036854775807"},
      {"2^63", "9223372036854775808"},
      {"2^63+1", "9223372036854775809"},
      {"2^64", "18446744073709551616"},
      {"19 digits", "1000000000000000000"},
      {"19 nines", "9999999999999999999"},
      {"20 digits", "10000000000000000000"},
      {"-1", "-1"},
      {"+1", "+1"},
      {"leading space", " 1"},
      {"trailing space", "1 "},
      {"empty", ""},
      {"1e3", "1e3"},
      {"leading zeros", "007"},
  };
  return v;
}

// Every byte that is not a letter or a digit, percent-encoded: the server reads exactly `text`
// ("+" unencoded would be read as a space).
std::string encode(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

class HttpQueryIntegers : public ServerSuite<HttpQueryIntegers> {
 protected:
  std::string account_key(const std::string& account) {
    const HttpResponse created = admin().post("/v1/accounts/" + account + "/keys", json::object{});
    EXPECT_EQ(created.status, 201u) << created;
    return jstr(created.object(), "secret");
  }

  // Every integer query parameter of the API (src/http/routes*.cc: query_int and page_request).
  static std::vector<IntParam> params(const std::string& account) {
    using namespace limits;
    const std::string events = "/v1/accounts/" + account + "/events";
    return {
        {"GET /v1/accounts", "/v1/accounts", "limit", 1, kListPageMax, Access::admin_only, 200},
        {"GET /v1/accounts/{account_id}/events", events, "after", 0, kInt64Max, Access::account, 200},
        {"GET /v1/accounts/{account_id}/events", events, "limit", 1, kEventsPageMax, Access::account, 200},
        {"GET /v1/keys", "/v1/keys", "limit", 1, kListPageMax, Access::admin_only, 200},
        {"GET /v1/events", "/v1/events", "after", 0, kInt64Max, Access::admin_only, 200},
        {"GET /v1/events", "/v1/events", "limit", 1, kEventsPageMax, Access::admin_only, 200},
        {"GET /v1/events", "/v1/events", "wait_ms", 0, kEventsWaitMsMax, Access::admin_only, 200},
        {"GET /v1/holds", "/v1/holds", "limit", 1, kListPageMax, Access::account, 200},
        {"GET /v1/jobs", "/v1/jobs", "limit", 1, kListPageMax, Access::account, 200},
        {"GET /v1/jobs/{client_request_id}", "/v1/jobs/no-such-job", "wait_ms", 0, kJobWaitMsMax, Access::account, 404},
        {"GET /v1/locks", "/v1/locks", "limit", 1, kListPageMax, Access::admin_only, 200},
    };
  }
};

TEST_F(HttpQueryIntegers, EveryBoundaryValueOfEveryIntegerParameterIsRefusedByNameOrAnsweredAndTheServerServesOn) {
  const std::string account = make_account(10);
  HttpClient kiosk(port(), account_key(account));
  int cases = 0;
  for (const IntParam& p : params(account)) {
    for (const Value& v : values()) {
      const std::string target =
          p.target + (p.target.find('?') == std::string::npos ? "?" : "&") + p.name + "=" + encode(v.text);
      // The rule the server applies (core/parse.h): digits only, in the parameter's range.
      const bool valid = parse_int(v.text, p.min, p.max).has_value();
      for (HttpClient* client : {&admin(), &kiosk}) {
        const bool admin_key = client == &admin();
        const std::string where = std::string(admin_key ? "admin key" : "account key") + ": GET " + target + " (" +
                                  p.route + ", " + p.name + " = " + v.label + ")";
        const HttpResponse r = client->get(target);
        ++cases;
        ASSERT_TRUE(r.answered()) << where << ": the server did not answer: " << r << "\n" << server().log();
        if (!admin_key && p.access == Access::admin_only) {
          EXPECT_TRUE(is_problem(r, 403, "forbidden")) << where;
        } else if (valid) {
          EXPECT_EQ(r.status, p.valid_status) << where << ": " << r;
        } else {
          EXPECT_TRUE(is_problem(r, 400, "invalid_request")) << where;
          EXPECT_NE(r.object().contains("detail") ? std::string(r.object().at("detail").as_string()).find(p.name)
                                                  : std::string::npos,
                    std::string::npos)
              << where << ": the detail does not name " << p.name << ": " << r;
        }
      }
    }
  }
  EXPECT_EQ(cases, 11 * 17 * 2);
  // Still serving, on both connections and on a new one.
  EXPECT_EQ(admin().get("/v1/accounts/" + account).status, 200u);
  EXPECT_EQ(kiosk.get("/v1/holds").status, 200u);
  EXPECT_EQ(HttpClient(port()).get("/healthz").status, 200u);
  EXPECT_TRUE(server().running()) << server().log();
}

TEST_F(HttpQueryIntegers, TheReportedRequestIsRefusedNamingLimitAndTheNextRequestIsAnswered) {
  const std::string account = make_account(10);
  HttpClient kiosk(port(), account_key(account));
  const HttpResponse r = kiosk.get("/v1/holds?limit=9223372036854775808");
  ASSERT_TRUE(is_problem(r, 400, "invalid_request")) << server().log();
  EXPECT_EQ(jstr(r.object(), "detail"), "limit must be an integer from 1 to 1000");
  EXPECT_EQ(kiosk.get("/v1/holds?limit=1").status, 200u);
}

TEST_F(HttpQueryIntegers, IdsDotAndDotDotAreRefusedByNameEverywhere) {
  for (const char* id : {".", ".."}) {
    const std::string enc = encode(id);  // "%2E": a client would normalise "/./" away
    const HttpResponse created = admin().post("/v1/accounts", json::object{{"account_id", id}});
    EXPECT_TRUE(is_problem(created, 400, "invalid_request")) << id;
    EXPECT_NE(jstr(created.object(), "detail").find("account_id"), std::string::npos) << created;
    EXPECT_NE(jstr(created.object(), "detail").find("must not be \".\" or \"..\""), std::string::npos) << created;
    const std::string account = make_account(10);
    const HttpResponse held = admin().post("/v1/holds", json::object{{"account_id", account}, {"amount", 1}, {"request_id", id}});
    EXPECT_TRUE(is_problem(held, 400, "invalid_request")) << held;
    EXPECT_NE(jstr(held.object(), "detail").find("request_id"), std::string::npos) << held;
    EXPECT_TRUE(is_problem(admin().post("/v1/holds/" + enc + "/extend", json::object{{"ttl_ms", 1000}}), 400,
                           "invalid_request"));
    EXPECT_TRUE(is_problem(admin().get("/v1/accounts/" + enc), 400, "invalid_request"));
    EXPECT_TRUE(is_problem(admin().post("/v1/idempotency/" + enc + "/begin", json::object{{"fingerprint", "f"}}), 400,
                           "invalid_request"));
    EXPECT_TRUE(is_problem(admin().get("/v1/holds?starting_after=" + enc), 400, "invalid_request"));
    EXPECT_TRUE(is_problem(admin().post("/v1/holds", json::object{{"account_id", account}, {"amount", 1}},
                                        {{"Idempotency-Key", id}}),
                           400, "invalid_request"));
    EXPECT_EQ(jint(get_account(account), "reserved"), 0) << "nothing was reserved";
  }
  // Three dots, or dots beside other characters, are ids like any other.
  EXPECT_EQ(admin().post("/v1/accounts", json::object{{"account_id", "..."}}).status, 201u);
  EXPECT_EQ(admin().post("/v1/accounts", json::object{{"account_id", "..." + unique("x")}}).status, 201u);
}

}  // namespace
}  // namespace tollgate::httptest
