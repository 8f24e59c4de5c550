// tollgate jobs: the jobs slice of a write batch (core/batch.h's seam) — a job's commands, the rows
// they name, what they decide, what they write. A job row and its hold change in the same batch:
// the hold through the ledger's part (batch::LedgerBatch: reserve, commit, release with the money
// rules of core/rules.h), the job row and its history here. Pure: no I/O, no clock, no threads.
//
// Keys: every job command names the job (client_request_id) and the account its hold changes
// (submit: by account_id; claim and end: by hold id), so a job row is only changed under its
// account's lock. Effects: new jobs, changed jobs (each with its row before, which guards the
// write), history lines in order. The dialects' loaders and writers: store/sqlite/sqlite_jobs.h,
// store/postgres/pg_jobs.h.
//
// Thread safety: plain values; a JobState is used by one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/batch.h"
#include "core/model.h"
#include "core/result.h"
#include "core/validate.h"
#include "jobs/job.h"

namespace tollgate::jobs {

// --- the commands ---------------------------------------------------------------------------------

// Creates a job and its hold (request_id hold_request_id(client_request_id)) in one
// transaction. The same client_request_id with the same account, cost, provider and input answers
// the job as it is (created=false); with anything else, idempotency_mismatch. Not enough credits:
// the reservation's refusal, and no job.
struct SubmitJobCommand {
  std::string client_request_id;
  std::string account_id;
  std::int64_t cost = 0;
  std::string provider;
  std::string input_json;  // a JSON value, stored as given
  std::optional<std::int64_t> ttl_ms;  // the hold's; unset: the server's default (set by the ledger)
  std::string hold_id_random;          // set by the ledger
  // The accepting instance starts the job at once; until lease_ms passed, no other claims it.
  std::string owner;
  std::int64_t lease_ms = 0;
};

// A worker takes (or keeps) a job: pending → running, or a running job whose lease expired (or is
// its own). The lease becomes owner until now + lease_ms. `begin_attempt` counts a provider request
// about to be sent (written before it is: recovery then knows it may have been received); `note`
// records what the previous exchange saw (its answer, a status-URL answer). Refusals: not_found,
// conflict (ended — the answer's job says how — or leased by another owner until later). A pending
// job whose hold already expired is failed here instead (never sent: nothing to ask about).
struct ClaimJobCommand {
  std::string client_request_id;
  std::string hold_id;  // the job's (read by the caller): the hold's account is locked for the batch
  std::string owner;
  std::int64_t lease_ms = 0;
  bool begin_attempt = false;
  std::string note;
};

// Ends a job and its hold in one transaction: completed commits the hold (an expired hold follows
// the late-commit policy; `reject` fails the job, result kept, nothing charged), failed and
// cancelled release it. A job ends once: ending an ended job changes nothing (created=false) — except
// that a result arriving after a cancel is recorded on the job (charging nothing).
struct EndJobCommand {
  std::string client_request_id;
  std::string hold_id;
  JobStatus end = JobStatus::failed;  // completed, failed or cancelled
  std::optional<std::string> result_json;          // completed (and a late result after a cancel)
  std::optional<std::string> error;                // failed: why
  EndedBy by = EndedBy::provider;
  std::string note;  // for the history: what was seen
  LateCommitPolicy late_commit = LateCommitPolicy::charge;  // set by the ledger
};

struct JobOutcome {  // submit, claim, end
  Job job;               // the job as it is now
  bool created = false;  // changed something (submit: made the job)
  // An end that also ended the job's hold (committed or released): the hold as it is now, so that
  // the holds-ended metrics count holds ended through jobs too. Unset otherwise.
  std::optional<Hold> ended_hold;
};

// --- the rows -------------------------------------------------------------------------------------

struct JobKeys {
  std::vector<std::string> ids;  // client_request_ids; sorted, unique once finished
};

struct JobSnapshot {
  std::vector<Job> jobs;  // of JobKeys::ids that exist
};

struct JobEffects {
  std::vector<Job> new_jobs;                    // by client_request_id
  std::vector<batch::Change<Job>> changed_jobs;  // by client_request_id
  std::vector<JobEntry> entries;                // appended to the jobs' histories, in order

  bool empty() const { return new_jobs.empty() && changed_jobs.empty() && entries.empty(); }
};

// The jobs of a batch in memory.
class JobState {
 public:
  JobState(JobSnapshot snapshot, std::int64_t now_ms);

  std::int64_t now_ms() const { return now_ms_; }
  Job* job(const std::string& id);
  Job& insert(Job j);
  // Appends a line to a job's history.
  void note(const Job& j, std::string kind, std::optional<int> attempt, std::string detail);

  JobEffects effects() &&;

 private:
  struct Slot {
    std::optional<Job> before;  // as loaded; unset for a job this batch made
    Job now;
  };
  std::int64_t now_ms_;
  std::unordered_map<std::string, Slot> jobs_;
  std::vector<JobEntry> entries_;
};

// --- the slice (core/batch.h's seam) --------------------------------------------------------------
struct JobSlice {
  using Commands = std::tuple<SubmitJobCommand, ClaimJobCommand, EndJobCommand>;
  using Outcomes = std::tuple<JobOutcome>;
  using Keys = JobKeys;
  using Snapshot = JobSnapshot;
  using Effects = JobEffects;
  using State = JobState;

  static void finish(JobKeys& k);

  static void add_keys(const SubmitJobCommand& c, JobKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const ClaimJobCommand& c, JobKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const EndJobCommand& c, JobKeys& k, batch::LedgerKeys& ledger);

  static Result<JobOutcome> decide(const SubmitJobCommand& c, JobState& s, batch::LedgerBatch& ledger);
  static Result<JobOutcome> decide(const ClaimJobCommand& c, JobState& s, batch::LedgerBatch& ledger);
  static Result<JobOutcome> decide(const EndJobCommand& c, JobState& s, batch::LedgerBatch& ledger);

  static Status validate(const SubmitJobCommand& c, const ValidationLimits& limits);
  static Status validate(const ClaimJobCommand& c, const ValidationLimits& limits);
  static Status validate(const EndJobCommand& c, const ValidationLimits& limits);

  // What the ledger fills in before queueing: a submit's hold TTL (when it names none) and the
  // random part of its hold's id; an end's late-commit policy (the configured one).
  static void complete(SubmitJobCommand& c, const batch::Completion& completion);
  static void complete(EndJobCommand& c, const batch::Completion& completion);

  // The hold a job's end ended (metrics count it with the holds API's ends), or nullptr.
  static const Hold* ended_hold(const JobOutcome& o) { return o.ended_hold ? &*o.ended_hold : nullptr; }

  // Jobs own their holds (core/hold_id.h): request_id "job:<client_request_id>".
  static constexpr HoldOwner kHoldOwner = kJobHoldOwner;
};

}  // namespace tollgate::jobs
