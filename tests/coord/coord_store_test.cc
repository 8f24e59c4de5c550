// The coordination conformance suite: what every store backend does with lease locks, idempotency
// keys and shared rate limits — decided in the ledger's batches on rows the store keeps, read back
// through coord::CoordReads — written only against the Ledger and the store, and run on every
// backend (a real SQLite file; a real PostgreSQL schema in CI). Concurrency uses real threads on
// one ledger (the many-instance cases, with processes on one PostgreSQL database, are in
// tests/http/coord_api_test.cc).
//
// Time is a ManualClock (the store's clock: on PostgreSQL the batch runs at the time it gives); the
// reaper thread is off and prune passes are called by the tests.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coord/coord.h"
#include "core/clock.h"
#include "slices.h"
#include "ledger/ledger.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using coord::IdemDecision;
using coord::IdemOp;
using coord::IdemState;
using coord::LockDecision;
using coord::LockOp;
using coord::RateOp;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c))

constexpr std::int64_t kLease = 10'000;

LockCommand lock_cmd(LockOp op, const std::string& key, const std::string& owner = "",
                     std::optional<std::int64_t> fence = std::nullopt, std::int64_t ttl_ms = kLease) {
  LockCommand c;
  c.op = op;
  c.key = key;
  c.owner = owner;
  c.ttl_ms = (op == LockOp::acquire || op == LockOp::renew) ? ttl_ms : 0;
  c.fence = fence;
  return c;
}

IdempotencyCommand idem_cmd(IdemOp op, const std::string& key, const std::string& fingerprint,
                            const std::string& response = "", std::int64_t ttl_ms = kLease) {
  IdempotencyCommand c;
  c.op = op;
  c.key = key;
  c.fingerprint = fingerprint;
  c.ttl_ms = op == IdemOp::begin ? ttl_ms : 0;
  c.response_json = response;
  return c;
}

RateLimitCommand rate_cmd(const std::string& key, std::int64_t cost = 1, std::int64_t limit = 5,
                          std::int64_t period_ms = 60'000, RateOp op = RateOp::check) {
  return RateLimitCommand{op, "login", coord::GcraPolicy{limit, period_ms}, key, cost};
}

class CoordStoreConformance : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.coord_prune_interval_ms = 0;
    options.idempotency_retention_ms = 3'600'000;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  }

  void TearDown() override {
    ledger_.reset();
    store_.reset();
  }

  coord::LockOutcome locked(LockCommand c) {
    auto r = ledger_->lock(std::move(c));
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? *r : coord::LockOutcome{};
  }

  std::optional<coord::Lock> stored_lock(const std::string& key) {
    auto r = store_->coord().get_lock(key);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? r->row : std::nullopt;
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

// --- locks ---------------------------------------------------------------------------------------

TEST_P(CoordStoreConformance, AFreeLockIsAcquiredWithFenceOneAndAnotherOwnerIsRefusedUntilItsLeaseEnds) {
  const auto a = locked(lock_cmd(LockOp::acquire, "gen:user-1", "attempt-a"));
  EXPECT_EQ(a.decision, LockDecision::acquired);
  EXPECT_EQ(a.lock.fence, 1);
  EXPECT_EQ(a.lock.owner, "attempt-a");
  EXPECT_EQ(a.lock.expires_at_ms, clock_.now_ms() + kLease);

  auto refused = ledger_->lock(lock_cmd(LockOp::acquire, "gen:user-1", "attempt-b"));
  ASSERT_FALSE(refused.ok());
  EXPECT_CODE(refused, Code::lock_held);
  EXPECT_EQ(refused.error().expires_at_ms, clock_.now_ms() + kLease);

  // The stored row is the first holder's, untouched by the refusal.
  const auto row = stored_lock("gen:user-1");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->owner, "attempt-a");
  EXPECT_EQ(row->fence, 1);
}

TEST_P(CoordStoreConformance, TheSameOwnerAskingAgainKeepsItsFenceAndRenewsItsLease) {
  locked(lock_cmd(LockOp::acquire, "k", "w1"));
  clock_.advance_ms(4'000);
  const auto again = locked(lock_cmd(LockOp::acquire, "k", "w1"));
  EXPECT_EQ(again.decision, LockDecision::reacquired);
  EXPECT_EQ(again.lock.fence, 1);
  EXPECT_EQ(again.lock.expires_at_ms, clock_.now_ms() + kLease);
  EXPECT_EQ(stored_lock("k")->expires_at_ms, clock_.now_ms() + kLease);
}

TEST_P(CoordStoreConformance, FencesStrictlyIncreaseOverSuccessiveHoldersAcrossReleasesAndTakeOvers) {
  std::int64_t last = 0;
  for (int round = 0; round < 6; ++round) {
    const std::string owner = "owner-" + std::to_string(round);
    const auto got = locked(lock_cmd(LockOp::acquire, "k", owner));
    ASSERT_GT(got.lock.fence, last) << "round " << round;
    last = got.lock.fence;
    if (round % 2 == 0) {
      ASSERT_OK(ledger_->lock(lock_cmd(LockOp::release, "k", owner, got.lock.fence)));
      const auto row = stored_lock("k");
      ASSERT_TRUE(row.has_value()) << "a released lock keeps its row (and so its fence)";
      EXPECT_FALSE(row->owner.has_value());
      EXPECT_EQ(row->fence, last);
    } else {
      clock_.advance_ms(kLease + 1);  // the lease runs out: the next owner takes it over
    }
  }
  EXPECT_EQ(last, 6);
  const auto taken = locked(lock_cmd(LockOp::acquire, "k", "late"));
  EXPECT_EQ(taken.decision, LockDecision::taken_over);  // round 5's lease ran out
  EXPECT_EQ(taken.lock.fence, 7);
}

TEST_P(CoordStoreConformance, AHolderThatLostItsLeaseCanNeitherRenewNorReleaseAndItsSuccessorIsUntouched) {
  const auto first = locked(lock_cmd(LockOp::acquire, "k", "w1"));
  clock_.advance_ms(kLease + 1);
  const auto second = locked(lock_cmd(LockOp::acquire, "k", "w2"));
  ASSERT_EQ(second.decision, LockDecision::taken_over);

  auto renew = ledger_->lock(lock_cmd(LockOp::renew, "k", "w1", first.lock.fence));
  EXPECT_CODE(renew, Code::lock_lost);
  auto release = ledger_->lock(lock_cmd(LockOp::release, "k", "w1", first.lock.fence));
  EXPECT_CODE(release, Code::lock_lost);
  // The same owner name with the old fence (a retry of the old attempt after it re-acquired) too.
  auto renew_any = ledger_->lock(lock_cmd(LockOp::renew, "k", "w2", first.lock.fence));
  EXPECT_CODE(renew_any, Code::lock_lost);

  const auto row = stored_lock("k");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->owner, "w2");
  EXPECT_EQ(row->fence, second.lock.fence);
  EXPECT_EQ(row->expires_at_ms, second.lock.expires_at_ms);
}

TEST_P(CoordStoreConformance, ARenewAfterTheLeaseRanOutIsLostEvenWhenNobodyTookItOver) {
  const auto got = locked(lock_cmd(LockOp::acquire, "k", "w1"));
  clock_.advance_ms(kLease);  // expires_at == now: no longer held
  auto renew = ledger_->lock(lock_cmd(LockOp::renew, "k", "w1", got.lock.fence));
  EXPECT_CODE(renew, Code::lock_lost);
  // It may still let go of it, since nobody else holds it.
  ASSERT_OK(ledger_->lock(lock_cmd(LockOp::release, "k", "w1", got.lock.fence)));
  EXPECT_FALSE(stored_lock("k")->owner.has_value());
}

TEST_P(CoordStoreConformance, CancelMakesTheHoldersNextRenewAnswerCancelledAndFreesTheKey) {
  const auto got = locked(lock_cmd(LockOp::acquire, "gen:user-1", "stream-1"));
  const auto cancelled = locked(lock_cmd(LockOp::cancel, "gen:user-1"));
  EXPECT_EQ(cancelled.decision, LockDecision::cancelled);
  EXPECT_TRUE(stored_lock("gen:user-1")->cancelled);
  // Another owner is still refused until the holder hears it (or its lease ends).
  EXPECT_CODE(ledger_->lock(lock_cmd(LockOp::acquire, "gen:user-1", "stream-2")), Code::lock_held);

  const auto stopped = locked(lock_cmd(LockOp::renew, "gen:user-1", "stream-1", got.lock.fence));
  EXPECT_EQ(stopped.decision, LockDecision::stopped);  // the edge answers 409 lock_cancelled
  const auto row = stored_lock("gen:user-1");
  ASSERT_TRUE(row.has_value());
  EXPECT_FALSE(row->owner.has_value());
  EXPECT_FALSE(row->cancelled);

  const auto next = locked(lock_cmd(LockOp::acquire, "gen:user-1", "stream-2"));
  EXPECT_EQ(next.decision, LockDecision::acquired);
  EXPECT_EQ(next.lock.fence, got.lock.fence + 1);
  // Cancelling a free lock, or one never used, changes nothing.
  ASSERT_OK(ledger_->lock(lock_cmd(LockOp::release, "gen:user-1", "stream-2", next.lock.fence)));
  EXPECT_EQ(locked(lock_cmd(LockOp::cancel, "gen:user-1")).decision, LockDecision::nothing_to_cancel);
  EXPECT_CODE(ledger_->lock(lock_cmd(LockOp::cancel, "never-used")), Code::not_found);
}

TEST_P(CoordStoreConformance, TwentyConcurrentAcquiresOfOneKeyMakeExactlyOneHolder) {
  constexpr int kThreads = 20;
  std::latch go(kThreads);
  std::atomic<int> acquired{0}, held{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      go.arrive_and_wait();
      auto r = ledger_->lock(lock_cmd(LockOp::acquire, "one-key", "t" + std::to_string(i)));
      if (r.ok() && r->decision == LockDecision::acquired) {
        acquired.fetch_add(1);
      } else if (!r.ok() && r.code() == Code::lock_held) {
        held.fetch_add(1);
      } else {
        other.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(acquired.load(), 1);
  EXPECT_EQ(held.load(), kThreads - 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(stored_lock("one-key")->fence, 1);
}

TEST_P(CoordStoreConformance, BadLockCommandsAreRefusedByNameAndChangeNothing) {
  locked(lock_cmd(LockOp::acquire, "k", "w1"));
  const auto before = stored_lock("k");
  EXPECT_CODE(ledger_->lock(lock_cmd(LockOp::acquire, "k", "w2", std::nullopt, 0)), Code::invalid_request);
  EXPECT_CODE(ledger_->lock(lock_cmd(LockOp::acquire, "bad key!", "w2")), Code::invalid_request);
  EXPECT_CODE(ledger_->lock(lock_cmd(LockOp::acquire, "k", "")), Code::invalid_request);
  EXPECT_CODE(ledger_->lock(lock_cmd(LockOp::renew, "k", "w1", 0)), Code::invalid_request);
  EXPECT_CODE(ledger_->lock(lock_cmd(LockOp::renew, "k", "w1", std::nullopt, 24LL * 3600 * 1000 + 1)),
              Code::invalid_request);
  EXPECT_EQ(stored_lock("k"), before);
}

TEST_P(CoordStoreConformance, LocksAreListedByKeyInPagesWithTheirLeaseOnTheStoresClock) {
  // Five keys, acquired out of order; "lk-c" released, "lk-e" left to run out.
  for (const char* key : {"lk-d", "lk-a", "lk-e", "lk-c", "lk-b"}) {
    locked(lock_cmd(LockOp::acquire, key, std::string("w-") + key, std::nullopt, key == std::string("lk-e") ? 1'000 : kLease));
  }
  locked(lock_cmd(LockOp::release, "lk-c", "w-lk-c", 1));
  clock_.advance_ms(2'000);  // lk-e's lease (1 s) ran out; the others have 8 s left

  // Every key ever used, two a page, in key order; each page's cursor is its last key.
  std::vector<coord::Lock> all;
  PageRequest page{2, std::nullopt};
  for (int pages = 0; pages < 10; ++pages) {
    auto r = ledger_->list_locks(page, false);
    ASSERT_OK(r);
    EXPECT_EQ(r->now_ms, clock_.now_ms());
    EXPECT_LE(r->locks.size(), 2u);
    all.insert(all.end(), r->locks.begin(), r->locks.end());
    if (!r->has_more) break;
    page.starting_after = r->locks.back().key;
  }
  ASSERT_EQ(all.size(), 5u);
  std::vector<std::string> keys;
  for (const auto& l : all) keys.push_back(l.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"lk-a", "lk-b", "lk-c", "lk-d", "lk-e"}));
  EXPECT_EQ(all[0].owner, "w-lk-a");
  EXPECT_EQ(all[0].fence, 1);
  EXPECT_EQ(*all[0].expires_at_ms - clock_.now_ms(), kLease - 2'000);
  EXPECT_FALSE(all[2].owner.has_value()) << "released: free";
  EXPECT_FALSE(coord::is_held(all[4], clock_.now_ms())) << "lk-e's lease ran out";
  EXPECT_EQ(all, (std::vector<coord::Lock>{*stored_lock("lk-a"), *stored_lock("lk-b"), *stored_lock("lk-c"),
                                           *stored_lock("lk-d"), *stored_lock("lk-e")}));

  // Only the held ones: a, b, d (c is free, e's lease ran out).
  auto held = ledger_->list_locks(PageRequest{10, std::nullopt}, true);
  ASSERT_OK(held);
  keys.clear();
  for (const auto& l : held->locks) keys.push_back(l.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"lk-a", "lk-b", "lk-d"}));
  EXPECT_FALSE(held->has_more);
  // A cursor that is a lock no longer held still pages on (the row exists).
  auto after_c = ledger_->list_locks(PageRequest{10, std::string("lk-c")}, true);
  ASSERT_OK(after_c);
  ASSERT_EQ(after_c->locks.size(), 1u);
  EXPECT_EQ(after_c->locks[0].key, "lk-d");
  // A page of exactly what is left: has_more is false.
  auto last = ledger_->list_locks(PageRequest{2, std::string("lk-c")}, false);
  ASSERT_OK(last);
  EXPECT_EQ(last->locks.size(), 2u);
  EXPECT_FALSE(last->has_more);
}

TEST_P(CoordStoreConformance, ListingLocksRefusesAnUnknownCursorAndABadLimit) {
  locked(lock_cmd(LockOp::acquire, "k", "w1"));
  EXPECT_CODE(ledger_->list_locks(PageRequest{10, std::string("never-used")}, false), Code::invalid_request);
  EXPECT_CODE(ledger_->list_locks(PageRequest{0, std::nullopt}, false), Code::invalid_request);
  EXPECT_CODE(ledger_->list_locks(PageRequest{limits::kListPageMax + 1, std::nullopt}, false), Code::invalid_request);
  auto empty = ledger_->list_locks(PageRequest{10, std::string("k")}, false);
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->locks.empty());
  EXPECT_FALSE(empty->has_more);
}

// --- idempotency keys ----------------------------------------------------------------------------

TEST_P(CoordStoreConformance, BeginClaimsThenInProgressThenFinishedReplaysTheStoredResponse) {
  auto begun = ledger_->idempotency(idem_cmd(IdemOp::begin, "upgrade:42", "plan=pro"));
  ASSERT_OK(begun);
  EXPECT_EQ(begun->decision, IdemDecision::started);
  EXPECT_EQ(begun->row->expires_at_ms, clock_.now_ms() + kLease);

  auto again = ledger_->idempotency(idem_cmd(IdemOp::begin, "upgrade:42", "plan=pro"));
  EXPECT_CODE(again, Code::in_progress);
  EXPECT_EQ(again.error().expires_at_ms, clock_.now_ms() + kLease);
  EXPECT_CODE(ledger_->idempotency(idem_cmd(IdemOp::begin, "upgrade:42", "plan=max")), Code::idempotency_mismatch);

  const std::string response = R"({"charge":"ch_1","amount":300})";
  clock_.advance_ms(500);
  auto finished = ledger_->idempotency(idem_cmd(IdemOp::finish, "upgrade:42", "plan=pro", response));
  ASSERT_OK(finished);
  EXPECT_EQ(finished->decision, IdemDecision::finished);

  clock_.advance_ms(kLease * 10);  // long after the claim's lease: a finished key does not expire
  auto replay = ledger_->idempotency(idem_cmd(IdemOp::begin, "upgrade:42", "plan=pro"));
  ASSERT_OK(replay);
  EXPECT_EQ(replay->decision, IdemDecision::replayed);
  EXPECT_FALSE(replay->changed);
  EXPECT_EQ(replay->row->state, IdemState::finished);
  EXPECT_EQ(replay->row->response_json, response);
  EXPECT_CODE(ledger_->idempotency(idem_cmd(IdemOp::begin, "upgrade:42", "plan=max")), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->idempotency(idem_cmd(IdemOp::abandon, "upgrade:42", "plan=pro")), Code::conflict);

  auto read = store_->coord().get_idempotency_key("upgrade:42");
  ASSERT_OK(read);
  ASSERT_TRUE(read->row.has_value());
  EXPECT_EQ(read->row->response_json, response);
}

TEST_P(CoordStoreConformance, AbandonGivesTheKeyBackAndAnExpiredClaimIsTakenOver) {
  ASSERT_OK(ledger_->idempotency(idem_cmd(IdemOp::begin, "k", "f")));
  auto abandoned = ledger_->idempotency(idem_cmd(IdemOp::abandon, "k", "f"));
  ASSERT_OK(abandoned);
  EXPECT_EQ(abandoned->decision, IdemDecision::abandoned);
  EXPECT_EQ(store_->coord().get_idempotency_key("k")->row->state, IdemState::abandoned);
  auto second = ledger_->idempotency(idem_cmd(IdemOp::begin, "k", "f"));
  ASSERT_OK(second);
  EXPECT_EQ(second->row->attempt, 2);
  EXPECT_FALSE(second->taken_over);

  clock_.advance_ms(kLease + 1);  // the claimer died without finishing
  auto taken = ledger_->idempotency(idem_cmd(IdemOp::begin, "k", "f"));
  ASSERT_OK(taken);
  EXPECT_EQ(taken->decision, IdemDecision::started);
  EXPECT_TRUE(taken->taken_over);
  EXPECT_EQ(taken->row->expires_at_ms, clock_.now_ms() + kLease);
  EXPECT_EQ(taken->row->attempt, 3);
  // The attempt whose claim ran out can neither finish nor give back the new one.
  IdempotencyCommand stale = idem_cmd(IdemOp::finish, "k", "f", R"({"stale":true})");
  stale.attempt = 2;
  EXPECT_CODE(ledger_->idempotency(stale), Code::conflict);
  stale.op = IdemOp::abandon;
  EXPECT_CODE(ledger_->idempotency(stale), Code::conflict);
  IdempotencyCommand current = idem_cmd(IdemOp::finish, "k", "f", R"({"ok":true})");
  current.attempt = 3;
  ASSERT_OK(ledger_->idempotency(current));
  EXPECT_EQ(store_->coord().get_idempotency_key("k")->row->response_json, R"({"ok":true})");
  EXPECT_CODE(ledger_->idempotency(idem_cmd(IdemOp::finish, "unknown", "f", "{}")), Code::not_found);
}

TEST_P(CoordStoreConformance, ConcurrentBeginsOfOneKeyStartExactlyOne) {
  constexpr int kThreads = 12;
  std::latch go(kThreads);
  std::atomic<int> started{0}, in_progress{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      go.arrive_and_wait();
      auto r = ledger_->idempotency(idem_cmd(IdemOp::begin, "double-click", "same-request"));
      if (r.ok() && r->decision == IdemDecision::started) {
        started.fetch_add(1);
      } else if (!r.ok() && r.code() == Code::in_progress) {
        in_progress.fetch_add(1);
      } else {
        other.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(started.load(), 1);
  EXPECT_EQ(in_progress.load(), kThreads - 1);
  EXPECT_EQ(other.load(), 0);
}

TEST_P(CoordStoreConformance, PruningDeletesFinishedKeysPastTheirRetentionAndNeverAClaim) {
  ASSERT_OK(ledger_->idempotency(idem_cmd(IdemOp::begin, "old", "f")));
  ASSERT_OK(ledger_->idempotency(idem_cmd(IdemOp::finish, "old", "f", "1")));
  ASSERT_OK(ledger_->idempotency(idem_cmd(IdemOp::begin, "claim", "f", "", 24LL * 3600 * 1000)));
  clock_.advance_ms(3'600'000 - 1);
  ASSERT_OK(ledger_->idempotency(idem_cmd(IdemOp::begin, "young", "f")));
  ASSERT_OK(ledger_->idempotency(idem_cmd(IdemOp::finish, "young", "f", "2")));
  auto none = ledger_->prune_once();
  ASSERT_OK(none);
  EXPECT_EQ(none->pruned_keys, 0);  // "old" finished exactly one retention minus 1 ms ago

  clock_.advance_ms(2);
  auto pruned = ledger_->prune_once();
  ASSERT_OK(pruned);
  EXPECT_EQ(pruned->pruned_keys, 1);
  EXPECT_FALSE(store_->coord().get_idempotency_key("old")->row.has_value());
  EXPECT_TRUE(store_->coord().get_idempotency_key("young")->row.has_value());
  EXPECT_TRUE(store_->coord().get_idempotency_key("claim")->row.has_value());
  // A pruned key is new again: begin starts it.
  auto again = ledger_->idempotency(idem_cmd(IdemOp::begin, "old", "f"));
  ASSERT_OK(again);
  EXPECT_EQ(again->decision, IdemDecision::started);
}

TEST_P(CoordStoreConformance, BadIdempotencyCommandsAreRefusedByNameAndChangeNothing) {
  EXPECT_CODE(ledger_->idempotency(idem_cmd(IdemOp::begin, "k", "")), Code::invalid_request);
  EXPECT_CODE(ledger_->idempotency(idem_cmd(IdemOp::begin, "k", "f", "", 0)), Code::invalid_request);
  EXPECT_CODE(ledger_->idempotency(idem_cmd(IdemOp::begin, "k k", "f")), Code::invalid_request);
  EXPECT_CODE(ledger_->idempotency(idem_cmd(IdemOp::begin, "k", std::string(257, 'f'))), Code::invalid_request);
  EXPECT_FALSE(store_->coord().get_idempotency_key("k")->row.has_value());
}

// --- shared rate limits --------------------------------------------------------------------------

TEST_P(CoordStoreConformance, ASharedPolicyAdmitsExactlyItsLimitFromThirtyConcurrentAttempts) {
  constexpr int kThreads = 30;
  std::latch go(kThreads);
  std::atomic<int> allowed{0}, limited{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      go.arrive_and_wait();
      auto r = ledger_->ratelimit(rate_cmd("account:alice"));
      ASSERT_TRUE(r.ok()) << r.error().detail;
      (r->decision.allowed ? allowed : limited).fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 5);  // the clock does not move: no refill in between
  EXPECT_EQ(limited.load(), kThreads - 5);
}

TEST_P(CoordStoreConformance, ASharedKeyRefillsOnTheStoresClockAndResetGivesAFullBudget) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ledger_->ratelimit(rate_cmd("k"))->decision.allowed);
  auto refused = ledger_->ratelimit(rate_cmd("k"));
  ASSERT_OK(refused);
  EXPECT_FALSE(refused->decision.allowed);
  EXPECT_EQ(refused->decision.retry_after_ms, 12'000);  // one unit = 60 s / 5
  clock_.advance_ms(11'999);
  EXPECT_FALSE(ledger_->ratelimit(rate_cmd("k"))->decision.allowed);
  clock_.advance_ms(1);
  auto one = ledger_->ratelimit(rate_cmd("k"));
  ASSERT_OK(one);
  EXPECT_TRUE(one->decision.allowed);
  EXPECT_EQ(one->decision.remaining, 0);
  // Another key of the same policy has its own budget; a cost takes several units at once.
  auto three = ledger_->ratelimit(rate_cmd("other", 3));
  ASSERT_OK(three);
  EXPECT_TRUE(three->decision.allowed);
  EXPECT_EQ(three->decision.remaining, 2);
  EXPECT_FALSE(ledger_->ratelimit(rate_cmd("other", 3))->decision.allowed);  // 3 > 2: nothing taken
  EXPECT_EQ(ledger_->ratelimit(rate_cmd("other", 2))->decision.remaining, 0);

  ASSERT_OK(ledger_->ratelimit(rate_cmd("k", 1, 5, 60'000, RateOp::reset)));
  auto fresh = ledger_->ratelimit(rate_cmd("k", 5));
  ASSERT_OK(fresh);
  EXPECT_TRUE(fresh->decision.allowed);
}

TEST_P(CoordStoreConformance, IdleRateRowsArePrunedAndBusyOnesKept) {
  ASSERT_TRUE(ledger_->ratelimit(rate_cmd("idle-soon"))->decision.allowed);  // busy for 12 s
  clock_.advance_ms(6'000);
  ASSERT_TRUE(ledger_->ratelimit(rate_cmd("busy", 5))->decision.allowed);  // busy for 60 s
  clock_.advance_ms(6'000);
  auto pruned = ledger_->prune_once();
  ASSERT_OK(pruned);
  EXPECT_EQ(pruned->pruned_rates, 1);
  // The pruned key has a full budget (as it had), the busy one is still spent.
  EXPECT_EQ(ledger_->ratelimit(rate_cmd("idle-soon"))->decision.remaining, 4);
  EXPECT_FALSE(ledger_->ratelimit(rate_cmd("busy"))->decision.allowed);
}

TEST_P(CoordStoreConformance, BadRateLimitCommandsAreRefusedByName) {
  EXPECT_CODE(ledger_->ratelimit(rate_cmd("k", 0)), Code::invalid_request);
  EXPECT_CODE(ledger_->ratelimit(rate_cmd("k", 6)), Code::invalid_request);  // more than the limit: never admitted
  EXPECT_CODE(ledger_->ratelimit(rate_cmd("bad key", 1)), Code::invalid_request);
  EXPECT_CODE(ledger_->ratelimit(rate_cmd("k", 1, 0)), Code::invalid_request);
  EXPECT_CODE(ledger_->ratelimit(rate_cmd("k", 1, 1'000'001, 1'000)), Code::invalid_request);  // > 1 per µs
  auto fresh = ledger_->ratelimit(rate_cmd("k", 5));
  ASSERT_OK(fresh);
  EXPECT_TRUE(fresh->decision.allowed);  // nothing above spent any of k's budget
}

// --- together with the ledger ------------------------------------------------------------------

TEST_P(CoordStoreConformance, CoordinationAndLedgerCommandsShareBatchesWithoutDisturbingEachOther) {
  ASSERT_OK(ledger_->create_account({"kiosk", 0, std::nullopt}));
  ASSERT_OK(ledger_->credit({"kiosk", 10, "purchase-1"}));
  constexpr int kThreads = 8;
  std::latch go(kThreads);
  std::atomic<int> holds{0}, locks{0}, failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      go.arrive_and_wait();
      for (int n = 0; n < 5; ++n) {
        const std::string id = "t" + std::to_string(i) + "-" + std::to_string(n);
        if (i % 2 == 0) {
          ReserveCommand r;
          r.account_id = "kiosk";
          r.amount = 1;
          r.request_id = "r-" + id;
          auto res = ledger_->reserve(r);
          if (res.ok()) holds.fetch_add(1);
          else if (res.code() != Code::insufficient_credits) failures.fetch_add(1);
        } else {
          auto res = ledger_->lock(lock_cmd(LockOp::acquire, "lock-" + id, "o"));
          if (res.ok()) locks.fetch_add(1);
          else failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(holds.load(), 10);  // 20 reserves of 1 on 10 credits
  EXPECT_EQ(locks.load(), 20);  // every key distinct
  auto report = store_->audit(std::nullopt);
  ASSERT_OK(report);
  EXPECT_TRUE(report->violations.empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, CoordStoreConformance, ::testing::ValuesIn(testing::all_backends()),
                         testing::BackendName());

}  // namespace
}  // namespace tollgate
