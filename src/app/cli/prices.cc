// tollgate cli: `price …` — the client side of routes_prices.cc (api.md, Prices): a feature's price,
// its versions. Holds by feature are `hold reserve --feature`, `hold commit --quantity`, `hold check`
// (holds.cc).

#include <boost/json.hpp>

#include <memory>
#include <string>

#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {

void add_price_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* price = app.add_subcommand("price", "the server's price of a feature: holds by feature and quantity cost it");
  price->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* set = price->add_subcommand("set", "set FEATURE's price to CREDITS_PER_UNIT (a new version when it changes)");
  set->add_option("FEATURE", a->feature, "feature id")->required()->check(kId);
  set->add_option("CREDITS_PER_UNIT", a->amount, "credits per unit, 1 to 2^53-1")->required()->transform(kAmount);
  add_connection_options(set, a->connection);
  set->callback([a, &exit_code] {
    exit_code = run(
        "price set", a->connection, [&](Client& c) { return c.set_price(a->feature, a->amount); },
        [&](const Response& r) {
          if (r.status() == 201) {
            std::printf("%s now costs %s credits per unit (version %s)\n", a->feature.c_str(),
                        field(r.json(), "credits_per_unit").c_str(), field(r.json(), "version").c_str());
          } else {
            std::printf("%s already costs %s credits per unit (version %s): nothing changed\n", a->feature.c_str(),
                        field(r.json(), "credits_per_unit").c_str(), field(r.json(), "version").c_str());
          }
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* show = price->add_subcommand("show", "show FEATURE's current price");
  show->add_option("FEATURE", a->feature, "feature id")->required()->check(kId);
  add_connection_options(show, a->connection);
  show->callback([a, &exit_code] {
    exit_code = run(
        "price show", a->connection, [&](Client& c) { return c.get_price(a->feature); },
        [](const Response& r) { print_fields(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* list = price->add_subcommand("list", "every feature's current price, by feature");
  const PageOptions list_page = add_page_options(list, *a, "feature");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, list_page] {
    const client::PageRequest page = page_request(list_page, *a);
    exit_code = run(
        "price list", a->connection, [&](Client& c) { return c.list_prices(page); },
        [](const Response& r) {
          print_page("price list", r.json(), "prices", "feature",
                     {{"FEATURE", false}, {"CREDITS_PER_UNIT", true}, {"VERSION", true}, {"UPDATED_AT", false}},
                     {"feature", "credits_per_unit", "version", "updated_at"});
        });
  });

  a = std::make_shared<Args>();
  auto* versions = price->add_subcommand("versions", "every price FEATURE had, newest first");
  versions->add_option("FEATURE", a->feature, "feature id")->required()->check(kId);
  const PageOptions versions_page = add_page_options(versions, *a, "version number");
  add_connection_options(versions, a->connection);
  versions->callback([a, &exit_code, versions_page] {
    const client::PageRequest page = page_request(versions_page, *a);
    exit_code = run(
        "price versions", a->connection, [&](Client& c) { return c.list_price_versions(a->feature, page); },
        [](const Response& r) {
          print_page("price versions", r.json(), "versions", "version",
                     {{"VERSION", true}, {"CREDITS_PER_UNIT", true}, {"SET_AT", false}},
                     {"version", "credits_per_unit", "updated_at"});
        });
  });
}

}  // namespace tollgate::app::cli
