// tollgate jobs: the asynchronous HTTP(S) client that job workers call paid providers with.
//
// ProviderClient is the HTTP implementation of jobs/provider.h's Provider (what the runner calls):
// send_job() and ask_status() build the contract's request (api.md) and start() it.
//
// One ProviderClient owns an io_context and `threads` threads that run it. start() begins one
// exchange (one request, one answer) and reports what the transport saw as an Exchange
// (jobs/provider_protocol.h), which provider_protocol's after_send()/after_status() then judge:
//
//   answered        an HTTP answer arrived, whatever its status: `status` and `body` are set
//   timed_out       the request began to be written and no complete answer came within `timeout`
//   connection_lost the connection broke (or the call was cancelled) after the request began to be
//                   written; also an answer whose body is larger than response_body_max_bytes
//   not_connected   nothing was sent: bad URL, DNS failure, refused, connect time-out, TLS handshake
//                   or certificate verification failed, or cancelled before the write began
//
// The client never sends a request twice. A kept-alive connection that the provider closed is only
// detected for sure when it is used; a connection found closed or readable while idle is dropped
// before use, but once the write has begun any failure is connection_lost (the provider may have
// received the request) and the worker decides about sending again with the same Idempotency-Key.
//
// Connections: per scheme://host:port, at most idle_connections_per_host_max idle ones are kept
// for reuse (most recently used first); an idle connection is dropped after idle_connection_ttl,
// when the provider closes it (seen by a sweep every few seconds, or when it is taken), or when
// the answer said `Connection: close`. There is no bound on connections in use: the callers bound
// how many exchanges they start (in_flight()).
//
// https:// verifies the provider's certificate chain (ca_file, or the system's default paths) and
// that it names the URL's host (DNS name or IP address); SNI is sent for DNS names.
//
// Every exchange is asynchronous (Boost.Beast over Asio, no thread per call): an exchange costs
// its request, a parser while the answer is read, a timer and a socket, all freed soon after `done`.
//
// Thread safety: start(), send_job(), ask_status(), in_flight() and ProviderCall::cancel() from any thread. `done` runs
// exactly once per start(), on one of the client's threads (never inside start()), and must not
// throw or block for long (it holds up other exchanges of that thread). The destructor must not
// run on one of the client's threads (e.g. inside `done`) and must not race with start() or
// cancel(); it cancels every exchange in flight, waits until every `done` has returned, and joins
// the threads. A ProviderCall handle may outlive its exchange and the client; cancel() on it is
// then a no-op.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/limits.h"
#include "jobs/provider.h"
#include "jobs/provider_protocol.h"

namespace tollgate::jobs {

struct ProviderRequest {
  enum class Method : std::uint8_t { post, get };
  Method method = Method::post;
  std::string url;              // http://host:port/path?query or https://...; no fragment is sent
  std::string idempotency_key;  // sent as `Idempotency-Key` when not empty
  // Further header fields, sent as given, in this order, after Host, User-Agent and Idempotency-Key
  // (e.g. a webhook delivery's webhook-id, webhook-timestamp and webhook-signature). The caller
  // names no field the client sets itself and puts no CR or LF in a name or value.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;             // sent with Content-Type: application/json (post)
  std::chrono::milliseconds timeout{limits::kProviderExchangeTimeoutMsDefault};  // total: connect + write + read of the whole answer
};

struct ProviderClientOptions {
  // Resolve + TCP connect + TLS handshake, at most (and at most the request's `timeout`).
  std::chrono::milliseconds connect_timeout{limits::kProviderConnectTimeoutMsDefault};
  // Keep-alive pool per scheme://host:port; 0 = no reuse, every exchange opens a connection.
  std::size_t idle_connections_per_host_max = limits::kProviderIdleConnectionsPerHostMaxDefault;
  // An idle connection older than this is closed (providers commonly close theirs after 60 s+;
  // ours closes first so that a reuse rarely meets a connection the provider is closing).
  std::chrono::milliseconds idle_connection_ttl{limits::kProviderIdleConnectionTtlMsDefault};
  // A larger answer body → connection_lost with a body that says so (the answer was not read).
  std::size_t response_body_max_bytes = limits::kProviderAnswerBodyBytesMaxDefault;
  std::string ca_file;  // PEM trust anchors for https; empty: the system's default verify paths
  int threads = 1;      // io threads the client owns (≥ 1)
};

class ProviderCall;  // handle of one exchange (below)

class ProviderClient final : public Provider {
 public:
  // Throws (boost::system::system_error) if ca_file cannot be loaded.
  explicit ProviderClient(ProviderClientOptions options);
  ~ProviderClient() override;  // cancels everything in flight, joins its threads; every `done` has run
  ProviderClient(const ProviderClient&) = delete;
  ProviderClient& operator=(const ProviderClient&) = delete;

  // Starts one exchange. `done` runs exactly once, on one of the client's threads, with what the
  // transport saw (see the top of this file). A bad URL answers not_connected with the reason in
  // `body`; every failure's body says what happened, in words, for the job's history.
  std::shared_ptr<ProviderCall> start(ProviderRequest request, std::function<void(Exchange)> done);

  // Provider (jobs/provider.h): the contract's POST and GET, each one start().
  std::shared_ptr<CallHandle> send_job(const ProviderConfig& provider, std::string_view client_request_id,
                                       std::string_view input_json, Done done) override;
  std::shared_ptr<CallHandle> ask_status(const ProviderConfig& provider, std::string_view client_request_id,
                                         Done done) override;

  std::size_t in_flight() const override;  // exchanges started whose `done` has not returned yet

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

class CallState;  // one exchange's state (provider_client.cc)

class ProviderCall final : public CallHandle {
 public:
  // Aborts the exchange: closes its connection promptly; `done` still runs exactly once, with
  // connection_lost (not_connected if the write had not begun), unless it had already ended.
  // Thread-safe, idempotent.
  void cancel() override;

  explicit ProviderCall(std::weak_ptr<CallState> call) : call_(std::move(call)) {}

 private:
  std::weak_ptr<CallState> call_;  // does not keep the exchange alive
};

}  // namespace tollgate::jobs
