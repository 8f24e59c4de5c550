#include "jobs/job_service.h"

#include <memory>
#include <utility>

#include "core/checked.h"
#include "jobs/runner.h"

namespace tollgate::jobs {
namespace {

Error unknown_provider(const JobRunner* runner, const std::string& name) {
  std::string known;
  if (runner) {
    for (const auto& [n, p] : runner->providers()) known += (known.empty() ? "" : ", ") + n;
  }
  return invalid("provider " + name + " is not configured (" +
                 (known.empty() ? std::string("no providers are: see [providers.NAME] in the configuration")
                                : "configured: " + known) +
                 ")");
}

Result<JobOutcome> job_outcome(CommandResult r) {
  if (!r) return r.error();
  auto* o = std::get_if<JobOutcome>(&r.value());
  TG_ASSERT(o != nullptr);  // a job command answers a JobOutcome
  return std::move(*o);
}

}  // namespace

JobService::JobService(Ledger& ledger, JobRunner* runner) : ledger_(ledger), runner_(runner) {}

void JobService::submit(JobSubmission s, Done done) {
  const ProviderConfig* p = runner_ ? runner_->provider(s.provider) : nullptr;
  if (!p) return done(unknown_provider(runner_, s.provider));
  SubmitJobCommand c;
  c.client_request_id = std::move(s.client_request_id);
  c.account_id = std::move(s.account_id);
  c.cost = s.cost;
  c.provider = std::move(s.provider);
  c.input_json = std::move(s.input_json);
  c.owner = runner_->instance_id();
  c.lease_ms = JobRunner::lease_ms(*p);
  ledger_.submit(std::move(c), [runner = runner_, done = std::move(done)](CommandResult r) {
    auto outcome = job_outcome(std::move(r));
    // Durable: start the provider call now (never waits), then answer.
    if (outcome && outcome->created) runner->start(outcome->job);
    done(std::move(outcome));
  });
}

void JobService::cancel(const Job& job, std::string note, Done done) {
  if (is_ended(job.status)) return done(JobOutcome{job, false, std::nullopt});
  EndJobCommand c;
  c.client_request_id = job.client_request_id;
  c.hold_id = job.hold_id;
  c.end = JobStatus::cancelled;
  c.by = EndedBy::client;
  c.note = std::move(note);
  ledger_.submit(std::move(c), [runner = runner_, done = std::move(done)](CommandResult r) {
    auto outcome = job_outcome(std::move(r));
    if (outcome && runner) runner->cancel(outcome->job.client_request_id);
    done(std::move(outcome));
  });
}

Result<JobRead> JobService::read_for_wait(std::string_view client_request_id) {
  auto last = ledger_.last_event_id();  // before the read: nothing between is missed
  if (!last) return last.error();
  auto job = ledger_.get_job(client_request_id);
  if (!job) return job.error();
  return JobRead{std::move(*job), *last};
}

void JobService::wait_for_end(std::string id, std::int64_t after, Deadline deadline, Post post, Answer answer) {
  wait_step(std::make_shared<Answer>(std::move(answer)), std::move(id), after, deadline, std::move(post));
}

void JobService::wait_step(std::shared_ptr<Answer> answer, std::string id, std::int64_t after, Deadline deadline,
                           Post post) {
  ledger_.when_events_after(after, deadline, [this, answer, id = std::move(id), deadline, after,
                                              post = std::move(post)](Status woke) {
    if (!woke) return (*answer)(woke.error());
    const bool queued = post([this, answer, id, deadline, after, post] {
      auto read = read_for_wait(id);
      if (!read) return (*answer)(read.error());
      const bool over = std::chrono::steady_clock::now() >= deadline || read->last_event_id <= after;  // deadline, or stopping
      if (is_ended(read->job.status) || over) return (*answer)(std::move(read->job));
      wait_step(answer, id, read->last_event_id, deadline, post);
    });
    if (!queued) (*answer)(Error::make(Code::overloaded, "too many reads are waiting; retry shortly"));
  });
}

}  // namespace tollgate::jobs
