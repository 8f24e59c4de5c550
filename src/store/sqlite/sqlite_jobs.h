// tollgate store/sqlite: the jobs slice's rows in a batch (the reads of jobs are the shared reads,
// store/reads.h).
//
// Thread safety: one thread at a time, the store's writer inside its batch transaction.
#pragma once

#include "jobs/job_batch.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

// The jobs slice's rows in a batch (sqlite_slices.h): the jobs its commands name, and the new and
// changed jobs and history lines it wrote.
void load_rows(Conn& db, const jobs::JobKeys& keys, std::int64_t now_ms, jobs::JobSnapshot& out);
void write_rows(Conn& db, const jobs::JobEffects& effects);

}  // namespace tollgate::sqlite
