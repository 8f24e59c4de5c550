// tollgate client: synchronous calls over Boost.Beast. The contract and the retry policy are in
// include/tollgate/client.h.
//
// Each call drives asynchronous Beast operations on the client's private io_context until they
// complete: that is what lets beast::tcp_stream::expires_after bound connect, write and read (its
// synchronous operations have no time-outs).
#include "tollgate/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <cassert>
#include <random>
#include <thread>

#include "core/limits.h"
#include "core/version.h"

namespace tollgate::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;


bool is_unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

std::optional<std::int64_t> as_int64(const json::value* v) {
  if (v == nullptr) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= static_cast<std::uint64_t>(INT64_MAX)) {
    return static_cast<std::int64_t>(v->get_uint64());
  }
  return std::nullopt;
}

std::string as_string(const json::value* v) {
  if (v == nullptr || !v->is_string()) return {};
  return std::string(v->get_string());
}

// Decodes a non-2xx answer into a Problem.
Problem to_problem(const bhttp::response<bhttp::string_body>& answer) {
  Problem p;
  p.status = answer.result_int();
  boost::system::error_code ec;
  json::value body = json::parse(answer.body(), ec);
  if (!ec && body.is_object()) {
    const json::object& o = body.get_object();
    p.code = as_string(o.if_contains("code"));
    p.title = as_string(o.if_contains("title"));
    p.detail = as_string(o.if_contains("detail"));
    p.available = as_int64(o.if_contains("available"));
    p.requested = as_int64(o.if_contains("requested"));
    p.retry_after_ms = as_int64(o.if_contains("retry_after_ms"));
    if (const json::value* at = o.if_contains("expires_at"); at && at->is_string()) p.expires_at = as_string(at);
    if (const json::value* scope = o.if_contains("missing_scope"); scope && scope->is_string()) {
      p.missing_scope = as_string(scope);
    }
    p.body = std::move(body);
  }
  if (p.code.empty()) p.code = "http_" + std::to_string(p.status);
  if (p.title.empty()) p.title = std::string(answer.reason());
  if (p.detail.empty()) {
    // Not a problem document: keep the start of whatever came, on one line.
    std::string text = answer.body().substr(0, 200);
    std::replace(text.begin(), text.end(), '\n', ' ');
    p.detail = text.empty() ? std::string(answer.reason()) : text;
  }
  // The document's retry_after_ms is exact; the header only counts whole seconds.
  const auto retry_after = answer.find(bhttp::field::retry_after);
  if (!p.retry_after_ms && retry_after != answer.end()) {
    const std::string_view s = retry_after->value();
    std::int64_t seconds = 0;
    bool digits = !s.empty() && s.size() <= 6;
    for (char c : s) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) seconds = seconds * 10 + (c - '0');
    }
    if (digits) p.retry_after_ms = seconds * 1000;
  }
  return p;
}

Response interpret(const bhttp::response<bhttp::string_body>& answer) {
  const unsigned status = answer.result_int();
  if (status < 200 || status > 299) return Response::refused(to_problem(answer));
  const std::string_view content_type = answer[bhttp::field::content_type];
  const bool is_json = content_type.find("json") != std::string_view::npos;
  if (!is_json) return Response::success(status, json::value(json::string(answer.body())));
  boost::system::error_code ec;
  json::value body = json::parse(answer.body(), ec);
  if (ec) {
    return Response::failed({TransportFailure::bad_response,
                             "the " + std::to_string(status) + " answer is not valid JSON: " + ec.message()});
  }
  return Response::success(status, std::move(body));
}

// A failed attempt, and whether the request might have reached the server.
struct AttemptFailure {
  TransportError error;
  bool maybe_delivered = true;
};

}  // namespace

std::string_view failure_name(TransportFailure failure) {
  switch (failure) {
    case TransportFailure::invalid_url: return "invalid_url";
    case TransportFailure::resolve: return "resolve";
    case TransportFailure::connect: return "connect";
    case TransportFailure::tls: return "tls";
    case TransportFailure::timeout: return "timeout";
    case TransportFailure::connection_lost: return "connection_lost";
    case TransportFailure::bad_response: return "bad_response";
  }
  return "unknown";
}

// --- Response ---------------------------------------------------------------------------------------
Response Response::success(unsigned status, boost::json::value body) {
  return Response(Success{status, std::move(body)});
}
Response Response::refused(Problem problem) { return Response(std::move(problem)); }
Response Response::failed(TransportError error) { return Response(std::move(error)); }

unsigned Response::status() const noexcept {
  if (const auto* s = std::get_if<Success>(&value_)) return s->status;
  if (const auto* p = std::get_if<Problem>(&value_)) return p->status;
  return 0;
}

const boost::json::value& Response::json() const {
  assert(ok());
  return std::get<Success>(value_).body;
}

const Problem& Response::problem() const {
  assert(is_problem());
  return std::get<Problem>(value_);
}

const TransportError& Response::transport_error() const {
  assert(is_transport_error());
  return std::get<TransportError>(value_);
}

std::string Response::code() const {
  if (const auto* p = std::get_if<Problem>(&value_)) return p->code;
  if (const auto* t = std::get_if<TransportError>(&value_)) return std::string(failure_name(t->failure));
  return {};
}

std::string Response::describe() const {
  if (const auto* p = std::get_if<Problem>(&value_)) {
    std::string out = p->code + ": " + p->detail;
    if (p->available || p->requested) {
      out += " (";
      if (p->available) out += "available " + std::to_string(*p->available);
      if (p->available && p->requested) out += ", ";
      if (p->requested) out += "requested " + std::to_string(*p->requested);
      out += ")";
    }
    if (p->expires_at) out += " (expires_at " + *p->expires_at + ")";
    // Only the document's: a 503's Retry-After is the client's business (it waits and resends).
    const bool in_document = p->body.is_object() && p->body.get_object().contains("retry_after_ms");
    if (p->retry_after_ms && in_document) out += " (retry_after_ms " + std::to_string(*p->retry_after_ms) + ")";
    return out;
  }
  if (const auto* t = std::get_if<TransportError>(&value_)) return t->message;
  return {};
}

// --- Client::Impl ----------------------------------------------------------------------------------
struct Client::Impl {
  explicit Impl(Options o) : options(std::move(o)) { configure(); }

  // Constant after construction.
  Options options;
  std::optional<std::string> configuration_error;
  std::string host;         // to connect to: a name or an IP address (no brackets)
  std::string port;         // decimal
  std::string host_header;  // "host:port" as written in the URL
  bool host_is_address = false;
  std::optional<asio::ssl::context> tls;  // https only: TLS 1.2+, peer verification on

  // The connection (touched by one thread at a time: see the header).
  asio::io_context io{1};
  std::optional<beast::tcp_stream> stream;  // set while a plain connection is open
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_stream;  // set while a TLS connection is open
  beast::flat_buffer buffer;
  // Added to request_timeout for the call under way (a long poll: get_job with wait_ms).
  std::chrono::milliseconds request_timeout_extra{0};
  // The call under way's end (Options::call_timeout), or nullopt when it has none.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // The back-off's jitter (seeded from the OS's random source).
  std::mt19937_64 jitter{std::random_device{}()};

  // What is left of the call's time limit (never negative); `fallback` when it has none.
  std::chrono::milliseconds left_or(std::chrono::milliseconds fallback) const {
    if (!deadline) return fallback;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
    return std::clamp(left, std::chrono::milliseconds(0), fallback);
  }
  bool out_of_time() const { return deadline && std::chrono::steady_clock::now() >= *deadline; }
  std::string time_limit_text() const {
    return "the call's time limit of " + std::to_string(options.call_timeout.count()) + " ms";
  }

  static bool valid(const RetryPolicy& retry) { return retry.attempts_max >= 1 && retry.budget.count() >= 0; }

  void configure() {
    auto fail = [this](std::string why) { configuration_error = "base URL \"" + options.base_url + "\": " + why; };
    if (!valid(options.retry)) return fail("retry.attempts_max must be at least 1 and retry.budget not negative");
    if (options.call_timeout.count() < 0) return fail("call_timeout must not be negative");
    auto parsed = boost::urls::parse_absolute_uri(options.base_url);
    if (!parsed) return fail("not an absolute URL like http://127.0.0.1:8080");
    const boost::urls::url_view& url = *parsed;
    if (url.scheme() != "http" && url.scheme() != "https") return fail("the scheme must be http or https");
    const bool https = url.scheme() == "https";
    if (!https && !options.tls_ca_file.empty()) return fail("tls_ca_file is for an https URL; this one is http");
    if (url.has_userinfo()) return fail("user info is not supported; pass the key separately");
    if (!(url.encoded_path().empty() || url.encoded_path() == "/")) return fail("a path is not supported; give http://host:port");
    if (url.has_query() || url.has_fragment()) return fail("a query or fragment is not supported");
    if (url.encoded_host().empty()) return fail("the host is missing");
    if (url.has_port() && (url.port_number() == 0)) return fail("the port must be 1-65535");
    host = std::string(url.host_address());  // an IPv6 literal without its brackets
    port = url.has_port() ? std::string(url.port()) : std::string(https ? "443" : "80");
    host_header = std::string(url.encoded_host_and_port());
    boost::system::error_code ec;
    asio::ip::make_address(host, ec);
    host_is_address = !ec;
    if (options.request_id_prefix.size() > 100) return fail("request_id_prefix is longer than 100 characters");
    if (https) {
      if (auto why = configure_tls()) return fail(*why);
    }
  }

  // The TLS context of an https URL: TLS 1.2 or 1.3 only, the peer's certificate verified against
  // tls_ca_file or the system's CAs (the host itself is checked per connection, in connect()).
  std::optional<std::string> configure_tls() {
    tls.emplace(asio::ssl::context::tls_client);
    tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                     asio::ssl::context::no_compression);
    tls->set_verify_mode(asio::ssl::verify_peer);
    beast::error_code ec;
    if (options.tls_ca_file.empty()) {
      tls->set_default_verify_paths(ec);
      if (ec) return "the system's CA certificates cannot be loaded: " + ec.message();
    } else {
      tls->load_verify_file(options.tls_ca_file, ec);
      if (ec) return "tls_ca_file " + options.tls_ca_file + " cannot be used (a PEM file of CA certificates): " + ec.message();
    }
    return std::nullopt;
  }

  bool connected() const { return stream.has_value() || tls_stream.has_value(); }
  beast::tcp_stream& tcp_layer() { return tls_stream ? beast::get_lowest_layer(*tls_stream) : *stream; }

  // Calls f with the open connection's stream: the plain one or the TLS one.
  template <class F>
  void with_stream(F&& f) {
    if (tls_stream) {
      f(*tls_stream);
    } else {
      f(*stream);
    }
  }

  // Runs the I/O context until the operations started on it are done.
  void run() {
    io.restart();
    io.run();
  }

  // Closes the connection (a TLS one without close_notify: nothing more is read from it).
  void close() {
    if (connected()) {
      beast::error_code ignored;
      tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
      tcp_layer().close();
      stream.reset();
      tls_stream.reset();
    }
    buffer.consume(buffer.size());
  }

  std::optional<AttemptFailure> connect() {
    const std::string where = host_header;
    tcp::resolver::results_type endpoints;
    beast::error_code ec;
    tcp::resolver resolver(io);
    if (host_is_address) {
      endpoints = resolver.resolve(host, port, tcp::resolver::numeric_host | tcp::resolver::numeric_service, ec);
    } else {
      endpoints = resolver.resolve(host, port, tcp::resolver::numeric_service, ec);
    }
    if (ec) return AttemptFailure{{TransportFailure::resolve, "resolve " + host + ": " + ec.message()}, false};
    if (tls) {
      tls_stream.emplace(io, *tls);
    } else {
      stream.emplace(io);
    }
    const auto connect_limit = left_or(options.connect_timeout);
    const bool cut = connect_limit < options.connect_timeout;
    tcp_layer().expires_after(connect_limit);
    tcp_layer().async_connect(endpoints, [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
    run();
    if (ec) {
      stream.reset();
      tls_stream.reset();
      if (ec == beast::error::timeout && cut) {
        return AttemptFailure{{TransportFailure::timeout, "connect to " + where + ": no connection within " + time_limit_text()},
                              false};
      }
      const std::string why = ec == beast::error::timeout
                                  ? "no connection within " + std::to_string(options.connect_timeout.count()) + " ms"
                                  : ec.message();
      return AttemptFailure{{TransportFailure::connect, "connect to " + where + ": " + why}, false};
    }
    tcp_layer().socket().set_option(tcp::no_delay(true), ec);
    if (tls_stream) return handshake(cut);
    return std::nullopt;
  }

  // The TLS handshake on a new connection, within what is left of the connect time-out; the
  // certificate must name the URL's host (a DNS name, or an IP address in its subjectAltName).
  std::optional<AttemptFailure> handshake(bool cut) {
    const std::string where = host_header;
    if (!host_is_address && !SSL_set_tlsext_host_name(tls_stream->native_handle(), host.c_str())) {
      close();
      return AttemptFailure{{TransportFailure::tls, "TLS with " + where + ": the server name cannot be set"}, false};
    }
    tls_stream->set_verify_callback(asio::ssl::host_name_verification(host));
    beast::error_code ec;
    tls_stream->async_handshake(asio::ssl::stream_base::client, [&ec](beast::error_code e) { ec = e; });
    run();
    if (!ec) return std::nullopt;
    const long verify = SSL_get_verify_result(tls_stream->native_handle());
    close();
    if (ec == beast::error::timeout) {
      return AttemptFailure{{cut ? TransportFailure::timeout : TransportFailure::connect,
                             "TLS with " + where + ": no handshake within " +
                                 (cut ? time_limit_text() : std::to_string(options.connect_timeout.count()) + " ms")},
                            false};
    }
    if (verify != X509_V_OK) {
      return AttemptFailure{{TransportFailure::tls, "TLS with " + where + ": the server's certificate was refused: " +
                                                        X509_verify_cert_error_string(verify)},
                            false};
    }
    return AttemptFailure{{TransportFailure::tls, "TLS with " + where + ": the handshake failed: " + ec.message()}, false};
  }

  // One exchange: (re)connects if needed, writes the request, reads the whole answer.
  std::variant<bhttp::response<bhttp::string_body>, AttemptFailure> exchange(
      const bhttp::request<bhttp::string_body>& request) {
    for (int stale_retries = 0;; ++stale_retries) {
      const bool reused = connected();
      if (!reused) {
        if (auto failure = connect()) return *failure;
      }
      bhttp::response_parser<bhttp::string_body> parser;
      parser.body_limit(limits::kClientAnswerBytesMax);
      parser.header_limit(limits::kClientAnswerHeadBytesMax);
      beast::error_code ec;
      const auto attempt_limit = options.request_timeout + request_timeout_extra;
      const auto request_limit = left_or(attempt_limit);
      const bool cut = request_limit < attempt_limit;
      tcp_layer().expires_after(request_limit);
      with_stream([&](auto& s) {
        bhttp::async_write(s, request, [this, &s, &ec, &parser](beast::error_code e, std::size_t) {
          if (e) {
            ec = e;
            return;
          }
          bhttp::async_read(s, buffer, parser, [&ec](beast::error_code e2, std::size_t) { ec = e2; });
        });
      });
      run();
      if (!ec) {
        auto answer = parser.release();
        if (!answer.keep_alive()) close();
        return answer;
      }
      const bool nothing_came = !parser.got_some();
      close();
      const bool closed_by_peer = ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
                                  ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
                                  ec == asio::ssl::error::stream_truncated;
      // A kept-alive connection that the server closed while idle: send once more on a new one.
      if (reused && nothing_came && closed_by_peer && stale_retries == 0) continue;
      if (ec == beast::error::timeout && cut) {
        return AttemptFailure{{TransportFailure::timeout, "no answer from " + host_header + " within " + time_limit_text()}};
      }
      if (ec == beast::error::timeout) {
        return AttemptFailure{{TransportFailure::timeout, "no answer from " + host_header + " within " +
                                                              std::to_string((options.request_timeout + request_timeout_extra).count()) + " ms"}};
      }
      if (closed_by_peer || ec.category() == asio::error::get_system_category() ||
          ec.category() == asio::error::get_ssl_category()) {
        return AttemptFailure{{TransportFailure::connection_lost, "connection to " + host_header + " lost: " + ec.message()}};
      }
      return AttemptFailure{{TransportFailure::bad_response, "bad answer from " + host_header + ": " + ec.message()}};
    }
  }

  // A request's method, target and the header fields of every call (no body yet).
  bhttp::request<bhttp::string_body> new_request(bhttp::verb verb, std::string_view target) const {
    bhttp::request<bhttp::string_body> request{verb, std::string(target), 11};
    request.set(bhttp::field::host, host_header);
    request.set(bhttp::field::user_agent, std::string("tollgate-client/") + kVersion);
    request.set(bhttp::field::accept, "application/json");
    request.set("X-Request-Id", Client::new_request_id("c-"));  // one per logical call: joins the server's log lines
    if (!options.key.empty()) request.set(bhttp::field::authorization, "Bearer " + options.key);
    request.keep_alive(true);
    return request;
  }

  Response perform(bhttp::verb verb, std::string_view target, const json::value* body, Resend resend,
                   bool retry_insufficient_credits) {
    auto request = new_request(verb, target);
    if (body != nullptr) {
      request.set(bhttp::field::content_type, "application/json");
      request.body() = json::serialize(*body);
    }
    request.prepare_payload();
    return send(request, resend, retry_insufficient_credits);
  }

  // Sends `request` (built once: every attempt sends exactly these bytes) under the retry policy.
  Response send(const bhttp::request<bhttp::string_body>& request, Resend resend, bool retry_insufficient_credits) {
    if (configuration_error) return Response::failed({TransportFailure::invalid_url, *configuration_error});
    const RetryPolicy& policy = options.retry;
    const auto started = std::chrono::steady_clock::now();
    auto backoff = policy.backoff_initial;
    bool asked_again_for_credits = false;
    // The call's time limit covers every attempt and wait below; cleared when the call returns.
    struct DeadlineScope {
      Impl& impl;
      ~DeadlineScope() { impl.deadline.reset(); }
    } deadline_scope{*this};
    if (options.call_timeout.count() > 0) deadline = started + options.call_timeout;
    for (int attempt = 1;; ++attempt) {
      auto outcome = exchange(request);
      // Waits before the next attempt; false (no wait) when out of attempts, or when the wait would
      // end after the retry budget or the call's time limit.
      bool stopped_by_time_limit = false;
      auto wait_then_retry = [&](std::optional<std::int64_t> retry_after_ms) {
        if (attempt >= policy.attempts_max) return false;
        if (out_of_time()) {
          stopped_by_time_limit = true;
          return false;
        }
        std::uniform_int_distribution<std::int64_t> half_to_all(backoff.count() / 2, backoff.count());
        auto wait = std::chrono::milliseconds(half_to_all(jitter));
        if (retry_after_ms) wait = std::max(wait, std::chrono::milliseconds(*retry_after_ms));
        const auto resume = std::chrono::steady_clock::now() + wait;
        if (resume > started + policy.budget) return false;
        if (deadline && resume >= *deadline) {
          stopped_by_time_limit = true;
          return false;
        }
        std::this_thread::sleep_for(wait);
        backoff = std::min(backoff * 2, policy.backoff_max);
        return true;
      };
      if (auto* failure = std::get_if<AttemptFailure>(&outcome)) {
        // A refused certificate or a failed handshake is the same on every attempt.
        const bool may_resend = (resend == Resend::safe || !failure->maybe_delivered) &&
                                failure->error.failure != TransportFailure::tls;
        if (may_resend && wait_then_retry(std::nullopt)) continue;
        Response r = Response::failed(std::move(failure->error));
        if (stopped_by_time_limit && r.transport_error().message.find(time_limit_text()) == std::string::npos) {
          // Another attempt was due, but the call's time limit ends before it could be made.
          r = Response::failed({TransportFailure::timeout,
                                r.transport_error().message + "; " + time_limit_text() + " ran out"});
        }
        r.set_attempts(attempt);
        return r;
      }
      Response r = interpret(std::get<bhttp::response<bhttp::string_body>>(outcome));
      const unsigned status = r.status();
      const bool retryable = status == 502 || status == 503 || status == 504;
      if (retryable && r.is_problem() && resend == Resend::safe && wait_then_retry(r.problem().retry_after_ms)) {
        continue;
      }
      if (retry_insufficient_credits && policy.retry_insufficient_credits_once && !asked_again_for_credits &&
          r.is_problem() && r.problem().code == "insufficient_credits" && !out_of_time()) {
        asked_again_for_credits = true;
        continue;
      }
      r.set_attempts(attempt);
      return r;
    }
  }
};

// --- Client ----------------------------------------------------------------------------------------
Client::Client(Options options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

const std::string* Client::configuration_error() const noexcept {
  return impl_->configuration_error ? &*impl_->configuration_error : nullptr;
}
const Options& Client::options() const noexcept { return impl_->options; }

bool Client::set_retry(const RetryPolicy& retry) {
  if (!Impl::valid(retry)) return false;
  impl_->options.retry = retry;
  return true;
}

std::string Client::new_request_id(std::string_view prefix) {
  // random_device reads the OS's random source (getrandom) on Linux; one per call is cheap enough.
  std::random_device device;
  const std::uint64_t bits = (std::uint64_t{device()} << 32) | device();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  return std::string(prefix) + hex;
}

std::string Client::encode_component(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  // "." and ".." as a whole segment would be read as a relative path: encode them.
  const bool dots = text == "." || text == "..";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (!dots && (is_unreserved(c) || c == ':' || c == '@')) {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xF];
    }
  }
  return out;
}

Response Client::call(std::string_view method, std::string_view target, const boost::json::value* body, Resend resend) {
  const bhttp::verb verb = bhttp::string_to_verb(method);
  if (verb == bhttp::verb::unknown) {
    return Response::failed({TransportFailure::invalid_url, "unknown HTTP method " + std::string(method)});
  }
  return impl_->perform(verb, target, body, resend, false);
}

Response Client::call_raw(std::string_view method, std::string_view target, std::string body,
                          const std::vector<Header>& headers, Resend resend) {
  const bhttp::verb verb = bhttp::string_to_verb(method);
  if (verb == bhttp::verb::unknown) {
    return Response::failed({TransportFailure::invalid_url, "unknown HTTP method " + std::string(method)});
  }
  auto request = impl_->new_request(verb, target);
  request.set(bhttp::field::content_type, "application/json");
  for (const auto& [name, value] : headers) {
    const bool bad_name = name.empty() || name.find_first_of(":\r\n") != std::string::npos;
    if (bad_name || value.find_first_of("\r\n") != std::string::npos) {
      return Response::failed({TransportFailure::invalid_url,
                               "header " + name + ": an empty name, or a name or value with ':' (name), CR or LF; "
                               "nothing was sent"});
    }
    request.set(name, value);
  }
  request.body() = std::move(body);
  request.prepare_payload();
  return impl_->send(request, resend, false);
}

Response Client::create_account(const CreateAccountRequest& r) {
  json::value body = json::object{{"account_id", r.account_id}};
  if (r.overdraft_limit) body.as_object()["overdraft_limit"] = *r.overdraft_limit;
  if (r.max_active_holds) body.as_object()["max_active_holds"] = *r.max_active_holds;
  return impl_->perform(bhttp::verb::post, "/v1/accounts", &body, Resend::safe, false);
}

Response Client::get_account(std::string_view account_id) {
  return impl_->perform(bhttp::verb::get, "/v1/accounts/" + encode_component(account_id), nullptr, Resend::safe, false);
}

Response Client::credit(std::string_view account_id, std::int64_t amount, std::string_view reference) {
  return credit(account_id, CreditRequest{amount, std::string(reference), std::nullopt, std::nullopt, std::nullopt});
}

// Safe to resend: the reference makes a second credit a replay of the first.
Response Client::credit(std::string_view account_id, const CreditRequest& r) {
  json::object body{{"amount", r.amount}, {"reference", r.reference}};
  if (r.expires_at) body["expires_at"] = *r.expires_at;
  if (r.priority) body["priority"] = *r.priority;
  if (r.category) body["category"] = *r.category;
  const json::value value(std::move(body));
  return impl_->perform(bhttp::verb::post, "/v1/accounts/" + encode_component(account_id) + "/credits", &value,
                        Resend::safe, false);
}

Response Client::debit(std::string_view account_id, std::int64_t amount, std::string_view reference,
                       std::string_view reason) {
  json::value body = json::object{{"amount", amount}, {"reference", reference}, {"reason", reason}};
  return impl_->perform(bhttp::verb::post, "/v1/accounts/" + encode_component(account_id) + "/debits", &body,
                        Resend::safe, false);
}

Response Client::events(std::string_view account_id, std::int64_t after, std::optional<std::int64_t> limit) {
  std::string target = "/v1/accounts/" + encode_component(account_id) + "/events?after=" + std::to_string(after);
  if (limit) target += "&limit=" + std::to_string(*limit);
  return impl_->perform(bhttp::verb::get, target, nullptr, Resend::safe, false);
}

Response Client::update_account(std::string_view account_id, const UpdateAccountRequest& r) {
  json::object body;
  if (r.overdraft_limit) body["overdraft_limit"] = *r.overdraft_limit;
  if (r.max_active_holds) {
    body["max_active_holds"] = *r.max_active_holds ? json::value(**r.max_active_holds) : json::value(nullptr);
  }
  if (r.frozen) body["frozen"] = *r.frozen;
  if (r.low_balance_threshold) {
    body["low_balance_threshold"] =
        *r.low_balance_threshold ? json::value(**r.low_balance_threshold) : json::value(nullptr);
  }
  const json::value value(std::move(body));
  // Absolute values: sending them again changes nothing, so a lost answer may be resent.
  return impl_->perform(bhttp::verb::patch, "/v1/accounts/" + encode_component(account_id), &value, Resend::safe,
                        false);
}

namespace {
// The body of a key's creation: only what is set.
json::value key_body(const CreateKeyRequest& r) {
  json::object body;
  if (!r.scopes.empty()) {
    json::array scopes;
    for (const std::string& s : r.scopes) scopes.emplace_back(s);
    body["scopes"] = std::move(scopes);
  }
  if (r.expires_at) body["expires_at"] = *r.expires_at;
  if (r.name) body["name"] = *r.name;
  return body;
}
}  // namespace

Response Client::create_key(std::string_view account_id, const CreateKeyRequest& request) {
  json::value body = key_body(request);
  return impl_->perform(bhttp::verb::post, "/v1/accounts/" + encode_component(account_id) + "/keys", &body,
                        Resend::only_if_unsent, false);
}

Response Client::create_admin_key(const CreateKeyRequest& request) {
  json::value body = key_body(request);
  return impl_->perform(bhttp::verb::post, "/v1/keys", &body, Resend::only_if_unsent, false);
}

Response Client::get_key() {
  return impl_->perform(bhttp::verb::get, "/v1/key", nullptr, Resend::safe, false);
}

Response Client::revoke_key(std::string_view key_id) {
  return impl_->perform(bhttp::verb::delete_, "/v1/keys/" + encode_component(key_id), nullptr, Resend::safe, false);
}

Response Client::reserve(const ReserveRequest& r) {
  // One request_id per logical call: every attempt below sends this same body.
  const std::string request_id = r.request_id.empty() ? new_request_id(impl_->options.request_id_prefix) : r.request_id;
  json::value body = json::object{{"account_id", r.account_id}, {"request_id", request_id}};
  if (r.feature) {
    body.as_object()["feature"] = *r.feature;
    if (r.quantity) body.as_object()["quantity"] = *r.quantity;
  } else {
    body.as_object()["amount"] = r.amount;
  }
  if (r.ttl_ms) body.as_object()["ttl_ms"] = *r.ttl_ms;
  if (r.metadata) body.as_object()["metadata"] = *r.metadata;
  return impl_->perform(bhttp::verb::post, "/v1/holds", &body, Resend::safe, true);
}

Response Client::commit(std::string_view hold_id, std::optional<std::int64_t> amount) {
  json::value body = json::object{};
  if (amount) body.as_object()["amount"] = *amount;
  return impl_->perform(bhttp::verb::post, "/v1/holds/" + encode_component(hold_id) + "/commit", &body, Resend::safe,
                        false);
}

Response Client::commit_quantity(std::string_view hold_id, std::int64_t quantity) {
  json::value body = json::object{{"quantity", quantity}};
  return impl_->perform(bhttp::verb::post, "/v1/holds/" + encode_component(hold_id) + "/commit", &body, Resend::safe,
                        false);
}

Response Client::check_hold(const CheckHoldRequest& r) {
  json::value body = json::object{{"account_id", r.account_id}};
  if (r.amount) body.as_object()["amount"] = *r.amount;
  if (r.feature) body.as_object()["feature"] = *r.feature;
  if (r.quantity) body.as_object()["quantity"] = *r.quantity;
  return impl_->perform(bhttp::verb::post, "/v1/holds/check", &body, Resend::safe, false);  // writes nothing
}

Response Client::set_price(std::string_view feature, std::int64_t credits_per_unit) {
  const json::value body = json::object{{"credits_per_unit", credits_per_unit}};
  return impl_->perform(bhttp::verb::put, "/v1/prices/" + encode_component(feature), &body, Resend::safe, false);
}

Response Client::get_price(std::string_view feature) {
  return impl_->perform(bhttp::verb::get, "/v1/prices/" + encode_component(feature), nullptr, Resend::safe, false);
}

Response Client::release(std::string_view hold_id, std::optional<std::string> reason) {
  json::value body = json::object{};
  if (reason) body.as_object()["reason"] = *reason;
  return impl_->perform(bhttp::verb::post, "/v1/holds/" + encode_component(hold_id) + "/release", &body, Resend::safe,
                        false);
}

namespace {
// A refund's body; one request_id per logical call, so every attempt sends this same body.
json::value refund_body(const RefundRequest& r, std::string_view request_id_prefix) {
  const std::string request_id = r.request_id.empty() ? Client::new_request_id(request_id_prefix) : r.request_id;
  json::value body = json::object{{"reason", r.reason}, {"request_id", request_id}};
  if (r.amount) body.as_object()["amount"] = *r.amount;
  return body;
}
}  // namespace

Response Client::refund_hold(std::string_view hold_id, const RefundRequest& r) {
  json::value body = refund_body(r, impl_->options.request_id_prefix);
  return impl_->perform(bhttp::verb::post, "/v1/holds/" + encode_component(hold_id) + "/refund", &body, Resend::safe,
                        false);
}

Response Client::refund_job(std::string_view client_request_id, const RefundRequest& r) {
  json::value body = refund_body(r, impl_->options.request_id_prefix);
  return impl_->perform(bhttp::verb::post, "/v1/jobs/" + encode_component(client_request_id) + "/refund", &body,
                        Resend::safe, false);
}

Response Client::extend(std::string_view hold_id, std::int64_t ttl_ms) {
  json::value body = json::object{{"ttl_ms", ttl_ms}};
  // No id makes a second extend a replay: sent again only when it certainly never arrived.
  return impl_->perform(bhttp::verb::post, "/v1/holds/" + encode_component(hold_id) + "/extend", &body,
                        Resend::only_if_unsent, false);
}

Response Client::get_hold(std::string_view hold_id) {
  return impl_->perform(bhttp::verb::get, "/v1/holds/" + encode_component(hold_id), nullptr, Resend::safe, false);
}

namespace {

// A path with query parameters, each added only when set.
class Target {
 public:
  explicit Target(std::string path) : target_(std::move(path)) {}
  Target& add(std::string_view key, const std::optional<std::string>& value) {
    if (!value) return *this;
    target_ += sep_;
    target_ += key;
    target_ += '=';
    target_ += Client::encode_component(*value);
    sep_ = '&';
    return *this;
  }
  Target& add(std::string_view key, const std::optional<std::int64_t>& value) {
    return add(key, value ? std::optional<std::string>(std::to_string(*value)) : std::nullopt);
  }
  const std::string& str() const { return target_; }

 private:
  std::string target_;
  char sep_ = '?';
};

}  // namespace

Response Client::list_holds(const ListHoldsRequest& r) {
  Target target("/v1/holds");
  target.add("account_id", r.account_id).add("status", r.status).add("request_id", r.request_id);
  target.add("limit", r.limit).add("starting_after", r.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::submit_job(const SubmitJobRequest& r) {
  // One client_request_id per logical call: every attempt sends this same body.
  const std::string id =
      r.client_request_id.empty() ? new_request_id(impl_->options.request_id_prefix) : r.client_request_id;
  json::value body = json::object{{"client_request_id", id},
                                  {"account_id", r.account_id},
                                  {"cost", r.cost},
                                  {"provider", r.provider},
                                  {"input", r.input}};
  return impl_->perform(bhttp::verb::post, "/v1/jobs", &body, Resend::safe, false);
}

Response Client::get_job(std::string_view client_request_id, std::optional<std::int64_t> wait_ms) {
  Target target("/v1/jobs/" + encode_component(client_request_id));
  target.add("wait_ms", wait_ms);
  struct ExtraTimeout {
    Impl& impl;
    ~ExtraTimeout() { impl.request_timeout_extra = std::chrono::milliseconds(0); }
  } reset{*impl_};
  if (wait_ms && *wait_ms > 0) impl_->request_timeout_extra = std::chrono::milliseconds(*wait_ms);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::cancel_job(std::string_view client_request_id) {
  json::value body = json::object{};
  return impl_->perform(bhttp::verb::post, "/v1/jobs/" + encode_component(client_request_id) + "/cancel", &body,
                        Resend::safe, false);
}

Response Client::list_jobs(const ListJobsRequest& r) {
  Target target("/v1/jobs");
  target.add("account_id", r.account_id).add("status", r.status);
  target.add("limit", r.page.limit).add("starting_after", r.page.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::job_history(std::string_view client_request_id) {
  return impl_->perform(bhttp::verb::get, "/v1/jobs/" + encode_component(client_request_id) + "/history", nullptr,
                        Resend::safe, false);
}

std::optional<LockHolder> LockHolder::from(const Response& answer) {
  if (!answer.ok() || !answer.json().is_object()) return std::nullopt;
  const json::object& lock = answer.json().get_object();
  const json::value* key = lock.if_contains("key");
  const json::value* owner = lock.if_contains("owner");
  const std::optional<std::int64_t> fence = as_int64(lock.if_contains("fence"));
  if (key == nullptr || !key->is_string() || owner == nullptr || !owner->is_string() || !fence) return std::nullopt;
  return LockHolder{as_string(key), as_string(owner), fence};
}

namespace {

std::string lock_path(std::string_view key, std::string_view action) {
  std::string path = "/v1/locks/" + Client::encode_component(key);
  if (!action.empty()) path += "/" + std::string(action);
  return path;
}

std::string idempotency_path(std::string_view key, std::string_view action) {
  return "/v1/idempotency/" + Client::encode_component(key) + "/" + std::string(action);
}

std::string ratelimit_path(std::string_view policy, std::string_view action) {
  return "/v1/ratelimits/" + Client::encode_component(policy) + "/" + std::string(action);
}

}  // namespace

// The same owner acquiring again gets the same fence: safe to resend.
Response Client::acquire_lock(std::string_view key, std::string_view owner, std::int64_t ttl_ms) {
  json::value body = json::object{{"owner", owner}, {"ttl_ms", ttl_ms}};
  return impl_->perform(bhttp::verb::post, lock_path(key, "acquire"), &body, Resend::safe, false);
}

Response Client::renew_lock(const LockHolder& holder, std::int64_t ttl_ms) {
  json::value body = json::object{{"owner", holder.owner}, {"ttl_ms", ttl_ms}};
  if (holder.fence) body.as_object()["fence"] = *holder.fence;
  return impl_->perform(bhttp::verb::post, lock_path(holder.key, "renew"), &body, Resend::safe, false);
}

Response Client::release_lock(const LockHolder& holder) {
  json::value body = json::object{{"owner", holder.owner}};
  if (holder.fence) body.as_object()["fence"] = *holder.fence;
  return impl_->perform(bhttp::verb::post, lock_path(holder.key, "release"), &body, Resend::safe, false);
}

Response Client::cancel_lock(std::string_view key) {
  json::value body = json::object{};
  return impl_->perform(bhttp::verb::post, lock_path(key, "cancel"), &body, Resend::safe, false);
}

Response Client::get_lock(std::string_view key) {
  return impl_->perform(bhttp::verb::get, lock_path(key, ""), nullptr, Resend::safe, false);
}

// Resent only when unsent: a second begin of the claim the first one made answers in_progress.
Response Client::begin_idempotency(std::string_view key, std::string_view fingerprint, std::int64_t ttl_ms) {
  json::value body = json::object{{"fingerprint", fingerprint}, {"ttl_ms", ttl_ms}};
  return impl_->perform(bhttp::verb::post, idempotency_path(key, "begin"), &body, Resend::only_if_unsent, false);
}

Response Client::finish_idempotency(std::string_view key, std::string_view fingerprint,
                                    const boost::json::value& response, std::optional<std::int64_t> attempt) {
  json::value body = json::object{{"fingerprint", fingerprint}, {"response", response}};
  if (attempt) body.as_object()["attempt"] = *attempt;
  return impl_->perform(bhttp::verb::post, idempotency_path(key, "finish"), &body, Resend::safe, false);
}

Response Client::abandon_idempotency(std::string_view key, std::string_view fingerprint,
                                     std::optional<std::int64_t> attempt) {
  json::value body = json::object{{"fingerprint", fingerprint}};
  if (attempt) body.as_object()["attempt"] = *attempt;
  return impl_->perform(bhttp::verb::post, idempotency_path(key, "abandon"), &body, Resend::safe, false);
}

// Resent only when unsent: every check that reaches the server counts an attempt.
Response Client::check_ratelimit(std::string_view policy, std::string_view key, std::optional<std::int64_t> cost) {
  json::value body = json::object{{"key", key}};
  if (cost) body.as_object()["cost"] = *cost;
  return impl_->perform(bhttp::verb::post, ratelimit_path(policy, "check"), &body, Resend::only_if_unsent, false);
}

Response Client::reset_ratelimit(std::string_view policy, std::string_view key) {
  json::value body = json::object{{"key", key}};
  return impl_->perform(bhttp::verb::post, ratelimit_path(policy, "reset"), &body, Resend::safe, false);
}

Response Client::list_accounts(const PageRequest& page) {
  Target target("/v1/accounts");
  target.add("limit", page.limit).add("starting_after", page.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::list_lots(std::string_view account_id, const ListLotsRequest& r) {
  Target target("/v1/accounts/" + encode_component(account_id) + "/lots");
  target.add("status", r.status).add("limit", r.page.limit).add("starting_after", r.page.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::list_prices(const PageRequest& page) {
  Target target("/v1/prices");
  target.add("limit", page.limit).add("starting_after", page.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::list_price_versions(std::string_view feature, const PageRequest& page) {
  Target target("/v1/prices/" + encode_component(feature) + "/versions");
  target.add("limit", page.limit).add("starting_after", page.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::feed(std::int64_t after, std::optional<std::int64_t> limit, std::optional<std::int64_t> wait_ms) {
  Target target("/v1/events");
  target.add("after", std::optional<std::int64_t>(after)).add("limit", limit).add("wait_ms", wait_ms);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::feed_head() {
  return impl_->perform(bhttp::verb::get, "/v1/events?after=latest&limit=1", nullptr, Resend::safe, false);
}

Response Client::get_transfer(std::string_view reference) {
  return impl_->perform(bhttp::verb::get, "/v1/transfers/" + encode_component(reference), nullptr, Resend::safe,
                        false);
}

Response Client::list_keys(std::optional<std::string> account_id, const PageRequest& page) {
  Target target("/v1/keys");
  target.add("account_id", account_id).add("limit", page.limit).add("starting_after", page.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::create_webhook_endpoint(const CreateWebhookEndpointRequest& r) {
  json::object body{{"url", r.url}};
  if (!r.event_types.empty()) {
    json::array types;
    for (const std::string& t : r.event_types) types.emplace_back(t);
    body["event_types"] = std::move(types);
  }
  if (r.account_id) body["account_id"] = *r.account_id;
  if (r.description) body["description"] = *r.description;
  const json::value value(std::move(body));
  return impl_->perform(bhttp::verb::post, "/v1/webhook-endpoints", &value, Resend::only_if_unsent, false);
}

Response Client::list_webhook_endpoints(const PageRequest& page) {
  Target target("/v1/webhook-endpoints");
  target.add("limit", page.limit).add("starting_after", page.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

Response Client::get_webhook_endpoint(std::string_view endpoint_id) {
  return impl_->perform(bhttp::verb::get, "/v1/webhook-endpoints/" + encode_component(endpoint_id), nullptr,
                        Resend::safe, false);
}

Response Client::update_webhook_endpoint(std::string_view endpoint_id, const UpdateWebhookEndpointRequest& r) {
  json::object body;
  if (r.url) body["url"] = *r.url;
  if (r.event_types) {
    if (*r.event_types) {
      json::array types;
      for (const std::string& t : **r.event_types) types.emplace_back(t);
      body["event_types"] = std::move(types);
    } else {
      body["event_types"] = nullptr;
    }
  }
  if (r.description) body["description"] = *r.description;
  if (r.status) body["status"] = *r.status;
  const json::value value(std::move(body));
  return impl_->perform(bhttp::verb::patch, "/v1/webhook-endpoints/" + encode_component(endpoint_id), &value,
                        Resend::safe, false);
}

Response Client::delete_webhook_endpoint(std::string_view endpoint_id) {
  return impl_->perform(bhttp::verb::delete_, "/v1/webhook-endpoints/" + encode_component(endpoint_id), nullptr,
                        Resend::safe, false);
}

Response Client::rotate_webhook_secret(std::string_view endpoint_id) {
  json::value body = json::object{};
  return impl_->perform(bhttp::verb::post, "/v1/webhook-endpoints/" + encode_component(endpoint_id) + "/rotate-secret",
                        &body, Resend::only_if_unsent, false);
}

Response Client::list_webhook_deliveries(std::string_view endpoint_id, const ListWebhookDeliveriesRequest& r) {
  Target target("/v1/webhook-endpoints/" + encode_component(endpoint_id) + "/deliveries");
  target.add("status", r.status).add("limit", r.page.limit).add("starting_after", r.page.starting_after);
  return impl_->perform(bhttp::verb::get, target.str(), nullptr, Resend::safe, false);
}

// Safe to resend: the cursor moves back to `after` (never forward), so a second replay does what the
// first did, and what it sends again carries the same webhook-ids.
Response Client::replay_webhook_endpoint(std::string_view endpoint_id, std::int64_t after) {
  json::value body = json::object{{"after", after}};
  return impl_->perform(bhttp::verb::post, "/v1/webhook-endpoints/" + encode_component(endpoint_id) + "/replay",
                        &body, Resend::safe, false);
}

Response Client::audit(std::optional<std::string> account_id) {
  std::string target = "/v1/audit";
  if (account_id) target += "?account_id=" + encode_component(*account_id);
  return impl_->perform(bhttp::verb::get, target, nullptr, Resend::safe, false);
}

Response Client::healthz() { return impl_->perform(bhttp::verb::get, "/healthz", nullptr, Resend::safe, false); }

}  // namespace tollgate::client
