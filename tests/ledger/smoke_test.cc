#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "support/backends.h"

namespace tollgate {
namespace {

TEST(LedgerSmoke, ReserveThenCommitMovesCreditsToUsed) {
  ManualClock clock;
  auto store = testing::all_backends().front().open_fresh(clock);
  LedgerOptions options;
  options.reaper_interval_ms = 0;
  Ledger ledger(*store, clock, options);
  ASSERT_TRUE(ledger.create_account({"alice", 0, std::nullopt}).ok());
  ASSERT_TRUE(ledger.credit({"alice", 10, "ref-1"}).ok());
  auto hold = ledger.reserve({"alice", 3, "req-1", std::nullopt, "", ""});
  ASSERT_TRUE(hold.ok()) << hold.error().detail;
  auto committed = ledger.commit({hold->hold.hold_id, 2});
  ASSERT_TRUE(committed.ok()) << committed.error().detail;
  auto account = ledger.get_account("alice");
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account->balances, (Balances{8, 0, 2, 10}));
  auto audit = ledger.audit(std::nullopt);
  ASSERT_TRUE(audit.ok());
  EXPECT_TRUE(audit->violations.empty());
}

}  // namespace
}  // namespace tollgate
