// tollgate demo: a fake paid provider — an HTTP server that behaves like an AI image service and
// speaks the provider contract (api.md, "What tollgate sends a provider"; jobs/provider_protocol.h
// is the client side). Tests of the job worker and the kiosk demo run it; `tollgate fake-provider`
// is the same class as a process.
//
//   POST /generate      Content-Type: application/json, Idempotency-Key: <id>, {"id": <id>, "input": <any>}
//                       → 200 {"result": {"image_url": "https://fake/<id>.png", "seed": n}}
//                       → 422 {"error": …}   refused (fail_rate): no work done, nothing charged
//                       → 500 {"error": …}   the work was done, the answer lost (lost_answer_rate)
//                       → the answer only after late_extra_ms more (late_answer_rate)
//                       → the connection closed, nothing recorded (never_received_rate)
//                       → 400 bad JSON, no string id, no Idempotency-Key or one that differs from the
//                         id; 409 the key again with a different input; 413 body > body_bytes_max;
//                         415 not application/json; 503 ids_remembered_max ids remembered and the
//                         oldest still running
//   GET /status/{id}    (percent-encoded) → 200 {"status": "running"} | {"status": "completed",
//                       "result": {…}} | {"status": "failed", "error": …}; 404 never received
//   GET /stats          → 200 FakeProviderStats as JSON;  GET /healthz → 200 {"status": "ok"}
//
// Idempotency: the first POST of an id starts its work — exactly once: `work_started` counts ids,
// never POSTs, which is how a test sees a double call. Any later POST with that key (a duplicate)
// never starts it again: while it runs the duplicate waits for the same work, after it ended it gets
// the recorded outcome at once; duplicates are always answered truthfully (200 with the same result,
// or 422), never with a fault — that is how a client recovers a lost or late answer by sending again.
// The one exception is a never-received POST: nothing of it is recorded (status 404), so the next
// POST of that id is a first POST again.
//
// Determinism: what happens to an id is a function of (seed, id) — plan_request() — never of a
// shared random stream, so the order in which concurrent requests arrive does not matter and two
// providers with the same seed behave the same. The fault is drawn per delivery (the number of
// earlier never-received POSTs of the id), so a never-received id may be received when sent again.
//
// Time: every duration option is in provider time and divided by time_scale (100 turns the default
// 15–25 s into 150–250 ms). Nothing blocks: latencies are timers on the I/O thread(s), so thousands
// of requests may wait at once.
//
// Bounds: body_bytes_max, header_bytes_max, connections_max (more are closed at once),
// ids_remembered_max (when full, the oldest ids are forgotten, first in first out — a forgotten id
// reads as never received — unless the oldest still runs: then a new id answers 503).
//
// Thread safety: the constructor starts the server on `threads` I/O threads of its own; every
// member function may be called from any thread. stop() (and the destructor) close every
// connection without answering and wait for the I/O threads.
#pragma once

#include <chrono>
#include <functional>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::jobs {

struct FakeProviderOptions {
  std::string host = "127.0.0.1";  // an IP address (or "localhost")
  std::uint16_t port = 0;          // 0: any free port (port() tells which)
  std::uint64_t seed = 0;
  // The time one piece of work takes, uniform over [min, max] (whole ms), before time_scale.
  std::int64_t latency_min_ms = 15'000;
  std::int64_t latency_max_ms = 25'000;
  double time_scale = 1.0;  // > 0; every duration here is divided by it
  // Shares of first deliveries that meet each fault, drawn from one uniform value per delivery: at
  // most one fault per delivery, so the rates are exact and must add up to at most 1.
  double fail_rate = 0;            // 422 at once, the work not done, status failed
  double lost_answer_rate = 0;     // the work completes (status completed), the POST answers 500
  double late_answer_rate = 0;     // the work completes on time; the POST answers late_extra_ms later
  double never_received_rate = 0;  // the connection closed unanswered, nothing recorded (status 404)
  std::int64_t late_extra_ms = 120'000;  // longer than a client's time-out
  int threads = 1;
  std::size_t ids_remembered_max = 1'000'000;
  std::size_t body_bytes_max = 64 * 1024;
  std::size_t header_bytes_max = 16 * 1024;
  std::size_t connections_max = 20'000;
  std::size_t id_length_max = 1'024;
  std::int64_t idle_timeout_ms = 60'000;  // real ms (not scaled): a connection's wait for a request
  // Called (on a provider thread) for every well-formed POST /generate as it arrives, before
  // anything else: benchmarks time submit-to-provider-request with it. Keep it short.
  std::function<void(std::string_view id)> on_post;
};

// Why `options` cannot run, in words; empty when they can.
std::string options_error(const FakeProviderOptions& options);

enum class FakeFault : std::uint8_t { none, refuse, lose_answer, answer_late, never_receive };
std::string_view fake_fault_name(FakeFault fault);

// What happens to delivery number `delivery` (0 = the first; counts earlier never-received POSTs)
// of `id`: a pure function of the options' seed, rates and durations.
struct FakeRequestPlan {
  FakeFault fault = FakeFault::none;          // from (seed, id, delivery)
  std::chrono::microseconds latency{0};       // from (seed, id), scaled
  std::chrono::microseconds late_extra{0};    // late_extra_ms, scaled
  std::uint32_t image_seed = 0;               // from (seed, id): the result's "seed"
};
FakeRequestPlan plan_request(const FakeProviderOptions& options, std::string_view id, std::uint32_t delivery);

// The result object of `id`'s completed work, serialized: {"image_url": …, "seed": image_seed}.
std::string fake_result_json(std::string_view id, std::uint32_t image_seed);

// Counters since start. Each is read atomically, the set is not one snapshot (read it when quiet).
struct FakeProviderStats {
  std::uint64_t requests = 0;            // POST /generate received, whatever their answer
  std::uint64_t work_started = 0;        // ids whose work started (once per id)
  std::uint64_t completed = 0;           // works completed
  std::uint64_t failed = 0;              // works refused (fail_rate)
  std::uint64_t running = 0;             // works started, not yet ended
  std::uint64_t duplicates_of_work = 0;  // POSTs that joined running work or replayed an ended one
  std::uint64_t in_flight = 0;           // POST /generate received, not yet answered or closed
  std::uint64_t never_received = 0;      // POSTs closed unanswered (never_received_rate)
  std::uint64_t answers_lost = 0;        // 500s after completed work (lost_answer_rate)
  std::uint64_t answers_late = 0;        // answers held back by late_extra (late_answer_rate)
  std::uint64_t rejected = 0;            // POST /generate answered 400, 409, 413, 415 or 503
};
std::string stats_json(const FakeProviderStats& stats);

// What the provider knows of one id.
struct FakeOutcome {
  enum class State : std::uint8_t { running, completed, failed };
  State state = State::running;
  std::string result_json;  // completed: the result object, serialized
  std::string error;        // failed: why
  FakeFault fault = FakeFault::none;  // the fault drawn for the POST that started the work
  std::uint64_t posts = 0;  // POSTs that reached this work: the first plus the duplicates
};

class FakeProvider {
 public:
  using Outcome = FakeOutcome;

  // Binds and starts serving. Throws std::invalid_argument if options_error() says why not, and
  // std::runtime_error if the address cannot be bound.
  explicit FakeProvider(FakeProviderOptions options);
  ~FakeProvider();
  FakeProvider(const FakeProvider&) = delete;
  FakeProvider& operator=(const FakeProvider&) = delete;

  std::uint16_t port() const;
  std::string base_url() const;  // "http://HOST:PORT" (0.0.0.0 and :: read as loopback)
  const FakeProviderOptions& options() const;
  FakeProviderStats stats() const;

  // Test hooks. nullopt: never received (or forgotten).
  std::optional<Outcome> outcome_of(std::string_view id) const;
  // Stops serving: waiting requests are never answered. Idempotent.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tollgate::jobs
