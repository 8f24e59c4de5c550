// Refunds of a charge on every backend (api.md "Refunds of a charge"; refunds/refund_batch.h): the
// rules through the real batch path of a real store — what comes back and where, the idempotency of
// a request_id, the refusals that change nothing — and concurrent refunds from real threads, one
// hold's and one request_id's, never giving back more than was charged. After every test, the audit
// of every account (which folds `refunded` events) must be clean.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "ledger/ledger.h"
#include "slices.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using ::testing::IsEmpty;

constexpr std::int64_t kTtl = 60'000;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c)) << ((r).ok() ? "ok" : (r).error().detail)

class RefundStore : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  }
  void TearDown() override {
    if (!store_) return;
    auto report = store_->audit(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.error().detail;
    std::vector<std::string> found;
    for (const auto& v : report->violations) found.push_back(v.account_id + ": " + v.message);
    EXPECT_THAT(found, IsEmpty());
  }

  // An account with `credits`, and a hold of `amount` on it committed with `committed` (0: left active).
  Hold charged(const std::string& account, std::int64_t credits, std::int64_t amount, std::int64_t committed) {
    EXPECT_TRUE(ledger_->create_account({account, 0, std::nullopt}).ok());
    EXPECT_TRUE(ledger_->credit({account, credits, account + "-buy"}).ok());
    auto h = ledger_->reserve({account, amount, account + "-req", kTtl, "", ""});
    EXPECT_TRUE(h.ok()) << h.error().detail;
    if (!h.ok()) return Hold{};
    if (committed == 0) return h->hold;
    auto c = ledger_->commit({h->hold.hold_id, committed, LateCommitPolicy::charge});
    EXPECT_TRUE(c.ok()) << c.error().detail;
    return c.ok() ? c->hold : Hold{};
  }
  Result<RefundOutcome> refund(const std::string& hold_id, std::optional<std::int64_t> amount, const std::string& request_id,
                               std::optional<std::string> owner = std::nullopt) {
    CommandResult r = ledger_->run(RefundCommand{hold_id, std::move(owner), amount, "jammed", request_id});
    if (!r) return r.error();
    return std::get<RefundOutcome>(r.value());
  }
  Balances balances(const std::string& account) { return ledger_->get_account(account)->balances; }
  Event last_event(const std::string& account) {
    auto page = ledger_->read_events(account, 0, 1000);
    EXPECT_TRUE(page.ok() && !page->events.empty());
    return page->events.back();
  }

  ManualClock clock_{1'800'000'000'000};
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

TEST_P(RefundStore, ARefundMovesUsedBackToAvailableAndWritesARefundedEvent) {
  const Hold h = charged("alice", 100, 30, 20);
  auto r = refund(h.hold_id, 5, "rf-1");
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->hold.refunded_amount, 5);
  EXPECT_EQ(r->hold.committed_amount, 20);
  EXPECT_EQ(r->hold.status, HoldStatus::committed);
  EXPECT_EQ(r->refund.amount, 5);
  EXPECT_EQ(r->refund.requested_amount, 5);
  EXPECT_EQ(r->refund.account_id, "alice");
  const Balances b = balances("alice");
  EXPECT_EQ(b.available, 85);
  EXPECT_EQ(b.reserved, 0);
  EXPECT_EQ(b.used, 15);
  EXPECT_EQ(b.purchased, 100);
  const Event e = last_event("alice");
  EXPECT_EQ(e.type, EventType::refunded);
  EXPECT_EQ(e.amount, 5);
  EXPECT_EQ(e.hold_id, h.hold_id);
  EXPECT_EQ(e.reason, "jammed");
  EXPECT_EQ(e.reference, "rf-1");
  EXPECT_EQ(e.available_after, 85);
  EXPECT_EQ(e.used_after, 15);
  EXPECT_EQ(ledger_->get_hold(h.hold_id)->refunded_amount, 5);
}

TEST_P(RefundStore, WithoutAnAmountEverythingLeftComesBackThenNothingIsLeft) {
  const Hold h = charged("alice", 100, 30, 20);
  ASSERT_OK(refund(h.hold_id, 5, "rf-1"));
  auto rest = refund(h.hold_id, std::nullopt, "rf-2");
  ASSERT_OK(rest);
  EXPECT_EQ(rest->refund.amount, 15);
  EXPECT_EQ(rest->refund.requested_amount, std::nullopt);
  EXPECT_EQ(rest->hold.refunded_amount, 20);
  EXPECT_EQ(balances("alice").used, 0);
  EXPECT_EQ(balances("alice").available, 100);
  EXPECT_CODE(refund(h.hold_id, std::nullopt, "rf-3"), Code::refund_exceeds_charge);
  EXPECT_CODE(refund(h.hold_id, 1, "rf-4"), Code::refund_exceeds_charge);
  EXPECT_EQ(balances("alice").available, 100);
}

TEST_P(RefundStore, MoreThanChargedAndNotRefundedYetIsRefusedAndChangesNothing) {
  const Hold h = charged("alice", 100, 30, 20);
  ASSERT_OK(refund(h.hold_id, 12, "rf-1"));
  const Balances before = balances("alice");
  auto over = refund(h.hold_id, 9, "rf-2");
  EXPECT_CODE(over, Code::refund_exceeds_charge);
  EXPECT_THAT(over.error().detail, ::testing::HasSubstr("at most 8 can be refunded, not 9"));
  EXPECT_EQ(balances("alice"), before);
  // The refused request_id was not used: it refunds what is left.
  auto ok = refund(h.hold_id, 8, "rf-2");
  ASSERT_OK(ok);
  EXPECT_EQ(ok->hold.refunded_amount, 20);
}

TEST_P(RefundStore, TheSameRequestIdAgainMovesNothingAndWithAnotherHoldOrAmountIsAMismatch) {
  const Hold h = charged("alice", 100, 30, 20);
  const Hold other = charged("bob", 100, 30, 20);
  ASSERT_OK(refund(h.hold_id, 4, "rf-1"));
  const Balances after_first = balances("alice");
  auto again = refund(h.hold_id, 4, "rf-1");
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->refund.amount, 4);
  EXPECT_EQ(again->hold.refunded_amount, 4);
  EXPECT_EQ(balances("alice"), after_first);
  EXPECT_CODE(refund(h.hold_id, 5, "rf-1"), Code::idempotency_mismatch);
  EXPECT_CODE(refund(h.hold_id, std::nullopt, "rf-1"), Code::idempotency_mismatch);
  EXPECT_CODE(refund(other.hold_id, 4, "rf-1"), Code::idempotency_mismatch);
  EXPECT_EQ(balances("alice"), after_first);
  EXPECT_EQ(balances("bob").used, 20);
  // "Everything left" is replayed as asked, whatever is left now.
  ASSERT_OK(refund(h.hold_id, std::nullopt, "rf-2"));
  auto all_again = refund(h.hold_id, std::nullopt, "rf-2");
  ASSERT_OK(all_again);
  EXPECT_FALSE(all_again->created);
  EXPECT_EQ(all_again->refund.amount, 16);
}

TEST_P(RefundStore, OnlyAChargedHoldRefunds) {
  const Hold active = charged("alice", 100, 10, 0);
  EXPECT_CODE(refund(active.hold_id, 1, "rf-1"), Code::conflict);
  auto released = ledger_->reserve({"alice", 5, "req-2", kTtl, "", ""});
  ASSERT_OK(released);
  ASSERT_OK(ledger_->release({released->hold.hold_id, std::nullopt}));
  EXPECT_CODE(refund(released->hold.hold_id, std::nullopt, "rf-2"), Code::conflict);
  EXPECT_CODE(refund("hold_999999_0123456789abcdef", 1, "rf-3"), Code::not_found);
  // An expired hold: nothing charged. Late-charged: refundable; late-forgiven: nothing charged.
  auto expired = ledger_->reserve({"alice", 3, "req-3", 1'000, "", ""});
  auto charged_late = ledger_->reserve({"alice", 4, "req-4", 1'000, "", ""});
  auto forgiven = ledger_->reserve({"alice", 2, "req-5", 1'000, "", ""});
  ASSERT_OK(expired);
  ASSERT_OK(charged_late);
  ASSERT_OK(forgiven);
  clock_.advance_ms(2'000);
  EXPECT_CODE(refund(expired->hold.hold_id, 1, "rf-4"), Code::conflict);
  ASSERT_OK(ledger_->commit({charged_late->hold.hold_id, std::nullopt, LateCommitPolicy::charge}));
  LedgerOptions forgiving;
  forgiving.reaper_interval_ms = 0;
  forgiving.late_commit = LateCommitPolicy::forgive;
  ledger_.reset();  // one ledger over a store at a time
  ledger_ = std::make_unique<Ledger>(*store_, clock_, forgiving);
  ASSERT_OK(ledger_->commit({forgiven->hold.hold_id, std::nullopt, LateCommitPolicy::forgive}));
  EXPECT_CODE(refund(forgiven->hold.hold_id, std::nullopt, "rf-5"), Code::conflict);
  auto late = refund(charged_late->hold.hold_id, std::nullopt, "rf-6");
  ASSERT_OK(late);
  EXPECT_EQ(late->hold.status, HoldStatus::expired);
  EXPECT_EQ(late->hold.late_outcome, LateOutcome::charged);
  EXPECT_EQ(late->refund.amount, 4);
  EXPECT_EQ(balances("alice").used, 0);
}

TEST_P(RefundStore, AFrozenAccountStillTakesItsRefund) {
  const Hold h = charged("alice", 100, 10, 10);
  UpdateAccountCommand freeze;
  freeze.account_id = "alice";
  freeze.frozen = true;
  ASSERT_OK(ledger_->update_account(freeze));
  ASSERT_OK(refund(h.hold_id, 10, "rf-1"));
  EXPECT_EQ(balances("alice").available, 100);
}

TEST_P(RefundStore, ManyRefundsOfOneHoldFromThreadsNeverGiveBackMoreThanItCharged) {
  const Hold h = charged("alice", 100, 30, 20);
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::atomic<int> made{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      auto r = refund(h.hold_id, 3, "rf-" + std::to_string(i));
      if (r.ok()) {
        made.fetch_add(1);
      } else if (r.code() == Code::refund_exceeds_charge) {
        refused.fetch_add(1);
      } else {
        other.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(made.load(), 6);  // 6 × 3 = 18 ≤ 20; a 7th would be 21
  EXPECT_EQ(refused.load(), 2);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(ledger_->get_hold(h.hold_id)->refunded_amount, 18);
  EXPECT_EQ(balances("alice").used, 2);
}

TEST_P(RefundStore, OneRequestIdSentForTwoHoldsAtOnceRefundsOnce) {
  for (int round = 0; round < 10; ++round) {
    const std::string r = std::to_string(round);
    const Hold a = charged("a" + r, 10, 5, 5);
    const Hold b = charged("b" + r, 10, 5, 5);
    std::latch start(2);
    Result<RefundOutcome> first = Error::make(Code::internal, "not run");
    Result<RefundOutcome> second = Error::make(Code::internal, "not run");
    std::thread ta([&] {
      start.arrive_and_wait();
      first = refund(a.hold_id, 5, "shared-" + r);
    });
    std::thread tb([&] {
      start.arrive_and_wait();
      second = refund(b.hold_id, 5, "shared-" + r);
    });
    ta.join();
    tb.join();
    ASSERT_NE(first.ok(), second.ok()) << "round " << round << ": one refunds, the other is refused";
    const Result<RefundOutcome>& refused = first.ok() ? second : first;
    EXPECT_CODE(refused, Code::idempotency_mismatch);
    EXPECT_EQ(balances("a" + r).used + balances("b" + r).used, 5);
  }
}

TEST_P(RefundStore, AHoldASliceOwnsIsRefundedOnlyThroughItsOwner) {
  ASSERT_OK(ledger_->create_account({"alice", 0, std::nullopt}));
  ASSERT_OK(ledger_->credit({"alice", 10, "buy"}));
  jobs::SubmitJobCommand submit;
  submit.client_request_id = "job-1";
  submit.account_id = "alice";
  submit.cost = 4;
  submit.provider = "p";
  submit.input_json = "{}";
  submit.owner = "w";
  submit.lease_ms = 1'000;
  auto job = ledger_->submit_job(submit);
  ASSERT_OK(job);
  jobs::EndJobCommand end;
  end.client_request_id = "job-1";
  end.hold_id = job->job.hold_id;
  end.end = jobs::JobStatus::completed;
  end.result_json = "{}";
  ASSERT_OK(ledger_->end_job(end));
  const std::string hold_id = job->job.hold_id;
  auto via_holds = refund(hold_id, 1, "rf-1");
  EXPECT_CODE(via_holds, Code::conflict);
  EXPECT_THAT(via_holds.error().detail, ::testing::HasSubstr("refund it through its job"));
  EXPECT_CODE(refund(hold_id, 1, "rf-2", "job:another"), Code::not_found);
  auto via_job = refund(hold_id, 1, "rf-3", "job:job-1");
  ASSERT_OK(via_job);
  EXPECT_EQ(last_event("alice").job_id, "job-1");
  EXPECT_EQ(balances("alice").used, 3);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, RefundStore, ::testing::ValuesIn(testing::all_backends()), testing::BackendName{});

}  // namespace
}  // namespace tollgate
