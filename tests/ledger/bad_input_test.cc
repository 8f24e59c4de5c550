// Bad input at the Ledger boundary: every invalid amount, id, duration and size, every unknown
// account or hold, and every refused state transition answers its precise code, and the data is
// exactly as it was before (account, event log, holds, number of accounts; audit clean).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "slices.h"
#include "core/limits.h"
#include "ledger/ledger.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using ::testing::IsEmpty;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c))
#define ASSERT_CODE(r, c) ASSERT_EQ(code_name((r).code()), code_name(c))

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kTwoPow53 = std::int64_t{1} << 53;
constexpr std::int64_t kTtl = 60'000;

const std::vector<std::int64_t> kBadAmounts = {0, -1, kTwoPow53, kMax, kMin};
const std::vector<std::string> kBadIds = {"", std::string(129, 'a'), "has space", "has/slash", " lead", "trail ",
                                          "a\\b", "caf\xc3\xa9"};

// Everything a refused request must leave as it was.
struct State {
  Account alice;
  std::vector<Event> alice_events;
  Account capped;
  std::vector<Event> capped_events;
  std::vector<Hold> holds;  // every hold of every account, newest first
  std::int64_t accounts = 0;
  friend bool operator==(const State&, const State&) = default;
  friend std::ostream& operator<<(std::ostream& os, const State& s) {
    os << "alice available=" << s.alice.balances.available << " reserved=" << s.alice.balances.reserved
       << " used=" << s.alice.balances.used << " purchased=" << s.alice.balances.purchased << ", "
       << s.alice_events.size() << " events; capped " << s.capped_events.size() << " events; " << s.holds.size()
       << " holds; " << s.accounts << " accounts";
    return os;
  }
};

class BadInput : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    start_ledger(LateCommitPolicy::charge);
    // alice: 20 credits; one hold in each state.
    ASSERT_OK(ledger_->create_account({"alice", 0, std::nullopt}));
    ASSERT_OK(ledger_->credit({"alice", 20, "ref-1"}));
    ASSERT_OK(ledger_->debit({"alice", 1, "ref-2", "correction"}));
    active_ = reserve("alice", 4, "req-active", kTtl);
    committed_ = reserve("alice", 3, "req-committed", kTtl);
    ASSERT_OK(ledger_->commit({committed_, 2}));
    released_ = reserve("alice", 1, "req-released", kTtl);
    ASSERT_OK(ledger_->release({released_}));
    expired_ = reserve("alice", 1, "req-expired", 1000);
    clock_.advance_ms(1000);
    ASSERT_OK(ledger_->reap_once());
    // capped: at most one active hold, and it has it.
    ASSERT_OK(ledger_->create_account({"capped", 0, 1}));
    ASSERT_OK(ledger_->credit({"capped", 10, "ref-capped"}));
    capped_hold_ = reserve("capped", 1, "req-capped", kTtl);
    ASSERT_FALSE(HasFatalFailure());
    const Account alice = *ledger_->get_account("alice");
    ASSERT_EQ(alice.balances.available, 13);
    ASSERT_EQ(alice.balances.reserved, 4);
    ASSERT_EQ(alice.balances.used, 2);
    ASSERT_EQ(alice.balances.purchased, 19);
    before_ = state();
  }

  void TearDown() override {
    if (!store_) return;
    auto report = store_->audit(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.error().detail;
    std::vector<std::string> messages;
    for (const auto& v : report->violations) messages.push_back(v.account_id + ": " + v.message);
    EXPECT_THAT(messages, IsEmpty());
    ledger_.reset();
    store_.reset();
  }

  void start_ledger(LateCommitPolicy policy) {
    ledger_.reset();
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.late_commit = policy;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  }

  std::string reserve(const std::string& account, std::int64_t amount, const std::string& request, std::int64_t ttl) {
    auto r = ledger_->reserve({account, amount, request, ttl, "", ""});
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? r->hold.hold_id : std::string();
  }

  std::vector<Event> events(const std::string& id) {
    auto page = ledger_->read_events(id, 0, limits::kEventsPageMax);
    EXPECT_TRUE(page.ok()) << page.error().detail;
    return page.ok() ? page->events : std::vector<Event>{};
  }

  State state() {
    State s;
    auto alice = ledger_->get_account("alice");
    auto capped = ledger_->get_account("capped");
    auto holds = ledger_->list_holds({}, {limits::kListPageMax});
    auto audit = ledger_->audit(std::nullopt);
    EXPECT_TRUE(alice.ok() && capped.ok() && holds.ok() && audit.ok());
    if (!alice.ok() || !capped.ok() || !holds.ok() || !audit.ok()) return s;
    s.alice = *alice;
    s.capped = *capped;
    s.alice_events = events("alice");
    s.capped_events = events("capped");
    s.holds = holds->items;
    s.accounts = audit->accounts_checked;
    return s;
  }

  void expect_unchanged() { EXPECT_EQ(state(), before_); }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
  std::string active_, committed_, released_, expired_, capped_hold_;
  State before_;
};

// =============================================================================================
// amounts

TEST_P(BadInput, EveryInvalidCreditAmountIsInvalidRequestAndChangesNothing) {
  for (std::int64_t amount : kBadAmounts) {
    SCOPED_TRACE(amount);
    auto r = ledger_->credit({"alice", amount, "ref-new"});
    ASSERT_CODE(r, Code::invalid_request);
    EXPECT_THAT(r.error().detail, ::testing::HasSubstr("amount"));
  }
  expect_unchanged();
  // The reference was not taken by any of them.
  auto good = ledger_->credit({"alice", 1, "ref-new"});
  ASSERT_OK(good);
  EXPECT_TRUE(good->created);
}

TEST_P(BadInput, EveryInvalidDebitAmountIsInvalidRequestAndChangesNothing) {
  for (std::int64_t amount : kBadAmounts) {
    SCOPED_TRACE(amount);
    EXPECT_CODE(ledger_->debit({"alice", amount, "ref-new", ""}), Code::invalid_request);
  }
  expect_unchanged();
}

TEST_P(BadInput, EveryInvalidReserveAmountIsInvalidRequestAndChangesNothing) {
  for (std::int64_t amount : kBadAmounts) {
    SCOPED_TRACE(amount);
    EXPECT_CODE(ledger_->reserve({"alice", amount, "req-new", kTtl, "", ""}), Code::invalid_request);
  }
  expect_unchanged();
  auto good = ledger_->reserve({"alice", 1, "req-new", kTtl, "", ""});
  ASSERT_OK(good);
  EXPECT_TRUE(good->created);
}

TEST_P(BadInput, EveryInvalidCommitAmountIsInvalidRequestAndTheHoldStaysActive) {
  for (std::int64_t amount : kBadAmounts) {
    SCOPED_TRACE(amount);
    EXPECT_CODE(ledger_->commit({active_, amount}), Code::invalid_request);
  }
  EXPECT_CODE(ledger_->commit({active_, 5}), Code::invalid_request);  // more than the hold's 4
  expect_unchanged();
  EXPECT_EQ(ledger_->get_hold(active_)->status, HoldStatus::active);
}

TEST_P(BadInput, AnInvalidAmountIsReportedBeforeAnythingTheStoreWouldSay) {
  // Validation comes first: an unknown account, a used reference or request id does not matter.
  EXPECT_CODE(ledger_->credit({"nobody", 0, "ref-new"}), Code::invalid_request);
  EXPECT_CODE(ledger_->credit({"alice", 0, "ref-1"}), Code::invalid_request);
  EXPECT_CODE(ledger_->reserve({"alice", -1, "req-active", kTtl, "", ""}), Code::invalid_request);
  EXPECT_CODE(ledger_->commit({"hold_doesnotexist", 0}), Code::invalid_request);
  expect_unchanged();
}

// =============================================================================================
// identifiers

TEST_P(BadInput, BadAccountIdsAreInvalidRequestAndCreateNoAccount) {
  for (const std::string& id : kBadIds) {
    SCOPED_TRACE("'" + id + "'");
    auto created = ledger_->create_account({id, 0, std::nullopt});
    ASSERT_CODE(created, Code::invalid_request);
    EXPECT_THAT(created.error().detail, ::testing::HasSubstr("account_id"));
    EXPECT_CODE(ledger_->credit({id, 1, "ref-new"}), Code::invalid_request);
    EXPECT_CODE(ledger_->debit({id, 1, "ref-new", ""}), Code::invalid_request);
    EXPECT_CODE(ledger_->reserve({id, 1, "req-new", kTtl, "", ""}), Code::invalid_request);
    EXPECT_CODE(ledger_->get_account(id), Code::invalid_request);
    EXPECT_CODE(ledger_->read_events(id, 0, 10), Code::invalid_request);
    EXPECT_CODE(ledger_->list_holds({id}, {10}), Code::invalid_request);
    EXPECT_CODE(ledger_->audit(std::string_view(id)), Code::invalid_request);
  }
  expect_unchanged();
}

TEST_P(BadInput, BadReferencesAndRequestIdsAreInvalidRequest) {
  for (const std::string& id : kBadIds) {
    SCOPED_TRACE("'" + id + "'");
    auto credit = ledger_->credit({"alice", 1, id});
    ASSERT_CODE(credit, Code::invalid_request);
    EXPECT_THAT(credit.error().detail, ::testing::HasSubstr("reference"));
    EXPECT_CODE(ledger_->debit({"alice", 1, id, ""}), Code::invalid_request);
    auto reserve = ledger_->reserve({"alice", 1, id, kTtl, "", ""});
    ASSERT_CODE(reserve, Code::invalid_request);
    EXPECT_THAT(reserve.error().detail, ::testing::HasSubstr("request_id"));
  }
  expect_unchanged();
}

TEST_P(BadInput, BadHoldIdsAreInvalidRequest) {
  for (const std::string& id : kBadIds) {
    SCOPED_TRACE("'" + id + "'");
    EXPECT_CODE(ledger_->commit({id, std::nullopt}), Code::invalid_request);
    EXPECT_CODE(ledger_->release({id}), Code::invalid_request);
    EXPECT_CODE(ledger_->extend({id, 1000}), Code::invalid_request);
    EXPECT_CODE(ledger_->get_hold(id), Code::invalid_request);
  }
  expect_unchanged();
}

// =============================================================================================
// durations, sizes, settings

TEST_P(BadInput, ReserveTtlOutsideOneToTheConfiguredMaximumIsInvalidRequest) {
  const std::int64_t max = ledger_->options().hold_ttl_ms_max;
  for (std::int64_t ttl : {std::int64_t{0}, std::int64_t{-1}, max + 1, kMax, kMin}) {
    SCOPED_TRACE(ttl);
    auto r = ledger_->reserve({"alice", 1, "req-new", ttl, "", ""});
    ASSERT_CODE(r, Code::invalid_request);
    EXPECT_THAT(r.error().detail, ::testing::HasSubstr("ttl_ms"));
  }
  expect_unchanged();
  auto at_max = ledger_->reserve({"alice", 1, "req-new", max, "", ""});
  ASSERT_OK(at_max);
  EXPECT_EQ(at_max->hold.expires_at_ms, clock_.now_ms() + max);
}

TEST_P(BadInput, ExtendTtlOutsideOneToTheConfiguredMaximumIsInvalidRequestAndKeepsTheDeadline) {
  const std::int64_t max = ledger_->options().hold_ttl_ms_max;
  for (std::int64_t ttl : {std::int64_t{0}, std::int64_t{-1}, max + 1, kMax, kMin}) {
    SCOPED_TRACE(ttl);
    EXPECT_CODE(ledger_->extend({active_, ttl}), Code::invalid_request);
  }
  expect_unchanged();
}

TEST_P(BadInput, OversizedMetadataIsInvalidRequest) {
  const std::string big = "{\"x\":\"" + std::string(limits::kMetadataBytesMax, 'a') + "\"}";
  auto r = ledger_->reserve({"alice", 1, "req-new", kTtl, big, ""});
  ASSERT_CODE(r, Code::invalid_request);
  EXPECT_THAT(r.error().detail, ::testing::HasSubstr("metadata"));
  expect_unchanged();
}

TEST_P(BadInput, OversizedDebitReasonIsInvalidRequest) {
  auto r = ledger_->debit({"alice", 1, "ref-new", std::string(limits::kReasonLengthMax + 1, 'r')});
  ASSERT_CODE(r, Code::invalid_request);
  EXPECT_THAT(r.error().detail, ::testing::HasSubstr("reason"));
  expect_unchanged();
}

TEST_P(BadInput, BadAccountSettingsAreInvalidRequestAndCreateNoAccount) {
  EXPECT_CODE(ledger_->create_account({"bob", -1, std::nullopt}), Code::invalid_request);
  EXPECT_CODE(ledger_->create_account({"bob", kTwoPow53, std::nullopt}), Code::invalid_request);
  EXPECT_CODE(ledger_->create_account({"bob", 0, 0}), Code::invalid_request);
  EXPECT_CODE(ledger_->create_account({"bob", 0, -1}), Code::invalid_request);
  EXPECT_CODE(ledger_->get_account("bob"), Code::not_found);
  expect_unchanged();
}

TEST_P(BadInput, BadPagingIsInvalidRequest) {
  EXPECT_CODE(ledger_->read_events("alice", 0, 0), Code::invalid_request);
  EXPECT_CODE(ledger_->read_events("alice", 0, limits::kEventsPageMax + 1), Code::invalid_request);
  EXPECT_CODE(ledger_->read_events("alice", -1, 10), Code::invalid_request);
  EXPECT_CODE(ledger_->list_holds({"alice"}, {0}), Code::invalid_request);
  EXPECT_CODE(ledger_->list_holds({"alice"}, {limits::kListPageMax + 1}), Code::invalid_request);
  expect_unchanged();
}

// =============================================================================================
// unknown accounts and holds

TEST_P(BadInput, UnknownAccountsAreNotFound) {
  EXPECT_CODE(ledger_->credit({"nobody", 1, "ref-new"}), Code::not_found);
  EXPECT_CODE(ledger_->debit({"nobody", 1, "ref-new", ""}), Code::not_found);
  EXPECT_CODE(ledger_->reserve({"nobody", 1, "req-new", kTtl, "", ""}), Code::not_found);
  EXPECT_CODE(ledger_->get_account("nobody"), Code::not_found);
  EXPECT_CODE(ledger_->read_events("nobody", 0, 10), Code::not_found);
  EXPECT_CODE(ledger_->audit(std::string_view("nobody")), Code::not_found);
  expect_unchanged();
  // None of the refused requests took its reference or request id.
  ASSERT_OK(ledger_->create_account({"nobody", 0, std::nullopt}));
  auto credit = ledger_->credit({"nobody", 1, "ref-new"});
  ASSERT_OK(credit);
  EXPECT_TRUE(credit->created);
  auto hold = ledger_->reserve({"nobody", 1, "req-new", kTtl, "", ""});
  ASSERT_OK(hold);
  EXPECT_TRUE(hold->created);
}

TEST_P(BadInput, UnknownHoldsAreNotFound) {
  EXPECT_CODE(ledger_->commit({"hold_doesnotexist", std::nullopt}), Code::not_found);
  EXPECT_CODE(ledger_->commit({"hold_doesnotexist", 1}), Code::not_found);
  EXPECT_CODE(ledger_->release({"hold_doesnotexist"}), Code::not_found);
  EXPECT_CODE(ledger_->extend({"hold_doesnotexist", 1000}), Code::not_found);
  EXPECT_CODE(ledger_->get_hold("hold_doesnotexist"), Code::not_found);
  // A request id is not a hold id.
  EXPECT_CODE(ledger_->commit({"req-active", std::nullopt}), Code::not_found);
  expect_unchanged();
}

// =============================================================================================
// refused state transitions

TEST_P(BadInput, CommitOfAReleasedHoldIsHoldReleased) {
  EXPECT_CODE(ledger_->commit({released_, std::nullopt}), Code::hold_released);
  EXPECT_CODE(ledger_->commit({released_, 1}), Code::hold_released);
  expect_unchanged();
}

TEST_P(BadInput, ReleaseOfACommittedHoldIsHoldCommitted) {
  EXPECT_CODE(ledger_->release({committed_}), Code::hold_committed);
  expect_unchanged();
}

TEST_P(BadInput, CommitOfACommittedHoldWithAnotherAmountIsHoldCommitted) {
  EXPECT_CODE(ledger_->commit({committed_, 3}), Code::hold_committed);
  EXPECT_CODE(ledger_->commit({committed_, 1}), Code::hold_committed);
  EXPECT_CODE(ledger_->commit({committed_, std::nullopt}), Code::hold_committed);
  expect_unchanged();
}

TEST_P(BadInput, ExtendOfAHoldThatIsNotActiveIsRefusedWithItsState) {
  EXPECT_CODE(ledger_->extend({committed_, 1000}), Code::hold_committed);
  EXPECT_CODE(ledger_->extend({released_, 1000}), Code::hold_released);
  EXPECT_CODE(ledger_->extend({expired_, 1000}), Code::hold_expired);
  expect_unchanged();
}

TEST_P(BadInput, LateCommitUnderRejectIsHoldExpired) {
  start_ledger(LateCommitPolicy::reject);
  EXPECT_CODE(ledger_->commit({expired_, std::nullopt}), Code::hold_expired);
  EXPECT_CODE(ledger_->commit({expired_, 1}), Code::hold_expired);
  expect_unchanged();
}

TEST_P(BadInput, RefusalsOnWellFormedInputChangeNothing) {
  auto debit = ledger_->debit({"alice", 14, "ref-new", ""});
  EXPECT_CODE(debit, Code::insufficient_credits);
  auto reserve = ledger_->reserve({"alice", 14, "req-new", kTtl, "", ""});
  EXPECT_CODE(reserve, Code::insufficient_credits);
  if (!reserve.ok()) {
    EXPECT_EQ(reserve.error().available, 13);
    EXPECT_EQ(reserve.error().requested, 14);
  }
  EXPECT_CODE(ledger_->reserve({"capped", 1, "req-new", kTtl, "", ""}), Code::too_many_holds);
  EXPECT_CODE(ledger_->credit({"alice", 5, "ref-1"}), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->credit({"capped", 20, "ref-1"}), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->debit({"alice", 1, "ref-2", "other reason"}), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->reserve({"alice", 5, "req-active", kTtl, "", ""}), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->reserve({"capped", 4, "req-active", kTtl, "", ""}), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->create_account({"alice", 1, std::nullopt}), Code::conflict);
  EXPECT_CODE(ledger_->create_account({"capped", 0, 2}), Code::conflict);
  expect_unchanged();
}

TEST_P(BadInput, AStoppedLedgerRefusesWritesAsUnavailable) {
  ledger_->stop();
  EXPECT_CODE(ledger_->credit({"alice", 1, "ref-new"}), Code::unavailable);
  EXPECT_CODE(ledger_->reserve({"alice", 1, "req-new", kTtl, "", ""}), Code::unavailable);
  EXPECT_CODE(ledger_->commit({active_, std::nullopt}), Code::unavailable);
  expect_unchanged();
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BadInput, ::testing::ValuesIn(testing::all_backends()),
                         testing::BackendName());

}  // namespace
}  // namespace tollgate
