// tollgate core: the ledger's own write operations as values (accounts, credits and debits, holds,
// API keys), and what each one answers.
//
// A command is what a caller asks for, already validated at the service boundary (amounts in
// range, ids well-formed). A store applies a sequence of commands in one transaction (group
// commit) and answers a result for each: the outcome, or the precise refusal. The feature slices
// add their own commands and outcomes beside these; src/slices.h assembles
// them all into the one `Command` and `Outcome` a batch carries (docs/adding-a-feature.md).
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/model.h"
#include "core/result.h"

namespace tollgate {

struct CreateAccountCommand {
  std::string account_id;
  std::int64_t overdraft_limit = 0;
  std::optional<std::int64_t> max_active_holds;
};

struct CreditCommand {
  std::string account_id;
  std::int64_t amount = 0;
  std::string reference;  // unique over all credits and debits, ever
  LotTerms lot;           // the lot it makes (core/lots.h)
};

struct DebitCommand {
  std::string account_id;
  std::int64_t amount = 0;
  std::string reference;
  std::string reason;
};

struct ReserveCommand {
  std::string account_id;
  std::int64_t amount = 0;
  std::string request_id;      // unique over all holds, ever
  // The hold expires at now + ttl_ms. Unset: the server's default, filled in by the ledger before
  // a store sees the command.
  std::optional<std::int64_t> ttl_ms;
  std::string metadata_json;   // a JSON object; empty means {}
  // The random part of the new hold's id (set by the ledger). A hold id is
  // "hold_<sequence>_<random part>": the store's sequence keeps ids increasing (cheap to index),
  // the random part keeps them unguessable.
  std::string hold_id_random;
};

struct CommitCommand {
  std::string hold_id;
  std::optional<std::int64_t> amount;  // unset: the whole hold
  LateCommitPolicy late_commit = LateCommitPolicy::charge;  // set by the ledger from its configuration
};

struct ReleaseCommand {
  std::string hold_id;
  // Why (optional): kept on the hold and on its `released` event. A replay keeps the first one.
  std::optional<std::string> reason;
};
// A hold a slice owns (core/hold_id.h) is committed, released and extended only by its owner (and
// the reaper): the holds API's commit, release and extend of it answer conflict.

// Changes an account's settings (PATCH). Unset fields stay as they are; a change writes an
// `account_updated` event with the settings after it, and a command that changes nothing is a
// replay (no event). Lowering overdraft_limit below what is already overdrawn is a conflict.
struct UpdateAccountCommand {
  std::string account_id;
  std::optional<std::int64_t> overdraft_limit;
  // Unset: unchanged; set to nullopt: no limit.
  std::optional<std::optional<std::int64_t>> max_active_holds;
  std::optional<bool> frozen;
  // Unset: unchanged; set to nullopt: no balance notices. Setting it writes no notice, whatever
  // the balance (docs/api.md "Balance notices").
  std::optional<std::optional<std::int64_t>> low_balance_threshold;
};

struct ExtendCommand {
  std::string hold_id;
  std::int64_t ttl_ms = 0;  // the hold expires at now + ttl_ms
};

// Creates an API key (admin, or for an account that must exist). key_id and the secret's hash are
// made by the caller (the HTTP edge), the secret itself never reaches the store.
// The same key_id again with the same fields answers the key (created=false); with others, conflict.
// Refusals: not_found (no such account), invalid_request (expires_at_ms not after the batch's now:
// the database's clock).
struct CreateKeyCommand {
  std::string key_id;
  std::optional<std::string> account_id;  // unset: an admin key
  std::string secret_sha256;
  std::optional<ScopeSet> scopes;  // unset: default_scopes() of its kind; else check_key_scopes()
  std::optional<std::int64_t> expires_at_ms;
  std::optional<std::string> name;
};

// Revokes a key; revoking again answers the key as it is (created=false). The generated admin key
// (kGeneratedAdminKeyId) is refused (conflict) — revoking the only way in would lock every operator
// out — unless `replaced_by_configured_admin_key`: the server sets it at start to retire it once an
// admin key is configured (api.md). Admin keys made through POST /v1/keys are revoked like any.
struct RevokeKeyCommand {
  std::string key_id;
  bool replaced_by_configured_admin_key = false;
};

// Records when API keys were last used (ledger/key_use.h sends one at most every interval, with
// every key used since the last). A key's last_used_at_ms only moves forward; a key that is not
// stored (a configured admin key) is skipped.
struct RecordKeyUseCommand {
  struct Use {
    std::string key_id;
    std::int64_t used_at_ms = 0;
  };
  std::vector<Use> uses;  // 1..limits::kKeyUsesPerCommandMax, each key once
};

// The reaper's pass: expire up to `max_holds` active holds whose deadline has passed.
struct ExpireOverdueCommand {
  std::int64_t max_holds = 0;  // and as many overdue credit lots (core/lots.h)
};

// --- outcomes ----------------------------------------------------------------------------------

// `created` is true when the command changed something, false when it answered an earlier
// identical request (idempotent replay): HTTP 201 versus 200 for creations.
struct AccountOutcome {  // create_account, update_account
  Account account;
  bool created = false;
};

struct TransferOutcome {  // credit and debit
  Event event;            // the event the transfer wrote (the original one on a replay)
  Account account;        // the account as it is now
  bool created = false;
};

struct HoldOutcome {  // reserve, commit, release, extend
  Hold hold;          // the hold as it is now
  bool created = false;
};

struct ExpireOutcome {
  std::int64_t expired = 0;       // holds expired by this pass
  std::int64_t lots_expired = 0;  // credit lots expired by this pass
};

struct KeyOutcome {
  ApiKey key;
  bool created = false;
};

struct KeyUseOutcome {
  std::int64_t recorded = 0;  // keys whose last_used_at_ms moved forward
};


}  // namespace tollgate
