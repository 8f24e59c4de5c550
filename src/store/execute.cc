// The ledger's write operations, once for every backend (see transaction.h).
#include <string>

#include "core/checked.h"
#include "core/limits.h"
#include "core/rules.h"
#include "store/transaction.h"

namespace tollgate {
namespace {

Error account_not_found(std::string_view account_id) {
  return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
}

Error hold_not_found(std::string_view hold_id) {
  return Error::make(Code::not_found, "hold " + std::string(hold_id) + " does not exist");
}

Event make_event(std::string_view account_id, EventType type, std::int64_t amount, const Balances& after,
                 std::int64_t now_ms) {
  Event e;
  e.account_id = std::string(account_id);
  e.type = type;
  e.amount = amount;
  e.at_ms = now_ms;
  e.available_after = after.available;
  e.reserved_after = after.reserved;
  e.used_after = after.used;
  return e;
}

Event hold_event(const Hold& hold, EventType type, std::int64_t amount, const Balances& after, std::int64_t now_ms) {
  Event e = make_event(hold.account_id, type, amount, after, now_ms);
  e.hold_id = hold.hold_id;
  return e;
}

Account must_view(Transaction& tx, std::string_view account_id, std::int64_t now_ms) {
  auto view = tx.account_view(account_id, now_ms);
  TG_ASSERT(view.has_value());  // the command just read or wrote it in this transaction
  return std::move(*view);
}

// Expires one active hold whose deadline passed: amount back to available, `expired` event.
Hold expire_hold(Transaction& tx, Hold hold, std::int64_t now_ms) {
  TG_ASSERT(rules::is_overdue(hold, now_ms));
  tx.end_hold(hold.hold_id, HoldStatus::expired, 0, hold.expires_at_ms);
  const Balances after = tx.end_hold_balances(hold.account_id, hold.amount, 0);
  tx.append_event(hold_event(hold, EventType::expired, hold.amount, after, now_ms));
  hold.status = HoldStatus::expired;
  hold.closed_at_ms = hold.expires_at_ms;
  return hold;
}

// No caller waits on a zombie: expires the account's overdue holds, so that a conditional write
// refused on the stored row can be tried once more against what readers see. True if any expired.
bool expire_overdue_of(Transaction& tx, std::string_view account_id, std::int64_t now_ms) {
  const auto overdue = tx.overdue_holds(account_id, now_ms, limits::kReaperBatchMaxDefault);
  for (const Hold& h : overdue) expire_hold(tx, h, now_ms);
  return !overdue.empty();
}

// Loads a hold for a state change, expiring it first when it is overdue, so that the rules only
// ever see stored states.
std::optional<Hold> load_hold_for_change(Transaction& tx, std::string_view hold_id, std::int64_t now_ms) {
  auto hold = tx.hold_by_id(hold_id);
  if (hold && rules::is_overdue(*hold, now_ms)) return expire_hold(tx, std::move(*hold), now_ms);
  return hold;
}

CommandResult create_account(Transaction& tx, const CreateAccountCommand& c, std::int64_t now_ms) {
  if (auto existing = tx.account_row(c.account_id)) {
    if (existing->overdraft_limit != c.overdraft_limit || existing->max_active_holds != c.max_active_holds) {
      return Error::make(Code::conflict, "account " + c.account_id + " exists with other settings");
    }
    return AccountOutcome{must_view(tx, c.account_id, now_ms), false};
  }
  Account row;
  row.account_id = c.account_id;
  row.overdraft_limit = c.overdraft_limit;
  row.max_active_holds = c.max_active_holds;
  row.created_at_ms = now_ms;
  tx.insert_account(row);
  return AccountOutcome{must_view(tx, c.account_id, now_ms), true};
}

template <typename TransferCommand>
CommandResult transfer(Transaction& tx, const TransferCommand& c, EventType kind, std::string_view reason,
                       std::int64_t now_ms) {
  if (auto existing = tx.transfer_by_reference(c.reference)) {
    if (existing->account_id != c.account_id || existing->kind != kind || existing->amount != c.amount ||
        existing->reason != reason) {
      return Error::make(Code::idempotency_mismatch,
                         "reference " + c.reference + " was already used for a " +
                             std::string(existing->kind == EventType::credited ? "credit" : "debit") +
                             " of " + std::to_string(existing->amount) + " on account " + existing->account_id);
    }
    auto event = tx.event_by_id(existing->event_id);
    TG_ASSERT(event.has_value());
    return TransferOutcome{std::move(*event), must_view(tx, c.account_id, now_ms), false};
  }
  std::optional<Balances> after = kind == EventType::credited ? tx.credit_if_fits(c.account_id, c.amount)
                                                              : tx.debit_if_available(c.account_id, c.amount);
  if (!after && kind == EventType::debited) {
    // A frozen account is refused before anything else (no zombie expires for it).
    if (auto row = tx.account_row(c.account_id); row && row->frozen) return rules::check_not_frozen(*row).error();
    if (expire_overdue_of(tx, c.account_id, now_ms)) after = tx.debit_if_available(c.account_id, c.amount);
  }
  if (!after) {
    auto row = tx.account_row(c.account_id);
    if (!row) return account_not_found(c.account_id);
    auto refusal = kind == EventType::credited ? rules::credit(row->balances, c.amount)
                                               : rules::debit(row->balances, c.amount);
    if (!refusal.ok()) return refusal.error();
    // A shared database: another instance changed the row between the conditional write and this
    // read, which locked it. Locked, the write and the rule agree.
    after = kind == EventType::credited ? tx.credit_if_fits(c.account_id, c.amount)
                                        : tx.debit_if_available(c.account_id, c.amount);
    TG_ASSERT(after.has_value());
  }
  Event e = make_event(c.account_id, kind, c.amount, *after, now_ms);
  e.reference = c.reference;
  if (!reason.empty()) e.reason = std::string(reason);
  e = tx.append_event(std::move(e));
  tx.insert_transfer(Transfer{c.reference, c.account_id, kind, c.amount, std::string(reason), e.event_id});
  Account view = must_view(tx, c.account_id, now_ms);
  return TransferOutcome{std::move(e), std::move(view), true};
}

CommandResult reserve(Transaction& tx, const ReserveCommand& c, std::int64_t now_ms) {
  if (auto existing = tx.hold_by_request(c.request_id)) {
    if (existing->account_id != c.account_id || existing->amount != c.amount) {
      return Error::make(Code::idempotency_mismatch, "request_id " + c.request_id + " already made a hold of " +
                                                         std::to_string(existing->amount) + " on account " +
                                                         existing->account_id);
    }
    return HoldOutcome{rules::hold_view(std::move(*existing), now_ms), false};
  }
  TG_ASSERT(c.ttl_ms.has_value());
  std::optional<Balances> after = tx.reserve_if_available(c.account_id, c.amount);
  if (!after) {
    // A frozen account is refused before anything else (no zombie expires for it).
    if (auto row = tx.account_row(c.account_id); row && row->frozen) return rules::check_not_frozen(*row).error();
    if (expire_overdue_of(tx, c.account_id, now_ms)) after = tx.reserve_if_available(c.account_id, c.amount);
  }
  if (!after) {
    auto row = tx.account_row(c.account_id);
    if (!row) return account_not_found(c.account_id);
    auto refusal = rules::reserve(*row, c.amount);
    if (!refusal.ok()) return refusal.error();
    // Another instance changed the row in between (see transfer()); locked now, the write decides.
    after = tx.reserve_if_available(c.account_id, c.amount);
    TG_ASSERT(after.has_value());
  }
  Hold hold;
  hold.account_id = c.account_id;
  hold.request_id = c.request_id;
  hold.amount = c.amount;
  hold.status = HoldStatus::active;
  hold.created_at_ms = now_ms;
  hold.expires_at_ms = now_ms + *c.ttl_ms;
  hold.metadata_json = c.metadata_json.empty() ? "{}" : c.metadata_json;
  hold.hold_id = tx.insert_hold(hold, c.hold_id_random);
  tx.append_event(hold_event(hold, EventType::reserved, c.amount, *after, now_ms));
  return HoldOutcome{std::move(hold), true};
}

// Commit and release of an active hold: one conditional UPDATE of the hold, then its balances and
// event. Returns nullopt (nothing written) when the hold is not simply active; the slow path then
// explains or applies the rules.
std::optional<Hold> end_active(Transaction& tx, std::string_view hold_id, HoldStatus status,
                               std::optional<std::int64_t> committed, EventType type, std::int64_t now_ms,
                               const std::optional<std::string>& release_reason = std::nullopt) {
  TG_ASSERT(!release_reason || status == HoldStatus::released);
  auto hold = tx.end_active_hold(hold_id, status, committed, now_ms, release_reason);
  if (!hold) return std::nullopt;
  const std::int64_t used = status == HoldStatus::committed ? committed.value_or(hold->amount) : 0;
  const Balances after = tx.end_hold_balances(hold->account_id, hold->amount, used);
  Event e = hold_event(*hold, type, type == EventType::released ? hold->amount : used, after, now_ms);
  e.reason = release_reason;
  tx.append_event(std::move(e));
  hold->status = status;
  hold->committed_amount = used;
  hold->closed_at_ms = now_ms;
  hold->release_reason = release_reason;
  return hold;
}

CommandResult commit(Transaction& tx, const CommitCommand& c, std::int64_t now_ms) {
  if (!c.amount || amount_is_valid(*c.amount)) {
    if (auto done = end_active(tx, c.hold_id, HoldStatus::committed, c.amount, EventType::committed, now_ms)) {
      return HoldOutcome{std::move(*done), true};
    }
  }
  auto hold = load_hold_for_change(tx, c.hold_id, now_ms);
  if (!hold) return hold_not_found(c.hold_id);
  auto plan = rules::plan_commit(*hold, c.amount, c.late_commit, now_ms);
  if (!plan) return plan.error();
  switch (plan->action) {
    case rules::CommitAction::replay:
      return HoldOutcome{std::move(*hold), false};
    case rules::CommitAction::commit: {
      // The fast path's write refused a hold that is committable now: on a shared database another
      // instance extended it in between. load_hold_for_change() locked it, so this write succeeds.
      auto done = end_active(tx, c.hold_id, HoldStatus::committed, c.amount, EventType::committed, now_ms);
      TG_ASSERT(done.has_value());
      return HoldOutcome{std::move(*done), true};
    }
    case rules::CommitAction::late_charge: {
      auto after = tx.late_charge_if_available(hold->account_id, plan->amount);
      if (!after && expire_overdue_of(tx, hold->account_id, now_ms)) {
        after = tx.late_charge_if_available(hold->account_id, plan->amount);
      }
      if (after) {
        tx.settle_late(hold->hold_id, LateOutcome::charged, plan->amount);
        tx.append_event(hold_event(*hold, EventType::late_charged, plan->amount, *after, now_ms));
        hold->late_outcome = LateOutcome::charged;
        hold->committed_amount = plan->amount;
        return HoldOutcome{std::move(*hold), true};
      }
    }
      [[fallthrough]];  // not enough available: the result is forgiven
    case rules::CommitAction::late_forgive: {
      auto row = tx.account_row(hold->account_id);
      TG_ASSERT(row.has_value());
      tx.settle_late(hold->hold_id, LateOutcome::forgiven, 0);
      tx.append_event(hold_event(*hold, EventType::late_forgiven, plan->amount, row->balances, now_ms));
      hold->late_outcome = LateOutcome::forgiven;
      return HoldOutcome{std::move(*hold), true};
    }
  }
  TG_ASSERT(false && "unreachable commit action");
}

CommandResult release(Transaction& tx, const ReleaseCommand& c, std::int64_t now_ms) {
  if (auto done = end_active(tx, c.hold_id, HoldStatus::released, 0, EventType::released, now_ms, c.reason)) {
    return HoldOutcome{std::move(*done), true};
  }
  auto hold = load_hold_for_change(tx, c.hold_id, now_ms);
  if (!hold) return hold_not_found(c.hold_id);
  auto action = rules::plan_release(*hold, now_ms);
  if (!action) return action.error();
  if (*action == rules::ReleaseAction::replay) return HoldOutcome{std::move(*hold), false};
  // Releasable now, refused by the fast path's write: extended by another instance in between (see
  // commit()). Locked now, so this write succeeds.
  auto done = end_active(tx, c.hold_id, HoldStatus::released, 0, EventType::released, now_ms, c.reason);
  TG_ASSERT(done.has_value());
  return HoldOutcome{std::move(*done), true};
}

CommandResult extend(Transaction& tx, const ExtendCommand& c, std::int64_t now_ms) {
  auto hold = load_hold_for_change(tx, c.hold_id, now_ms);
  if (!hold) return hold_not_found(c.hold_id);
  if (auto s = rules::plan_extend(*hold, now_ms); !s) return s.error();
  hold->expires_at_ms = now_ms + c.ttl_ms;
  tx.set_hold_expiry(hold->hold_id, hold->expires_at_ms);
  const auto row = tx.account_row(hold->account_id);
  TG_ASSERT(row.has_value());
  Event e = hold_event(*hold, EventType::extended, 0, row->balances, now_ms);
  e.expires_at_ms = hold->expires_at_ms;
  tx.append_event(std::move(e));
  return HoldOutcome{std::move(*hold), true};
}

CommandResult update_account(Transaction& tx, const UpdateAccountCommand& c, std::int64_t now_ms) {
  auto row = tx.account_row(c.account_id);
  if (!row) return account_not_found(c.account_id);
  Result<AccountSettings> after = rules::update_settings(*row, c);
  if (!after && expire_overdue_of(tx, c.account_id, now_ms)) {
    row = tx.account_row(c.account_id);
    TG_ASSERT(row.has_value());
    after = rules::update_settings(*row, c);
  }
  if (!after) return after.error();
  if (*after == row->settings()) return AccountOutcome{must_view(tx, c.account_id, now_ms), false};
  tx.set_account_settings(c.account_id, *after);
  Event e = make_event(c.account_id, EventType::account_updated, 0, row->balances, now_ms);
  e.settings = *after;
  tx.append_event(std::move(e));
  return AccountOutcome{must_view(tx, c.account_id, now_ms), true};
}

CommandResult expire_overdue(Transaction& tx, const ExpireOverdueCommand& c, std::int64_t now_ms) {
  TG_ASSERT(c.max_holds >= 1);
  std::int64_t expired = 0;
  for (Hold& h : tx.overdue_holds(std::nullopt, now_ms, c.max_holds)) {
    expire_hold(tx, std::move(h), now_ms);
    ++expired;
  }
  return ExpireOutcome{expired};
}

CommandResult create_key(Transaction& tx, const CreateKeyCommand& c, std::int64_t now_ms) {
  if (auto existing = tx.key_by_id(c.key_id)) {
    if (existing->account_id != c.account_id || existing->secret_sha256 != c.secret_sha256) {
      return Error::make(Code::conflict, "key " + c.key_id + " exists");
    }
    return KeyOutcome{std::move(*existing), false};
  }
  if (c.account_id && !tx.account_row(*c.account_id)) return account_not_found(*c.account_id);
  ApiKey key{c.key_id, c.account_id, c.secret_sha256, now_ms, std::nullopt};
  tx.insert_key(key);
  return KeyOutcome{std::move(key), true};
}

CommandResult revoke_key(Transaction& tx, const RevokeKeyCommand& c, std::int64_t now_ms) {
  auto key = tx.key_by_id(c.key_id);
  if (!key) return Error::make(Code::not_found, "key " + c.key_id + " does not exist");
  auto action = rules::plan_revoke_key(*key, c.replaced_by_configured_admin_key);
  if (!action) return action.error();
  if (*action == rules::RevokeAction::replay) return KeyOutcome{std::move(*key), false};
  tx.revoke_key(c.key_id, now_ms);
  key->revoked_at_ms = now_ms;
  return KeyOutcome{std::move(*key), true};
}

CommandResult record_key_use(Transaction& tx, const RecordKeyUseCommand& c) {
  KeyUseOutcome out;
  for (const auto& use : c.uses) {
    auto key = tx.key_by_id(use.key_id);
    if (!key || (key->last_used_at_ms && *key->last_used_at_ms >= use.used_at_ms)) continue;
    tx.set_key_last_used(use.key_id, use.used_at_ms);
    ++out.recorded;
  }
  return out;
}

}  // namespace

CommandResult execute(Transaction& tx, const Command& command, std::int64_t now_ms) {
  return std::visit(
      [&](const auto& c) -> CommandResult {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, CreateAccountCommand>) return create_account(tx, c, now_ms);
        if constexpr (std::is_same_v<T, CreditCommand>) return transfer(tx, c, EventType::credited, "", now_ms);
        if constexpr (std::is_same_v<T, DebitCommand>) return transfer(tx, c, EventType::debited, c.reason, now_ms);
        if constexpr (std::is_same_v<T, ReserveCommand>) return reserve(tx, c, now_ms);
        if constexpr (std::is_same_v<T, CommitCommand>) return commit(tx, c, now_ms);
        if constexpr (std::is_same_v<T, ReleaseCommand>) return release(tx, c, now_ms);
        if constexpr (std::is_same_v<T, ExtendCommand>) return extend(tx, c, now_ms);
        if constexpr (std::is_same_v<T, ExpireOverdueCommand>) return expire_overdue(tx, c, now_ms);
        if constexpr (std::is_same_v<T, CreateKeyCommand>) return create_key(tx, c, now_ms);
        if constexpr (std::is_same_v<T, RevokeKeyCommand>) return revoke_key(tx, c, now_ms);
        if constexpr (std::is_same_v<T, RecordKeyUseCommand>) return record_key_use(tx, c);
        if constexpr (std::is_same_v<T, UpdateAccountCommand>) return update_account(tx, c, now_ms);
        // The per-statement oracle checks the ledger's money rules; the feature slices' kinds (jobs,
        // coordination, …: src/slices.h) are decided by the batch engine only and tested by their
        // own conformance suites.
        if constexpr (!batch::seam::contains<T, batch::LedgerCommands>::value) {
          return Error::make(Code::internal, "the per-statement path runs only the ledger's own commands");
        }
      },
      command);
}

}  // namespace tollgate
