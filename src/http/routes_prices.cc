// Routes of prices (prices/price_batch.h): set and read a feature's price and its versions, and the
// check of a reservation without making it (POST /v1/holds/check).
#include <string>

#include "core/checked.h"
#include "core/limits.h"
#include "core/rules.h"
#include "http/routes.h"

namespace tollgate::http {

namespace {

// The refusal of an unknown feature, naming the known ones (prices::unknown_feature, as a
// reservation's: one more than it lists read, so that it knows there are more).
Error unknown_feature(Ledger& ledger, std::string_view feature) {
  auto known = ledger.price_reads().list_prices(PageRequest{prices::kKnownFeaturesListed + 1, std::nullopt});
  if (!known) return known.error();
  std::vector<std::string> names;
  for (const prices::Price& p : known->items) names.push_back(p.feature);
  return prices::unknown_feature(feature, names);
}

}  // namespace

void put_price(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "feature"); !s) return call.reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto credits = f.amount("credits_per_unit");
  TG_REPLY_IF_ERROR(credits);
  TG_REPLY_IF_ERROR(f.finish());
  submit(ctx, call, SetPriceCommand{call.params[0], *credits}, [](const CommandResult& r) {
    const auto& o = outcome<PriceOutcome>(r);
    return value_response(o.created ? 201 : 200, o.price);
  });
}

void get_price(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {}));
  auto price = ctx.ledger.price_reads().get_price(call.params[0]);
  TG_REPLY_IF_ERROR(price);
  call.reply(value_response(200, *price));
}

void list_prices(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"limit", "starting_after"}));
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto prices = ctx.ledger.price_reads().list_prices(*page);
  TG_REPLY_IF_ERROR(prices);
  call.reply(page_response("prices", *prices));
}

void list_price_versions(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"limit", "starting_after"}));
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto versions = ctx.ledger.price_reads().list_versions(call.params[0], *page);
  TG_REPLY_IF_ERROR(versions);
  call.reply(page_response("versions", *versions));
}

// The decision a reservation would meet now, from a read (nothing is written, nothing is locked):
// the account as readers see it (overdue holds expired) and the feature's current price.
void check_hold(Context& ctx, Call& call) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto what = read_what_to_reserve(f);
  TG_REPLY_IF_ERROR(what);
  TG_REPLY_IF_ERROR(f.finish());
  TG_REPLY_IF_ERROR(priced_or_amount(*what));
  if (auto e = check_account_visible(call.principal, what->account_id)) return call.reply(problem(*e));
  const auto& [account_id, amount, feature, quantity] = *what;
  auto account = ctx.ledger.get_account(account_id);
  TG_REPLY_IF_ERROR(account);
  std::optional<prices::Price> price;
  std::int64_t requested = amount.value_or(0);
  if (feature) {
    auto read = ctx.ledger.price_reads().get_price(*feature);
    if (!read && read.code() == Code::not_found) return call.reply(problem(unknown_feature(ctx.ledger, *feature)));
    TG_REPLY_IF_ERROR(read);
    price = *read;
    auto cost = prices::priced_amount(quantity.value_or(1), price->credits_per_unit);
    TG_REPLY_IF_ERROR(cost);
    requested = *cost;
  }
  const Result<Balances> decision = rules::reserve(*account, requested);
  HoldCheck check{account->account_id, account->balances.available, requested, price, quantity.value_or(1),
                  std::nullopt};
  if (!decision) check.refusal = decision.error();
  call.reply(value_response(200, check));
}

Result<WhatToReserve> read_what_to_reserve(FieldReader& f) {
  WhatToReserve what;
  auto account_id = f.id("account_id");
  if (!account_id) return account_id.error();
  auto amount = f.optional_amount("amount");
  if (!amount) return amount.error();
  auto feature = f.optional_id("feature");
  if (!feature) return feature.error();
  auto quantity = f.optional_amount("quantity");
  if (!quantity) return quantity.error();
  return WhatToReserve{std::move(*account_id), *amount, std::move(*feature), *quantity};
}

Status priced_or_amount(const WhatToReserve& what) {
  if (what.amount && what.feature) return invalid("give either amount or feature, not both");
  if (!what.amount && !what.feature) return invalid("amount or feature is required");
  if (what.quantity && !what.feature) return invalid("quantity goes with feature: a reservation by amount has none");
  return ok_status();
}

}  // namespace tollgate::http
