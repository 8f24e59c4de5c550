// The ledger counts what it decides where it decides it (for /metrics): holds ended by outcome,
// reservation conflicts and audit violations — whoever submitted the command, HTTP or not. And a
// full audit runs in parts (audit_range) that add up to the whole.
#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "support/backends.h"

namespace tollgate {
namespace {

class LedgerCounters : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  LedgerCounters() : store_(GetParam().open_fresh(clock_)), ledger_(*store_, clock_, options()) {}
  static LedgerOptions options() {
    LedgerOptions o;
    o.reaper_interval_ms = 0;
    return o;
  }
  std::string reserve(const std::string& account, std::int64_t amount, const std::string& request_id,
                      std::int64_t ttl_ms = 60'000) {
    auto hold = ledger_.reserve({account, amount, request_id, ttl_ms, "", ""});
    EXPECT_TRUE(hold.ok()) << hold.error().detail;
    return hold.ok() ? hold->hold.hold_id : "";
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  Ledger ledger_;
};

TEST_P(LedgerCounters, HoldsEndedAreCountedOnceByOutcomeAndReplaysAreNot) {
  ASSERT_TRUE(ledger_.create_account({"alice", 0, std::nullopt}).ok());
  ASSERT_TRUE(ledger_.credit({"alice", 100, "c-1"}).ok());
  const std::string committed = reserve("alice", 10, "r-1");
  const std::string released = reserve("alice", 10, "r-2");
  const std::string extended = reserve("alice", 10, "r-3");
  ASSERT_TRUE(ledger_.commit({committed, std::nullopt}).ok());
  ASSERT_TRUE(ledger_.commit({committed, std::nullopt}).ok());  // a replay: changes nothing
  ASSERT_TRUE(ledger_.release({released}).ok());
  ASSERT_TRUE(ledger_.release({released}).ok());  // a replay
  ASSERT_TRUE(ledger_.extend({extended, 120'000}).ok());
  const OutcomeCounts counts = ledger_.outcomes();
  EXPECT_EQ(counts.holds_committed, 1u);
  EXPECT_EQ(counts.holds_released, 1u);
  EXPECT_EQ(counts.holds_late_charged, 0u);
  EXPECT_EQ(counts.holds_late_forgiven, 0u);
  EXPECT_EQ(counts.reservation_conflicts, 0u);
}

TEST_P(LedgerCounters, ALateCommitIsCountedAsCommittedAndLateCharged) {
  ASSERT_TRUE(ledger_.create_account({"bob", 0, std::nullopt}).ok());
  ASSERT_TRUE(ledger_.credit({"bob", 100, "c-1"}).ok());
  const std::string hold = reserve("bob", 10, "r-1", 1'000);
  clock_.advance_ms(2'000);  // overdue: it reads expired
  auto late = ledger_.commit({hold, std::nullopt});
  ASSERT_TRUE(late.ok()) << late.error().detail;
  EXPECT_EQ(late->hold.late_outcome, LateOutcome::charged);
  EXPECT_EQ(ledger_.outcomes().holds_late_charged, 1u);
}

TEST_P(LedgerCounters, InsufficientCreditsIsCountedAsAReservationConflict) {
  ASSERT_TRUE(ledger_.create_account({"carol", 0, std::nullopt}).ok());
  ASSERT_TRUE(ledger_.credit({"carol", 5, "c-1"}).ok());
  auto refused = ledger_.reserve({"carol", 6, "r-1", 60'000, "", ""});
  ASSERT_EQ(refused.code(), Code::insufficient_credits);
  auto debit = ledger_.debit({"carol", 6, "d-1", "refund"});
  ASSERT_EQ(debit.code(), Code::insufficient_credits);
  auto invalid = ledger_.reserve({"carol", 0, "r-2", 60'000, "", ""});  // refused before the store
  ASSERT_EQ(invalid.code(), Code::invalid_request);
  EXPECT_EQ(ledger_.outcomes().reservation_conflicts, 2u);
  EXPECT_EQ(ledger_.outcomes().reservation_conflicts_held, 0u);  // carol never had 6: out of credits
}

// Two kiosks, one account: the second hold is refused while the first holds the credits. The
// account is not out of credits — they are reserved — and that is counted apart (the alert on
// "insufficient credits without low balances" reads it).
TEST_P(LedgerCounters, ARefusalWhileOtherHoldsHaveTheCreditsIsCountedAsHeld) {
  ASSERT_TRUE(ledger_.create_account({"dave", 0, std::nullopt}).ok());
  ASSERT_TRUE(ledger_.credit({"dave", 5, "c-1"}).ok());
  ASSERT_TRUE(ledger_.reserve({"dave", 4, "kiosk-1", 60'000, "", ""}).ok());
  auto second = ledger_.reserve({"dave", 3, "kiosk-2", 60'000, "", ""});  // 1 available, 4 held
  ASSERT_EQ(second.code(), Code::insufficient_credits);
  EXPECT_EQ(second.error().reserved, 4);
  auto too_much = ledger_.reserve({"dave", 6, "kiosk-3", 60'000, "", ""});  // more than all it has
  ASSERT_EQ(too_much.code(), Code::insufficient_credits);
  EXPECT_EQ(ledger_.outcomes().reservation_conflicts, 2u);
  EXPECT_EQ(ledger_.outcomes().reservation_conflicts_held, 1u);
}

TEST_P(LedgerCounters, AFullAuditInPartsChecksEveryAccountOnceInIdOrder) {
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(ledger_.create_account({"acct-" + std::to_string(i), 0, std::nullopt}).ok());
  std::string after;
  std::int64_t checked = 0;
  int parts = 0;
  for (;;) {
    auto page = ledger_.audit_range(after, 3);
    ASSERT_TRUE(page.ok()) << page.error().detail;
    ++parts;
    checked += page->report.accounts_checked;
    EXPECT_TRUE(page->report.violations.empty());
    if (page->report.accounts_checked > 0) {
      EXPECT_GT(page->last_account_id, after);
    }
    after = page->last_account_id;
    if (!page->has_more) break;
  }
  EXPECT_EQ(checked, 7);
  EXPECT_EQ(parts, 3);  // 3 + 3 + 1
  EXPECT_EQ(after, "acct-6");
  EXPECT_EQ(ledger_.audit_range("", 0).code(), Code::invalid_request);
  EXPECT_EQ(ledger_.audit_violations(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, LedgerCounters, ::testing::ValuesIn(testing::all_backends()), testing::BackendName{});

}  // namespace
}  // namespace tollgate
