// Test support: a webhook receiver whose signature check nobody here wrote — the reference library
// of Standard Webhooks (`standardwebhooks` on npm) in a real Node process
// (tests/webhooks/receiver/receiver.mjs, whose header says what it does and logs).
//
// ReferenceReceiver starts `node receiver.mjs --port 0 --secret … --log FILE [behaviours]`, reads
// its port from its first stdout line and serves url(); entries() parses the log, one
// ReceivedRequest per request received, each written before its answer was sent (so once a client
// has its answer, the entry is there). The destructor kills the process.
//
// Where the receiver is: TOLLGATE_WEBHOOK_RECEIVER, the absolute path of receiver.mjs in a folder
// where tests/webhooks/receiver/install (or `npm ci`) has installed the pinned library
// (scripts/test does both). Without it a test skips — and fails under TOLLGATE_REQUIRE_WEBHOOK_RECEIVER=1 (CI): REQUIRE_REFERENCE_RECEIVER below.
//
// The library refuses a webhook-timestamp more than 5 minutes from the real clock (it has no
// option to change that): sign with a time stamp near the wall clock.
//
// Thread safety: a ReferenceReceiver belongs to one thread; entries() and wait_for() may be called
// while other threads send it requests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "support/backends.h"

namespace tollgate::testing {

struct ReferenceReceiverOptions {
  std::vector<std::string> secrets;  // whsec_…, at least one: a request verifies if any secret accepts it
  int drop_first = 0;                // the first N requests of each webhook-id: connection closed, no answer
  int fail_first = 0;                // the next N of each webhook-id: answered 500
  int slow_ms = 0;                   // waits this long before answering (or dropping) any request
  int status = 200;                  // the answer to every other request that verifies
  std::chrono::milliseconds start_timeout{15'000};  // until it prints its port
};

// One request the receiver got, as its log line says.
struct ReceivedRequest {
  std::string webhook_id;                  // the webhook-id header; "" when missing
  std::optional<std::int64_t> timestamp_s; // the webhook-timestamp header, when it is a number
  bool verified = false;                   // the library accepted it with one of the secrets
  std::string error;                       // the library's reason when not verified
  std::string type;                        // the body's "type"; "" when none
  std::optional<std::int64_t> event_id;    // the body's data.event_id
  int attempt_seen = 0;                    // requests with this webhook-id so far, this one included
  int answered = 0;                        // the status sent; 0 when the connection was dropped
  std::int64_t received_at_ms = 0;         // Unix ms, by the receiver's clock

  bool dropped() const { return answered == 0; }
};

// The receiver script (TOLLGATE_WEBHOOK_RECEIVER) when it is set and the file exists; else nullopt.
std::optional<std::string> reference_receiver_script();
// Whether this run must have it (TOLLGATE_REQUIRE_WEBHOOK_RECEIVER=1: CI).
bool reference_receiver_required();

class ReferenceReceiver {
 public:
  // Starts the receiver and waits until it listens. Throws std::runtime_error (with its stderr) if
  // the script is not configured, or it exits or does not listen within start_timeout.
  explicit ReferenceReceiver(ReferenceReceiverOptions options);
  ~ReferenceReceiver();
  ReferenceReceiver(const ReferenceReceiver&) = delete;
  ReferenceReceiver& operator=(const ReferenceReceiver&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url(const std::string& path = "/webhooks") const;  // "http://127.0.0.1:PORT/webhooks"

  // Every request logged so far, in the order received (complete lines only).
  std::vector<ReceivedRequest> entries() const;
  // Polls entries() until `done(entries)` holds (true) or `timeout` has passed (false).
  bool wait_for(const std::function<bool(const std::vector<ReceivedRequest>&)>& done,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  std::string log() const;  // what the process wrote on stderr (for a failure's message)

 private:
  TempDir dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace tollgate::testing

// In a test body: skips the test when TOLLGATE_WEBHOOK_RECEIVER names no receiver — and fails it
// instead when the run must have one (TOLLGATE_REQUIRE_WEBHOOK_RECEIVER=1).
#define REQUIRE_REFERENCE_RECEIVER()                                                                  \
  if (!::tollgate::testing::reference_receiver_script()) {                                            \
    if (::tollgate::testing::reference_receiver_required())                                           \
      FAIL() << "TOLLGATE_REQUIRE_WEBHOOK_RECEIVER=1 but TOLLGATE_WEBHOOK_RECEIVER names no receiver.mjs"; \
    GTEST_SKIP() << "no reference webhook receiver: run tests/webhooks/receiver/install and set "     \
                    "TOLLGATE_WEBHOOK_RECEIVER to its receiver.mjs (scripts/test does)";             \
  }                                                                                                   \
  static_assert(true, "")
