#include "jobs/provider_client.h"

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/url/parse.hpp>

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/parse.h"
#include "core/thread_annotations.h"

namespace tollgate::jobs {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using Strand = asio::strand<asio::io_context::executor_type>;
using Kind = Exchange::Kind;

// An answer's head larger than limits::kProviderAnswerHeadBytesMax is a broken answer
// (connection_lost). Idle connections are checked for age and for having been closed by the
// provider every limits::kProviderIdleSweepIntervalMs.
constexpr std::chrono::milliseconds kIdleSweepInterval{limits::kProviderIdleSweepIntervalMs};

// Where one request goes, from its URL.
struct Target {
  bool tls = false;
  std::string host;         // to connect to (IPv6 without brackets)
  std::uint16_t port_number = 0;
  std::string port;         // decimal, port_number as text
  std::string host_header;  // Host: as the URL spells it (with the port unless it is the default)
  std::string path;         // origin-form: path (at least "/") and query
  std::string pool_key;     // scheme://host:port
  bool host_is_ip = false;
};

std::optional<Target> parse_target(const std::string& url, std::string& reason) {
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed) {
    reason = "bad URL '" + url + "': " + parsed.error().message();
    return std::nullopt;
  }
  const boost::urls::url_view& u = *parsed;
  Target t;
  if (u.scheme_id() == boost::urls::scheme::https) {
    t.tls = true;
  } else if (u.scheme_id() != boost::urls::scheme::http) {
    reason = "bad URL '" + url + "': the scheme must be http or https";
    return std::nullopt;
  }
  switch (u.host_type()) {
    case boost::urls::host_type::ipv4:
      t.host = u.host_ipv4_address().to_string();
      t.host_is_ip = true;
      break;
    case boost::urls::host_type::ipv6:
      t.host = u.host_ipv6_address().to_string();
      t.host_is_ip = true;
      break;
    case boost::urls::host_type::name:
      t.host = u.host_name();
      break;
    default:
      reason = "bad URL '" + url + "': no host name or address";
      return std::nullopt;
  }
  if (t.host.empty()) {
    reason = "bad URL '" + url + "': no host";
    return std::nullopt;
  }
  std::transform(t.host.begin(), t.host.end(), t.host.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::uint16_t default_port = t.tls ? 443 : 80;
  std::uint16_t port = default_port;
  if (u.has_port()) {
    // Not port_number(): it wraps 99999 around to 34463.
    const auto value = parse_int(u.port(), 1, 65535);
    if (!value) {
      reason = "bad URL '" + url + "': the port must be 1..65535";
      return std::nullopt;
    }
    port = static_cast<std::uint16_t>(*value);
  }
  t.port_number = port;
  t.port = std::to_string(port);
  t.host_header = std::string(u.encoded_host());
  if (port != default_port) t.host_header += ":" + t.port;
  t.path = u.encoded_path().empty() ? std::string("/") : std::string(u.encoded_path());
  if (u.has_query()) t.path += "?" + std::string(u.encoded_query());
  t.pool_key = (t.tls ? "https://" : "http://") + std::string(u.encoded_host()) + ":" + t.port;
  return t;
}

// One TCP (or TLS over TCP) connection to one scheme://host:port. All its I/O runs on `strand`;
// while idle (in the pool) nothing is pending on it and only the pool's owner touches it.
struct Connection {
  Connection(Strand s, std::string key, ssl::context* tls_context) : strand(s), pool_key(std::move(key)) {
    if (tls_context != nullptr) {
      tls.emplace(strand, *tls_context);
    } else {
      plain.emplace(strand);
    }
  }
  tcp::socket& socket() { return tls ? tls->next_layer() : *plain; }
  void close() {
    beast::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }
  // An idle connection is usable if the provider has neither closed it nor sent anything since
  // the last answer (unsolicited bytes — a TLS close_notify, a stray answer — make it unusable).
  bool idle_and_open() {
    if (!socket().is_open()) return false;
    char byte;
    const ssize_t n = ::recv(socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  Strand strand;
  const std::string pool_key;
  std::optional<tcp::socket> plain;
  std::optional<ssl::stream<tcp::socket>> tls;
  beast::flat_buffer buffer;  // bytes read past an answer (none on a connection that is reused)
  bool connected = false;     // connected (and handshaken) at least once: a reuse skips that
  SteadyClock::time_point idle_since{};
};

}  // namespace

struct ProviderClient::Impl {
  explicit Impl(ProviderClientOptions o)
      : options(std::move(o)), tls_context(ssl::context::tls_client), work(io.get_executor()),
        sweep_strand(asio::make_strand(io)), sweep_timer(sweep_strand) {
    assert(options.threads >= 1);
    tls_context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                            ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    tls_context.set_verify_mode(ssl::verify_peer);
    if (options.ca_file.empty()) {
      tls_context.set_default_verify_paths();
    } else {
      tls_context.load_verify_file(options.ca_file);
    }
  }

  const ProviderClientOptions options;
  asio::io_context io;  // first: destroyed last, after every socket and timer
  ssl::context tls_context;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};

  Strand sweep_strand;
  asio::steady_timer sweep_timer;  // touched on sweep_strand only

  Mutex pool_mu;
  std::unordered_map<std::string, std::vector<std::shared_ptr<Connection>>> idle GUARDED_BY(pool_mu);

  Mutex calls_mu;
  CondVar calls_cv;
  std::list<std::weak_ptr<CallState>> calls GUARDED_BY(calls_mu);  // unfinished exchanges
  std::atomic<std::size_t> in_flight{0};

  // The most recently idle open connection for `key`, or nullptr.
  std::shared_ptr<Connection> take_idle(const std::string& key) {
    std::vector<std::shared_ptr<Connection>> dropped;  // closed outside the lock
    std::shared_ptr<Connection> found;
    {
      MutexLock lock(pool_mu);
      auto it = idle.find(key);
      if (it == idle.end()) return nullptr;
      const auto now = SteadyClock::now();
      while (!it->second.empty()) {
        std::shared_ptr<Connection> c = std::move(it->second.back());
        it->second.pop_back();
        if (now - c->idle_since < options.idle_connection_ttl && c->idle_and_open()) {
          found = std::move(c);
          break;
        }
        dropped.push_back(std::move(c));
      }
      if (it->second.empty()) idle.erase(it);
    }
    for (auto& c : dropped) c->close();
    return found;
  }

  // A connection whose exchange ended with a complete keep-alive answer (nothing pending on it).
  void give_back(std::shared_ptr<Connection> c) {
    if (!stopping.load() && options.idle_connections_per_host_max > 0) {
      MutexLock lock(pool_mu);
      auto& list = idle[c->pool_key];
      if (list.size() < options.idle_connections_per_host_max) {
        c->idle_since = SteadyClock::now();
        list.push_back(std::move(c));
        return;
      }
    }
    c->close();
  }

  void schedule_sweep() {
    sweep_timer.expires_after(kIdleSweepInterval);
    sweep_timer.async_wait([this](beast::error_code ec) {
      if (ec || stopping.load()) return;
      sweep();
      schedule_sweep();
    });
  }

  void sweep() {
    std::vector<std::shared_ptr<Connection>> dropped;
    {
      MutexLock lock(pool_mu);
      const auto now = SteadyClock::now();
      for (auto it = idle.begin(); it != idle.end();) {
        auto& list = it->second;
        for (auto& c : list) {
          if (now - c->idle_since >= options.idle_connection_ttl || !c->idle_and_open()) dropped.push_back(std::move(c));
        }
        std::erase(list, nullptr);
        it = list.empty() ? idle.erase(it) : std::next(it);
      }
    }
    for (auto& c : dropped) c->close();
  }

  void call_done() {
    MutexLock lock(calls_mu);
    in_flight.fetch_sub(1);
    calls_cv.notify_all();
  }
};

// One exchange. Everything but the constructor and cancel() runs on `strand` (its connection's);
// it lives while a handler holds it, so the buffers its pending operations use stay valid.
class CallState : public std::enable_shared_from_this<CallState> {
 public:
  CallState(ProviderClient::Impl& client, Strand strand, std::shared_ptr<Connection> connection, ProviderRequest request,
            std::function<void(Exchange)> done)
      : client_(client), strand_(strand), timer_(strand), request_(std::move(request)), done_(std::move(done)),
        conn_(std::move(connection)) {}

  std::list<std::weak_ptr<CallState>>::iterator registration;

  void start(Target target) {
    asio::post(strand_, [self = shared_from_this(), target = std::move(target)]() mutable { self->run(std::move(target)); });
  }

  void fail_now(std::string reason) {
    asio::post(strand_, [self = shared_from_this(), reason = std::move(reason)]() mutable {
      self->finish(Kind::not_connected, 0, std::move(reason));
    });
  }

  void cancel(const char* why) {
    asio::post(strand_, [self = shared_from_this(), why] {
      if (self->finished_) return;
      self->finish(self->sent_ ? Kind::connection_lost : Kind::not_connected, 0, why);
    });
  }

 private:
  enum class Phase : std::uint8_t { connecting, sending, receiving };

  void run(Target target) {
    target_ = std::move(target);
    deadline_ = SteadyClock::now() + request_.timeout;
    if (finished_) return;  // cancelled before it began
    if (conn_->connected) return on_ready();
    arm_timer(std::min(deadline_, SteadyClock::now() + client_.options.connect_timeout));
    if (target_.host_is_ip) {
      beast::error_code ec;
      const auto address = asio::ip::make_address(target_.host, ec);
      if (ec) return finish(Kind::not_connected, 0, "bad address " + target_.host + ": " + ec.message());
      endpoint_.emplace(address, target_.port_number);
      conn_->socket().async_connect(*endpoint_, [self = shared_from_this()](beast::error_code ec2) { self->on_connected(ec2); });
      return;
    }
    resolver_.emplace(strand_);
    resolver_->async_resolve(target_.host, target_.port,
                             [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
                               self->on_resolved(ec, std::move(results));
                             });
  }

  void on_resolved(beast::error_code ec, tcp::resolver::results_type results) {
    if (finished_) return;
    if (ec) return finish(Kind::not_connected, 0, "resolving " + target_.host + ": " + ec.message());
    asio::async_connect(conn_->socket(), results, [self = shared_from_this()](beast::error_code ec2, const tcp::endpoint&) {
      self->on_connected(ec2);
    });
  }

  void on_connected(beast::error_code ec) {
    if (finished_) return;
    if (ec) return finish(Kind::not_connected, 0, "connecting to " + target_.host + ":" + target_.port + ": " + ec.message());
    beast::error_code ignored;
    conn_->socket().set_option(tcp::no_delay(true), ignored);
    if (!target_.tls) return on_ready();
    auto& tls = *conn_->tls;
    if (!target_.host_is_ip && !SSL_set_tlsext_host_name(tls.native_handle(), target_.host.c_str())) {
      return finish(Kind::not_connected, 0, "TLS: cannot set the server name " + target_.host);
    }
    tls.set_verify_mode(ssl::verify_peer);
    tls.set_verify_callback(ssl::host_name_verification(target_.host));
    tls.async_handshake(ssl::stream_base::client, [self = shared_from_this()](beast::error_code ec2) { self->on_handshake(ec2); });
  }

  void on_handshake(beast::error_code ec) {
    if (finished_) return;
    if (ec) {
      std::string reason = "TLS handshake with " + target_.host + ":" + target_.port + " failed: " + ec.message();
      const long verify = SSL_get_verify_result(conn_->tls->native_handle());
      if (verify == X509_V_ERR_UNSPECIFIED) {
        // What OpenSSL records when the verify callback (host_name_verification) refuses a chain
        // that verified: the certificate is valid but names other hosts.
        reason += " (certificate verification: the certificate does not name " + target_.host + ")";
      } else if (verify != X509_V_OK) {
        reason += std::string(" (certificate verification: ") + X509_verify_cert_error_string(verify) + ")";
      }
      return finish(Kind::not_connected, 0, std::move(reason));
    }
    on_ready();
  }

  // Connected (new or reused): the request goes out now, under the total time-out.
  void on_ready() {
    conn_->connected = true;
    arm_timer(deadline_);
    phase_ = Phase::sending;
    sent_ = true;
    out_.emplace(request_.method == ProviderRequest::Method::post ? bhttp::verb::post : bhttp::verb::get, target_.path, 11);
    out_->set(bhttp::field::host, target_.host_header);
    out_->set(bhttp::field::user_agent, "tollgate");
    if (!request_.idempotency_key.empty()) out_->set("Idempotency-Key", request_.idempotency_key);
    for (const auto& [name, value] : request_.headers) out_->insert(name, value);
    if (request_.method == ProviderRequest::Method::post) {
      out_->set(bhttp::field::content_type, "application/json");
      out_->body() = std::move(request_.body);
    }
    out_->keep_alive(true);
    out_->prepare_payload();
    auto handler = [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_written(ec); };
    if (conn_->tls) {
      bhttp::async_write(*conn_->tls, *out_, std::move(handler));
    } else {
      bhttp::async_write(*conn_->plain, *out_, std::move(handler));
    }
  }

  void on_written(beast::error_code ec) {
    if (finished_) return;
    if (ec) return finish(Kind::connection_lost, 0, "writing the request: " + ec.message());
    out_.reset();  // the request's body is no longer needed
    phase_ = Phase::receiving;
    in_.emplace();
    in_->header_limit(limits::kProviderAnswerHeadBytesMax);
    in_->body_limit(client_.options.response_body_max_bytes);
    auto handler = [self = shared_from_this()](beast::error_code ec2, std::size_t) { self->on_read(ec2); };
    if (conn_->tls) {
      bhttp::async_read(*conn_->tls, conn_->buffer, *in_, std::move(handler));
    } else {
      bhttp::async_read(*conn_->plain, conn_->buffer, *in_, std::move(handler));
    }
  }

  void on_read(beast::error_code ec) {
    if (finished_) return;
    if (ec == bhttp::error::body_limit) {
      return finish(Kind::connection_lost, 0,
                    "the answer's body is larger than " + std::to_string(client_.options.response_body_max_bytes) +
                        " bytes (response_body_max_bytes); it was not read");
    }
    if (ec) return finish(Kind::connection_lost, 0, "reading the answer: " + ec.message());
    auto& answer = in_->get();
    const bool reusable = answer.keep_alive() && conn_->buffer.size() == 0;
    finish(Kind::answered, answer.result_int(), std::move(answer.body()), reusable);
  }

  void arm_timer(SteadyClock::time_point when) {
    const std::uint32_t generation = ++timer_generation_;
    timer_.expires_at(when);
    timer_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
      if (ec || self->finished_ || generation != self->timer_generation_) return;
      self->on_timer();
    });
  }

  void on_timer() {
    if (phase_ == Phase::connecting) {
      const auto ms = std::min(request_.timeout, client_.options.connect_timeout).count();
      return finish(Kind::not_connected, 0,
                    "no connection to " + target_.host + ":" + target_.port + " within " + std::to_string(ms) + " ms");
    }
    finish(Kind::timed_out, 0,
           std::string(phase_ == Phase::sending ? "the request was not written" : "no complete answer") + " within " +
               std::to_string(request_.timeout.count()) + " ms");
  }

  // The one end of every exchange: closes or pools the connection, then runs `done`.
  void finish(Kind kind, unsigned status, std::string body, bool reusable = false) {
    assert(!finished_);
    finished_ = true;
    ++timer_generation_;
    timer_.cancel();
    if (resolver_) resolver_->cancel();
    if (reusable) {
      client_.give_back(std::move(conn_));  // nothing is pending on it: its read has completed
    } else if (conn_) {
      conn_->close();  // pending operations end with operation_aborted; `this` outlives them
    }
    {
      MutexLock lock(client_.calls_mu);
      client_.calls.erase(registration);
    }
    {
      auto done = std::move(done_);
      done_ = nullptr;
      done(Exchange{kind, status, std::move(body)});
    }
    client_.call_done();
  }

  ProviderClient::Impl& client_;  // outlives every `done`; not touched after call_done()
  Strand strand_;
  asio::steady_timer timer_;
  std::uint32_t timer_generation_ = 0;  // a wait whose generation is stale is ignored
  ProviderRequest request_;
  std::function<void(Exchange)> done_;
  std::shared_ptr<Connection> conn_;
  Target target_;
  std::optional<tcp::resolver> resolver_;
  std::optional<tcp::endpoint> endpoint_;
  std::optional<bhttp::request<bhttp::string_body>> out_;
  std::optional<bhttp::response_parser<bhttp::string_body>> in_;
  SteadyClock::time_point deadline_{};
  Phase phase_ = Phase::connecting;
  bool sent_ = false;      // the write has begun: a failure from now on is connection_lost
  bool finished_ = false;  // `done` has run
};

void ProviderCall::cancel() {
  if (auto call = call_.lock()) call->cancel("cancelled");
}

ProviderClient::ProviderClient(ProviderClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  asio::post(impl_->sweep_strand, [impl = impl_.get()] { impl->schedule_sweep(); });
  for (int i = 0; i < impl_->options.threads; ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] { impl->io.run(); });
  }
}

ProviderClient::~ProviderClient() {
  Impl& impl = *impl_;
  impl.stopping.store(true);
  {
    MutexLock lock(impl.calls_mu);
    for (auto& weak : impl.calls) {
      if (auto call = weak.lock()) call->cancel("cancelled: the provider client is shutting down");
    }
    impl.calls_cv.wait(impl.calls_mu, [&] { return impl.in_flight.load() == 0; });
  }
  asio::post(impl.sweep_strand, [&impl] { impl.sweep_timer.cancel(); });
  impl.work.reset();
  for (auto& t : impl.threads) t.join();
  MutexLock lock(impl.pool_mu);
  impl.idle.clear();
}

std::shared_ptr<ProviderCall> ProviderClient::start(ProviderRequest request, std::function<void(Exchange)> done) {
  Impl& impl = *impl_;
  assert(done);
  std::string reason;
  std::optional<Target> target = parse_target(request.url, reason);
  std::shared_ptr<Connection> connection;
  if (target) {
    connection = impl.take_idle(target->pool_key);
    if (!connection) {
      connection = std::make_shared<Connection>(asio::make_strand(impl.io), target->pool_key,
                                                target->tls ? &impl.tls_context : nullptr);
    }
  }
  const Strand strand = connection ? connection->strand : asio::make_strand(impl.io);
  request.url.clear();
  request.url.shrink_to_fit();
  // Not make_shared: the handle's weak_ptr would keep the whole exchange's memory until the handle goes.
  std::shared_ptr<CallState> call(new CallState(impl, strand, std::move(connection), std::move(request), std::move(done)));
  {
    MutexLock lock(impl.calls_mu);
    impl.in_flight.fetch_add(1);
    call->registration = impl.calls.insert(impl.calls.end(), call);
  }
  if (target) {
    call->start(std::move(*target));
  } else {
    call->fail_now(std::move(reason));
  }
  return std::make_shared<ProviderCall>(call);
}

std::shared_ptr<CallHandle> ProviderClient::send_job(const ProviderConfig& provider, std::string_view client_request_id,
                                                     std::string_view input_json, Done done) {
  ProviderRequest request;
  request.method = ProviderRequest::Method::post;
  request.url = provider.url;
  request.idempotency_key = std::string(client_request_id);
  request.body = request_body(client_request_id, input_json);
  request.timeout = std::chrono::milliseconds(provider.timeout_ms);
  return start(std::move(request), std::move(done));
}

std::shared_ptr<CallHandle> ProviderClient::ask_status(const ProviderConfig& provider, std::string_view client_request_id,
                                                       Done done) {
  assert(provider.status_url.has_value());
  ProviderRequest request;
  request.method = ProviderRequest::Method::get;
  request.url = status_url_for(*provider.status_url, client_request_id);
  request.timeout = std::chrono::milliseconds(std::min<std::int64_t>(provider.timeout_ms, limits::kProviderStatusTimeoutMsMax));
  return start(std::move(request), std::move(done));
}

std::size_t ProviderClient::in_flight() const { return impl_->in_flight.load(); }

}  // namespace tollgate::jobs
