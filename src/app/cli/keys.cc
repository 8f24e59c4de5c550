// tollgate cli: `key …` — the client side of routes_keys.cc.

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

void add_key_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* key = app.add_subcommand("key", "create, list and revoke keys (admin key)");
  key->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* create = key->add_subcommand("create", "create a key for one account; its secret is shown only once");
  create->add_option("ACCOUNT", a->account_id, "account id")->required()->check(kId);
  add_connection_options(create, a->connection);
  create->callback([a, &exit_code] {
    exit_code = run(
        "key create", a->connection, [&](Client& c) { return c.create_key(a->account_id); },
        [](const Response& r) {
          print_fields(r.json());
          note("key create", "the secret is shown only this once: store it now");
        });
  });

  a = std::make_shared<Args>();
  auto* list = key->add_subcommand("list", "list keys, newest first: ids, account, created, last used — never secrets");
  auto* of_account = list->add_option("--account", a->account_id, "only this account's keys")->check(kId);
  const PageOptions list_page = add_page_options(list, *a, "key id");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, of_account, list_page] {
    const client::PageRequest page = page_request(list_page, *a);
    const std::optional<std::string> account = of_account->count() > 0 ? std::optional(a->account_id) : std::nullopt;
    exit_code = run(
        "key list", a->connection, [&](Client& c) { return c.list_keys(account, page); },
        [](const Response& r) {
          print_page("key list", r.json(), "keys", "key_id",
                     {{"KEY_ID", false}, {"KIND", false}, {"ACCOUNT", false}, {"CREATED_AT", false},
                      {"LAST_USED_AT", false}, {"REVOKED_AT", false}},
                     {"key_id", "kind", "account_id", "created_at", "last_used_at", "revoked_at"});
        });
  });

  a = std::make_shared<Args>();
  auto* revoke = key->add_subcommand("revoke", "revoke a key: it stops working at once");
  revoke->add_option("KEY_ID", a->key_id, "the key's id (key_…), not its secret")->required();
  add_connection_options(revoke, a->connection);
  revoke->callback([a, &exit_code] {
    exit_code = run(
        "key revoke", a->connection, [&](Client& c) { return c.revoke_key(a->key_id); },
        [&](const Response& r) {
          std::printf("key %s revoked\n", a->key_id.c_str());
          print_fields(r.json());
        });
  });
}



}  // namespace tollgate::app::cli
