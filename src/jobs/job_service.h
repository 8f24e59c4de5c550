// tollgate jobs: the use cases of jobs — submit, cancel, wait for a job's end.
//
// JobService is what the edge calls to change jobs or wait on them; reads of one job, the list and
// a job's history go to the ledger directly (they decide nothing).
//   - submit(): refuses a provider that is not configured, fills in what the server decides (this
//     instance as the lease owner, the provider's lease: JobRunner::lease_ms) and queues the
//     SubmitJob batch (the cost reserved and the job made together). Once that batch is durable and
//     made the job, the job goes to this instance's JobRunner at once (no polling delay).
//   - cancel(): a job already ended is answered as it is; otherwise it is ended as cancelled by its
//     client (its hold released in the same batch) and its request in flight here, if any, aborted.
//   - wait_for_end(): parks with the ledger's event waiters (a job's end always commits or releases
//     its hold, which writes an event) and reads the job again each time something newer is durable,
//     until it ended, the deadline passed, or the ledger's waiters were woken for a shutdown. No
//     thread waits in between.
//
// Thread safety: every method may be called from any thread. submit() and cancel() call `done`
// once, on the ledger's callback thread (or at once on the calling thread: an unknown provider, a
// job already ended);
// wait_for_end() calls `answer` once, from the thread `post` runs work on.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/commands.h"
#include "core/result.h"
#include "jobs/job.h"
#include "ledger/ledger.h"

namespace tollgate::jobs {

class JobRunner;

// What a client asks for when it submits a job (checked by the edge as it parsed it).
struct JobSubmission {
  std::string client_request_id;
  std::string account_id;
  std::int64_t cost = 0;
  std::string provider;
  std::string input_json;  // any JSON value, serialized
};

// A job read for a wait: the change feed's head read BEFORE the job, so that waiting for events
// after it misses nothing that ended the job after the read.
struct JobRead {
  Job job;
  std::int64_t last_event_id = 0;
};

class JobService {
 public:
  using Done = std::function<void(Result<JobOutcome>)>;
  using Answer = std::function<void(Result<Job>)>;
  // Runs `work` where a read may wait on the database (the reader executor); false: refused (full).
  using Post = std::function<bool(std::function<void()>)>;
  using Deadline = std::chrono::steady_clock::time_point;

  // `ledger` must outlive the service, and `runner` when given; the service must outlive every
  // wait it parked (stop the ledger, which wakes them, first). A null runner: no provider is
  // configured (every submit is refused); cancels and waits still work.
  JobService(Ledger& ledger, JobRunner* runner);

  // Calls `done` once: invalid_request naming the provider and the configured ones when `provider`
  // is not configured (at once, on the calling thread); else after the batch is durable (created:
  // the job was made now and has been started) or refused.
  void submit(JobSubmission submission, Done done);
  // Cancels `job` (as read by the caller) on behalf of its client; `note` goes into its history.
  void cancel(const Job& job, std::string note, Done done);
  // The job and the feed's head before it (for wait_for_end's `after`).
  Result<JobRead> read_for_wait(std::string_view client_request_id);
  // Answers the job once it ended, when `deadline` passed, or when the ledger's waiters are woken
  // with nothing newer than `after` (a shutdown); an error when a read fails, overloaded when `post`
  // refused the read.
  void wait_for_end(std::string client_request_id, std::int64_t after, Deadline deadline, Post post, Answer answer);

 private:
  void wait_step(std::shared_ptr<Answer> answer, std::string id, std::int64_t after, Deadline deadline, Post post);

  Ledger& ledger_;
  JobRunner* const runner_;  // constant after construction; may be null
};

}  // namespace tollgate::jobs
