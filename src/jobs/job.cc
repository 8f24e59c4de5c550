// The job state machine (job.h).
#include "jobs/job.h"

#include <array>
#include <utility>

namespace tollgate::jobs {
namespace {

constexpr std::array<std::pair<JobStatus, std::string_view>, 5> kNames{{
    {JobStatus::pending, "pending"},
    {JobStatus::running, "running"},
    {JobStatus::completed, "completed"},
    {JobStatus::failed, "failed"},
    {JobStatus::cancelled, "cancelled"},
}};

}  // namespace

std::string_view job_status_name(JobStatus status) {
  for (const auto& [s, name] : kNames) {
    if (s == status) return name;
  }
  TG_ASSERT(false);
}

std::optional<JobStatus> parse_job_status(std::string_view name) {
  for (const auto& [s, n] : kNames) {
    if (n == name) return s;
  }
  return std::nullopt;
}

std::string_view ended_by_name(EndedBy by) {
  switch (by) {
    case EndedBy::provider: return "provider";
    case EndedBy::attempts: return "attempts";
    case EndedBy::client: return "client";
    case EndedBy::recovery: return "recovery";
  }
  TG_ASSERT(false);
}

Status check_transition(JobStatus from, JobStatus to) {
  TG_ASSERT(from != to);
  if (is_ended(from)) {
    return Error::make(Code::conflict, "the job has already ended (" + std::string(job_status_name(from)) + ")");
  }
  const bool allowed = (from == JobStatus::pending && to != JobStatus::completed) ||  // started, cancelled, failed
                       (from == JobStatus::running && is_ended(to));
  if (!allowed) {
    return Error::make(Code::conflict, "a " + std::string(job_status_name(from)) + " job cannot become " +
                                           std::string(job_status_name(to)));
  }
  return ok_status();
}

}  // namespace tollgate::jobs
