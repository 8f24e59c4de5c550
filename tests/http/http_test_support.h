// Test support for the HTTP integration tests: a small synchronous HTTP client (Boost.Beast),
// raw-socket helpers for requests no client would send, problem-document checks, and a test-suite
// base with one real server (support/server_process.h) on a fresh database.
//
// Header-only on purpose: CMake compiles tests/*/*_test.cc and tests/support/*.cc, so a .cc file
// beside the tests in tests/http/ would not be built. Everything here is `inline`.
//
// Thread safety: an HttpClient belongs to one thread; distinct clients share nothing. A
// ServerSuite's server is driven by the test's thread; port() may be read from any thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "support/backends.h"
#include "support/server_process.h"

// gtest prints JSON values as JSON, not as bytes.
namespace boost::json {
inline void PrintTo(const object& o, std::ostream* out) { *out << serialize(o); }
inline void PrintTo(const value& v, std::ostream* out) { *out << serialize(v); }
inline void PrintTo(const array& a, std::ostream* out) { *out << serialize(a); }
}  // namespace boost::json

namespace tollgate::httptest {

namespace json = boost::json;
using namespace std::chrono_literals;

inline constexpr const char* kAdminKey = "it-admin-key-0123456789abcdef";
// How long anything here waits before it calls it a hang: a hang detector, never a performance goal.
inline constexpr auto kPatience = std::chrono::seconds(30);

// --- the server process -------------------------------------------------------------------------
//
// The process itself is tests/support/server_process.h's ServerProcess (start, SIGTERM, SIGKILL,
// restart on the same database); these tests start it with kAdminKey.

using testing::ProcessResult;
using testing::ServerOptions;
using testing::ServerProcess;

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline ServerOptions server_options() {
  ServerOptions options;
  options.admin_key = kAdminKey;
  return options;
}

// --- a small synchronous HTTP/1.1 client ---------------------------------------------------------

struct HttpResponse {
  unsigned status = 0;    // 0: no answer at all (see error)
  std::string error;      // the transport error when status == 0
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  bool answered() const { return status != 0; }
  std::string header(std::string name) const {
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  bool has_header(std::string name) const {
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return headers.count(name) > 0;
  }
  // The body as JSON (null if it is not JSON), parsed once. The references live as long as this
  // response (and its body) do.
  const json::value& json() const {
    if (!parsed_ || parsed_body_ != body) {
      boost::system::error_code ec;
      json::value v = json::parse(body, ec);
      parsed_ = ec ? json::value() : std::move(v);
      parsed_body_ = body;
    }
    return *parsed_;
  }
  // The body as a JSON object (empty if it is not one).
  const json::object& object() const {
    static const json::object kEmpty;
    const json::value& v = json();
    return v.is_object() ? v.as_object() : kEmpty;
  }
  // The problem document's code, or "".
  std::string code() const {
    const json::object& o = object();
    auto* c = o.if_contains("code");
    return c && c->is_string() ? std::string(c->as_string()) : std::string();
  }
  // For failure messages.
  std::string describe() const {
    if (!answered()) return "no answer: " + error;
    return std::to_string(status) + " " + body.substr(0, 600);
  }

 private:
  mutable std::optional<json::value> parsed_;
  mutable std::string parsed_body_;
};

inline std::ostream& operator<<(std::ostream& out, const HttpResponse& r) { return out << r.describe(); }

// Synchronous, one connection kept alive; not thread-safe (one client per thread). Its Beast code is
// compiled once, in tests/support/http_test_client.cc, not in every suite that includes this header.
class HttpClient {
 public:
  // `key`: sent as "Authorization: Bearer <key>"; empty sends none.
  explicit HttpClient(std::uint16_t port, std::string key = "", std::chrono::milliseconds timeout = 15s);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  void set_port(std::uint16_t port);
  void set_key(std::string key) { key_ = std::move(key); }
  // With TOLLGATE_RECORD_EXCHANGES=<folder> set, every answer this client receives is appended to a
  // file there, for scripts/check-exchanges to validate against docs/openapi.json. A client that
  // talks to a server other than tollgate (the fake provider) turns that off.
  void set_recorded(bool recorded) { record_ = recorded; }

  // Opens the connection now (the next request uses it). False if it could not.
  bool connect(std::string* error = nullptr);
  void close();

  HttpResponse get(const std::string& target, const std::map<std::string, std::string>& headers = {}) {
    return request("GET", target, "", headers);
  }
  HttpResponse post(const std::string& target, const std::string& body,
                    const std::map<std::string, std::string>& headers = {}) {
    return request("POST", target, body, headers);
  }
  HttpResponse post(const std::string& target, const json::object& body,
                    const std::map<std::string, std::string>& headers = {}) {
    return request("POST", target, json::serialize(body), headers);
  }
  HttpResponse del(const std::string& target, const std::map<std::string, std::string>& headers = {}) {
    return request("DELETE", target, "", headers);
  }

  // One request. A body is sent with Content-Type: application/json unless `headers` names one.
  // Headers with an empty value are left out (e.g. {"Authorization", ""} to send no key).
  HttpResponse request(const std::string& method, const std::string& target, const std::string& body,
                       const std::map<std::string, std::string>& headers = {});

 private:
  struct Connection;  // the io_context, the Beast stream and its buffer
  std::unique_ptr<Connection> conn_;
  std::uint16_t port_;
  std::string key_;
  std::chrono::milliseconds timeout_;
  bool record_ = true;
};

// --- raw sockets --------------------------------------------------------------------------------

// An open TCP connection to 127.0.0.1:port, for bytes no HTTP client would send.
class RawConnection {
 public:
  explicit RawConnection(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const int e = errno;
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error(std::string("connect: ") + std::strerror(e));
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Sends all of `bytes`; false if the connection broke (the server may have answered and closed).
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Reads until the server closes the connection (or resets it) or `patience` passes.
  // `closed` tells which.
  std::string read_until_closed(std::chrono::milliseconds patience, bool* closed = nullptr) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) break;
      char buf[16 * 1024];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (closed) *closed = true;
        return out;
      }
      out.append(buf, static_cast<std::size_t>(n));
    }
    if (closed) *closed = false;
    return out;
  }

  // Reads one whole HTTP response (head and a Content-Length body), or what came within `patience`.
  std::string read_response(std::chrono::milliseconds patience) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
      const auto head_end = out.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::size_t length = 0;
        std::string lower = out.substr(0, head_end);
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto cl = lower.find("\r\ncontent-length:");
        if (cl != std::string::npos) length = std::stoul(lower.substr(cl + 17));
        if (out.size() >= head_end + 4 + length) return out;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return out;
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return out;
      char buf[16 * 1024];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return out;
      out.append(buf, static_cast<std::size_t>(n));
    }
  }

  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// The status code of a raw HTTP response text ("HTTP/1.1 413 ..."), or 0.
inline unsigned raw_status(const std::string& response) {
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12) return 0;
  return static_cast<unsigned>(std::atoi(response.substr(9, 3).c_str()));
}

// The body of a raw HTTP response text.
inline std::string raw_body(const std::string& response) {
  const auto at = response.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : response.substr(at + 4);
}

// --- JSON helpers -------------------------------------------------------------------------------

inline std::int64_t jint(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v || !v->is_number()) {
    ADD_FAILURE() << "no integer " << key << " in " << json::serialize(o);
    return -1;
  }
  return v->to_number<std::int64_t>();
}

inline std::string jstr(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v || !v->is_string()) {
    ADD_FAILURE() << "no string " << key << " in " << json::serialize(o);
    return {};
  }
  return std::string(v->as_string());
}

// Waits until GET /readyz answers 200 (the reaper has run); the last answer.
inline HttpResponse wait_until_ready(std::uint16_t port) {
  HttpClient client(port);
  HttpResponse last;
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < deadline) {
    last = client.get("/readyz");
    if (last.status == 200) return last;
    std::this_thread::sleep_for(50ms);
  }
  return last;
}

// --- a test suite with one real server on a fresh database ---------------------------------------

// Problem documents (RFC 9457): content type, type/title/status/detail/code, and the code.
inline ::testing::AssertionResult is_problem(const HttpResponse& r, unsigned status, std::string_view code) {
  static const std::map<unsigned, std::string> kTitles{
      {400, "Bad Request"},        {401, "Unauthorized"},
      {403, "Forbidden"},          {404, "Not Found"},
      {405, "Method Not Allowed"}, {409, "Conflict"},
      {413, "Content Too Large"},  {415, "Unsupported Media Type"},
      {422, "Unprocessable Content"}, {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"}, {503, "Service Unavailable"}};
  auto fail = [&](const std::string& why) { return ::testing::AssertionFailure() << why << "; answer: " << r.describe(); };
  if (r.status != status) return fail("status is not " + std::to_string(status));
  if (r.header("Content-Type") != "application/problem+json") {
    return fail("Content-Type is '" + r.header("Content-Type") + "', not application/problem+json");
  }
  const json::value v = r.json();
  if (!v.is_object()) return fail("the body is not a JSON object");
  const json::object& o = v.as_object();
  auto str = [&](std::string_view key) -> std::optional<std::string> {
    auto* f = o.if_contains(key);
    if (!f || !f->is_string()) return std::nullopt;
    return std::string(f->as_string());
  };
  if (str("code") != std::string(code)) return fail("code is not " + std::string(code));
  if (str("type") != "https://tollgate.dev/errors/" + std::string(code)) return fail("type is not the code's URI");
  auto title = kTitles.find(status);
  if (!str("title") || (title != kTitles.end() && *str("title") != title->second)) {
    return fail("title is not '" + (title != kTitles.end() ? title->second : std::string("?")) + "'");
  }
  auto* s = o.if_contains("status");
  if (!s || !s->is_number() || s->to_number<std::int64_t>() != static_cast<std::int64_t>(status)) {
    return fail("status field is not " + std::to_string(status));
  }
  if (!str("detail") || str("detail")->empty()) return fail("detail is missing or empty");
  return ::testing::AssertionSuccess();
}

// The database of the ServerSuite servers: a fresh SQLite file (the default), or, with
// TOLLGATE_TEST_HTTP_BACKEND=postgres, a fresh schema on the PostgreSQL server of
// TOLLGATE_TEST_POSTGRES (CMakeLists.txt registers the HTTP suites a second time that way).
inline bool http_suites_on_postgres() {
  const char* backend = std::getenv("TOLLGATE_TEST_HTTP_BACKEND");
  return backend && std::string_view(backend) == "postgres";
}

// One server process per test suite, on its own fresh database, started before the suite's first
// test and stopped (SIGTERM; it must exit 0) after its last. Tests isolate themselves by unique ids.
// On PostgreSQL (http_suites_on_postgres()) the database is a schema owned by the suite, dropped
// after its last test; without a server the suite is skipped, or fails if postgres_required().
template <typename Suite>
class ServerSuite : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    ServerOptions options = server_options();
    // A suite's one server sees many tests fail authentication on purpose, all from 127.0.0.1:
    // the failure throttle (tested in auth_security_test.cc) is off here.
    options.env.emplace_back("TOLLGATE_AUTH_FAILURES_LIMIT", "0");
    // A suite may add to its server's options: `static void configure(ServerOptions&)`.
    if constexpr (requires { Suite::configure(options); }) Suite::configure(options);
    if (http_suites_on_postgres()) {
      const auto uri = testing::postgres_server_uri();
      if (!uri) {
        if (testing::postgres_required()) {
          FAIL() << "TOLLGATE_TEST_HTTP_BACKEND=postgres and TOLLGATE_REQUIRE_POSTGRES=1, but TOLLGATE_TEST_POSTGRES "
                    "names no PostgreSQL server";
        }
        skip_ = true;
        return;
      }
      try {
        schema_ = new testing::PgSchema(*uri);
      } catch (const std::exception& e) {
        FAIL() << "could not make a schema on " << *uri << ": " << e.what();
      }
      options.database = schema_->uri();
    }
    try {
      server_ = new ServerProcess(options);
    } catch (const std::exception& e) {
      FAIL() << "the server did not start: " << e.what();
    }
    const HttpResponse ready = wait_until_ready(server_->port());
    ASSERT_EQ(ready.status, 200u) << "the server did not become ready: " << ready << "\n" << server_->log();
  }
  static void TearDownTestSuite() {
    if (server_) {
      const int code = server_->stop(SIGTERM);
      EXPECT_EQ(code, 0) << "the server did not stop cleanly on SIGTERM:\n" << server_->log();
      delete server_;
      server_ = nullptr;
    }
    delete schema_;  // drops the schema, after the server that used it stopped
    schema_ = nullptr;
    skip_ = false;
  }

 protected:
  void SetUp() override {
    if (skip_) GTEST_SKIP() << "TOLLGATE_TEST_HTTP_BACKEND=postgres but no PostgreSQL server (TOLLGATE_TEST_POSTGRES)";
    ASSERT_NE(server_, nullptr) << "the suite's server did not start";
    ASSERT_TRUE(server_->running()) << "the suite's server is not running:\n" << server_->log();
    admin_ = std::make_unique<HttpClient>(server_->port(), kAdminKey);
  }

  static ServerProcess& server() { return *server_; }
  static std::uint16_t port() { return server_->port(); }
  HttpClient& admin() { return *admin_; }

  // A new id, unique in this process: "<prefix>-<n>".
  static std::string unique(std::string_view prefix) {
    static std::atomic<int> next{0};
    return std::string(prefix) + "-" + std::to_string(++next);
  }

  // Creates an account (admin) with `credits` purchased; returns its id.
  std::string make_account(std::int64_t credits, json::object settings = {}) {
    const std::string id = unique("acct");
    settings["account_id"] = id;
    const HttpResponse created = admin().post("/v1/accounts", settings);
    EXPECT_EQ(created.status, 201u) << created;
    if (credits > 0) {
      const HttpResponse credited =
          admin().post("/v1/accounts/" + id + "/credits", json::object{{"amount", credits}, {"reference", id + "-buy"}});
      EXPECT_EQ(credited.status, 201u) << credited;
    }
    return id;
  }

  // Reserves `amount` on `account` (admin); returns the new hold.
  json::object make_hold(const std::string& account, std::int64_t amount, json::object extra = {}) {
    extra["account_id"] = account;
    extra["amount"] = amount;
    if (!extra.contains("request_id")) extra["request_id"] = unique("req");
    const HttpResponse r = admin().post("/v1/holds", extra);
    EXPECT_EQ(r.status, 201u) << r;
    return r.object();
  }

  json::object get_account(const std::string& account) {
    const HttpResponse r = admin().get("/v1/accounts/" + account);
    EXPECT_EQ(r.status, 200u) << r;
    return r.object();
  }

  // The account without oldest_active_hold_age_ms (which grows as time passes): for comparing an
  // account before and after something that must not change it.
  json::object account_state(const std::string& account) {
    json::object a = get_account(account);
    a.erase("oldest_active_hold_age_ms");
    return a;
  }

 private:
  static inline ServerProcess* server_ = nullptr;
  static inline testing::PgSchema* schema_ = nullptr;  // the server's database on PostgreSQL, else null
  static inline bool skip_ = false;                    // PostgreSQL asked for, none to test against
  std::unique_ptr<HttpClient> admin_;
};

}  // namespace tollgate::httptest
