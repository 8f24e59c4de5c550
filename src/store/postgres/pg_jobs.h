// tollgate store/postgres: the jobs slice's rows in a batch (the reads of jobs are the shared
// reads, store/reads.h).
//
// Thread safety: one thread at a time, the store's writer.
#pragma once

#include <cstddef>
#include <vector>

#include "jobs/job_batch.h"
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

}  // namespace tollgate::pg
