// tollgate coordination: lease locks with fencing, idempotency keys for an app's own side effects,
// and GCRA rate limits — the rows, the commands and the rules that decide them. Pure: no I/O, no
// clock (every rule takes the store's `now_ms`), no threads.
//
// The rows live in the one database every instance shares and change through the same batches as
// the ledger (core/batch.h loads them under the batch's transaction, these rules decide, the
// backend writes the changes guarded by their `before` values): a decision is as atomic as one
// conditional statement, and is acknowledged only once its batch is durable.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace tollgate::coord {

// --- lease locks --------------------------------------------------------------------------------

// A lock's row. It is never deleted: a released lock keeps its row (owner cleared) so that `fence`
// keeps increasing across release and re-acquire.
struct Lock {
  std::string key;
  std::optional<std::string> owner;         // unset: free
  std::int64_t fence = 0;                   // the current (or last) holder's; strictly increases per hand-over
  std::optional<std::int64_t> expires_at_ms;  // the holder's lease; set iff owner is
  bool cancelled = false;                   // cancel asked the holder to stop (only while held)
  std::int64_t updated_at_ms = 0;

  bool operator==(const Lock&) const = default;
};

// Held: an owner whose lease has not run out at now_ms.
bool is_held(const Lock& lock, std::int64_t now_ms);

enum class LockOp : std::uint8_t { acquire, renew, release, cancel };
std::string_view lock_op_name(LockOp op);

struct LockCommand {
  LockOp op = LockOp::acquire;
  std::string key;
  std::string owner;                 // acquire, renew, release
  std::int64_t ttl_ms = 0;           // acquire, renew: the lease runs until now + ttl_ms
  std::optional<std::int64_t> fence;  // renew, release: when given, must be the holder's
};

// What a lock call did (for metrics and the answer).
enum class LockDecision : std::uint8_t {
  acquired,            // the key was free (or never used): a new fence
  taken_over,          // the previous holder's lease had run out: a new fence
  reacquired,          // the same owner asked again while holding it: same fence, lease renewed
  renewed,
  released,
  cancelled,           // the holder was asked to stop
  nothing_to_cancel,   // cancel of a lock that is not held
  stopped,             // renew of a cancelled lock: the lock is freed; the holder must stop
};
std::string_view lock_decision_name(LockDecision d);

struct LockOutcome {
  Lock lock;  // as it is now
  LockDecision decision = LockDecision::acquired;
  bool changed = false;  // false: nothing was written
  std::int64_t now_ms = 0;  // the store's clock at the decision (whether the lease is live)
};

// Decides `c` on the key's row (`row`: unset when the key was never used). Refusals (nothing
// changes): lock_held (acquire while another owner holds it; expires_at_ms set), lock_lost (renew or
// release by someone who does not hold it — another owner or fence, a lease that ran out, a free
// lock), not_found (cancel or renew of a key never used). A renew of a cancelled lock is not a
// refusal here: it frees the lock and answers decision `stopped`, which the edge reports as 409
// lock_cancelled — the write (the lock freed) must happen, and a refusal writes nothing.
Result<LockOutcome> decide_lock(const std::optional<Lock>& row, const LockCommand& c, std::int64_t now_ms);

// --- idempotency keys ---------------------------------------------------------------------------

// A key's row: started (claimed by an attempt, until expires_at_ms), finished (its response is
// replayed), or abandoned (given back; the next begin starts a new attempt). The row is kept after
// an abandon so that `attempt` keeps increasing: an attempt number names one claim, ever.
enum class IdemState : std::uint8_t { started, finished, abandoned };
std::string_view idem_state_name(IdemState s);
std::optional<IdemState> parse_idem_state(std::string_view name);

struct IdempotencyKey {
  std::string key;
  std::string fingerprint;
  IdemState state = IdemState::started;
  std::optional<std::string> response_json;  // finished: the response to replay (a JSON value)
  std::int64_t created_at_ms = 0;
  // started: the claim's lease; finished: when it was finished; abandoned: when it was abandoned.
  std::int64_t expires_at_ms = 0;
  std::optional<std::int64_t> finished_at_ms;
  // The claim's number: 1 for the first begin, one more for every later claim (a take-over of an
  // expired claim, a begin after an abandon). finish and abandon that name another attempt are
  // refused: an attempt whose claim was taken over can no longer finish or give back its successor's.
  std::int64_t attempt = 1;

  bool operator==(const IdempotencyKey&) const = default;
};

enum class IdemOp : std::uint8_t { begin, finish, abandon };

struct IdempotencyCommand {
  IdemOp op = IdemOp::begin;
  std::string key;
  std::string fingerprint;
  std::int64_t ttl_ms = 0;                  // begin: the claim runs until now + ttl_ms
  std::string response_json;                // finish
  std::optional<std::int64_t> attempt;      // finish, abandon: when given, must be the current claim's
};

enum class IdemDecision : std::uint8_t {
  started,      // begin: the key is claimed (new, abandoned before, or the earlier claim expired)
  replayed,     // begin: finished before — the stored response
  finished,     // finish: stored
  abandoned,    // abandon: the claim is given back
};
std::string_view idem_decision_name(IdemDecision d);

struct IdempotencyOutcome {
  std::optional<IdempotencyKey> row;  // as it is now (always set on success)
  IdemDecision decision = IdemDecision::started;
  bool changed = false;
  // begin took over a claim that expired unfinished: the earlier attempt may have done the side
  // effect, so the new one should ask downstream (with the same key) before doing it again.
  bool taken_over = false;
};

// Decides `c` on the key's row. Refusals: idempotency_mismatch (another fingerprint), in_progress
// (begin while a claim is live; expires_at_ms set), not_found (finish or abandon of an unknown key), conflict
// (abandon of a finished key; finish of an abandoned key; finish or abandon naming an attempt that
// is not the current claim's). Without `attempt`, finish and abandon act on whatever claim is current.
Result<IdempotencyOutcome> decide_idempotency(const std::optional<IdempotencyKey>& row, const IdempotencyCommand& c,
                                              std::int64_t now_ms);

// --- GCRA rate limits -----------------------------------------------------------------------------

// A policy: at most `limit` attempts (cost units) per `period_ms`, with bursts of up to `limit`.
// GCRA (the generic cell rate algorithm, as redis-cell uses) keeps one time per key: the
// theoretical arrival time `tat`. Each unit of cost moves it by the emission interval
// period/limit; an attempt is admitted when the moved tat is at most `period` ahead of now. In any
// window of `period_ms` at most 2·limit − 1 units pass in the worst case (a full burst at the end
// of one period and the refill during the next) and never more than `limit` in a burst; the
// budget refills continuously, so there is no window edge to game. Times are in microseconds; a
// check's increment ceil(cost·period/limit) is rounded up once per check (never per unit), so the
// rate admitted is never above limit/period and a cost of `limit` moves tat by exactly one period.
struct GcraPolicy {
  std::int64_t limit = 0;      // 1..limits::kRateLimitMax
  std::int64_t period_ms = 0;  // 1..limits::kRateLimitPeriodMsMax
  std::int64_t emission_ns() const;  // ceil(period_ms·10^6 / limit): one unit's increment
  std::int64_t period_ns() const { return period_ms * 1'000'000; }
};

struct GcraDecision {
  bool allowed = false;
  std::int64_t remaining = 0;        // units still admissible at once after this decision
  std::int64_t reset_after_ms = 0;   // until the key is back to a full budget
  std::int64_t retry_after_ms = 0;   // refused: until this attempt would be admitted (≥ 1)
  std::optional<std::int64_t> new_tat_ns;  // allowed: the key's new tat
};

// `tat_ns`: the key's stored tat (unset: a fresh key). `cost`: 1..limit (asserted).
GcraDecision gcra_check(const GcraPolicy& policy, std::optional<std::int64_t> tat_ns, std::int64_t cost,
                        std::int64_t now_ms);

// A shared policy's row: one key's tat.
struct RateLimitRow {
  std::string policy;
  std::string key;
  std::int64_t tat_ns = 0;

  bool operator==(const RateLimitRow&) const = default;
};

enum class RateOp : std::uint8_t { check, reset };

struct RateLimitCommand {
  RateOp op = RateOp::check;
  std::string policy;
  GcraPolicy gcra;       // check
  std::string key;
  std::int64_t cost = 1;  // check
};

struct RateLimitOutcome {
  GcraDecision decision;  // check; reset: allowed with a full budget
};

// The bounded clean-up pass (the reaper runs it): deletes idempotency keys that finished more than
// `retention_ms` ago (started claims are never pruned) and shared rate-limit rows that are idle (a
// tat in the past is a full budget: the same as no row, so memory does not grow with an
// attacker's number of keys) — at most `max_rows` of each.
struct PruneCoordCommand {
  std::int64_t retention_ms = 0;
  std::int64_t max_rows = 0;
};
struct PruneOutcome {
  std::int64_t pruned_keys = 0;   // idempotency keys
  std::int64_t pruned_rates = 0;  // rate-limit rows
};

}  // namespace tollgate::coord
