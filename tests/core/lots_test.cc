// Credit lots as pure functions (core/lots.h): the spending order, draws, what comes back where,
// the debt a credit pays first, the audit's per-lot checks, the stored form of a hold's draws.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/lots.h"

namespace tollgate {
namespace {

constexpr std::int64_t kNow = 1'000'000;

Lot lot(std::int64_t seq, std::int64_t available, std::int64_t priority = 50,
        std::optional<std::int64_t> expires_at_ms = std::nullopt) {
  Lot l;
  l.seq = seq;
  l.account_id = "alice";
  l.terms = LotTerms{expires_at_ms, priority, LotCategory::paid};
  l.amount = available;
  l.available = available;
  return l;
}

std::vector<Lot*> ptrs(std::vector<Lot>& lots) {
  std::vector<Lot*> out;
  for (Lot& l : lots) out.push_back(&l);
  return out;
}

TEST(LotOrder, LowerPriorityThenSoonerExpiryThenOlderLotsWithoutExpiryLast) {
  const Lot promo = lot(9, 1, 10);
  const Lot soon = lot(8, 1, 50, kNow + 10);
  const Lot later = lot(2, 1, 50, kNow + 20);
  const Lot never_old = lot(3, 1, 50);
  const Lot never_new = lot(4, 1, 50);
  EXPECT_TRUE(lots::spends_before(promo, soon));
  EXPECT_TRUE(lots::spends_before(soon, later));
  EXPECT_TRUE(lots::spends_before(later, never_old));
  EXPECT_TRUE(lots::spends_before(never_old, never_new));
  EXPECT_FALSE(lots::spends_before(never_new, never_old));
}

TEST(LotDraws, TakeInSpendingOrderSkipOverdueAndEmptyLotsAndLeaveTheRestToTheBase) {
  std::vector<Lot> lots{lot(1, 5), lot(2, 3, 10), lot(3, 4, 50, kNow - 1), lot(4, 0, 0)};
  const auto draws = lots::draw(ptrs(lots), 10, lots::DrawUse::reserve, kNow);
  ASSERT_EQ(draws.size(), 2u);
  EXPECT_EQ(draws[0], (LotDraw{2, 3}));  // priority 10 first
  EXPECT_EQ(draws[1], (LotDraw{1, 5}));  // the overdue lot 3 gives nothing; 2 left for the base
  EXPECT_EQ(lots[0].reserved, 5);
  EXPECT_EQ(lots[1].reserved, 3);
  EXPECT_EQ(lots[2].available, 4);
  for (const Lot& l : lots) EXPECT_EQ(lots::check_lot(l), std::nullopt);
}

TEST(LotDraws, ADebitShrinksTheLotsItTakesFrom) {
  std::vector<Lot> lots{lot(1, 5)};
  lots::draw(ptrs(lots), 2, lots::DrawUse::remove, kNow);
  EXPECT_EQ(lots[0].amount, 3);
  EXPECT_EQ(lots[0].available, 3);
}

TEST(LotDraws, APaymentsRefundTakesFromItsOwnLotFirst) {
  std::vector<Lot> lots{lot(1, 5, 0), lot(2, 5)};
  const auto draws = lots::draw_first_from(ptrs(lots), 2, 7, lots::DrawUse::remove, kNow);
  ASSERT_EQ(draws.size(), 2u);
  EXPECT_EQ(draws[0], (LotDraw{2, 5}));
  EXPECT_EQ(draws[1], (LotDraw{1, 2}));
}

TEST(LotEndHold, ACommitChargesTheDrawsInOrderAndGivesTheRestBackToAvailableOrToAnExpiredLot) {
  std::vector<Lot> lots{lot(1, 4, 10, kNow + 100), lot(2, 4)};
  const auto draws = lots::draw(ptrs(lots), 6, lots::DrawUse::reserve, kNow);  // 4 from lot 1, 2 from lot 2
  // Lot 1 expires; the hold of 6 + 2 from the base commits 5: lot 1 charged 4, lot 2 charged 1.
  const auto given = lots::end_hold(ptrs(lots), draws, 8, 5, kNow + 100);
  EXPECT_EQ(lots[0].used, 4);
  EXPECT_EQ(lots[1].used, 1);
  EXPECT_EQ(lots[1].available, 3);  // 1 back from the hold
  EXPECT_EQ(given.to_available, 3);  // 1 to lot 2, 2 to the base
  EXPECT_EQ(given.to_expired, 0);
}

TEST(LotEndHold, AReleaseAfterItsLotExpiredGoesToExpiredNeverBackToAvailable) {
  std::vector<Lot> lots{lot(1, 4, 50, kNow + 100)};
  const auto draws = lots::draw(ptrs(lots), 3, lots::DrawUse::reserve, kNow);
  const auto given = lots::end_hold(ptrs(lots), draws, 3, 0, kNow + 100);
  EXPECT_EQ(given.to_expired, 3);
  EXPECT_EQ(given.to_available, 0);
  EXPECT_EQ(lots[0].expired, 3);
  EXPECT_EQ(lots[0].available, 1);  // not yet expired by the reaper (expire() moves it)
  EXPECT_EQ(lots::expire(lots[0]), 1);
  EXPECT_EQ(lots::check_lot(lots[0]), std::nullopt);
}

TEST(LotRefund, GivesBackLastChargedFirstTheBaseThenTheLotsInReverseIntoExpiredWhenTheLotExpired) {
  std::vector<Lot> lots{lot(1, 3, 10, kNow + 100), lot(2, 3)};
  const auto draws = lots::draw(ptrs(lots), 6, lots::DrawUse::reserve, kNow);
  lots::end_hold(ptrs(lots), draws, 8, 8, kNow);  // 3 + 3 from the lots, 2 from the base: all charged
  auto given = lots::refund(ptrs(lots), draws, 8, 0, 3, kNow + 100);
  EXPECT_EQ(given.to_available, 3);  // 2 to the base, 1 to lot 2
  EXPECT_EQ(lots[1].used, 2);
  given = lots::refund(ptrs(lots), draws, 8, 3, 5, kNow + 100);
  EXPECT_EQ(given.to_available, 2);  // the rest of lot 2
  EXPECT_EQ(given.to_expired, 3);    // lot 1 has expired
  EXPECT_EQ(lots[0].expired, 3);
  for (const Lot& l : lots) EXPECT_EQ(lots::check_lot(l), std::nullopt);
}

TEST(LotCredit, PaysTheBasesDebtFirstAndOnlyTheRestMakesALot) {
  EXPECT_EQ(lots::credit_split(10, -4).pays_debt, 4);
  EXPECT_EQ(lots::credit_split(10, -4).to_lot, 6);
  EXPECT_EQ(lots::credit_split(3, -4).to_lot, 0);
  EXPECT_EQ(lots::credit_split(3, 2).pays_debt, 0);
  std::vector<Lot> lots{lot(1, 5)};
  EXPECT_EQ(lots::base_available(Balances{1, 0, 0, 1, 0}, ptrs(lots)), -4);
}

TEST(LotView, AnOverdueLotReadsAsExpiredWithItsAvailableCreditsExpired) {
  const auto v = lots::lot_view(lot(1, 5, 50, kNow), kNow);
  EXPECT_EQ(v.status, lots::LotStatus::expired);
  EXPECT_EQ(v.lot.available, 0);
  EXPECT_EQ(v.lot.expired, 5);
  EXPECT_EQ(lots::lot_view(lot(2, 0), kNow).status, lots::LotStatus::spent);
  EXPECT_EQ(lots::lot_view(lot(3, 1), kNow).status, lots::LotStatus::active);
}

TEST(LotAudit, FindsALotThatDoesNotAddUpAndAnAccountThatHoldsLessThanItsLots) {
  Lot bad = lot(1, 5);
  bad.used = 1;
  EXPECT_NE(lots::check_lot(bad), std::nullopt);
  Account a;
  a.account_id = "alice";
  a.balances = Balances{5, 0, 0, 5, 0};
  Lot held = lot(2, 5);
  held.available = 3;
  held.reserved = 2;
  const std::vector<Lot> own{held};
  EXPECT_NE(lots::check_account_lots(a, own), std::nullopt);  // the account reserves nothing
  Lot expired = lot(3, 5);
  expired.available = 0;
  expired.expired = 5;
  a.balances = Balances{0, 0, 0, 5, 0};
  EXPECT_NE(lots::check_account_lots(a, std::vector<Lot>{expired}), std::nullopt);  // its expired is 0
  a.balances.expired = 5;
  EXPECT_EQ(lots::check_account_lots(a, std::vector<Lot>{expired}), std::nullopt);
}

TEST(LotDrawsText, RoundTripsAndRefusesAnythingElse) {
  const std::vector<LotDraw> draws{{12, 3}, {7, 40}};
  EXPECT_EQ(lots::draws_text(draws), "12:3,7:40");
  EXPECT_EQ(lots::parse_draws("12:3,7:40"), draws);
  EXPECT_EQ(lots::parse_draws(""), std::vector<LotDraw>{});
  for (const char* bad : {"12", "12:", ":3", "12:0", "a:3", "12:3,", "12:3,,7:1", "-1:3", "12:3x"}) {
    EXPECT_EQ(lots::parse_draws(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(parse_lot_id("lot_12"), 12);
  for (const char* bad : {"lot_", "lot_0", "lot_012", "lot_1x", "hold_1", "lot_1234567890123456789"}) {
    EXPECT_EQ(parse_lot_id(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace tollgate
