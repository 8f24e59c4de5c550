// tollgate store: the primitives of one write transaction, and the ledger's write operations
// written once on top of them.
//
// A backend implements Transaction (a handful of SQL statements); execute() turns each Command into
// calls on it, following core/rules.h. Every store thereby applies the same logic: lookups for
// idempotency first, then one conditional write, then the row and its event. Expected refusals are
// decided before the first write of a command, so a refused command cannot undo the others in its
// batch. The one write a refused command may make is the expiry of overdue holds it found (their
// `expired` events): the reaper's work, done early so that no caller waits on a zombie.
//
// Primitives throw (a backend-specific exception) on unexpected database failures; the backend's
// apply() catches it and rolls the whole batch back.
//
// Thread safety: a Transaction is used by one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "slices.h"
#include "core/model.h"

namespace tollgate {

class Transaction {
 public:
  virtual ~Transaction() = default;

  // --- reads inside the transaction (see the batch's earlier writes) ---
  // The account row as stored (no overdue adjustment); active_holds from the row.
  virtual std::optional<Account> account_row(std::string_view account_id) = 0;
  virtual std::optional<Hold> hold_by_id(std::string_view hold_id) = 0;
  virtual std::optional<Hold> hold_by_request(std::string_view request_id) = 0;
  virtual std::optional<Transfer> transfer_by_reference(std::string_view reference) = 0;
  virtual std::optional<Event> event_by_id(std::int64_t event_id) = 0;
  // Active holds with expires_at ≤ now: of one account, or of all accounts (oldest deadline first).
  virtual std::vector<Hold> overdue_holds(std::optional<std::string_view> account_id, std::int64_t now_ms,
                                          std::int64_t limit) = 0;

  // --- the conditional writes: each is ONE statement; nullopt when its condition refused ---
  virtual std::optional<Balances> credit_if_fits(std::string_view account_id, std::int64_t amount) = 0;
  // available ≥ amount AND NOT frozen
  virtual std::optional<Balances> debit_if_available(std::string_view account_id, std::int64_t amount) = 0;
  // NOT frozen AND available − amount ≥ −overdraft_limit AND (no max_active_holds OR
  // active_holds < max); active_holds += 1
  virtual std::optional<Balances> reserve_if_available(std::string_view account_id, std::int64_t amount) = 0;
  virtual std::optional<Balances> late_charge_if_available(std::string_view account_id, std::int64_t amount) = 0;
  // Ends a hold of `held`: reserved −= held, used += committed, available += held − committed,
  // active_holds −= 1. Unconditional (the hold row guards it); returns the balances after.
  virtual Balances end_hold_balances(std::string_view account_id, std::int64_t held, std::int64_t committed) = 0;

  // --- plain writes ---
  virtual void insert_account(const Account& account) = 0;
  // Sets the account's overdraft_limit, max_active_holds and frozen; asserts one row changed.
  virtual void set_account_settings(std::string_view account_id, const AccountSettings& settings) = 0;
  // Inserts a new active hold and returns its id, "hold_<sequence>_<random>" where the sequence
  // is the store's (strictly increasing) and `random` is given.
  virtual std::string insert_hold(const Hold& hold, std::string_view random) = 0;
  // The fast path of commit and release, ONE statement: ends the hold if it is active, not overdue
  // at now_ms, and holds at least `committed` (unset: the whole hold is committed); a release
  // records `release_reason`. Returns the hold as it was before; nullopt (nothing written) when any
  // condition refused.
  virtual std::optional<Hold> end_active_hold(std::string_view hold_id, HoldStatus status,
                                              std::optional<std::int64_t> committed, std::int64_t now_ms,
                                              const std::optional<std::string>& release_reason) = 0;
  // active → status; asserts that exactly one active row changed.
  virtual void end_hold(std::string_view hold_id, HoldStatus status, std::int64_t committed_amount,
                        std::int64_t closed_at_ms) = 0;
  // expired without late outcome → late outcome; asserts one row changed.
  virtual void settle_late(std::string_view hold_id, LateOutcome outcome, std::int64_t committed_amount) = 0;
  virtual void set_hold_expiry(std::string_view hold_id, std::int64_t expires_at_ms) = 0;
  virtual void insert_transfer(const Transfer& transfer) = 0;
  // Appends an event; returns it with its event_id.
  virtual Event append_event(Event event) = 0;

  // API keys.
  virtual std::optional<ApiKey> key_by_id(std::string_view key_id) = 0;
  virtual void insert_key(const ApiKey& key) = 0;
  virtual void revoke_key(std::string_view key_id, std::int64_t revoked_at_ms) = 0;
  // Sets last_used_at_ms (the caller checked that it moves forward); asserts one row changed.
  virtual void set_key_last_used(std::string_view key_id, std::int64_t used_at_ms) = 0;

  // The effective view of an account (overdue holds counted as available, oldest active age).
  virtual std::optional<Account> account_view(std::string_view account_id, std::int64_t now_ms) = 0;
};

// Applies one command inside `tx` at time `now_ms`. Expected refusals are returned as errors and
// have written nothing.
CommandResult execute(Transaction& tx, const Command& command, std::int64_t now_ms);

}  // namespace tollgate
