// tollgate cli: `lots ACCOUNT` — an account's credit lots in spending order (GET
// /v1/accounts/{id}/lots; api.md, Credit lots). The credit that makes a lot is `account credit`
// (accounts.cc).

#include <boost/json.hpp>

#include <memory>
#include <optional>
#include <string>

#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {

namespace {

// The page for people: a lot without an expiry says "never" under EXPIRES.
json::value readable_lots(const json::value& page) {
  json::value out = page;
  json::value* lots = out.is_object() ? out.get_object().if_contains("lots") : nullptr;
  if (lots == nullptr || !lots->is_array()) return out;
  for (json::value& lot : lots->get_array()) {
    if (lot.is_object() && !lot.get_object().contains("expires_at")) lot.get_object()["expires_at"] = "never";
  }
  return out;
}

}  // namespace

void add_lots_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* lots = app.add_subcommand(
      "lots", "an account's credit lots in spending order: lowest priority, soonest expiry, oldest first");
  lots->add_option("ACCOUNT", a->account_id, "account id")->required()->check(kId);
  auto* status = lots->add_option("--status", a->status, "only the lots that are active, expired or spent")
                     ->check(CLI::IsMember({"active", "expired", "spent"}));
  const PageOptions page_options = add_page_options(lots, *a, "lot id");
  add_connection_options(lots, a->connection);
  lots->callback([a, &exit_code, status, page_options] {
    client::ListLotsRequest request;
    if (status->count() > 0) request.status = a->status;
    request.page = page_request(page_options, *a);
    exit_code = run(
        "lots", a->connection, [&](Client& c) { return c.list_lots(a->account_id, request); },
        [](const Response& r) {
          print_page("lots", readable_lots(r.json()), "lots", "lot_id",
                     {{"LOT", false}, {"CATEGORY", false}, {"PRIORITY", true}, {"AMOUNT", true}, {"AVAILABLE", true},
                      {"RESERVED", true}, {"USED", true}, {"EXPIRED", true}, {"EXPIRES", false}, {"STATUS", false}},
                     {"lot_id", "category", "priority", "amount", "available", "reserved", "used", "expired",
                      "expires_at", "status"});
        });
  });
}

}  // namespace tollgate::app::cli
