// tollgate core: what an API key may do — its scopes (api.md "Keys with scopes").
//
// An account key acts on its own account within `holds:write` (reserve, commit, release, extend),
// `jobs:write` (submit, cancel) and `read` (the account, its holds, jobs, events, transfers); one
// made without scopes has all three, as every key had before scopes existed. An admin key is bound
// to no account: `admin` may do everything, `admin:read` every read and nothing else. A route names
// the one scope it needs (http/routes.h); scope_grants() is the one rule that answers whether a
// key's scopes allow it.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace tollgate {

enum class Scope : std::uint8_t { holds_write, jobs_write, read, admin, admin_read };
inline constexpr std::array kAllScopes{Scope::holds_write, Scope::jobs_write, Scope::read, Scope::admin,
                                       Scope::admin_read};

// A set of scopes, in the canonical order of kAllScopes when listed.
class ScopeSet {
 public:
  constexpr ScopeSet() = default;
  constexpr ScopeSet(std::initializer_list<Scope> scopes) {
    for (Scope s : scopes) add(s);
  }
  constexpr bool has(Scope s) const { return (bits_ & bit(s)) != 0; }
  constexpr void add(Scope s) { bits_ = static_cast<std::uint8_t>(bits_ | bit(s)); }
  constexpr bool empty() const { return bits_ == 0; }
  friend constexpr bool operator==(ScopeSet, ScopeSet) = default;

 private:
  static constexpr std::uint8_t bit(Scope s) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(s)); }
  std::uint8_t bits_ = 0;
};

// What a key made without scopes has: an account key the three account scopes, an admin key admin.
inline constexpr ScopeSet kAccountKeyScopes{Scope::holds_write, Scope::jobs_write, Scope::read};
inline constexpr ScopeSet kAdminKeyScopes{Scope::admin};
inline ScopeSet default_scopes(bool account_key) { return account_key ? kAccountKeyScopes : kAdminKeyScopes; }

// "holds:write", "jobs:write", "read", "admin", "admin:read".
std::string_view scope_name(Scope scope);
std::optional<Scope> parse_scope(std::string_view name);
// The names of `scopes`, in canonical order: what the API answers as a key's "scopes".
std::vector<std::string_view> scope_names(ScopeSet scopes);
// The names, space-separated in canonical order ("holds:write read"): how a key's scopes are stored.
std::string scopes_text(ScopeSet scopes);
// The stored form back; nullopt when a name is unknown or the text is empty.
std::optional<ScopeSet> parse_scopes_text(std::string_view text);
// A stored key's scopes: its column's text, or NULL (a key made before scopes existed: the default of
// its kind); nullopt when the text names a scope this release does not know.
std::optional<ScopeSet> stored_scopes(const std::optional<std::string>& text, bool account_key);

// Whether a key with `scopes` may call a route that needs `needed`: its own scope, or admin (which
// may do everything), or admin:read for any read (read and admin:read).
bool scope_grants(ScopeSet scopes, Scope needed);

// Whether `scopes` is a valid set for a key of its kind: an account key's a non-empty subset of the
// three account scopes; an admin key's exactly admin or exactly admin:read. invalid_request naming
// what is wrong otherwise.
Status check_key_scopes(ScopeSet scopes, bool account_key);

}  // namespace tollgate
