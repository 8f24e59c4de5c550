// tollgate core: the invariants of design.md as functions that check an account and its events.
//
//   1. available + reserved + used == purchased
//   2. reserved equals the sum of the active holds' amounts (and active_holds their count)
//   3. available ≥ −overdraft_limit unless the account is frozen (a refund shortfall's debt freezes it),
//      reserved ≥ 0, used ≥ 0
//   4. the account row equals the fold of its events (its balances; and its settings, once an
//      account_updated event recorded them: the last one's are the row's)
//   5. every hold ends once; no event follows its terminal event — except that an `expired` hold may
//      be followed by exactly one late_charged / late_forgiven (the late-commit policy's record), and
//      a charged hold (committed, late-charged) by `refunded` events that give back at most its charge
//
// Each function returns the violations it found as human-readable strings; empty means clean.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/model.h"

namespace tollgate::invariants {

// Invariants 1 and 3 on one account row.
std::vector<std::string> check_balances(const Account& account);

// Invariant 2: `active_sum` / `active_count` are the sum and count of the account's holds whose
// stored status is active.
std::vector<std::string> check_active_holds(const Account& account, std::int64_t active_sum,
                                            std::int64_t active_count);

// The fold of one account's events, oldest first.
struct Fold {
  Balances balances;              // what the events add up to
  std::int64_t active_holds = 0;  // holds reserved and not yet ended
  std::int64_t last_event_id = 0;
  // The settings of the last account_updated event (unset: none; the row keeps its creation's).
  std::optional<AccountSettings> settings;
  std::vector<std::string> violations;  // problems inside the log itself (invariant 5, ids, *_after)
};
// Replays `events` (all of one account, in event_id order): checks that ids strictly increase,
// that every event's *_after fields equal the running balances, and the hold life cycles.
Fold fold_events(std::span<const Event> events);

// Invariant 4 (and the fold's own findings): compares an account row with the fold of its events.
std::vector<std::string> check_fold(const Account& account, const Fold& fold);

// Every invariant of one account: its row (1, 3), its active holds' sum and count (2), and the fold
// of its events, oldest first (4, 5). What the audit of every store runs per account.
std::vector<std::string> check_account(const Account& row, std::span<const Event> events, std::int64_t active_sum,
                                       std::int64_t active_count);

}  // namespace tollgate::invariants
