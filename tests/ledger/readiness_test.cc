// Readiness (Ledger::readiness, served at GET /readyz): ready only while the database answers and
// the reaper ran within its allowance (limits::kReaperIntervalsStaleMax intervals plus
// limits::kReaperStaleSlackMs), on the ledger's clock.
#include <gtest/gtest.h>

#include <memory>

#include "core/clock.h"
#include "core/limits.h"
#include "ledger/ledger.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

class LedgerReadiness : public ::testing::TestWithParam<testing::StoreBackend> {};

TEST_P(LedgerReadiness, ReadyOnlyOnceTheReaperRanAndUntilItsLastRunIsOlderThanItsAllowance) {
  ManualClock clock;
  auto store = GetParam().open_fresh(clock);
  ASSERT_NE(store, nullptr);
  LedgerOptions options;
  options.reaper_interval_ms = 0;  // no reaper thread: the test runs it
  Ledger ledger(*store, clock, options);
  // The allowance is computed from the ledger's own options (a reaper that is off is stale at once
  // but for the slack).
  const std::int64_t allowance_ms = limits::kReaperStaleSlackMs;

  Readiness before = ledger.readiness();
  EXPECT_FALSE(before.ready);
  EXPECT_EQ(before.database, "ok");
  EXPECT_EQ(before.reaper, "has not run yet");

  ASSERT_TRUE(ledger.reap_once().ok());
  Readiness fresh = ledger.readiness();
  EXPECT_TRUE(fresh.ready);
  EXPECT_EQ(fresh.reaper, "ok");

  clock.advance_ms(allowance_ms);
  EXPECT_TRUE(ledger.readiness().ready) << "at the allowance still ready";
  clock.advance_ms(1);
  Readiness stale = ledger.readiness();
  EXPECT_FALSE(stale.ready);
  EXPECT_EQ(stale.database, "ok");
  EXPECT_EQ(stale.reaper, "last ran " + std::to_string(allowance_ms + 1) + " ms ago");
}

INSTANTIATE_TEST_SUITE_P(Backends, LedgerReadiness, ::testing::ValuesIn(testing::all_backends()), testing::BackendName());

}  // namespace
}  // namespace tollgate
