#include "http/server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/clock.h"
#include "core/last_resort.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/thread_annotations.h"
#include "http/wire.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <list>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace tollgate::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

std::string new_request_id() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

bool request_id_is_valid(std::string_view id) {
  if (id.empty() || id.size() > limits::kRequestIdLengthMax) return false;
  for (char c : id) {
    if (c <= ' ' || c > '~' || c == '"' || c == '\\') return false;
  }
  return true;
}

// One JSON line per request on stderr, through a buffer flushed at least every kRequestLogFlushMs.
class RequestLog {
 public:
  void write(const std::string& line) {
    MutexLock lock(mu_);
    buffer_ += line;
    buffer_ += '\n';
    if (buffer_.size() > limits::kRequestLogBufferBytes) flush_locked();
  }
  void flush() {
    MutexLock lock(mu_);
    flush_locked();
  }

 private:
  void flush_locked() REQUIRES(mu_) {
    if (buffer_.empty()) return;
    std::fwrite(buffer_.data(), 1, buffer_.size(), stderr);
    std::fflush(stderr);
    buffer_.clear();
  }
  Mutex mu_;
  std::string buffer_ GUARDED_BY(mu_);
};

}  // namespace

// What every connection offers the server, plain or TLS.
struct SessionBase {
  virtual ~SessionBase() = default;
  virtual void stop_if_idle() = 0;
};

struct HttpServer::Impl {
  Impl(Api& api, Metrics& metrics, ServerLimits limits)
      : api(api), metrics(metrics), limits(limits), acceptor(io), signals(io, SIGTERM, SIGINT), log_timer(io) {}

  Api& api;
  Metrics& metrics;
  const ServerLimits limits;
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::signal_set signals;
  asio::steady_timer log_timer;
  RequestLog log;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> connections{0};

  std::unique_ptr<asio::ssl::context> tls;  // set: every connection speaks TLS (use_tls, before run)

  Mutex sessions_mu;
  std::list<std::weak_ptr<SessionBase>> sessions GUARDED_BY(sessions_mu);

  void accept();
  void begin_shutdown();
  void schedule_log_flush();
};

// One connection. Stream: beast::tcp_stream (plain HTTP) or beast::ssl_stream<beast::tcp_stream>
// (TLS: the handshake first, under the request time-out; then the same HTTP).
template <typename Stream>
struct Session : SessionBase, std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  template <typename... Tls>
  Session(HttpServer::Impl& server, tcp::socket socket, Tls&... tls) : server(server), stream(std::move(socket), tls...) {
    beast::error_code ec;
    const auto endpoint = tcp_layer().socket().remote_endpoint(ec);
    if (!ec) peer = endpoint.address().to_string();
  }
  ~Session() override { server.connections.fetch_sub(1, std::memory_order_relaxed); }

  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

  HttpServer::Impl& server;
  Stream stream;
  beast::flat_buffer buffer;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser;
  std::string peer;  // the client's IP address (failed authentications are counted by it)
  bool busy = false;  // a request is being handled or answered (touched on the strand only)
  std::string head, body;  // the answer being written (one at a time; touched on the strand only)

  beast::tcp_stream& tcp_layer() { return beast::get_lowest_layer(stream); }

  void start() {
    asio::dispatch(stream.get_executor(), [self = shared_from_this()] {
      if constexpr (kTls) {
        // Not busy: a shutdown cancels a handshake in progress (no request has been read yet).
        self->tcp_layer().expires_after(std::chrono::milliseconds(self->server.limits.request_timeout_ms));
        self->stream.async_handshake(asio::ssl::stream_base::server, [self](beast::error_code ec) {
          if (ec) {
            // Plain HTTP on the TLS port, an old protocol version, no common cipher, a time-out.
            if (ec != asio::error::operation_aborted) {
              self->server.metrics.edge.template add<&EdgeCounts::tls_handshake_failures>();
            }
            return self->close();
          }
          self->read_head();
        });
      } else {
        self->read_head();
      }
    });
  }

  void read_head() {
    if (server.stopping.load()) return close();
    parser.emplace();
    parser->header_limit(static_cast<std::uint32_t>(server.limits.header_bytes_max));
    parser->body_limit(server.limits.body_bytes_max);
    tcp_layer().expires_after(std::chrono::milliseconds(server.limits.idle_timeout_ms));
    bhttp::async_read_header(stream, buffer, *parser,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_head(ec); });
  }

  void on_head(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    busy = true;
    // A body announced larger than the limit is refused before it is sent.
    if (const auto length = parser->content_length(); length && *length > server.limits.body_bytes_max) {
      return on_read_error(bhttp::error::body_limit);
    }
    tcp_layer().expires_after(std::chrono::milliseconds(server.limits.request_timeout_ms));
    if (beast::iequals(parser->get()[bhttp::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(stream, asio::buffer(kContinue), [self = shared_from_this()](beast::error_code ec2, std::size_t) {
        if (ec2) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    bhttp::async_read(stream, buffer, *parser,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_body(ec); });
  }

  void on_read_error(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) {
      return answer_and_close(problem(413, "payload_too_large",
                                      "the body is larger than " + std::to_string(server.limits.body_bytes_max) + " bytes"));
    }
    if (ec == bhttp::error::header_limit) {
      return answer_and_close(problem(431, "invalid_request", "the request head is too large"));
    }
    if (ec == bhttp::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
      return close();
    }
    if (ec.category() == beast::error_code(bhttp::error::bad_target).category()) {
      // Any other parse error of the HTTP layer: the request is malformed.
      return answer_and_close(problem(400, "invalid_request", "malformed HTTP request: " + ec.message()));
    }
    close();
  }

  void on_body(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    tcp_layer().expires_never();  // the answer may wait on a durable commit; the server bounds that
    auto req = parser->release();
    std::string request_id(req["X-Request-Id"]);
    if (!request_id_is_valid(request_id)) request_id = new_request_id();
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    Request request = to_request(std::move(req), peer);
    const auto started = SteadyClock::now();
    auto self = shared_from_this();
    // The work guard keeps the I/O threads running until this request is answered, also while
    // the ledger holds it and during a graceful shutdown.
    auto guard = std::make_shared<asio::executor_work_guard<asio::io_context::executor_type>>(server.io.get_executor());
    Dispatch dispatch = [self](std::function<void()> work) { asio::post(self->stream.get_executor(), std::move(work)); };
    Reply reply = [self, guard, keep_alive, version, started, request_id, method = request.method](Response r) {
      asio::dispatch(self->stream.get_executor(), [self, guard, keep_alive, version, started, request_id, method,
                                                   r = std::move(r)]() mutable {
        self->write(std::move(r), keep_alive, version, started, request_id, method);
      });
    };
    server.api.handle(std::move(request), std::move(reply), std::move(dispatch));
  }

  void write(Response r, bool keep_alive, unsigned version, SteadyClock::time_point started, const std::string& request_id,
             const std::string& method) {
    const double seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
    server.metrics.observe_request(r.route, r.status, seconds);
    const std::string_view route = server.metrics.route_name(r.route);
    // request_id is checked (no quotes or control characters); method, route and code are tokens;
    // key and account ids are ids ([A-Za-z0-9._:@-], checked by the API).
    char ts[32];
    const std::size_t ts_len = format_rfc3339_ms(SystemClock().now_ms(), ts);
    char line[1024];
    int n = std::snprintf(line, sizeof line,
                          "{\"ts\":\"%.*s\",\"level\":\"info\",\"msg\":\"request\",\"request_id\":\"%s\",\"method\":\"%s\","
                          "\"route\":\"%.*s\",\"status\":%u,\"code\":\"%s\",\"duration_ms\":%.3f",
                          static_cast<int>(ts_len), ts, request_id.c_str(), method.c_str(), static_cast<int>(route.size()),
                          route.data(), r.status, r.code.c_str(), seconds * 1000);
    auto append = [&](const char* name, const std::string& value) {
      if (value.empty() || n < 0 || static_cast<std::size_t>(n) >= sizeof line) return;
      n += std::snprintf(line + n, sizeof line - static_cast<std::size_t>(n), ",\"%s\":\"%s\"", name, value.c_str());
    };
    append("key_id", r.key_id);
    append("account_id", r.account_id);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof line) n = static_cast<int>(std::strlen(line));
    std::string entry(line, static_cast<std::size_t>(n));
    if (!r.log_detail.empty()) {  // what the answer did not say (api.h, problem())
      entry += ",\"detail\":";
      append_json_string(entry, r.log_detail);
    }
    entry += '}';
    server.log.write(entry);
    // A 5xx problem names the request, so that its caller can point the operator at this log line.
    if (r.status >= 500 && r.content_type == "application/problem+json" && !r.body.empty() && r.body.front() == '{') {
      r.body.insert(1, "\"request_id\":\"" + request_id + "\",");
    }

    // The head, formatted into this connection's buffer (its capacity is reused request after
    // request), then head and body in one gather write. One answer is in flight per connection.
    const bool keep = keep_alive && !server.stopping.load();
    head.clear();
    head += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    head += std::to_string(r.status);
    head += ' ';
    head += bhttp::obsolete_reason(static_cast<bhttp::status>(r.status));
    head += "\r\nServer: tollgate\r\nContent-Type: ";
    head += r.content_type;
    head += "\r\nX-Request-Id: ";
    head += request_id;
    if (r.retry_after_s) {
      head += "\r\nRetry-After: ";
      head += std::to_string(*r.retry_after_s);
    }
    if (!r.allow.empty()) {
      head += "\r\nAllow: ";
      head += r.allow;
    }
    if (r.status == 401) head += "\r\nWWW-Authenticate: Bearer";  // RFC 9110 §11.6.1
    if (!r.etag.empty()) {
      head += "\r\nETag: ";
      head += r.etag;
    }
    head += r.headers;
    if (version == 10 && keep) head += "\r\nConnection: keep-alive";
    if (version != 10 && !keep) head += "\r\nConnection: close";
    if (r.status != 304) {  // a 304 has no body (RFC 9110 §15.4.5)
      head += "\r\nContent-Length: ";
      head += std::to_string(r.body.size());
    }
    head += "\r\n\r\n";
    // A HEAD's answer is its GET's head alone: the Content-Length above is the GET's body's.
    if (method == "HEAD") r.body.clear();
    body = std::move(r.body);
    tcp_layer().expires_after(std::chrono::milliseconds(server.limits.request_timeout_ms));
    const std::array<asio::const_buffer, 2> buffers{asio::buffer(head), asio::buffer(body)};
    asio::async_write(stream, buffers, [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
      self->busy = false;
      if (ec || !keep) return self->close();
      self->read_head();
    });
  }

  // Answers a request the transport refused (413, 431, 400) and closes: its X-Request-Id and
  // method are echoed when they were read before the refusal.
  void answer_and_close(Response r) {
    busy = true;
    std::string request_id = new_request_id();
    std::string method = "-";
    if (parser) {  // the fields parsed so far (a refusal may come in the middle of the head)
      const auto& head = parser->get();
      if (std::string id(head["X-Request-Id"]); request_id_is_valid(id)) request_id = std::move(id);
      if (!head.method_string().empty()) method = std::string(head.method_string());
    }
    parser.reset();
    write(std::move(r), false, 11, SteadyClock::now(), request_id, method);
  }

  // A TLS connection is closed without close_notify: every answer is delimited by its
  // Content-Length, so a truncation cannot pass for a whole answer.
  void close() {
    beast::error_code ignored;
    tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcp_layer().close();
  }

  // On shutdown: an idle connection closes now; a busy one closes after its answer.
  void stop_if_idle() override {
    asio::dispatch(stream.get_executor(), [self = shared_from_this()] {
      if (!self->busy) self->tcp_layer().cancel();
    });
  }
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (stopping.load() || ec == asio::error::operation_aborted) return;
      return accept();
    }
    if (connections.load() >= limits.connections_max) {
      metrics.edge.add<&EdgeCounts::connections_rejected>();
      beast::error_code ignored;
      socket.close(ignored);
      return accept();
    }
    connections.fetch_add(1, std::memory_order_relaxed);
    socket.set_option(tcp::no_delay(true));
    auto remember = [this](const std::shared_ptr<SessionBase>& session) {
      MutexLock lock(sessions_mu);
      // Forget sessions that ended, then remember this one (bounded by connections_max).
      for (auto it = sessions.begin(); it != sessions.end();) it = it->expired() ? sessions.erase(it) : std::next(it);
      sessions.push_back(session);
    };
    if (tls) {
      auto session = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, std::move(socket), *tls);
      remember(session);
      session->start();
    } else {
      auto session = std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket));
      remember(session);
      session->start();
    }
    accept();
  });
}

void HttpServer::Impl::begin_shutdown() {
  if (stopping.exchange(true)) return;
  api.begin_shutdown();
  asio::post(io, [this] {
    beast::error_code ignored;
    acceptor.close(ignored);
    signals.cancel(ignored);
    log_timer.cancel();
    MutexLock lock(sessions_mu);
    for (auto& weak : sessions) {
      if (auto s = weak.lock()) s->stop_if_idle();
    }
  });
}

void HttpServer::Impl::schedule_log_flush() {
  log_timer.expires_after(std::chrono::milliseconds(limits::kRequestLogFlushMs));
  log_timer.async_wait([this](beast::error_code ec) {
    log.flush();
    if (!ec && !stopping.load()) schedule_log_flush();
  });
}

HttpServer::HttpServer(Api& api, Metrics& metrics, ServerLimits limits)
    : impl_(std::make_unique<Impl>(api, metrics, limits)) {}

HttpServer::~HttpServer() = default;

namespace {

// OpenSSL's last error in words ("no start line", "key values mismatch"), and its queue emptied.
std::string openssl_error() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    const char* reason = ERR_reason_error_string(e);
    out = reason ? reason : buf;  // the last one is the closest to the cause
  }
  return out.empty() ? "unknown error" : out;
}

// A file that cannot be opened, in the system's words.
Status readable(const char* key, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    return invalid(std::string(key) + ": cannot read " + path + ": " + std::strerror(error));
  }
  ::close(fd);
  return ok_status();
}

}  // namespace

Status HttpServer::use_tls(const std::string& cert_file, const std::string& key_file) {
  if (auto s = readable("tls_cert", cert_file); !s) return s;
  if (auto s = readable("tls_key", key_file); !s) return s;
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                  SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1);
  // TLS 1.2: ECDHE and AEAD only (TLS 1.3's suites are all of that kind: OpenSSL's defaults).
  if (SSL_CTX_set_cipher_list(native, "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL:!SHA1:!MD5") != 1) {
    return invalid("TLS: the cipher list was refused: " + openssl_error());
  }
  if (SSL_CTX_use_certificate_chain_file(native, cert_file.c_str()) != 1) {
    return invalid("tls_cert: " + cert_file + " is not a PEM certificate (chain): " + openssl_error());
  }
  if (SSL_CTX_use_PrivateKey_file(native, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
      return invalid("tls_key: " + key_file + " is not the private key of the certificate in " + cert_file + ": " +
                     openssl_error());
    }
    return invalid("tls_key: " + key_file + " is not a PEM private key (or it is encrypted): " + openssl_error());
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return invalid("tls_key: " + key_file + " is not the private key of the certificate in " + cert_file + ": " +
                   openssl_error());
  }
  impl_->tls = std::move(ctx);
  return ok_status();
}

bool HttpServer::tls() const { return impl_->tls != nullptr; }

Result<std::uint16_t> HttpServer::listen(const std::string& host, std::uint16_t port) {
  beast::error_code ec;
  const auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) return invalid("listen: " + host + " is not an IP address");
  tcp::endpoint endpoint(address, port);
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Error::make(Code::unavailable, "listen on " + host + ":" + std::to_string(port) + ": " + ec.message());
  return a.local_endpoint().port();
}

void HttpServer::run() {
  impl_->signals.async_wait([this](beast::error_code ec, int) {
    if (!ec) impl_->begin_shutdown();
  });
  impl_->accept();
  impl_->schedule_log_flush();
  // The last-resort catch of the I/O threads (core/last_resort.h): a handler that throws — in the
  // API's handlers, in a completion posted to a connection's strand — is a bug; it is noted and the
  // thread runs on (Asio's run() may be called again after a handler threw). The request whose work
  // threw answers 500 `internal` through its reply guard (api.cc) when that work is destroyed.
  const auto serve = [this] {
    while (!run_last_resort("an I/O thread", [this] { impl_->io.run(); })) {
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->limits.threads; ++i) threads.emplace_back(serve);
  serve();
  for (auto& t : threads) t.join();
  impl_->log.flush();
}

void HttpServer::shutdown() { impl_->begin_shutdown(); }

std::size_t HttpServer::open_connections() const { return impl_->connections.load(); }

}  // namespace tollgate::http
