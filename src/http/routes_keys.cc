// Routes of API keys: create an account's key, list keys, revoke a key.
#include "core/checked.h"
#include "http/routes.h"

namespace tollgate::http {

void create_key(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "account_id"); !s) return call.reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  TG_REPLY_IF_ERROR(FieldReader(*body).finish());
  std::string secret = new_secret();
  submit(ctx, call, CreateKeyCommand{new_key_id(), call.params[0], sha256_hex(secret)},
         [secret](const CommandResult& r) {
           const auto& o = outcome<KeyOutcome>(r);
           return json_response(201, json::object{{"key_id", o.key.key_id},
                                                  {"account_id", *o.key.account_id},
                                                  {"secret", secret},
                                                  {"created_at", format_rfc3339_ms(o.key.created_at_ms)}});
         });
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
