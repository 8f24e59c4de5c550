// tollgate store/postgres: the reads of jobs (jobs/job_store.h) on the PostgreSQL store's readers.
//
// Thread safety: as JobReads — any thread; each call leases its own reader connection.
#pragma once

#include "core/clock.h"
#include "jobs/job_store.h"
#include "store/conn_pool.h"

namespace tollgate::pg {

class Conn;

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
