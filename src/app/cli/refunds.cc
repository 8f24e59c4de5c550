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

// The options both refunds take.
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

// Sends the refund (`send`), prints the answer with `summary` (its first line, from the answer's JSON)
// and every field; after a failure whose outcome is unknown, says how to try again without refunding
// twice. The exit code.
template <typename Send, typename Summary>
int run_refund(const std::string& command, const Args& a, const RefundOptions& o, Send send, Summary summary) {
  const client::RefundRequest request = refund_request(a, o);
  Response last = Response::success(0, nullptr);
  const int code = run(
      command, a.connection,
      [&](Client& c) {
        last = send(c, request);
        return last;
      },
      [&](const Response& r) {
        std::printf("%s\n", summary(r.json()).c_str());
        print_fields(r.json());
      });
  if (last.is_transport_error() || (last.is_problem() && last.status() >= 500)) {
    note(command, "to try again without ever refunding twice, run it again with --request-id " + request.request_id);
  }
  return code;
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
    exit_code = run_refund(
        "refund hold", *a, hold_options,
        [&](Client& c, const client::RefundRequest& r) { return c.refund_hold(a->hold_id, r); },
        [&](const json::value& h) {
          return "hold " + a->hold_id + ": " + field(h, "refunded_amount") + " of " + field(h, "committed_amount") +
                 " charged refunded in all";
        });
  });

  a = std::make_shared<Args>();
  auto* job = refund->add_subcommand("job", "give back credits a completed job charged");
  job->add_option("JOB", a->job_id, "the job's client_request_id")->required()->check(kId);
  const RefundOptions job_options = add_refund_options(job, *a);
  job->callback([a, &exit_code, job_options] {
    exit_code = run_refund(
        "refund job", *a, job_options,
        [&](Client& c, const client::RefundRequest& r) { return c.refund_job(a->job_id, r); },
        [&](const json::value& j) {
          return "job " + a->job_id + ": " + field(j, "refunded_amount") + " of " + field(j, "cost") + " refunded in all";
        });
  });
}

}  // namespace tollgate::app::cli
