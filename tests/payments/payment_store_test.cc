// Payments on every backend (api.md "Payments"; payments/payment_batch.h): a provider's payment
// credits once however often it arrives, its refunds take back their share once each (in any order),
// a shortfall goes into debt and freezes the account until a credit repays it (or is forgiven), a
// dispute freezes — through the real batch path of a real store, and from real threads at once.
// After every test, the audit of every account must be clean.
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

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using payments::Provider;
using payments::RefundShare;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c)) << ((r).ok() ? "ok" : (r).error().detail)

class PaymentStore : public ::testing::TestWithParam<testing::StoreBackend> {
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

  void account(const std::string& id, std::int64_t overdraft = 0) {
    ASSERT_TRUE(ledger_->create_account({id, overdraft, std::nullopt}).ok());
  }
  Result<PaymentOutcome> run(Command c) {
    CommandResult r = ledger_->run(std::move(c));
    if (!r) return r.error();
    return std::get<PaymentOutcome>(r.value());
  }
  Result<PaymentOutcome> pay(const std::string& session, const std::string& account, std::int64_t credits) {
    return run(CreditPaymentCommand{"stripe:" + session, Provider::stripe, "pi_" + session, account, credits});
  }
  Result<PaymentOutcome> refund(const std::string& session, const std::string& account, std::int64_t refunded,
                                std::int64_t total, bool into_debt = true) {
    return run(TakeBackPaymentCommand{"stripe:" + session, account,
                                      "stripe:ch_" + session + ":refunded:" + std::to_string(refunded),
                                      RefundShare{refunded, total}, std::nullopt, into_debt});
  }
  // Spends `amount` of the account's credits (a committed hold).
  void spend(const std::string& account, std::int64_t amount, const std::string& request_id) {
    auto h = ledger_->reserve({account, amount, request_id, 60'000, "", ""});
    ASSERT_OK(h);
    ASSERT_OK(ledger_->commit({h->hold.hold_id, amount, LateCommitPolicy::charge}));
  }
  Account get(const std::string& id) { return *ledger_->get_account(id); }
  std::vector<Event> events(const std::string& id) { return ledger_->read_events(id, 0, 1000)->events; }

  ManualClock clock_{1'800'000'000'000};
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

TEST_P(PaymentStore, APaymentCreditsItsAccountOnceUnderItsIdHoweverOftenItArrives) {
  account("alice");
  auto first = pay("cs_1", "alice", 100);
  ASSERT_OK(first);
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->moved, 100);
  EXPECT_EQ(first->account.balances.available, 100);
  EXPECT_EQ(first->payment.payment_id, "stripe:cs_1");
  EXPECT_EQ(first->payment.provider_payment, "pi_cs_1");
  for (int i = 0; i < 3; ++i) {
    auto again = pay("cs_1", "alice", 100);
    ASSERT_OK(again);
    EXPECT_FALSE(again->created);
    EXPECT_EQ(again->moved, 0);
  }
  EXPECT_EQ(get("alice").balances.purchased, 100);
  const auto log = events("alice");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].type, EventType::credited);
  EXPECT_EQ(log[0].reference, "stripe:cs_1");
  // The credit is a transfer under the payment's id: a client can look it up.
  auto transfer = store_->lists().get_transfer("stripe:cs_1");
  ASSERT_OK(transfer);
  EXPECT_EQ(transfer->transfer.amount, 100);
  // The same payment for another account is a mismatch; with other credits (a pack changed before
  // a redelivery) a replay of what was credited then. Neither moves anything.
  account("bob");
  auto repriced = pay("cs_1", "alice", 99);
  ASSERT_OK(repriced);
  EXPECT_FALSE(repriced->created);
  EXPECT_EQ(repriced->payment.credits, 100);
  EXPECT_CODE(pay("cs_1", "bob", 100), Code::idempotency_mismatch);
  EXPECT_EQ(get("bob").balances.available, 0);
  EXPECT_EQ(get("alice").balances.available, 100);
}

TEST_P(PaymentStore, APaymentForAnAccountThatDoesNotExistIsNotFoundAndLeavesNoRow) {
  auto r = pay("cs_1", "nobody", 10);
  EXPECT_CODE(r, Code::not_found);
  EXPECT_CODE(store_->payments().get_payment("stripe:cs_1"), Code::not_found);
  // Once the account exists, the provider's retry credits it.
  account("nobody");
  ASSERT_OK(pay("cs_1", "nobody", 10));
  EXPECT_EQ(get("nobody").balances.available, 10);
}

TEST_P(PaymentStore, APaymentIsFoundByTheProvidersOwnId) {
  account("alice");
  ASSERT_OK(pay("cs_1", "alice", 10));
  auto p = store_->payments().find_payment(Provider::stripe, "pi_cs_1");
  ASSERT_OK(p);
  EXPECT_EQ(p->payment_id, "stripe:cs_1");
  EXPECT_EQ(p->account_id, "alice");
  EXPECT_EQ(p->credits, 10);
  EXPECT_CODE(store_->payments().find_payment(Provider::stripe, "pi_other"), Code::not_found);
  EXPECT_CODE(store_->payments().find_payment(Provider::webhook, "pi_cs_1"), Code::not_found);
}

TEST_P(PaymentStore, EachPartialRefundTakesBackItsShareOnceAndTheSameEventAgainNothing) {
  account("alice");
  ASSERT_OK(pay("cs_1", "alice", 100));
  // A charge of 1000 (cents): 250 refunded → 25 credits; then 600 in all → 35 more.
  auto first = refund("cs_1", "alice", 250, 1000);
  ASSERT_OK(first);
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->owed, 25);
  EXPECT_EQ(first->moved, 25);
  EXPECT_EQ(first->account.balances.available, 75);
  auto replay = refund("cs_1", "alice", 250, 1000);
  ASSERT_OK(replay);
  EXPECT_FALSE(replay->created);
  EXPECT_EQ(replay->moved, 0);
  auto second = refund("cs_1", "alice", 600, 1000);
  ASSERT_OK(second);
  EXPECT_EQ(second->owed, 35);
  EXPECT_EQ(second->moved, 35);
  const Account a = get("alice");
  EXPECT_EQ(a.balances.available, 40);
  EXPECT_EQ(a.balances.purchased, 40);
  auto p = store_->payments().get_payment("stripe:cs_1");
  ASSERT_OK(p);
  EXPECT_EQ(p->refunded_credits, 60);
  EXPECT_EQ(p->taken_back, 60);
  // Two debits, each under its event's reference, with the provider named as the reason.
  const auto log = events("alice");
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[1].type, EventType::debited);
  EXPECT_EQ(log[1].reference, "stripe:ch_cs_1:refunded:250");
  EXPECT_EQ(log[1].reason, "refunded at stripe");
  EXPECT_EQ(log[2].amount, 35);
  EXPECT_EQ(log[2].reference, "stripe:ch_cs_1:refunded:600");
}

TEST_P(PaymentStore, RefundsArrivingOutOfOrderOweTheSameSum) {
  account("alice");
  ASSERT_OK(pay("cs_1", "alice", 100));
  ASSERT_OK(refund("cs_1", "alice", 600, 1000));  // the later event first: 60
  auto older = refund("cs_1", "alice", 250, 1000);
  ASSERT_OK(older);
  EXPECT_TRUE(older->created);
  EXPECT_EQ(older->owed, 0);  // its share is already part of 600's
  EXPECT_EQ(older->moved, 0);
  ASSERT_OK(refund("cs_1", "alice", 1000, 1000));
  EXPECT_EQ(get("alice").balances.available, 0);
  EXPECT_EQ(store_->payments().get_payment("stripe:cs_1")->refunded_credits, 100);
}

TEST_P(PaymentStore, AShareIsRoundedUp) {
  account("alice");
  ASSERT_OK(pay("cs_1", "alice", 10));
  auto r = refund("cs_1", "alice", 1, 3);  // 10/3 = 3.33… → 4
  ASSERT_OK(r);
  EXPECT_EQ(r->owed, 4);
  EXPECT_EQ(payments::owed_by_share(10, 4, RefundShare{2, 3}), 3);  // 6.67 → 7, less 4
  EXPECT_EQ(payments::owed_by_share(10, 0, RefundShare{0, 3}), 0);
  EXPECT_EQ(payments::owed_by_share(limits::kAmountMax, 0, RefundShare{1, 1}), limits::kAmountMax);  // no overflow
}

TEST_P(PaymentStore, AShortfallGoesIntoDebtFreezesTheAccountAndTheCreditThatRepaysItUnfreezesIt) {
  account("alice");
  ASSERT_OK(pay("cs_1", "alice", 10));
  spend("alice", 8, "r1");  // 2 left
  auto r = refund("cs_1", "alice", 1000, 1000);
  ASSERT_OK(r);
  EXPECT_EQ(r->owed, 10);
  EXPECT_EQ(r->moved, 10);
  EXPECT_TRUE(r->froze);
  Account a = get("alice");
  EXPECT_EQ(a.balances.available, -8);
  EXPECT_EQ(a.balances.used, 8);
  EXPECT_EQ(a.balances.purchased, 0);
  EXPECT_TRUE(a.frozen);
  EXPECT_EQ(a.frozen_reason, kFrozenForRefundShortfall);
  const auto log = events("alice");
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log.back().type, EventType::account_updated);
  EXPECT_EQ(log.back().reason, kFrozenForRefundShortfall);
  ASSERT_TRUE(log.back().settings.has_value());
  EXPECT_TRUE(log.back().settings->frozen);
  // Frozen: no new holds, no debits; an admin cannot unfreeze it while it is past its overdraft.
  EXPECT_CODE(ledger_->reserve({"alice", 1, "r2", 60'000, "", ""}), Code::account_frozen);
  EXPECT_CODE(ledger_->update_account({"alice", std::nullopt, std::nullopt, false, std::nullopt}), Code::conflict);
  // A credit that leaves it below 0 keeps it frozen; the one that repays the rest unfreezes it.
  ASSERT_OK(ledger_->credit({"alice", 5, "buy-1"}));
  EXPECT_TRUE(get("alice").frozen);
  ASSERT_OK(ledger_->credit({"alice", 3, "buy-2"}));
  a = get("alice");
  EXPECT_FALSE(a.frozen);
  EXPECT_EQ(a.frozen_reason, std::nullopt);
  EXPECT_EQ(a.balances.available, 0);
  EXPECT_EQ(events("alice").back().reason, kUnfrozenRepaid);
  ASSERT_OK(ledger_->credit({"alice", 1, "buy-3"}));
  ASSERT_OK(ledger_->reserve({"alice", 1, "r3", 60'000, "", ""}));
}

TEST_P(PaymentStore, ForgivenAShortfallTakesOnlyWhatIsThereAndDoesNotFreeze) {
  account("alice");
  ASSERT_OK(pay("cs_1", "alice", 10));
  spend("alice", 8, "r1");
  auto r = refund("cs_1", "alice", 1000, 1000, /*into_debt=*/false);
  ASSERT_OK(r);
  EXPECT_EQ(r->owed, 10);
  EXPECT_EQ(r->moved, 2);
  EXPECT_FALSE(r->froze);
  const Account a = get("alice");
  EXPECT_EQ(a.balances.available, 0);
  EXPECT_FALSE(a.frozen);
  auto p = store_->payments().get_payment("stripe:cs_1");
  EXPECT_EQ(p->refunded_credits, 10);
  EXPECT_EQ(p->taken_back, 2);
  // The same event again takes nothing more, even once credits are there.
  ASSERT_OK(ledger_->credit({"alice", 50, "buy-1"}));
  auto again = refund("cs_1", "alice", 1000, 1000, false);
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(get("alice").balances.available, 50);
}

TEST_P(PaymentStore, WithAnOverdraftTheShortfallIsWhatWasNotAvailable) {
  account("alice", /*overdraft=*/100);
  ASSERT_OK(pay("cs_1", "alice", 10));
  spend("alice", 15, "r1");  // available −5: overdrawn, not frozen
  EXPECT_FALSE(get("alice").frozen);
  auto r = refund("cs_1", "alice", 1000, 1000);
  ASSERT_OK(r);
  EXPECT_TRUE(r->froze);
  EXPECT_EQ(get("alice").balances.available, -15);
  EXPECT_TRUE(get("alice").frozen);
}

TEST_P(PaymentStore, ADisputeFreezesTheAccountOnceAndACreditDoesNotUnfreezeIt) {
  account("alice");
  ASSERT_OK(pay("cs_1", "alice", 10));
  auto d = run(DisputePaymentCommand{"stripe:cs_1", "alice", "stripe:dp_1"});
  ASSERT_OK(d);
  EXPECT_TRUE(d->created);
  EXPECT_TRUE(d->froze);
  EXPECT_TRUE(d->account.frozen);
  EXPECT_EQ(get("alice").frozen_reason, kFrozenForDispute);
  EXPECT_EQ(events("alice").back().reason, kFrozenForDispute);
  const std::size_t n = events("alice").size();
  auto again = run(DisputePaymentCommand{"stripe:cs_1", "alice", "stripe:dp_1"});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(events("alice").size(), n);
  ASSERT_OK(ledger_->credit({"alice", 5, "buy-1"}));
  EXPECT_TRUE(get("alice").frozen);
  // An admin's unfreeze clears the reason.
  ASSERT_OK(ledger_->update_account({"alice", std::nullopt, std::nullopt, false, std::nullopt}));
  EXPECT_FALSE(get("alice").frozen);
  EXPECT_EQ(get("alice").frozen_reason, std::nullopt);
  // A redelivered dispute does not freeze it again.
  ASSERT_OK(run(DisputePaymentCommand{"stripe:cs_1", "alice", "stripe:dp_1"}));
  EXPECT_FALSE(get("alice").frozen);
}

TEST_P(PaymentStore, RefusalsChangeNothing) {
  account("alice");
  account("bob");
  ASSERT_OK(pay("cs_1", "alice", 10));
  const auto before = events("alice");
  // A payment that does not exist, or named with another account.
  EXPECT_CODE(refund("cs_2", "alice", 1, 2), Code::not_found);
  EXPECT_CODE(refund("cs_1", "bob", 1, 2), Code::not_found);
  EXPECT_CODE(run(DisputePaymentCommand{"stripe:cs_9", "alice", "stripe:dp_1"}), Code::not_found);
  // A reference used by a refund, sent as a dispute.
  ASSERT_OK(refund("cs_1", "alice", 1, 2));
  auto mismatch = run(DisputePaymentCommand{"stripe:cs_1", "alice", "stripe:ch_cs_1:refunded:1"});
  EXPECT_CODE(mismatch, Code::idempotency_mismatch);
  EXPECT_THAT(mismatch.error().detail, HasSubstr("already used for a refund"));
  EXPECT_EQ(events("alice").size(), before.size() + 1);
  EXPECT_FALSE(get("alice").frozen);
  // Malformed commands are refused before they are queued.
  EXPECT_CODE(run(CreditPaymentCommand{"stripe:cs_x", Provider::stripe, std::nullopt, "alice", 0}), Code::invalid_request);
  EXPECT_CODE(run(TakeBackPaymentCommand{"stripe:cs_1", "alice", "r", RefundShare{3, 2}, std::nullopt, true}),
              Code::invalid_request);
  EXPECT_CODE(run(TakeBackPaymentCommand{"stripe:cs_1", "alice", "r", std::nullopt, std::nullopt, true}),
              Code::invalid_request);
  EXPECT_CODE(run(TakeBackPaymentCommand{"stripe:cs_1", "alice", "r", RefundShare{1, 2}, 1, true}),
              Code::invalid_request);
}

TEST_P(PaymentStore, AProviderThatCountsCreditsIsOwedAtMostWhatWasCredited) {
  account("alice");
  ASSERT_OK(run(CreditPaymentCommand{"payment:p1", Provider::webhook, "p1", "alice", 30}));
  auto refund_of = [&](const std::string& ref, std::int64_t credits) {
    return run(TakeBackPaymentCommand{"payment:p1", "alice", ref, std::nullopt, credits, true});
  };
  ASSERT_OK(refund_of("payment:p1:refund:w1", 10));
  ASSERT_OK(refund_of("payment:p1:refund:w2", 10));
  auto last = refund_of("payment:p1:refund:w3", 20);
  ASSERT_OK(last);
  EXPECT_EQ(last->owed, 10);  // 30 credited, 20 owed back before
  EXPECT_EQ(get("alice").balances.available, 0);
  auto none = refund_of("payment:p1:refund:w4", 5);
  ASSERT_OK(none);
  EXPECT_EQ(none->owed, 0);
  EXPECT_EQ(none->moved, 0);
}

TEST_P(PaymentStore, OnePaymentSentFromManyThreadsAtOnceCreditsOnceAndEachRefundOnce) {
  account("alice");
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> created{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      // A refund before its payment landed is not found (the provider retries, as these threads do).
      for (int sent = 0, tries = 0; sent < 5 && tries < 10'000; ++tries) {
        auto r = t % 2 == 0 ? pay("cs_1", "alice", 100) : refund("cs_1", "alice", 500, 1000);
        if (!r.ok()) {
          ASSERT_EQ(r.error().code, Code::not_found) << r.error().detail;
          std::this_thread::yield();
          continue;
        }
        ++sent;
        if (r->created) created.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  const Account a = get("alice");
  EXPECT_EQ(a.balances.purchased, 50);  // 100 credited once, 50 taken back once
  EXPECT_EQ(created.load(), 2);
  EXPECT_EQ(events("alice").size(), 2u);
}

INSTANTIATE_TEST_SUITE_P(AllBackends, PaymentStore, ::testing::ValuesIn(testing::all_backends()), testing::BackendName{});

}  // namespace
}  // namespace tollgate
