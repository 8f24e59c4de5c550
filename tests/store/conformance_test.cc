// THE store conformance suite: the behaviour every Store backend must have, written only against the
// Store interface and the Ledger, so that a backend added later (PostgreSQL) runs it unchanged.
//
// Time is a ManualClock; the reaper thread is off (tests call reap_once()). After every test, the
// audit of every account must be clean (TearDown).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "slices.h"
#include "core/limits.h"
#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::int64_t kMax = (std::int64_t{1} << 53) - 1;  // the largest balance (api.md)
constexpr std::int64_t kAmountMax = (std::int64_t{1} << 53) - 1;
constexpr std::int64_t kTtl = 60'000;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_OK(r) EXPECT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c))
#define ASSERT_CODE(r, c) ASSERT_EQ(code_name((r).code()), code_name(c))

// Balances as a type local to this file, so that failures print them readably.
struct Bal {
  std::int64_t available = 0, reserved = 0, used = 0, purchased = 0;
  friend bool operator==(const Bal&, const Bal&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Bal& b) {
    return os << "{available=" << b.available << " reserved=" << b.reserved << " used=" << b.used
              << " purchased=" << b.purchased << "}";
  }
};
Bal bal(const Balances& b) { return Bal{b.available, b.reserved, b.used, b.purchased}; }

std::vector<std::string> violation_messages(const AuditReport& report) {
  std::vector<std::string> out;
  for (const auto& v : report.violations) out.push_back(v.account_id + ": " + v.message);
  return out;
}

class StoreConformance : public ::testing::TestWithParam<testing::StoreBackend> {
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

  // (Re)starts the ledger over the same store with `options` (the reaper thread stays off).
  void start_ledger(LedgerOptions options) {
    ledger_.reset();
    options.reaper_interval_ms = 0;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  }

  void start_ledger_with_policy(LateCommitPolicy policy) {
    LedgerOptions options;
    options.late_commit = policy;
    start_ledger(options);
  }

  // --- setup steps that must succeed -----------------------------------------------------------
  void make_account(const std::string& id, std::int64_t overdraft = 0,
                    std::optional<std::int64_t> max_holds = std::nullopt) {
    auto r = ledger_->create_account({id, overdraft, max_holds});
    ASSERT_TRUE(r.ok()) << r.error().detail;
    ASSERT_TRUE(r->created);
  }

  void give(const std::string& id, std::int64_t amount, const std::string& reference) {
    auto r = ledger_->credit({id, amount, reference});
    ASSERT_TRUE(r.ok()) << r.error().detail;
    ASSERT_TRUE(r->created);
  }

  // Reserves and returns the new hold (an empty hold id when it failed: the test then fails).
  Hold hold(const std::string& account, std::int64_t amount, const std::string& request,
            std::optional<std::int64_t> ttl = kTtl) {
    auto r = ledger_->reserve({account, amount, request, ttl, "", ""});
    EXPECT_TRUE(r.ok()) << r.error().detail;
    if (!r.ok()) return Hold{};
    EXPECT_TRUE(r->created);
    return r->hold;
  }

  // --- reads that must succeed -----------------------------------------------------------------
  Account account(const std::string& id) {
    auto r = ledger_->get_account(id);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? *r : Account{};
  }

  Bal balances(const std::string& id) { return bal(account(id).balances); }

  Hold get_hold(const std::string& hold_id) {
    auto r = ledger_->get_hold(hold_id);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? *r : Hold{};
  }

  std::vector<Event> events(const std::string& id) {
    std::vector<Event> out;
    std::int64_t after = 0;
    for (;;) {
      auto page = ledger_->read_events(id, after, limits::kEventsPageMax);
      EXPECT_TRUE(page.ok()) << page.error().detail;
      if (!page.ok() || page->events.empty()) return out;
      out.insert(out.end(), page->events.begin(), page->events.end());
      after = page->next_after;
    }
  }

  Event last_event(const std::string& id) {
    const auto all = events(id);
    EXPECT_FALSE(all.empty());
    return all.empty() ? Event{} : all.back();
  }
  // Every event of the change feed after `after`, read in pages of `page_size`.
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

  std::vector<EventType> event_types(const std::string& id) {
    std::vector<EventType> out;
    for (const Event& e : events(id)) out.push_back(e.type);
    return out;
  }

  std::int64_t count_events(const std::string& id, EventType type) {
    const auto types = event_types(id);
    return std::count(types.begin(), types.end(), type);
  }

  std::vector<Hold> list(const HoldQuery& query, std::int64_t limit) {
    auto r = ledger_->list_holds(query, {limit});
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? r->items : std::vector<Hold>{};
  }

  std::vector<std::string> listed_ids(const HoldQuery& query, std::int64_t limit) {
    std::vector<std::string> out;
    for (const Hold& h : list(query, limit)) out.push_back(h.hold_id);
    return out;
  }

  // Everything a refused operation must leave as it was.
  struct Snapshot {
    Account account;
    std::vector<Event> events;
    friend bool operator==(const Snapshot&, const Snapshot&) = default;
    friend std::ostream& operator<<(std::ostream& os, const Snapshot& s) {
      os << s.account.account_id << " " << bal(s.account.balances) << " active_holds=" << s.account.active_holds
         << ", " << s.events.size() << " events:";
      for (const Event& e : s.events) {
        os << " #" << e.event_id << " " << event_type_name(e.type) << " " << e.amount;
      }
      return os;
    }
  };
  Snapshot snapshot(const std::string& id) { return Snapshot{account(id), events(id)}; }

  // Submits every command at once (so the group committer batches them) and waits for all.
  std::vector<CommandResult> run_all(std::vector<Command> commands) {
    std::vector<std::optional<CommandResult>> slots(commands.size());
    std::latch done(static_cast<std::ptrdiff_t>(commands.size()));
    for (std::size_t i = 0; i < commands.size(); ++i) {
      ledger_->submit(std::move(commands[i]), [&slots, &done, i](CommandResult r) {
        slots[i].emplace(std::move(r));
        done.count_down();
      });
    }
    done.wait();
    std::vector<CommandResult> out;
    for (auto& s : slots) out.push_back(std::move(*s));
    return out;
  }

  // One batch straight into Store::apply (the ledger is idle meanwhile). The ledger would fill in a
  // reservation's TTL and the random part of its hold id; direct_reserve() does it here.
  std::vector<CommandResult> apply(const std::vector<Command>& commands) {
    std::vector<CommandResult> results;
    const Status s = store_->apply(commands, results);
    EXPECT_TRUE(s.ok()) << s.error().detail;
    EXPECT_EQ(results.size(), commands.size());
    return results;
  }

  static ReserveCommand direct_reserve(const std::string& account, std::int64_t amount, const std::string& request) {
    return ReserveCommand{account, amount, request, kTtl, "", "r" + std::to_string(++direct_ids_)};
  }
  static inline int direct_ids_ = 0;

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

template <typename T>
const T& outcome(const CommandResult& r) {
  return std::get<T>(r.value());
}

// =============================================================================================
// accounts

TEST_P(StoreConformance, CreateAccountAnswersCreatedWithEmptyBalances) {
  auto r = ledger_->create_account({"alice", 0, std::nullopt});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->account.account_id, "alice");
  EXPECT_EQ(bal(r->account.balances), Bal{});
  EXPECT_EQ(r->account.overdraft_limit, 0);
  EXPECT_EQ(r->account.max_active_holds, std::nullopt);
  EXPECT_EQ(r->account.active_holds, 0);
  EXPECT_EQ(r->account.oldest_active_hold_age_ms, std::nullopt);
  EXPECT_EQ(r->account.created_at_ms, clock_.now_ms());
  EXPECT_EQ(account("alice"), r->account);
  EXPECT_THAT(events("alice"), IsEmpty());
}

TEST_P(StoreConformance, CreateAccountKeepsItsSettings) {
  auto r = ledger_->create_account({"bob", 50, 3});
  ASSERT_OK(r);
  const Account a = account("bob");
  EXPECT_EQ(a.overdraft_limit, 50);
  EXPECT_EQ(a.max_active_holds, 3);
}

TEST_P(StoreConformance, CreatingTheSameAccountAgainWithTheSameSettingsIsNotCreated) {
  make_account("alice", 5, 2);
  clock_.advance_ms(1000);
  auto again = ledger_->create_account({"alice", 5, 2});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->account.created_at_ms, clock_.now_ms() - 1000);  // the original account
}

TEST_P(StoreConformance, CreatingAnExistingAccountWithOtherSettingsIsAConflict) {
  make_account("alice", 5, 2);
  give("alice", 7, "ref-1");
  const Snapshot before = snapshot("alice");
  EXPECT_CODE(ledger_->create_account({"alice", 6, 2}), Code::conflict);
  EXPECT_CODE(ledger_->create_account({"alice", 5, 3}), Code::conflict);
  EXPECT_CODE(ledger_->create_account({"alice", 5, std::nullopt}), Code::conflict);
  EXPECT_CODE(ledger_->create_account({"alice", 0, std::nullopt}), Code::conflict);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, UnknownAccountIsNotFound) {
  EXPECT_CODE(ledger_->get_account("nobody"), Code::not_found);
  EXPECT_CODE(store_->get_account("nobody"), Code::not_found);
}

// =============================================================================================
// credits

TEST_P(StoreConformance, CreditAddsToAvailableAndPurchasedAndWritesAnEvent) {
  make_account("alice");
  auto r = ledger_->credit({"alice", 10, "ref-1"});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(bal(r->account.balances), (Bal{10, 0, 0, 10}));
  EXPECT_EQ(r->event.type, EventType::credited);
  EXPECT_EQ(r->event.account_id, "alice");
  EXPECT_EQ(r->event.amount, 10);
  EXPECT_EQ(r->event.reference, "ref-1");
  EXPECT_EQ(r->event.hold_id, std::nullopt);
  EXPECT_EQ(r->event.at_ms, clock_.now_ms());
  EXPECT_EQ(r->event.available_after, 10);
  EXPECT_EQ(r->event.reserved_after, 0);
  EXPECT_EQ(r->event.used_after, 0);
  EXPECT_GT(r->event.event_id, 0);
  EXPECT_THAT(events("alice"), ElementsAre(r->event));
  EXPECT_EQ(balances("alice"), (Bal{10, 0, 0, 10}));
}

TEST_P(StoreConformance, SameCreditReferenceAgainAddsNothing) {
  make_account("alice");
  auto first = ledger_->credit({"alice", 10, "ref-1"});
  ASSERT_OK(first);
  clock_.advance_ms(5);
  auto again = ledger_->credit({"alice", 10, "ref-1"});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->event, first->event);  // the original event
  EXPECT_EQ(bal(again->account.balances), (Bal{10, 0, 0, 10}));
  EXPECT_EQ(balances("alice"), (Bal{10, 0, 0, 10}));
  EXPECT_EQ(events("alice").size(), 1u);
}

TEST_P(StoreConformance, SameCreditReferenceWithAnotherAmountIsIdempotencyMismatch) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Snapshot before = snapshot("alice");
  auto r = ledger_->credit({"alice", 11, "ref-1"});
  ASSERT_CODE(r, Code::idempotency_mismatch);
  EXPECT_THAT(r.error().detail, ::testing::HasSubstr("ref-1"));
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, SameCreditReferenceOnAnotherAccountIsIdempotencyMismatch) {
  make_account("alice");
  make_account("bob");
  give("alice", 10, "ref-1");
  const Snapshot bob = snapshot("bob");
  EXPECT_CODE(ledger_->credit({"bob", 10, "ref-1"}), Code::idempotency_mismatch);
  EXPECT_EQ(snapshot("bob"), bob);
  EXPECT_EQ(balances("alice"), (Bal{10, 0, 0, 10}));
}

TEST_P(StoreConformance, CreditReferenceReusedForADebitIsIdempotencyMismatch) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Snapshot before = snapshot("alice");
  EXPECT_CODE(ledger_->debit({"alice", 10, "ref-1", ""}), Code::idempotency_mismatch);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, CreditToAnUnknownAccountIsNotFound) {
  EXPECT_CODE(ledger_->credit({"nobody", 10, "ref-1"}), Code::not_found);
  // The reference was not taken by the refused credit.
  make_account("alice");
  auto r = ledger_->credit({"alice", 10, "ref-1"});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
}

TEST_P(StoreConformance, CreditThatWouldOverflowIsRefusedAndChangesNothing) {
  // Balances stay within 2^53 − 1 (api.md), so that every JSON client reads them exactly.
  make_account("whale");
  ASSERT_OK(ledger_->credit({"whale", kAmountMax - 1023, "fill"}));
  ASSERT_EQ(balances("whale").purchased, kMax - 1023);
  const Snapshot before = snapshot("whale");

  auto over = ledger_->credit({"whale", 1024, "over"});
  ASSERT_CODE(over, Code::overflow);
  EXPECT_EQ(snapshot("whale"), before);

  auto exact = ledger_->credit({"whale", 1023, "exact"});
  ASSERT_OK(exact);
  EXPECT_EQ(bal(exact->account.balances), (Bal{kMax, 0, 0, kMax}));
  EXPECT_CODE(ledger_->credit({"whale", 1, "one-more"}), Code::overflow);
  EXPECT_CODE(ledger_->credit({"whale", kAmountMax, "far-over"}), Code::overflow);
  // The overflowing reference was not recorded: it still answers overflow, not a replay.
  EXPECT_CODE(ledger_->credit({"whale", 1024, "over"}), Code::overflow);
  EXPECT_EQ(balances("whale"), (Bal{kMax, 0, 0, kMax}));
}

TEST_P(StoreConformance, ReservationThatWouldOverflowReservedIsRefused) {
  // With an overdraft, reserved can exceed purchased; it must never pass 2^53 − 1.
  make_account("whale", kAmountMax);
  ASSERT_OK(ledger_->credit({"whale", kAmountMax, "fill"}));
  ASSERT_OK(ledger_->reserve({"whale", kAmountMax, "hold-all", kTtl, "", ""}));
  ASSERT_EQ(balances("whale"), (Bal{0, kMax, 0, kMax}));
  const Snapshot before = snapshot("whale");
  auto r = ledger_->reserve({"whale", 1, "one-more", kTtl, "", ""});
  ASSERT_CODE(r, Code::overflow);
  EXPECT_EQ(snapshot("whale"), before);
}

// =============================================================================================
// debits

TEST_P(StoreConformance, DebitRemovesFromAvailableAndPurchased) {
  make_account("alice");
  give("alice", 10, "ref-1");
  auto r = ledger_->debit({"alice", 4, "ref-2", "refund"});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->event.type, EventType::debited);
  EXPECT_EQ(r->event.amount, 4);
  EXPECT_EQ(r->event.reference, "ref-2");
  EXPECT_EQ(r->event.available_after, 6);
  EXPECT_EQ(bal(r->account.balances), (Bal{6, 0, 0, 6}));
  EXPECT_EQ(balances("alice"), (Bal{6, 0, 0, 6}));
}

TEST_P(StoreConformance, DebitOfMoreThanAvailableIsInsufficientWithAvailableAndRequested) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Snapshot before = snapshot("alice");
  auto r = ledger_->debit({"alice", 11, "ref-2", "refund"});
  ASSERT_CODE(r, Code::insufficient_credits);
  EXPECT_EQ(r.error().available, 10);
  EXPECT_EQ(r.error().requested, 11);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, DebitCannotTakeReservedCredits) {
  make_account("alice");
  give("alice", 10, "ref-1");
  hold("alice", 8, "req-1");
  auto r = ledger_->debit({"alice", 3, "ref-2", ""});
  ASSERT_CODE(r, Code::insufficient_credits);
  EXPECT_EQ(r.error().available, 2);
  EXPECT_EQ(r.error().requested, 3);
}

TEST_P(StoreConformance, DebitNeverUsesTheOverdraft) {
  make_account("alice", 100);
  EXPECT_CODE(ledger_->debit({"alice", 1, "ref-1", ""}), Code::insufficient_credits);
  EXPECT_EQ(balances("alice"), Bal{});
}

TEST_P(StoreConformance, DebitReplayWithTheSameReasonAddsNothing) {
  make_account("alice");
  give("alice", 10, "ref-1");
  auto first = ledger_->debit({"alice", 4, "ref-2", "refund"});
  ASSERT_OK(first);
  auto again = ledger_->debit({"alice", 4, "ref-2", "refund"});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->event, first->event);
  EXPECT_EQ(balances("alice"), (Bal{6, 0, 0, 6}));
}

TEST_P(StoreConformance, DebitReplayWithAnotherReasonOrAmountIsIdempotencyMismatch) {
  make_account("alice");
  give("alice", 10, "ref-1");
  ASSERT_OK(ledger_->debit({"alice", 4, "ref-2", "refund"}));
  const Snapshot before = snapshot("alice");
  EXPECT_CODE(ledger_->debit({"alice", 4, "ref-2", "correction"}), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->debit({"alice", 5, "ref-2", "refund"}), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->credit({"alice", 4, "ref-2"}), Code::idempotency_mismatch);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, DebitOfAnUnknownAccountIsNotFound) {
  EXPECT_CODE(ledger_->debit({"nobody", 1, "ref-1", ""}), Code::not_found);
}

TEST_P(StoreConformance, DebitMayUseCreditsOfAnOverdueHoldBeforeTheReaperRuns) {
  // Reads already show an overdue hold's credits as available; a debit must agree with them.
  make_account("alice");
  give("alice", 10, "ref-1");
  hold("alice", 10, "req-1", 1000);
  clock_.advance_ms(1000);
  ASSERT_EQ(account("alice").balances.available, 10);
  auto r = ledger_->debit({"alice", 4, "ref-2", "refund"});
  ASSERT_OK(r);
  EXPECT_EQ(balances("alice"), (Bal{6, 0, 0, 6}));
}

// =============================================================================================
// reserve

TEST_P(StoreConformance, ReserveMovesAvailableToReservedAndWritesAnEvent) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const std::int64_t now = clock_.now_ms();
  auto r = ledger_->reserve({"alice", 4, "req-1", 30'000, "", ""});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  const Hold& h = r->hold;
  EXPECT_FALSE(h.hold_id.empty());
  EXPECT_EQ(h.account_id, "alice");
  EXPECT_EQ(h.request_id, "req-1");
  EXPECT_EQ(h.amount, 4);
  EXPECT_EQ(h.committed_amount, 0);
  EXPECT_EQ(h.status, HoldStatus::active);
  EXPECT_EQ(h.late_outcome, LateOutcome::none);
  EXPECT_EQ(h.created_at_ms, now);
  EXPECT_EQ(h.expires_at_ms, now + 30'000);
  EXPECT_EQ(h.closed_at_ms, std::nullopt);
  EXPECT_EQ(h.metadata_json, "{}");
  EXPECT_EQ(get_hold(h.hold_id), h);

  const Account a = account("alice");
  EXPECT_EQ(bal(a.balances), (Bal{6, 4, 0, 10}));
  EXPECT_EQ(a.active_holds, 1);
  EXPECT_EQ(a.oldest_active_hold_age_ms, 0);

  const auto log = events("alice");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].type, EventType::reserved);
  EXPECT_EQ(log[1].hold_id, h.hold_id);
  EXPECT_EQ(log[1].amount, 4);
  EXPECT_EQ(log[1].available_after, 6);
  EXPECT_EQ(log[1].reserved_after, 4);
  EXPECT_EQ(log[1].used_after, 0);
}

TEST_P(StoreConformance, ReserveWithoutTtlUsesTheLedgersDefault) {
  LedgerOptions options;
  options.hold_ttl_ms_default = 12'345;
  start_ledger(options);
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 1, "req-1", std::nullopt);
  EXPECT_EQ(h.expires_at_ms, clock_.now_ms() + 12'345);
}

TEST_P(StoreConformance, ReserveKeepsTheMetadataAsGiven) {
  make_account("alice");
  give("alice", 10, "ref-1");
  auto r = ledger_->reserve({"alice", 1, "req-1", kTtl, R"({"job":"img-42","n":[1,2]})", ""});
  ASSERT_OK(r);
  EXPECT_EQ(get_hold(r->hold.hold_id).metadata_json, R"({"job":"img-42","n":[1,2]})");
}

TEST_P(StoreConformance, ReserveReplayAnswersTheSameHoldAndMovesNothing) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold first = hold("alice", 4, "req-1");
  const Snapshot before = snapshot("alice");
  clock_.advance_ms(10);
  auto again = ledger_->reserve({"alice", 4, "req-1", kTtl, "", ""});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->hold, first);
  EXPECT_EQ(snapshot("alice").events, before.events);
  EXPECT_EQ(balances("alice"), (Bal{6, 4, 0, 10}));
}

TEST_P(StoreConformance, ReserveReplayAnswersTheHoldAsItIsNowEvenAfterCommit) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold first = hold("alice", 4, "req-1");
  ASSERT_OK(ledger_->commit({first.hold_id, 3}));
  const Snapshot before = snapshot("alice");
  auto again = ledger_->reserve({"alice", 4, "req-1", kTtl, "", ""});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->hold.hold_id, first.hold_id);
  EXPECT_EQ(again->hold.status, HoldStatus::committed);
  EXPECT_EQ(again->hold.committed_amount, 3);
  EXPECT_EQ(snapshot("alice"), before);  // no second reservation
}

TEST_P(StoreConformance, ReserveReplayAfterTheDeadlineAnswersTheHoldAsExpired) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold first = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  auto again = ledger_->reserve({"alice", 4, "req-1", kTtl, "", ""});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->hold.hold_id, first.hold_id);
  EXPECT_EQ(again->hold.status, HoldStatus::expired);
  EXPECT_EQ(balances("alice"), (Bal{10, 0, 0, 10}));  // not reserved again
}

TEST_P(StoreConformance, ReserveReplayOnAnotherAccountOrAmountIsIdempotencyMismatch) {
  make_account("alice");
  make_account("bob");
  give("alice", 10, "ref-1");
  give("bob", 10, "ref-2");
  hold("alice", 4, "req-1");
  const Snapshot alice = snapshot("alice");
  const Snapshot bob = snapshot("bob");
  auto other_account = ledger_->reserve({"bob", 4, "req-1", kTtl, "", ""});
  ASSERT_CODE(other_account, Code::idempotency_mismatch);
  EXPECT_THAT(other_account.error().detail, ::testing::HasSubstr("req-1"));
  EXPECT_CODE(ledger_->reserve({"alice", 5, "req-1", kTtl, "", ""}), Code::idempotency_mismatch);
  EXPECT_EQ(snapshot("alice"), alice);
  EXPECT_EQ(snapshot("bob"), bob);
}

TEST_P(StoreConformance, ReserveOfMoreThanAvailableIsInsufficientWithTheKioskDetail) {
  make_account("alice");
  give("alice", 10, "ref-1");
  hold("alice", 7, "req-1");
  const Snapshot before = snapshot("alice");
  auto r = ledger_->reserve({"alice", 4, "req-2", kTtl, "", ""});
  ASSERT_CODE(r, Code::insufficient_credits);
  EXPECT_EQ(r.error().available, 3);
  EXPECT_EQ(r.error().requested, 4);
  EXPECT_EQ(r.error().detail, "Not enough credits: 3 available, 4 needed.");
  EXPECT_EQ(snapshot("alice"), before);
  // The refused request id was not taken: once there are credits, it reserves.
  give("alice", 1, "ref-2");
  auto later = ledger_->reserve({"alice", 4, "req-2", kTtl, "", ""});
  ASSERT_OK(later);
  EXPECT_TRUE(later->created);
}

TEST_P(StoreConformance, ReserveOnAnUnknownAccountIsNotFound) {
  EXPECT_CODE(ledger_->reserve({"nobody", 1, "req-1", kTtl, "", ""}), Code::not_found);
}

TEST_P(StoreConformance, ReserveBeyondMaxActiveHoldsIsTooManyHolds) {
  make_account("alice", 0, 2);
  give("alice", 10, "ref-1");
  const Hold a = hold("alice", 1, "req-1");
  hold("alice", 1, "req-2");
  const Snapshot before = snapshot("alice");
  auto r = ledger_->reserve({"alice", 1, "req-3", kTtl, "", ""});
  ASSERT_CODE(r, Code::too_many_holds);
  EXPECT_EQ(snapshot("alice"), before);
  // Ending one hold makes room again.
  ASSERT_OK(ledger_->release({a.hold_id}));
  EXPECT_OK(ledger_->reserve({"alice", 1, "req-3", kTtl, "", ""}));
}

TEST_P(StoreConformance, TooManyHoldsIsReportedBeforeInsufficientCredits) {
  make_account("alice", 0, 1);
  give("alice", 5, "ref-1");
  hold("alice", 5, "req-1");
  EXPECT_CODE(ledger_->reserve({"alice", 5, "req-2", kTtl, "", ""}), Code::too_many_holds);
}

TEST_P(StoreConformance, OverdraftLetsAvailableGoNegativeDownToTheLimit) {
  make_account("alice", 5);
  const Hold a = hold("alice", 3, "req-1");
  EXPECT_EQ(balances("alice"), (Bal{-3, 3, 0, 0}));
  const Hold b = hold("alice", 2, "req-2");
  EXPECT_EQ(balances("alice"), (Bal{-5, 5, 0, 0}));
  auto refused = ledger_->reserve({"alice", 1, "req-3", kTtl, "", ""});
  ASSERT_CODE(refused, Code::insufficient_credits);
  EXPECT_EQ(refused.error().available, -5);
  EXPECT_EQ(refused.error().requested, 1);
  ASSERT_OK(ledger_->commit({a.hold_id, std::nullopt}));
  ASSERT_OK(ledger_->commit({b.hold_id, std::nullopt}));
  EXPECT_EQ(balances("alice"), (Bal{-5, 0, 5, 0}));
  give("alice", 5, "ref-1");
  EXPECT_EQ(balances("alice"), (Bal{0, 0, 5, 5}));
}

// =============================================================================================
// commit and release

TEST_P(StoreConformance, CommitWithoutAmountMovesTheWholeHoldToUsed) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  clock_.advance_ms(7);
  auto r = ledger_->commit({h.hold_id, std::nullopt});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->hold.status, HoldStatus::committed);
  EXPECT_EQ(r->hold.committed_amount, 4);
  EXPECT_EQ(r->hold.closed_at_ms, clock_.now_ms());
  EXPECT_EQ(get_hold(h.hold_id), r->hold);
  const Account a = account("alice");
  EXPECT_EQ(bal(a.balances), (Bal{6, 0, 4, 10}));
  EXPECT_EQ(a.active_holds, 0);
  const Event last = events("alice").back();
  EXPECT_EQ(last.type, EventType::committed);
  EXPECT_EQ(last.hold_id, h.hold_id);
  EXPECT_EQ(last.amount, 4);
  EXPECT_EQ(last.used_after, 4);
}

TEST_P(StoreConformance, PartialCommitReturnsTheRestToAvailable) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 10, "req-1");
  auto r = ledger_->commit({h.hold_id, 4});
  ASSERT_OK(r);
  EXPECT_EQ(r->hold.committed_amount, 4);
  EXPECT_EQ(balances("alice"), (Bal{6, 0, 4, 10}));
  EXPECT_EQ(events("alice").back().amount, 4);
}

TEST_P(StoreConformance, SecondCommitWithSameAmountMovesNothing) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 10, "req-1");
  auto first = ledger_->commit({h.hold_id, 4});
  ASSERT_OK(first);
  const Snapshot before = snapshot("alice");
  clock_.advance_ms(100);
  auto again = ledger_->commit({h.hold_id, 4});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->hold, first->hold);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, SecondFullCommitWithoutAmountMovesNothing) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 10, "req-1");
  ASSERT_OK(ledger_->commit({h.hold_id, std::nullopt}));
  const Snapshot before = snapshot("alice");
  auto omitted = ledger_->commit({h.hold_id, std::nullopt});
  ASSERT_OK(omitted);
  EXPECT_FALSE(omitted->created);
  auto explicit_full = ledger_->commit({h.hold_id, 10});
  ASSERT_OK(explicit_full);
  EXPECT_FALSE(explicit_full->created);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, CommitAgainWithAnotherAmountIsHoldCommitted) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 10, "req-1");
  ASSERT_OK(ledger_->commit({h.hold_id, 4}));
  const Snapshot before = snapshot("alice");
  EXPECT_CODE(ledger_->commit({h.hold_id, 5}), Code::hold_committed);
  EXPECT_CODE(ledger_->commit({h.hold_id, std::nullopt}), Code::hold_committed);  // the whole 10
  EXPECT_EQ(snapshot("alice"), before);
  EXPECT_EQ(get_hold(h.hold_id).committed_amount, 4);
}

TEST_P(StoreConformance, CommitOfMoreThanHeldIsInvalidRequestAndTheHoldStaysActive) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  const Snapshot before = snapshot("alice");
  EXPECT_CODE(ledger_->commit({h.hold_id, 5}), Code::invalid_request);
  EXPECT_EQ(snapshot("alice"), before);
  EXPECT_EQ(get_hold(h.hold_id), h);
}

TEST_P(StoreConformance, CommitOfAReleasedHoldIsHoldReleased) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  ASSERT_OK(ledger_->release({h.hold_id}));
  const Snapshot before = snapshot("alice");
  EXPECT_CODE(ledger_->commit({h.hold_id, std::nullopt}), Code::hold_released);
  EXPECT_CODE(ledger_->commit({h.hold_id, 4}), Code::hold_released);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, ReleaseReturnsTheWholeHoldToAvailable) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  clock_.advance_ms(3);
  auto r = ledger_->release({h.hold_id});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->hold.status, HoldStatus::released);
  EXPECT_EQ(r->hold.committed_amount, 0);
  EXPECT_EQ(r->hold.closed_at_ms, clock_.now_ms());
  EXPECT_EQ(get_hold(h.hold_id), r->hold);
  EXPECT_EQ(balances("alice"), (Bal{10, 0, 0, 10}));
  const Event last = events("alice").back();
  EXPECT_EQ(last.type, EventType::released);
  EXPECT_EQ(last.amount, 4);
  EXPECT_EQ(last.hold_id, h.hold_id);
}

TEST_P(StoreConformance, ReleaseOfACommittedHoldIsHoldCommitted) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  ASSERT_OK(ledger_->commit({h.hold_id, 2}));
  const Snapshot before = snapshot("alice");
  EXPECT_CODE(ledger_->release({h.hold_id}), Code::hold_committed);
  EXPECT_EQ(snapshot("alice"), before);
  EXPECT_EQ(get_hold(h.hold_id).status, HoldStatus::committed);
}

TEST_P(StoreConformance, SecondReleaseIsNotCreatedAndMovesNothing) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  auto first = ledger_->release({h.hold_id});
  ASSERT_OK(first);
  const Snapshot before = snapshot("alice");
  auto again = ledger_->release({h.hold_id});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->hold, first->hold);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, OperationsOnAnUnknownHoldAreNotFound) {
  EXPECT_CODE(ledger_->commit({"hold_doesnotexist", std::nullopt}), Code::not_found);
  EXPECT_CODE(ledger_->release({"hold_doesnotexist"}), Code::not_found);
  EXPECT_CODE(ledger_->extend({"hold_doesnotexist", 1000}), Code::not_found);
  EXPECT_CODE(ledger_->get_hold("hold_doesnotexist"), Code::not_found);
  EXPECT_CODE(store_->get_hold("hold_doesnotexist"), Code::not_found);
}

TEST_P(StoreConformance, AHoldIsFoundOnlyByItsExactId) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  const Hold other = hold("alice", 1, "req-2");
  EXPECT_NE(h.hold_id, other.hold_id);
  const Snapshot before = snapshot("alice");
  std::string changed_last = h.hold_id;
  changed_last.back() = changed_last.back() == 'a' ? 'b' : 'a';
  for (const std::string& id : {h.hold_id + "0", h.hold_id.substr(0, h.hold_id.size() - 1), changed_last}) {
    SCOPED_TRACE(id);
    EXPECT_CODE(ledger_->get_hold(id), Code::not_found);
    EXPECT_CODE(ledger_->commit({id, std::nullopt}), Code::not_found);
    EXPECT_CODE(ledger_->release({id}), Code::not_found);
    EXPECT_CODE(ledger_->extend({id, 1000}), Code::not_found);
  }
  EXPECT_EQ(snapshot("alice"), before);
  EXPECT_EQ(get_hold(h.hold_id), h);
}

// =============================================================================================
// extend

TEST_P(StoreConformance, ExtendPushesTheExpiryToNowPlusTtl) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(900);
  const std::int64_t n = static_cast<std::int64_t>(events("alice").size());
  auto r = ledger_->extend({h.hold_id, 5000});
  ASSERT_OK(r);
  EXPECT_EQ(r->hold.status, HoldStatus::active);
  EXPECT_EQ(r->hold.expires_at_ms, clock_.now_ms() + 5000);
  EXPECT_EQ(get_hold(h.hold_id).expires_at_ms, clock_.now_ms() + 5000);
  // The extension is an `extended` event of the hold: nothing moves (api.md's event types).
  const auto after_extend = events("alice");
  ASSERT_EQ(static_cast<std::int64_t>(after_extend.size()), n + 1);
  EXPECT_EQ(after_extend.back().type, EventType::extended);
  EXPECT_EQ(after_extend.back().hold_id, h.hold_id);
  EXPECT_EQ(after_extend.back().amount, 0);
  // ... that carries the hold's new deadline (api.md), read back from the store, in the account's
  // events and in the feed alike.
  EXPECT_EQ(after_extend.back().expires_at_ms, std::optional<std::int64_t>(clock_.now_ms() + 5000));
  EXPECT_EQ(after_extend.back().expires_at_ms, std::optional<std::int64_t>(get_hold(h.hold_id).expires_at_ms));
  auto feed = store_->read_feed(after_extend.back().event_id - 1, 1);
  ASSERT_OK(feed);
  ASSERT_EQ(feed->events.size(), 1u);
  EXPECT_EQ(feed->events[0], after_extend.back());
  for (const Event& e : after_extend) {
    if (e.type != EventType::extended) {
      EXPECT_EQ(e.expires_at_ms, std::nullopt) << e;
    }
  }
  clock_.advance_ms(200);  // past the first deadline
  EXPECT_EQ(get_hold(h.hold_id).status, HoldStatus::active);
  ASSERT_OK(ledger_->reap_once());
  EXPECT_EQ(get_hold(h.hold_id).status, HoldStatus::active);
  EXPECT_EQ(static_cast<std::int64_t>(events("alice").size()), n + 1);  // nothing expired
  EXPECT_EQ(balances("alice"), (Bal{6, 4, 0, 10}));
  ASSERT_OK(ledger_->commit({h.hold_id, std::nullopt}));
}

TEST_P(StoreConformance, ExtendOfACommittedHoldIsHoldCommitted) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  ASSERT_OK(ledger_->commit({h.hold_id, std::nullopt}));
  const Hold before = get_hold(h.hold_id);
  EXPECT_CODE(ledger_->extend({h.hold_id, 5000}), Code::hold_committed);
  EXPECT_EQ(get_hold(h.hold_id), before);
}

TEST_P(StoreConformance, ExtendOfAReleasedHoldIsHoldReleased) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1");
  ASSERT_OK(ledger_->release({h.hold_id}));
  const Hold before = get_hold(h.hold_id);
  EXPECT_CODE(ledger_->extend({h.hold_id, 5000}), Code::hold_released);
  EXPECT_EQ(get_hold(h.hold_id), before);
}

TEST_P(StoreConformance, ExtendOfAnOverdueHoldIsHoldExpiredBeforeAndAfterTheReaper) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);  // exactly at the deadline
  EXPECT_CODE(ledger_->extend({h.hold_id, 5000}), Code::hold_expired);
  EXPECT_EQ(get_hold(h.hold_id).status, HoldStatus::expired);
  EXPECT_EQ(balances("alice"), (Bal{10, 0, 0, 10}));
  ASSERT_OK(ledger_->reap_once());
  EXPECT_CODE(ledger_->extend({h.hold_id, 5000}), Code::hold_expired);
  EXPECT_EQ(get_hold(h.hold_id).expires_at_ms, h.expires_at_ms);
}

// =============================================================================================
// expiry

TEST_P(StoreConformance, HoldOneMillisecondBeforeItsDeadlineIsStillActive) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(999);
  EXPECT_EQ(get_hold(h.hold_id).status, HoldStatus::active);
  const Account a = account("alice");
  EXPECT_EQ(bal(a.balances), (Bal{6, 4, 0, 10}));
  EXPECT_EQ(a.active_holds, 1);
  EXPECT_EQ(a.oldest_active_hold_age_ms, 999);
  auto reaped = ledger_->reap_once();
  ASSERT_OK(reaped);
  EXPECT_EQ(*reaped, 0);
}

TEST_P(StoreConformance, OverdueHoldReadsAsExpiredBeforeTheReaperRuns) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  const auto log_before = events("alice");
  clock_.advance_ms(1000);  // now == expires_at: overdue

  const Hold seen = get_hold(h.hold_id);
  EXPECT_EQ(seen.status, HoldStatus::expired);
  EXPECT_EQ(seen.closed_at_ms, h.expires_at_ms);
  EXPECT_EQ(seen.committed_amount, 0);

  const Account a = account("alice");
  EXPECT_EQ(bal(a.balances), (Bal{10, 0, 0, 10}));
  EXPECT_EQ(a.active_holds, 0);
  EXPECT_EQ(a.oldest_active_hold_age_ms, std::nullopt);

  EXPECT_THAT(listed_ids({"alice", HoldStatus::expired}, 100), ElementsAre(h.hold_id));
  EXPECT_THAT(listed_ids({"alice", HoldStatus::active}, 100), IsEmpty());
  const auto all = list({"alice"}, 100);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].status, HoldStatus::expired);

  EXPECT_EQ(events("alice"), log_before);  // reading wrote nothing
}

TEST_P(StoreConformance, ReaperWritesExactlyOneExpiredEventAndASecondRunWritesNone) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1500);
  const Account seen_before = account("alice");

  auto first = ledger_->reap_once();
  ASSERT_OK(first);
  EXPECT_EQ(*first, 1);
  auto log = events("alice");
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[2].type, EventType::expired);
  EXPECT_EQ(log[2].hold_id, h.hold_id);
  EXPECT_EQ(log[2].amount, 4);
  EXPECT_EQ(log[2].available_after, 10);
  EXPECT_EQ(log[2].reserved_after, 0);
  EXPECT_EQ(account("alice"), seen_before);  // the reaper changes nothing a reader could see
  const Hold reaped = get_hold(h.hold_id);
  EXPECT_EQ(reaped.status, HoldStatus::expired);
  EXPECT_EQ(reaped.closed_at_ms, h.expires_at_ms);

  auto second = ledger_->reap_once();
  ASSERT_OK(second);
  EXPECT_EQ(*second, 0);
  EXPECT_EQ(events("alice"), log);
  EXPECT_TRUE(ledger_->reaper_last_run_ms().has_value());
}

TEST_P(StoreConformance, ReaperExpiresOnlyOverdueHoldsOfEveryAccount) {
  make_account("alice");
  make_account("bob");
  give("alice", 10, "ref-1");
  give("bob", 10, "ref-2");
  const Hold a = hold("alice", 1, "req-a", 1000);
  const Hold b = hold("bob", 1, "req-b", 2000);
  const Hold c = hold("bob", 1, "req-c", 5000);
  clock_.advance_ms(2000);
  auto r = ledger_->reap_once();
  ASSERT_OK(r);
  EXPECT_EQ(*r, 2);
  EXPECT_EQ(get_hold(a.hold_id).status, HoldStatus::expired);
  EXPECT_EQ(get_hold(b.hold_id).status, HoldStatus::expired);
  EXPECT_EQ(get_hold(c.hold_id).status, HoldStatus::active);
  EXPECT_EQ(balances("bob"), (Bal{9, 1, 0, 10}));
}

TEST_P(StoreConformance, ReaperWorksThroughMoreHoldsThanOneBatch) {
  LedgerOptions options;
  options.reaper_batch_max = 2;
  start_ledger(options);
  make_account("alice");
  give("alice", 10, "ref-1");
  for (int i = 0; i < 5; ++i) hold("alice", 1, "req-" + std::to_string(i), 1000);
  clock_.advance_ms(1000);
  auto r = ledger_->reap_once();
  ASSERT_OK(r);
  EXPECT_EQ(*r, 5);
  EXPECT_EQ(listed_ids({"alice", HoldStatus::expired}, 100).size(), 5u);
  EXPECT_EQ(count_events("alice", EventType::expired), 5);
}

TEST_P(StoreConformance, ReserveSucceedsWhenAllCreditsAreInOverdueHolds) {
  make_account("alice");
  give("alice", 5, "ref-1");
  const Hold old = hold("alice", 5, "req-1", 1000);
  clock_.advance_ms(1000);
  auto r = ledger_->reserve({"alice", 5, "req-2", kTtl, "", ""});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(get_hold(old.hold_id).status, HoldStatus::expired);
  EXPECT_EQ(balances("alice"), (Bal{0, 5, 0, 5}));
  EXPECT_THAT(event_types("alice"),
              ElementsAre(EventType::credited, EventType::reserved, EventType::expired, EventType::reserved));
  auto reaped = ledger_->reap_once();
  ASSERT_OK(reaped);
  EXPECT_EQ(*reaped, 0);  // already expired, once
}

TEST_P(StoreConformance, MaxActiveHoldsCountsOnlyHoldsThatAreNotOverdue) {
  make_account("alice", 0, 1);
  give("alice", 5, "ref-1");
  hold("alice", 1, "req-1", 1000);
  EXPECT_CODE(ledger_->reserve({"alice", 1, "req-2", kTtl, "", ""}), Code::too_many_holds);
  clock_.advance_ms(1000);
  EXPECT_OK(ledger_->reserve({"alice", 1, "req-2", kTtl, "", ""}));
  EXPECT_EQ(account("alice").active_holds, 1);
}

TEST_P(StoreConformance, OldestActiveHoldAgeFollowsTheOldestHoldStillActive) {
  make_account("alice");
  give("alice", 10, "ref-1");
  EXPECT_EQ(account("alice").oldest_active_hold_age_ms, std::nullopt);
  hold("alice", 1, "req-1", 1000);
  clock_.advance_ms(250);
  const Hold second = hold("alice", 1, "req-2", kTtl);
  clock_.advance_ms(100);
  EXPECT_EQ(account("alice").oldest_active_hold_age_ms, 350);
  clock_.advance_ms(650);  // the first is overdue now
  EXPECT_EQ(account("alice").oldest_active_hold_age_ms, 750);
  ASSERT_OK(ledger_->release({second.hold_id}));
  EXPECT_EQ(account("alice").oldest_active_hold_age_ms, std::nullopt);
}

// =============================================================================================
// late commit

TEST_P(StoreConformance, LateCommitUnderChargeWithCreditsIsLateCharged) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(2000);
  ASSERT_OK(ledger_->reap_once());
  auto r = ledger_->commit({h.hold_id, std::nullopt});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->hold.status, HoldStatus::expired);
  EXPECT_EQ(r->hold.late_outcome, LateOutcome::charged);
  EXPECT_EQ(r->hold.committed_amount, 4);
  EXPECT_EQ(get_hold(h.hold_id), r->hold);
  EXPECT_EQ(balances("alice"), (Bal{6, 0, 4, 10}));
  const Event last = events("alice").back();
  EXPECT_EQ(last.type, EventType::late_charged);
  EXPECT_EQ(last.hold_id, h.hold_id);
  EXPECT_EQ(last.amount, 4);
  EXPECT_EQ(last.available_after, 6);
  EXPECT_EQ(last.used_after, 4);
}

TEST_P(StoreConformance, LateCommitBeforeTheReaperRanExpiresThenCharges) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  auto r = ledger_->commit({h.hold_id, 3});
  ASSERT_OK(r);
  EXPECT_EQ(r->hold.late_outcome, LateOutcome::charged);
  EXPECT_EQ(r->hold.committed_amount, 3);
  EXPECT_EQ(balances("alice"), (Bal{7, 0, 3, 10}));
  EXPECT_THAT(event_types("alice"),
              ElementsAre(EventType::credited, EventType::reserved, EventType::expired, EventType::late_charged));
  auto reaped = ledger_->reap_once();
  ASSERT_OK(reaped);
  EXPECT_EQ(*reaped, 0);
}

TEST_P(StoreConformance, LateCommitUnderChargeWithoutCreditsIsForgiven) {
  make_account("alice");
  give("alice", 4, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  hold("alice", 4, "req-2", kTtl);  // another device takes the returned credits
  const Bal before = balances("alice");
  ASSERT_EQ(before, (Bal{0, 4, 0, 4}));
  auto r = ledger_->commit({h.hold_id, std::nullopt});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->hold.status, HoldStatus::expired);
  EXPECT_EQ(r->hold.late_outcome, LateOutcome::forgiven);
  EXPECT_EQ(r->hold.committed_amount, 0);
  EXPECT_EQ(balances("alice"), before);
  EXPECT_EQ(events("alice").back().type, EventType::late_forgiven);
  EXPECT_EQ(events("alice").back().hold_id, h.hold_id);
}

TEST_P(StoreConformance, LateChargeMayUseTheOverdraftLikeAReservation) {
  make_account("alice", 5);
  give("alice", 4, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  hold("alice", 4, "req-2", kTtl);
  auto r = ledger_->commit({h.hold_id, std::nullopt});
  ASSERT_OK(r);
  EXPECT_EQ(r->hold.late_outcome, LateOutcome::charged);
  EXPECT_EQ(balances("alice"), (Bal{-4, 4, 4, 4}));
}

TEST_P(StoreConformance, LateCommitUnderChargeCountsCreditsOfOtherOverdueHoldsAsAvailable) {
  // Reads show every overdue hold's credits as available; the late charge must see them too.
  make_account("alice");
  give("alice", 8, "ref-1");
  const Hold first = hold("alice", 4, "req-1", 1000);
  hold("alice", 4, "req-2", 2000);
  clock_.advance_ms(1000);
  ASSERT_OK(ledger_->reap_once());                 // the first expires: 4 back
  hold("alice", 4, "req-3", kTtl);                 // ... and taken by another device
  clock_.advance_ms(1000);                         // the second is overdue: 4 available again
  ASSERT_EQ(account("alice").balances.available, 4);
  auto r = ledger_->commit({first.hold_id, std::nullopt});
  ASSERT_OK(r);
  EXPECT_EQ(r->hold.late_outcome, LateOutcome::charged);
  EXPECT_EQ(balances("alice"), (Bal{0, 4, 4, 8}));
}

TEST_P(StoreConformance, LateCommitUnderForgiveIsForgivenEvenWithCredits) {
  start_ledger_with_policy(LateCommitPolicy::forgive);
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  ASSERT_OK(ledger_->reap_once());
  auto r = ledger_->commit({h.hold_id, std::nullopt});
  ASSERT_OK(r);
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->hold.late_outcome, LateOutcome::forgiven);
  EXPECT_EQ(balances("alice"), (Bal{10, 0, 0, 10}));
  EXPECT_EQ(events("alice").back().type, EventType::late_forgiven);
}

TEST_P(StoreConformance, LateCommitUnderRejectIsHoldExpiredAndMovesNothing) {
  start_ledger_with_policy(LateCommitPolicy::reject);
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  ASSERT_OK(ledger_->reap_once());
  const Snapshot before = snapshot("alice");
  const Hold hold_before = get_hold(h.hold_id);
  auto r = ledger_->commit({h.hold_id, std::nullopt});
  ASSERT_CODE(r, Code::hold_expired);
  EXPECT_EQ(snapshot("alice"), before);
  EXPECT_EQ(get_hold(h.hold_id), hold_before);
}

TEST_P(StoreConformance, LateCommitUnderRejectBeforeTheReaperRanLeavesTheHoldExpired) {
  start_ledger_with_policy(LateCommitPolicy::reject);
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  const Account before = account("alice");
  EXPECT_CODE(ledger_->commit({h.hold_id, std::nullopt}), Code::hold_expired);
  EXPECT_EQ(account("alice"), before);
  EXPECT_EQ(get_hold(h.hold_id).status, HoldStatus::expired);
  EXPECT_EQ(get_hold(h.hold_id).late_outcome, LateOutcome::none);
  ASSERT_OK(ledger_->reap_once());
  EXPECT_EQ(count_events("alice", EventType::expired), 1);
}

TEST_P(StoreConformance, SecondLateCommitReplaysTheCharge) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  auto first = ledger_->commit({h.hold_id, 3});
  ASSERT_OK(first);
  const Snapshot before = snapshot("alice");
  auto again = ledger_->commit({h.hold_id, 3});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->hold, first->hold);
  EXPECT_CODE(ledger_->commit({h.hold_id, 4}), Code::hold_committed);
  EXPECT_CODE(ledger_->release({h.hold_id}), Code::hold_committed);
  EXPECT_CODE(ledger_->extend({h.hold_id, 1000}), Code::hold_expired);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, ForgivenLateCommitStaysForgivenWhateverIsAskedAgain) {
  start_ledger_with_policy(LateCommitPolicy::forgive);
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  ASSERT_OK(ledger_->commit({h.hold_id, std::nullopt}));
  const Snapshot before = snapshot("alice");
  start_ledger_with_policy(LateCommitPolicy::charge);  // even under another policy now
  auto again = ledger_->commit({h.hold_id, 2});
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->hold.late_outcome, LateOutcome::forgiven);
  auto release = ledger_->release({h.hold_id});
  ASSERT_OK(release);
  EXPECT_FALSE(release->created);
  EXPECT_EQ(snapshot("alice"), before);
}

TEST_P(StoreConformance, ReleaseOfAnExpiredHoldIsNotCreatedAndMovesNothing) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 4, "req-1", 1000);
  clock_.advance_ms(1000);
  ASSERT_OK(ledger_->reap_once());
  const Snapshot before = snapshot("alice");
  auto r = ledger_->release({h.hold_id});
  ASSERT_OK(r);
  EXPECT_FALSE(r->created);
  EXPECT_EQ(r->hold.status, HoldStatus::expired);
  EXPECT_EQ(snapshot("alice"), before);
}

// =============================================================================================
// events

TEST_P(StoreConformance, EventIdsIncreaseStrictlyInCommitOrderAcrossAccounts) {
  make_account("alice");
  make_account("bob");
  give("alice", 10, "ref-a1");
  give("bob", 10, "ref-b1");
  const Hold a = hold("alice", 2, "req-a");
  const Hold b = hold("bob", 3, "req-b");
  ASSERT_OK(ledger_->commit({b.hold_id, std::nullopt}));
  ASSERT_OK(ledger_->release({a.hold_id}));
  const auto ea = events("alice");
  const auto eb = events("bob");
  ASSERT_EQ(ea.size(), 3u);
  ASSERT_EQ(eb.size(), 3u);
  // The order the operations were committed in: a1 b1 a2 b2 b3 a3.
  EXPECT_LT(ea[0].event_id, eb[0].event_id);
  EXPECT_LT(eb[0].event_id, ea[1].event_id);
  EXPECT_LT(ea[1].event_id, eb[1].event_id);
  EXPECT_LT(eb[1].event_id, eb[2].event_id);
  EXPECT_LT(eb[2].event_id, ea[2].event_id);
  for (const auto& e : ea) EXPECT_EQ(e.account_id, "alice");
  for (const auto& e : eb) EXPECT_EQ(e.account_id, "bob");
}

TEST_P(StoreConformance, EveryEventRecordsItsMovementAndTheBalancesAfterIt) {
  make_account("alice");
  give("alice", 10, "ref-1");                                  // 10 0 0
  const Hold a = hold("alice", 6, "req-a");                    //  4 6 0
  clock_.advance_ms(1);
  ASSERT_OK(ledger_->commit({a.hold_id, 5}));                  //  5 0 5
  const Hold b = hold("alice", 2, "req-b");                    //  3 2 5
  ASSERT_OK(ledger_->release({b.hold_id}));                    //  5 0 5
  const Hold c = hold("alice", 1, "req-c", 1000);              //  4 1 5
  clock_.advance_ms(1000);
  ASSERT_OK(ledger_->reap_once());                             //  5 0 5
  ASSERT_OK(ledger_->debit({"alice", 5, "ref-2", "refund"}));  //  0 0 5
  struct Row {
    EventType type;
    std::int64_t amount;
    std::optional<std::string> hold_id;
    std::int64_t available, reserved, used;
  };
  const std::vector<Row> want = {
      {EventType::credited, 10, std::nullopt, 10, 0, 0}, {EventType::reserved, 6, a.hold_id, 4, 6, 0},
      {EventType::committed, 5, a.hold_id, 5, 0, 5},     {EventType::reserved, 2, b.hold_id, 3, 2, 5},
      {EventType::released, 2, b.hold_id, 5, 0, 5},      {EventType::reserved, 1, c.hold_id, 4, 1, 5},
      {EventType::expired, 1, c.hold_id, 5, 0, 5},       {EventType::debited, 5, std::nullopt, 0, 0, 5},
  };
  const auto log = events("alice");
  ASSERT_EQ(log.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(log[i].type, want[i].type);
    EXPECT_EQ(log[i].amount, want[i].amount);
    EXPECT_EQ(log[i].hold_id, want[i].hold_id);
    EXPECT_EQ(log[i].available_after, want[i].available);
    EXPECT_EQ(log[i].reserved_after, want[i].reserved);
    EXPECT_EQ(log[i].used_after, want[i].used);
    if (i > 0) {
      EXPECT_GT(log[i].event_id, log[i - 1].event_id);
    }
  }
  EXPECT_EQ(balances("alice"), (Bal{0, 0, 5, 5}));
}

TEST_P(StoreConformance, EventsArePagedWithAfterLimitAndNextAfter) {
  make_account("alice");
  for (int i = 0; i < 7; ++i) give("alice", 1, "ref-" + std::to_string(i));
  const auto all = events("alice");
  ASSERT_EQ(all.size(), 7u);

  std::vector<Event> paged;
  std::vector<std::size_t> sizes;
  std::int64_t after = 0;
  for (int guard = 0; guard < 10; ++guard) {
    auto page = ledger_->read_events("alice", after, 3);
    ASSERT_OK(page);
    if (page->events.empty()) {
      EXPECT_EQ(page->next_after, after);  // nothing read: next_after stays
      break;
    }
    sizes.push_back(page->events.size());
    EXPECT_EQ(page->next_after, page->events.back().event_id);
    EXPECT_GT(page->events.front().event_id, after);
    paged.insert(paged.end(), page->events.begin(), page->events.end());
    after = page->next_after;
  }
  EXPECT_THAT(sizes, ElementsAre(3u, 3u, 1u));
  EXPECT_EQ(paged, all);
}

TEST_P(StoreConformance, EventsAfterTheMiddleStartAfterIt) {
  make_account("alice");
  for (int i = 0; i < 4; ++i) give("alice", 1, "ref-" + std::to_string(i));
  const auto all = events("alice");
  auto page = ledger_->read_events("alice", all[1].event_id, 1000);
  ASSERT_OK(page);
  EXPECT_THAT(page->events, ElementsAre(all[2], all[3]));
  auto beyond = ledger_->read_events("alice", all[3].event_id + 1000, 10);
  ASSERT_OK(beyond);
  EXPECT_THAT(beyond->events, IsEmpty());
  EXPECT_EQ(beyond->next_after, all[3].event_id + 1000);
}

TEST_P(StoreConformance, EventsLimitMustBeFromOneTo1000) {
  make_account("alice");
  give("alice", 1, "ref-1");
  EXPECT_CODE(ledger_->read_events("alice", 0, 0), Code::invalid_request);
  EXPECT_CODE(ledger_->read_events("alice", 0, -1), Code::invalid_request);
  EXPECT_CODE(ledger_->read_events("alice", 0, 1001), Code::invalid_request);
  EXPECT_CODE(ledger_->read_events("alice", -1, 10), Code::invalid_request);
  auto one = ledger_->read_events("alice", 0, 1);
  ASSERT_OK(one);
  EXPECT_EQ(one->events.size(), 1u);
  EXPECT_OK(ledger_->read_events("alice", 0, 1000));
}

TEST_P(StoreConformance, EventsOfAnUnknownAccountAreNotFound) {
  EXPECT_CODE(ledger_->read_events("nobody", 0, 10), Code::not_found);
  EXPECT_CODE(store_->read_events("nobody", 0, 10), Code::not_found);
  make_account("alice");
  auto empty = ledger_->read_events("alice", 0, 10);
  ASSERT_OK(empty);
  EXPECT_THAT(empty->events, IsEmpty());
  EXPECT_EQ(empty->next_after, 0);
}

TEST_P(StoreConformance, EventsOfOneAccountAreNotMixedWithAnothers) {
  make_account("alice");
  make_account("bob");
  give("alice", 1, "ref-1");
  give("bob", 2, "ref-2");
  give("alice", 3, "ref-3");
  std::vector<std::int64_t> amounts;
  for (const auto& e : events("alice")) amounts.push_back(e.amount);
  EXPECT_THAT(amounts, ElementsAre(1, 3));
}

// =============================================================================================
// list_holds

TEST_P(StoreConformance, HoldsAreListedNewestFirst) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h1 = hold("alice", 1, "req-1");
  clock_.advance_ms(1);
  const Hold h2 = hold("alice", 1, "req-2");
  const Hold h3 = hold("alice", 1, "req-3");  // same millisecond: creation order still decides
  EXPECT_THAT(listed_ids({"alice", std::nullopt}, 100), ElementsAre(h3.hold_id, h2.hold_id, h1.hold_id));
}

TEST_P(StoreConformance, HoldsAreFilteredByAccount) {
  make_account("alice");
  make_account("bob");
  give("alice", 10, "ref-1");
  give("bob", 10, "ref-2");
  const Hold a = hold("alice", 1, "req-a");
  const Hold b = hold("bob", 1, "req-b");
  EXPECT_THAT(listed_ids({"alice", std::nullopt}, 100), ElementsAre(a.hold_id));
  EXPECT_THAT(listed_ids({"bob", std::nullopt}, 100), ElementsAre(b.hold_id));
  EXPECT_THAT(listed_ids({std::nullopt, std::nullopt}, 100), ElementsAre(b.hold_id, a.hold_id));
}

TEST_P(StoreConformance, HoldsAreFilteredByEffectiveStatus) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold committed = hold("alice", 1, "req-1");
  const Hold released = hold("alice", 1, "req-2");
  const Hold expired = hold("alice", 1, "req-3", 1000);
  const Hold active = hold("alice", 1, "req-4", kTtl);
  ASSERT_OK(ledger_->commit({committed.hold_id, std::nullopt}));
  ASSERT_OK(ledger_->release({released.hold_id}));
  clock_.advance_ms(1000);  // `expired` is overdue, not reaped
  EXPECT_THAT(listed_ids({"alice", HoldStatus::active}, 100), ElementsAre(active.hold_id));
  EXPECT_THAT(listed_ids({"alice", HoldStatus::committed}, 100), ElementsAre(committed.hold_id));
  EXPECT_THAT(listed_ids({"alice", HoldStatus::released}, 100), ElementsAre(released.hold_id));
  EXPECT_THAT(listed_ids({"alice", HoldStatus::expired}, 100), ElementsAre(expired.hold_id));
  ASSERT_OK(ledger_->reap_once());
  EXPECT_THAT(listed_ids({"alice", HoldStatus::expired}, 100), ElementsAre(expired.hold_id));
  EXPECT_THAT(listed_ids({"alice", HoldStatus::active}, 100), ElementsAre(active.hold_id));
}

TEST_P(StoreConformance, HoldsListIsCutAtTheLimitAfterFiltering) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold a1 = hold("alice", 1, "req-1");
  const Hold r1 = hold("alice", 1, "req-2");
  const Hold a2 = hold("alice", 1, "req-3");
  const Hold r2 = hold("alice", 1, "req-4");
  const Hold a3 = hold("alice", 1, "req-5");
  ASSERT_OK(ledger_->release({r1.hold_id}));
  ASSERT_OK(ledger_->release({r2.hold_id}));
  EXPECT_THAT(listed_ids({"alice", std::nullopt}, 2), ElementsAre(a3.hold_id, r2.hold_id));
  EXPECT_THAT(listed_ids({"alice", HoldStatus::active}, 2), ElementsAre(a3.hold_id, a2.hold_id));
  EXPECT_THAT(listed_ids({"alice", HoldStatus::active}, 1), ElementsAre(a3.hold_id));
  EXPECT_THAT(listed_ids({"alice", HoldStatus::active}, 1000), ElementsAre(a3.hold_id, a2.hold_id, a1.hold_id));
}

TEST_P(StoreConformance, HoldsLimitMustBeFromOneTo1000) {
  EXPECT_CODE(ledger_->list_holds({}, {0}), Code::invalid_request);
  EXPECT_CODE(ledger_->list_holds({}, {-1}), Code::invalid_request);
  EXPECT_CODE(ledger_->list_holds({}, {1001}), Code::invalid_request);
  EXPECT_OK(ledger_->list_holds({}, {1}));
  EXPECT_OK(ledger_->list_holds({}, {1000}));
}

// =============================================================================================
// group commit: one Store::apply batch

TEST_P(StoreConformance, ABatchAnswersEveryCommandInOrder) {
  const auto results = apply({CreateAccountCommand{"alice", 0, std::nullopt},
                              CreditCommand{"alice", 5, "ref-1"},
                              CreateAccountCommand{"alice", 0, std::nullopt}});
  ASSERT_EQ(results.size(), 3u);
  ASSERT_OK(results[0]);
  EXPECT_TRUE(outcome<AccountOutcome>(results[0]).created);
  ASSERT_OK(results[1]);
  EXPECT_EQ(bal(outcome<TransferOutcome>(results[1]).account.balances), (Bal{5, 0, 0, 5}));
  ASSERT_OK(results[2]);
  EXPECT_FALSE(outcome<AccountOutcome>(results[2]).created);
  EXPECT_EQ(bal(outcome<AccountOutcome>(results[2]).account.balances), (Bal{5, 0, 0, 5}));
}

TEST_P(StoreConformance, ARefusedCommandInTheMiddleOfABatchDoesNotUndoTheOthers) {
  make_account("alice");
  const auto results = apply({CreditCommand{"alice", 5, "ref-1"},
                              DebitCommand{"alice", 100, "ref-2", ""},
                              CreditCommand{"nobody", 1, "ref-3"},
                              CreditCommand{"alice", 1, "ref-4"}});
  ASSERT_EQ(results.size(), 4u);
  EXPECT_OK(results[0]);
  ASSERT_CODE(results[1], Code::insufficient_credits);
  EXPECT_EQ(results[1].error().available, 5);
  EXPECT_EQ(results[1].error().requested, 100);
  EXPECT_CODE(results[2], Code::not_found);
  EXPECT_OK(results[3]);
  EXPECT_EQ(balances("alice"), (Bal{6, 0, 0, 6}));
  EXPECT_THAT(event_types("alice"), ElementsAre(EventType::credited, EventType::credited));
  // The refused debit did not take its reference.
  auto debit = ledger_->debit({"alice", 1, "ref-2", ""});
  ASSERT_OK(debit);
  EXPECT_TRUE(debit->created);
}

TEST_P(StoreConformance, EachCommandOfABatchSeesTheOnesBeforeIt) {
  make_account("alice");
  const auto results = apply({CreditCommand{"alice", 1, "ref-1"},      // 1 available
                              direct_reserve("alice", 1, "req-1"),       // sees the credit
                              DebitCommand{"alice", 1, "ref-2", ""},     // sees the reservation: refused
                              CreditCommand{"alice", 2, "ref-3"},
                              direct_reserve("alice", 2, "req-2")});     // sees the second credit
  ASSERT_EQ(results.size(), 5u);
  ASSERT_OK(results[0]);
  ASSERT_OK(results[1]);
  EXPECT_EQ(outcome<HoldOutcome>(results[1]).hold.status, HoldStatus::active);
  ASSERT_CODE(results[2], Code::insufficient_credits);
  EXPECT_EQ(results[2].error().available, 0);
  ASSERT_OK(results[3]);
  ASSERT_OK(results[4]);
  EXPECT_EQ(balances("alice"), (Bal{0, 3, 0, 3}));
}

TEST_P(StoreConformance, AHoldMadeInABatchCanBeCommittedInTheNext) {
  make_account("alice");
  const auto made = apply({CreditCommand{"alice", 1, "ref-1"}, direct_reserve("alice", 1, "req-1")});
  ASSERT_OK(made[1]);
  const std::string hold_id = outcome<HoldOutcome>(made[1]).hold.hold_id;
  const auto done = apply({CommitCommand{hold_id, std::nullopt, LateCommitPolicy::charge},
                           CommitCommand{hold_id, std::nullopt, LateCommitPolicy::charge}});
  ASSERT_OK(done[0]);
  EXPECT_TRUE(outcome<HoldOutcome>(done[0]).created);
  ASSERT_OK(done[1]);
  EXPECT_FALSE(outcome<HoldOutcome>(done[1]).created);  // sees the first commit: a replay
  EXPECT_EQ(balances("alice"), (Bal{0, 0, 1, 1}));
}

TEST_P(StoreConformance, TwoReservationsOfTheLastCreditInOneBatchExactlyOneSucceeds) {
  make_account("alice");
  give("alice", 1, "ref-1");
  const auto results = apply({direct_reserve("alice", 1, "req-phone"), direct_reserve("alice", 1, "req-tablet")});
  ASSERT_EQ(results.size(), 2u);
  ASSERT_OK(results[0]);
  ASSERT_CODE(results[1], Code::insufficient_credits);
  EXPECT_EQ(results[1].error().available, 0);
  EXPECT_EQ(results[1].error().requested, 1);
  EXPECT_EQ(balances("alice"), (Bal{0, 1, 0, 1}));
  const auto holds = list({"alice"}, 100);
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_EQ(holds[0].request_id, "req-phone");
  EXPECT_EQ(holds[0].hold_id, outcome<HoldOutcome>(results[0]).hold.hold_id);
}

TEST_P(StoreConformance, TheSameRequestTwiceInOneBatchMakesOneHold) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const auto results = apply({direct_reserve("alice", 3, "req-1"), direct_reserve("alice", 3, "req-1")});
  ASSERT_OK(results[0]);
  ASSERT_OK(results[1]);
  EXPECT_TRUE(outcome<HoldOutcome>(results[0]).created);
  EXPECT_FALSE(outcome<HoldOutcome>(results[1]).created);
  EXPECT_EQ(outcome<HoldOutcome>(results[1]).hold.hold_id, outcome<HoldOutcome>(results[0]).hold.hold_id);
  EXPECT_EQ(list({"alice"}, 100).size(), 1u);
  EXPECT_EQ(balances("alice"), (Bal{7, 3, 0, 10}));
}

// A command in the middle of a batch that needs more than one conditional write (here: expiring a
// zombie first) is applied at its place: the commands after it see its effects, those before it
// do not. (PostgreSQL sends runs of reserve/commit/release in one round trip; this is the case where
// one of them has to stop the run.)
TEST_P(StoreConformance, ACommandThatFirstExpiresAZombieIsSeenByTheCommandsAfterItInTheBatch) {
  make_account("alice");
  give("alice", 2, "ref-1");
  ASSERT_OK(apply({direct_reserve("alice", 2, "req-zombie")})[0]);
  clock_.advance_ms(kTtl + 1);  // the zombie holds both credits until someone expires it
  const auto results = apply({direct_reserve("alice", 3, "req-too-much"),  // refused, after expiring it
                              direct_reserve("alice", 1, "req-a"),          // fits only once it expired
                              direct_reserve("alice", 1, "req-b"),          // the last credit
                              direct_reserve("alice", 1, "req-c"),          // refused
                              direct_reserve("alice", 1, "req-a")});        // a replay of req-a
  ASSERT_EQ(results.size(), 5u);
  ASSERT_CODE(results[0], Code::insufficient_credits);
  ASSERT_OK(results[1]);
  ASSERT_OK(results[2]);
  ASSERT_CODE(results[3], Code::insufficient_credits);
  ASSERT_OK(results[4]);
  EXPECT_FALSE(outcome<HoldOutcome>(results[4]).created);
  EXPECT_EQ(outcome<HoldOutcome>(results[4]).hold.hold_id, outcome<HoldOutcome>(results[1]).hold.hold_id);
  EXPECT_EQ(balances("alice"), (Bal{0, 2, 0, 2}));
  std::vector<std::string> types;
  for (const Event& e : events("alice")) types.push_back(std::string(event_type_name(e.type)));
  EXPECT_EQ(types, (std::vector<std::string>{"credited", "reserved", "expired", "reserved", "reserved"}));
}

TEST_P(StoreConformance, ManyConcurrentReservationsNeverOverspend) {
  make_account("alice");
  give("alice", 10, "ref-1");
  std::vector<Command> commands;
  for (int i = 0; i < 50; ++i) commands.push_back(ReserveCommand{"alice", 1, "req-" + std::to_string(i), kTtl, "", ""});
  int ok = 0;
  for (const auto& r : run_all(std::move(commands))) {
    if (r.ok()) {
      ++ok;
    } else {
      EXPECT_CODE(r, Code::insufficient_credits);
    }
  }
  EXPECT_EQ(ok, 10);
  EXPECT_EQ(balances("alice"), (Bal{0, 10, 0, 10}));
}

// --- API keys ------------------------------------------------------------------------------------
TEST_P(StoreConformance, AnAccountKeyIsFoundByItsSecretHashUntilItIsRevoked) {
  make_account("alice");
  const std::string hash(64, 'a');
  auto created = ledger_->run(CreateKeyCommand{"key_1", std::string("alice"), hash});
  ASSERT_OK(created);
  auto found = store_->find_key(hash);
  ASSERT_OK(found);
  ASSERT_TRUE(found->key.has_value());
  EXPECT_EQ(*found->key->account_id, "alice");
  EXPECT_FALSE(found->key->revoked_at_ms.has_value());
  ASSERT_OK(ledger_->run(RevokeKeyCommand{"key_1"}));
  auto again = ledger_->run(RevokeKeyCommand{"key_1"});
  ASSERT_OK(again);
  EXPECT_FALSE(std::get<KeyOutcome>(again.value()).created);  // revoking twice changes nothing
  auto revoked = store_->find_key(hash);
  ASSERT_OK(revoked);
  ASSERT_TRUE(revoked->key.has_value());
  EXPECT_TRUE(revoked->key->revoked_at_ms.has_value());
}

TEST_P(StoreConformance, AKeyForAnUnknownAccountIsNotCreated) {
  auto created = ledger_->run(CreateKeyCommand{"key_1", std::string("nobody"), std::string(64, 'b')});
  EXPECT_CODE(created, Code::not_found);
  auto found = store_->find_key(std::string(64, 'b'));
  ASSERT_OK(found);
  EXPECT_FALSE(found->key.has_value());
}

TEST_P(StoreConformance, TheAdminKeyCannotBeRevoked) {
  auto has_before = store_->has_admin_key();
  ASSERT_OK(has_before);
  EXPECT_FALSE(*has_before);
  ASSERT_OK(ledger_->run(CreateKeyCommand{"admin", std::nullopt, std::string(64, 'c')}));
  auto revoked = ledger_->run(RevokeKeyCommand{"admin"});
  EXPECT_CODE(revoked, Code::conflict);
  auto has_after = store_->has_admin_key();
  ASSERT_OK(has_after);
  EXPECT_TRUE(*has_after);
}

// api.md: configuring an admin key retires the generated one. The server does so at every start
// with a key configured, so retiring is idempotent; afterwards revoking it is a replay.
TEST_P(StoreConformance, AConfiguredAdminKeyRetiresTheGeneratedOneOnceAndAgainIsAReplay) {
  const std::string hash(64, 'c');
  ASSERT_OK(ledger_->run(CreateKeyCommand{"admin", std::nullopt, hash}));
  auto retired = ledger_->run(RevokeKeyCommand{"admin", /*replaced_by_configured_admin_key=*/true});
  ASSERT_OK(retired);
  EXPECT_TRUE(std::get<KeyOutcome>(retired.value()).created);
  auto has = store_->has_admin_key();
  ASSERT_OK(has);
  EXPECT_FALSE(*has);
  auto found = store_->find_key(hash);
  ASSERT_OK(found);
  ASSERT_TRUE(found->key.has_value());
  ASSERT_TRUE(found->key->revoked_at_ms.has_value());
  const std::int64_t revoked_at_ms = *found->key->revoked_at_ms;

  for (const bool configured : {true, false}) {  // the next start; DELETE /v1/keys/admin
    auto again = ledger_->run(RevokeKeyCommand{"admin", configured});
    ASSERT_OK(again);
    EXPECT_FALSE(std::get<KeyOutcome>(again.value()).created);
    EXPECT_EQ(std::get<KeyOutcome>(again.value()).key.revoked_at_ms, revoked_at_ms);
  }
  // Never generated: nothing to retire.
  EXPECT_CODE(ledger_->run(RevokeKeyCommand{"admin-2", true}), Code::not_found);
}

TEST_P(StoreConformance, ListingTheHoldsOfAnUnknownAccountIsNotFound) {
  auto listed = ledger_->list_holds(HoldQuery{std::string("nobody")}, PageRequest{10});
  EXPECT_CODE(listed, Code::not_found);
}

// --- the server's sampled audit ------------------------------------------------------------------
TEST_P(StoreConformance, AccountIdsAreListedInOrderAfterACursor) {
  make_account("carol");
  make_account("alice");
  make_account("bob");
  auto first = store_->list_account_ids("", 2);
  ASSERT_OK(first);
  EXPECT_THAT(*first, ElementsAre("alice", "bob"));
  auto rest = store_->list_account_ids("bob", 2);
  ASSERT_OK(rest);
  EXPECT_THAT(*rest, ElementsAre("carol"));
  EXPECT_CODE(store_->list_account_ids("", 0), Code::invalid_request);
}

TEST_P(StoreConformance, TheAuditSamplerVisitsEveryAccountInTurnAndWrapsAround) {
  auto empty = ledger_->audit_sample_once();
  ASSERT_OK(empty);
  EXPECT_EQ(empty->accounts_checked, 0);  // nothing to sample yet
  make_account("alice");
  make_account("bob");
  give("bob", 5, "bob-1");
  for (int i = 0; i < 5; ++i) {  // two accounts, five samples: it wraps around
    auto report = ledger_->audit_sample_once();
    ASSERT_OK(report);
    ASSERT_EQ(report->accounts_checked, 1);
    EXPECT_THAT(report->violations, IsEmpty());
  }
  EXPECT_EQ(ledger_->sampled_accounts(), 5u);
  EXPECT_EQ(ledger_->sampled_violations(), 0u);
}

// =============================================================================================
// Account settings (PATCH: overdraft_limit, max_active_holds, frozen; account_updated events), the
// release reason, the kiosk's two insufficient_credits messages, and the change feed (every
// account's events in commit order, and waiting for them).

UpdateAccountCommand update(const std::string& id) { return UpdateAccountCommand{id, {}, {}, {}}; }

// --- PATCH: each field ------------------------------------------------------------------------------

TEST_P(StoreConformance, RaisingTheOverdraftLimitLetsReservationsGoBelowZeroAndIsAnEvent) {
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

TEST_P(StoreConformance, MaxActiveHoldsCanBeSetAndCleared) {
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

TEST_P(StoreConformance, SeveralFieldsChangeTogetherInOneEvent) {
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

TEST_P(StoreConformance, AnUpdateThatChangesNothingIsAReplayWithoutAnEvent) {
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

TEST_P(StoreConformance, UpdatingAnAccountThatDoesNotExistIsNotFound) {
  UpdateAccountCommand c = update("ghost");
  c.frozen = true;
  EXPECT_CODE(ledger_->update_account(c), Code::not_found);
}

TEST_P(StoreConformance, BadSettingsAreInvalidAndChangeNothing) {
  make_account("alice");
  UpdateAccountCommand negative = update("alice");
  negative.overdraft_limit = -1;
  EXPECT_CODE(ledger_->update_account(negative), Code::invalid_request);
  UpdateAccountCommand zero_holds = update("alice");
  zero_holds.max_active_holds = std::optional<std::int64_t>(0);
  EXPECT_CODE(ledger_->update_account(zero_holds), Code::invalid_request);
  EXPECT_THAT(events("alice"), IsEmpty());
}

TEST_P(StoreConformance, LoweringTheOverdraftBelowWhatIsOverdrawnIsAConflictAndChangesNothing) {
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

TEST_P(StoreConformance, AnOverdueHoldNoLongerCountsAgainstLoweringTheOverdraft) {
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

TEST_P(StoreConformance, AFrozenAccountRefusesNewHoldsAndDebitsWhileItsHoldsStillEnd) {
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

TEST_P(StoreConformance, FrozenIsTheAnswerEvenWhenNothingIsAvailable) {
  make_account("alice", 0, 1);
  UpdateAccountCommand freeze = update("alice");
  freeze.frozen = true;
  ASSERT_OK(ledger_->update_account(freeze));
  EXPECT_CODE(ledger_->reserve({"alice", 1, "req-1", kTtl, "", ""}), Code::account_frozen);
  EXPECT_CODE(ledger_->debit({"alice", 1, "debit-1", ""}), Code::account_frozen);
}

TEST_P(StoreConformance, ALateChargeOfAFrozenAccountsExpiredHoldStillSettles) {
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

TEST_P(StoreConformance, SettingsChangesInOneBatchEachSeeTheOnesBefore) {
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

TEST_P(StoreConformance, AReleaseReasonIsKeptOnTheHoldAndOnItsEvent) {
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

TEST_P(StoreConformance, AReasonTooLongIsInvalid) {
  make_account("alice");
  give("alice", 10, "ref-1");
  const Hold h = hold("alice", 2, "req-1");
  EXPECT_CODE(ledger_->release({h.hold_id, std::string(limits::kReasonLengthMax + 1, 'x')}), Code::invalid_request);
  EXPECT_EQ(ledger_->get_hold(h.hold_id)->status, HoldStatus::active);
}

TEST_P(StoreConformance, ADebitsEventCarriesItsReason) {
  make_account("alice");
  give("alice", 10, "ref-1");
  ASSERT_OK(ledger_->debit({"alice", 3, "debit-1", "refund of order 7"}));
  EXPECT_EQ(last_event("alice").reason, "refund of order 7");
  ASSERT_OK(ledger_->debit({"alice", 1, "debit-2", ""}));
  EXPECT_EQ(last_event("alice").reason, std::nullopt);
  EXPECT_EQ(events("alice").front().reason, std::nullopt);  // a credit has none
}

// --- the kiosk's messages -----------------------------------------------------------------------

TEST_P(StoreConformance, TheKioskIsToldWhenNothingIsAvailable) {
  make_account("alice");
  give("alice", 2, "ref-1");
  hold("alice", 2, "req-1");
  auto r = ledger_->reserve({"alice", 1, "req-2", kTtl, "", ""});
  ASSERT_CODE(r, Code::insufficient_credits);
  EXPECT_EQ(r.error().available, 0);
  EXPECT_EQ(r.error().detail, "No credits available. Another device may be using this account right now.");
}

TEST_P(StoreConformance, TheKioskIsToldHowManyAreAvailableWhenSomeAre) {
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

TEST_P(StoreConformance, TheFeedPagesEveryAccountsEventsInCommitOrderEachOnce) {
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

TEST_P(StoreConformance, TheFeedRefusesABadLimitOrCursor) {
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

TEST_P(StoreConformance, AWaitingFeedReadWakesWhenSomethingIsCommitted) {
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

TEST_P(StoreConformance, AWaitingFeedReadWithNothingNewAnswersEmptyAtItsDeadline) {
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

TEST_P(StoreConformance, AFeedReadWithSomethingNewAnswersAtOnceWithoutWaiting) {
  make_account("alice");
  auto page = ledger_->read_feed_waiting(0, 100, 0);  // (a wait here would run to its end: nothing comes)
  ASSERT_OK(page);
  EXPECT_THAT(page->events, IsEmpty());  // creating an account writes no event
  give("alice", 1, "ref-1");
  const auto asked = std::chrono::steady_clock::now();
  page = ledger_->read_feed_waiting(0, 100, 60'000);
  ASSERT_OK(page);
  EXPECT_EQ(page->events.size(), 1u);
  // At once: not after the wait (a bound far above any scheduling delay, far below the minute).
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(30));
}

TEST_P(StoreConformance, WaitersAreBoundedAndOneMoreIsOverloaded) {
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

TEST_P(StoreConformance, StoppingTheLedgerAnswersItsWaiters) {
  std::promise<Status> woke;
  ledger_->when_events_after(0, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                             [&](Status s) { woke.set_value(std::move(s)); });
  ledger_->stop();
  EXPECT_OK(woke.get_future().get());
}

// --- credit lots (core/lots.h): each backend's loads, writes and reads of them -----------------------

CreditCommand lot_credit(const std::string& account, std::int64_t amount, const std::string& reference,
                         std::int64_t priority, std::optional<std::int64_t> expires_at_ms) {
  CreditCommand c{account, amount, reference};
  c.lot = LotTerms{expires_at_ms, priority, LotCategory::paid};
  return c;
}

TEST_P(StoreConformance, LotsAreSpentInOrderAndAnExpiredLotKeepsWhatItsHoldsGiveBack) {
  make_account("alice");
  give("alice", 10, "plain");
  const std::int64_t soon = clock_.now_ms() + 1'000;
  ASSERT_OK(ledger_->credit(lot_credit("alice", 5, "expiring", 50, soon)));
  const Hold charged = hold("alice", 3, "r1");   // from the expiring lot: the soonest expiry first
  const Hold released = hold("alice", 4, "r2");  // 2 from it, 2 from the plain lot
  ASSERT_EQ(charged.lots.size(), 1u);
  ASSERT_EQ(released.lots.size(), 2u);
  EXPECT_EQ(released.lots[0].amount, 2);
  clock_.advance_ms(1'000);
  // Read before the reaper: nothing was left available in the expiring lot, so nothing has expired.
  EXPECT_EQ(balances("alice"), (Bal{8, 7, 0, 15}));
  ASSERT_OK(ledger_->commit({charged.hold_id, std::nullopt, LateCommitPolicy::charge}));  // a commit still charges
  ASSERT_OK(ledger_->release({released.hold_id, std::nullopt}));
  const Account a = account("alice");
  EXPECT_EQ(a.balances.used, 3);
  EXPECT_EQ(a.balances.expired, 2);  // what the release gave back to the expired lot
  EXPECT_EQ(a.balances.available, 10);
  PageRequest page;
  auto expired = ledger_->list_lots(LotQuery{"alice", lots::LotStatus::expired}, page);
  ASSERT_OK(expired);
  ASSERT_EQ(expired->items.size(), 1u);
  EXPECT_EQ(expired->items[0].lot.used, 3);
  EXPECT_EQ(expired->items[0].lot.expired, 2);
}

TEST_P(StoreConformance, TheReaperExpiresOverdueLotsOfAccountsNoCommandNamesAndReadsShowThemExpiredBefore) {
  for (const char* id : {"alice", "bob"}) {
    make_account(id);
    ASSERT_OK(ledger_->credit(lot_credit(id, 6, std::string("promo-") + id, 10, clock_.now_ms() + 500)));
    give(id, 4, std::string("paid-") + id);
  }
  clock_.advance_ms(500);
  EXPECT_EQ(balances("alice"), (Bal{4, 0, 0, 10}));  // shown expired before the reaper ran
  EXPECT_EQ(account("alice").balances.expired, 6);
  auto reaped = ledger_->reap_once();
  ASSERT_OK(reaped);
  for (const char* id : {"alice", "bob"}) {
    const auto evs = events(id);
    ASSERT_FALSE(evs.empty());
    EXPECT_EQ(evs.back().type, EventType::lot_expired) << id;
    EXPECT_EQ(evs.back().amount, 6) << id;
    EXPECT_TRUE(evs.back().lot_seq.has_value()) << id;
    EXPECT_EQ(account(id).balances.expired, 6) << id;
  }
  ASSERT_OK(ledger_->reap_once());  // nothing more to expire: no second event
  const auto after = events("alice");
  EXPECT_EQ(std::count_if(after.begin(), after.end(), [](const Event& e) { return e.type == EventType::lot_expired; }), 1);
}

TEST_P(StoreConformance, ARefundGivesBackToTheSpentLotItCameFromAndDebtIsPaidByTheNextCredit) {
  make_account("alice", /*overdraft=*/5);
  give("alice", 4, "paid");
  const Hold h = hold("alice", 7, "r1");  // 4 from the lot, 3 from the overdraft
  ASSERT_OK(ledger_->commit({h.hold_id, std::nullopt, LateCommitPolicy::charge}));
  EXPECT_EQ(balances("alice"), (Bal{-3, 0, 7, 4}));
  auto paid = ledger_->credit({"alice", 5, "top-up"});
  ASSERT_OK(paid);
  ASSERT_TRUE(paid->event.lot_seq.has_value());
  PageRequest page;
  auto lots = ledger_->list_lots(LotQuery{"alice", std::nullopt}, page);
  ASSERT_OK(lots);
  ASSERT_EQ(lots->items.size(), 2u);
  EXPECT_EQ(lots->items[1].lot.amount, 2);  // 3 of the 5 paid the debt
  refunds::RefundCommand refund;
  refund.hold_id = h.hold_id;
  refund.amount = 6;
  refund.reason = "the print jammed";
  refund.request_id = "refund-1";
  const auto results = run_all({refund});
  ASSERT_OK(results[0]);
  lots = ledger_->list_lots(LotQuery{"alice", std::nullopt}, page);
  ASSERT_OK(lots);
  EXPECT_EQ(lots->items[0].lot.used, 1);       // 3 back to the base first, then 3 of the lot's 4
  EXPECT_EQ(lots->items[0].lot.available, 3);
  EXPECT_EQ(balances("alice"), (Bal{8, 0, 1, 9}));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, StoreConformance, ::testing::ValuesIn(testing::all_backends()),
                         testing::BackendName());

// =============================================================================================
// SQLite only: the file keeps everything across a reopen; ping; schema versions.

LedgerOptions no_reaper() {
  LedgerOptions o;
  o.reaper_interval_ms = 0;
  return o;
}

class SqliteFile : public ::testing::Test {
 protected:
  std::unique_ptr<SqliteStore> open() {
    SqliteOptions options;
    options.path = dir_.file("tollgate.db");
    auto store = SqliteStore::open(options, clock_);
    EXPECT_TRUE(store.ok()) << store.error().detail;
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Runs raw SQL on the file (to play a second program or a broken disk).
  void exec_sql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(dir_.file("tollgate.db").c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    const std::string message = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_OK) << message;
  }

  // Two accounts by the ledger, then bob's row changed by raw SQL: self-consistent (the CHECK
  // constraints pass) but not what its events say.
  void alice_clean_and_bob_changed_behind_the_ledgers_back() {
    {
      auto store = open();
      ASSERT_NE(store, nullptr);
      Ledger ledger(*store, clock_, no_reaper());
      ASSERT_OK(ledger.create_account({"alice", 0, std::nullopt}));
      ASSERT_OK(ledger.create_account({"bob", 0, std::nullopt}));
      ASSERT_OK(ledger.credit({"bob", 10, "ref-1"}));
    }
    exec_sql("UPDATE accounts SET available = available + 5, purchased = purchased + 5 WHERE account_id = 'bob'");
  }

  testing::TempDir dir_;
  ManualClock clock_;
};

TEST_F(SqliteFile, PingAnswersOnAFreshStore) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_OK(store->ping());
  EXPECT_EQ(store->now_ms(), clock_.now_ms());
}

TEST_F(SqliteFile, ASecondStoreOnTheSameFileIsRefusedUntilTheFirstIsClosed) {
  auto first = open();
  ASSERT_NE(first, nullptr);
  SqliteOptions options;
  options.path = dir_.file("tollgate.db");
  auto second = SqliteStore::open(options, clock_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(code_name(second.error().code), code_name(Code::conflict));
  EXPECT_THAT(second.error().detail, ::testing::HasSubstr("in use by another tollgate process"));
  EXPECT_OK(first->ping());  // the refusal changed nothing for the owner
  first.reset();
  EXPECT_NE(open(), nullptr);
}

TEST_F(SqliteFile, ReopeningTheFileKeepsAccountsHoldsAndEvents) {
  Account account_before;
  Hold active_before, committed_before;
  std::vector<Event> events_before;
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    Ledger ledger(*store, clock_, no_reaper());
    ASSERT_OK(ledger.create_account({"alice", 3, 5}));
    ASSERT_OK(ledger.credit({"alice", 10, "ref-1"}));
    auto committed = ledger.reserve({"alice", 4, "req-1", kTtl, R"({"k":"v"})", ""});
    ASSERT_OK(committed);
    ASSERT_OK(ledger.commit({committed->hold.hold_id, 3}));
    auto active = ledger.reserve({"alice", 2, "req-2", kTtl, "", ""});
    ASSERT_OK(active);
    account_before = *ledger.get_account("alice");
    active_before = *ledger.get_hold(active->hold.hold_id);
    committed_before = *ledger.get_hold(committed->hold.hold_id);
    events_before = ledger.read_events("alice", 0, 1000)->events;
  }
  auto store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_OK(store->ping());
  Ledger ledger(*store, clock_, no_reaper());
  auto account = ledger.get_account("alice");
  ASSERT_OK(account);
  EXPECT_EQ(*account, account_before);
  EXPECT_EQ(bal(account->balances), (Bal{5, 2, 3, 10}));
  EXPECT_EQ(*ledger.get_hold(active_before.hold_id), active_before);
  EXPECT_EQ(*ledger.get_hold(committed_before.hold_id), committed_before);
  EXPECT_EQ(ledger.read_events("alice", 0, 1000)->events, events_before);

  // Idempotency survives the reopen, and new events continue after the old ones.
  auto replay = ledger.reserve({"alice", 2, "req-2", kTtl, "", ""});
  ASSERT_OK(replay);
  EXPECT_FALSE(replay->created);
  EXPECT_EQ(replay->hold.hold_id, active_before.hold_id);
  auto credit_again = ledger.credit({"alice", 10, "ref-1"});
  ASSERT_OK(credit_again);
  EXPECT_FALSE(credit_again->created);
  auto more = ledger.credit({"alice", 1, "ref-2"});
  ASSERT_OK(more);
  EXPECT_GT(more->event.event_id, events_before.back().event_id);

  auto audit = ledger.audit(std::nullopt);
  ASSERT_OK(audit);
  EXPECT_EQ(audit->accounts_checked, 1);
  EXPECT_THAT(violation_messages(*audit), IsEmpty());
}

TEST_F(SqliteFile, AuditFindsARowChangedBehindTheLedgersBack) {
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    Ledger ledger(*store, clock_, no_reaper());
    ASSERT_OK(ledger.create_account({"alice", 0, std::nullopt}));
    ASSERT_OK(ledger.credit({"alice", 10, "ref-1"}));
  }
  // Self-consistent (the CHECK constraints pass) but not what the events say.
  exec_sql("UPDATE accounts SET available = available + 5, purchased = purchased + 5 WHERE account_id = 'alice'");
  auto store = open();
  ASSERT_NE(store, nullptr);
  auto audit = store->audit(std::nullopt);
  ASSERT_OK(audit);
  ASSERT_FALSE(audit->violations.empty());
  EXPECT_EQ(audit->violations[0].account_id, "alice");
  EXPECT_THAT(audit->violations[0].message, ::testing::HasSubstr("fold of events"));
}

TEST_F(SqliteFile, TheLedgerCountsTheViolationsItsAuditsFindWholeOrInParts) {
  alice_clean_and_bob_changed_behind_the_ledgers_back();
  auto store = open();
  ASSERT_NE(store, nullptr);
  Ledger ledger(*store, clock_, no_reaper());
  auto whole = ledger.audit(std::nullopt);
  ASSERT_OK(whole);
  ASSERT_FALSE(whole->violations.empty());
  EXPECT_EQ(ledger.audit_violations(), whole->violations.size());
  auto first = ledger.audit_range("", 1);  // alice: clean
  ASSERT_OK(first);
  EXPECT_THAT(first->report.violations, IsEmpty());
  EXPECT_TRUE(first->has_more);
  auto second = ledger.audit_range(first->last_account_id, 1);  // bob
  ASSERT_OK(second);
  EXPECT_EQ(second->report.violations.size(), whole->violations.size());
  EXPECT_EQ(ledger.audit_violations(), 2 * whole->violations.size());
  EXPECT_EQ(ledger.sampled_violations(), 0u);  // the sampler counts its own
}

TEST_F(SqliteFile, TheAuditSamplerFindsARowChangedBehindTheLedgersBack) {
  alice_clean_and_bob_changed_behind_the_ledgers_back();
  auto store = open();
  ASSERT_NE(store, nullptr);
  Ledger ledger(*store, clock_, no_reaper());
  auto alice = ledger.audit_sample_once();  // accounts in id order: alice first
  ASSERT_OK(alice);
  EXPECT_THAT(alice->violations, IsEmpty());
  EXPECT_EQ(ledger.sampled_violations(), 0u);
  auto bob = ledger.audit_sample_once();
  ASSERT_OK(bob);
  ASSERT_FALSE(bob->violations.empty());
  EXPECT_EQ(bob->violations[0].account_id, "bob");
  EXPECT_EQ(ledger.sampled_violations(), bob->violations.size());
  auto wrapped = ledger.audit_sample_once();  // past the last account: alice again, clean
  ASSERT_OK(wrapped);
  EXPECT_THAT(wrapped->violations, IsEmpty());
  EXPECT_EQ(ledger.sampled_violations(), bob->violations.size());
  EXPECT_EQ(ledger.sampled_accounts(), 3u);
}

TEST_F(SqliteFile, TheEventLogRefusesUpdatesAndDeletes) {
  {
    auto store = open();
    ASSERT_NE(store, nullptr);
    Ledger ledger(*store, clock_, no_reaper());
    ASSERT_OK(ledger.create_account({"alice", 0, std::nullopt}));
    ASSERT_OK(ledger.credit({"alice", 10, "ref-1"}));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir_.file("tollgate.db").c_str(), &db), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "UPDATE events SET amount = 11", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "DELETE FROM events", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

TEST_F(SqliteFile, AFileWithANewerSchemaIsRefused) {
  { ASSERT_NE(open(), nullptr); }
  exec_sql("INSERT INTO schema_migrations (version, applied_at_ms) VALUES (" +
           std::to_string(SqliteStore::kSchemaVersion + 1) + ", 0)");
  SqliteOptions options;
  options.path = dir_.file("tollgate.db");
  auto store = SqliteStore::open(options, clock_);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.error().detail, ::testing::HasSubstr("newer"));
}

TEST_F(SqliteFile, PingNoticesASchemaChangedUnderneath) {
  auto store = open();
  ASSERT_NE(store, nullptr);
  EXPECT_OK(store->ping());
  exec_sql("INSERT INTO schema_migrations (version, applied_at_ms) VALUES (" +
           std::to_string(SqliteStore::kSchemaVersion + 1) + ", 0)");
  const Status s = store->ping();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(code_name(s.code()), code_name(Code::unavailable));
}

}  // namespace
}  // namespace tollgate
