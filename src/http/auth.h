// tollgate http: API keys — who is calling.
//
// `Authorization: Bearer <secret>`. The admin key (from the configuration, or generated at the
// first start) may do everything; once an admin key is configured, the generated one is refused.
// An account key only touches its own account; every key only within its scopes (core/scopes.h,
// enforced by the route table). A key past its expires_at is refused (401) — compared with the
// database's clock: the time of the read that found it, carried forward by this process's clock
// while it is cached, so every instance refuses it at the same moment. Secrets are
// 32 random bytes from the operating system; only their SHA-256 is stored, and hashes are
// compared in constant time. A key found in the database is cached for at most limits::kAuthCacheMs, so a
// revocation on another instance takes effect within that time (at once on this instance).
//
// Thread safety: Authenticator is safe to call from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/clock.h"
#include "core/limits.h"
#include "core/result.h"
#include "core/thread_annotations.h"
#include "ledger/key_directory.h"
#include "ledger/key_use.h"

namespace tollgate::http {

struct Principal {
  // Bound to no account (an admin key: `admin` or `admin:read`): sees every account. What it may
  // change is its scopes' to say (scope_grants), checked by the route table before any handler.
  bool admin = false;
  std::optional<std::string> account_id;  // set for an account key
  std::string key_id;
  ScopeSet scopes;  // none unless set: a principal built without them may do nothing scoped
  // The stored key's (GET /v1/key); unset for the configured admin key.
  std::optional<std::int64_t> expires_at_ms;
  std::optional<std::string> name;
  std::optional<std::int64_t> created_at_ms;

  // May this caller see `account_id`? (An account key sees only its own; anything else is 404.)
  bool may_see(std::string_view account) const { return admin || (account_id && *account_id == account); }
};

std::string sha256_hex(std::string_view data);
bool constant_time_equal(std::string_view a, std::string_view b);
// A new secret: "tgk_" + 43 characters of base64url (32 random bytes).
std::string new_secret();
// A new key id: "key_" + 16 hex digits.
std::string new_key_id();

class Authenticator {
 public:

  // `admin_key`: the configured admin secret, if any. `keys` (where stored keys are looked up:
  // the ledger's key directory) and `clock` must outlive this, and `key_uses` when given: every
  // request a stored key authenticates is noted there (its last use).
  Authenticator(KeyDirectory& keys, const Clock& clock, std::optional<std::string> admin_key,
                KeyUseRecorder* key_uses = nullptr);

  // Resolves the Authorization header. unauthorized when missing, malformed, unknown or revoked;
  // unavailable when the database cannot be asked.
  Result<Principal> authenticate(std::string_view authorization_header);
  // The same answer where it needs no database: a missing or malformed header, the configured admin
  // key, a key cached within limits::kAuthCacheMs. nullopt: only the database can tell — call
  // authenticate() where waiting on it is allowed (the reader executor, not an I/O thread).
  std::optional<Result<Principal>> authenticate_cached(std::string_view authorization_header);
  // Drops a revoked key from the cache at once.
  void forget(std::string_view key_id);

 private:
  struct Cached {
    std::optional<Principal> principal;  // unset: revoked
    std::int64_t fetched_at_ms = 0;      // this process's clock
    // The database's clock minus this process's at the lookup: its now is ours plus this.
    std::int64_t database_ahead_ms = 0;
  };
  // The answer for a found key at this process's `now_ms`: expired keys refused.
  static Result<Principal> answer(const Cached& entry, std::int64_t now_ms);
  KeyDirectory& keys_;
  const Clock& clock_;
  const std::optional<std::string> admin_sha256_;  // constant after construction
  KeyUseRecorder* const key_uses_;                  // constant after construction; may be null

  Mutex mu_;
  std::unordered_map<std::string, Cached> cache_ GUARDED_BY(mu_);  // secret hash → key
};

}  // namespace tollgate::http
