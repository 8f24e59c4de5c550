#include "core/scopes.h"

namespace tollgate {

namespace {
// By Scope's value (kAllScopes' order).
constexpr std::array<std::string_view, kAllScopes.size()> kNames{"holds:write", "jobs:write", "read", "admin",
                                                                  "admin:read"};
}  // namespace

std::string_view scope_name(Scope scope) {
  const auto i = static_cast<std::size_t>(scope);
  TG_ASSERT(i < kNames.size());
  return kNames[i];
}

std::optional<Scope> parse_scope(std::string_view name) {
  for (Scope s : kAllScopes) {
    if (scope_name(s) == name) return s;
  }
  return std::nullopt;
}

std::vector<std::string_view> scope_names(ScopeSet scopes) {
  std::vector<std::string_view> out;
  for (Scope s : kAllScopes) {
    if (scopes.has(s)) out.push_back(scope_name(s));
  }
  return out;
}

std::string scopes_text(ScopeSet scopes) {
  std::string out;
  for (std::string_view name : scope_names(scopes)) {
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out;
}

std::optional<ScopeSet> stored_scopes(const std::optional<std::string>& text, bool account_key) {
  if (!text) return default_scopes(account_key);
  return parse_scopes_text(*text);
}

std::optional<ScopeSet> parse_scopes_text(std::string_view text) {
  ScopeSet out;
  while (!text.empty()) {
    const std::size_t space = text.find(' ');
    const auto scope = parse_scope(text.substr(0, space));
    if (!scope) return std::nullopt;
    out.add(*scope);
    text = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

bool scope_grants(ScopeSet scopes, Scope needed) {
  if (scopes.has(Scope::admin) || scopes.has(needed)) return true;
  return scopes.has(Scope::admin_read) && (needed == Scope::read || needed == Scope::admin_read);
}

Status check_key_scopes(ScopeSet scopes, bool account_key) {
  if (scopes.empty()) return invalid("scopes must name at least one scope");
  if (account_key) {
    if (scopes.has(Scope::admin) || scopes.has(Scope::admin_read)) {
      return invalid("an account key's scopes are holds:write, jobs:write and read; admin and admin:read are for "
                     "admin keys (POST /v1/keys)");
    }
    return ok_status();
  }
  if (scopes == ScopeSet{Scope::admin} || scopes == ScopeSet{Scope::admin_read}) return ok_status();
  return invalid("an admin key's scopes are [\"admin\"] or [\"admin:read\"]; holds:write, jobs:write and read are for "
                 "account keys (POST /v1/accounts/{account_id}/keys)");
}

}  // namespace tollgate
