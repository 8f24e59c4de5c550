// tollgate core: the write operations of the ledger as values, and what each one answers.
//
// A Command is what a caller asks for, already validated at the service boundary (amounts in
// range, ids well-formed). A store applies a sequence of Commands in one transaction (group
// commit) and answers a CommandResult for each: the Outcome, or the precise refusal.
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
#include "coord/coord.h"  // locks, idempotency keys, rate limits: written through the same batches
#include "jobs/job.h"  // the job row (plain values): jobs are written through the same batches

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
// A job's hold is committed, released and extended only with its job (EndJobCommand, the
// reaper): the holds API's commit, release and extend of it answer conflict ("cancel the job").

// Changes an account's settings (PATCH). Unset fields stay as they are; a change writes an
// `account_updated` event with the settings after it, and a command that changes nothing is a
// replay (no event). Lowering overdraft_limit below what is already overdrawn is a conflict.
struct UpdateAccountCommand {
  std::string account_id;
  std::optional<std::int64_t> overdraft_limit;
  // Unset: unchanged; set to nullopt: no limit.
  std::optional<std::optional<std::int64_t>> max_active_holds;
  std::optional<bool> frozen;
};

struct ExtendCommand {
  std::string hold_id;
  std::int64_t ttl_ms = 0;  // the hold expires at now + ttl_ms
};

// Creates an API key (admin, or for an account that must exist). key_id and the secret's hash are
// made by the caller (the HTTP edge), the secret itself never reaches the store.
struct CreateKeyCommand {
  std::string key_id;
  std::optional<std::string> account_id;  // unset: an admin key
  std::string secret_sha256;
};

// Revokes a key; revoking again answers the key as it is (created=false). An admin key (one without
// an account) is refused (conflict) — revoking the only way in would lock every operator out —
// unless `replaced_by_configured_admin_key`: the server sets it at start to retire the generated
// admin key once an admin key is configured (api.md).
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

// --- jobs (jobs/job.h): the job row and its hold change in the same batch -------------------------

// Creates a job and its hold (request_id jobs::hold_request_id(client_request_id)) in one
// transaction. The same client_request_id with the same account, cost, provider and input answers
// the job as it is (created=false); with anything else, idempotency_mismatch. Not enough credits:
// the reservation's refusal, and no job.
struct SubmitJobCommand {
  std::string client_request_id;
  std::string account_id;
  std::int64_t cost = 0;
  std::string provider;
  std::string input_json;  // a JSON value, stored as given
  std::optional<std::int64_t> ttl_ms;  // the hold's; unset: the server's default (set by the ledger)
  std::string hold_id_random;          // set by the ledger
  // The accepting instance starts the job at once; until lease_ms passed, no other claims it.
  std::string owner;
  std::int64_t lease_ms = 0;
};

// A worker takes (or keeps) a job: pending → running, or a running job whose lease expired (or is
// its own). The lease becomes owner until now + lease_ms. `begin_attempt` counts a provider request
// about to be sent (written before it is: recovery then knows it may have been received); `note`
// records what the previous exchange saw (its answer, a status-URL answer). Refusals: not_found,
// conflict (ended — the answer's job says how — or leased by another owner until later). A pending
// job whose hold already expired is failed here instead (never sent: nothing to ask about).
struct ClaimJobCommand {
  std::string client_request_id;
  std::string hold_id;  // the job's (read by the caller): the hold's account is locked for the batch
  std::string owner;
  std::int64_t lease_ms = 0;
  bool begin_attempt = false;
  std::string note;
};

// Ends a job and its hold in one transaction: completed commits the hold (an expired hold follows
// the late-commit policy; `reject` fails the job, result kept, nothing charged), failed and
// cancelled release it. A job ends once: ending an ended job changes nothing (created=false) — except
// that a result arriving after a cancel is recorded on the job (charging nothing).
struct EndJobCommand {
  std::string client_request_id;
  std::string hold_id;
  jobs::JobStatus end = jobs::JobStatus::failed;  // completed, failed or cancelled
  std::optional<std::string> result_json;          // completed (and a late result after a cancel)
  std::optional<std::string> error;                // failed: why
  jobs::EndedBy by = jobs::EndedBy::provider;
  std::string note;  // for the history: what was seen
  LateCommitPolicy late_commit = LateCommitPolicy::charge;  // set by the ledger
};

// The reaper's pass: expire up to `max_holds` active holds whose deadline has passed.
struct ExpireOverdueCommand {
  std::int64_t max_holds = 0;
};

// --- coordination (coord/coord.h): lock, idempotency-key and shared rate-limit rows ------------
// They touch no account: a batch decides them on their own rows, loaded under the batch's
// transaction (locked FOR UPDATE on PostgreSQL), with coord/coord.h's rules.
using coord::IdempotencyCommand;
using coord::LockCommand;
using coord::PruneCoordCommand;
using coord::RateLimitCommand;

using Command = std::variant<CreateAccountCommand, CreditCommand, DebitCommand, ReserveCommand, CommitCommand,
                             ReleaseCommand, ExtendCommand, ExpireOverdueCommand, CreateKeyCommand,
                             RevokeKeyCommand, RecordKeyUseCommand, UpdateAccountCommand, SubmitJobCommand,
                             ClaimJobCommand, EndJobCommand, LockCommand, IdempotencyCommand, RateLimitCommand,
                             PruneCoordCommand>;

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
  std::int64_t expired = 0;  // holds expired by this pass
};

struct KeyOutcome {
  ApiKey key;
  bool created = false;
};

struct KeyUseOutcome {
  std::int64_t recorded = 0;  // keys whose last_used_at_ms moved forward
};

struct JobOutcome {  // submit, claim, end
  jobs::Job job;      // the job as it is now
  bool created = false;  // changed something (submit: made the job)
  // An end that also ended the job's hold (committed or released): the hold as it is now, so that
  // the holds-ended metrics count holds ended through jobs too. Unset otherwise.
  std::optional<Hold> ended_hold;
};

using coord::IdempotencyOutcome;
using coord::LockOutcome;
using coord::PruneOutcome;
using coord::RateLimitOutcome;

using Outcome = std::variant<AccountOutcome, TransferOutcome, HoldOutcome, ExpireOutcome, KeyOutcome, KeyUseOutcome,
                             JobOutcome, LockOutcome, IdempotencyOutcome, RateLimitOutcome, PruneOutcome>;
using CommandResult = Result<Outcome>;

}  // namespace tollgate
