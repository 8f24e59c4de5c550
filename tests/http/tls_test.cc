// Native TLS for `tollgate serve` (issue 12): with tls_cert and tls_key set, the listener speaks TLS
// only. A real server process with a self-signed certificate made here by the openssl CLI, and a
// small blocking OpenSSL client: /healthz and an authenticated call over TLS 1.2 and 1.3 (keep-alive),
// plain HTTP on the TLS port refused without harm, a TLS 1.1 client refused, and clear start-up
// errors for a missing, unreadable, malformed or mismatched certificate or key.
//
// DISABLED_TlsBench.PlainAgainstTls measures handshakes and keep-alive requests per second, plain
// against TLS, in one run: build/tollgate_tests --gtest_also_run_disabled_tests --gtest_filter='*TlsBench*'
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "http/http_test_support.h"
#include "support/cli_output.h"
#include "tollgate/client.h"

namespace tollgate::httptest {
namespace {

// A self-signed P-256 certificate for 127.0.0.1 and its key, in `dir`.
struct CertFiles {
  std::string cert, key;
};

CertFiles make_cert(const testing::TempDir& dir, const std::string& name,
                    const std::string& names = "IP:127.0.0.1,DNS:localhost") {
  CertFiles f{dir.file(name + "-cert.pem"), dir.file(name + "-key.pem")};
  const ProcessResult r = testing::run_process(
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
       f.key, "-out", f.cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
       "subjectAltName=" + names});
  if (r.exit_code != 0) throw std::runtime_error("openssl req failed: " + r.err);
  return f;
}

// A blocking TLS client on one connection (keep-alive), verifying the server's certificate.
class TlsClient {
 public:
  TlsClient(std::uint16_t port, const std::string& ca_file, int min_version = TLS1_2_VERSION,
            int max_version = 0) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (min_version < TLS1_2_VERSION) {
      SSL_CTX_set_security_level(ctx_, 0);  // let this client even try TLS 1.0/1.1
      SSL_CTX_set_cipher_list(ctx_, "DEFAULT:@SECLEVEL=0");
    }
    SSL_CTX_set_min_proto_version(ctx_, min_version);
    if (max_version) SSL_CTX_set_max_proto_version(ctx_, max_version);
    if (!ca_file.empty()) {
      SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    conn_ = std::make_unique<RawConnection>(port);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, conn_->fd());
    SSL_set_tlsext_host_name(ssl_, "localhost");
    ok_ = SSL_connect(ssl_) == 1;
    if (!ok_) {
      char buf[256];
      ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
      error_ = buf;
    }
  }
  ~TlsClient() {
    if (ssl_) SSL_free(ssl_);
    if (ctx_) SSL_CTX_free(ctx_);
  }
  bool connected() const { return ok_; }
  const std::string& error() const { return error_; }
  std::string version() const { return SSL_get_version(ssl_); }

  // One request; the whole answer (head and Content-Length body) as text, "" if the connection broke.
  std::string request(const std::string& target, const std::string& key = "") {
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n";
    if (!key.empty()) req += "Authorization: Bearer " + key + "\r\n";
    req += "\r\n";
    if (SSL_write(ssl_, req.data(), static_cast<int>(req.size())) <= 0) return "";
    std::string out;
    for (;;) {
      const auto head_end = out.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::string lower = out.substr(0, head_end);
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto cl = lower.find("\r\ncontent-length:");
        const std::size_t length = cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 17));
        if (out.size() >= head_end + 4 + length) return out;
      }
      char buf[16 * 1024];
      const int n = SSL_read(ssl_, buf, sizeof buf);
      if (n <= 0) return "";
      out.append(buf, static_cast<std::size_t>(n));
    }
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::unique_ptr<RawConnection> conn_;
  bool ok_ = false;
  std::string error_;
};

ServerOptions tls_options(const CertFiles& f) {
  ServerOptions options = server_options();
  options.env = {{"TOLLGATE_TLS_CERT", f.cert}, {"TOLLGATE_TLS_KEY", f.key}};
  return options;
}

TEST(HttpTls, AnswersOverTls12And13WithKeepAlive) {
  testing::TempDir dir;
  const CertFiles f = make_cert(dir, "server");
  ServerProcess server(tls_options(f));
  EXPECT_NE(server.log().find(", TLS"), std::string::npos) << server.log();
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    TlsClient client(server.port(), f.cert, version, version);
    ASSERT_TRUE(client.connected()) << client.error();
    EXPECT_EQ(client.version(), version == TLS1_2_VERSION ? "TLSv1.2" : "TLSv1.3");
    for (int i = 0; i < 3; ++i) {  // one connection, several requests
      const std::string r = client.request("/healthz");
      EXPECT_EQ(raw_status(r), 200u) << r;
    }
    EXPECT_EQ(raw_status(client.request("/v1/holds", kAdminKey)), 200u);
    EXPECT_EQ(raw_status(client.request("/v1/holds", "tgk_wrong")), 401u);
  }
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

TEST(HttpTls, PlainHttpAndTls11AreRefusedWithoutHarm) {
  testing::TempDir dir;
  const CertFiles f = make_cert(dir, "server");
  ServerProcess server(tls_options(f));
  {
    RawConnection plain(server.port());
    ASSERT_TRUE(plain.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
    bool closed = false;
    const std::string answer = plain.read_until_closed(5s, &closed);
    EXPECT_TRUE(closed);
    EXPECT_EQ(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  }
  {
    TlsClient old(server.port(), f.cert, TLS1_1_VERSION, TLS1_1_VERSION);
    EXPECT_FALSE(old.connected()) << "a TLS 1.1 client was accepted";
  }
  {
    TlsClient ten(server.port(), f.cert, TLS1_VERSION, TLS1_VERSION);
    EXPECT_FALSE(ten.connected()) << "a TLS 1.0 client was accepted";
  }
  // Still serving, and the refusals are counted.
  ASSERT_TRUE(server.running());
  TlsClient client(server.port(), f.cert);
  ASSERT_TRUE(client.connected()) << client.error();
  // (A refused client may see the alert a moment before the server counts it: ask again briefly.)
  std::string metrics;
  for (int i = 0; i < 100; ++i) {
    metrics = client.request("/metrics");
    if (metrics.find("tollgate_tls_handshake_failures_total 3\n") != std::string::npos) break;
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_NE(metrics.find("tollgate_tls_handshake_failures_total 3\n"), std::string::npos) << metrics;
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

TEST(HttpTls, AHandshakeNeverStartedDoesNotHoldUpAGracefulStop) {
  testing::TempDir dir;
  const CertFiles f = make_cert(dir, "server");
  ServerProcess server(tls_options(f));
  RawConnection silent(server.port());  // connects, sends nothing
  TlsClient kept(server.port(), f.cert);  // an idle kept-alive TLS connection
  ASSERT_TRUE(kept.connected()) << kept.error();
  ASSERT_EQ(raw_status(kept.request("/healthz")), 200u);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);  // not the 10 s handshake or 30 s idle limit
}

TEST(HttpTls, BadCertificatesOrKeysStopStartUpWithAClearError) {
  testing::TempDir dir;
  const CertFiles a = make_cert(dir, "a");
  const CertFiles b = make_cert(dir, "b");
  const std::string garbage = dir.file("garbage.pem");
  std::ofstream(garbage) << "not a certificate\n";
  const std::string db = "sqlite:" + dir.file("t.db");
  auto start = [&](const testing::EnvVars& env) {
    return testing::run_tollgate({"serve", "--listen", "127.0.0.1:0", "--database", db}, env, 20s);
  };
  struct Case {
    testing::EnvVars env;
    std::string message;
  };
  const std::vector<Case> cases{
      {{{"TOLLGATE_TLS_CERT", dir.file("missing.pem")}, {"TOLLGATE_TLS_KEY", a.key}},
       "tls_cert: cannot read " + dir.file("missing.pem") + ": No such file or directory"},
      {{{"TOLLGATE_TLS_CERT", a.cert}, {"TOLLGATE_TLS_KEY", dir.file("nokey.pem")}}, "tls_key: cannot read"},
      {{{"TOLLGATE_TLS_CERT", garbage}, {"TOLLGATE_TLS_KEY", a.key}}, "is not a PEM certificate"},
      {{{"TOLLGATE_TLS_CERT", a.cert}, {"TOLLGATE_TLS_KEY", garbage}}, "is not a PEM private key"},
      {{{"TOLLGATE_TLS_CERT", a.cert}, {"TOLLGATE_TLS_KEY", b.key}}, "is not the private key of the certificate"},
      {{{"TOLLGATE_TLS_CERT", a.cert}}, "tls_cert is set but tls_key is not"},
      {{{"TOLLGATE_TLS_KEY", a.key}}, "tls_key is set but tls_cert is not"},
  };
  for (const Case& c : cases) {
    const ProcessResult r = start(c.env);
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "expected: " << c.message << "\ngot: " << r.err;
    EXPECT_EQ(r.err.find("listening on"), std::string::npos) << r.err;
  }
}

// --- the bench -------------------------------------------------------------------------------

double per_second(int n, std::chrono::steady_clock::time_point since) {
  return n / std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The C++ client (and so the CLI) over https: the certificate checked against a given CA file and
// against the URL's host; a refused certificate is a `tls` failure, reported at once (never retried).
client::Options https_options(std::uint16_t port, std::string ca_file, std::string host = "127.0.0.1") {
  client::Options o;
  o.base_url = "https://" + host + ":" + std::to_string(port);
  o.key = kAdminKey;
  o.tls_ca_file = std::move(ca_file);
  o.connect_timeout = 2s;
  o.request_timeout = 5s;
  o.retry.backoff_initial = 10ms;
  return o;
}

TEST(HttpTls, TheClientSpeaksHttpsWithAPrivateCa) {
  testing::TempDir dir;
  const CertFiles f = make_cert(dir, "server");
  ServerProcess server(tls_options(f));
  for (const std::string host : {"127.0.0.1", "localhost"}) {  // an IP address SAN, then a DNS one
    client::Client c(https_options(server.port(), f.cert, host));
    ASSERT_EQ(c.configuration_error(), nullptr) << *c.configuration_error();
    const std::string account = "tls-" + std::string(host == "localhost" ? "name" : "ip");
    ASSERT_EQ(c.create_account({.account_id = account}).status(), 201u);
    ASSERT_EQ(c.credit(account, 5, "seed-" + account).status(), 201u);
    client::Response hold = c.reserve({.account_id = account, .amount = 2, .request_id = "r-" + account});
    ASSERT_EQ(hold.status(), 201u) << hold.describe();
    const std::string hold_id(hold.json().at("hold_id").as_string());
    EXPECT_EQ(c.commit(hold_id, 1).status(), 200u);
    const client::Response a = c.get_account(account);
    ASSERT_EQ(a.status(), 200u) << a.describe();
    EXPECT_EQ(a.json().at("used").as_int64(), 1);
    EXPECT_EQ(a.json().at("available").as_int64(), 4);
  }
}

TEST(HttpTls, TheClientRefusesAnUnknownCertificateOrAnotherHostsAtOnce) {
  testing::TempDir dir;
  const CertFiles f = make_cert(dir, "server");
  const CertFiles other = make_cert(dir, "other");
  const CertFiles elsewhere = make_cert(dir, "elsewhere", "DNS:elsewhere.example");
  ServerProcess server(tls_options(f));
  ServerProcess misnamed(tls_options(elsewhere));
  struct Case {
    std::uint16_t port;
    std::string ca_file;
  };
  for (const Case& c : {Case{server.port(), other.cert}, Case{server.port(), ""}, Case{misnamed.port(), elsewhere.cert}}) {
    client::Client client(https_options(c.port, c.ca_file));
    const client::Response r = client.create_account({.account_id = "never"});
    ASSERT_TRUE(r.is_transport_error()) << r.describe();
    EXPECT_EQ(r.transport_error().failure, client::TransportFailure::tls) << r.describe();
    EXPECT_NE(r.transport_error().message.find("certificate"), std::string::npos) << r.describe();
    EXPECT_EQ(r.attempts(), 1) << "a refused certificate is not tried again";
  }
  // Nothing was created.
  client::Client good(https_options(server.port(), f.cert));
  EXPECT_EQ(good.get_account("never").status(), 404u);
}

TEST(HttpTls, TheClientRefusesBadTlsOptionsBeforeSending) {
  testing::TempDir dir;
  client::Options ca_for_http;
  ca_for_http.base_url = "http://127.0.0.1:1";
  ca_for_http.tls_ca_file = "/etc/hostname";
  client::Options missing_ca;
  missing_ca.base_url = "https://127.0.0.1:1";
  missing_ca.tls_ca_file = dir.file("missing.pem");
  for (client::Options o : {ca_for_http, missing_ca}) {
    client::Client c(o);
    ASSERT_NE(c.configuration_error(), nullptr) << o.base_url;
    EXPECT_NE(c.configuration_error()->find("tls_ca_file"), std::string::npos) << *c.configuration_error();
    EXPECT_EQ(c.get_account("a").transport_error().failure, client::TransportFailure::invalid_url);
  }
}

TEST(HttpTls, TheCliTakesAnHttpsUrlAndACaFile) {
  using testing::run_tollgate;
  testing::TempDir dir;
  const CertFiles f = make_cert(dir, "server");
  ServerProcess server(tls_options(f));
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port());
  ProcessResult r = run_tollgate({"account", "create", "cli-tls", "--url", url, "--ca-file", f.cert, "--json"},
                                 {{"TOLLGATE_KEY", kAdminKey}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = run_tollgate({"account", "show", "cli-tls", "--url", url, "--json"},
                   {{"TOLLGATE_KEY", kAdminKey}, {"TOLLGATE_CA_FILE", f.cert}});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("account_id"), "cli-tls");
  r = run_tollgate({"account", "show", "cli-tls", "--url", url}, {{"TOLLGATE_KEY", kAdminKey}});  // the system's CAs
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_NE(r.err.find("certificate was refused"), std::string::npos) << describe(r);
  EXPECT_EQ(r.err.find("attempts"), std::string::npos) << "tried once: " << describe(r);
  r = run_tollgate({"account", "show", "cli-tls", "--url", url, "--ca-file", dir.file("nope.pem")},
                   {{"TOLLGATE_KEY", kAdminKey}});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("tls_ca_file"), std::string::npos) << describe(r);
}

TEST(DISABLED_TlsBench, PlainAgainstTls) {
  testing::TempDir dir;
  const CertFiles f = make_cert(dir, "server");
  ServerProcess plain(server_options());
  ServerProcess tls(tls_options(f));
  const int kConnections = 2000, kRequests = 20000;
  // New connections: connect, one GET /healthz, close (for TLS: a full handshake each, no resumption).
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kConnections; ++i) {
    RawConnection c(plain.port());
    c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(raw_status(c.read_response(5s)), 200u);
  }
  const double plain_conn = per_second(kConnections, t0);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kConnections; ++i) {
    TlsClient c(tls.port(), f.cert);
    ASSERT_TRUE(c.connected()) << c.error();
    ASSERT_EQ(raw_status(c.request("/healthz")), 200u);
  }
  const double tls_conn = per_second(kConnections, t0);
  // Keep-alive: one connection, sequential requests.
  RawConnection pc(plain.port());
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRequests; ++i) {
    pc.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(raw_status(pc.read_response(5s)), 200u);
  }
  const double plain_req = per_second(kRequests, t0);
  TlsClient tc(tls.port(), f.cert);
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRequests; ++i) ASSERT_EQ(raw_status(tc.request("/healthz")), 200u);
  const double tls_req = per_second(kRequests, t0);
  std::printf("new connection + GET /healthz: plain %.0f/s, TLS 1.3 (P-256, full handshake) %.0f/s, ratio %.2f\n",
              plain_conn, tls_conn, tls_conn / plain_conn);
  std::printf("keep-alive GET /healthz, one connection: plain %.0f/s, TLS %.0f/s, ratio %.2f\n", plain_req, tls_req,
              tls_req / plain_req);
  EXPECT_EQ(plain.stop(SIGTERM), 0);
  EXPECT_EQ(tls.stop(SIGTERM), 0);
}

}  // namespace
}  // namespace tollgate::httptest
