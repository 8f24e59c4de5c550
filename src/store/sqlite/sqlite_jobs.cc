#include "store/sqlite/sqlite_jobs.h"

#include <array>
#include <limits>
#include <string>

#include "core/hold_id.h"
#include "core/limits.h"
#include "store/sqlite/sqlite_read.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_write.h"

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

void load_rows(Conn& db, const jobs::JobKeys& keys, std::int64_t /*now_ms*/, jobs::JobSnapshot& out) {
  for (const std::string& id : keys.ids) {
    if (auto j = job_row(db, id)) out.jobs.push_back(std::move(*j));
  }
}

void write_rows(Conn& db, const jobs::JobEffects& e) {
  const auto expect_one_change = [&](const std::string& what) {
    // A row the batch read changed before its write: impossible while the writer holds the database.
    if (db.changes() != 1) throw SqlError(SQLITE_CORRUPT, what + " changed behind the batch's lock");
  };
  for (const jobs::Job& j : e.new_jobs) {
    const auto seq = hold_id_seq(j.hold_id);
    TG_ASSERT(seq.has_value());
    Query q(db.stmt("INSERT INTO jobs (client_request_id, account_id, cost, provider, input, status, hold_id, "
                     "hold_seq, attempts, result, error, charged, created_at_ms, updated_at_ms, lease_owner, "
                     "lease_expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)"),
            j.client_request_id, j.account_id, j.cost, j.provider, j.input_json, jobs::job_status_name(j.status),
            j.hold_id, *seq, std::int64_t{j.attempts}, j.result_json, j.error, std::int64_t{j.charged},
            j.created_at_ms, j.updated_at_ms, j.lease_owner, j.lease_expires_at_ms);
    q.step();
  }
  for (const auto& [before, after] : e.changed_jobs) {
    // What a job is never changes (its account, cost, provider, input, hold, creation).
    TG_ASSERT(before.client_request_id == after.client_request_id && before.hold_id == after.hold_id &&
              before.cost == after.cost && before.account_id == after.account_id);
    Query q(db.stmt("UPDATE jobs SET status = ?2, attempts = ?3, result = ?4, error = ?5, charged = ?6, "
                     "updated_at_ms = ?7, lease_owner = ?8, lease_expires_at_ms = ?9 "
                     "WHERE client_request_id = ?1 AND status = ?10 AND attempts = ?11 AND updated_at_ms = ?12"),
            after.client_request_id, jobs::job_status_name(after.status), std::int64_t{after.attempts},
            after.result_json, after.error, std::int64_t{after.charged}, after.updated_at_ms, after.lease_owner,
            after.lease_expires_at_ms, jobs::job_status_name(before.status), std::int64_t{before.attempts},
            before.updated_at_ms);
    q.step();
    expect_one_change("job " + after.client_request_id);
  }
  insert_rows(db, "INSERT INTO job_history (client_request_id, at_ms, kind, attempt, detail)", 5, e.entries,
              [](Stmt& s, int i, const jobs::JobEntry& entry) {
                s.bind(i, entry.client_request_id);
                s.bind(i + 1, entry.at_ms);
                s.bind(i + 2, entry.kind);
                s.bind(i + 3, entry.attempt ? std::optional<std::int64_t>(*entry.attempt) : std::nullopt);
                s.bind(i + 4, entry.detail);
              });
}

}  // namespace tollgate::sqlite
