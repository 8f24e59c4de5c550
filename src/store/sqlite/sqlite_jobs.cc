#include "store/sqlite/sqlite_jobs.h"

#include <array>
#include <limits>
#include <string>

#include "core/hold_id.h"
#include "core/limits.h"
#include "store/sqlite/sqlite_read.h"
#include "store/sqlite/sqlite_rows.h"

namespace tollgate::sqlite {
namespace {

Error job_not_found(std::string_view id) {
  return Error::make(Code::not_found, "job " + std::string(id) + " does not exist");
}

// One statement per combination of filters (cached by address). ?1 account, ?2 status, ?3 cursor
// hold_seq, ?4 limit.
const char* jobs_sql(bool by_account, bool by_status) {
  static const auto statements = [] {
    std::array<std::string, 4> out;
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE hold_seq < ?3";
      if (i & 1) sql += " AND account_id = ?1";
      if (i & 2) sql += " AND status = ?2";
      out[i] = sql + " ORDER BY hold_seq DESC LIMIT ?4";
    }
    return out;
  }();
  return statements[(by_account ? 1 : 0) | (by_status ? 2 : 0)].c_str();
}

}  // namespace

Result<jobs::Job> SqliteJobs::get_job(std::string_view client_request_id) {
  return read_snapshot(readers_, [&](Conn& db) -> Result<jobs::Job> {
    auto j = job_row(db, client_request_id);
    if (!j) return job_not_found(client_request_id);
    return std::move(*j);
  });
}

Result<Page<jobs::Job>> SqliteJobs::list_jobs(const jobs::JobQuery& query, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  return read_snapshot(readers_, [&](Conn& db) -> Result<Page<jobs::Job>> {
    if (query.account_id && !account_row(db, *query.account_id)) {
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
    Query q(db.stmt(jobs_sql(query.account_id.has_value(), query.status.has_value())), query.account_id, status,
            cursor, page.limit + 1);
    std::vector<jobs::Job> rows;
    while (q.step()) rows.push_back(read_job(q.row()));
    return page_of(std::move(rows), page);
  });
}

Result<std::vector<jobs::JobEntry>> SqliteJobs::job_history(std::string_view client_request_id) {
  return read_snapshot(readers_, [&](Conn& db) -> Result<std::vector<jobs::JobEntry>> {
    if (!job_row(db, client_request_id)) return job_not_found(client_request_id);
    static const std::string sql = std::string("SELECT ") + kJobEntryColumns +
                                   " FROM job_history WHERE client_request_id = ?1 ORDER BY entry_id LIMIT ?2";
    Query q(db.stmt(sql.c_str()), client_request_id, limits::kJobHistoryMax);
    std::vector<jobs::JobEntry> out;
    while (q.step()) out.push_back(read_job_entry(q.row()));
    return out;
  });
}

Result<std::vector<jobs::Job>> SqliteJobs::jobs_to_recover(std::int64_t limit) {
  TG_ASSERT(limit >= 1);
  const std::int64_t now = clock_.now_ms();
  return read_snapshot(readers_, [&](Conn& db) -> Result<std::vector<jobs::Job>> {
    static const std::string sql = std::string("SELECT ") + kJobColumns +
                                   " FROM jobs WHERE status IN ('pending', 'running') AND lease_expires_at_ms <= ?1 "
                                   "ORDER BY lease_expires_at_ms LIMIT ?2";
    Query q(db.stmt(sql.c_str()), now, limit);
    std::vector<jobs::Job> out;
    while (q.step()) out.push_back(read_job(q.row()));
    return out;
  });
}

Result<jobs::UnendedJobs> SqliteJobs::count_unended() {
  return read_snapshot(readers_, [&](Conn& db) -> Result<jobs::UnendedJobs> {
    Query q(db.stmt("SELECT status, count(*) FROM jobs WHERE status IN ('pending', 'running') GROUP BY status"));
    jobs::UnendedJobs out;
    while (q.step()) (q->text(0) == "pending" ? out.pending : out.running) = q->int64(1);
    return out;
  });
}

}  // namespace tollgate::sqlite
