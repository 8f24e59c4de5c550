// Account settings (PATCH: overdraft_limit, max_active_holds, frozen), the release reason, the
// kiosk's two insufficient_credits messages, and the change feed (every account's events in commit
// order, and waiting for them) — on every backend, through the Ledger and the Store interface.
//
// Time is a ManualClock; the reaper thread is off (tests call reap_once()). After every test, the
// audit of every account must be clean (TearDown): account_updated events fold too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/commands.h"
#include "core/limits.h"
#include "ledger/ledger.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::int64_t kTtl = 60'000;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_OK(r) EXPECT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c))
#define ASSERT_CODE(r, c) ASSERT_EQ(code_name((r).code()), code_name(c))

std::vector<std::string> violation_messages(const AuditReport& report) {
  std::vector<std::string> out;
  for (const auto& v : report.violations) out.push_back(v.account_id + ": " + v.message);
  return out;
}

UpdateAccountCommand update(const std::string& id) { return UpdateAccountCommand{id, {}, {}, {}}; }

class AccountSettingsAndFeed : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    start_ledger(LedgerOptions{});
  }

  void TearDown() override {
    if (!store_) return;
    auto report = store_->audit(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.error().detail;
    EXPECT_THAT(violation_messages(*report), IsEmpty());
    ledger_.reset();
    store_.reset();
  }

  void start_ledger(LedgerOptions options) {
    ledger_.reset();
    options.reaper_interval_ms = 0;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  }

  void make_account(const std::string& id, std::int64_t overdraft = 0,
                    std::optional<std::int64_t> max_holds = std::nullopt) {
    auto r = ledger_->create_account({id, overdraft, max_holds});
    ASSERT_OK(r);
    ASSERT_TRUE(r->created);
  }
  void give(const std::string& id, std::int64_t amount, const std::string& reference) {
    auto r = ledger_->credit({id, amount, reference});
    ASSERT_OK(r);
    ASSERT_TRUE(r->created);
  }
  Hold hold(const std::string& account, std::int64_t amount, const std::string& request, std::int64_t ttl = kTtl) {
    auto r = ledger_->reserve({account, amount, request, ttl, "", ""});
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? r->hold : Hold{};
  }
  Account account(const std::string& id) {
    auto r = ledger_->get_account(id);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? *r : Account{};
  }
  std::vector<Event> events(const std::string& id) {
    auto page = ledger_->read_events(id, 0, limits::kEventsPageMax);
    EXPECT_TRUE(page.ok()) << page.error().detail;
    return page.ok() ? page->events : std::vector<Event>{};
  }
  Event last_event(const std::string& id) {
    const auto all = events(id);
    EXPECT_FALSE(all.empty());
    return all.empty() ? Event{} : all.back();
  }
  // Every event of the feed after `after`, read in pages of `page_size`.
  std::vector<Event> follow(std::int64_t after, std::int64_t page_size) {
    std::vector<Event> out;
    for (;;) {
      auto page = ledger_->read_feed(after, page_size);
      EXPECT_TRUE(page.ok()) << page.error().detail;
      if (!page.ok() || page->events.empty()) return out;
      EXPECT_LE(static_cast<std::int64_t>(page->events.size()), page_size);
      EXPECT_EQ(page->next_after, page->events.back().event_id);
      out.insert(out.end(), page->events.begin(), page->events.end());
      after = page->next_after;
    }
  }
  std::int64_t last_event_id() {
    auto last = store_->last_event_id();
    EXPECT_TRUE(last.ok()) << last.error().detail;
    return last.ok() ? *last : -1;
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

// --- PATCH: each field ------------------------------------------------------------------------------

TEST_P(AccountSettingsAndFeed, RaisingTheOverdraftLimitLetsReservationsGoBelowZeroAndIsAnEvent) {
  make_account("alice");
  give("alice", 5, "ref-1");
  EXPECT_CODE(ledger_->reserve({"alice", 8, "req-1", kTtl, "", ""}), Code::insufficient_credits);
  UpdateAccountCommand c = update("alice");
  c.overdraft_limit = 10;
  auto r = ledger_->update_account(c);
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->account.overdraft_limit, 10);
  EXPECT_EQ(account("alice").overdraft_limit, 10);
  const Event e = last_event("alice");
  EXPECT_EQ(e.type, EventType::account_updated);
  EXPECT_EQ(e.amount, 0);
  EXPECT_FALSE(e.hold_id.has_value());
  EXPECT_EQ(e.available_after, 5);
  EXPECT_EQ(e.reserved_after, 0);
  EXPECT_EQ(e.used_after, 0);
  ASSERT_TRUE(e.settings.has_value());
  EXPECT_EQ(*e.settings, (AccountSettings{10, std::nullopt, false}));
  auto into_overdraft = ledger_->reserve({"alice", 8, "req-1", kTtl, "", ""});
  ASSERT_OK(into_overdraft);
  EXPECT_EQ(account("alice").balances.available, -3);
}

TEST_P(AccountSettingsAndFeed, MaxActiveHoldsCanBeSetAndCleared) {
  make_account("alice");
  give("alice", 10, "ref-1");
  UpdateAccountCommand one = update("alice");
  one.max_active_holds = std::optional<std::int64_t>(1);
  ASSERT_OK(ledger_->update_account(one));
  EXPECT_EQ(account("alice").max_active_holds, 1);
  EXPECT_EQ(last_event("alice").settings, (AccountSettings{0, 1, false}));
  hold("alice", 1, "req-1");
  EXPECT_CODE(ledger_->reserve({"alice", 1, "req-2", kTtl, "", ""}), Code::too_many_holds);

  UpdateAccountCommand none = update("alice");
  none.max_active_holds = std::optional<std::int64_t>();  // no limit
  auto cleared = ledger_->update_account(none);
  ASSERT_OK(cleared);
  EXPECT_TRUE(cleared->created);
  EXPECT_EQ(cleared->account.max_active_holds, std::nullopt);
  EXPECT_EQ(last_event("alice").settings, (AccountSettings{0, std::nullopt, false}));
  EXPECT_OK(ledger_->reserve({"alice", 1, "req-2", kTtl, "", ""}));
}

TEST_P(AccountSettingsAndFeed, SeveralFieldsChangeTogetherInOneEvent) {
  make_account("alice", 3, 2);
  UpdateAccountCommand c = update("alice");
  c.overdraft_limit = 7;
  c.max_active_holds = std::optional<std::int64_t>(9);
  c.frozen = true;
  auto r = ledger_->update_account(c);
  ASSERT_OK(r);
  EXPECT_EQ(r->account.settings(), (AccountSettings{7, 9, true}));
  EXPECT_EQ(account("alice").settings(), (AccountSettings{7, 9, true}));
  const auto all = events("alice");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].settings, (AccountSettings{7, 9, true}));
}

TEST_P(AccountSettingsAndFeed, AnUpdateThatChangesNothingIsAReplayWithoutAnEvent) {
  make_account("alice", 4, 3);
  give("alice", 2, "ref-1");
  const auto before = events("alice");
  UpdateAccountCommand same = update("alice");
  same.overdraft_limit = 4;
  same.max_active_holds = std::optional<std::int64_t>(3);
  same.frozen = false;
  for (const UpdateAccountCommand& c : {same, update("alice")}) {
    auto r = ledger_->update_account(c);
    ASSERT_OK(r);
    EXPECT_FALSE(r->created);
    EXPECT_EQ(r->account.settings(), (AccountSettings{4, 3, false}));
  }
  EXPECT_EQ(events("alice"), before);
  // Applied twice, a change is a change once.
  UpdateAccountCommand freeze = update("alice");
  freeze.frozen = true;
  EXPECT_TRUE(ledger_->update_account(freeze)->created);
  EXPECT_FALSE(ledger_->update_account(freeze)->created);
  EXPECT_EQ(events("alice").size(), before.size() + 1);
}

TEST_P(AccountSettingsAndFeed, UpdatingAnAccountThatDoesNotExistIsNotFound) {
  UpdateAccountCommand c = update("ghost");
  c.frozen = true;
  EXPECT_CODE(ledger_->update_account(c), Code::not_found);
}

TEST_P(AccountSettingsAndFeed, BadSettingsAreInvalidAndChangeNothing) {
  make_account("alice");
  UpdateAccountCommand negative = update("alice");
  negative.overdraft_limit = -1;
  EXPECT_CODE(ledger_->update_account(negative), Code::invalid_request);
  UpdateAccountCommand zero_holds = update("alice");
  zero_holds.max_active_holds = std::optional<std::int64_t>(0);
  EXPECT_CODE(ledger_->update_account(zero_holds), Code::invalid_request);
  EXPECT_THAT(events("alice"), IsEmpty());
}

TEST_P(AccountSettingsAndFeed, LoweringTheOverdraftBelowWhatIsOverdrawnIsAConflictAndChangesNothing) {
  make_account("alice", 10);
  give("alice", 10, "ref-1");
  hold("alice", 15, "req-1");  // available -5
  const auto before = events("alice");
  UpdateAccountCommand lower = update("alice");
  lower.overdraft_limit = 4;
  lower.frozen = true;
  auto r = ledger_->update_account(lower);
  ASSERT_CODE(r, Code::conflict);
  EXPECT_THAT(r.error().detail, HasSubstr("overdrawn by 5"));
  EXPECT_THAT(r.error().detail, HasSubstr("overdraft_limit 4"));
  EXPECT_EQ(account("alice").settings(), (AccountSettings{10, std::nullopt, false}));
  EXPECT_EQ(events("alice"), before);
  // Down to exactly what is overdrawn is allowed.
  lower.overdraft_limit = 5;
  auto ok = ledger_->update_account(lower);
  ASSERT_OK(ok);
  EXPECT_EQ(ok->account.settings(), (AccountSettings{5, std::nullopt, true}));
}

TEST_P(AccountSettingsAndFeed, AnOverdueHoldNoLongerCountsAgainstLoweringTheOverdraft) {
  make_account("alice", 10);
  hold("alice", 6, "req-1", 1'000);  // available -6 on the row
  clock_.advance_ms(1'000);            // the hold is a zombie: readers see available 0
  UpdateAccountCommand lower = update("alice");
  lower.overdraft_limit = 0;
  auto r = ledger_->update_account(lower);
  ASSERT_OK(r);
  EXPECT_EQ(r->account.balances.available, 0);
  const auto all = events("alice");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].type, EventType::expired);  // expired first, then the change
  EXPECT_EQ(all[2].type, EventType::account_updated);
}

// --- frozen -------------------------------------------------------------------------------------

TEST_P(AccountSettingsAndFeed, AFrozenAccountRefusesNewHoldsAndDebitsWhileItsHoldsStillEnd) {
  make_account("alice");
  give("alice", 100, "ref-1");
  const Hold to_commit = hold("alice", 10, "req-commit");
  const Hold to_release = hold("alice", 10, "req-release");
  const Hold to_extend = hold("alice", 10, "req-extend");
  const Hold to_expire = hold("alice", 10, "req-expire", 5'000);
  UpdateAccountCommand freeze = update("alice");
  freeze.frozen = true;
  ASSERT_OK(ledger_->update_account(freeze));
  EXPECT_TRUE(account("alice").frozen);

  auto reserve = ledger_->reserve({"alice", 1, "req-new", kTtl, "", ""});
  ASSERT_CODE(reserve, Code::account_frozen);
  EXPECT_THAT(reserve.error().detail, HasSubstr("account alice is frozen"));
  EXPECT_CODE(ledger_->debit({"alice", 1, "debit-1", "refund"}), Code::account_frozen);
  // What was asked before the freeze is answered as it was.
  auto replay = ledger_->reserve({"alice", 10, "req-commit", kTtl, "", ""});
  ASSERT_OK(replay);
  EXPECT_FALSE(replay->created);
  // Credits land; existing holds commit, release, extend (decided: a hold that is still working
  // may be kept alive) and expire.
  EXPECT_OK(ledger_->credit({"alice", 5, "ref-2"}));
  EXPECT_OK(ledger_->commit({to_commit.hold_id, 4, LateCommitPolicy::charge}));
  EXPECT_OK(ledger_->release({to_release.hold_id, std::nullopt}));
  EXPECT_OK(ledger_->extend({to_extend.hold_id, 20'000}));
  clock_.advance_ms(6'000);
  auto reaped = ledger_->reap_once();
  ASSERT_OK(reaped);
  EXPECT_EQ(*reaped, 1);
  EXPECT_EQ(ledger_->get_hold(to_expire.hold_id)->status, HoldStatus::expired);
  const Account a = account("alice");
  EXPECT_EQ(a.balances.available, 100 + 5 - 4 - 10);
  EXPECT_EQ(a.balances.reserved, 10);

  UpdateAccountCommand unfreeze = update("alice");
  unfreeze.frozen = false;
  ASSERT_OK(ledger_->update_account(unfreeze));
  EXPECT_OK(ledger_->reserve({"alice", 1, "req-new", kTtl, "", ""}));
  EXPECT_OK(ledger_->debit({"alice", 1, "debit-1", "refund"}));
}

TEST_P(AccountSettingsAndFeed, FrozenIsTheAnswerEvenWhenNothingIsAvailable) {
  make_account("alice", 0, 1);
  UpdateAccountCommand freeze = update("alice");
  freeze.frozen = true;
  ASSERT_OK(ledger_->update_account(freeze));
  EXPECT_CODE(ledger_->reserve({"alice", 1, "req-1", kTtl, "", ""}), Code::account_frozen);
  EXPECT_CODE(ledger_->debit({"alice", 1, "debit-1", ""}), Code::account_frozen);
}

TEST_P(AccountSettingsAndFeed, ALateChargeOfAFrozenAccountsExpiredHoldStillSettles) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1'000);
  UpdateAccountCommand freeze = update("alice");
  freeze.frozen = true;
  ASSERT_OK(ledger_->update_account(freeze));
  clock_.advance_ms(2'000);
  auto late = ledger_->commit({h.hold_id, std::nullopt, LateCommitPolicy::charge});
  ASSERT_OK(late);
  EXPECT_EQ(late->hold.late_outcome, LateOutcome::charged);
}

TEST_P(AccountSettingsAndFeed, SettingsChangesInOneBatchEachSeeTheOnesBefore) {
  make_account("alice");
  give("alice", 3, "ref-1");
  UpdateAccountCommand freeze = update("alice");
  freeze.frozen = true;
  UpdateAccountCommand thaw = update("alice");
  thaw.frozen = false;
  std::vector<Command> batch = {freeze, ReserveCommand{"alice", 1, "req-1", kTtl, "", "00000000000000a1"}, thaw,
                                ReserveCommand{"alice", 1, "req-2", kTtl, "", "00000000000000a2"}, freeze};
  std::vector<CommandResult> results;
  ASSERT_OK(store_->apply(batch, results));
  ASSERT_OK(store_->sync());
  ASSERT_EQ(results.size(), 5u);
  EXPECT_OK(results[0]);
  EXPECT_CODE(results[1], Code::account_frozen);
  EXPECT_OK(results[2]);
  EXPECT_OK(results[3]);
  EXPECT_OK(results[4]);
  std::vector<EventType> types;
  for (const Event& e : events("alice")) types.push_back(e.type);
  EXPECT_THAT(types, ElementsAre(EventType::credited, EventType::account_updated, EventType::account_updated,
                                 EventType::reserved, EventType::account_updated));
  EXPECT_TRUE(account("alice").frozen);
}

// --- the release reason, a debit's reason ------------------------------------------------------

TEST_P(AccountSettingsAndFeed, AReleaseReasonIsKeptOnTheHoldAndOnItsEvent) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold with = hold("alice", 2, "req-1");
  const Hold without = hold("alice", 3, "req-2");
  auto released = ledger_->release({with.hold_id, "the user closed the app"});
  ASSERT_OK(released);
  EXPECT_EQ(released->hold.release_reason, "the user closed the app");
  EXPECT_EQ(ledger_->get_hold(with.hold_id)->release_reason, "the user closed the app");
  const Event e = last_event("alice");
  EXPECT_EQ(e.type, EventType::released);
  EXPECT_EQ(e.reason, "the user closed the app");
  // A replay keeps the first reason.
  auto again = ledger_->release({with.hold_id, "something else"});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->hold.release_reason, "the user closed the app");

  ASSERT_OK(ledger_->release({without.hold_id, std::nullopt}));
  EXPECT_EQ(ledger_->get_hold(without.hold_id)->release_reason, std::nullopt);
  EXPECT_EQ(last_event("alice").reason, std::nullopt);
}

TEST_P(AccountSettingsAndFeed, AReasonTooLongIsInvalid) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 2, "req-1");
  EXPECT_CODE(ledger_->release({h.hold_id, std::string(limits::kReasonLengthMax + 1, 'x')}), Code::invalid_request);
  EXPECT_EQ(ledger_->get_hold(h.hold_id)->status, HoldStatus::active);
}

TEST_P(AccountSettingsAndFeed, ADebitsEventCarriesItsReason) {
  make_account("alice");
  give("alice", 10, "ref-1");
  ASSERT_OK(ledger_->debit({"alice", 3, "debit-1", "refund of order 7"}));
  EXPECT_EQ(last_event("alice").reason, "refund of order 7");
  ASSERT_OK(ledger_->debit({"alice", 1, "debit-2", ""}));
  EXPECT_EQ(last_event("alice").reason, std::nullopt);
  EXPECT_EQ(events("alice").front().reason, std::nullopt);  // a credit has none
}

// --- the kiosk's messages -----------------------------------------------------------------------

TEST_P(AccountSettingsAndFeed, TheKioskIsToldWhenNothingIsAvailable) {
  make_account("alice");
  give("alice", 2, "ref-1");
  hold("alice", 2, "req-1");
  auto r = ledger_->reserve({"alice", 1, "req-2", kTtl, "", ""});
  ASSERT_CODE(r, Code::insufficient_credits);
  EXPECT_EQ(r.error().available, 0);
  EXPECT_EQ(r.error().detail, "No credits available. Another device may be using this account right now.");
}

TEST_P(AccountSettingsAndFeed, TheKioskIsToldHowManyAreAvailableWhenSomeAre) {
  make_account("alice");
  give("alice", 3, "ref-1");
  auto r = ledger_->reserve({"alice", 5, "req-1", kTtl, "", ""});
  ASSERT_CODE(r, Code::insufficient_credits);
  EXPECT_EQ(r.error().detail, "Not enough credits: 3 available, 5 needed.");
  auto debit = ledger_->debit({"alice", 4, "debit-1", ""});
  ASSERT_CODE(debit, Code::insufficient_credits);
  EXPECT_EQ(debit.error().detail, "Not enough credits: 3 available, 4 needed.");
}

// --- the change feed ----------------------------------------------------------------------------

TEST_P(AccountSettingsAndFeed, TheFeedPagesEveryAccountsEventsInCommitOrderEachOnce) {
  make_account("alice");
  make_account("bob");
  give("alice", 10, "ref-1");
  give("bob", 10, "ref-2");
  const Hold a = hold("alice", 3, "req-1");
  const Hold b = hold("bob", 4, "req-2");
  ASSERT_OK(ledger_->commit({a.hold_id, std::nullopt, LateCommitPolicy::charge}));
  ASSERT_OK(ledger_->release({b.hold_id, "changed my mind"}));
  UpdateAccountCommand freeze = update("bob");
  freeze.frozen = true;
  ASSERT_OK(ledger_->update_account(freeze));

  std::vector<Event> per_account = events("alice");
  for (const Event& e : events("bob")) per_account.push_back(e);
  std::sort(per_account.begin(), per_account.end(), [](const Event& x, const Event& y) { return x.event_id < y.event_id; });
  ASSERT_EQ(per_account.size(), 7u);
  for (const std::int64_t page_size : {std::int64_t{1}, std::int64_t{3}, limits::kEventsPageMax}) {
    SCOPED_TRACE("page size " + std::to_string(page_size));
    EXPECT_EQ(follow(0, page_size), per_account);
  }
  EXPECT_EQ(last_event_id(), per_account.back().event_id);
  // From the middle on: exactly the rest.
  const std::vector<Event> rest(per_account.begin() + 4, per_account.end());
  EXPECT_EQ(follow(per_account[3].event_id, 2), rest);
  // Past the end: nothing, and next_after stays where it was.
  auto end = ledger_->read_feed(per_account.back().event_id, 10);
  ASSERT_OK(end);
  EXPECT_THAT(end->events, IsEmpty());
  EXPECT_EQ(end->next_after, per_account.back().event_id);
}

TEST_P(AccountSettingsAndFeed, TheFeedRefusesABadLimitOrCursor) {
  EXPECT_CODE(ledger_->read_feed(0, 0), Code::invalid_request);
  EXPECT_CODE(ledger_->read_feed(0, limits::kEventsPageMax + 1), Code::invalid_request);
  EXPECT_CODE(ledger_->read_feed(-1, 10), Code::invalid_request);
  EXPECT_CODE(ledger_->read_feed_waiting(0, 10, limits::kEventsWaitMsMax + 1), Code::invalid_request);
  auto empty = ledger_->read_feed(0, 10);
  ASSERT_OK(empty);
  EXPECT_THAT(empty->events, IsEmpty());
  EXPECT_EQ(empty->next_after, 0);
  EXPECT_EQ(last_event_id(), 0);
}

TEST_P(AccountSettingsAndFeed, AWaitingFeedReadWakesWhenSomethingIsCommitted) {
  make_account("alice");
  give("alice", 1, "ref-1");
  const std::int64_t cursor = last_event_id();
  const auto started = std::chrono::steady_clock::now();
  auto waiting = std::async(std::launch::async, [&] { return ledger_->read_feed_waiting(cursor, 100, 30'000); });
  // Wait until the read is registered, so that the credit below is what wakes it.
  while (ledger_->event_waiters().waiting() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  give("alice", 2, "ref-2");
  auto page = waiting.get();
  ASSERT_OK(page);
  ASSERT_EQ(page->events.size(), 1u);
  EXPECT_EQ(page->events[0].reference, "ref-2");
  EXPECT_EQ(page->next_after, page->events[0].event_id);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));  // woken, not timed out
  EXPECT_EQ(ledger_->event_waiters().waiting(), 0u);
}

TEST_P(AccountSettingsAndFeed, AWaitingFeedReadWithNothingNewAnswersEmptyAtItsDeadline) {
  make_account("alice");
  const std::int64_t cursor = last_event_id();
  const auto started = std::chrono::steady_clock::now();
  auto page = ledger_->read_feed_waiting(cursor, 100, 300);
  ASSERT_OK(page);
  EXPECT_THAT(page->events, IsEmpty());
  EXPECT_EQ(page->next_after, cursor);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(300));
  EXPECT_EQ(ledger_->event_waiters().waiting(), 0u);
}

TEST_P(AccountSettingsAndFeed, AFeedReadWithSomethingNewAnswersAtOnceWithoutWaiting) {
  make_account("alice");
  auto page = ledger_->read_feed_waiting(0, 100, 60'000);
  ASSERT_OK(page);
  EXPECT_THAT(page->events, IsEmpty());  // creating an account writes no event
  give("alice", 1, "ref-1");
  page = ledger_->read_feed_waiting(0, 100, 60'000);
  ASSERT_OK(page);
  EXPECT_EQ(page->events.size(), 1u);
}

TEST_P(AccountSettingsAndFeed, WaitersAreBoundedAndOneMoreIsOverloaded) {
  LedgerOptions options;
  options.event_waiters_max = 2;
  start_ledger(options);
  std::promise<Status> first, second, third;
  const auto far = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  ledger_->when_events_after(0, far, [&](Status s) { first.set_value(std::move(s)); });
  ledger_->when_events_after(0, far, [&](Status s) { second.set_value(std::move(s)); });
  ledger_->when_events_after(0, far, [&](Status s) { third.set_value(std::move(s)); });
  const Status refused = third.get_future().get();
  EXPECT_CODE(refused, Code::overloaded);
  // A commit wakes both that wait (ok: read again).
  make_account("alice");
  give("alice", 1, "ref-1");
  EXPECT_OK(first.get_future().get());
  EXPECT_OK(second.get_future().get());
}

TEST_P(AccountSettingsAndFeed, StoppingTheLedgerAnswersItsWaiters) {
  std::promise<Status> woke;
  ledger_->when_events_after(0, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                             [&](Status s) { woke.set_value(std::move(s)); });
  ledger_->stop();
  EXPECT_OK(woke.get_future().get());
}

INSTANTIATE_TEST_SUITE_P(AllBackends, AccountSettingsAndFeed, ::testing::ValuesIn(testing::all_backends()),
                         testing::BackendName());

}  // namespace
}  // namespace tollgate
