// tollgate demo: a webhook receiver — the smallest HTTP server that takes tollgate's deliveries
// (api.md, Webhooks): it answers every request 200 at once and hands each one, whole, to a hook.
// `tollgate demo kiosk` runs one as the kiosk owner's system; bench/webhooks_bench.cc runs one as the
// local receiver whose receive times give delivery latency.
//
// It checks nothing itself (no signature, no method, no path): the hook does what the caller wants
// (webhooks::verify, deduplication by webhook-id, timing). The hook runs on an I/O thread before the
// answer is written, so a slow hook slows the answers (and so the deliverer) — keep it short.
//
// Bounds: body_bytes_max per request (more: 413, the connection closed), connections_max at once
// (more are closed at once), idle_timeout_ms on a kept-alive connection.
//
// Thread safety: the constructor listens and starts `threads` I/O threads of its own; the hook may be
// called on any of them at once. Every member function may be called from any thread; stop() (and
// the destructor) closes every connection and waits for the I/O threads, after which no hook runs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tollgate::demo {

// One request as it arrived.
struct ReceivedWebhook {
  std::string target;     // the request's path (and query)
  std::string webhook_id;  // the headers of Standard Webhooks, as sent ("" when absent)
  std::string webhook_timestamp;
  std::string webhook_signature;
  std::string body;
  std::chrono::steady_clock::time_point received;  // once the whole request was read
};

struct WebhookReceiverOptions {
  std::string host = "127.0.0.1";  // an IP address
  std::uint16_t port = 0;          // 0: any free port (port() tells which)
  int threads = 1;
  std::size_t body_bytes_max = 1024 * 1024;
  std::size_t connections_max = 1024;
  std::int64_t idle_timeout_ms = 30'000;
  std::function<void(ReceivedWebhook&&)> on_request;  // may be empty: then only counted
};

class WebhookReceiver {
 public:
  // Throws std::invalid_argument (bad options) or std::runtime_error (cannot listen).
  explicit WebhookReceiver(WebhookReceiverOptions options);
  ~WebhookReceiver();  // stop()
  WebhookReceiver(const WebhookReceiver&) = delete;
  WebhookReceiver& operator=(const WebhookReceiver&) = delete;

  void stop();
  std::uint16_t port() const;
  // "http://127.0.0.1:PORT" + path (path starts with '/').
  std::string url(const std::string& path = "/") const;
  std::uint64_t requests() const;  // answered 200 so far

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::demo
