// Tests of the invariant checks (core/invariants.h): a correct log folds cleanly, and every kind of
// corruption of a row or a log is found.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "core/invariants.h"
#include "core/model.h"

namespace tollgate {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Contains;
using ::testing::Not;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

Event ev(std::int64_t id, EventType type, std::int64_t amount, std::optional<std::string> hold, std::int64_t available,
         std::int64_t reserved, std::int64_t used) {
  Event e;
  e.event_id = id;
  e.account_id = "acct";
  e.type = type;
  e.amount = amount;
  e.hold_id = std::move(hold);
  e.at_ms = 1000 + id;
  e.available_after = available;
  e.reserved_after = reserved;
  e.used_after = used;
  return e;
}

// A correct log that uses every event type: credits, a debit, holds that end in each way, a late
// charge, a late forgiveness, and one hold still active at the end.
std::vector<Event> good_log() {
  using T = EventType;
  return {
      ev(1, T::credited, 20, std::nullopt, 20, 0, 0),
      ev(2, T::reserved, 4, "h1", 16, 4, 0),
      ev(3, T::committed, 3, "h1", 17, 0, 3),  // partial: 1 back to available
      ev(5, T::reserved, 2, "h2", 15, 2, 3),   // ids may skip (other accounts' events)
      ev(6, T::released, 2, "h2", 17, 0, 3),
      ev(7, T::reserved, 5, "h3", 12, 5, 3),
      ev(8, T::expired, 5, "h3", 17, 0, 3),
      ev(9, T::late_charged, 5, "h3", 12, 0, 8),
      ev(10, T::reserved, 1, "h4", 11, 1, 8),
      ev(11, T::expired, 1, "h4", 12, 0, 8),
      ev(12, T::late_forgiven, 1, "h4", 12, 0, 8),
      ev(13, T::debited, 2, std::nullopt, 10, 0, 8),
      ev(14, T::reserved, 6, "h5", 4, 6, 8),  // still active
  };
}

Account row_matching_good_log() {
  Account a;
  a.account_id = "acct";
  a.balances = Balances{4, 6, 8, 18};
  a.active_holds = 1;
  return a;
}

std::vector<std::string> check(const std::vector<Event>& events) {
  return invariants::fold_events(events).violations;
}

// ---------------------------------------------------------------------------------------------
// check_balances (invariants 1 and 3)

Account account(Balances b, std::int64_t overdraft = 0, std::int64_t active_holds = 0) {
  Account a;
  a.account_id = "acct";
  a.balances = b;
  a.overdraft_limit = overdraft;
  a.active_holds = active_holds;
  return a;
}

TEST(CheckBalances, ACorrectRowIsClean) {
  EXPECT_THAT(invariants::check_balances(account({4, 6, 8, 18}, 0, 1)), IsEmpty());
  EXPECT_THAT(invariants::check_balances(account({0, 0, 0, 0})), IsEmpty());
}

TEST(CheckBalances, AvailableExactlyAtMinusTheOverdraftIsClean) {
  EXPECT_THAT(invariants::check_balances(account({-5, 5, 0, 0}, 5, 1)), IsEmpty());
}

TEST(CheckBalances, BrokenIdentityIsFound) {
  const auto v = invariants::check_balances(account({4, 6, 8, 19}));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("available + reserved + used + expired != purchased"));
  EXPECT_THAT(v[0], HasSubstr("acct"));
}

TEST(CheckBalances, IdentityThatOverflowsIsFoundNotWrapped) {
  // kMax + 1 + (-1) would "equal" kMax - 0 only by wrapping; the check must not wrap.
  const auto v = invariants::check_balances(account({kMax, 1, 0, std::numeric_limits<std::int64_t>::min()}));
  EXPECT_THAT(v, Contains(HasSubstr("available + reserved + used + expired != purchased")));
}

TEST(CheckBalances, AvailableBelowMinusTheOverdraftIsFound) {
  const auto v = invariants::check_balances(account({-6, 6, 0, 0}, 5, 1));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("below -overdraft_limit"));
  EXPECT_THAT(invariants::check_balances(account({-1, 1, 0, 0}, 0, 1)), Contains(HasSubstr("below")));
}

TEST(CheckBalances, NegativeReservedIsFound) {
  EXPECT_THAT(invariants::check_balances(account({12, -2, 0, 10})), Contains(HasSubstr("reserved is negative")));
}

TEST(CheckBalances, NegativeUsedIsFound) {
  EXPECT_THAT(invariants::check_balances(account({12, 0, -2, 10})), Contains(HasSubstr("used is negative")));
}

TEST(CheckBalances, ExpiredCreditsCountInTheIdentityAndAreNeverNegative) {
  EXPECT_THAT(invariants::check_balances(account({4, 6, 8, 21, 3}, 0, 1)), IsEmpty());  // 4 + 6 + 8 + 3 == 21
  EXPECT_THAT(invariants::check_balances(account({4, 6, 8, 18, 3}, 0, 1)),
              Contains(HasSubstr("available + reserved + used + expired != purchased")));
  EXPECT_THAT(invariants::check_balances(account({4, 6, 8, 16, -2}, 0, 1)), Contains(HasSubstr("expired is negative")));
}

TEST(CheckBalances, NegativeActiveHoldsIsFound) {
  EXPECT_THAT(invariants::check_balances(account({0, 0, 0, 0}, 0, -1)), Contains(HasSubstr("active_holds")));
}

// ---------------------------------------------------------------------------------------------
// check_active_holds (invariant 2)

TEST(CheckActiveHolds, MatchingSumAndCountIsClean) {
  EXPECT_THAT(invariants::check_active_holds(account({4, 6, 8, 18}, 0, 2), 6, 2), IsEmpty());
}

TEST(CheckActiveHolds, ReservedOtherThanTheSumOfActiveHoldsIsFound) {
  const auto v = invariants::check_active_holds(account({4, 6, 8, 18}, 0, 2), 5, 2);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("reserved 6 != sum of active holds 5"));
}

TEST(CheckActiveHolds, ActiveHoldCountOtherThanTheRowsIsFound) {
  const auto v = invariants::check_active_holds(account({4, 6, 8, 18}, 0, 2), 6, 3);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("active_holds 2 != number of active holds 3"));
}

TEST(CheckActiveHolds, BothWrongGiveTwoViolations) {
  EXPECT_EQ(invariants::check_active_holds(account({4, 6, 8, 18}, 0, 2), 0, 0).size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// fold_events: a correct log

TEST(FoldEvents, ACorrectLogFoldsCleanly) {
  const auto events = good_log();
  const auto fold = invariants::fold_events(events);
  EXPECT_THAT(fold.violations, IsEmpty());
  EXPECT_EQ(fold.balances, (Balances{4, 6, 8, 18}));
  EXPECT_EQ(fold.active_holds, 1);
  EXPECT_EQ(fold.last_event_id, 14);
}

TEST(FoldEvents, AnEmptyLogFoldsToZero) {
  const auto fold = invariants::fold_events({});
  EXPECT_THAT(fold.violations, IsEmpty());
  EXPECT_EQ(fold.balances, Balances{});
  EXPECT_EQ(fold.active_holds, 0);
  EXPECT_EQ(fold.last_event_id, 0);
}

TEST(FoldEvents, OverdraftLogWithNegativeAvailableFoldsCleanly) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::reserved, 5, "h1", -5, 5, 0),
      ev(2, T::committed, 5, "h1", -5, 0, 5),
      ev(3, T::credited, 5, std::nullopt, 0, 0, 5),
  };
  const auto fold = invariants::fold_events(log);
  EXPECT_THAT(fold.violations, IsEmpty());
  EXPECT_EQ(fold.balances, (Balances{0, 0, 5, 5}));
}

// ---------------------------------------------------------------------------------------------
// fold_events: each kind of corruption

TEST(FoldEvents, RepeatedEventIdIsFound) {
  auto log = good_log();
  log[3].event_id = log[2].event_id;
  EXPECT_THAT(check(log), Contains(HasSubstr("event_id does not increase")));
}

TEST(FoldEvents, DecreasingEventIdIsFound) {
  auto log = good_log();
  std::swap(log[0].event_id, log[1].event_id);  // 2, 1, ...
  EXPECT_THAT(check(log), Contains(HasSubstr("event_id does not increase")));
}

TEST(FoldEvents, ZeroEventIdIsFound) {
  auto log = good_log();
  log[0].event_id = 0;
  EXPECT_THAT(check(log), Contains(HasSubstr("event_id does not increase")));
}

TEST(FoldEvents, WrongAvailableAfterIsFound) {
  auto log = good_log();
  log[4].available_after += 1;
  const auto v = check(log);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("event 6 (released): recorded balances after it differ"));
}

TEST(FoldEvents, WrongReservedAfterIsFound) {
  auto log = good_log();
  log[1].reserved_after = 0;
  EXPECT_THAT(check(log), Contains(HasSubstr("event 2 (reserved): recorded balances")));
}

TEST(FoldEvents, WrongUsedAfterIsFound) {
  auto log = good_log();
  log[7].used_after = 3;
  EXPECT_THAT(check(log), Contains(HasSubstr("event 9 (late_charged): recorded balances")));
}

TEST(FoldEvents, WrongExpiredAfterIsFound) {
  // Nothing expires in this log: an event that records expired credits contradicts the fold.
  auto log = good_log();
  log[2].expired_after = 1;
  EXPECT_THAT(check(log), Contains(HasSubstr("event 3 (committed): recorded balances")));
}

TEST(FoldEvents, HoldEndedTwiceIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::committed, 4, "h1", 6, 0, 4),
      ev(4, T::released, 4, "h1", 6, 0, 4),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("hold h1 ended twice")));
}

TEST(FoldEvents, ExpiryAfterACommitIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::committed, 4, "h1", 6, 0, 4),
      ev(4, T::expired, 4, "h1", 6, 0, 4),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("ended twice")));
}

TEST(FoldEvents, LateSettlementAfterACommitIsAnEventAfterTheTerminalOne) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::committed, 4, "h1", 6, 0, 4),
      ev(4, T::late_charged, 4, "h1", 2, 0, 8),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("late settlement of hold h1 that is not a once-expired hold")));
}

TEST(FoldEvents, LateSettlementAfterAReleaseIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::released, 4, "h1", 10, 0, 0),
      ev(4, T::late_forgiven, 4, "h1", 10, 0, 0),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("not a once-expired hold")));
}

TEST(FoldEvents, LateSettlementOfANonExpiredActiveHoldIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::late_forgiven, 4, "h1", 6, 4, 0),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("late settlement of hold h1 that is not a once-expired hold")));
}

TEST(FoldEvents, SecondLateSettlementIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::expired, 4, "h1", 10, 0, 0),
      ev(4, T::late_charged, 4, "h1", 6, 0, 4),
      ev(5, T::late_forgiven, 4, "h1", 6, 0, 4),
  };
  const auto v = check(log);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("event 5 (late_forgiven)"));
}

TEST(FoldEvents, AnExtendedEventOfAHeldHoldFoldsCleanlyAndMovesNothing) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::extended, 0, "h1", 6, 4, 0),
      ev(4, T::committed, 4, "h1", 6, 0, 4),
  };
  EXPECT_THAT(check(log), IsEmpty());
}

TEST(FoldEvents, ExtendingAnEndedHoldOrMovingAnAmountIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::released, 4, "h1", 10, 0, 0),
      ev(4, T::extended, 0, "h1", 10, 0, 0),
      ev(5, T::reserved, 2, "h2", 8, 2, 0),
      ev(6, T::extended, 1, "h2", 8, 2, 0),
  };
  const auto v = check(log);
  EXPECT_THAT(v, Contains(HasSubstr("hold h1 extended after it ended")));
  EXPECT_THAT(v, Contains(HasSubstr("an extended event moves an amount")));
}

TEST(FoldEvents, LateSettlementOfMoreThanWasHeldIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::expired, 4, "h1", 10, 0, 0),
      ev(4, T::late_charged, 5, "h1", 5, 0, 5),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("late settlement of more than was held")));
}

TEST(FoldEvents, CommitOfMoreThanWasHeldIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::committed, 5, "h1", 5, 0, 5),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("commits more than was held")));
}

TEST(FoldEvents, ReleaseOfAnotherAmountThanHeldIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::released, 3, "h1", 10, 0, 0),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("amount differs from the hold")));
}

TEST(FoldEvents, HoldReservedTwiceIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, "h1", 6, 4, 0),
      ev(3, T::reserved, 4, "h1", 2, 8, 0),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("hold h1 reserved twice")));
}

TEST(FoldEvents, HoldEventWithoutAReservedEventIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::committed, 4, "ghost", 10, 0, 0),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("hold ghost has no reserved event before it")));
}

TEST(FoldEvents, HoldEventWithoutHoldIdIsFound) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, 10, std::nullopt, 10, 0, 0),
      ev(2, T::reserved, 4, std::nullopt, 6, 4, 0),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("hold event without hold_id")));
}

TEST(FoldEvents, NegativeAmountIsFound) {
  using T = EventType;
  const std::vector<Event> log = {ev(1, T::credited, -5, std::nullopt, -5, 0, 0)};
  EXPECT_THAT(check(log), Contains(HasSubstr("negative amount")));
}

TEST(FoldEvents, BalanceOverflowIsFoundNotWrapped) {
  using T = EventType;
  const std::vector<Event> log = {
      ev(1, T::credited, kMax, std::nullopt, kMax, 0, 0),
      ev(2, T::credited, 1, std::nullopt, kMax, 0, 0),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("balance overflow")));
}

TEST(FoldEvents, EveryCorruptionOfTheGoodLogIsNoticed) {
  // Nudging any *_after field of any event of the correct log must be noticed.
  const auto base = good_log();
  for (std::size_t i = 0; i < base.size(); ++i) {
    for (int field = 0; field < 3; ++field) {
      auto log = base;
      std::int64_t& f = field == 0 ? log[i].available_after : field == 1 ? log[i].reserved_after : log[i].used_after;
      f += 1;
      EXPECT_THAT(check(log), Not(IsEmpty())) << "event " << i << " field " << field;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// check_fold (invariant 4)

TEST(CheckFold, RowEqualToTheFoldIsClean) {
  const auto events = good_log();
  EXPECT_THAT(invariants::check_fold(row_matching_good_log(), invariants::fold_events(events)), IsEmpty());
}

TEST(CheckFold, RowBalancesOtherThanTheFoldAreFound) {
  const auto events = good_log();
  Account row = row_matching_good_log();
  row.balances.available += 5;
  row.balances.purchased += 5;  // the row is self-consistent, but not what the events say
  const auto v = invariants::check_fold(row, invariants::fold_events(events));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("!= fold of events"));
}

TEST(CheckFold, RowActiveHoldCountOtherThanTheFoldIsFound) {
  const auto events = good_log();
  Account row = row_matching_good_log();
  row.active_holds = 2;
  const auto v = invariants::check_fold(row, invariants::fold_events(events));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("active holds"));
}

TEST(CheckFold, TheFoldsOwnViolationsAreReported) {
  auto events = good_log();
  events[2].event_id = 1;
  const auto v = invariants::check_fold(row_matching_good_log(), invariants::fold_events(events));
  EXPECT_THAT(v, Contains(HasSubstr("event_id does not increase")));
}

TEST(CheckFold, AMissingEventIsFound) {
  auto events = good_log();
  events.pop_back();  // the last reservation is in the row but not in the log
  EXPECT_THAT(invariants::check_fold(row_matching_good_log(), invariants::fold_events(events)), Not(IsEmpty()));
}

// ---------------------------------------------------------------------------------------------
// account_updated: no balance moves; the last one's settings are the row's

Event updated(std::int64_t id, AccountSettings settings, std::int64_t available, std::int64_t reserved,
              std::int64_t used) {
  Event e = ev(id, EventType::account_updated, 0, std::nullopt, available, reserved, used);
  e.settings = settings;
  return e;
}

std::vector<Event> log_with_updates() {
  auto log = good_log();
  log.insert(log.begin() + 3, updated(4, AccountSettings{5, 2, false}, 17, 0, 3));
  log.push_back(updated(15, AccountSettings{0, std::nullopt, true}, 4, 6, 8));
  return log;
}

TEST(AccountUpdatedEvents, FoldCleanlyAndTheLastSettingsAreTheRows) {
  Account row = row_matching_good_log();
  row.frozen = true;
  const auto fold = invariants::fold_events(log_with_updates());
  EXPECT_THAT(fold.violations, IsEmpty());
  EXPECT_EQ(fold.settings, (AccountSettings{0, std::nullopt, true}));
  EXPECT_THAT(invariants::check_fold(row, fold), IsEmpty());
}

TEST(AccountUpdatedEvents, ARowWhoseSettingsDifferFromTheLastEventIsFound) {
  Account row = row_matching_good_log();  // not frozen, but the last event froze it
  const auto v = invariants::check_fold(row, invariants::fold_events(log_with_updates()));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("settings differ"));
}

TEST(AccountUpdatedEvents, WithoutOneTheRowKeepsItsCreationSettings) {
  Account row = row_matching_good_log();
  row.overdraft_limit = 7;
  row.frozen = true;
  EXPECT_THAT(invariants::check_fold(row, invariants::fold_events(good_log())), IsEmpty());
}

TEST(AccountUpdatedEvents, OneThatMovesAnAmountOrABalanceIsFound) {
  auto log = log_with_updates();
  log[3].amount = 1;
  EXPECT_THAT(check(log), Contains(HasSubstr("moves an amount")));
  log = log_with_updates();
  log[3].available_after = 18;
  EXPECT_THAT(check(log), Contains(HasSubstr("differ from the fold")));
}

TEST(AccountUpdatedEvents, OneWithoutSettingsOrWithAHoldIsFound) {
  auto log = log_with_updates();
  log[3].settings.reset();
  EXPECT_THAT(check(log), Contains(HasSubstr("without settings")));
  log = log_with_updates();
  log[3].hold_id = "h1";
  EXPECT_THAT(check(log), Contains(HasSubstr("names a hold")));
  log = good_log();
  log[0].settings = AccountSettings{};
  EXPECT_THAT(check(log), Contains(HasSubstr("only account_updated events carry settings")));
}

TEST(AccountUpdatedEvents, AnOverdraftLimitBelowWhatWasOverdrawnIsFound) {
  std::vector<Event> log = {
      ev(1, EventType::reserved, 5, "h1", -5, 5, 0),
      updated(2, AccountSettings{4, std::nullopt, false}, -5, 5, 0),
  };
  EXPECT_THAT(check(log), Contains(HasSubstr("set below what was already overdrawn")));
}

}  // namespace
}  // namespace tollgate
