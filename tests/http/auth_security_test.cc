// Security of authentication at the HTTP edge (issue 12), against real server processes:
// - failed authentications are throttled per client address (429 too_many_failed_auth with
//   Retry-After once an address is over its budget; counted in /metrics; another address and a
//   valid key are not affected; behind trusted proxies, the forwarded client address is counted);
// - no secret (the admin key, account keys, wrong keys that were tried, webhook signing secrets) ever
//   reaches the server's output, stdout or stderr — except the generated admin key's one deliberate
//   print at first start.
#include <gtest/gtest.h>

#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

// One request on a new connection from `source` (an address of the loopback network, e.g.
// 127.0.0.2) to the server on 127.0.0.1:port; the whole answer as text.
std::string request_from(const char* source, std::uint16_t port, const std::string& target, const std::string& key) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket");
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &local.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
    ::close(fd);
    throw std::runtime_error(std::string("bind ") + source + ": " + std::strerror(errno));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
  }
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  if (!key.empty()) req += "Authorization: Bearer " + key + "\r\n";
  req += "\r\n";
  std::string out;
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
    char buf[16 * 1024];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) break;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

std::int64_t metric_value(const std::string& metrics, const std::string& name) {
  const auto at = metrics.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(metrics.substr(at + name.size() + 2));
}

TEST(HttpAuthThrottle, AnAddressOverItsFailureBudgetIsAnswered429AndOthersAreNot) {
  ServerOptions options = server_options();
  options.env = {{"TOLLGATE_AUTH_FAILURES_LIMIT", "5"}, {"TOLLGATE_AUTH_FAILURES_PERIOD_MS", "60000"}};
  ServerProcess server(options);
  HttpClient admin(server.port(), kAdminKey);
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "throttle-a"}}).status, 201u);
  const HttpResponse created = admin.post("/v1/accounts/throttle-a/keys", json::object{});
  ASSERT_EQ(created.status, 201u) << created;
  const std::string account_key = jstr(created.object(), "secret");

  // 127.0.0.1: five failures are 401 (unknown key, missing header, malformed header), then 429.
  HttpClient wrong(server.port(), "tgk_wrong-key-000000000000000000000000000000000");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(is_problem(wrong.get("/v1/accounts/throttle-a"), 401, "unauthorized"));
  HttpClient anonymous(server.port());
  EXPECT_TRUE(is_problem(anonymous.get("/v1/accounts/throttle-a"), 401, "unauthorized"));
  EXPECT_TRUE(is_problem(anonymous.get("/v1/accounts/throttle-a", {{"Authorization", "Basic abc"}}), 401, "unauthorized"));
  const HttpResponse throttled = wrong.get("/v1/accounts/throttle-a");
  EXPECT_TRUE(is_problem(throttled, 429, "too_many_failed_auth"));
  ASSERT_TRUE(throttled.has_header("Retry-After")) << throttled;
  const int retry_after = std::atoi(throttled.header("Retry-After").c_str());
  EXPECT_GE(retry_after, 1);
  EXPECT_LE(retry_after, 12);  // one failure's share of the budget: 60 s / 5
  EXPECT_GT(jint(throttled.object(), "retry_after_ms"), 0);
  EXPECT_TRUE(is_problem(anonymous.get("/v1/accounts/throttle-a"), 429, "too_many_failed_auth"));
  EXPECT_TRUE(is_problem(wrong.get("/v1/holds"), 429, "too_many_failed_auth"));

  // A valid key is never refused, from the same address: the configured admin key, and a key only
  // the database knows (looked up all the same); a wrong key stays refused.
  EXPECT_EQ(admin.get("/v1/accounts/throttle-a").status, 200u);
  HttpClient fresh(server.port(), account_key);
  EXPECT_EQ(fresh.get("/v1/accounts/throttle-a").status, 200u);
  EXPECT_TRUE(is_problem(wrong.get("/v1/accounts/throttle-a"), 429, "too_many_failed_auth"));

  // Another address is not affected: the account key works from 127.0.0.2, and its failures are its own.
  const std::string good = request_from("127.0.0.2", server.port(), "/v1/accounts/throttle-a", account_key);
  EXPECT_EQ(raw_status(good), 200u) << good;
  const std::string bad = request_from("127.0.0.2", server.port(), "/v1/accounts/throttle-a", "tgk_nope");
  EXPECT_EQ(raw_status(bad), 401u) << bad;

  // Counted: 5 + 1 failures (127.0.0.1's five, 127.0.0.2's one), 4 throttled.
  const HttpResponse m = admin.get("/metrics");
  ASSERT_EQ(m.status, 200u);
  EXPECT_EQ(metric_value(m.body, "tollgate_auth_failures_total"), 6) << m.body;
  EXPECT_EQ(metric_value(m.body, "tollgate_auth_throttled_total"), 4) << m.body;
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

TEST(HttpAuthThrottle, TheBudgetRefills) {
  ServerOptions options = server_options();
  options.env = {{"TOLLGATE_AUTH_FAILURES_LIMIT", "2"}, {"TOLLGATE_AUTH_FAILURES_PERIOD_MS", "1000"}};
  ServerProcess server(options);
  HttpClient wrong(server.port(), "tgk_wrong");
  EXPECT_EQ(wrong.get("/v1/holds").status, 401u);
  EXPECT_EQ(wrong.get("/v1/holds").status, 401u);
  EXPECT_TRUE(is_problem(wrong.get("/v1/holds"), 429, "too_many_failed_auth"));
  std::this_thread::sleep_for(600ms);  // one failure's share: 500 ms
  EXPECT_EQ(wrong.get("/v1/holds").status, 401u);
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

TEST(HttpAuthThrottle, ZeroTurnsItOff) {
  ServerOptions options = server_options();
  options.env = {{"TOLLGATE_AUTH_FAILURES_LIMIT", "0"}};
  ServerProcess server(options);
  HttpClient wrong(server.port(), "tgk_wrong");
  for (int i = 0; i < 30; ++i) ASSERT_EQ(wrong.get("/v1/holds").status, 401u);
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

// GET /metrics checks its metrics key itself (an open route): guesses of that key are failures too,
// and an address over its budget is answered 429 for a wrong key, 200 for the right one.
TEST(HttpAuthThrottle, MetricsKeyGuessesAreThrottledToo) {
  const std::string metrics_key = "metrics-key-for-the-throttle-test-0123";
  ServerOptions options = server_options();
  options.env = {{"TOLLGATE_METRICS_KEY", metrics_key},
                 {"TOLLGATE_AUTH_FAILURES_LIMIT", "3"},
                 {"TOLLGATE_AUTH_FAILURES_PERIOD_MS", "60000"}};
  ServerProcess server(options);
  HttpClient guesser(server.port(), "metrics-guess-000");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(is_problem(guesser.get("/metrics"), 401, "unauthorized"));
  const HttpResponse throttled = guesser.get("/metrics");
  EXPECT_TRUE(is_problem(throttled, 429, "too_many_failed_auth")) << throttled;
  EXPECT_TRUE(throttled.has_header("Retry-After")) << throttled;
  HttpClient right_key(server.port(), metrics_key);
  EXPECT_EQ(right_key.get("/metrics").status, 200u);
  EXPECT_TRUE(is_problem(guesser.get("/metrics"), 429, "too_many_failed_auth"));
  // No key at all is not a guess; /healthz is not affected.
  HttpClient anonymous(server.port());
  EXPECT_TRUE(is_problem(anonymous.get("/metrics"), 401, "unauthorized"));
  EXPECT_EQ(anonymous.get("/healthz").status, 200u);
  // The configured admin key is not refused on keyed routes; another address reads metrics.
  HttpClient admin(server.port(), kAdminKey);
  EXPECT_EQ(admin.get("/v1/holds").status, 200u);
  const std::string scraped = request_from("127.0.0.2", server.port(), "/metrics", metrics_key);
  ASSERT_EQ(raw_status(scraped), 200u) << scraped;
  const std::string body = scraped.substr(scraped.find("\r\n\r\n"));
  EXPECT_EQ(metric_value(body, "tollgate_auth_failures_total"), 3) << body;
  EXPECT_EQ(metric_value(body, "tollgate_auth_throttled_total"), 2) << body;
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

// The generated admin key (stored, so only the database knows it) is not refused from an address
// whose failures tripped the throttle — 40 wrong keys through one balancer must not lock the
// operator out.
TEST(HttpAuthThrottle, TheGeneratedAdminKeyIsNeverRefusedByTheThrottle) {
  ServerOptions options = server_options();
  options.admin_key = "";  // generated at the first start
  options.env = {{"TOLLGATE_AUTH_FAILURES_LIMIT", "5"}, {"TOLLGATE_AUTH_FAILURES_PERIOD_MS", "60000"}};
  ServerProcess server(options);
  ASSERT_FALSE(server.admin_key().empty());
  HttpClient wrong(server.port(), "tgk_wrong-key-000000000000000000000000000000000");
  for (int i = 0; i < 40; ++i) wrong.get("/v1/holds");
  EXPECT_TRUE(is_problem(wrong.get("/v1/holds"), 429, "too_many_failed_auth"));
  HttpClient admin(server.port(), server.admin_key());
  const HttpResponse r = admin.get("/v1/holds");
  EXPECT_EQ(r.status, 200u) << r;
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

// Behind a balancer (trusted_proxies): the failures are counted by the client's address that the
// trusted peer forwards (X-Forwarded-For, or Forwarded), not by the balancer's; the balancer's own
// requests and other clients behind it are not affected; a valid key from the throttled client
// still works.
TEST(HttpAuthThrottle, ThroughATrustedProxyTheForwardedClientAddressIsCounted) {
  ServerOptions options = server_options();
  options.env = {{"TOLLGATE_AUTH_FAILURES_LIMIT", "3"},
                 {"TOLLGATE_AUTH_FAILURES_PERIOD_MS", "60000"},
                 {"TOLLGATE_TRUSTED_PROXIES", "127.0.0.1/32, ::1"}};
  ServerProcess server(options);
  HttpClient admin(server.port(), kAdminKey);
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "behind-lb"}}).status, 201u);
  const HttpResponse created = admin.post("/v1/accounts/behind-lb/keys", json::object{});
  ASSERT_EQ(created.status, 201u) << created;
  const std::string account_key = jstr(created.object(), "secret");

  HttpClient balancer(server.port(), "tgk_wrong-key-000000000000000000000000000000000");
  // The client 203.0.113.7 behind the balancer (a spoofed hop in front of it is not believed: the
  // balancer, trusted, appended the real one on the right).
  const std::map<std::string, std::string> client7 = {{"X-Forwarded-For", "198.51.100.1, 203.0.113.7"}};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(is_problem(balancer.get("/v1/holds", client7), 401, "unauthorized"));
  EXPECT_TRUE(is_problem(balancer.get("/v1/holds", client7), 429, "too_many_failed_auth"));
  // Another client behind the same balancer, by either header, and the balancer itself: not affected.
  EXPECT_TRUE(is_problem(balancer.get("/v1/holds", {{"X-Forwarded-For", "203.0.113.8"}}), 401, "unauthorized"));
  EXPECT_TRUE(is_problem(balancer.get("/v1/holds", {{"Forwarded", "for=\"[2001:db8::9]:4711\";proto=http"}}), 401,
                         "unauthorized"));
  EXPECT_TRUE(is_problem(balancer.get("/v1/holds"), 401, "unauthorized"));
  // The throttled client: by Forwarded too (the same address), and with a valid key it is served.
  EXPECT_TRUE(is_problem(balancer.get("/v1/holds", {{"Forwarded", "for=203.0.113.7"}}), 429, "too_many_failed_auth"));
  HttpClient kiosk(server.port(), account_key);
  EXPECT_EQ(kiosk.get("/v1/accounts/behind-lb", client7).status, 200u);
  EXPECT_EQ(admin.get("/v1/holds", client7).status, 200u);
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

// A peer that is not a trusted proxy is the client, whatever header it sends: changing
// X-Forwarded-For on every try does not escape the throttle.
TEST(HttpAuthThrottle, AnUntrustedPeersForwardingHeadersAreIgnored) {
  ServerOptions options = server_options();
  options.env = {{"TOLLGATE_AUTH_FAILURES_LIMIT", "3"},
                 {"TOLLGATE_AUTH_FAILURES_PERIOD_MS", "60000"},
                 {"TOLLGATE_TRUSTED_PROXIES", "10.0.0.0/8"}};
  ServerProcess server(options);
  HttpClient guesser(server.port(), "tgk_wrong-key-000000000000000000000000000000000");
  for (int i = 0; i < 3; ++i) {
    const std::map<std::string, std::string> spoofed = {{"X-Forwarded-For", "203.0.113." + std::to_string(i)},
                                                        {"Forwarded", "for=198.51.100." + std::to_string(i)}};
    EXPECT_TRUE(is_problem(guesser.get("/v1/holds", spoofed), 401, "unauthorized"));
  }
  EXPECT_TRUE(is_problem(guesser.get("/v1/holds", {{"X-Forwarded-For", "203.0.113.99"}}), 429, "too_many_failed_auth"));
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

// Every secret the server makes or is shown, then a grep of everything it wrote.
TEST(HttpSecrets, NoKeyEverAppearsInTheServersOutput) {
  for (const bool generated_admin : {false, true}) {
    SCOPED_TRACE(generated_admin ? "generated admin key" : "configured admin key");
    ServerOptions options = server_options();
    options.admin_key = generated_admin ? "" : "configured-admin-key-0123456789abcdef-secret";
    options.env = {{"TOLLGATE_AUTH_FAILURES_LIMIT", "3"}};  // throttled answers are written too
    ServerProcess server(options);
    const std::string admin_key = server.admin_key();
    ASSERT_FALSE(admin_key.empty());
    std::vector<std::string> secrets{admin_key};
    HttpClient admin(server.port(), admin_key);
    ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "secret-a"}}).status, 201u);
    ASSERT_EQ(admin.post("/v1/accounts/secret-a/credits", json::object{{"amount", 10}, {"reference", "pay-1"}}).status,
              201u);
    std::vector<std::string> key_ids;
    for (int i = 0; i < 3; ++i) {
      const HttpResponse k = admin.post("/v1/accounts/secret-a/keys", json::object{});
      ASSERT_EQ(k.status, 201u) << k;
      secrets.push_back(jstr(k.object(), "secret"));
      key_ids.push_back(jstr(k.object(), "key_id"));
    }
    // Used: reads, a hold, a commit.
    HttpClient kiosk(server.port(), secrets[1]);
    EXPECT_EQ(kiosk.get("/v1/accounts/secret-a").status, 200u);
    const HttpResponse hold =
        kiosk.post("/v1/holds", json::object{{"account_id", "secret-a"}, {"amount", 2}, {"request_id", "gen-1"}});
    ASSERT_EQ(hold.status, 201u) << hold;
    EXPECT_EQ(kiosk.post("/v1/holds/" + jstr(hold.object(), "hold_id") + "/commit", json::object{{"amount", 1}}).status,
              200u);
    EXPECT_EQ(HttpClient(server.port(), secrets[2]).get("/v1/accounts/secret-a/events").status, 200u);
    // An account key on an admin route, a revoked key, wrong keys (near misses of real ones), a
    // key in a malformed header, keys in the URL and in the body.
    EXPECT_EQ(kiosk.get("/v1/keys").status, 403u);
    ASSERT_EQ(admin.del("/v1/keys/" + key_ids[1])  /* secrets[2] */.status, 200u);
    EXPECT_EQ(HttpClient(server.port(), secrets[2]).get("/v1/accounts/secret-a").status, 401u);
    const std::vector<std::string> wrong{secrets[1].substr(0, secrets[1].size() - 1) + "x",
                                         "tgk_" + std::string(43, 'Q'), admin_key + "z"};
    for (const auto& w : wrong) {
      secrets.push_back(w);
      HttpClient(server.port(), w).get("/v1/accounts/secret-a");  // 401, then 429 (throttled)
    }
    HttpClient raw(server.port());
    raw.get("/v1/accounts/secret-a", {{"Authorization", "Token " + secrets[1]}});
    raw.get("/v1/accounts/" + secrets[3] + "?key=" + secrets[3]);
    admin.post("/v1/accounts", json::object{{"account_id", secrets[3]}});  // not a valid id: 400
    admin.post("/v1/accounts/secret-a/credits", "{\"amount\":\"" + secrets[3] + "\"}");
    admin.get("/v1/holds?request_id=" + secrets[3]);
    // Webhook signing secrets: made, rotated, read, refused in a body.
    const HttpResponse hook = admin.post("/v1/webhook-endpoints", json::object{{"url", "https://hooks.example/s"}});
    ASSERT_EQ(hook.status, 201u) << hook;
    secrets.push_back(jstr(hook.object(), "secret"));
    const std::string hook_path = "/v1/webhook-endpoints/" + jstr(hook.object(), "endpoint_id");
    const HttpResponse rotated = admin.post(hook_path + "/rotate-secret", "");
    ASSERT_EQ(rotated.status, 200u) << rotated;
    secrets.push_back(jstr(rotated.object(), "secret"));
    EXPECT_EQ(admin.get(hook_path).status, 200u);
    admin.post("/v1/webhook-endpoints", json::object{{"url", "https://hooks.example/s"}, {"secret", secrets.back()}});
    ASSERT_EQ(server.stop(SIGTERM), 0) << server.log();

    const std::string out = server.output();
    const std::string err = server.log();
    ASSERT_NE(err.find("\"msg\":\"request\""), std::string::npos) << "the request log is missing:\n" << err;
    for (const std::string& secret : secrets) {
      std::size_t in_out = 0;
      for (auto at = out.find(secret); at != std::string::npos; at = out.find(secret, at + 1)) ++in_out;
      EXPECT_EQ(err.find(secret), std::string::npos) << "a secret is on stderr: " << secret << "\n" << err;
      // The generated admin key is printed once, on purpose: the only way to learn it.
      const std::size_t allowed = generated_admin && secret == admin_key ? 1 : 0;
      EXPECT_EQ(in_out, allowed) << "a secret is on stdout: " << secret << "\n" << out;
    }
  }
}

}  // namespace
}  // namespace tollgate::httptest
