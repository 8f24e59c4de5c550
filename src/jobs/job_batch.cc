// The jobs slice of a batch (see job_batch.h).
#include "jobs/job_batch.h"

#include <algorithm>
#include <string>

#include "core/checked.h"
#include "core/limits.h"

namespace tollgate::jobs {
namespace {

#define TG_TRY(expr)                      \
  do {                                    \
    if (auto s_ = (expr); !s_) return s_; \
  } while (0)

Status check_lease(std::int64_t lease_ms) {
  if (lease_ms < 1 || lease_ms > limits::kHoldTtlMsMax) {
    return invalid("lease_ms must be from 1 to " + std::to_string(limits::kHoldTtlMsMax) + ", got " +
                   std::to_string(lease_ms));
  }
  return ok_status();
}

Error job_not_found(std::string_view id) {
  return Error::make(Code::not_found, "job " + std::string(id) + " does not exist");
}

// The job named by a claim or an end, checked against the hold the caller read with it.
Result<Job*> job_for_change(JobState& s, const std::string& id, const std::string& hold_id) {
  Job* j = s.job(id);
  if (!j) return job_not_found(id);
  if (j->hold_id != hold_id) {
    return Error::make(Code::conflict, "job " + id + "'s hold is " + j->hold_id + ", not " + hold_id);
  }
  return j;
}

std::optional<int> attempt_of(const Job& j) {
  return j.attempts > 0 ? std::optional<int>(j.attempts) : std::nullopt;
}

std::int64_t lease_until(std::int64_t now_ms, std::int64_t lease_ms) {
  const auto until = checked_add(now_ms, lease_ms);
  TG_ASSERT(until.has_value());  // lease_ms is validated
  return *until;
}

}  // namespace

Result<JobOutcome> JobSlice::decide(const SubmitJobCommand& c, JobState& s, batch::LedgerBatch& ledger) {
  if (const Job* existing = s.job(c.client_request_id)) {
    if (existing->account_id != c.account_id || existing->cost != c.cost || existing->provider != c.provider ||
        existing->input_json != c.input_json) {
      return Error::make(Code::idempotency_mismatch,
                         "client_request_id " + c.client_request_id + " already made a job of cost " +
                             std::to_string(existing->cost) + " for provider " + existing->provider + " on account " +
                             existing->account_id + " (with its own input)");
    }
    return JobOutcome{*existing, false};
  }
  ReserveCommand reserve;
  reserve.account_id = c.account_id;
  reserve.amount = c.cost;
  reserve.request_id = hold_request_id(c.client_request_id);
  reserve.ttl_ms = c.ttl_ms;
  reserve.metadata_json = "{\"job_id\":\"" + c.client_request_id + "\"}";  // ids need no escaping
  reserve.hold_id_random = c.hold_id_random;
  if (ledger.hold_by_request(reserve.request_id)) {
    // Jobs and their holds are only ever made together, and the holds API may not use the prefix.
    return Error::make(Code::internal, "hold " + reserve.request_id + " exists without its job");
  }
  Result<HoldOutcome> reserved = ledger.reserve(reserve);
  if (!reserved) return reserved.error();
  const Hold& hold = reserved.value().hold;
  Job j;
  j.client_request_id = c.client_request_id;
  j.account_id = c.account_id;
  j.cost = c.cost;
  j.provider = c.provider;
  j.input_json = c.input_json;
  j.status = JobStatus::pending;
  j.hold_id = hold.hold_id;
  j.created_at_ms = s.now_ms();
  j.updated_at_ms = s.now_ms();
  j.lease_owner = c.owner;
  j.lease_expires_at_ms = lease_until(s.now_ms(), c.lease_ms);
  Job& stored = s.insert(std::move(j));
  s.note(stored, "submitted", std::nullopt,
         "reserved " + std::to_string(c.cost) + " credits of account " + c.account_id + " as hold " + hold.hold_id +
             "; accepted by " + c.owner);
  return JobOutcome{stored, true};
}

Result<JobOutcome> JobSlice::decide(const ClaimJobCommand& c, JobState& s, batch::LedgerBatch& ledger) {
  auto found = job_for_change(s, c.client_request_id, c.hold_id);
  if (!found) return found.error();
  Job& j = **found;
  if (is_ended(j.status)) {
    return Error::make(Code::conflict, "job " + j.client_request_id + " has already ended (" +
                                           std::string(job_status_name(j.status)) + ")");
  }
  if (j.lease_owner && *j.lease_owner != c.owner && j.lease_expires_at_ms && *j.lease_expires_at_ms > s.now_ms()) {
    return Error::make(Code::conflict, "job " + j.client_request_id + " is leased by " + *j.lease_owner +
                                           " for another " + std::to_string(*j.lease_expires_at_ms - s.now_ms()) + " ms");
  }
  const Hold* hold = ledger.hold_for_change(j.hold_id);  // an overdue hold expires first
  TG_ASSERT(hold != nullptr);                  // a job's hold is made with it and never deleted
  if (j.status == JobStatus::pending && hold->status != HoldStatus::active) {
    // Never sent, so there is nothing to ask the provider: the job fails with its expired hold.
    j.status = JobStatus::failed;
    j.error = "the hold expired before the job was sent to its provider";
    j.lease_owner.reset();
    j.lease_expires_at_ms.reset();
    j.updated_at_ms = s.now_ms();
    s.note(j, "failed", std::nullopt, "by " + c.owner + ": " + *j.error + "; nothing was charged");
    return JobOutcome{j, true};
  }
  if (j.status == JobStatus::pending) {
    j.status = JobStatus::running;
    s.note(j, "running", std::nullopt, "started by " + c.owner);
  } else if (j.lease_owner != c.owner) {
    s.note(j, "claimed", attempt_of(j),
           "claimed by " + c.owner + (j.lease_owner ? " after the lease of " + *j.lease_owner + " expired" : ""));
  }
  if (!c.note.empty()) s.note(j, "answer", attempt_of(j), c.note);
  j.lease_owner = c.owner;
  j.lease_expires_at_ms = lease_until(s.now_ms(), c.lease_ms);
  if (c.begin_attempt) {
    ++j.attempts;
    s.note(j, "attempt", j.attempts, "request sent to provider " + j.provider + " by " + c.owner);
  }
  j.updated_at_ms = s.now_ms();
  return JobOutcome{j, true};
}

Result<JobOutcome> JobSlice::decide(const EndJobCommand& c, JobState& s, batch::LedgerBatch& ledger) {
  TG_ASSERT(is_ended(c.end));
  auto found = job_for_change(s, c.client_request_id, c.hold_id);
  if (!found) return found.error();
  Job& j = **found;
  const std::string by = std::string(ended_by_name(c.by));
  const std::string seen = c.note.empty() ? "" : " (" + c.note + ")";
  if (is_ended(j.status)) {
    if (j.status == JobStatus::cancelled && c.end == JobStatus::completed && !j.result_json) {
      j.result_json = c.result_json;
      j.updated_at_ms = s.now_ms();
      s.note(j, "late_result", attempt_of(j),
             "the provider's result arrived after the job was cancelled: recorded, nothing charged" + seen);
      return JobOutcome{j, true};
    }
    return JobOutcome{j, false};  // a job ends once
  }
  const Hold* hold = ledger.hold_for_change(j.hold_id);
  TG_ASSERT(hold != nullptr);
  std::optional<Hold> ended_hold;
  if (c.end == JobStatus::completed) {
    j.result_json = c.result_json;
    Result<HoldOutcome> committed = ledger.commit_hold(CommitCommand{j.hold_id, std::nullopt, c.late_commit});
    if (committed) {
      const Hold& h = committed.value().hold;
      ended_hold = h;
      j.status = JobStatus::completed;
      j.charged = h.committed_amount > 0;
      std::string how = "charged " + std::to_string(h.committed_amount);
      if (h.late_outcome == LateOutcome::charged) how = "late: charged " + std::to_string(h.committed_amount) + " after the hold expired";
      if (h.late_outcome == LateOutcome::forgiven) how = "late: forgiven, the hold had expired";
      s.note(j, "completed", attempt_of(j), "by " + by + ": " + how + seen);
    } else {
      // The hold expired and the late-commit policy rejects a late result: kept, not charged.
      j.status = JobStatus::failed;
      j.error = "the result arrived after the hold expired and was not charged: " + committed.error().detail;
      s.note(j, "failed", attempt_of(j), "by " + by + ": " + *j.error + seen);
    }
  } else {
    const std::string why = c.end == JobStatus::cancelled ? "cancelled" : c.error.value_or("failed");
    if (hold->status == HoldStatus::active) {
      Result<HoldOutcome> released = ledger.release_hold(ReleaseCommand{j.hold_id, why});
      TG_ASSERT(released.ok());
      ended_hold = released.value().hold;
    }
    j.status = c.end;
    j.error = c.end == JobStatus::failed ? std::optional<std::string>(why) : c.error;
    s.note(j, std::string(job_status_name(c.end)), attempt_of(j),
           "by " + by + ": " + why + "; nothing charged" + seen);
  }
  j.lease_owner.reset();
  j.lease_expires_at_ms.reset();
  j.updated_at_ms = s.now_ms();
  return JobOutcome{j, true, std::move(ended_hold)};
}

// --- keys, rows, validation ----------------------------------------------------------------------
void JobSlice::finish(JobKeys& k) {
  std::sort(k.ids.begin(), k.ids.end());
  k.ids.erase(std::unique(k.ids.begin(), k.ids.end()), k.ids.end());
}

void JobSlice::add_keys(const SubmitJobCommand& c, JobKeys& k, batch::LedgerKeys& ledger) {
  k.ids.push_back(c.client_request_id);
  ledger.accounts.push_back(c.account_id);
  ledger.request_ids.push_back(hold_request_id(c.client_request_id));
  ++ledger.new_holds_max;
  ++ledger.zombie_expiring_commands;
}

void JobSlice::add_keys(const ClaimJobCommand& c, JobKeys& k, batch::LedgerKeys& ledger) {
  k.ids.push_back(c.client_request_id);
  batch::add_hold_key(c.hold_id, ledger);
}

void JobSlice::add_keys(const EndJobCommand& c, JobKeys& k, batch::LedgerKeys& ledger) {
  k.ids.push_back(c.client_request_id);
  batch::add_hold_key(c.hold_id, ledger);
  ++ledger.live_holds_ending_max;
  ++ledger.zombie_expiring_commands;  // a late charge refused on the stored row
}

JobState::JobState(JobSnapshot snapshot, std::int64_t now_ms) : now_ms_(now_ms) {
  for (Job& j : snapshot.jobs) {
    const std::string id = j.client_request_id;
    jobs_.try_emplace(id, Slot{j, std::move(j)});
  }
}

Job* JobState::job(const std::string& id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second.now;
}

Job& JobState::insert(Job j) {
  const std::string id = j.client_request_id;
  TG_ASSERT(jobs_.count(id) == 0);
  return jobs_.try_emplace(id, Slot{std::nullopt, std::move(j)}).first->second.now;
}

void JobState::note(const Job& j, std::string kind, std::optional<int> attempt, std::string detail) {
  entries_.push_back(JobEntry{j.client_request_id, now_ms_, std::move(kind), attempt, std::move(detail)});
}

JobEffects JobState::effects() && {
  JobEffects e;
  for (auto& [id, slot] : jobs_) {
    if (!slot.before) {
      e.new_jobs.push_back(std::move(slot.now));
    } else if (!(*slot.before == slot.now)) {
      e.changed_jobs.push_back(batch::Change<Job>{std::move(*slot.before), std::move(slot.now)});
    }
  }
  e.entries = std::move(entries_);
  // Unique keys in one order on every instance, and deterministic output.
  std::sort(e.new_jobs.begin(), e.new_jobs.end(),
            [](const auto& a, const auto& b) { return a.client_request_id < b.client_request_id; });
  std::sort(e.changed_jobs.begin(), e.changed_jobs.end(),
            [](const auto& a, const auto& b) { return a.after.client_request_id < b.after.client_request_id; });
  return e;
}

Status JobSlice::validate(const SubmitJobCommand& c, const ValidationLimits& v) {
  TG_TRY(check_id(c.client_request_id, "client_request_id"));
  TG_TRY(check_id(c.account_id, "account_id"));
  TG_TRY(check_amount(c.cost, "cost"));
  TG_TRY(check_id(c.provider, "provider"));
  TG_TRY(check_text(c.input_json, limits::kJobInputBytesMax, "input"));
  if (c.ttl_ms) TG_TRY(check_ttl(*c.ttl_ms, v));
  TG_TRY(check_id(c.owner, "owner"));
  return check_lease(c.lease_ms);
}

Status JobSlice::validate(const ClaimJobCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.client_request_id, "client_request_id"));
  TG_TRY(check_id(c.hold_id, "hold_id"));
  TG_TRY(check_id(c.owner, "owner"));
  TG_TRY(check_lease(c.lease_ms));
  return check_text(c.note, limits::kReasonLengthMax, "note");
}

Status JobSlice::validate(const EndJobCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.client_request_id, "client_request_id"));
  TG_TRY(check_id(c.hold_id, "hold_id"));
  if (!is_ended(c.end)) return invalid("a job ends as completed, failed or cancelled");
  if (c.end == JobStatus::completed && !c.result_json) return invalid("a completed job needs its result");
  if (c.result_json) TG_TRY(check_text(*c.result_json, limits::kJobResultBytesMax, "result"));
  if (c.error) TG_TRY(check_text(*c.error, limits::kReasonLengthMax, "error"));
  return check_text(c.note, limits::kReasonLengthMax, "note");
}

#undef TG_TRY

void JobSlice::complete(SubmitJobCommand& c, const batch::Completion& completion) {
  if (!c.ttl_ms) c.ttl_ms = completion.hold_ttl_ms_default;
  c.hold_id_random = completion.hold_id_random();
}

void JobSlice::complete(EndJobCommand& c, const batch::Completion& completion) { c.late_commit = completion.late_commit; }

}  // namespace tollgate::jobs
