// tollgate store/sqlite: the reads of jobs (jobs/job_store.h) on the SQLite store's readers.
//
// Thread safety: as JobReads — any thread; each call leases its own reader connection.
#pragma once

#include "core/clock.h"
#include "jobs/job_batch.h"
#include "jobs/job_store.h"
#include "store/conn_pool.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

// The jobs slice's rows in a batch (sqlite_slices.h): the jobs its commands name, and the new and
// changed jobs and history lines it wrote.
void load_rows(Conn& db, const jobs::JobKeys& keys, std::int64_t now_ms, jobs::JobSnapshot& out);
void write_rows(Conn& db, const jobs::JobEffects& effects);

class SqliteJobs final : public jobs::JobReads {
 public:
  // `readers` and `clock` must outlive this (both are the store's).
  SqliteJobs(ConnPool<Conn>& readers, const Clock& clock) : readers_(readers), clock_(clock) {}

  Result<jobs::Job> get_job(std::string_view client_request_id) override;
  Result<Page<jobs::Job>> list_jobs(const jobs::JobQuery& query, const PageRequest& page) override;
  Result<std::vector<jobs::JobEntry>> job_history(std::string_view client_request_id) override;
  Result<std::vector<jobs::Job>> jobs_to_recover(std::int64_t limit) override;
  Result<jobs::UnendedJobs> count_unended() override;

 private:
  ConnPool<Conn>& readers_;
  const Clock& clock_;
};

}  // namespace tollgate::sqlite
