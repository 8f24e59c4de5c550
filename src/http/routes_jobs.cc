// Routes of jobs (api.md, Jobs): submit, read (with wait_ms), cancel, list, history.
//
// Submit, cancel and the wait of a read with wait_ms are the JobService's (jobs/job_service.h);
// these handlers parse, check what the caller may see, call it and render. A wait re-reads the job
// on the reader executor: no thread waits.
#include <chrono>
#include <memory>
#include <string>

#include "core/checked.h"
#include "core/limits.h"
#include "http/routes.h"
#include "jobs/job_service.h"

namespace tollgate::http {
namespace {

Result<jobs::Job> visible_job(Ledger& ledger, const Call& call) {
  auto job = ledger.get_job(call.params[0]);
  if (!job) return job.error();
  if (!call.principal.may_see(job->account_id)) return not_found("job " + call.params[0]);
  return job;
}

// Answers a job service's outcome from the request's strand (`created`: 202, else 200).
jobs::JobService::Done answer_outcome(Call& call) {
  return [reply = std::move(call.reply), dispatch = call.dispatch](Result<JobOutcome> r) mutable {
    dispatch([reply = std::move(reply), r = std::move(r)]() mutable {
      if (!r) return reply(problem(r.error()));
      reply(value_response(r->created ? 202 : 200, r->job));
    });
  };
}

}  // namespace

void submit_job(Context& ctx, Call& call) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto id = id_or_idempotency_key(f, call, "client_request_id");
  TG_REPLY_IF_ERROR(id);
  auto account_id = f.id("account_id");
  TG_REPLY_IF_ERROR(account_id);
  auto cost = f.amount("cost");
  TG_REPLY_IF_ERROR(cost);
  auto provider = f.id("provider");
  TG_REPLY_IF_ERROR(provider);
  auto input = f.any("input", limits::kJobInputBytesMax);
  TG_REPLY_IF_ERROR(input);
  TG_REPLY_IF_ERROR(f.finish());
  if (!*input) return call.reply(problem(invalid("input is required (any JSON value: what the provider is sent)")));
  if (auto e = check_account_visible(call.principal, *account_id)) return call.reply(problem(*e));
  jobs::JobSubmission submission{std::move(*id), std::move(*account_id), *cost, std::move(*provider), std::move(**input)};
  ctx.jobs.submit(std::move(submission), answer_outcome(call));
}

void get_job(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"wait_ms"}));
  auto wait_ms = query_int(call, "wait_ms", 0, 0, limits::kJobWaitMsMax);
  TG_REPLY_IF_ERROR(wait_ms);
  if (*wait_ms == 0) {
    auto job = visible_job(ctx.ledger, call);
    TG_REPLY_IF_ERROR(job);
    return call.reply(value_response(200, *job));
  }
  auto read = ctx.jobs.read_for_wait(call.params[0]);
  TG_REPLY_IF_ERROR(read);
  if (!call.principal.may_see(read->job.account_id)) return call.reply(problem(not_found("job " + call.params[0])));
  if (jobs::is_ended(read->job.status)) return call.reply(value_response(200, read->job));
  // `readers` outlives every request (the Context is a set of such references).
  ReadExecutor& readers = ctx.readers;
  ctx.jobs.wait_for_end(
      read->job.client_request_id, read->last_event_id,
      std::chrono::steady_clock::now() + std::chrono::milliseconds(*wait_ms),
      [&readers](std::function<void()> work) { return readers.try_post(std::move(work)); },
      [reply = std::move(call.reply)](Result<jobs::Job> job) mutable {
        if (!job) return reply(problem(job.error()));
        reply(value_response(200, *job));
      });
}

void cancel_job(Context& ctx, Call& call) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  TG_REPLY_IF_ERROR(FieldReader(*body).finish());
  auto job = visible_job(ctx.ledger, call);
  TG_REPLY_IF_ERROR(job);
  ctx.jobs.cancel(*job, "cancelled with key " + call.principal.key_id,
                  [reply = std::move(call.reply), dispatch = call.dispatch](Result<JobOutcome> r) mutable {
                    dispatch([reply = std::move(reply), r = std::move(r)]() mutable {
                      if (!r) return reply(problem(r.error()));
                      reply(value_response(200, r->job));
                    });
                  });
}

// Newest first, paged; an account key lists only its own account's jobs (another account: 404).
void list_jobs(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"account_id", "status", "limit", "starting_after"}));
  jobs::JobQuery query;
  auto account_id = listed_account(call);
  TG_REPLY_IF_ERROR(account_id);
  query.account_id = std::move(*account_id);
  if (auto it = call.query.find("status"); it != call.query.end()) {
    query.status = jobs::parse_job_status(it->second);
    if (!query.status) {
      return call.reply(problem(invalid("status must be pending, running, completed, failed or cancelled")));
    }
  }
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto jobs = ctx.ledger.list_jobs(query, *page);
  TG_REPLY_IF_ERROR(jobs);
  call.reply(page_response("jobs", *jobs));
}

void job_history(Context& ctx, Call& call) {
  auto job = visible_job(ctx.ledger, call);
  TG_REPLY_IF_ERROR(job);
  auto entries = ctx.ledger.job_history(job->client_request_id);
  TG_REPLY_IF_ERROR(entries);
  call.reply(written_response(200, [&](std::string& out) {
    out += "{\"entries\":[";
    for (std::size_t i = 0; i < entries->size(); ++i) {
      if (i > 0) out += ',';
      append_json(out, (*entries)[i]);
    }
    out += "]}";
  }));
}

}  // namespace tollgate::http
