// Routes of refunds (api.md "Refunds of a charge"; admin keys only — a kiosk must not refund
// itself): give back credits that a committed hold, or a completed job's hold, charged. The refund
// slice (refunds/refund_batch.h) decides; these handlers parse, find a job's hold and render.
#include <optional>
#include <string>

#include "core/limits.h"
#include "http/routes.h"
#include "jobs/job.h"

namespace tollgate::http {
namespace {

struct RefundRequest {
  std::optional<std::int64_t> amount;  // unset: everything charged and not yet refunded
  std::string reason;
  std::string request_id;
};

// {amount?, reason, request_id} (the Idempotency-Key header may stand for request_id).
Result<RefundRequest> refund_request(const Call& call) {
  auto body = body_object(call);
  if (!body) return body.error();
  FieldReader f(*body);
  auto amount = f.optional_amount("amount");
  if (!amount) return amount.error();
  auto reason = f.required_string("reason", limits::kReasonLengthMax);
  if (!reason) return reason.error();
  auto request_id = id_or_idempotency_key(f, call, "request_id");
  if (!request_id) return request_id.error();
  if (auto s = f.finish(); !s) return s.error();
  return RefundRequest{*amount, std::move(*reason), std::move(*request_id)};
}

}  // namespace

void refund_hold(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "hold_id"); !s) return call.reply(problem(s.error()));
  auto r = refund_request(call);
  TG_REPLY_IF_ERROR(r);
  submit(ctx, call, RefundCommand{call.params[0], std::nullopt, r->amount, std::move(r->reason), std::move(r->request_id)},
         [](const CommandResult& result) { return value_response(200, outcome<RefundOutcome>(result).hold); });
}

// On a reader: the job is read first, for its hold (a job's hold is refunded with the job named, so
// the holds API's refund of it is refused).
void refund_job(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "client_request_id"); !s) return call.reply(problem(s.error()));
  auto r = refund_request(call);
  TG_REPLY_IF_ERROR(r);
  auto job = ctx.ledger.get_job(call.params[0]);
  TG_REPLY_IF_ERROR(job);
  if (job->status != jobs::JobStatus::completed) {
    return call.reply(problem(Error::make(Code::conflict, "job " + job->client_request_id + " is " +
                                                              std::string(jobs::job_status_name(job->status)) +
                                                              ": only a completed job's charge can be refunded")));
  }
  RefundCommand c{job->hold_id, jobs::hold_request_id(job->client_request_id), r->amount, std::move(r->reason),
                  std::move(r->request_id)};
  // The job as read, and what its hold has given back so far.
  submit(ctx, call, std::move(c), [job = std::move(*job)](const CommandResult& result) {
    const std::int64_t refunded = outcome<RefundOutcome>(result).hold.refunded_amount;
    return written_response(200, [&](std::string& out) {
      append_json(out, job);
      TG_ASSERT(!out.empty() && out.back() == '}');
      out.pop_back();
      out += ",\"refunded_amount\":";
      out += std::to_string(refunded);
      out += '}';
    });
  });
}

}  // namespace tollgate::http
