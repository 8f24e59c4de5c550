// tollgate core: the rules of the ledger as pure functions (no I/O, no clock, no threads).
//
// Every store applies these rules: SQL carries them out as single conditional writes, and these
// functions decide what a refusal means and what a hold's state machine allows. The tests check the
// rules exhaustively, so the stores only have to be faithful to them.
//
// The hold state machine:   active → committed | released | expired   (terminal states never change)
// A commit of an expired hold goes through the late-commit policy: the hold stays `expired` and
// records a late outcome (charged or forgiven) once.
//
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "core/commands.h"
#include "core/model.h"
#include "core/result.h"

namespace tollgate::rules {

// --- balances -------------------------------------------------------------------------------
// Each returns the balances after the movement, or the precise refusal. `amount` is already valid.
// No balance leaves ±limits::kBalanceMax (2^53 − 1): a movement that would take one past it is
// refused with overflow, and nothing changes.

// purchased credits: available += amount, purchased += amount. Refusal: overflow.
Result<Balances> credit(const Balances& before, std::int64_t amount);
// removes available credits: available −= amount, purchased −= amount. A debit never uses the
// overdraft: it needs `available ≥ amount`. Refusal: insufficient_credits.
Result<Balances> debit(const Balances& before, std::int64_t amount);
// available → reserved. Needs available − amount ≥ −overdraft_limit and, when max_active_holds is
// set, active_holds < max_active_holds. Refusals: account_frozen (checked first), too_many_holds,
// insufficient_credits.
Result<Balances> reserve(const Account& before, std::int64_t amount);
// A frozen account takes no new holds and no debits. Refusal: account_frozen.
Status check_not_frozen(const Account& account);
// A hold of `held` ends committed with `committed` (≤ held) used; the rest returns to available.
Balances commit(const Balances& before, std::int64_t held, std::int64_t committed);
// A hold of `held` returns to available (release and expiry move the same way).
Balances release(const Balances& before, std::int64_t held);
// A late charge takes `amount` straight from available to used, under the same condition as a
// reservation (available − amount ≥ −overdraft_limit). Refusal: insufficient_credits.
Result<Balances> late_charge(const Account& before, std::int64_t amount);
// A refund gives `amount` a hold charged back: used → available; purchased is unchanged (credits come
// back, not money). `amount` ≤ used (the hold's charge is part of it: asserted). Cannot overflow:
// available stays ≤ purchased.
Balances refund(const Balances& before, std::int64_t amount);

// A payment's refund takes back `amount` purchased credits (payments/): available −= taken,
// purchased −= taken. `into_debt`: all of it, even below −overdraft_limit (the caller freezes the
// account: kFrozenForRefundShortfall); otherwise at most what is available (max(available, 0)).
// `taken` may be 0. Refusal: overflow (available would pass −limits::kBalanceMax).
struct TakenBack {
  Balances after;
  std::int64_t taken = 0;
};
Result<TakenBack> take_back(const Balances& before, std::int64_t amount, bool into_debt);

// --- settings ----------------------------------------------------------------------------------

// The settings `update` asks for, over `before`'s (unset fields unchanged). Refusal: conflict when
// the new overdraft_limit is below what the account is already overdrawn (available <
// −overdraft_limit); `available` is the stored row's, so a caller first expires overdue holds.
Result<AccountSettings> update_settings(const Account& before, const UpdateAccountCommand& update);

// --- balance notices (docs/api.md "Balance notices") ----------------------------------------

// The notices one movement of `available` writes, in order, for an account whose
// low_balance_threshold is `threshold` (unset: none, ever): balance_low when it falls from
// ≥ threshold to < threshold, then balance_depleted when it falls from > 0 to ≤ 0; balance_recovered
// when it rises from < threshold to ≥ threshold. Nothing for a movement that crosses neither (an
// unchanged balance included). At most two notices. `threshold`, when set, is ≥ 1.
struct BalanceNotices {
  std::array<EventType, 2> types{};
  std::size_t count = 0;
  std::span<const EventType> list() const { return {types.data(), count}; }
};
BalanceNotices balance_notices(std::int64_t available_before, std::int64_t available_after,
                               std::optional<std::int64_t> threshold);

// --- the hold state machine ------------------------------------------------------------------

// The status a reader sees: an active hold past its deadline is already expired, reaper or not.
HoldStatus effective_status(const Hold& hold, std::int64_t now_ms);
inline bool is_overdue(const Hold& hold, std::int64_t now_ms) {
  return hold.status == HoldStatus::active && now_ms >= hold.expires_at_ms;
}
// The hold as a reader sees it at `now_ms`: an overdue active hold is expired, closed at its deadline.
inline Hold hold_view(Hold hold, std::int64_t now_ms) {
  if (is_overdue(hold, now_ms)) {
    hold.status = HoldStatus::expired;
    hold.closed_at_ms = hold.expires_at_ms;
  }
  return hold;
}
// The account as a reader sees it at some instant: its `overdue_count` active holds past their
// deadline, holding `overdue_sum` credits, already count as released (the reaper writes it later).
// Both figures come from the account's own holds (asserted: 0 ≤ count ≤ active_holds, 0 ≤ sum ≤
// reserved), so nothing can overflow while the identity holds.
Account account_view(Account row, std::int64_t overdue_count, std::int64_t overdue_sum);

enum class CommitAction : std::uint8_t {
  commit,       // active: move `amount` to used, the rest back to available
  replay,       // already settled the same way: answer the hold as it is, move nothing
  late_charge,  // expired, policy charge: charge `amount` if available, otherwise forgive it
  late_forgive, // expired, policy forgive: record the forgiveness, move nothing
};
struct CommitPlan {
  CommitAction action = CommitAction::commit;
  std::int64_t amount = 0;  // the amount to commit (commit, late_charge, late_forgive)
};
// `hold` must not be overdue-but-active (the store expires it first; asserted).
// `amount` unset means the whole hold. Refusals: invalid_request (amount > hold, or amount
// invalid), hold_released, hold_committed (already committed with another amount), hold_expired
// (policy reject).
Result<CommitPlan> plan_commit(const Hold& hold, std::optional<std::int64_t> amount,
                               LateCommitPolicy policy, std::int64_t now_ms);

enum class ReleaseAction : std::uint8_t { release, replay };
// Refusal: hold_committed (committed, or late-charged). Released or expired → replay.
Result<ReleaseAction> plan_release(const Hold& hold, std::int64_t now_ms);

// Refusals: hold_committed, hold_released, hold_expired (also when overdue).
Status plan_extend(const Hold& hold, std::int64_t now_ms);

// How much a refund of `hold` gives back: `amount`, or when unset everything it charged and has not
// given back yet. Only a charged hold refunds: committed, or expired and late-charged. Refusals:
// conflict (not charged: active, released, expired, forgiven — nothing was charged), invalid_request
// (an amount out of range), refund_exceeds_charge (more than committed_amount − refunded_amount,
// which also refuses a refund of "everything" once nothing is left).
Result<std::int64_t> plan_refund(const Hold& hold, std::optional<std::int64_t> amount, std::int64_t now_ms);

// --- API keys ---------------------------------------------------------------------------------

enum class RevokeAction : std::uint8_t { revoke, replay };
// Revoking `key`: already revoked → replay (also an admin key: once the generated admin key is
// retired, revoking it again answers it as it is). Refusal: conflict for an active admin key (no
// account) — revoking it through the API would lock every operator out — unless
// `replaced_by_configured_admin_key` (the server retiring the generated key at start).
Result<RevokeAction> plan_revoke_key(const ApiKey& key, bool replaced_by_configured_admin_key);

}  // namespace tollgate::rules
