#include "store/postgres/pg_jobs.h"

#include <array>
#include <limits>
#include <string>

#include "core/hold_id.h"
#include "core/limits.h"
#include "store/postgres/pg_read.h"
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


Error job_not_found(std::string_view id) {
  return Error::make(Code::not_found, "job " + std::string(id) + " does not exist");
}

std::optional<jobs::Job> job_row(Conn& db, std::string_view id) {
  static const std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE client_request_id = $1";
  Rows r = db.query(sql, std::string(id));
  if (r.empty()) return std::nullopt;
  return read_job(r, 0);
}

// One statement per combination of filters. $1 account, $2 status, $3 cursor hold_seq, $4 limit.
const std::string& jobs_sql(bool by_account, bool by_status) {
  static const auto statements = [] {
    std::array<std::string, 4> out;
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE hold_seq < $3::bigint";
      sql += (i & 1) ? " AND account_id = $1::text" : " AND ($1::text IS NULL OR true)";
      sql += (i & 2) ? " AND status = $2::text" : " AND ($2::text IS NULL OR true)";
      out[i] = sql + " ORDER BY hold_seq DESC LIMIT $4";
    }
    return out;
  }();
  return statements[(by_account ? 1 : 0) | (by_status ? 2 : 0)];
}

}  // namespace

Result<jobs::Job> PgJobs::get_job(std::string_view client_request_id) {
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t) -> Result<jobs::Job> {
    auto j = job_row(db, client_request_id);
    if (!j) return job_not_found(client_request_id);
    return std::move(*j);
  });
}

Result<Page<jobs::Job>> PgJobs::list_jobs(const jobs::JobQuery& query, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t) -> Result<Page<jobs::Job>> {
    if (query.account_id && db.query("SELECT 1 FROM accounts WHERE account_id = $1", *query.account_id).empty()) {
      return Error::make(Code::not_found, "account " + *query.account_id + " does not exist");
    }
    std::int64_t cursor = std::numeric_limits<std::int64_t>::max();
    if (page.starting_after) {
      const auto j = job_row(db, *page.starting_after);
      if (!j || (query.account_id && j->account_id != *query.account_id)) return unknown_cursor("job", *page.starting_after);
      cursor = *hold_id_seq(j->hold_id);
    }
    const std::optional<std::string> status =
        query.status ? std::optional<std::string>(jobs::job_status_name(*query.status)) : std::nullopt;
    Rows r = db.query(jobs_sql(query.account_id.has_value(), query.status.has_value()), query.account_id, status,
                      cursor, page.limit + 1);
    std::vector<jobs::Job> rows;
    for (int i = 0; i < r.size(); ++i) rows.push_back(read_job(r, i));
    return page_of(std::move(rows), page);
  });
}

Result<std::vector<jobs::JobEntry>> PgJobs::job_history(std::string_view client_request_id) {
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t) -> Result<std::vector<jobs::JobEntry>> {
    if (!job_row(db, client_request_id)) return job_not_found(client_request_id);
    static const std::string sql = std::string("SELECT ") + kJobEntryColumns +
                                   " FROM job_history WHERE client_request_id = $1 ORDER BY entry_id LIMIT $2";
    Rows r = db.query(sql, std::string(client_request_id), limits::kJobHistoryMax);
    std::vector<jobs::JobEntry> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(read_job_entry(r, i));
    return out;
  });
}

Result<std::vector<jobs::Job>> PgJobs::jobs_to_recover(std::int64_t limit) {
  TG_ASSERT(limit >= 1);
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t now) -> Result<std::vector<jobs::Job>> {
    static const std::string sql = std::string("SELECT ") + kJobColumns +
                                   " FROM jobs WHERE status IN ('pending', 'running') AND lease_expires_at_ms <= $1 "
                                   "ORDER BY lease_expires_at_ms LIMIT $2";
    Rows r = db.query(sql, now, limit);
    std::vector<jobs::Job> out;
    for (int i = 0; i < r.size(); ++i) out.push_back(read_job(r, i));
    return out;
  });
}

Result<jobs::UnendedJobs> PgJobs::count_unended() {
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t) -> Result<jobs::UnendedJobs> {
    Rows r = db.query("SELECT status, count(*) FROM jobs WHERE status IN ('pending', 'running') GROUP BY status");
    jobs::UnendedJobs out;
    for (int i = 0; i < r.size(); ++i) (r.text(i, 0) == "pending" ? out.pending : out.running) = r.int64(i, 1);
    return out;
  });
}

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
