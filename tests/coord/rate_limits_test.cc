// The rate-limit use case (coord/rate_limits.h) on every backend: the service chooses the budget
// (a local policy in memory, answered at once; a shared one through the ledger's batches, answered
// after them), counts each check once by outcome, and refuses unknown policies by name.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <optional>
#include <string>

#include "coord/policies.h"
#include "coord/rate_limits.h"
#include "core/clock.h"
#include "ledger/ledger.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using coord::GcraDecision;
using coord::RateLimits;
using coord::RatePolicy;

class RateLimitsService : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.coord_prune_interval_ms = 0;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
    policies_ = std::make_unique<coord::RatePolicies>(std::vector<coord::RatePolicySpec>{
        {"local2", coord::GcraPolicy{2, 60'000}, false, 16}, {"shared2", coord::GcraPolicy{2, 60'000}, true, 0}});
    limits_ = std::make_unique<RateLimits>(*ledger_, clock_, policies_.get());
  }

  void TearDown() override {
    limits_.reset();
    ledger_.reset();
    store_.reset();
  }

  // One check, waited for: the answer whichever way it came.
  Result<GcraDecision> check(RatePolicy& p, const std::string& key) {
    std::promise<Result<GcraDecision>> later;
    auto now = limits_->check(p, key, 1, [&](Result<GcraDecision> d) { later.set_value(std::move(d)); });
    EXPECT_EQ(now.has_value(), !p.shared) << "local answers at once, shared after its batch";
    return now ? std::move(*now) : later.get_future().get();
  }

  Status reset(RatePolicy& p, const std::string& key) {
    std::promise<Status> later;
    auto now = limits_->reset(p, key, [&](Status s) { later.set_value(std::move(s)); });
    return now ? std::move(*now) : later.get_future().get();
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<coord::RatePolicies> policies_;
  std::unique_ptr<RateLimits> limits_;
};

TEST_P(RateLimitsService, EachPolicyAdmitsItsLimitThenRefusesWithRetryAfterAndCountsEachOutcomeOnce) {
  for (const char* name : {"local2", "shared2"}) {
    SCOPED_TRACE(name);
    auto found = limits_->find(name);
    ASSERT_TRUE(found.ok()) << found.error().detail;
    RatePolicy& p = **found;
    EXPECT_TRUE(check(p, "user-1").ok());
    auto second = check(p, "user-1");
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(second->remaining, 0);
    auto third = check(p, "user-1");
    ASSERT_FALSE(third.ok());
    EXPECT_EQ(third.code(), Code::rate_limited);
    EXPECT_GE(third.error().retry_after_ms.value_or(0), 1);
    EXPECT_NE(third.error().detail.find(name), std::string::npos) << third.error().detail;
    EXPECT_TRUE(check(p, "user-2").ok()) << "another key has its own budget";
    EXPECT_EQ(p.allowed.load(), 3u);
    EXPECT_EQ(p.limited.load(), 1u);
    ASSERT_TRUE(reset(p, "user-1").ok());
    EXPECT_TRUE(check(p, "user-1").ok()) << "a reset gives the key its full budget back";
  }
}

TEST_P(RateLimitsService, AnUnknownOrMalformedPolicyIsRefusedByName) {
  auto unknown = limits_->find("nope");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.code(), Code::not_found);
  EXPECT_NE(unknown.error().detail.find("rate-limit policy nope is not configured"), std::string::npos);
  EXPECT_EQ(limits_->find("bad name").code(), Code::invalid_request);
  RateLimits none(*ledger_, clock_, nullptr);
  EXPECT_EQ(none.find("local2").code(), Code::not_found) << "no policies configured: every name is unknown";
}

INSTANTIATE_TEST_SUITE_P(Backends, RateLimitsService, ::testing::ValuesIn(testing::all_backends()),
                         testing::BackendName());

}  // namespace
}  // namespace tollgate
