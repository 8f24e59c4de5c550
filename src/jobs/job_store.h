// tollgate jobs: the reads of jobs — one job, the paged list, a job's history, the jobs to recover —
// as one narrow interface every store backend implements (a role of the store, like store/lists.h).
// Jobs are written through the store's batches (jobs/job_batch.h: SubmitJobCommand, ClaimJobCommand,
// EndJobCommand), in the same transaction as their holds; this interface only reads.
//
// Thread safety: every method may be called from any thread; each answers from one snapshot.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "jobs/job.h"
#include "store/lists.h"

namespace tollgate::jobs {

// Jobs to list, newest first (in the order they were submitted). Every filter set must match.
struct JobQuery {
  std::optional<std::string> account_id;  // not_found when the account does not exist
  std::optional<JobStatus> status;
};

// Jobs not ended, by status.
struct UnendedJobs {
  std::int64_t pending = 0;
  std::int64_t running = 0;
};

class JobReads {
 public:
  virtual ~JobReads() = default;

  // The job, or not_found.
  virtual Result<Job> get_job(std::string_view client_request_id) = 0;
  // Jobs newest first. starting_after: a client_request_id of the list (else invalid_request).
  virtual Result<Page<Job>> list_jobs(const JobQuery& query, const PageRequest& page) = 0;
  // The job's story, oldest first, at most limits::kJobHistoryMax entries; not_found without the job.
  virtual Result<std::vector<JobEntry>> job_history(std::string_view client_request_id) = 0;
  // Jobs not ended whose lease has expired at the store's now (their worker died, or lost its
  // database), oldest lease first, at most `limit`: what recovery claims.
  virtual Result<std::vector<Job>> jobs_to_recover(std::int64_t limit) = 0;
  // How many jobs are pending and running (all instances'), from the index of unended jobs.
  virtual Result<UnendedJobs> count_unended() = 0;
};

}  // namespace tollgate::jobs
