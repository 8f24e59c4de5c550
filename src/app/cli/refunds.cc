// tollgate cli: `refund hold|job …` — the client side of routes_refunds.cc (admin keys).

#include <boost/json.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {
namespace {

// The options both refunds take; `what` names the thing refunded in the help.
struct RefundOptions {
  CLI::Option* amount = nullptr;
};

RefundOptions add_refund_options(CLI::App* command, Args& a) {
  RefundOptions o;
  o.amount = command->add_option("--amount", a.amount, "give back only this much (default: everything charged and "
                                                       "not refunded yet)")
                 ->transform(kAmount);
  command->add_option("--reason", a.reason, "why the credits are given back (kept on the refunded event)")->required();
  command->add_option("--request-id", a.request_id,
                      "your id of this refund: the same id again gives back nothing more (default: a new random id)")
      ->check(kId);
  add_connection_options(command, a.connection);
  return o;
}

client::RefundRequest refund_request(const Args& a, const RefundOptions& o) {
  client::RefundRequest request;
  if (o.amount->count() > 0) request.amount = a.amount;
  request.reason = a.reason;
  // Made here, not in the client, so that a failure can name it for a safe retry.
  request.request_id = a.request_id.empty() ? Client::new_request_id("cli-refund-") : a.request_id;
  return request;
}

// After a failure whose outcome is unknown: how to try again without refunding twice.
void retry_note(const std::string& command, const Response& last, const client::RefundRequest& request) {
  if (last.is_transport_error() || (last.is_problem() && last.status() >= 500)) {
    note(command, "to try again without ever refunding twice, run it again with --request-id " + request.request_id);
  }
}

}  // namespace

void add_refund_commands(CLI::App& app, int& exit_code) {
  auto* refund = app.add_subcommand("refund", "give back credits a committed hold or a completed job charged (admin)");
  refund->require_subcommand(1);

  auto a = std::make_shared<Args>();
  auto* hold = refund->add_subcommand("hold", "give back credits a charged hold took: used back to available");
  hold->add_option("HOLD", a->hold_id, "hold id")->required();
  const RefundOptions hold_options = add_refund_options(hold, *a);
  hold->callback([a, &exit_code, hold_options] {
    const client::RefundRequest request = refund_request(*a, hold_options);
    Response last = Response::success(0, nullptr);
    exit_code = run(
        "refund hold", a->connection,
        [&](Client& c) {
          last = c.refund_hold(a->hold_id, request);
          return last;
        },
        [&](const Response& r) {
          const json::value& h = r.json();
          std::printf("hold %s: %s of %s charged refunded in all\n", a->hold_id.c_str(),
                      field(h, "refunded_amount").c_str(), field(h, "committed_amount").c_str());
          print_fields(h);
        });
    retry_note("refund hold", last, request);
  });

  a = std::make_shared<Args>();
  auto* job = refund->add_subcommand("job", "give back credits a completed job charged");
  job->add_option("JOB", a->job_id, "the job's client_request_id")->required()->check(kId);
  const RefundOptions job_options = add_refund_options(job, *a);
  job->callback([a, &exit_code, job_options] {
    const client::RefundRequest request = refund_request(*a, job_options);
    Response last = Response::success(0, nullptr);
    exit_code = run(
        "refund job", a->connection,
        [&](Client& c) {
          last = c.refund_job(a->job_id, request);
          return last;
        },
        [&](const Response& r) {
          const json::value& j = r.json();
          std::printf("job %s: %s of %s refunded in all\n", a->job_id.c_str(), field(j, "refunded_amount").c_str(),
                      field(j, "cost").c_str());
          print_fields(j);
        });
    retry_note("refund job", last, request);
  });
}

}  // namespace tollgate::app::cli
