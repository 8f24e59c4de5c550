#include "store/sqlite/sqlite_jobs.h"

#include <string>

#include "core/hold_id.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {

void load_rows(Conn& db, const jobs::JobKeys& keys, std::int64_t /*now_ms*/, jobs::JobSnapshot& out) {
  for (const std::string& id : keys.ids) {
    if (auto j = job_row(db, id)) out.jobs.push_back(std::move(*j));
  }
}

void write_rows(Conn& db, const jobs::JobEffects& e) {
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
    expect_one_change(db, "job " + after.client_request_id);
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
