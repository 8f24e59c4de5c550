// The HTTP test client's Beast code (tests/http/http_test_support.h declares HttpClient): compiled
// once here instead of in each of the suites that include the header.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "http/http_test_support.h"

namespace tollgate::httptest {

namespace {

// The folder named by TOLLGATE_RECORD_EXCHANGES, or "" (recording off). Read once.
const std::string& record_folder() {
  static const std::string folder = [] {
    const char* v = std::getenv("TOLLGATE_RECORD_EXCHANGES");
    return std::string(v ? v : "");
  }();
  return folder;
}

// Appends one exchange as one JSON line to <folder>/exchanges-<pid>.jsonl (scripts/check-exchanges
// reads them): one file per process (a forked child writes its own), one write() per line with
// O_APPEND, so that the client's threads never interleave their lines. Bodies are kept only when
// JSON (the document's schemas say nothing more of text, HTML, scripts).
void record_exchange(const std::string& method, const std::string& target, const HttpResponse& r) {
  json::object line;
  line["method"] = method;
  line["target"] = target;
  line["status"] = r.status;
  const std::string content_type = r.header("Content-Type");
  if (r.has_header("Content-Type")) line["content_type"] = content_type;
  json::object headers;
  for (const auto& [name, value] : r.headers) headers[name] = value;
  line["headers"] = std::move(headers);
  if (content_type.find("json") != std::string::npos) line["body"] = r.body;
  line["body_bytes"] = r.body.size();
  if (const auto* test = ::testing::UnitTest::GetInstance()->current_test_info()) {
    line["test"] = std::string(test->test_suite_name()) + "." + test->name();
  }
  const std::string text = json::serialize(line) + "\n";
  const std::string path = record_folder() + "/exchanges-" + std::to_string(::getpid()) + ".jsonl";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    ADD_FAILURE() << "TOLLGATE_RECORD_EXCHANGES: cannot open " << path << ": " << std::strerror(errno);
    return;
  }
  ssize_t written;
  do {
    written = ::write(fd, text.data(), text.size());
  } while (written < 0 && errno == EINTR);
  if (written != static_cast<ssize_t>(text.size())) {
    ADD_FAILURE() << "TOLLGATE_RECORD_EXCHANGES: could not append one whole line to " << path << ": "
                  << (written < 0 ? std::strerror(errno) : "a short write");
  }
  ::close(fd);
}

}  // namespace

struct HttpClient::Connection {
  boost::asio::io_context ioc;
  boost::beast::tcp_stream stream{ioc};
  boost::beast::flat_buffer buffer;

  void run() {
    ioc.restart();
    ioc.run();
  }
};

HttpClient::HttpClient(std::uint16_t port, std::string key, std::chrono::milliseconds timeout)
    : port_(port), key_(std::move(key)), timeout_(timeout) {}

HttpClient::~HttpClient() { close(); }

void HttpClient::set_port(std::uint16_t port) {
  close();
  port_ = port;
}

bool HttpClient::connect(std::string* error) {
  if (conn_) return true;
  conn_ = std::make_unique<Connection>();
  boost::asio::ip::tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"), port_);
  conn_->stream.expires_after(timeout_);
  boost::system::error_code result = boost::asio::error::would_block;
  conn_->stream.async_connect(endpoint, [&](boost::system::error_code ec) { result = ec; });
  conn_->run();
  if (result) {
    if (error) *error = "connect: " + result.message();
    close();
    return false;
  }
  conn_->stream.socket().set_option(boost::asio::ip::tcp::no_delay(true));
  return true;
}

void HttpClient::close() {
  if (!conn_) return;
  boost::system::error_code ignored;
  conn_->stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
  conn_->stream.socket().close(ignored);
  conn_.reset();
}

HttpResponse HttpClient::request(const std::string& method, const std::string& target, const std::string& body,
                                 const std::map<std::string, std::string>& headers) {
  namespace bhttp = boost::beast::http;
  HttpResponse out;
  if (!connect(&out.error)) return out;
  bhttp::request<bhttp::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(bhttp::field::host, "127.0.0.1:" + std::to_string(port_));
  bool has_authorization = false, has_content_type = false;
  for (const auto& [name, value] : headers) {
    std::string lower = name;
    for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    has_authorization |= lower == "authorization";
    has_content_type |= lower == "content-type";
    if (!value.empty()) req.set(name, value);
  }
  if (!has_authorization && !key_.empty()) req.set(bhttp::field::authorization, "Bearer " + key_);
  if (!body.empty() || method == "POST") {
    if (!has_content_type) req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();

  boost::system::error_code result = boost::asio::error::would_block;
  conn_->stream.expires_after(timeout_);
  bhttp::async_write(conn_->stream, req, [&](boost::system::error_code ec, std::size_t) { result = ec; });
  conn_->run();
  if (result) {
    out.error = "write: " + result.message();
    close();
    return out;
  }
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  result = boost::asio::error::would_block;
  conn_->stream.expires_after(timeout_);
  bhttp::async_read(conn_->stream, conn_->buffer, parser, [&](boost::system::error_code ec, std::size_t) { result = ec; });
  conn_->run();
  if (result) {
    out.error = "read: " + result.message();
    close();
    return out;
  }
  auto res = parser.release();
  out.status = res.result_int();
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers[name] = std::string(field.value());
  }
  out.body = std::move(res.body());
  if (!res.keep_alive()) close();
  if (record_ && !record_folder().empty()) record_exchange(method, target, out);
  return out;
}

}  // namespace tollgate::httptest
