// tollgate core: credit lots — the rules by which an account's credits are spent, returned and
// expire, as pure functions over Lot values (core/model.h). No I/O, no clock, no threads.
//
// Every credit makes a lot. Spending (a hold, a late charge, a debit) draws from the account's lots
// that have available credits, in spending order (spends_before: lowest priority, then the soonest
// expires_at — lots without one last —, then the oldest), and records what it took from each
// (Hold::lots). Credits go back to the lot they came from: what a commit does not charge, a release,
// an expiry, a refund. A lot whose expires_at has passed takes nothing more: its available credits
// move to expired (expire(), the event lot_expired), and whatever comes back to it later goes to
// expired too, never back to available.
//
// The account's base. What a spend takes past every lot (an overdraft) comes from no lot: the
// account's base, which is the account's balances minus the sums of its lots. Holds made before
// lots existed drew wholly from it (their Hold::lots is empty). The base never expires; a credit pays
// a negative base available (debt) first and only the rest makes a lot (credit_split()); credits that
// come back to the base (a released overdraft hold) are spent after every lot.
//
// Invariants, per lot: available + reserved + used + expired == amount, each ≥ 0. Per account: its
// reserved, used and expired are at least the sums of its lots' (the base's share is never negative:
// check_account_lots()).
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/result.h"

namespace tollgate::lots {

// Whether `a` is spent before `b` (a strict weak order; ties impossible: seq is unique).
bool spends_before(const Lot& a, const Lot& b);

// Past its expires_at at `now_ms`: takes nothing more, and what comes back goes to expired.
inline bool is_overdue(const Lot& lot, std::int64_t now_ms) {
  return lot.terms.expires_at_ms.has_value() && now_ms >= *lot.terms.expires_at_ms;
}

enum class LotStatus : std::uint8_t { active, expired, spent };
std::string_view lot_status_name(LotStatus status);
std::optional<LotStatus> parse_lot_status(std::string_view name);
// expired: past its expires_at; active: credits available or reserved; spent: neither.
LotStatus status(const Lot& lot, std::int64_t now_ms);
// The lot as a reader sees it at `now_ms`: an overdue lot's available credits are already expired
// (the reaper writes it later), and its status.
struct LotView {
  Lot lot;
  LotStatus status = LotStatus::active;
};
LotView lot_view(Lot lot, std::int64_t now_ms);

// The account as a reader sees it at some instant, after rules::account_view counted its overdue
// holds as given back: the available credits of its overdue lots (`overdue_lots_available`) and
// what its overdue holds drew from overdue lots (`overdue_holds_from_overdue_lots`: their expiry
// gives it back there) are already expired.
Account account_view(Account account, std::int64_t overdue_lots_available, std::int64_t overdue_holds_from_overdue_lots);

// Moves an overdue lot's available credits to expired; answers how many (0: nothing to expire).
std::int64_t expire(Lot& lot);

// How a draw uses what it takes from a lot's available credits.
enum class DrawUse : std::uint8_t {
  reserve,  // → reserved (a hold)
  charge,   // → used (a late charge)
  remove,   // the lot's amount shrinks (a debit: credits taken back, never spent)
};
// Takes up to `amount` from the available credits of `lots` that are not overdue, in spending
// order (`lots` need not be sorted). Answers the draws, in the order taken; their sum may be less
// than `amount` (the rest comes from the base).
std::vector<LotDraw> draw(std::span<Lot* const> lots, std::int64_t amount, DrawUse use, std::int64_t now_ms);
// The same, from the lot `first` before the others (a payment's refund takes from its own lot
// first). `first` may be absent from `lots` (it has nothing left).
std::vector<LotDraw> draw_first_from(std::span<Lot* const> lots, std::int64_t first, std::int64_t amount,
                                     DrawUse use, std::int64_t now_ms);

// Where credits given back went: into lots' (and the base's) available, or into overdue lots' expired.
struct GivenBack {
  std::int64_t to_available = 0;
  std::int64_t to_expired = 0;
};
// A hold of `held` that drew `draws` ends with `committed` charged: the draws are charged in order
// (reserved → used) up to `committed` (the base's part last), and the rest goes back (reserved →
// available, or → expired for an overdue lot). `committed` 0: a release or an expiry. Every lot a
// draw names is in `lots` (asserted).
GivenBack end_hold(std::span<Lot* const> lots, std::span<const LotDraw> draws, std::int64_t held,
                   std::int64_t committed, std::int64_t now_ms);
// A hold that charged `committed` through `draws` (the base's part last) and gave back
// `refunded_before` gives back `amount` more: last charged first (the base's part, then the lots in
// reverse), used → available, or → expired for an overdue lot. Needs refunded_before + amount ≤
// committed (asserted).
GivenBack refund(std::span<Lot* const> lots, std::span<const LotDraw> draws, std::int64_t committed,
                 std::int64_t refunded_before, std::int64_t amount, std::int64_t now_ms);

// A credit of `amount` to an account whose base available is `base_available`: what pays the base's
// debt first, and what makes the new lot (0: no lot).
struct CreditSplit {
  std::int64_t pays_debt = 0;
  std::int64_t to_lot = 0;
};
CreditSplit credit_split(std::int64_t amount, std::int64_t base_available);

// The base's available: the account's minus its lots'. `lots` are all its lots with available
// credits (the others add 0).
std::int64_t base_available(const Balances& account, std::span<Lot* const> lots);

// A lot's invariant (per lot) and the account's against every one of its lots (`lots`: all of them;
// the base's share of reserved, used and expired never negative; the base never expires). Answers
// the first violation in words, or nullopt.
std::optional<std::string> check_lot(const Lot& lot);
std::optional<std::string> check_account_lots(const Account& account, std::span<const Lot> lots);

// Hold::lots in its stored form, "seq:amount,seq:amount" ("" for none), and back (nullopt: not that form).
std::string draws_text(std::span<const LotDraw> draws);
std::optional<std::vector<LotDraw>> parse_draws(std::string_view text);

}  // namespace tollgate::lots
