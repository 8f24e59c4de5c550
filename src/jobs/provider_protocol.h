// tollgate jobs: the provider contract as pure decisions (api.md, "What tollgate sends a provider").
//
// A job's worker sends `POST {url}` with `Idempotency-Key: {client_request_id}` and the body
// request_body() makes, then asks after_send() what the answer means; when the outcome is unknown
// and the provider has a status URL, it asks `GET {status_url}` and after_status() reads that answer.
// Nothing here does I/O, reads a clock or draws a random number: the worker (src/jobs/worker) does,
// and passes what it saw. The rules, in one place:
//
//   send answered 2xx {"result": {...}}    → complete with the result (the hold is committed)
//   send answered 4xx                      → fail: the provider refused and charged nothing (released)
//   send answered 5xx, a 2xx without a
//   readable result, timed out, or the
//   connection was lost after sending      → unknown: ask the status URL if there is one, else send
//                                            again with the same key while attempts remain, then
//                                            fail (and release)
//   the connection could not be made       → never sent: send again while attempts remain, then fail
//   status 200 {"status": "completed", "result"} → complete;  {"status": "failed", "error"} → fail
//   status 200 {"status": "running"}, 5xx, time-out, anything unreadable → ask again later
//   status 404                             → never received: send again while attempts remain,
//                                            else fail
//
// A status URL is asked until it knows — there is no cap on the number of questions: the provider
// may have done (and billed) the work, so giving up would guess. The wait between questions grows
// (status_poll_delay) and the hold's TTL bounds the whole: a result that arrives after the hold
// expired follows the late-commit policy.
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::jobs {

// The body of every attempt of one job: {"id": client_request_id, "input": <input>}. `input_json`
// is the job's input as stored (a JSON value, already validated).
std::string request_body(std::string_view client_request_id, std::string_view input_json);

// The status URL of one job: the configured template with `{id}` replaced by the percent-encoded
// client_request_id (every `{id}`; a template without one is used as is).
std::string status_url_for(std::string_view url_template, std::string_view client_request_id);

// What the transport saw of one exchange.
struct Exchange {
  enum class Kind : std::uint8_t {
    answered,        // an HTTP answer arrived: `status` and `body` are set
    timed_out,       // sent (perhaps only in part), no complete answer within the time-out
    connection_lost, // the connection broke after the request began to be written
    not_connected,   // the connection could not be made: nothing was sent
  };
  Kind kind = Kind::answered;
  unsigned status = 0;
  std::string body;
};

// What a worker does next.
enum class Next : std::uint8_t {
  complete,    // commit the hold; `result_json` is the provider's result
  fail,        // release the hold; `reason` says why
  ask_status,  // ask the status URL (after status_poll_delay)
  send_again,  // send the same request again, same Idempotency-Key (after the attempt back-off)
};

struct Decision {
  Next next = Next::fail;
  std::string result_json;  // complete: the result object, serialized
  std::string reason;       // for the job's history (and fail's error): what was seen, in words
};

// After attempt number `attempt` (1 = the first) of at most `attempts_max` (≥ 1).
Decision after_send(const Exchange& exchange, bool has_status_url, int attempt, int attempts_max);

// After asking the status URL, with `attempt` sends made so far of at most `attempts_max`.
Decision after_status(const Exchange& exchange, int attempt, int attempts_max);

// The wait before status question number `question` (1 = the first): limits::kStatusPollFirstMs
// doubled each time, at most limits::kStatusPollMaxMs, then spread by `jitter` ∈ [0, 1) over [½, 1] of that (so that many workers that lost
// their answers at once do not ask in step).
std::chrono::milliseconds status_poll_delay(int question, double jitter);

}  // namespace tollgate::jobs
