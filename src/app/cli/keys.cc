// tollgate cli: `key …` — the client side of routes_keys.cc.
//
// `key create ACCOUNT` (or `key create --admin`) with --scope (repeated), --expires-in or
// --expires-at, and --name; `key whoami` (the calling key); `key list`; `key revoke`. A bad flag
// value is a usage error (exit 2) naming the flag, found before anything is sent: an unknown scope
// (with the nearest name), a scope of the other kind of key, a scope twice, a duration that is not
// a positive number with a unit (s, m, h, d), an --expires-at that is not RFC 3339, both
// --expires-in and --expires-at, a name of 0 or more than 100 bytes.

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/limits.h"
#include "core/parse.h"
#include "core/scopes.h"
#include "core/suggest.h"
#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {

namespace {

// What `key create` parses into, beside Args.
struct KeyCreateArgs {
  bool admin = false;
  std::vector<std::string> scopes;
  ExpiryOptions expiry;
  std::string name;
  CLI::Option* account = nullptr;
  CLI::Option* name_option = nullptr;
};

std::string joined(const auto& range, std::string_view separator) {
  std::string out;
  for (const auto& word : range) out += (out.empty() ? "" : std::string(separator)) + std::string(word);
  return out;
}

// The scopes of `key create`, checked against the kind of key by the server's own rules
// (core/scopes.h): a usage error names the flag.
void check_scopes(const std::vector<std::string>& scopes, bool admin) {
  std::vector<std::string> every;
  for (Scope s : kAllScopes) every.emplace_back(scope_name(s));
  ScopeSet set;
  for (const std::string& name : scopes) {
    const auto scope = parse_scope(name);
    if (!scope) {
      throw CLI::ValidationError("--scope", "unknown scope \"" + name + "\"" + did_you_mean(name, every) +
                                                "; the scopes are: " + joined(every, ", "));
    }
    if (set.has(*scope)) throw CLI::ValidationError("--scope", name + " is given twice");
    set.add(*scope);
  }
  if (scopes.empty() && !admin) return;  // the server's default: all three account scopes
  if (auto valid = check_key_scopes(set, /*account_key=*/!admin); !valid) {
    throw CLI::ValidationError("--scope", valid.error().detail + (admin ? "" : " (add --admin, and no ACCOUNT)"));
  }
}

// The request of `key create` from its flags, or a usage error (nothing sent).
client::CreateKeyRequest key_request(const KeyCreateArgs& k) {
  if (k.admin && k.account->count() > 0) {
    throw CLI::ValidationError("--admin", "an admin key belongs to no account: give --admin or ACCOUNT, not both");
  }
  if (!k.admin && k.account->count() == 0) {
    throw CLI::ValidationError("ACCOUNT", "the account of the key is required (or --admin for an admin key)");
  }
  check_scopes(k.scopes, k.admin);
  client::CreateKeyRequest r;
  r.scopes = k.scopes;
  r.expires_at = expiry_of(k.expiry);
  if (k.name_option->count() > 0) {
    if (k.name.empty() || k.name.size() > limits::kKeyNameBytesMax) {
      throw CLI::ValidationError("--name", "must be 1 to 100 bytes, got " + std::to_string(k.name.size()));
    }
    r.name = k.name;
  }
  return r;
}

// A key's answer for people: its scopes on one line ("holds:write read"; in a table "holds:write,read",
// one word a cell), the rest as the server sent it.
json::value readable_key(const json::value& key, std::string_view separator = " ") {
  if (!key.is_object()) return key;
  json::value out = key;
  if (json::value* scopes = out.get_object().if_contains("scopes"); scopes && scopes->is_array()) {
    std::vector<std::string> names;
    for (const json::value& s : scopes->get_array()) names.push_back(text(s));
    *scopes = joined(names, separator);
  }
  return out;
}

void add_key_create(CLI::App* key, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto k = std::make_shared<KeyCreateArgs>();
  auto* create = key->add_subcommand(
      "create", "create a key for one account (or, with --admin, an admin key); its secret is shown only once");
  k->account = create->add_option("ACCOUNT", a->account_id, "the key's account (not with --admin)")->check(kId);
  create->add_flag("--admin", k->admin, "an admin key (POST /v1/keys), with --scope admin or --scope admin:read");
  create->add_option("--scope", k->scopes,
                     "what the key may do, repeated: holds:write, jobs:write, read (account keys; default: all "
                     "three), or admin, admin:read (--admin: one of them)")
      ->allow_extra_args(false);
  add_expiry_options(create, k->expiry, "the key stops working");
  k->name_option = create->add_option("--name", k->name, "a name to know the key by in lists (1-100 bytes)");
  add_connection_options(create, a->connection);
  create->callback([a, k, &exit_code] {
    const client::CreateKeyRequest request = key_request(*k);
    exit_code = run(
        "key create", a->connection,
        [&](Client& c) { return k->admin ? c.create_admin_key(request) : c.create_key(a->account_id, request); },
        [](const Response& r) {
          print_fields(readable_key(r.json()));
          note("key create", "the secret is shown only this once: store it now");
        });
  });
}

void add_key_whoami(CLI::App* key, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* whoami = key->add_subcommand("whoami", "the key this command uses: its id, account, scopes, name and expiry (any key)");
  add_connection_options(whoami, a->connection);
  whoami->callback([a, &exit_code] {
    exit_code = run(
        "key whoami", a->connection, [](Client& c) { return c.get_key(); },
        [](const Response& r) { print_fields(readable_key(r.json())); });
  });
}

void add_key_list(CLI::App* key, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* list = key->add_subcommand(
      "list", "list keys, newest first: ids, account, scopes, name, expiry, created, last used — never secrets");
  auto* of_account = list->add_option("--account", a->account_id, "only this account's keys")->check(kId);
  const PageOptions list_page = add_page_options(list, *a, "key id");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, of_account, list_page] {
    const client::PageRequest page = page_request(list_page, *a);
    const std::optional<std::string> account = of_account->count() > 0 ? std::optional(a->account_id) : std::nullopt;
    exit_code = run(
        "key list", a->connection, [&](Client& c) { return c.list_keys(account, page); },
        [](const Response& r) {
          json::value readable = r.json();
          if (json::value* keys = readable.is_object() ? readable.get_object().if_contains("keys") : nullptr;
              keys && keys->is_array()) {
            for (json::value& item : keys->get_array()) {
              item = readable_key(item, ",");
              if (item.is_object() && !item.get_object().contains("scopes")) item.get_object()["scopes"] = "-";
            }
          }
          print_page("key list", readable, "keys", "key_id",
                     {{"KEY_ID", false}, {"KIND", false}, {"ACCOUNT", false}, {"SCOPES", false}, {"NAME", false},
                      {"EXPIRES", false}, {"CREATED_AT", false}, {"LAST_USED_AT", false}, {"REVOKED_AT", false}},
                     {"key_id", "kind", "account_id", "scopes", "name", "expires_at", "created_at", "last_used_at",
                      "revoked_at"});
        });
  });
}

}  // namespace

void add_key_commands(CLI::App& app, int& exit_code) {
  auto* key = app.add_subcommand("key", "create, list and revoke keys (admin key); whoami: the key in use (any key)");
  key->require_subcommand(1);
  add_key_create(key, exit_code);
  add_key_whoami(key, exit_code);
  add_key_list(key, exit_code);

  auto a = std::make_shared<Args>();
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
