// tollgate cli: `hold …` — the client side of routes_holds.cc.

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/limits.h"
#include "core/result.h"
#include "core/suggest.h"
#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {

namespace {

// --feature and --quantity of a reservation or its check: by feature instead of AMOUNT.
struct PricedOptions {
  CLI::Option* feature = nullptr;
  CLI::Option* quantity = nullptr;
};

PricedOptions add_priced_options(CLI::App* command, Args& a) {
  PricedOptions o;
  o.feature = command->add_option("--feature", a.feature, "by feature instead of AMOUNT: its price × --quantity")
                  ->check(kId);
  o.quantity = command->add_option("--quantity", a.quantity, "with --feature: the units (default 1)")->transform(kAmount);
  return o;
}

// Fills in the feature and quantity; a usage error (nothing sent) for AMOUNT and --feature both or
// neither, or --quantity without --feature.
void priced_request(const std::string& command, const CLI::Option* amount, const PricedOptions& o, const Args& a,
                    std::optional<std::string>& feature, std::optional<std::int64_t>& quantity) {
  const bool by_amount = amount->count() > 0;
  const bool by_feature = o.feature->count() > 0;
  if (by_amount && by_feature) throw CLI::ValidationError(command, "give AMOUNT or --feature, not both");
  if (!by_amount && !by_feature) throw CLI::ValidationError(command, "give AMOUNT, or --feature (and --quantity)");
  if (o.quantity->count() > 0 && !by_feature) throw CLI::ValidationError("--quantity", "goes with --feature");
  if (by_feature) feature = a.feature;
  if (o.quantity->count() > 0) quantity = a.quantity;
}

}  // namespace

void add_hold_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* hold = app.add_subcommand("hold", "reserve credits, then commit or release them");
  hold->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* reserve = hold->add_subcommand(
      "reserve", "move AMOUNT (or --quantity units of --feature at its price) from available to reserved, as a hold");
  reserve->add_option("ACCOUNT", a->account_id, "account id")->required()->check(kId);
  auto* reserve_amount = reserve->add_option("AMOUNT", a->amount, "credits, 1 to 2^53-1")->transform(kAmount);
  const PricedOptions reserve_priced = add_priced_options(reserve, *a);
  reserve->add_option("--request-id", a->request_id,
                      "your id of this reservation: the same id again answers the same hold (default: a new random id)")
      ->check(kId);
  auto* ttl = reserve->add_option("--ttl-ms", a->ttl_ms, "the hold expires after this many ms (default: the server's)")
                  ->transform(integer_range(limits::kHoldTtlMsMin, limits::kHoldTtlMsMax));
  add_connection_options(reserve, a->connection);
  reserve->callback([a, &exit_code, ttl, reserve_amount, reserve_priced] {
    client::ReserveRequest request;
    request.account_id = a->account_id;
    request.amount = a->amount;
    priced_request("hold reserve", reserve_amount, reserve_priced, *a, request.feature, request.quantity);
    // Made here, not in the client, so that a failure can name it for a safe retry.
    request.request_id = a->request_id.empty() ? Client::new_request_id("cli-") : a->request_id;
    if (ttl->count() > 0) request.ttl_ms = a->ttl_ms;
    Response last = Response::success(0, nullptr);
    exit_code = run(
        "hold reserve", a->connection,
        [&](Client& c) {
          last = c.reserve(request);
          return last;
        },
        [&](const Response& r) {
          if (r.status() == 201) {
            std::printf("reserved %s on %s: hold %s, expires %s\n", field(r.json(), "amount").c_str(),
                        a->account_id.c_str(), field(r.json(), "hold_id").c_str(), field(r.json(), "expires_at").c_str());
          } else {
            std::printf("request_id %s already made hold %s; shown as it is now\n", request.request_id.c_str(),
                        field(r.json(), "hold_id").c_str());
          }
          print_fields(r.json());
        });
    if (last.is_transport_error() || (last.is_problem() && last.status() >= 500)) {
      note("hold reserve", "to try again without ever reserving twice, run it again with --request-id " +
                               request.request_id);
    }
  });

  a = std::make_shared<Args>();
  auto* commit = hold->add_subcommand("commit", "move the hold (or --amount of it) to used; the rest returns to available");
  commit->add_option("HOLD", a->hold_id, "hold id")->required();
  auto* amount = commit->add_option("--amount", a->amount, "commit only this much (default: all of it)")->transform(kAmount);
  auto* quantity = commit->add_option("--quantity", a->quantity,
                                      "a hold reserved by feature: commit this many units at its frozen unit price")
                       ->transform(kAmount);
  amount->excludes(quantity);
  add_connection_options(commit, a->connection);
  commit->callback([a, &exit_code, amount, quantity] {
    std::optional<std::int64_t> part;
    if (amount->count() > 0) part = a->amount;
    const bool by_quantity = quantity->count() > 0;
    exit_code = run(
        "hold commit", a->connection,
        [&](Client& c) { return by_quantity ? c.commit_quantity(a->hold_id, a->quantity) : c.commit(a->hold_id, part); },
        [&](const Response& r) {
          const json::value& h = r.json();
          const std::int64_t used = number(h, "committed_amount");
          std::string line = "hold " + a->hold_id + " " + field(h, "status") + ": " + std::to_string(used) + " used, " +
                             std::to_string(number(h, "amount") - used) + " returned to available";
          if (!member(h, "late_outcome").is_null()) line += " (late commit: " + field(h, "late_outcome") + ")";
          std::printf("%s\n", line.c_str());
          print_fields(h);
        });
  });

  a = std::make_shared<Args>();
  auto* check = hold->add_subcommand(
      "check", "whether a hold of AMOUNT (or --quantity units of --feature) would be made now; reserves nothing");
  check->add_option("ACCOUNT", a->account_id, "account id")->required()->check(kId);
  auto* check_amount = check->add_option("AMOUNT", a->amount, "credits, 1 to 2^53-1")->transform(kAmount);
  const PricedOptions check_priced = add_priced_options(check, *a);
  add_connection_options(check, a->connection);
  check->callback([a, &exit_code, check_amount, check_priced] {
    client::CheckHoldRequest request;
    request.account_id = a->account_id;
    if (check_amount->count() > 0) request.amount = a->amount;
    priced_request("hold check", check_amount, check_priced, *a, request.feature, request.quantity);
    bool allowed = false;
    exit_code = run(
        "hold check", a->connection,
        [&](Client& c) {
          Response r = c.check_hold(request);
          allowed = r.ok() && member(r.json(), "allowed").is_bool() && member(r.json(), "allowed").as_bool();
          return r;
        },
        [&](const Response& r) {
          const json::value& v = r.json();
          if (allowed) {
            std::printf("allowed: %s of %s available on %s\n", field(v, "requested").c_str(), field(v, "available").c_str(),
                        a->account_id.c_str());
          } else {
            std::printf("refused (%s): %s\n", field(v, "reason").c_str(), field(v, "detail").c_str());
          }
          print_fields(v);
        });
    if (exit_code == kExitOk && !allowed) exit_code = kExitNotAllowed;
  });

  a = std::make_shared<Args>();
  auto* release = hold->add_subcommand("release", "return the whole hold to available");
  release->add_option("HOLD", a->hold_id, "hold id")->required();
  auto* reason = release->add_option("--reason", a->reason, "why (optional)");
  add_connection_options(release, a->connection);
  release->callback([a, &exit_code, reason] {
    std::optional<std::string> why;
    if (reason->count() > 0) why = a->reason;
    exit_code = run(
        "hold release", a->connection, [&](Client& c) { return c.release(a->hold_id, why); },
        [&](const Response& r) {
          const json::value& h = r.json();
          std::printf("hold %s %s: %s returned to available\n", a->hold_id.c_str(), field(h, "status").c_str(),
                      field(h, "amount").c_str());
          print_fields(h);
        });
  });

  a = std::make_shared<Args>();
  auto* extend = hold->add_subcommand("extend", "push an active hold's expiry to now + --ttl-ms");
  extend->add_option("HOLD", a->hold_id, "hold id")->required();
  extend->add_option("--ttl-ms", a->ttl_ms, "new time to live, from now")
      ->required()
      ->transform(integer_range(limits::kHoldTtlMsMin, limits::kHoldTtlMsMax));
  add_connection_options(extend, a->connection);
  extend->callback([a, &exit_code] {
    exit_code = run(
        "hold extend", a->connection, [&](Client& c) { return c.extend(a->hold_id, a->ttl_ms); },
        [&](const Response& r) {
          std::printf("hold %s now expires at %s\n", a->hold_id.c_str(), field(r.json(), "expires_at").c_str());
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* show = hold->add_subcommand("show", "show a hold");
  show->add_option("HOLD", a->hold_id, "hold id")->required();
  add_connection_options(show, a->connection);
  show->callback([a, &exit_code] {
    exit_code = run(
        "hold show", a->connection, [&](Client& c) { return c.get_hold(a->hold_id); },
        [](const Response& r) { print_fields(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* list = hold->add_subcommand("list", "list holds, newest first");
  auto* account = list->add_option("--account", a->account_id, "only this account's holds")->check(kId);
  auto* status = list->add_option("--status", a->status, "only holds in this status")
                     ->check(CLI::IsMember({"active", "committed", "released", "expired"}));
  auto* request_id = list->add_option("--request-id", a->request_id,
                                      "the hold of this reservation (an answer lost: look here before reserving again)")
                          ->check(kId);
  const PageOptions list_page = add_page_options(list, *a, "hold id");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, account, status, request_id, list_page] {
    client::ListHoldsRequest request;
    if (account->count() > 0) request.account_id = a->account_id;
    if (status->count() > 0) request.status = a->status;
    if (request_id->count() > 0) request.request_id = a->request_id;
    const client::PageRequest page = page_request(list_page, *a);
    request.limit = page.limit;
    request.starting_after = page.starting_after;
    exit_code = run(
        "hold list", a->connection, [&](Client& c) { return c.list_holds(request); },
        [](const Response& r) {
          print_page("hold list", r.json(), "holds", "hold_id",
                     {{"HOLD_ID", false}, {"ACCOUNT", false}, {"AMOUNT", true}, {"COMMITTED", true},
                      {"STATUS", false}, {"EXPIRES_AT", false}, {"REQUEST_ID", false}},
                     {"hold_id", "account_id", "amount", "committed_amount", "status", "expires_at", "request_id"});
        });
  });
}



}  // namespace tollgate::app::cli
