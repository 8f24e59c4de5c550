// tollgate jobs: a paid call that tollgate makes for a client, and its state machine (api.md, Jobs;
// design.md, State machines).
//
//   pending → running → completed | failed | cancelled        pending → cancelled | failed
//
// A job ends exactly once: the end states never change, and the end of a job and the end of its
// hold are one transaction — completed ⇔ the hold committed (or late-charged/forgiven), failed or
// cancelled ⇔ the hold released. `running` → `pending` never happens: a worker that lost its lease
// leaves the job `running`; the instance that claims it next reconciles it (asks the status URL or
// sends again with the same key), it does not start it afresh.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/hold_id.h"
#include "core/result.h"

namespace tollgate::jobs {

enum class JobStatus : std::uint8_t { pending, running, completed, failed, cancelled };

std::string_view job_status_name(JobStatus status);
std::optional<JobStatus> parse_job_status(std::string_view name);
inline bool is_ended(JobStatus s) {
  return s == JobStatus::completed || s == JobStatus::failed || s == JobStatus::cancelled;
}

// Who ended a job, for its history ("who ended it and why").
enum class EndedBy : std::uint8_t {
  provider,   // the provider's answer (or its status URL's) completed or failed it
  attempts,   // every attempt's outcome stayed unknown and there is no status URL: failed, released
  client,     // POST …/cancel
  recovery,   // an instance that found the job's lease expired settled it
};

struct Job {
  std::string client_request_id;  // the job's id, chosen by the client; the provider's idempotency key
  std::string account_id;
  std::int64_t cost = 0;  // reserved by its hold
  std::string provider;   // a name from the configuration
  std::string input_json;
  JobStatus status = JobStatus::pending;
  std::string hold_id;
  int attempts = 0;  // provider requests sent (or begun)
  std::optional<std::string> result_json;
  std::optional<std::string> error;
  bool charged = false;  // the hold was committed (or late-charged) for this job
  std::int64_t created_at_ms = 0;
  std::int64_t updated_at_ms = 0;
  // The running worker's lease: which instance, until when (the store's clock).
  std::optional<std::string> lease_owner;
  std::optional<std::int64_t> lease_expires_at_ms;

  friend bool operator==(const Job&, const Job&) = default;
};

// One line of a job's story (GET /v1/jobs/{id}/history), oldest first: a status change, a provider
// attempt and what it answered, a status-URL answer, who ended the job and why.
struct JobEntry {
  std::string client_request_id;
  std::int64_t at_ms = 0;
  std::string kind;                 // submitted, claimed, attempt, answer, status, completed, failed, cancelled, late_result
  std::optional<int> attempt;       // the attempt it belongs to, when it belongs to one
  std::string detail;               // in words

  friend bool operator==(const JobEntry&, const JobEntry&) = default;
};

// A job's hold is the hold with request_id "job:<client_request_id>": jobs own their holds
// (core/hold_id.h; JobSlice::kHoldOwner registers the prefix). The holds API's own request_ids may
// not begin with "job:", so they never collide with a job's; every event of that hold carries the
// job's id, and the holds API may not end or extend it — the job ends it.
inline constexpr HoldOwner kJobHoldOwner{"job:", "job", "jobs", "cancel the job to release it"};
inline std::string hold_request_id(std::string_view client_request_id) {
  return std::string(kJobHoldOwner.request_id_prefix) + std::string(client_request_id);
}

std::string_view ended_by_name(EndedBy by);

// Whether `from` may become `to`. Refusals: conflict (an ended job, or a move the machine does not
// have); a bug in the caller, never user input, when from == to.
Status check_transition(JobStatus from, JobStatus to);

// What a cancel does to a job in `status`: ends it (pending or running: cancelled, hold released),
// or nothing (already ended: the answer is the job as it is, 200).
inline bool cancel_ends(JobStatus status) { return !is_ended(status); }

}  // namespace tollgate::jobs
