// GET /metrics behind a metrics_key (api.md, Operations): with the key configured, /metrics
// answers `Authorization: Bearer <metrics_key>` or an admin key, and 401 to anything else; the
// other open routes stay open. A real server process with TOLLGATE_METRICS_KEY set.
#include <gtest/gtest.h>

#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

constexpr const char* kMetricsKey = "scraper-key-0123456789abcdef";

TEST(HttpMetricsKey, WithAMetricsKeyOnlyItOrAnAdminKeyMayReadMetrics) {
  ServerOptions options = server_options();
  options.env = {{"TOLLGATE_METRICS_KEY", kMetricsKey}};
  ServerProcess server(options);

  HttpClient anonymous(server.port());
  const HttpResponse none = anonymous.get("/metrics");
  EXPECT_TRUE(is_problem(none, 401, "unauthorized"));
  EXPECT_EQ(none.header("WWW-Authenticate"), "Bearer");
  HttpClient wrong(server.port(), "not-the-metrics-key-0123");
  EXPECT_TRUE(is_problem(wrong.get("/metrics"), 401, "unauthorized"));

  HttpClient scraper(server.port(), kMetricsKey);
  const HttpResponse scraped = scraper.get("/metrics");
  ASSERT_EQ(scraped.status, 200u) << scraped;
  EXPECT_NE(scraped.body.find("tollgate_http_requests_total"), std::string::npos);
  HttpClient admin(server.port(), kAdminKey);
  EXPECT_EQ(admin.get("/metrics").status, 200u);
  // An admin:read key too (the operator's dashboard: it reads, it changes nothing).
  const HttpResponse looker = admin.post("/v1/keys", json::object{{"scopes", json::array{"admin:read"}}});
  ASSERT_EQ(looker.status, 201u) << looker;
  EXPECT_EQ(HttpClient(server.port(), jstr(looker.object(), "secret")).get("/metrics").status, 200u);

  // An account key is not enough; the metrics key opens nothing else.
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "metrics-acct"}}).status, 201u);
  const HttpResponse key = admin.post("/v1/accounts/metrics-acct/keys", json::object{});
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient kiosk(server.port(), jstr(key.object(), "secret"));
  EXPECT_TRUE(is_problem(kiosk.get("/metrics"), 401, "unauthorized"));
  EXPECT_TRUE(is_problem(scraper.get("/v1/accounts/metrics-acct"), 401, "unauthorized"));
  // Health, readiness and the OpenAPI document stay open.
  EXPECT_EQ(anonymous.get("/healthz").status, 200u);
  EXPECT_EQ(anonymous.get("/openapi.json").status, 200u);
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

TEST(HttpMetricsKey, WithoutAMetricsKeyMetricsAreOpen) {
  ServerProcess server(server_options());
  EXPECT_EQ(HttpClient(server.port()).get("/metrics").status, 200u);
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

}  // namespace
}  // namespace tollgate::httptest
