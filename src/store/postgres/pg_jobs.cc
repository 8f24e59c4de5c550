#include "store/postgres/pg_jobs.h"

#include <string>

#include "core/hold_id.h"
#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"

namespace tollgate::pg {
namespace {

// --- the batch: loads and set-based writes --------------------------------------------------------
const std::string kJobs = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE client_request_id = ANY($1::text[])";
const std::string kInsertJobs =
    "INSERT INTO jobs (client_request_id, account_id, cost, provider, input, status, hold_id, hold_seq, attempts, "
    "result, error, charged, created_at_ms, updated_at_ms, lease_owner, lease_expires_at_ms) SELECT * FROM unnest("
    "$1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], "
    "$9::integer[], $10::text[], $11::text[], $12::boolean[], $13::bigint[], $14::bigint[], $15::text[], $16::bigint[])";
const std::string kUpdateJob =
    "WITH u AS (UPDATE jobs SET status = $2, attempts = $3::integer, result = $4, error = $5, charged = $6::boolean, "
    "updated_at_ms = $7::bigint, lease_owner = $8, lease_expires_at_ms = $9::bigint WHERE client_request_id = $1 AND "
    "status = $10 AND attempts = $11::integer AND updated_at_ms = $12::bigint RETURNING 1) "
    "SELECT tollgate_assert(count(*) = 1, 'a job changed behind the batch''s lock') FROM u";
const std::string kInsertJobEntries =
    "INSERT INTO job_history (client_request_id, at_ms, kind, attempt, detail) SELECT c, a, k, n, d FROM unnest($1::text[], "
    "$2::bigint[], $3::text[], $4::integer[], $5::text[]) WITH ORDINALITY AS v(c, a, k, n, d, ord) ORDER BY ord";


}  // namespace

JobLoads add_loads(const jobs::JobKeys& keys, std::vector<Conn::Pipelined>& st) {
  JobLoads at;
  if (!keys.ids.empty()) {
    st.push_back({&kJobs, Params(text_array(keys.ids))});
    at.jobs = st.size() - 1;
  }
  return at;
}

void take_rows(const JobLoads& at, const std::vector<Rows>& r, jobs::JobSnapshot& out) {
  if (at.jobs == JobLoads::kNoLoad) return;
  for (int i = 0; i < r[at.jobs].size(); ++i) out.jobs.push_back(read_job(r[at.jobs], i));
}

void add_writes(const jobs::JobEffects& e, std::vector<Conn::Pipelined>& st) {
  if (!e.new_jobs.empty()) {
    using J = jobs::Job;
    const auto& j = e.new_jobs;
    st.push_back({&kInsertJobs,
                  Params(text_array(column(j, [](const J& x) { return x.client_request_id; })),
                         text_array(column(j, [](const J& x) { return x.account_id; })),
                         int_array(column(j, [](const J& x) { return x.cost; })),
                         text_array(column(j, [](const J& x) { return x.provider; })),
                         text_array(column(j, [](const J& x) { return x.input_json; })),
                         text_array(column(j, [](const J& x) { return std::string(jobs::job_status_name(x.status)); })),
                         text_array(column(j, [](const J& x) { return x.hold_id; })),
                         int_array(column(j, [](const J& x) { return *hold_id_seq(x.hold_id); })),
                         int_array(column(j, [](const J& x) { return std::int64_t{x.attempts}; })),
                         text_array(column(j, [](const J& x) { return x.result_json; })),
                         text_array(column(j, [](const J& x) { return x.error; })),
                         bool_array(column(j, [](const J& x) { return x.charged; })),
                         int_array(column(j, [](const J& x) { return x.created_at_ms; })),
                         int_array(column(j, [](const J& x) { return x.updated_at_ms; })),
                         text_array(column(j, [](const J& x) { return x.lease_owner; })),
                         int_array(column(j, [](const J& x) { return x.lease_expires_at_ms; })))});
  }
  for (const auto& [before, after] : e.changed_jobs) {
    TG_ASSERT(before.client_request_id == after.client_request_id && before.hold_id == after.hold_id &&
              before.cost == after.cost && before.account_id == after.account_id);
    st.push_back({&kUpdateJob, Params(after.client_request_id, std::string(jobs::job_status_name(after.status)),
                                      std::int64_t{after.attempts}, after.result_json, after.error,
                                      std::string(after.charged ? "true" : "false"), after.updated_at_ms,
                                      after.lease_owner, after.lease_expires_at_ms,
                                      std::string(jobs::job_status_name(before.status)),
                                      std::int64_t{before.attempts}, before.updated_at_ms)});
  }
  if (!e.entries.empty()) {
    using E = jobs::JobEntry;
    const auto& v = e.entries;
    st.push_back({&kInsertJobEntries,
                  Params(text_array(column(v, [](const E& x) { return x.client_request_id; })),
                         int_array(column(v, [](const E& x) { return x.at_ms; })),
                         text_array(column(v, [](const E& x) { return x.kind; })),
                         int_array(column(v, [](const E& x) {
                           return x.attempt ? std::optional<std::int64_t>(*x.attempt) : std::nullopt;
                         })),
                         text_array(column(v, [](const E& x) { return x.detail; })))});
  }
}

}  // namespace tollgate::pg
