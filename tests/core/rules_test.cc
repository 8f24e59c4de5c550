// Exhaustive tests of the pure rules: checked arithmetic, amounts, identifiers, balance movements
// and the hold state machine (core/checked.h, core/rules.h, core/result.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/checked.h"
#include "core/limits.h"
#include "core/model.h"
#include "core/result.h"
#include "core/rules.h"

namespace tollgate {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kBal = limits::kBalanceMax;  // 2^53 − 1: every balance stays within ±this
constexpr std::int64_t kAmountMax = (std::int64_t{1} << 53) - 1;
constexpr std::int64_t kTwoPow53 = std::int64_t{1} << 53;

// ---------------------------------------------------------------------------------------------
// code_name: the stable strings of the HTTP problem documents.

TEST(CodeName, EveryCodeHasItsStableName) {
  EXPECT_EQ(code_name(Code::ok), "ok");
  EXPECT_EQ(code_name(Code::invalid_request), "invalid_request");
  EXPECT_EQ(code_name(Code::not_found), "not_found");
  EXPECT_EQ(code_name(Code::conflict), "conflict");
  EXPECT_EQ(code_name(Code::idempotency_mismatch), "idempotency_mismatch");
  EXPECT_EQ(code_name(Code::insufficient_credits), "insufficient_credits");
  EXPECT_EQ(code_name(Code::too_many_holds), "too_many_holds");
  EXPECT_EQ(code_name(Code::hold_committed), "hold_committed");
  EXPECT_EQ(code_name(Code::hold_released), "hold_released");
  EXPECT_EQ(code_name(Code::hold_expired), "hold_expired");
  EXPECT_EQ(code_name(Code::overflow), "overflow");
  EXPECT_EQ(code_name(Code::overloaded), "overloaded");
  EXPECT_EQ(code_name(Code::unavailable), "unavailable");
  EXPECT_EQ(code_name(Code::internal), "internal");
}

TEST(CodeName, NamesAreDistinctAndAnUnknownValueIsInternal) {
  std::set<std::string_view> names;
  for (int c = 0; c <= static_cast<int>(Code::internal); ++c) names.insert(code_name(static_cast<Code>(c)));
  EXPECT_EQ(names.size(), static_cast<std::size_t>(Code::internal) + 1);
  EXPECT_EQ(code_name(static_cast<Code>(200)), "internal");
}

TEST(ErrorValues, InsufficientWithSomeAvailableNamesBothFiguresForTheKiosk) {
  const Error e = Error::insufficient(3, 7, 0);
  EXPECT_EQ(e.code, Code::insufficient_credits);
  EXPECT_EQ(e.available, 3);
  EXPECT_EQ(e.requested, 7);
  EXPECT_EQ(e.detail, "Not enough credits: 3 available, 7 needed.");
}

TEST(ErrorValues, InsufficientWithNothingAvailableSaysSoForTheKiosk) {
  for (const std::int64_t available : {std::int64_t{0}, std::int64_t{-4}}) {
    const Error e = Error::insufficient(available, 2, 0);
    EXPECT_EQ(e.available, available);
    EXPECT_EQ(e.requested, 2);
    EXPECT_EQ(e.detail, "No credits available. Another device may be using this account right now.");
    EXPECT_EQ(e.detail, kInsufficientCreditsDetail);
  }
}

TEST(ErrorValues, MakeCarriesCodeAndDetailButNoAmounts) {
  const Error e = Error::make(Code::conflict, "why");
  EXPECT_EQ(e.code, Code::conflict);
  EXPECT_EQ(e.detail, "why");
  EXPECT_FALSE(e.available.has_value());
  EXPECT_FALSE(e.requested.has_value());
  EXPECT_EQ(invalid("bad").code, Code::invalid_request);
}

TEST(ResultValues, HoldsEitherAValueOrAnError) {
  Result<int> good = 5;
  EXPECT_TRUE(good.ok());
  EXPECT_EQ(good.code(), Code::ok);
  EXPECT_EQ(*good, 5);
  Result<int> bad = Error::make(Code::not_found, "x");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::not_found);
  EXPECT_TRUE(ok_status().ok());
}

// ---------------------------------------------------------------------------------------------
// checked arithmetic

TEST(CheckedAdd, AddsInsideTheRange) {
  EXPECT_EQ(checked_add(2, 3), 5);
  EXPECT_EQ(checked_add(kMax, 0), kMax);
  EXPECT_EQ(checked_add(kMax - 1, 1), kMax);
  EXPECT_EQ(checked_add(kMin, 0), kMin);
  EXPECT_EQ(checked_add(kMin + 1, -1), kMin);
  EXPECT_EQ(checked_add(kMax, kMin), -1);
  EXPECT_EQ(checked_add(-5, 3), -2);
}

TEST(CheckedAdd, RefusesToWrapAtEitherEnd) {
  EXPECT_EQ(checked_add(kMax, 1), std::nullopt);
  EXPECT_EQ(checked_add(1, kMax), std::nullopt);
  EXPECT_EQ(checked_add(kMax, kMax), std::nullopt);
  EXPECT_EQ(checked_add(kMin, -1), std::nullopt);
  EXPECT_EQ(checked_add(-1, kMin), std::nullopt);
  EXPECT_EQ(checked_add(kMin, kMin), std::nullopt);
}

TEST(CheckedSub, SubtractsInsideTheRange) {
  EXPECT_EQ(checked_sub(5, 3), 2);
  EXPECT_EQ(checked_sub(kMin, 0), kMin);
  EXPECT_EQ(checked_sub(kMin + 1, 1), kMin);
  EXPECT_EQ(checked_sub(kMax, 0), kMax);
  EXPECT_EQ(checked_sub(kMax - 1, -1), kMax);
  EXPECT_EQ(checked_sub(-1, kMin), kMax);
  EXPECT_EQ(checked_sub(0, kMax), kMin + 1);
}

TEST(CheckedSub, RefusesToWrapAtEitherEnd) {
  EXPECT_EQ(checked_sub(kMin, 1), std::nullopt);
  EXPECT_EQ(checked_sub(0, kMin), std::nullopt);
  EXPECT_EQ(checked_sub(kMax, -1), std::nullopt);
  EXPECT_EQ(checked_sub(kMax, kMin), std::nullopt);
  EXPECT_EQ(checked_sub(kMin, kMax), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// amounts

TEST(Amount, LimitsAreOneToTwoPow53MinusOne) {
  EXPECT_EQ(limits::kAmountMin, 1);
  EXPECT_EQ(limits::kAmountMax, 9007199254740991);
}

TEST(Amount, ValidFromOneToTwoPow53MinusOne) {
  EXPECT_TRUE(amount_is_valid(1));
  EXPECT_TRUE(amount_is_valid(2));
  EXPECT_TRUE(amount_is_valid(kAmountMax - 1));
  EXPECT_TRUE(amount_is_valid(kAmountMax));
}

TEST(Amount, InvalidOutsideTheRange) {
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kTwoPow53, kTwoPow53 + 1, kMax, kMin, kMin + 1}) {
    EXPECT_FALSE(amount_is_valid(bad)) << bad;
  }
}

TEST(Amount, CheckAmountIsInvalidRequestNamingTheFieldAndTheValue) {
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}, kTwoPow53, kMax, kMin}) {
    const Status s = check_amount(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), Code::invalid_request);
    EXPECT_THAT(s.error().detail, HasSubstr("amount"));
    EXPECT_THAT(s.error().detail, HasSubstr(std::to_string(bad)));
  }
  const Status cost = check_amount(0, "cost");
  ASSERT_FALSE(cost.ok());
  EXPECT_THAT(cost.error().detail, ::testing::StartsWith("cost "));
}

TEST(Amount, CheckAmountAcceptsTheBounds) {
  EXPECT_TRUE(check_amount(1).ok());
  EXPECT_TRUE(check_amount(kAmountMax).ok());
}

// ---------------------------------------------------------------------------------------------
// identifiers

bool allowed_id_char(unsigned char c) {
  const std::string allowed =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@-";
  return allowed.find(static_cast<char>(c)) != std::string::npos;
}

TEST(Id, EmptyIsInvalid) { EXPECT_FALSE(id_is_valid("")); }

TEST(Id, LengthOneTo128) {
  EXPECT_TRUE(id_is_valid("a"));
  EXPECT_TRUE(id_is_valid(std::string(127, 'a')));
  EXPECT_TRUE(id_is_valid(std::string(128, 'a')));
  EXPECT_FALSE(id_is_valid(std::string(129, 'a')));
  EXPECT_FALSE(id_is_valid(std::string(1000, 'a')));
}

TEST(Id, EveryAllowedPunctuationIsAccepted) {
  for (const char* id : {"...", "_", ":", "@", "-", ".a", "a.", "a.b", "a_b", "a:b", "a@b", "a-b", "user@example.com:req_1-2.3"}) {
    EXPECT_TRUE(id_is_valid(id)) << id;
  }
  EXPECT_TRUE(id_is_valid("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"));
}

TEST(Id, DisallowedCharactersAreRefused) {
  for (const char* id : {"a b", " ", "a/b", "/", "a\\b", "a#b", "a?b", "a%b", "a+b", "a=b", "a,b", "a;b", "a\"b",
                         "a'b", "a~b", "a!b", "a*b", "a(b", "a[b", "a{b", "a<b", "a|b", "a&b", "a$b", "a^b", "a`b",
                         "a\tb", "a\nb", "a\rb", "caf\xc3\xa9", "\xe2\x82\xac", "\xff", "\x80"}) {
    EXPECT_FALSE(id_is_valid(id)) << id;
  }
  EXPECT_FALSE(id_is_valid(std::string_view("a\0b", 3)));  // an embedded NUL
}

TEST(Id, DotAndDotDotAreNotIdsBecauseAUrlPathCannotCarryThem) {
  EXPECT_FALSE(id_is_valid("."));
  EXPECT_FALSE(id_is_valid(".."));
  const Status s = check_id("..", "hold_id");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::invalid_request);
  EXPECT_EQ(s.error().detail, "hold_id must not be \".\" or \"..\": a URL path cannot carry them");
}

TEST(Id, EveryByteValueIsJudgedByTheAllowedSet) {
  for (int c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    const std::string one(1, ch);
    // "." alone is a URL's dot segment, never an id (the test above).
    EXPECT_EQ(id_is_valid(one), ch != '.' && allowed_id_char(static_cast<unsigned char>(c))) << "byte " << c;
    // In the middle of an otherwise good id, too.
    const std::string mid = "ab" + one + "cd";
    EXPECT_EQ(id_is_valid(mid), allowed_id_char(static_cast<unsigned char>(c))) << "byte " << c;
  }
}

TEST(Id, LengthIsCountedInBytesSoMultiByteCharactersCannotSneakPast) {
  std::string id(127, 'a');
  id += "\xc3\xa9";  // é: 2 bytes, 129 bytes in all, and not allowed anyway
  EXPECT_FALSE(id_is_valid(id));
}

TEST(Id, CheckIdIsInvalidRequestNamingTheField) {
  const Status s = check_id("a b", "request_id");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::invalid_request);
  EXPECT_THAT(s.error().detail, ::testing::StartsWith("request_id "));
  EXPECT_TRUE(check_id("ok-id", "request_id").ok());
}

// ---------------------------------------------------------------------------------------------
// balances: credit

TEST(RulesCredit, AddsToAvailableAndPurchased) {
  const auto after = rules::credit(Balances{1, 2, 3, 6}, 10);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (Balances{11, 2, 3, 16}));
}

TEST(RulesCredit, FillsTheBalanceExactlyToTheLargestValue) {
  const auto after = rules::credit(Balances{kBal - 5, 0, 0, kBal - 5}, 5);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (Balances{kBal, 0, 0, kBal}));
}

TEST(RulesCredit, OverflowOfAvailableIsOverflow) {
  const auto after = rules::credit(Balances{kBal - 5, 0, 0, kBal - 5}, 6);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), Code::overflow);
  EXPECT_THAT(after.error().detail, HasSubstr("6"));
}

TEST(RulesCredit, OverflowOfPurchasedAloneIsOverflow) {
  // available is far from the limit, but purchased (which includes reserved and used) is not.
  const auto after = rules::credit(Balances{1, kBal - 11, 10, kBal}, 1);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), Code::overflow);
}

TEST(RulesCredit, CreditingAnOverdrawnAccountBringsItBack) {
  const auto after = rules::credit(Balances{-5, 5, 0, 0}, 7);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (Balances{2, 5, 0, 7}));
}

// ---------------------------------------------------------------------------------------------
// balances: debit

TEST(RulesDebit, RemovesFromAvailableAndPurchased) {
  const auto after = rules::debit(Balances{10, 2, 3, 15}, 4);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (Balances{6, 2, 3, 11}));
}

TEST(RulesDebit, MayTakeEverythingAvailable) {
  const auto after = rules::debit(Balances{10, 0, 0, 10}, 10);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (Balances{0, 0, 0, 0}));
}

TEST(RulesDebit, MoreThanAvailableIsInsufficientWithAvailableAndRequested) {
  const auto after = rules::debit(Balances{10, 5, 0, 15}, 11);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), Code::insufficient_credits);
  EXPECT_EQ(after.error().available, 10);
  EXPECT_EQ(after.error().requested, 11);
  EXPECT_EQ(after.error().detail, "Not enough credits: 10 available, 11 needed.");
}

TEST(RulesDebit, NeverUsesTheOverdraft) {
  // Overdrawn: available is negative; a debit of anything is refused.
  const auto after = rules::debit(Balances{-3, 3, 0, 0}, 1);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), Code::insufficient_credits);
  EXPECT_EQ(after.error().available, -3);
  const auto zero = rules::debit(Balances{0, 0, 0, 0}, 1);
  EXPECT_EQ(zero.code(), Code::insufficient_credits);
}

TEST(RulesDebit, LargestAmountAgainstLargestBalance) {
  const auto after = rules::debit(Balances{kBal, 0, 0, kBal}, kAmountMax);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->available, kBal - kAmountMax);
}

// ---------------------------------------------------------------------------------------------
// balances: reserve

Account account_with(Balances b, std::int64_t overdraft = 0, std::optional<std::int64_t> max_holds = std::nullopt,
                     std::int64_t active_holds = 0) {
  Account a;
  a.account_id = "acct";
  a.balances = b;
  a.overdraft_limit = overdraft;
  a.max_active_holds = max_holds;
  a.active_holds = active_holds;
  return a;
}

TEST(RulesReserve, MovesAvailableToReserved) {
  const auto after = rules::reserve(account_with({10, 0, 0, 10}), 4);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (Balances{6, 4, 0, 10}));
}

TEST(RulesReserve, MayReserveEverythingAvailable) {
  const auto after = rules::reserve(account_with({10, 0, 0, 10}), 10);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (Balances{0, 10, 0, 10}));
}

TEST(RulesReserve, OneMoreThanAvailableIsInsufficientWithTheKioskDetail) {
  const auto after = rules::reserve(account_with({10, 0, 0, 10}), 11);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), Code::insufficient_credits);
  EXPECT_EQ(after.error().available, 10);
  EXPECT_EQ(after.error().requested, 11);
  EXPECT_EQ(after.error().detail, "Not enough credits: 10 available, 11 needed.");
}

TEST(RulesReserve, OverdraftAllowsAvailableDownToMinusTheLimit) {
  const auto exact = rules::reserve(account_with({0, 0, 0, 0}, 5), 5);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(*exact, (Balances{-5, 5, 0, 0}));
  const auto beyond = rules::reserve(account_with({0, 0, 0, 0}, 5), 6);
  ASSERT_FALSE(beyond.ok());
  EXPECT_EQ(beyond.code(), Code::insufficient_credits);
  EXPECT_EQ(beyond.error().available, 0);
  EXPECT_EQ(beyond.error().requested, 6);
}

TEST(RulesReserve, AnAlreadyOverdrawnAccountMayUseOnlyTheRestOfItsOverdraft) {
  const Account a = account_with({-2, 2, 0, 0}, 5);
  const auto ok = rules::reserve(a, 3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (Balances{-5, 5, 0, 0}));
  const auto refused = rules::reserve(a, 4);
  ASSERT_EQ(refused.code(), Code::insufficient_credits);
  EXPECT_EQ(refused.error().available, -2);
}

TEST(RulesReserve, MaxActiveHoldsBelowTheLimitIsAllowed) {
  const auto after = rules::reserve(account_with({10, 0, 0, 10}, 0, 2, 1), 1);
  EXPECT_TRUE(after.ok());
}

TEST(RulesReserve, MaxActiveHoldsReachedIsTooManyHolds) {
  const auto after = rules::reserve(account_with({10, 0, 0, 10}, 0, 2, 2), 1);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), Code::too_many_holds);
  EXPECT_THAT(after.error().detail, HasSubstr("acct"));
  EXPECT_THAT(after.error().detail, HasSubstr("2"));
}

TEST(RulesReserve, TooManyHoldsIsCheckedBeforeInsufficientCredits) {
  // Both refusals apply: the hold count wins.
  const auto after = rules::reserve(account_with({0, 3, 0, 3}, 0, 1, 1), 5);
  EXPECT_EQ(after.code(), Code::too_many_holds);
}

TEST(RulesReserve, NoMaxActiveHoldsMeansNoLimit) {
  const auto after = rules::reserve(account_with({10, 0, 0, 10}, 0, std::nullopt, 1'000'000), 1);
  EXPECT_TRUE(after.ok());
}

TEST(RulesReserve, OverflowOfReservedIsOverflow) {
  // With an overdraft, reserved can exceed purchased; it must never wrap.
  const Account a = account_with({0, kBal - 1, 0, kBal - 1}, kAmountMax);
  const auto fits = rules::reserve(a, 1);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(*fits, (Balances{-1, kBal, 0, kBal - 1}));
  const auto over = rules::reserve(a, 2);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.code(), Code::overflow);
}

TEST(RulesReserve, AvailableThatWouldWrapIsInsufficientNotAWrap) {
  // A (corrupt) row near the bottom of the range: subtracting must not wrap into a huge balance.
  const auto after = rules::reserve(account_with({kMin + 1, 0, 0, kMin + 1}, 0), 2);
  EXPECT_EQ(after.code(), Code::insufficient_credits);
}

// ---------------------------------------------------------------------------------------------
// balances: commit and release

TEST(RulesCommit, WholeHoldMovesToUsed) {
  EXPECT_EQ(rules::commit(Balances{0, 10, 0, 10}, 10, 10), (Balances{0, 0, 10, 10}));
}

TEST(RulesCommit, PartialCommitReturnsTheRestToAvailable) {
  EXPECT_EQ(rules::commit(Balances{0, 10, 0, 10}, 10, 4), (Balances{6, 0, 4, 10}));
}

TEST(RulesCommit, ZeroCommittedIsARelease) {
  EXPECT_EQ(rules::commit(Balances{0, 10, 0, 10}, 10, 0), (Balances{10, 0, 0, 10}));
}

TEST(RulesCommit, OnlyTheHoldsShareOfReservedMoves) {
  EXPECT_EQ(rules::commit(Balances{1, 15, 2, 18}, 10, 7), (Balances{4, 5, 9, 18}));
}

TEST(RulesRelease, ReturnsTheWholeHoldToAvailable) {
  EXPECT_EQ(rules::release(Balances{0, 10, 0, 10}, 10), (Balances{10, 0, 0, 10}));
  EXPECT_EQ(rules::release(Balances{-5, 8, 2, 5}, 5), (Balances{0, 3, 2, 5}));
}

TEST(RulesAccountView, OverdueHoldsCountAsReleasedBeforeTheReaperRuns) {
  Account row = account_with({2, 9, 1, 12});
  row.active_holds = 3;
  const Account view = rules::account_view(row, 2, 7);
  EXPECT_EQ(view.balances, (Balances{9, 2, 1, 12}));
  EXPECT_EQ(view.active_holds, 1);
  EXPECT_EQ(rules::account_view(row, 0, 0).balances, row.balances);
}

TEST(RulesAccountViewDeathTest, OverdueFiguresBeyondTheAccountsOwnAreABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Account row = account_with({2, 9, 1, 12});
  row.active_holds = 3;
  EXPECT_DEATH((void)rules::account_view(row, 2, 10), "assertion failed");  // more than reserved
  EXPECT_DEATH((void)rules::account_view(row, 4, 7), "assertion failed");   // more than active
}

TEST(RulesCommitDeathTest, CommittingMoreThanHeldIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)rules::commit(Balances{0, 10, 0, 10}, 10, 11), "assertion failed");
}

// ---------------------------------------------------------------------------------------------
// balances: late charge

TEST(RulesLateCharge, TakesAvailableStraightToUsed) {
  const auto after = rules::late_charge(account_with({10, 0, 0, 10}), 4);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, (Balances{6, 0, 4, 10}));
}

TEST(RulesLateCharge, WithoutTheCreditsIsInsufficient) {
  const auto after = rules::late_charge(account_with({3, 7, 0, 10}), 4);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.code(), Code::insufficient_credits);
  EXPECT_EQ(after.error().available, 3);
  EXPECT_EQ(after.error().requested, 4);
}

TEST(RulesLateCharge, MayUseTheOverdraftDownToTheLimit) {
  const auto exact = rules::late_charge(account_with({10, 0, 0, 10}, 5), 15);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(*exact, (Balances{-5, 0, 15, 10}));
  EXPECT_EQ(rules::late_charge(account_with({10, 0, 0, 10}, 5), 16).code(), Code::insufficient_credits);
}

TEST(RulesLateCharge, OverflowOfUsedIsOverflow) {
  const Account a = account_with({5, 0, kBal - 5, kBal}, kAmountMax);
  const auto fits = rules::late_charge(a, 5);
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->used, kBal);
  EXPECT_EQ(rules::late_charge(a, 6).code(), Code::overflow);
}

// ---------------------------------------------------------------------------------------------
// the hold state machine: effective status and deadlines

Hold hold_in(HoldStatus status, LateOutcome late = LateOutcome::none, std::int64_t amount = 10,
             std::int64_t committed = 0, std::int64_t expires_at = 1000) {
  Hold h;
  h.hold_id = "hold_1";
  h.account_id = "acct";
  h.request_id = "req";
  h.amount = amount;
  h.committed_amount = committed;
  h.status = status;
  h.late_outcome = late;
  h.created_at_ms = 0;
  h.expires_at_ms = expires_at;
  return h;
}

TEST(HoldDeadline, ActiveBeforeTheDeadline) {
  const Hold h = hold_in(HoldStatus::active);
  EXPECT_FALSE(rules::is_overdue(h, 999));
  EXPECT_EQ(rules::effective_status(h, 999), HoldStatus::active);
  EXPECT_EQ(rules::effective_status(h, 0), HoldStatus::active);
}

TEST(HoldDeadline, AtExactlyTheDeadlineTheHoldIsOverdue) {
  const Hold h = hold_in(HoldStatus::active);
  EXPECT_TRUE(rules::is_overdue(h, 1000));
  EXPECT_EQ(rules::effective_status(h, 1000), HoldStatus::expired);
}

TEST(HoldDeadline, AfterTheDeadlineTheHoldIsOverdue) {
  const Hold h = hold_in(HoldStatus::active);
  EXPECT_TRUE(rules::is_overdue(h, 1001));
  EXPECT_EQ(rules::effective_status(h, kMax), HoldStatus::expired);
}

TEST(HoldDeadline, EndedHoldsAreNeverOverdueAndKeepTheirStatus) {
  for (HoldStatus s : {HoldStatus::committed, HoldStatus::released, HoldStatus::expired}) {
    const Hold h = hold_in(s);
    EXPECT_FALSE(rules::is_overdue(h, 5000)) << hold_status_name(s);
    EXPECT_EQ(rules::effective_status(h, 5000), s);
    EXPECT_EQ(rules::effective_status(h, 0), s);
  }
}

// ---------------------------------------------------------------------------------------------
// plan_commit: every status × late outcome × policy × amount

constexpr std::int64_t kNow = 500;  // before the holds' deadline (1000): no hold is overdue

// The amounts a commit can ask for, against a hold of 10 whose earlier commit (if any) was 6.
struct AmountCase {
  const char* name;
  std::optional<std::int64_t> amount;
};
const AmountCase kAmountCases[] = {
    {"omitted", std::nullopt},     {"equal_to_hold", 10},      {"less_same_as_before", 6},
    {"less_other", 3},             {"more_than_hold", 11},     {"zero", 0},
    {"negative", -1},              {"two_pow_53", kTwoPow53},  {"int64_max", kMax},
    {"int64_min", kMin},
};

struct CommitExpectation {
  Code code = Code::ok;
  rules::CommitAction action = rules::CommitAction::commit;
  std::int64_t amount = 0;
};

// The contract of plan_commit, written out case by case from rules.h and api.md.
CommitExpectation expected_commit(HoldStatus status, LateOutcome late, LateCommitPolicy policy,
                                  std::optional<std::int64_t> amount) {
  constexpr std::int64_t held = 10;
  constexpr std::int64_t settled = 6;  // the committed / late-charged amount of a settled hold
  if (amount && (*amount < 1 || *amount > kAmountMax)) return {Code::invalid_request};
  if (amount && *amount > held) return {Code::invalid_request};
  const std::int64_t wanted = amount.value_or(held);
  switch (status) {
    case HoldStatus::active:  // the late outcome only means something for an expired hold
      return {Code::ok, rules::CommitAction::commit, wanted};
    case HoldStatus::committed:
      if (wanted == settled) return {Code::ok, rules::CommitAction::replay, wanted};
      return {Code::hold_committed};
    case HoldStatus::released:
      return {Code::hold_released};
    case HoldStatus::expired:
      if (late == LateOutcome::charged) {
        if (wanted == settled) return {Code::ok, rules::CommitAction::replay, wanted};
        return {Code::hold_committed};
      }
      if (late == LateOutcome::forgiven) return {Code::ok, rules::CommitAction::replay, 0};
      if (policy == LateCommitPolicy::reject) return {Code::hold_expired};
      if (policy == LateCommitPolicy::forgive) return {Code::ok, rules::CommitAction::late_forgive, wanted};
      return {Code::ok, rules::CommitAction::late_charge, wanted};
  }
  return {Code::internal};
}

std::int64_t settled_amount(HoldStatus status, LateOutcome late) {
  if (status == HoldStatus::committed) return 6;
  if (status == HoldStatus::expired && late == LateOutcome::charged) return 6;
  return 0;
}

TEST(PlanCommit, EveryStatusLateOutcomePolicyAndAmountCombination) {
  int cases = 0;
  for (HoldStatus status : {HoldStatus::active, HoldStatus::committed, HoldStatus::released, HoldStatus::expired}) {
    for (LateOutcome late : {LateOutcome::none, LateOutcome::charged, LateOutcome::forgiven}) {
      for (LateCommitPolicy policy : {LateCommitPolicy::charge, LateCommitPolicy::forgive, LateCommitPolicy::reject}) {
        for (const AmountCase& ac : kAmountCases) {
          const Hold h = hold_in(status, late, 10, settled_amount(status, late));
          const auto plan = rules::plan_commit(h, ac.amount, policy, kNow);
          const CommitExpectation want = expected_commit(status, late, policy, ac.amount);
          SCOPED_TRACE(std::string(hold_status_name(status)) + "/" +
                       std::string(late == LateOutcome::none ? "none" : late_outcome_name(late)) + "/" +
                       std::string(late_commit_policy_name(policy)) + "/" + ac.name);
          ASSERT_EQ(plan.code(), want.code) << (plan.ok() ? "" : plan.error().detail);
          if (plan.ok()) {
            EXPECT_EQ(plan->action, want.action);
            EXPECT_EQ(plan->amount, want.amount);
          }
          ++cases;
        }
      }
    }
  }
  EXPECT_EQ(cases, 4 * 3 * 3 * 10);
}

// The headline cases of the matrix, by name.

TEST(PlanCommit, ActiveHoldWithoutAmountCommitsAll) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::active), std::nullopt, LateCommitPolicy::charge, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, rules::CommitAction::commit);
  EXPECT_EQ(plan->amount, 10);
}

TEST(PlanCommit, ActiveHoldCommitsTheAmountAskedFor) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::active), 4, LateCommitPolicy::charge, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, rules::CommitAction::commit);
  EXPECT_EQ(plan->amount, 4);
}

TEST(PlanCommit, ActiveHoldJustBeforeTheDeadlineStillCommits) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::active), std::nullopt, LateCommitPolicy::reject, 999);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, rules::CommitAction::commit);
}

TEST(PlanCommit, MoreThanTheHoldIsInvalidRequestNamingBoth) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::active), 11, LateCommitPolicy::charge, kNow);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.code(), Code::invalid_request);
  EXPECT_THAT(plan.error().detail, HasSubstr("11"));
  EXPECT_THAT(plan.error().detail, HasSubstr("10"));
}

TEST(PlanCommit, InvalidAmountIsInvalidRequestWhateverTheStatus) {
  for (HoldStatus s : {HoldStatus::active, HoldStatus::committed, HoldStatus::released, HoldStatus::expired}) {
    const auto plan = rules::plan_commit(hold_in(s), 0, LateCommitPolicy::charge, kNow);
    ASSERT_EQ(plan.code(), Code::invalid_request) << hold_status_name(s);
    EXPECT_THAT(plan.error().detail, HasSubstr("amount"));
  }
}

TEST(PlanCommit, CommittedHoldWithTheSameAmountReplays) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::committed, LateOutcome::none, 10, 6), 6,
                                       LateCommitPolicy::charge, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, rules::CommitAction::replay);
}

TEST(PlanCommit, FullyCommittedHoldWithAmountOmittedReplays) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::committed, LateOutcome::none, 10, 10), std::nullopt,
                                       LateCommitPolicy::charge, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, rules::CommitAction::replay);
  EXPECT_EQ(plan->amount, 10);
}

TEST(PlanCommit, CommittedHoldWithAnotherAmountIsHoldCommitted) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::committed, LateOutcome::none, 10, 6), 5,
                                       LateCommitPolicy::charge, kNow);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.code(), Code::hold_committed);
  EXPECT_THAT(plan.error().detail, HasSubstr("hold_1"));
}

TEST(PlanCommit, ReleasedHoldIsHoldReleased) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::released), std::nullopt, LateCommitPolicy::charge, kNow);
  EXPECT_EQ(plan.code(), Code::hold_released);
}

TEST(PlanCommit, ExpiredHoldUnderChargeIsALateCharge) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::expired), 7, LateCommitPolicy::charge, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, rules::CommitAction::late_charge);
  EXPECT_EQ(plan->amount, 7);
}

TEST(PlanCommit, ExpiredHoldUnderForgiveIsForgiven) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::expired), std::nullopt, LateCommitPolicy::forgive, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->action, rules::CommitAction::late_forgive);
  EXPECT_EQ(plan->amount, 10);
}

TEST(PlanCommit, ExpiredHoldUnderRejectIsHoldExpired) {
  const auto plan = rules::plan_commit(hold_in(HoldStatus::expired), std::nullopt, LateCommitPolicy::reject, kNow);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.code(), Code::hold_expired);
}

TEST(PlanCommit, LateChargedHoldReplaysTheSameAmountUnderEveryPolicy) {
  for (LateCommitPolicy p : {LateCommitPolicy::charge, LateCommitPolicy::forgive, LateCommitPolicy::reject}) {
    const auto plan = rules::plan_commit(hold_in(HoldStatus::expired, LateOutcome::charged, 10, 6), 6, p, kNow);
    ASSERT_TRUE(plan.ok()) << late_commit_policy_name(p);
    EXPECT_EQ(plan->action, rules::CommitAction::replay);
    const auto other = rules::plan_commit(hold_in(HoldStatus::expired, LateOutcome::charged, 10, 6), 7, p, kNow);
    EXPECT_EQ(other.code(), Code::hold_committed);
  }
}

TEST(PlanCommit, ForgivenHoldReplaysWhateverIsAskedAgain) {
  for (std::optional<std::int64_t> amount : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{1},
                                             std::optional<std::int64_t>{10}}) {
    const auto plan = rules::plan_commit(hold_in(HoldStatus::expired, LateOutcome::forgiven), amount,
                                         LateCommitPolicy::reject, kNow);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->action, rules::CommitAction::replay);
    EXPECT_EQ(plan->amount, 0);
  }
}

TEST(PlanCommitDeathTest, PlanningACommitOfAnOverdueActiveHoldIsABug) {
  // The store must expire an overdue hold before planning; passing one in is a programming error.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)rules::plan_commit(hold_in(HoldStatus::active), std::nullopt, LateCommitPolicy::charge, 1000),
               "assertion failed");
}

// ---------------------------------------------------------------------------------------------
// plan_release: every status × late outcome

TEST(PlanRelease, EveryStatusAndLateOutcome) {
  struct Case {
    HoldStatus status;
    LateOutcome late;
    Code code;
    rules::ReleaseAction action;
  };
  const Case cases[] = {
      {HoldStatus::active, LateOutcome::none, Code::ok, rules::ReleaseAction::release},
      {HoldStatus::released, LateOutcome::none, Code::ok, rules::ReleaseAction::replay},
      {HoldStatus::committed, LateOutcome::none, Code::hold_committed, {}},
      {HoldStatus::expired, LateOutcome::none, Code::ok, rules::ReleaseAction::replay},
      {HoldStatus::expired, LateOutcome::forgiven, Code::ok, rules::ReleaseAction::replay},
      {HoldStatus::expired, LateOutcome::charged, Code::hold_committed, {}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(hold_status_name(c.status)) + "/" + std::string(late_outcome_name(c.late)));
    const auto plan = rules::plan_release(hold_in(c.status, c.late), kNow);
    ASSERT_EQ(plan.code(), c.code);
    if (plan.ok()) {
      EXPECT_EQ(*plan, c.action);
    }
  }
}

TEST(PlanRelease, CommittedHoldIsHoldCommittedNamingTheHold) {
  const auto plan = rules::plan_release(hold_in(HoldStatus::committed, LateOutcome::none, 10, 10), kNow);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.code(), Code::hold_committed);
  EXPECT_THAT(plan.error().detail, HasSubstr("hold_1"));
}

TEST(PlanReleaseDeathTest, PlanningAReleaseOfAnOverdueActiveHoldIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)rules::plan_release(hold_in(HoldStatus::active), 1000), "assertion failed");
}

// ---------------------------------------------------------------------------------------------
// plan_extend: every status × late outcome, and the deadline

TEST(PlanExtend, EveryStatusAndLateOutcome) {
  struct Case {
    HoldStatus status;
    LateOutcome late;
    Code code;
  };
  const Case cases[] = {
      {HoldStatus::active, LateOutcome::none, Code::ok},
      {HoldStatus::committed, LateOutcome::none, Code::hold_committed},
      {HoldStatus::released, LateOutcome::none, Code::hold_released},
      {HoldStatus::expired, LateOutcome::none, Code::hold_expired},
      {HoldStatus::expired, LateOutcome::charged, Code::hold_expired},
      {HoldStatus::expired, LateOutcome::forgiven, Code::hold_expired},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(hold_status_name(c.status)) + "/" + std::string(late_outcome_name(c.late)));
    EXPECT_EQ(rules::plan_extend(hold_in(c.status, c.late), kNow).code(), c.code);
  }
}

TEST(PlanExtend, ActiveHoldOneMillisecondBeforeItsDeadlineMayBeExtended) {
  EXPECT_TRUE(rules::plan_extend(hold_in(HoldStatus::active), 999).ok());
}

TEST(PlanExtend, ActiveHoldAtItsDeadlineIsHoldExpired) {
  const Status s = rules::plan_extend(hold_in(HoldStatus::active), 1000);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::hold_expired);
  EXPECT_THAT(s.error().detail, HasSubstr("hold_1"));
}

TEST(PlanExtend, ActiveHoldPastItsDeadlineIsHoldExpired) {
  EXPECT_EQ(rules::plan_extend(hold_in(HoldStatus::active), 1'000'000).code(), Code::hold_expired);
}

// ---------------------------------------------------------------------------------------------
// names of the model's enums (used by the stores and the HTTP layer)

TEST(ModelNames, HoldStatusesRoundTrip) {
  for (HoldStatus s : {HoldStatus::active, HoldStatus::committed, HoldStatus::released, HoldStatus::expired}) {
    EXPECT_EQ(parse_hold_status(hold_status_name(s)), s);
  }
  EXPECT_EQ(hold_status_name(HoldStatus::expired), "expired");
  EXPECT_EQ(parse_hold_status("Active"), std::nullopt);
  EXPECT_EQ(parse_hold_status(""), std::nullopt);
}

TEST(ModelNames, LateOutcomesRoundTripAndNoneIsEmpty) {
  EXPECT_EQ(late_outcome_name(LateOutcome::none), "");
  EXPECT_EQ(parse_late_outcome(""), LateOutcome::none);
  EXPECT_EQ(parse_late_outcome("charged"), LateOutcome::charged);
  EXPECT_EQ(parse_late_outcome("forgiven"), LateOutcome::forgiven);
  EXPECT_EQ(parse_late_outcome("none"), std::nullopt);
}

TEST(ModelNames, LateCommitPoliciesRoundTrip) {
  for (LateCommitPolicy p : {LateCommitPolicy::charge, LateCommitPolicy::forgive, LateCommitPolicy::reject}) {
    EXPECT_EQ(parse_late_commit_policy(late_commit_policy_name(p)), p);
  }
  EXPECT_EQ(parse_late_commit_policy("refuse"), std::nullopt);
}

// --- balance notices (docs/api.md "Balance notices") ---------------------------------------------

std::vector<EventType> notices(std::int64_t before, std::int64_t after, std::optional<std::int64_t> n) {
  const auto found = rules::balance_notices(before, after, n);
  return std::vector<EventType>(found.list().begin(), found.list().end());
}

TEST(BalanceNotices, EachCrossingAsTheDocsStateIt) {
  using T = EventType;
  EXPECT_EQ(notices(10, 0, 5), (std::vector<T>{T::balance_low, T::balance_depleted}));  // both, low first
  EXPECT_EQ(notices(-3, 7, 5), (std::vector<T>{T::balance_recovered}));  // out of the overdraft: recovered only
  EXPECT_EQ(notices(5, 4, 5), (std::vector<T>{T::balance_low}));          // from exactly N
  EXPECT_EQ(notices(4, 5, 5), (std::vector<T>{T::balance_recovered}));    // to exactly N
  EXPECT_EQ(notices(3, 0, 5), (std::vector<T>{T::balance_depleted}));     // already under N
  EXPECT_EQ(notices(1, -4, 5), (std::vector<T>{T::balance_depleted}));    // into the overdraft
  EXPECT_EQ(notices(1, 0, 1), (std::vector<T>{T::balance_low, T::balance_depleted}));
  EXPECT_EQ(notices(0, 1, 1), (std::vector<T>{T::balance_recovered}));
  EXPECT_EQ(notices(0, -1, 5), std::vector<T>{});  // not above 0 before: no second depletion
  EXPECT_EQ(notices(6, 5, 5), std::vector<T>{});
  EXPECT_EQ(notices(4, 1, 5), std::vector<T>{});
  EXPECT_EQ(notices(limits::kBalanceMax, -limits::kBalanceMax, limits::kLowBalanceThresholdMax),
            (std::vector<T>{T::balance_low, T::balance_depleted}));
}

TEST(BalanceNotices, NoThresholdNoNoticesAndNoCrossingNoNotice) {
  for (std::int64_t before = -8; before <= 16; ++before) {
    for (std::int64_t after = -8; after <= 16; ++after) {
      EXPECT_TRUE(notices(before, after, std::nullopt).empty()) << before << " → " << after;
      for (std::int64_t n = 1; n <= 12; ++n) {
        const auto found = notices(before, after, n);
        const bool side_changed = (before < n) != (after < n);
        const bool emptied = before > 0 && after <= 0;
        EXPECT_EQ(found.empty(), !side_changed && !emptied) << before << " → " << after << " N=" << n;
        if (before == after) {
          EXPECT_TRUE(found.empty());
        }
        // Low and recovered never together; depleted only ever after low; a rise never depletes.
        const auto has = [&](EventType t) { return std::count(found.begin(), found.end(), t); };
        EXPECT_LE(has(EventType::balance_low) + has(EventType::balance_recovered), 1);
        if (found.size() == 2) {
          EXPECT_EQ(found[0], EventType::balance_low);
        }
        if (after > before) {
          EXPECT_EQ(has(EventType::balance_depleted) + has(EventType::balance_low), 0);
        }
        if (after < before) {
          EXPECT_EQ(has(EventType::balance_recovered), 0);
        }
      }
    }
  }
}

TEST(ModelNames, EventTypesRoundTrip) {
  const std::vector<std::pair<EventType, std::string_view>> all = {
      {EventType::credited, "credited"},   {EventType::debited, "debited"},
      {EventType::reserved, "reserved"},   {EventType::committed, "committed"},
      {EventType::released, "released"},   {EventType::expired, "expired"},
      {EventType::late_charged, "late_charged"}, {EventType::late_forgiven, "late_forgiven"},
      {EventType::account_updated, "account_updated"}, {EventType::extended, "extended"},
      {EventType::balance_low, "balance_low"}, {EventType::balance_depleted, "balance_depleted"},
      {EventType::balance_recovered, "balance_recovered"},
  };
  for (const auto& [type, name] : all) {
    EXPECT_EQ(event_type_name(type), name);
    EXPECT_EQ(parse_event_type(name), type);
  }
  EXPECT_EQ(parse_event_type("extend"), std::nullopt);
}

}  // namespace
}  // namespace tollgate
