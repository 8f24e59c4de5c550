// tollgate http: the transport — an asynchronous HTTP/1.1 server on Boost.Beast.
//
// Plain HTTP, or TLS only when use_tls() was called (native TLS: OpenSSL through Asio's ssl::stream).
// Keep-alive connections on a few I/O threads; no I/O thread waits on a client or on the database
// (the Api hands reads to its reader executor and writes to the ledger; answers come back through
// the connection's strand).
// Every bound is explicit: the number of open connections, the header and body sizes (a body over
// 64 KiB answers 413), and the time a client may take to send a request's head and body — a
// stalled or half-sent request is closed when its time is up and never holds up another.
// Graceful shutdown (SIGTERM, SIGINT or shutdown()): stop accepting, close idle connections,
// finish the requests in flight, then run() returns.
//
// Thread safety: listen() before run(); shutdown() from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/limits.h"
#include "core/result.h"
#include "http/api.h"

namespace tollgate::http {

struct ServerLimits {
  std::size_t body_bytes_max = limits::kBodyBytesMax;
  std::size_t header_bytes_max = limits::kHeaderBytesMax;
  std::int64_t idle_timeout_ms = limits::kIdleTimeoutMsDefault;  // a kept-alive connection's wait for its next request
  std::int64_t request_timeout_ms = limits::kRequestTimeoutMsDefault;  // from a request's first byte to its last
  std::size_t connections_max = limits::kConnectionsMaxDefault;
  int threads = limits::kHttpThreadsDefault;
};

class HttpServer {
 public:
  HttpServer(Api& api, Metrics& metrics, ServerLimits limits);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Every connection speaks TLS (before listen()): `cert_file` is a PEM certificate chain, `key_file`
  // its PEM private key. TLS 1.2 and 1.3 only, no compression, no renegotiation, forward-secret AEAD
  // ciphers for TLS 1.2 (OpenSSL's defaults for 1.3). invalid_request, in plain words, when a file
  // is missing or unreadable, is not PEM, or the key is not the certificate's.
  Status use_tls(const std::string& cert_file, const std::string& key_file);
  bool tls() const;

  // Binds and listens; returns the bound port (useful with port 0).
  Result<std::uint16_t> listen(const std::string& host, std::uint16_t port);
  // Serves until a graceful shutdown completes (SIGTERM/SIGINT or shutdown()).
  void run();
  void shutdown();

  std::size_t open_connections() const;

  struct Impl;  // the transport's state (server.cc)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::http
