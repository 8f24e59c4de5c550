// The last-resort catch (core/last_resort.h, http/api.cc's reply guard): an exception that escapes a
// handler or a callback is a bug, but it costs one request — answered 500 `internal`, with a
// problem document that says nothing of the cause — never the process. It is counted in
// tollgate_http_unhandled_exceptions_total and logged, and the server answers the next request.
//
// The exceptions are injected where the API takes code from its owner: ApiOptions::render_metrics
// (GET /metrics, on a reader thread, through a real in-process HttpServer) and the Dispatch a caller
// of Api::handle passes (a write's completion, on the group-commit thread). Real SQLite store,
// real threads, real sockets.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/last_resort.h"
#include "core/limits.h"
#include "http/api.h"
#include "http/auth.h"
#include "http/http_test_support.h"
#include "http/metrics.h"
#include "http/read_executor.h"
#include "http/server.h"
#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"
#include "support/backends.h"

namespace tollgate::httptest {
namespace {

constexpr const char* kSecret = "SECRET-DETAIL-of-the-bug";

// One API on a fresh SQLite file; GET /metrics throws while `throw_metrics` is set.
struct World {
  testing::TempDir dir;
  SystemClock clock;
  std::unique_ptr<SqliteStore> store;
  std::unique_ptr<Ledger> ledger;
  std::unique_ptr<http::Authenticator> auth;
  std::unique_ptr<http::Metrics> metrics;
  std::unique_ptr<http::ReadExecutor> readers;
  std::unique_ptr<http::Api> api;
  std::atomic<bool> throw_metrics{false};

  World() {
    SqliteOptions options;
    options.path = dir.file("ledger.db");
    auto opened = SqliteStore::open(options, clock);
    if (!opened) throw std::runtime_error("open: " + opened.error().detail);
    store = std::move(opened).value();
    ledger = std::make_unique<Ledger>(*store, clock, LedgerOptions{});
    auth = std::make_unique<http::Authenticator>(ledger->key_directory(), clock, std::string(kAdminKey));
    metrics = std::make_unique<http::Metrics>(http::Api::route_templates());
    readers = std::make_unique<http::ReadExecutor>(2, limits::kReadQueueMax);
    http::ApiOptions api_options;
    api_options.openapi_json = "{}";
    api_options.auth_failures_limit = 0;
    api_options.render_metrics = [this] {
      if (throw_metrics.load()) throw std::out_of_range(kSecret);
      http::Exposition out;
      metrics->render_requests(out);
      return out.text();
    };
    api = std::make_unique<http::Api>(*ledger, *readers, *auth, *metrics, clock, std::move(api_options));
  }
  ~World() {
    readers->stop();
    ledger->stop();
  }
};

// The value of an unlabelled counter in a Prometheus text body; -1 when absent.
double counter(const std::string& text, const std::string& name) {
  const std::string line = "\n" + name + " ";
  const auto at = text.find(line);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + line.size(), text.find('\n', at + line.size()) - at - line.size()));
}

TEST(LastResortCatch, AHandlerThatThrowsOnAReaderThreadAnswers500InternalAndTheServerServesOn) {
  World w;
  http::HttpServer server(*w.api, *w.metrics, http::ServerLimits{});
  auto port = server.listen("127.0.0.1", 0);
  ASSERT_TRUE(port.ok());
  std::thread serving([&] { server.run(); });

  HttpClient client(*port, kAdminKey);
  const HttpResponse before = client.get("/metrics");
  ASSERT_EQ(before.status, 200u) << before;
  const double counted_before = counter(before.body, "tollgate_http_unhandled_exceptions_total");
  ASSERT_GE(counted_before, 0) << "the counter is always exported: " << before.body;
  EXPECT_EQ(counted_before, static_cast<double>(unhandled_exceptions_total()));

  w.throw_metrics = true;
  const HttpResponse failed = client.get("/metrics");
  EXPECT_TRUE(is_problem(failed, 500, "internal")) << failed;
  EXPECT_EQ(failed.body.find(kSecret), std::string::npos) << "the answer tells nothing of the cause: " << failed.body;
  EXPECT_EQ(failed.body.find("out_of_range"), std::string::npos) << failed.body;

  // The same connection and a new one are answered; the next /metrics counts the one exception.
  EXPECT_EQ(client.get("/healthz").status, 200u);
  EXPECT_EQ(HttpClient(*port, kAdminKey).post("/v1/accounts", json::object{{"account_id", "after-the-bug"}}).status,
            201u);
  w.throw_metrics = false;
  const HttpResponse after = client.get("/metrics");
  ASSERT_EQ(after.status, 200u) << after;
  EXPECT_EQ(counter(after.body, "tollgate_http_unhandled_exceptions_total"), counted_before + 1) << after.body;
  EXPECT_EQ(unhandled_exceptions_total(), static_cast<std::uint64_t>(counted_before) + 1);
  EXPECT_NE(after.body.find("route=\"GET /metrics\",status=\"500\""), std::string::npos)
      << "the 500 is counted like any answer: " << after.body;

  server.shutdown();
  serving.join();
}

// Api::handle from a caller's thread, as the server calls it; the answer, once it comes.
std::future<http::Response> handle(http::Api& api, std::string method, std::string target, std::string body,
                                   http::Dispatch dispatch) {
  auto answer = std::make_shared<std::promise<http::Response>>();
  auto calls = std::make_shared<std::atomic<int>>(0);
  http::Request request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.authorization = std::string("Bearer ") + kAdminKey;
  request.content_type = "application/json";
  request.body = std::move(body);
  request.client_address = "192.0.2.1";
  api.handle(std::move(request), [answer, calls](http::Response r) {
    if (calls->fetch_add(1) == 0) answer->set_value(std::move(r));
    else ADD_FAILURE() << "answered twice";
  }, std::move(dispatch));
  return answer->get_future();
}

TEST(LastResortCatch, ACompletionThatThrowsOnTheGroupCommitThreadAnswers500AndTheLedgerGoesOn) {
  World w;
  const std::uint64_t before = unhandled_exceptions_total();
  // A write's completion hands its answer to the request's strand through Dispatch: here it throws.
  auto failed = handle(*w.api, "POST", "/v1/accounts", R"({"account_id":"a-1"})",
                       [](std::function<void()>) { throw std::runtime_error(kSecret); });
  ASSERT_EQ(failed.wait_for(kPatience), std::future_status::ready) << "the request was never answered";
  const http::Response r = failed.get();
  EXPECT_EQ(r.status, 500u);
  EXPECT_NE(r.body.find("\"code\":\"internal\""), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find(kSecret), std::string::npos) << r.body;
  // Counted by the catch that unwound to it, a moment after the guard answered (during the unwinding).
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (unhandled_exceptions_total() == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(unhandled_exceptions_total(), before + 1);

  // The group-commit thread lives on: the next write is decided, made durable and answered.
  auto next = handle(*w.api, "POST", "/v1/accounts", R"({"account_id":"a-2"})", [](std::function<void()> work) { work(); });
  ASSERT_EQ(next.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(next.get().status, 201u);
  // The first write itself was committed before its answer was lost (the answer said so: retry it
  // with the same id): a retry replays it.
  auto retried = handle(*w.api, "POST", "/v1/accounts", R"({"account_id":"a-1"})", [](std::function<void()> work) { work(); });
  ASSERT_EQ(retried.wait_for(kPatience), std::future_status::ready);
  EXPECT_EQ(retried.get().status, 200u);
}

}  // namespace
}  // namespace tollgate::httptest
