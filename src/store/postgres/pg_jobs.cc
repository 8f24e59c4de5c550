#include "store/postgres/pg_jobs.h"

#include <array>
#include <limits>
#include <string>

#include "core/hold_id.h"
#include "core/limits.h"
#include "store/postgres/pg_read.h"
#include "store/postgres/pg_rows.h"

namespace tollgate::pg {
namespace {

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

}  // namespace tollgate::pg
