// tollgate jobs: what the job runner needs of a paid provider — send a job's call, ask its status.
//
// Provider is the runner's one door to the provider (jobs/runner.h). ProviderClient
// (provider_client.h) implements it over HTTP(S), as api.md's provider contract says:
//
//   send_job   POST {url}, `Idempotency-Key: {client_request_id}`, body request_body(), within the
//              provider's timeout_ms
//   ask_status GET status_url_for({status_url}, client_request_id), within min(timeout_ms, limits::kProviderStatusTimeoutMsMax)
//
// Tests implement it in process (no sockets), to drive the runner through answers that are hard to
// produce over HTTP at a chosen moment. Either way a call reports what was seen as an Exchange
// (provider_protocol.h) — answered with a status and body, timed_out, connection_lost or
// not_connected — and the runner judges it with after_send()/after_status(): the same values and the
// same decisions whatever implements this.
//
// Thread safety: every method from any thread. `done` runs exactly once per call, never inside the
// call that started it (the runner holds a lock while it starts one), and must not block for long.
// A CallHandle may outlive its call and the provider; cancel() is then a no-op.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

#include "config/config.h"
#include "jobs/provider_protocol.h"

namespace tollgate::jobs {

// One call in flight, as its starter may abort it.
class CallHandle {
 public:
  virtual ~CallHandle() = default;
  // Aborts the call promptly: `done` still runs exactly once — connection_lost, or not_connected if
  // nothing had been sent — unless it had already ended. Thread-safe, idempotent.
  virtual void cancel() = 0;
};

class Provider {
 public:
  using Done = std::function<void(Exchange)>;
  virtual ~Provider() = default;

  // Sends job `client_request_id` (its input as stored, `input_json`) to `provider`, once: the
  // provider may have received it whatever `done` reports, except not_connected.
  virtual std::shared_ptr<CallHandle> send_job(const ProviderConfig& provider, std::string_view client_request_id,
                                               std::string_view input_json, Done done) = 0;
  // Asks `provider` what became of job `client_request_id`. `provider.status_url` must be set.
  virtual std::shared_ptr<CallHandle> ask_status(const ProviderConfig& provider, std::string_view client_request_id,
                                                 Done done) = 0;
  // Calls started whose `done` has not returned yet (the runner's stop() waits for none).
  virtual std::size_t in_flight() const = 0;
};

}  // namespace tollgate::jobs
