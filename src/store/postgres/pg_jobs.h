// tollgate store/postgres: the reads of jobs (jobs/job_store.h) on the PostgreSQL store's readers.
//
// Thread safety: as JobReads — any thread; each call leases its own reader connection.
#pragma once

#include "core/clock.h"
#include <cstddef>
#include <vector>

#include "jobs/job_batch.h"
#include "jobs/job_store.h"
#include "store/conn_pool.h"
#include "store/postgres/pg_conn.h"

namespace tollgate::pg {

// The jobs slice's rows in a batch (pg_slices.h): the jobs its commands name (their accounts are
// locked, so the rows are the batch's), and the new and changed jobs and history lines it wrote.
struct JobLoads {
  static constexpr std::size_t kNoLoad = static_cast<std::size_t>(-1);
  std::size_t jobs = kNoLoad;
};
JobLoads add_loads(const jobs::JobKeys& keys, std::vector<Conn::Pipelined>& st);
void take_rows(const JobLoads& at, const std::vector<Rows>& r, jobs::JobSnapshot& out);
void add_writes(const jobs::JobEffects& effects, std::vector<Conn::Pipelined>& st);

class PgJobs final : public jobs::JobReads {
 public:
  // `readers` (and `clock` when set) must outlive this. `clock` null: the database's clock.
  PgJobs(ConnPool<Conn>& readers, const Clock* clock) : readers_(readers), clock_(clock) {}

  Result<jobs::Job> get_job(std::string_view client_request_id) override;
  Result<Page<jobs::Job>> list_jobs(const jobs::JobQuery& query, const PageRequest& page) override;
  Result<std::vector<jobs::JobEntry>> job_history(std::string_view client_request_id) override;
  Result<std::vector<jobs::Job>> jobs_to_recover(std::int64_t limit) override;
  Result<jobs::UnendedJobs> count_unended() override;

 private:
  ConnPool<Conn>& readers_;
  const Clock* const clock_;
};

}  // namespace tollgate::pg
