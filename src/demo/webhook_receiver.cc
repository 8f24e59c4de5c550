// The demo's webhook receiver (see webhook_receiver.h).
#include "demo/webhook_receiver.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "core/thread_annotations.h"

namespace tollgate::demo {

namespace receiver_net {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
}  // namespace receiver_net

using namespace receiver_net;

struct WebhookReceiver::Impl {
  explicit Impl(WebhookReceiverOptions o) : options(std::move(o)) {}

  const WebhookReceiverOptions options;
  std::atomic<std::uint64_t> answered{0};
  std::atomic<std::size_t> connections{0};
  std::atomic<bool> stopping{false};
  std::uint16_t bound_port = 0;  // constant after construction

  std::optional<asio::io_context> io;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> accept_retry;
  std::vector<std::thread> threads;
  Mutex stop_mu;
  bool stopped GUARDED_BY(stop_mu) = false;

  void accept();
  void stop();
};

namespace {

// One connection: read a request, hand it to the hook, answer 200, again while kept alive.
struct ReceiverSession : std::enable_shared_from_this<ReceiverSession> {
  ReceiverSession(WebhookReceiver::Impl& impl, tcp::socket socket) : impl(impl), stream(std::move(socket)) {}
  ~ReceiverSession() { impl.connections.fetch_sub(1); }

  WebhookReceiver::Impl& impl;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser;
  bhttp::response<bhttp::empty_body> response;

  void read() {
    if (impl.stopping.load()) return close();
    parser.emplace();
    parser->body_limit(impl.options.body_bytes_max);
    stream.expires_after(std::chrono::milliseconds(impl.options.idle_timeout_ms));
    bhttp::async_read(stream, buffer, *parser,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec == bhttp::error::body_limit) return answer(413, false);
    if (ec) return close();  // end of stream, time-out, reset, malformed: nothing to answer
    auto req = parser->release();
    const bool keep = req.keep_alive();
    if (impl.options.on_request) {
      ReceivedWebhook r;
      r.received = std::chrono::steady_clock::now();
      r.target = std::string(req.target());
      auto header = [&req](std::string_view name) {
        const auto it = req.find(name);
        return it == req.end() ? std::string() : std::string(it->value());
      };
      r.webhook_id = header("webhook-id");
      r.webhook_timestamp = header("webhook-timestamp");
      r.webhook_signature = header("webhook-signature");
      r.body = std::move(req.body());
      impl.options.on_request(std::move(r));
    }
    impl.answered.fetch_add(1);
    answer(200, keep);
  }

  void answer(unsigned status, bool keep) {
    keep = keep && !impl.stopping.load();
    response = {};
    response.result(status);
    response.keep_alive(keep);
    response.prepare_payload();
    bhttp::async_write(stream, response, [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
      if (ec || !keep) return self->close();
      self->read();
    });
  }

  void close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
  }
};

}  // namespace

void WebhookReceiver::Impl::accept() {
  acceptor->async_accept(asio::make_strand(*io), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (stopping.load() || ec == asio::error::operation_aborted) return;
      accept_retry->expires_after(std::chrono::milliseconds(10));  // out of descriptors: not a spin
      accept_retry->async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    beast::error_code ignored;
    if (connections.load() >= options.connections_max) {
      socket.close(ignored);
      return accept();
    }
    connections.fetch_add(1);
    socket.set_option(tcp::no_delay(true), ignored);
    auto session = std::make_shared<ReceiverSession>(*this, std::move(socket));
    asio::dispatch(session->stream.get_executor(), [session] { session->read(); });
    accept();
  });
}

void WebhookReceiver::Impl::stop() {
  MutexLock lock(stop_mu);
  if (stopped) return;
  stopped = true;
  stopping.store(true);
  io->stop();
  for (auto& t : threads) t.join();
  threads.clear();
  accept_retry.reset();
  acceptor.reset();
  io.reset();  // destroys the pending handlers: every remaining session closes
}

WebhookReceiver::WebhookReceiver(WebhookReceiverOptions options) {
  if (options.threads < 1 || options.threads > 64) throw std::invalid_argument("webhook receiver: threads must be 1 to 64");
  if (options.body_bytes_max < 1 || options.connections_max < 1 || options.idle_timeout_ms < 1) {
    throw std::invalid_argument("webhook receiver: body_bytes_max, connections_max and idle_timeout_ms must be >= 1");
  }
  impl_ = std::make_unique<Impl>(std::move(options));
  Impl& m = *impl_;
  m.io.emplace(m.options.threads);
  m.acceptor.emplace(*m.io);
  m.accept_retry.emplace(*m.io);
  beast::error_code ec;
  const auto address = asio::ip::make_address(m.options.host, ec);
  if (ec) throw std::invalid_argument("webhook receiver: " + m.options.host + " is not an IP address");
  const tcp::endpoint endpoint(address, m.options.port);
  m.acceptor->open(endpoint.protocol(), ec);
  if (!ec) m.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(endpoint, ec);
  if (!ec) m.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("webhook receiver: listen on " + m.options.host + ": " + ec.message());
  m.bound_port = m.acceptor->local_endpoint().port();
  m.accept();
  for (int i = 0; i < m.options.threads; ++i) m.threads.emplace_back([&m] { m.io->run(); });
}

WebhookReceiver::~WebhookReceiver() { stop(); }

void WebhookReceiver::stop() { impl_->stop(); }

std::uint16_t WebhookReceiver::port() const { return impl_->bound_port; }

std::string WebhookReceiver::url(const std::string& path) const {
  return "http://" + impl_->options.host + ":" + std::to_string(impl_->bound_port) + path;
}

std::uint64_t WebhookReceiver::requests() const { return impl_->answered.load(); }

}  // namespace tollgate::demo
