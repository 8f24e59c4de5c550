// Routes of API keys: create an account's key or an admin key, the calling key, list keys, revoke a key.
#include "core/checked.h"
#include "core/clock.h"
#include "core/limits.h"
#include "core/scopes.h"
#include "core/suggest.h"
#include "http/routes.h"

namespace tollgate::http {

namespace {

// What a new key may be, as its body asks: {scopes?, expires_at?, name?} (api.md "Keys with
// scopes"). An unknown scope is refused naming the nearest one.
struct KeyFields {
  std::optional<ScopeSet> scopes;
  std::optional<std::int64_t> expires_at_ms;
  std::optional<std::string> name;
};

Result<ScopeSet> parse_scopes(const std::vector<std::string>& names) {
  if (names.empty()) return invalid("scopes must name at least one scope (or be left out)");
  std::vector<std::string> known;
  for (Scope s : kAllScopes) known.emplace_back(scope_name(s));
  ScopeSet out;
  for (const std::string& name : names) {
    const auto scope = parse_scope(name);
    if (!scope) {
      const auto near = closest(name, known);
      return invalid("unknown scope \"" + name + "\"" + (near ? "; did you mean \"" + *near + "\"?" : "") +
                     " (scopes: holds:write, jobs:write, read; admin keys: admin, admin:read)");
    }
    if (out.has(*scope)) return invalid("scopes names " + name + " twice");
    out.add(*scope);
  }
  return out;
}

Result<KeyFields> key_fields(const Call& call, bool scopes_required) {
  KeyFields k;
  if (call.body.empty() && !scopes_required) return k;
  auto body = body_object(call);
  if (!body) return body.error();
  FieldReader f(*body);
  auto scopes = f.nullable_strings("scopes", kAllScopes.size() + 1, limits::kIdLengthMax);
  auto expires_at = f.string("expires_at", limits::kIdLengthMax);
  auto name = f.string("name", limits::kKeyNameBytesMax);
  if (auto done = f.finish(); !done) return done.error();  // the first refused field, or an unknown one
  TG_ASSERT(scopes && expires_at && name);
  if (scopes->has_value()) {
    if (!scopes->value()) return invalid("scopes must be an array of scope names, not null");
    auto parsed = parse_scopes(*scopes->value());
    if (!parsed) return parsed.error();
    k.scopes = *parsed;
  } else if (scopes_required) {
    return invalid("scopes is required: [\"admin\"] or [\"admin:read\"]");
  }
  if (*expires_at) {
    k.expires_at_ms = parse_rfc3339_ms(**expires_at);
    if (!k.expires_at_ms) {
      return invalid("expires_at must be an RFC 3339 date-time with an offset, e.g. 2027-01-01T00:00:00Z");
    }
  }
  k.name = std::move(*name);
  return k;
}

json::value optional_time(const std::optional<std::int64_t>& t_ms) {
  return t_ms ? json::value(format_rfc3339_ms(*t_ms)) : json::value(nullptr);
}

json::array scopes_array(ScopeSet scopes) {
  json::array out;
  for (std::string_view name : scope_names(scopes)) out.emplace_back(name);
  return out;
}

// A new key (POST …/keys): `account_id` unset for an admin key. The secret is shown here only.
void submit_new_key(Context& ctx, Call& call, std::optional<std::string> account_id, KeyFields k) {
  std::string secret = new_secret();
  CreateKeyCommand command{new_key_id(), std::move(account_id), sha256_hex(secret)};
  command.scopes = k.scopes;
  command.expires_at_ms = k.expires_at_ms;
  command.name = std::move(k.name);
  submit(ctx, call, std::move(command), [secret](const CommandResult& r) {
    const auto& o = outcome<KeyOutcome>(r);
    return json_response(
        201, json::object{{"key_id", o.key.key_id},
                          {"account_id", o.key.account_id ? json::value(*o.key.account_id) : json::value(nullptr)},
                          {"secret", secret},
                          {"scopes", scopes_array(o.key.scopes)},
                          {"name", o.key.name ? json::value(*o.key.name) : json::value(nullptr)},
                          {"expires_at", optional_time(o.key.expires_at_ms)},
                          {"created_at", format_rfc3339_ms(o.key.created_at_ms)}});
  });
}

}  // namespace

void create_key(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "account_id"); !s) return call.reply(problem(s.error()));
  auto fields = key_fields(call, /*scopes_required=*/false);
  TG_REPLY_IF_ERROR(fields);
  submit_new_key(ctx, call, call.params[0], std::move(*fields));
}

void create_admin_key(Context& ctx, Call& call) {
  auto fields = key_fields(call, /*scopes_required=*/true);
  TG_REPLY_IF_ERROR(fields);
  submit_new_key(ctx, call, std::nullopt, std::move(*fields));
}

// The calling key, as the edge resolved it (no database read): what it may do and until when.
void calling_key(Context&, Call& call) {
  const Principal& p = call.principal;
  call.reply(json_response(
      200, json::object{{"key_id", p.key_id},
                        {"account_id", p.account_id ? json::value(*p.account_id) : json::value(nullptr)},
                        {"scopes", scopes_array(p.scopes)},
                        {"name", p.name ? json::value(*p.name) : json::value(nullptr)},
                        {"expires_at", optional_time(p.expires_at_ms)},
                        {"created_at", optional_time(p.created_at_ms)}}));
}

void revoke_key(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "key_id"); !s) return call.reply(problem(s.error()));
  if (!call.body.empty()) {
    auto body = body_object(call);
    TG_REPLY_IF_ERROR(body);
    TG_REPLY_IF_ERROR(FieldReader(*body).finish());
  }
  submit(ctx, call, RevokeKeyCommand{call.params[0]}, [&auth = ctx.auth](const CommandResult& r) {
    const auto& o = outcome<KeyOutcome>(r);
    auth.forget(o.key.key_id);
    json::object body{{"key_id", o.key.key_id}, {"revoked", true}};
    if (o.key.account_id) body["account_id"] = *o.key.account_id;
    if (o.key.revoked_at_ms) body["revoked_at"] = format_rfc3339_ms(*o.key.revoked_at_ms);
    return json_response(200, body);
  });
}

// Every key (admin keys too) or one account's, newest first, paged: ids, account, times — never a
// secret or its hash (KeySummary has neither).
void list_keys(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"account_id", "limit", "starting_after"}));
  std::optional<std::string> account_id;
  if (auto it = call.query.find("account_id"); it != call.query.end()) {
    if (auto s = check_id(it->second, "account_id"); !s) return call.reply(problem(s.error()));
    account_id = it->second;
  }
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto keys = ctx.ledger.list_keys(account_id, *page);
  TG_REPLY_IF_ERROR(keys);
  call.reply(page_response("keys", *keys));
}

}  // namespace tollgate::http
