#include "core/rules.h"

#include <algorithm>
#include <string>

#include "core/checked.h"
#include "core/limits.h"

namespace tollgate::rules {
namespace {

Error overflow_error(std::string_view what) {
  return Error::make(Code::overflow, std::string(what) + " would exceed the largest balance");
}

// A balance after a movement, if it stays within ±limits::kBalanceMax (nullopt: overflow).
std::optional<std::int64_t> bounded(std::optional<std::int64_t> balance) {
  if (!balance || *balance > limits::kBalanceMax || *balance < -limits::kBalanceMax) return std::nullopt;
  return balance;
}

void assert_identity(const Balances& b) {
  // The identity is checked after every movement: a movement that breaks it is a bug.
  const auto sum = checked_add(b.available, b.reserved);
  TG_ASSERT(sum.has_value());
  const auto spent = checked_add(*sum, b.used);
  TG_ASSERT(spent.has_value());
  const auto total = checked_add(*spent, b.expired);
  TG_ASSERT(total.has_value() && *total == b.purchased && b.expired >= 0);
}

}  // namespace

Result<Balances> credit(const Balances& before, std::int64_t amount) {
  TG_ASSERT(amount_is_valid(amount));
  const auto available = bounded(checked_add(before.available, amount));
  const auto purchased = bounded(checked_add(before.purchased, amount));
  if (!available || !purchased) return overflow_error("crediting " + std::to_string(amount));
  Balances after = before;
  after.available = *available;
  after.purchased = *purchased;
  assert_identity(after);
  return after;
}

Result<Balances> debit(const Balances& before, std::int64_t amount) {
  TG_ASSERT(amount_is_valid(amount));
  if (before.available < amount) return Error::insufficient(before.available, amount, before.reserved);
  Balances after = before;
  after.available -= amount;  // cannot overflow: available ≥ amount > 0
  after.purchased -= amount;  // purchased ≥ available (reserved, used ≥ 0)
  assert_identity(after);
  return after;
}

Balances refund(const Balances& before, std::int64_t amount) {
  TG_ASSERT(amount_is_valid(amount) && amount <= before.used);
  Balances after = before;
  after.used -= amount;       // ≥ 0
  after.available += amount;  // ≤ purchased − reserved − used: no overflow while the identity holds
  assert_identity(after);
  return after;
}

Result<TakenBack> take_back(const Balances& before, std::int64_t amount, bool into_debt) {
  TG_ASSERT(amount_is_valid(amount));
  const std::int64_t taken = into_debt ? amount : std::min(amount, std::max<std::int64_t>(before.available, 0));
  const auto available_after = bounded(checked_sub(before.available, taken));
  if (!available_after) return overflow_error("taking back " + std::to_string(amount));
  Balances after = before;
  after.available = *available_after;
  after.purchased -= taken;  // ≥ available − … : cannot pass the bound while the identity holds
  assert_identity(after);
  return TakenBack{after, taken};
}

Status check_not_frozen(const Account& account) {
  if (!account.frozen) return ok_status();
  return Error::make(Code::account_frozen, "account " + account.account_id +
                                               " is frozen: it takes no new holds and no debits until it is unfrozen");
}

Result<AccountSettings> update_settings(const Account& before, const UpdateAccountCommand& update) {
  AccountSettings after = before.settings();
  if (update.overdraft_limit) after.overdraft_limit = *update.overdraft_limit;
  if (update.max_active_holds) after.max_active_holds = *update.max_active_holds;
  if (update.frozen) after.frozen = *update.frozen;
  if (update.low_balance_threshold) after.low_balance_threshold = *update.low_balance_threshold;
  TG_ASSERT(after.overdraft_limit >= 0);
  // Past the overdraft (a refund shortfall's debt: the account is frozen) it may stay frozen and
  // change other settings; neither a lower overdraft nor an unfreeze may leave it past the limit.
  const bool past_limit = before.balances.available < -after.overdraft_limit;
  if (past_limit && (after.overdraft_limit < before.overdraft_limit || !after.frozen)) {
    return Error::make(Code::conflict, "account " + before.account_id + " is overdrawn by " +
                                           std::to_string(-before.balances.available) + ", more than overdraft_limit " +
                                           std::to_string(after.overdraft_limit) +
                                           " allows: credit it or end its holds first; nothing was changed");
  }
  return after;
}

BalanceNotices balance_notices(std::int64_t available_before, std::int64_t available_after,
                               std::optional<std::int64_t> threshold) {
  BalanceNotices out;
  if (!threshold) return out;
  TG_ASSERT(*threshold >= 1);
  const std::int64_t n = *threshold;
  if (available_before >= n && available_after < n) out.types[out.count++] = EventType::balance_low;
  if (available_before > 0 && available_after <= 0) out.types[out.count++] = EventType::balance_depleted;
  if (available_before < n && available_after >= n) out.types[out.count++] = EventType::balance_recovered;
  TG_ASSERT(out.count <= 2);
  return out;
}

Result<Balances> reserve(const Account& before, std::int64_t amount) {
  TG_ASSERT(amount_is_valid(amount));
  TG_ASSERT(before.overdraft_limit >= 0);
  if (auto s = check_not_frozen(before); !s) return s.error();
  if (before.max_active_holds && before.active_holds >= *before.max_active_holds) {
    return Error::make(Code::too_many_holds,
                       "account " + before.account_id + " has " + std::to_string(before.active_holds) +
                           " active holds, the most it may have");
  }
  const auto available_after = checked_sub(before.balances.available, amount);
  if (!available_after || *available_after < -before.overdraft_limit) {
    return Error::insufficient(before.balances.available, amount, before.balances.reserved);
  }
  const auto reserved_after = bounded(checked_add(before.balances.reserved, amount));
  if (!reserved_after) return overflow_error("reserving " + std::to_string(amount));
  Balances after = before.balances;
  after.available = *available_after;
  after.reserved = *reserved_after;
  assert_identity(after);
  return after;
}

Balances commit(const Balances& before, std::int64_t held, std::int64_t committed) {
  TG_ASSERT(held >= 1 && committed >= 0 && committed <= held);
  TG_ASSERT(before.reserved >= held);
  Balances after = before;
  after.reserved -= held;
  const auto used = checked_add(before.used, committed);
  const auto available = checked_add(before.available, held - committed);
  // used + available ≤ purchased − reserved, so neither can overflow while the identity holds.
  TG_ASSERT(used && available);
  after.used = *used;
  after.available = *available;
  assert_identity(after);
  return after;
}

Balances release(const Balances& before, std::int64_t held) { return commit(before, held, 0); }

Account account_view(Account row, std::int64_t overdue_count, std::int64_t overdue_sum) {
  TG_ASSERT(overdue_count >= 0 && overdue_count <= row.active_holds);
  TG_ASSERT(overdue_sum >= 0 && overdue_sum <= row.balances.reserved);
  TG_ASSERT((overdue_count == 0) == (overdue_sum == 0));  // a hold holds at least 1
  if (overdue_sum > 0) row.balances = release(row.balances, overdue_sum);
  row.active_holds -= overdue_count;
  return row;
}

Result<Balances> late_charge(const Account& before, std::int64_t amount) {
  TG_ASSERT(amount_is_valid(amount));
  const auto available_after = checked_sub(before.balances.available, amount);
  if (!available_after || *available_after < -before.overdraft_limit) {
    return Error::insufficient(before.balances.available, amount, before.balances.reserved);
  }
  const auto used_after = bounded(checked_add(before.balances.used, amount));
  if (!used_after) return overflow_error("charging " + std::to_string(amount));
  Balances after = before.balances;
  after.available = *available_after;
  after.used = *used_after;
  assert_identity(after);
  return after;
}

HoldStatus effective_status(const Hold& hold, std::int64_t now_ms) {
  return is_overdue(hold, now_ms) ? HoldStatus::expired : hold.status;
}

Result<CommitPlan> plan_commit(const Hold& hold, std::optional<std::int64_t> amount,
                               LateCommitPolicy policy, std::int64_t now_ms) {
  TG_ASSERT(!is_overdue(hold, now_ms));
  if (amount) {
    if (auto s = check_amount(*amount); !s) return s.error();
    if (*amount > hold.amount) {
      return invalid("amount " + std::to_string(*amount) + " is more than the hold's " +
                     std::to_string(hold.amount));
    }
  }
  const std::int64_t wanted = amount.value_or(hold.amount);
  switch (hold.status) {
    case HoldStatus::active:
      return CommitPlan{CommitAction::commit, wanted};
    case HoldStatus::committed:
      if (wanted == hold.committed_amount) return CommitPlan{CommitAction::replay, wanted};
      return Error::make(Code::hold_committed, "hold " + hold.hold_id + " is already committed with " +
                                                   std::to_string(hold.committed_amount));
    case HoldStatus::released:
      return Error::make(Code::hold_released, "hold " + hold.hold_id + " was released");
    case HoldStatus::expired:
      switch (hold.late_outcome) {
        case LateOutcome::charged:
          if (wanted == hold.committed_amount) return CommitPlan{CommitAction::replay, wanted};
          return Error::make(Code::hold_committed, "hold " + hold.hold_id + " expired and was late-charged " +
                                                       std::to_string(hold.committed_amount));
        case LateOutcome::forgiven:
          // Forgiven is final: nothing was charged and nothing will be, whatever is asked again.
          return CommitPlan{CommitAction::replay, 0};
        case LateOutcome::none:
          break;
      }
      switch (policy) {
        case LateCommitPolicy::reject:
          return Error::make(Code::hold_expired, "hold " + hold.hold_id + " expired before it was committed");
        case LateCommitPolicy::forgive:
          return CommitPlan{CommitAction::late_forgive, wanted};
        case LateCommitPolicy::charge:
          return CommitPlan{CommitAction::late_charge, wanted};
      }
  }
  TG_ASSERT(false && "unreachable hold status");
}

Result<ReleaseAction> plan_release(const Hold& hold, std::int64_t now_ms) {
  TG_ASSERT(!is_overdue(hold, now_ms));
  switch (hold.status) {
    case HoldStatus::active:
      return ReleaseAction::release;
    case HoldStatus::released:
      return ReleaseAction::replay;
    case HoldStatus::committed:
      return Error::make(Code::hold_committed, "hold " + hold.hold_id + " is committed");
    case HoldStatus::expired:
      if (hold.late_outcome == LateOutcome::charged) {
        return Error::make(Code::hold_committed, "hold " + hold.hold_id + " expired and was late-charged");
      }
      return ReleaseAction::replay;  // its credits are back in available already
  }
  TG_ASSERT(false && "unreachable hold status");
}

Status plan_extend(const Hold& hold, std::int64_t now_ms) {
  switch (effective_status(hold, now_ms)) {
    case HoldStatus::active:
      return ok_status();
    case HoldStatus::committed:
      return Error::make(Code::hold_committed, "hold " + hold.hold_id + " is committed");
    case HoldStatus::released:
      return Error::make(Code::hold_released, "hold " + hold.hold_id + " was released");
    case HoldStatus::expired:
      return Error::make(Code::hold_expired, "hold " + hold.hold_id + " has expired");
  }
  TG_ASSERT(false && "unreachable hold status");
}

Result<std::int64_t> plan_refund(const Hold& hold, std::optional<std::int64_t> amount, std::int64_t now_ms) {
  TG_ASSERT(!is_overdue(hold, now_ms));
  const bool charged = hold.status == HoldStatus::committed ||
                       (hold.status == HoldStatus::expired && hold.late_outcome == LateOutcome::charged);
  if (!charged) {
    std::string state(hold_status_name(hold.status));
    if (hold.late_outcome == LateOutcome::forgiven) state += " (late commit forgiven: nothing was charged)";
    return Error::make(Code::conflict, "hold " + hold.hold_id + " is " + state + ": only a charged hold (committed, "
                                           "or late-charged) can be refunded");
  }
  TG_ASSERT(hold.refunded_amount >= 0 && hold.refunded_amount <= hold.committed_amount);
  const std::int64_t left = hold.committed_amount - hold.refunded_amount;
  if (amount) {
    if (auto s = check_amount(*amount); !s) return s.error();
  }
  const std::int64_t wanted = amount.value_or(left);
  if (wanted > left || wanted == 0) {
    return Error::make(Code::refund_exceeds_charge,
                       "hold " + hold.hold_id + " charged " + std::to_string(hold.committed_amount) + " and " +
                           std::to_string(hold.refunded_amount) + " of it is refunded already: " +
                           (left == 0 ? std::string("nothing is left to refund")
                                      : "at most " + std::to_string(left) + " can be refunded, not " +
                                            std::to_string(wanted)));
  }
  return wanted;
}

Result<RevokeAction> plan_revoke_key(const ApiKey& key, bool replaced_by_configured_admin_key) {
  if (key.revoked_at_ms) return RevokeAction::replay;
  if (key.key_id == kGeneratedAdminKeyId && !key.account_id && !replaced_by_configured_admin_key) {
    return Error::make(Code::conflict,
                       "the generated admin key cannot be revoked through the API (that would lock every operator "
                       "out); set admin_key (or TOLLGATE_ADMIN_KEY) and restart the server: a configured admin key "
                       "retires the generated one");
  }
  return RevokeAction::revoke;
}

}  // namespace tollgate::rules
