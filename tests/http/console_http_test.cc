// GET /console and its files, from a real server over HTTP: the page, its security headers (a
// strict Content-Security-Policy, nosniff), the modules' content type, revalidation (ETag → 304),
// and 404 for a file the console does not have. The console's behaviour in a browser is tested by
// tests/console/ (headless Chromium).
#include <gtest/gtest.h>

#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

class HttpConsole : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(server_options()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static inline ServerProcess* server_ = nullptr;
};

void expect_console_headers(const HttpResponse& r) {
  const std::string csp = r.header("Content-Security-Policy");
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe-eval"), std::string::npos) << csp;
  EXPECT_EQ(r.header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(r.header("Cache-Control"), "no-cache");
}

TEST_F(HttpConsole, ThePageIsServedWithAStrictContentSecurityPolicyAndNoKey) {
  HttpClient anonymous(server_->port());
  for (const char* target : {"/console", "/console/", "/console/index.html"}) {
    const HttpResponse r = anonymous.get(target);
    ASSERT_EQ(r.status, 200u) << target << ": " << r;
    EXPECT_EQ(r.header("Content-Type"), "text/html; charset=utf-8") << target;
    expect_console_headers(r);
    EXPECT_NE(r.body.find("<script type=\"module\" src=\"/console/app.js\"></script>"), std::string::npos);
    EXPECT_FALSE(r.header("ETag").empty());
  }
}

TEST_F(HttpConsole, TheModulesAreJavaScriptAndTheStylesCss) {
  HttpClient anonymous(server_->port());
  for (const char* name : {"app.js", "api.js", "overview.js", "account.js", "hold.js", "coord.js", "webhooks.js", "prices.js"}) {
    const HttpResponse r = anonymous.get(std::string("/console/") + name);
    ASSERT_EQ(r.status, 200u) << name << ": " << r;
    EXPECT_EQ(r.header("Content-Type"), "text/javascript; charset=utf-8") << name;
    expect_console_headers(r);
    // The file as it is in the tree (compiled in at build time).
    EXPECT_EQ(r.body, read_file(std::string(TOLLGATE_SOURCE_DIR) + "/console/" + name)) << name << " (rebuild?)";
  }
  const HttpResponse css = anonymous.get("/console/style.css");
  ASSERT_EQ(css.status, 200u) << css;
  EXPECT_EQ(css.header("Content-Type"), "text/css; charset=utf-8");
}

TEST_F(HttpConsole, AnUnchangedFileIsRevalidatedWithoutItsBody) {
  HttpClient anonymous(server_->port());
  const HttpResponse first = anonymous.get("/console/app.js");
  ASSERT_EQ(first.status, 200u) << first;
  const std::string etag = first.header("ETag");
  ASSERT_FALSE(etag.empty());
  const HttpResponse again = anonymous.get("/console/app.js", {{"If-None-Match", etag}});
  EXPECT_EQ(again.status, 304u) << again;
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(again.header("ETag"), etag);
  const HttpResponse other = anonymous.get("/console/app.js", {{"If-None-Match", "\"something-else\""}});
  EXPECT_EQ(other.status, 200u) << other;
  // The connection is still good after a 304 (no body was announced or sent).
  EXPECT_EQ(anonymous.get("/healthz").status, 200u);
}

TEST_F(HttpConsole, AFileTheConsoleDoesNotHaveIs404) {
  HttpClient anonymous(server_->port());
  for (const char* target : {"/console/nope.js", "/console/..%2Fopenapi.json", "/console/app.js/x"}) {
    const HttpResponse r = anonymous.get(target);
    EXPECT_EQ(r.status, 404u) << target << ": " << r;
    EXPECT_EQ(r.code(), "not_found") << target;
  }
  EXPECT_EQ(anonymous.post("/console", json::object{}).status, 405u);
}

}  // namespace
}  // namespace tollgate::httptest
