// The provider client (jobs/provider_client.h) against real sockets: an in-process HTTP(S) server
// on 127.0.0.1, an ephemeral port, that answers, holds, or closes as each test needs; its TLS
// certificates are made here with the OpenSSL API.
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "jobs/provider_client.h"

namespace tollgate::jobs {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Kind = Exchange::Kind;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// What the server saw of one request.
struct Seen {
  std::string method, target, host, user_agent, idempotency_key, content_type, body;
  bool has_idempotency_key = false;
  std::vector<std::pair<std::string, std::string>> fields;  // every header field, in the order received
};

// What the server does with one request.
struct Reply {
  enum class Then : std::uint8_t {
    answer,                // answers `status` + `body` (keep-alive)
    close_without_answer,  // closes the connection having read the request
    hold,                  // never answers; keeps the connection open until the client closes it
  };
  Then then = Then::answer;
  unsigned status = 200;
  std::string body;
  bool close_after_answer = false;  // the answer says keep-alive, then the server closes anyway
};

// An HTTP/1.1 server on its own thread (C++20 coroutines on one io_context).
class TestServer {
 public:
  using Handler = std::function<Reply(const Seen&)>;

  explicit TestServer(Handler handler, ssl::context* tls = nullptr) : handler_(std::move(handler)), tls_(tls) {
    acceptor_.open(tcp::v4());
    acceptor_.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor_.listen(1024);
    port_ = acceptor_.local_endpoint().port();
    asio::co_spawn(io_, accept_loop(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~TestServer() {
    io_.stop();
    thread_.join();
  }

  std::string url(const std::string& path = "/", const std::string& host = "127.0.0.1") const {
    return std::string(tls_ ? "https://" : "http://") + host + ":" + std::to_string(port_) + path;
  }
  unsigned short port() const { return port_; }
  int accepts() const { return accepts_.load(); }
  int closes() const { return closes_.load(); }
  std::vector<Seen> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }
  // Waits until `n` requests were read; false after 3 s.
  bool wait_for_requests(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(3), [&] { return seen_.size() >= n; });
  }
  bool wait_for_closes(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(3), [&] { return closes_.load() >= n; });
  }

 private:
  asio::awaitable<void> accept_loop() {
    for (;;) {
      auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      accepts_.fetch_add(1);
      asio::co_spawn(io_, serve_connection(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> serve_connection(tcp::socket socket) {
    if (tls_ != nullptr) {
      ssl::stream<tcp::socket> stream(std::move(socket), *tls_);
      auto [ec] = co_await stream.async_handshake(ssl::stream_base::server, asio::as_tuple(asio::use_awaitable));
      if (!ec) co_await serve(stream);
    } else {
      co_await serve(socket);
    }
    std::lock_guard lock(mu_);
    closes_.fetch_add(1);
    cv_.notify_all();
  }

  template <class Stream>
  asio::awaitable<void> serve(Stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      bhttp::request<bhttp::string_body> request;
      auto [ec, n] = co_await bhttp::async_read(stream, buffer, request, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      Seen seen{std::string(request.method_string()), std::string(request.target()), std::string(request[bhttp::field::host]),
                std::string(request[bhttp::field::user_agent]), std::string(request["Idempotency-Key"]),
                std::string(request[bhttp::field::content_type]), request.body(),
                request.find("Idempotency-Key") != request.end()};
      for (const auto& field : request) seen.fields.emplace_back(std::string(field.name_string()), std::string(field.value()));
      const Reply reply = handler_(seen);
      {
        std::lock_guard lock(mu_);
        seen_.push_back(std::move(seen));
        cv_.notify_all();
      }
      if (reply.then == Reply::Then::close_without_answer) co_return;
      if (reply.then == Reply::Then::hold) {
        bhttp::request<bhttp::string_body> ignored;
        co_await bhttp::async_read(stream, buffer, ignored, asio::as_tuple(asio::use_awaitable));
        co_return;  // the client closed (or sent more, which these tests never do)
      }
      bhttp::response<bhttp::string_body> answer{static_cast<bhttp::status>(reply.status), 11};
      answer.body() = reply.body;
      answer.keep_alive(true);
      answer.prepare_payload();
      auto [wec, wn] = co_await bhttp::async_write(stream, answer, asio::as_tuple(asio::use_awaitable));
      if (wec || reply.close_after_answer) co_return;
    }
  }

  asio::io_context io_;  // first: destroyed last
  tcp::acceptor acceptor_{io_};
  Handler handler_;
  ssl::context* tls_;
  unsigned short port_ = 0;
  std::atomic<int> accepts_{0}, closes_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;  // protected by mu_
  std::thread thread_;
};

Reply answer(unsigned status, std::string body) { return Reply{Reply::Then::answer, status, std::move(body)}; }

// Collects the `done`s of a test's calls, counting every run (so that a second run shows).
class Outcomes {
 public:
  std::function<void(Exchange)> done() {
    return [this](Exchange e) {
      std::lock_guard lock(mu_);
      exchanges_.push_back(std::move(e));
      threads_.push_back(std::this_thread::get_id());
      cv_.notify_all();
    };
  }
  bool wait_for(std::size_t n, milliseconds timeout = milliseconds(3000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return exchanges_.size() >= n; });
  }
  std::vector<Exchange> exchanges() const {
    std::lock_guard lock(mu_);
    return exchanges_;
  }
  std::vector<std::thread::id> threads() const {
    std::lock_guard lock(mu_);
    return threads_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Exchange> exchanges_;
  std::vector<std::thread::id> threads_;
};

ProviderRequest post(std::string url, std::string body = "{}", milliseconds timeout = milliseconds(3000)) {
  ProviderRequest r;
  r.url = std::move(url);
  r.body = std::move(body);
  r.timeout = timeout;
  return r;
}

// One call, waited for (at most 5 s).
Exchange call(ProviderClient& client, ProviderRequest request) {
  Outcomes outcomes;
  client.start(std::move(request), outcomes.done());
  EXPECT_TRUE(outcomes.wait_for(1, milliseconds(5000)));
  const auto all = outcomes.exchanges();
  return all.empty() ? Exchange{Kind::answered, 0, "no done"} : all.front();
}

bool eventually_zero(const ProviderClient& client) {
  for (int i = 0; i < 300 && client.in_flight() != 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  return client.in_flight() == 0;
}

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::answered: return "answered";
    case Kind::timed_out: return "timed_out";
    case Kind::connection_lost: return "connection_lost";
    case Kind::not_connected: return "not_connected";
  }
  return "?";
}

TEST(ProviderClient, A200IsAnsweredWithItsBodyOnAClientThread) {
  TestServer server([](const Seen&) { return answer(200, R"({"result":{"url":"img/1.png"}})"); });
  ProviderClient client({});
  Outcomes outcomes;
  client.start(post(server.url("/generate")), outcomes.done());
  ASSERT_TRUE(outcomes.wait_for(1));
  const Exchange e = outcomes.exchanges().front();
  EXPECT_EQ(kind_name(e.kind), "answered") << e.body;
  EXPECT_EQ(e.status, 200u);
  EXPECT_EQ(e.body, R"({"result":{"url":"img/1.png"}})");
  EXPECT_NE(outcomes.threads().front(), std::this_thread::get_id());
  EXPECT_TRUE(eventually_zero(client));
}

TEST(ProviderClient, A500IsAnsweredNotATransportFailure) {
  TestServer server([](const Seen&) { return answer(500, "provider broke"); });
  ProviderClient client({});
  const Exchange e = call(client, post(server.url()));
  EXPECT_EQ(kind_name(e.kind), "answered") << e.body;
  EXPECT_EQ(e.status, 500u);
  EXPECT_EQ(e.body, "provider broke");
}

TEST(ProviderClient, APostCarriesItsIdempotencyKeyJsonBodyHostAndUserAgent) {
  TestServer server([](const Seen&) { return answer(200, "{}"); });
  ProviderClient client({});
  ProviderRequest r = post(server.url("/v1/generate?model=x&n=2"), R"({"id":"kiosk-7:guest-3","input":{}})");
  r.idempotency_key = "kiosk-7:guest-3";
  ASSERT_EQ(call(client, r).status, 200u);
  ProviderRequest g;
  g.method = ProviderRequest::Method::get;
  g.url = server.url("/status/kiosk-7%3Aguest-3");
  ASSERT_EQ(call(client, g).status, 200u);

  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].target, "/v1/generate?model=x&n=2");
  EXPECT_EQ(seen[0].idempotency_key, "kiosk-7:guest-3");
  EXPECT_EQ(seen[0].content_type, "application/json");
  EXPECT_EQ(seen[0].body, R"({"id":"kiosk-7:guest-3","input":{}})");
  EXPECT_EQ(seen[0].host, "127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(seen[0].user_agent, "tollgate");
  EXPECT_EQ(seen[1].method, "GET");
  EXPECT_EQ(seen[1].target, "/status/kiosk-7%3Aguest-3");
  EXPECT_FALSE(seen[1].has_idempotency_key);
  EXPECT_EQ(seen[1].body, "");
}

TEST(ProviderClient, ItsHeadersAreSentAsGivenInOrderBesideTheClientsOwn) {
  TestServer server([](const Seen&) { return answer(204, ""); });
  ProviderClient client({});
  ProviderRequest r = post(server.url("/hooks"), R"({"type":"credited"})");
  r.headers = {{"webhook-id", "evt_42"},
               {"webhook-timestamp", "1700000000"},
               {"webhook-signature", "v1,c2lnbmF0dXJlLW9uZQ== v1,c2lnbmF0dXJlLXR3bw=="}};
  ASSERT_EQ(call(client, r).status, 204u);

  const auto seen = server.seen();
  ASSERT_EQ(seen.size(), 1u);
  using Fields = std::vector<std::pair<std::string, std::string>>;
  Fields webhook_fields;
  for (const auto& [name, value] : seen[0].fields) {
    if (name.rfind("webhook-", 0) == 0) webhook_fields.emplace_back(name, value);
  }
  EXPECT_EQ(webhook_fields, (Fields{{"webhook-id", "evt_42"},
                                    {"webhook-timestamp", "1700000000"},
                                    {"webhook-signature", "v1,c2lnbmF0dXJlLW9uZQ== v1,c2lnbmF0dXJlLXR3bw=="}}));
  EXPECT_EQ(seen[0].content_type, "application/json");
  EXPECT_EQ(seen[0].user_agent, "tollgate");
  EXPECT_FALSE(seen[0].has_idempotency_key);
  EXPECT_EQ(seen[0].body, R"({"type":"credited"})");
}

TEST(ProviderClient, ARefusedConnectionIsNotConnected) {
  unsigned short port = 0;
  {
    asio::io_context io;
    tcp::acceptor closed(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = closed.local_endpoint().port();
  }  // nothing listens there any more
  ProviderClient client({});
  const Exchange e = call(client, post("http://127.0.0.1:" + std::to_string(port) + "/"));
  EXPECT_EQ(kind_name(e.kind), "not_connected") << e.body;
  EXPECT_NE(e.body.find("refused"), std::string::npos) << e.body;
}

TEST(ProviderClient, ABadUrlIsNotConnectedWithTheReason) {
  ProviderClient client({});
  for (const char* url : {"not a url", "ftp://127.0.0.1/x", "http:///nohost", "http://127.0.0.1:99999/", "http://127.0.0.1:0/",
                          "http://127.0.0.1:/"}) {
    const Exchange e = call(client, post(url));
    EXPECT_EQ(kind_name(e.kind), "not_connected") << url;
    EXPECT_NE(e.body.find("bad URL"), std::string::npos) << url << ": " << e.body;
  }
  EXPECT_TRUE(eventually_zero(client));
}

TEST(ProviderClient, AServerThatNeverAnswersTimesOutWithinTheTimeout) {
  TestServer server([](const Seen&) { return Reply{Reply::Then::hold}; });
  ProviderClient client({});
  const auto started = SteadyClock::now();
  const Exchange e = call(client, post(server.url(), "{}", milliseconds(200)));
  const auto elapsed = SteadyClock::now() - started;
  EXPECT_EQ(kind_name(e.kind), "timed_out") << e.body;
  EXPECT_GE(elapsed, milliseconds(190));
  EXPECT_LT(elapsed, milliseconds(1000));
  EXPECT_EQ(server.seen().size(), 1u);
  EXPECT_TRUE(server.wait_for_closes(1));  // the client closed the connection it gave up on
}

TEST(ProviderClient, AServerThatClosesAfterReadingTheRequestIsConnectionLost) {
  TestServer server([](const Seen&) { return Reply{Reply::Then::close_without_answer}; });
  ProviderClient client({});
  const Exchange e = call(client, post(server.url()));
  EXPECT_EQ(kind_name(e.kind), "connection_lost") << e.body;
  EXPECT_EQ(server.seen().size(), 1u);
}

TEST(ProviderClient, SequentialCallsReuseOneKeptAliveConnection) {
  TestServer server([](const Seen& s) { return answer(200, s.body); });
  ProviderClient client({});
  for (int i = 0; i < 3; ++i) {
    const Exchange e = call(client, post(server.url(), std::to_string(i)));
    EXPECT_EQ(e.status, 200u) << e.body;
    EXPECT_EQ(e.body, std::to_string(i));
  }
  EXPECT_EQ(server.accepts(), 1);
}

TEST(ProviderClient, WithoutAnIdlePoolEveryCallOpensAConnection) {
  TestServer server([](const Seen&) { return answer(200, "{}"); });
  ProviderClientOptions options;
  options.idle_connections_per_host_max = 0;
  ProviderClient client(options);
  EXPECT_EQ(call(client, post(server.url())).status, 200u);
  EXPECT_EQ(call(client, post(server.url())).status, 200u);
  EXPECT_EQ(server.accepts(), 2);
}

TEST(ProviderClient, AnIdleConnectionTheServerClosedIsNotReused) {
  // The answer says keep-alive, then the server closes: the next call must not be lost on it.
  TestServer server([](const Seen&) { return Reply{Reply::Then::answer, 200, "{}", true}; });
  ProviderClient client({});
  EXPECT_EQ(call(client, post(server.url())).status, 200u);
  ASSERT_TRUE(server.wait_for_closes(1));
  std::this_thread::sleep_for(milliseconds(20));  // the FIN reaches the client's socket
  const Exchange e = call(client, post(server.url()));
  EXPECT_EQ(kind_name(e.kind), "answered") << e.body;
  EXPECT_EQ(server.accepts(), 2);
}

TEST(ProviderClient, AnIdleConnectionOlderThanItsTtlIsNotReused) {
  TestServer server([](const Seen&) { return answer(200, "{}"); });
  ProviderClientOptions options;
  options.idle_connection_ttl = milliseconds(50);
  ProviderClient client(options);
  EXPECT_EQ(call(client, post(server.url())).status, 200u);
  std::this_thread::sleep_for(milliseconds(80));
  EXPECT_EQ(call(client, post(server.url())).status, 200u);
  EXPECT_EQ(server.accepts(), 2);
  EXPECT_TRUE(server.wait_for_closes(1));  // and the stale one was closed
}

TEST(ProviderClient, AnAnswerLargerThanTheBodyLimitIsConnectionLostAndSaysSo) {
  TestServer server([](const Seen&) { return answer(200, std::string(5000, 'x')); });
  ProviderClientOptions options;
  options.response_body_max_bytes = 4096;
  ProviderClient client(options);
  const Exchange e = call(client, post(server.url()));
  EXPECT_EQ(kind_name(e.kind), "connection_lost");
  EXPECT_NE(e.body.find("larger than 4096 bytes"), std::string::npos) << e.body;
}

TEST(ProviderClient, CancelMidCallEndsItPromptlyOnceAsConnectionLost) {
  TestServer server([](const Seen&) { return Reply{Reply::Then::hold}; });
  ProviderClient client({});
  Outcomes outcomes;
  auto handle = client.start(post(server.url(), "{}", milliseconds(10000)), outcomes.done());
  ASSERT_TRUE(server.wait_for_requests(1));
  const auto cancelled = SteadyClock::now();
  handle->cancel();
  ASSERT_TRUE(outcomes.wait_for(1));
  EXPECT_LT(SteadyClock::now() - cancelled, milliseconds(200));
  handle->cancel();  // idempotent
  EXPECT_TRUE(server.wait_for_closes(1));  // the socket was closed
  EXPECT_TRUE(eventually_zero(client));
  const auto all = outcomes.exchanges();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(kind_name(all[0].kind), "connection_lost") << all[0].body;
}

TEST(ProviderClient, ACancelRightAfterStartIsNotConnectedUnlessTheWriteHadBegun) {
  TestServer server([](const Seen&) { return answer(200, "{}"); });
  ProviderClient client({});
  Outcomes outcomes;
  client.start(post(server.url()), outcomes.done())->cancel();  // usually still connecting
  ASSERT_TRUE(outcomes.wait_for(1));
  std::this_thread::sleep_for(milliseconds(50));
  const auto all = outcomes.exchanges();
  ASSERT_EQ(all.size(), 1u);
  // On a slow machine (a sanitizer build) the connection to 127.0.0.1 may complete and the write
  // begin before the cancel runs: then, and only then, the answer is connection_lost. Never an
  // answer, never a time-out, and never not_connected for a request the server received.
  const std::string kind(kind_name(all[0].kind));
  EXPECT_TRUE(kind == "not_connected" || kind == "connection_lost") << kind << ": " << all[0].body;
  if (!server.seen().empty()) {
    EXPECT_EQ(kind, "connection_lost");
  }
}

TEST(ProviderClient, TwoHundredConcurrentCallsAllCompleteWithTheirOwnAnswers) {
  TestServer server([](const Seen& s) { return answer(200, "echo " + s.body); });
  ProviderClientOptions options;
  options.threads = 2;
  ProviderClient client(options);
  constexpr int kCalls = 200;
  std::vector<Outcomes> outcomes(kCalls);
  for (int i = 0; i < kCalls; ++i) client.start(post(server.url(), std::to_string(i)), outcomes[i].done());
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(outcomes[i].wait_for(1)) << i;
    const auto all = outcomes[i].exchanges();
    EXPECT_EQ(all.size(), 1u);
    EXPECT_EQ(all[0].status, 200u) << i << " " << kind_name(all[0].kind) << " " << all[0].body;
    EXPECT_EQ(all[0].body, "echo " + std::to_string(i));
  }
  EXPECT_TRUE(eventually_zero(client));
  // And the connections were kept: a second wave opens (almost) none.
  const int accepts = server.accepts();
  EXPECT_LE(accepts, kCalls);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(call(client, post(server.url(), "again")).status, 200u);
  EXPECT_EQ(server.accepts(), accepts);
}

TEST(ProviderClient, DestroyingTheClientRunsEveryDoneOfTheCallsInFlight) {
  TestServer server([](const Seen&) { return Reply{Reply::Then::hold}; });
  auto client = std::make_unique<ProviderClient>(ProviderClientOptions{});
  Outcomes outcomes;
  constexpr std::size_t kCalls = 20;
  for (std::size_t i = 0; i < kCalls; ++i) client->start(post(server.url(), "{}", milliseconds(30000)), outcomes.done());
  ASSERT_TRUE(server.wait_for_requests(kCalls));
  EXPECT_EQ(client->in_flight(), kCalls);
  const auto started = SteadyClock::now();
  client.reset();
  EXPECT_LT(SteadyClock::now() - started, milliseconds(1000));
  const auto all = outcomes.exchanges();  // no waiting: the destructor waited
  ASSERT_EQ(all.size(), kCalls);
  for (const Exchange& e : all) EXPECT_EQ(kind_name(e.kind), "connection_lost") << e.body;
  EXPECT_TRUE(server.wait_for_closes(static_cast<int>(kCalls)));
}

// --- https -------------------------------------------------------------------------------------------

struct Certificate {
  std::string cert_pem, key_pem;
};

void add_extension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  ASSERT_NE(extension, nullptr) << value;
  X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
}

std::string to_pem(const std::function<int(BIO*)>& write) {
  BIO* bio = BIO_new(BIO_s_mem());
  EXPECT_EQ(write(bio), 1);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return pem;
}

// A self-signed certificate (its own CA) with `names` as subjectAltName ("IP:…,DNS:…").
Certificate self_signed(const char* common_name, const char* names) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), static_cast<long>(SteadyClock::now().time_since_epoch().count() & 0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  add_extension(cert, NID_basic_constraints, "critical,CA:TRUE");
  add_extension(cert, NID_key_usage, "critical,digitalSignature,keyCertSign");
  add_extension(cert, NID_subject_alt_name, names);
  EXPECT_GT(X509_sign(cert, key, EVP_sha256()), 0);
  Certificate c{to_pem([&](BIO* b) { return PEM_write_bio_X509(b, cert); }),
                to_pem([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); })};
  X509_free(cert);
  EVP_PKEY_free(key);
  return c;
}

class ProviderClientTls : public ::testing::Test {
 protected:
  void serve(const Certificate& c) {
    server_context_.use_certificate_chain(asio::buffer(c.cert_pem));
    server_context_.use_private_key(asio::buffer(c.key_pem), ssl::context::pem);
    server_ = std::make_unique<TestServer>([](const Seen& s) { return answer(200, "secure " + s.body); }, &server_context_);
  }
  void TearDown() override {
    if (!ca_file_.empty()) std::filesystem::remove(ca_file_);
  }
  std::string ca_file(const Certificate& c) {
    ca_file_ = ::testing::TempDir() + "provider_client_ca_" + std::to_string(::getpid()) + ".pem";
    std::ofstream(ca_file_) << c.cert_pem;
    return ca_file_;
  }

  std::string ca_file_;
  ssl::context server_context_{ssl::context::tls_server};
  std::unique_ptr<TestServer> server_;
};

TEST_F(ProviderClientTls, ASelfSignedCertificateIsNotConnectedWithoutACaFile) {
  serve(self_signed("127.0.0.1", "IP:127.0.0.1,DNS:localhost"));
  ProviderClient client({});
  const Exchange e = call(client, post(server_->url()));
  EXPECT_EQ(kind_name(e.kind), "not_connected") << e.body;
  EXPECT_NE(e.body.find("certificate verif"), std::string::npos) << e.body;
  EXPECT_TRUE(server_->seen().empty());
}

TEST_F(ProviderClientTls, ACaFileThatTrustsTheCertificateIsAnswered) {
  const Certificate c = self_signed("127.0.0.1", "IP:127.0.0.1,DNS:localhost");
  serve(c);
  ProviderClientOptions options;
  options.ca_file = ca_file(c);
  ProviderClient client(options);
  Exchange e = call(client, post(server_->url(), "by address"));
  EXPECT_EQ(kind_name(e.kind), "answered") << e.body;
  EXPECT_EQ(e.body, "secure by address");
  e = call(client, post(server_->url("/", "localhost"), "by name"));  // SNI + DNS name check
  EXPECT_EQ(kind_name(e.kind), "answered") << e.body;
  EXPECT_EQ(e.body, "secure by name");
  EXPECT_EQ(call(client, post(server_->url(), "again")).body, "secure again");
  EXPECT_EQ(server_->accepts(), 2);  // the https connection to 127.0.0.1 was reused
}

TEST(ProviderClientTlsTimeout, AHandshakeThatNeverCompletesIsNotConnectedAfterTheConnectTimeout) {
  // The kernel completes TCP connects to a listening socket nobody accepts on; the TLS handshake
  // then waits for a server that never speaks.
  asio::io_context io;
  tcp::acceptor silent(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::string url = "https://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/";
  ProviderClientOptions options;
  options.connect_timeout = milliseconds(150);
  ProviderClient client(options);
  const auto started = SteadyClock::now();
  const Exchange e = call(client, post(url, "{}", milliseconds(5000)));
  const auto elapsed = SteadyClock::now() - started;
  EXPECT_EQ(kind_name(e.kind), "not_connected") << e.body;
  EXPECT_NE(e.body.find("within 150 ms"), std::string::npos) << e.body;
  EXPECT_GE(elapsed, milliseconds(140));
  EXPECT_LT(elapsed, milliseconds(1000));
}

TEST_F(ProviderClientTls, ATrustedCertificateForAnotherHostIsNotConnected) {
  const Certificate c = self_signed("provider.example", "DNS:provider.example");
  serve(c);
  ProviderClientOptions options;
  options.ca_file = ca_file(c);
  ProviderClient client(options);
  const Exchange e = call(client, post(server_->url()));
  EXPECT_EQ(kind_name(e.kind), "not_connected") << e.body;
  EXPECT_NE(e.body.find("does not name 127.0.0.1"), std::string::npos) << e.body;
  EXPECT_TRUE(server_->seen().empty());
}

}  // namespace
}  // namespace tollgate::jobs
