// Routes of jobs (api.md, Jobs): submit, read (with wait_ms), cancel, list, history.
//
// A submit reserves the cost and makes the job in one batch; once that batch is durable this
// instance's JobRunner starts the provider call at once. A read with wait_ms parks with the ledger's
// event waiters (a job's end always commits or releases its hold, which writes an event) and reads
// the job again on the reader executor each time something new is durable, until it ended or the
// wait is over: no thread waits.
#include <chrono>
#include <memory>
#include <string>

#include "core/checked.h"
#include "core/limits.h"
#include "http/routes.h"
#include "jobs/runner.h"

namespace tollgate::http {
namespace {

Result<jobs::Job> visible_job(Ledger& ledger, const Call& call) {
  auto job = ledger.get_job(call.params[0]);
  if (!job) return job.error();
  if (!call.principal.may_see(job->account_id)) return not_found("job " + call.params[0]);
  return job;
}

Error unknown_provider(const jobs::JobRunner* runner, const std::string& name) {
  std::string known;
  if (runner) {
    for (const auto& [n, p] : runner->providers()) known += (known.empty() ? "" : ", ") + n;
  }
  return invalid("provider " + name + " is not configured (" +
                 (known.empty() ? std::string("no providers are: see [providers.NAME] in the configuration")
                                : "configured: " + known) +
                 ")");
}

using SharedReply = std::shared_ptr<Reply>;
using Deadline = std::chrono::steady_clock::time_point;

// Waits for events after `after`, then reads the job again (reader executor): answers it once it
// ended, when the wait is over, or when the server stops (woken with nothing new).
// `ctx` is copied (a request's Context is a set of references to what outlives every request).
void wait_for_end(Context ctx, SharedReply reply, std::string id, Deadline deadline, std::int64_t after) {
  ctx.ledger.when_events_after(after, deadline, [ctx, reply, id, deadline, after](Status woke) {
    if (!woke) return (*reply)(problem(woke.error()));
    const bool queued = ctx.readers.try_post([ctx, reply, id, deadline, after] {
      auto last = ctx.ledger.store().last_event_id();  // before the read: nothing between is missed
      if (!last) return (*reply)(problem(last.error()));
      auto job = ctx.ledger.get_job(id);
      if (!job) return (*reply)(problem(job.error()));
      const bool over = std::chrono::steady_clock::now() >= deadline || *last <= after;  // deadline, or stopping
      if (jobs::is_ended(job->status) || over) return (*reply)(value_response(200, *job));
      wait_for_end(ctx, reply, id, deadline, *last);
    });
    if (!queued) (*reply)(overloaded_reads());
  });
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
  jobs::JobRunner* runner = ctx.options.jobs;
  const ProviderConfig* p = runner ? runner->provider(*provider) : nullptr;
  if (!p) return call.reply(problem(unknown_provider(runner, *provider)));
  SubmitJobCommand c;
  c.client_request_id = *id;
  c.account_id = *account_id;
  c.cost = *cost;
  c.provider = *provider;
  c.input_json = std::move(**input);
  c.owner = runner->instance_id();
  c.lease_ms = jobs::JobRunner::lease_ms(*p);
  ctx.ledger.submit(std::move(c), [reply = std::move(call.reply), dispatch = call.dispatch, runner](CommandResult r) mutable {
    // Durable: start the provider call now (never waits), then answer from the request's strand.
    if (r.ok() && std::get<JobOutcome>(r.value()).created) runner->start(std::get<JobOutcome>(r.value()).job);
    dispatch([reply = std::move(reply), r = std::move(r)]() mutable {
      if (!r) return reply(problem(r.error()));
      const auto& o = outcome<JobOutcome>(r);
      reply(value_response(o.created ? 202 : 200, o.job));
    });
  });
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
  auto last = ctx.ledger.store().last_event_id();  // before the read (see wait_for_end)
  TG_REPLY_IF_ERROR(last);
  auto job = visible_job(ctx.ledger, call);
  TG_REPLY_IF_ERROR(job);
  if (jobs::is_ended(job->status)) return call.reply(value_response(200, *job));
  wait_for_end(ctx, std::make_shared<Reply>(std::move(call.reply)), job->client_request_id,
               std::chrono::steady_clock::now() + std::chrono::milliseconds(*wait_ms), *last);
}

void cancel_job(Context& ctx, Call& call) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  TG_REPLY_IF_ERROR(FieldReader(*body).finish());
  auto job = visible_job(ctx.ledger, call);
  TG_REPLY_IF_ERROR(job);
  if (jobs::is_ended(job->status)) return call.reply(value_response(200, *job));
  EndJobCommand c;
  c.client_request_id = job->client_request_id;
  c.hold_id = job->hold_id;
  c.end = jobs::JobStatus::cancelled;
  c.by = jobs::EndedBy::client;
  c.note = "cancelled with key " + call.principal.key_id;
  jobs::JobRunner* runner = ctx.options.jobs;
  ctx.ledger.submit(std::move(c), [reply = std::move(call.reply), dispatch = call.dispatch, runner](CommandResult r) mutable {
    if (r.ok() && runner) runner->cancel(std::get<JobOutcome>(r.value()).job.client_request_id);
    dispatch([reply = std::move(reply), r = std::move(r)]() mutable {
      if (!r) return reply(problem(r.error()));
      reply(value_response(200, outcome<JobOutcome>(r).job));
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
