// The pure rules of coordination (coord/coord.h): lease locks with fencing (decide_lock),
// idempotency keys (decide_idempotency) and GCRA rate limits (gcra_check). No database, no clock:
// every rule is called with the rows and the `now_ms` a batch would hand it. The last GCRA tests run
// seeded random sequences of checks and hold them to the bounds the header promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "coord/coord.h"
#include "core/result.h"

namespace tollgate::coord {
namespace {

constexpr std::int64_t kStart = 1'767'225'600'000;  // 2026-01-01
constexpr std::int64_t kTtl = 30'000;

// ---------------------------------------------------------------------------------------------
// Lease locks.

LockCommand lock_cmd(LockOp op, std::string owner, std::optional<std::int64_t> fence = std::nullopt,
                     std::int64_t ttl_ms = kTtl) {
  LockCommand c;
  c.op = op;
  c.key = "jobs/nightly";
  c.owner = std::move(owner);
  c.ttl_ms = ttl_ms;
  c.fence = fence;
  return c;
}
LockCommand acquire(std::string owner, std::int64_t ttl_ms = kTtl) {
  return lock_cmd(LockOp::acquire, std::move(owner), std::nullopt, ttl_ms);
}
LockCommand renew(std::string owner, std::optional<std::int64_t> fence = std::nullopt, std::int64_t ttl_ms = kTtl) {
  return lock_cmd(LockOp::renew, std::move(owner), fence, ttl_ms);
}
LockCommand release(std::string owner, std::optional<std::int64_t> fence = std::nullopt) {
  return lock_cmd(LockOp::release, std::move(owner), fence);
}
LockCommand cancel() { return lock_cmd(LockOp::cancel, ""); }

// The row as `a` holds it since kStart with fence 1.
Lock held_by_a() {
  auto out = decide_lock(std::nullopt, acquire("a"), kStart);
  TG_ASSERT(out.ok());
  return out->lock;
}

TEST(LockRules, AcquiringAKeyNeverUsedGivesFenceOneAndALease) {
  const auto out = decide_lock(std::nullopt, acquire("a"), kStart);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->decision, LockDecision::acquired);
  EXPECT_TRUE(out->changed);
  EXPECT_EQ(out->lock.key, "jobs/nightly");
  EXPECT_EQ(out->lock.owner, "a");
  EXPECT_EQ(out->lock.fence, 1);
  EXPECT_EQ(out->lock.expires_at_ms, kStart + kTtl);
  EXPECT_FALSE(out->lock.cancelled);
  EXPECT_EQ(out->lock.updated_at_ms, kStart);
  EXPECT_TRUE(is_held(out->lock, kStart));
  EXPECT_TRUE(is_held(out->lock, kStart + kTtl - 1));
  EXPECT_FALSE(is_held(out->lock, kStart + kTtl));
}

TEST(LockRules, TheSameOwnerAcquiringAgainKeepsItsFenceAndRenewsTheLease) {
  const Lock row = held_by_a();
  const auto out = decide_lock(row, acquire("a", 5'000), kStart + 10'000);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->decision, LockDecision::reacquired);
  EXPECT_TRUE(out->changed);
  EXPECT_EQ(out->lock.owner, "a");
  EXPECT_EQ(out->lock.fence, 1);
  EXPECT_EQ(out->lock.expires_at_ms, kStart + 15'000);
  EXPECT_EQ(out->lock.updated_at_ms, kStart + 10'000);
}

TEST(LockRules, AnotherOwnerIsRefusedWhileTheLeaseRunsAndToldWhenItEnds) {
  const Lock row = held_by_a();
  for (const std::int64_t now : {kStart, kStart + 1, kStart + kTtl - 1}) {
    const auto out = decide_lock(row, acquire("b"), now);
    ASSERT_FALSE(out.ok()) << now;
    EXPECT_EQ(out.code(), Code::lock_held);
    EXPECT_EQ(out.error().expires_at_ms, kStart + kTtl);
  }
}

TEST(LockRules, OnceTheLeaseRunsOutAnotherOwnerTakesOverWithTheNextFence) {
  const Lock row = held_by_a();
  for (const std::int64_t now : {kStart + kTtl, kStart + kTtl + 1, kStart + 10 * kTtl}) {
    const auto out = decide_lock(row, acquire("b"), now);
    ASSERT_TRUE(out.ok()) << now;
    EXPECT_EQ(out->decision, LockDecision::taken_over);
    EXPECT_TRUE(out->changed);
    EXPECT_EQ(out->lock.owner, "b");
    EXPECT_EQ(out->lock.fence, 2);
    EXPECT_EQ(out->lock.expires_at_ms, now + kTtl);
    EXPECT_EQ(out->lock.updated_at_ms, now);
  }
}

TEST(LockRules, AReleasedKeyKeepsItsFenceAndTheNextHolderGetsAHigherOne) {
  Lock row = held_by_a();
  std::int64_t now = kStart;
  std::int64_t last_fence = row.fence;
  for (int round = 0; round < 5; ++round) {
    now += 100;
    const auto rel = decide_lock(row, release(round % 2 == 0 ? "a" : "b", row.fence), now);
    ASSERT_TRUE(rel.ok()) << round;
    EXPECT_EQ(rel->decision, LockDecision::released);
    EXPECT_TRUE(rel->changed);
    EXPECT_FALSE(rel->lock.owner.has_value());
    EXPECT_FALSE(rel->lock.expires_at_ms.has_value());
    EXPECT_EQ(rel->lock.fence, last_fence);
    EXPECT_FALSE(is_held(rel->lock, now));

    now += 100;
    const auto acq = decide_lock(rel->lock, acquire(round % 2 == 0 ? "b" : "a"), now);
    ASSERT_TRUE(acq.ok()) << round;
    EXPECT_EQ(acq->decision, LockDecision::acquired);  // the key was free: not a take-over
    EXPECT_GT(acq->lock.fence, last_fence);
    EXPECT_EQ(acq->lock.fence, last_fence + 1);
    last_fence = acq->lock.fence;
    row = acq->lock;
  }
}

TEST(LockRules, TheHolderRenewsWithOrWithoutItsFence) {
  const Lock row = held_by_a();
  for (const std::optional<std::int64_t> fence : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{1}}) {
    const auto out = decide_lock(row, renew("a", fence, 1'000), kStart + 20'000);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->decision, LockDecision::renewed);
    EXPECT_TRUE(out->changed);
    EXPECT_EQ(out->lock.owner, "a");
    EXPECT_EQ(out->lock.fence, 1);
    EXPECT_EQ(out->lock.expires_at_ms, kStart + 21'000);  // may shorten the lease too: now + ttl
    EXPECT_EQ(out->lock.updated_at_ms, kStart + 20'000);
  }
}

TEST(LockRules, RenewOrReleaseByAnotherOwnerOrWithAnotherFenceIsLockLost) {
  const Lock row = held_by_a();
  const std::int64_t now = kStart + 1'000;
  for (const LockOp op : {LockOp::renew, LockOp::release}) {
    const auto other_owner = decide_lock(row, lock_cmd(op, "b"), now);
    ASSERT_FALSE(other_owner.ok()) << lock_op_name(op);
    EXPECT_EQ(other_owner.code(), Code::lock_lost);

    const auto other_owner_same_fence = decide_lock(row, lock_cmd(op, "b", 1), now);
    ASSERT_FALSE(other_owner_same_fence.ok()) << lock_op_name(op);
    EXPECT_EQ(other_owner_same_fence.code(), Code::lock_lost);

    for (const std::int64_t fence : {0, 2, -1}) {
      const auto wrong_fence = decide_lock(row, lock_cmd(op, "a", fence), now);
      ASSERT_FALSE(wrong_fence.ok()) << lock_op_name(op) << " fence " << fence;
      EXPECT_EQ(wrong_fence.code(), Code::lock_lost);
    }
  }
}

TEST(LockRules, AnOldHolderIsLockLostAfterSomeoneElseTookOver) {
  const Lock row = held_by_a();
  const auto b = decide_lock(row, acquire("b"), kStart + kTtl + 5);
  ASSERT_TRUE(b.ok());
  for (const LockOp op : {LockOp::renew, LockOp::release}) {
    for (const std::optional<std::int64_t> fence : {std::optional<std::int64_t>{}, std::optional<std::int64_t>{1}}) {
      const auto out = decide_lock(b->lock, lock_cmd(op, "a", fence), kStart + kTtl + 10);
      ASSERT_FALSE(out.ok()) << lock_op_name(op);
      EXPECT_EQ(out.code(), Code::lock_lost);
    }
  }
  // and b's stale fence-1 writer cannot pass itself off as b either
  const auto stale = decide_lock(b->lock, renew("b", 1), kStart + kTtl + 10);
  EXPECT_EQ(stale.code(), Code::lock_lost);
}

TEST(LockRules, RenewingAfterTheLeaseRanOutIsLockLostEvenIfNobodyTookIt) {
  const Lock row = held_by_a();
  for (const std::int64_t now : {kStart + kTtl, kStart + kTtl + 1, kStart + 5 * kTtl}) {
    const auto out = decide_lock(row, renew("a", 1), now);
    ASSERT_FALSE(out.ok()) << now;
    EXPECT_EQ(out.code(), Code::lock_lost);
  }
  const auto just_in_time = decide_lock(row, renew("a", 1), kStart + kTtl - 1);
  ASSERT_TRUE(just_in_time.ok());
  EXPECT_EQ(just_in_time->decision, LockDecision::renewed);
}

TEST(LockRules, ReleasingAfterTheOwnLeaseRanOutIsFineWhileNobodyTookIt) {
  const Lock row = held_by_a();
  const auto out = decide_lock(row, release("a", 1), kStart + 3 * kTtl);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->decision, LockDecision::released);
  EXPECT_TRUE(out->changed);
  EXPECT_FALSE(out->lock.owner.has_value());
  EXPECT_FALSE(out->lock.expires_at_ms.has_value());
  EXPECT_EQ(out->lock.fence, 1);
  EXPECT_EQ(out->lock.updated_at_ms, kStart + 3 * kTtl);
}

TEST(LockRules, RenewOrReleaseOfAFreeLockIsLockLostAndOfAKeyNeverUsedIsNotFound) {
  const auto freed = decide_lock(held_by_a(), release("a"), kStart + 1);
  ASSERT_TRUE(freed.ok());
  for (const LockOp op : {LockOp::renew, LockOp::release}) {
    EXPECT_EQ(decide_lock(freed->lock, lock_cmd(op, "a"), kStart + 2).code(), Code::lock_lost) << lock_op_name(op);
    EXPECT_EQ(decide_lock(freed->lock, lock_cmd(op, "a", 1), kStart + 2).code(), Code::lock_lost) << lock_op_name(op);
    EXPECT_EQ(decide_lock(std::nullopt, lock_cmd(op, "a"), kStart).code(), Code::not_found) << lock_op_name(op);
  }
}

TEST(LockRules, CancelAsksTheHolderToStopAndItsNextRenewFreesTheLock) {
  const Lock row = held_by_a();
  const auto c = decide_lock(row, cancel(), kStart + 1'000);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->decision, LockDecision::cancelled);
  EXPECT_TRUE(c->changed);
  EXPECT_TRUE(c->lock.cancelled);
  EXPECT_EQ(c->lock.owner, "a");  // still held until the holder hears of it (or the lease runs out)
  EXPECT_EQ(c->lock.fence, 1);
  EXPECT_EQ(c->lock.expires_at_ms, kStart + kTtl);
  EXPECT_EQ(c->lock.updated_at_ms, kStart + 1'000);

  // while the holder has not heard, another owner is still refused
  const auto b_early = decide_lock(c->lock, acquire("b"), kStart + 1'500);
  EXPECT_EQ(b_early.code(), Code::lock_held);

  const auto stop = decide_lock(c->lock, renew("a", 1), kStart + 2'000);
  ASSERT_TRUE(stop.ok());
  EXPECT_EQ(stop->decision, LockDecision::stopped);
  EXPECT_TRUE(stop->changed);
  EXPECT_FALSE(stop->lock.owner.has_value());
  EXPECT_FALSE(stop->lock.expires_at_ms.has_value());
  EXPECT_FALSE(stop->lock.cancelled);
  EXPECT_EQ(stop->lock.fence, 1);
  EXPECT_EQ(stop->lock.updated_at_ms, kStart + 2'000);
  EXPECT_FALSE(is_held(stop->lock, kStart + 2'000));

  const auto b = decide_lock(stop->lock, acquire("b"), kStart + 2'001);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->decision, LockDecision::acquired);
  EXPECT_EQ(b->lock.owner, "b");
  EXPECT_EQ(b->lock.fence, 2);
  EXPECT_FALSE(b->lock.cancelled);
}

TEST(LockRules, ACancelledRenewByAnotherOwnerOrFenceIsStillLockLost) {
  const auto c = decide_lock(held_by_a(), cancel(), kStart + 1);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(decide_lock(c->lock, renew("b"), kStart + 2).code(), Code::lock_lost);
  EXPECT_EQ(decide_lock(c->lock, renew("a", 7), kStart + 2).code(), Code::lock_lost);
}

TEST(LockRules, TheSameOwnerAcquiringACancelledLockIsStoppedAndFreesIt) {
  const auto c = decide_lock(held_by_a(), cancel(), kStart + 1);
  ASSERT_TRUE(c.ok());
  const auto again = decide_lock(c->lock, acquire("a"), kStart + 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->decision, LockDecision::stopped);
  EXPECT_TRUE(again->changed);
  EXPECT_FALSE(again->lock.owner.has_value());
  EXPECT_FALSE(again->lock.expires_at_ms.has_value());
  EXPECT_FALSE(again->lock.cancelled);
  EXPECT_EQ(again->lock.fence, 1);

  const auto then = decide_lock(again->lock, acquire("a"), kStart + 3);
  ASSERT_TRUE(then.ok());
  EXPECT_EQ(then->decision, LockDecision::acquired);
  EXPECT_EQ(then->lock.fence, 2);
}

TEST(LockRules, TheHolderMayStillReleaseACancelledLock) {
  const auto c = decide_lock(held_by_a(), cancel(), kStart + 1);
  ASSERT_TRUE(c.ok());
  const auto rel = decide_lock(c->lock, release("a", 1), kStart + 2);
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->decision, LockDecision::released);
  EXPECT_FALSE(rel->lock.owner.has_value());
  EXPECT_FALSE(rel->lock.cancelled);
}

TEST(LockRules, ACancelledLeaseThatRanOutIsTakenOverClean) {
  const auto c = decide_lock(held_by_a(), cancel(), kStart + 1);
  ASSERT_TRUE(c.ok());
  const auto b = decide_lock(c->lock, acquire("b"), kStart + kTtl);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->decision, LockDecision::taken_over);
  EXPECT_EQ(b->lock.fence, 2);
  EXPECT_FALSE(b->lock.cancelled);
}

TEST(LockRules, CancelOfAKeyNeverUsedIsNotFound) {
  const auto out = decide_lock(std::nullopt, cancel(), kStart);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.code(), Code::not_found);
}

TEST(LockRules, CancelOfALockNotHeldHasNothingToCancelAndWritesNothing) {
  const Lock row = held_by_a();
  const auto freed = decide_lock(row, release("a"), kStart + 1);
  ASSERT_TRUE(freed.ok());
  const auto cancelled = decide_lock(row, cancel(), kStart + 1);
  ASSERT_TRUE(cancelled.ok());

  const std::vector<std::pair<Lock, std::int64_t>> cases = {
      {freed->lock, kStart + 2},      // released
      {row, kStart + kTtl},           // the lease ran out
      {cancelled->lock, kStart + 2},  // cancelled already: asking twice changes nothing
  };
  for (const auto& [lock, now] : cases) {
    const auto out = decide_lock(lock, cancel(), now);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->decision, LockDecision::nothing_to_cancel);
    EXPECT_FALSE(out->changed);
    EXPECT_EQ(out->lock, lock);
  }
}

TEST(LockRules, RefusalsNeverHandOutAFenceAndTheFenceNeverDecreases) {
  // A seeded walk of random commands by three owners: the fence only grows, grows by exactly one
  // per hand-over, and a refused command changes nothing.
  std::mt19937_64 rng(7);
  std::optional<Lock> row;
  std::int64_t now = kStart;
  std::int64_t fence = 0;
  const char* owners[] = {"a", "b", "c"};
  for (int step = 0; step < 5'000; ++step) {
    now += static_cast<std::int64_t>(rng() % 400);
    LockCommand c = lock_cmd(static_cast<LockOp>(rng() % 4), owners[rng() % 3]);
    c.ttl_ms = 1 + static_cast<std::int64_t>(rng() % 1'000);
    if (rng() % 2 == 0 && row) c.fence = row->fence - static_cast<std::int64_t>(rng() % 2);
    const auto out = decide_lock(row, c, now);
    if (!out.ok()) continue;
    const Lock& l = out->lock;
    ASSERT_GE(l.fence, fence) << step;
    const bool handed_over = out->decision == LockDecision::acquired || out->decision == LockDecision::taken_over;
    ASSERT_EQ(l.fence, handed_over ? fence + 1 : fence) << step;
    ASSERT_EQ(l.owner.has_value(), l.expires_at_ms.has_value()) << step;
    if (!out->changed) {
      ASSERT_EQ(l, *row) << step;
    }
    fence = l.fence;
    row = l;
  }
  EXPECT_GT(fence, 10);  // the walk did hand the lock over many times
}

// ---------------------------------------------------------------------------------------------
// Idempotency keys.

IdempotencyCommand idem(IdemOp op, std::string fingerprint = "fp-1", std::string response = "") {
  IdempotencyCommand c;
  c.op = op;
  c.key = "charge-42";
  c.fingerprint = std::move(fingerprint);
  c.ttl_ms = kTtl;
  c.response_json = std::move(response);
  return c;
}

IdempotencyKey begun() {
  auto out = decide_idempotency(std::nullopt, idem(IdemOp::begin), kStart);
  TG_ASSERT(out.ok() && out->row.has_value());
  return *out->row;
}

IdempotencyKey finished() {
  auto out = decide_idempotency(begun(), idem(IdemOp::finish, "fp-1", R"({"id":1})"), kStart + 500);
  TG_ASSERT(out.ok() && out->row.has_value());
  return *out->row;
}

TEST(IdempotencyRules, BeginningANewKeyClaimsIt) {
  const auto out = decide_idempotency(std::nullopt, idem(IdemOp::begin), kStart);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->decision, IdemDecision::started);
  EXPECT_TRUE(out->changed);
  EXPECT_FALSE(out->taken_over);
  ASSERT_TRUE(out->row.has_value());
  EXPECT_EQ(out->row->key, "charge-42");
  EXPECT_EQ(out->row->fingerprint, "fp-1");
  EXPECT_EQ(out->row->state, IdemState::started);
  EXPECT_FALSE(out->row->response_json.has_value());
  EXPECT_EQ(out->row->created_at_ms, kStart);
  EXPECT_EQ(out->row->expires_at_ms, kStart + kTtl);
  EXPECT_FALSE(out->row->finished_at_ms.has_value());
  EXPECT_EQ(out->row->attempt, 1);
}

TEST(IdempotencyRules, BeginningAgainWhileTheClaimIsLiveIsInProgressWithItsEnd) {
  const IdempotencyKey row = begun();
  for (const std::int64_t now : {kStart, kStart + 1, kStart + kTtl - 1}) {
    const auto out = decide_idempotency(row, idem(IdemOp::begin), now);
    ASSERT_FALSE(out.ok()) << now;
    EXPECT_EQ(out.code(), Code::in_progress);
    EXPECT_EQ(out.error().expires_at_ms, kStart + kTtl);
  }
}

TEST(IdempotencyRules, BeginningAfterTheClaimRanOutTakesItOver) {
  const IdempotencyKey row = begun();
  for (const std::int64_t now : {kStart + kTtl, kStart + 3 * kTtl}) {
    const auto out = decide_idempotency(row, idem(IdemOp::begin), now);
    ASSERT_TRUE(out.ok()) << now;
    EXPECT_EQ(out->decision, IdemDecision::started);
    EXPECT_TRUE(out->changed);
    EXPECT_TRUE(out->taken_over);
    ASSERT_TRUE(out->row.has_value());
    EXPECT_EQ(out->row->state, IdemState::started);
    EXPECT_EQ(out->row->expires_at_ms, now + kTtl);
    EXPECT_EQ(out->row->created_at_ms, kStart);
    EXPECT_EQ(out->row->attempt, 2);  // a new claim: the first attempt can no longer finish it
  }
}

IdempotencyCommand of_attempt(IdempotencyCommand c, std::int64_t attempt) {
  c.attempt = attempt;
  return c;
}

TEST(IdempotencyRules, AnAttemptWhoseClaimWasTakenOverCanNeitherFinishNorAbandonTheNewClaim) {
  const auto taken = decide_idempotency(begun(), idem(IdemOp::begin), kStart + kTtl);
  ASSERT_TRUE(taken.ok());
  const IdempotencyKey row = *taken->row;
  for (const IdemOp op : {IdemOp::finish, IdemOp::abandon}) {
    const auto stale = decide_idempotency(row, of_attempt(idem(op, "fp-1", "{}"), 1), kStart + kTtl + 5);
    ASSERT_FALSE(stale.ok()) << static_cast<int>(op);
    EXPECT_EQ(stale.code(), Code::conflict);
  }
  const auto current = decide_idempotency(row, of_attempt(idem(IdemOp::finish, "fp-1", "{}"), 2), kStart + kTtl + 5);
  ASSERT_TRUE(current.ok());
  EXPECT_EQ(current->row->state, IdemState::finished);
  EXPECT_EQ(current->row->attempt, 2);
}

TEST(IdempotencyRules, AttemptNumbersKeepIncreasingAcrossAbandons) {
  std::optional<IdempotencyKey> row = begun();
  for (std::int64_t attempt = 1; attempt <= 4; ++attempt) {
    ASSERT_EQ(row->attempt, attempt);
    const auto abandoned = decide_idempotency(row, of_attempt(idem(IdemOp::abandon), attempt), kStart + attempt * 10);
    ASSERT_TRUE(abandoned.ok());
    ASSERT_EQ(abandoned->row->state, IdemState::abandoned);
    // a finish of the abandoned claim is refused; a stale abandon of an earlier attempt too
    EXPECT_EQ(decide_idempotency(abandoned->row, idem(IdemOp::finish, "fp-1", "{}"), kStart + attempt * 10 + 1).code(),
              Code::conflict);
    const auto again = decide_idempotency(abandoned->row, idem(IdemOp::begin), kStart + attempt * 10 + 2);
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->taken_over);  // after an abandon nothing was done: not a resumption
    row = again->row;
  }
}

TEST(IdempotencyRules, FinishingStoresTheResponse) {
  const auto out = decide_idempotency(begun(), idem(IdemOp::finish, "fp-1", R"({"id":1})"), kStart + 500);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->decision, IdemDecision::finished);
  EXPECT_TRUE(out->changed);
  ASSERT_TRUE(out->row.has_value());
  EXPECT_EQ(out->row->state, IdemState::finished);
  EXPECT_EQ(out->row->response_json, R"({"id":1})");
  EXPECT_EQ(out->row->finished_at_ms, kStart + 500);
  EXPECT_EQ(out->row->created_at_ms, kStart);
}

TEST(IdempotencyRules, BeginningAFinishedKeyReplaysTheStoredResponseAndWritesNothing) {
  const IdempotencyKey row = finished();
  for (const std::int64_t now : {kStart + 501, kStart + 10 * kTtl}) {
    const auto out = decide_idempotency(row, idem(IdemOp::begin), now);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->decision, IdemDecision::replayed);
    EXPECT_FALSE(out->changed);
    EXPECT_FALSE(out->taken_over);
    ASSERT_TRUE(out->row.has_value());
    EXPECT_EQ(out->row->response_json, R"({"id":1})");
    EXPECT_EQ(*out->row, row);
  }
}

TEST(IdempotencyRules, FinishingTwiceKeepsTheFirstResponse) {
  const IdempotencyKey row = finished();
  const auto out = decide_idempotency(row, idem(IdemOp::finish, "fp-1", R"({"id":2})"), kStart + 900);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->decision, IdemDecision::finished);
  EXPECT_FALSE(out->changed);
  EXPECT_EQ(out->row, row);
}

TEST(IdempotencyRules, AnotherFingerprintIsAMismatchOnEveryOp) {
  for (const IdempotencyKey& row : {begun(), finished()}) {
    for (const IdemOp op : {IdemOp::begin, IdemOp::finish, IdemOp::abandon}) {
      const auto out = decide_idempotency(row, idem(op, "fp-2", "{}"), kStart + 600);
      ASSERT_FALSE(out.ok()) << static_cast<int>(op);
      EXPECT_EQ(out.code(), Code::idempotency_mismatch);
    }
  }
  // also once the claim ran out: another request may not take it over under the same key
  const auto late = decide_idempotency(begun(), idem(IdemOp::begin, "fp-2"), kStart + 2 * kTtl);
  EXPECT_EQ(late.code(), Code::idempotency_mismatch);
}

TEST(IdempotencyRules, FinishingAKeyNeverBegunIsNotFound) {
  const auto out = decide_idempotency(std::nullopt, idem(IdemOp::finish, "fp-1", "{}"), kStart);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.code(), Code::not_found);
}

TEST(IdempotencyRules, AbandoningAKeyNeverBegunIsNotFoundLikeFinishing) {
  const auto out = decide_idempotency(std::nullopt, idem(IdemOp::abandon), kStart);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.code(), Code::not_found);
}

TEST(IdempotencyRules, AbandoningAStartedKeyGivesTheClaimBack) {
  const auto out = decide_idempotency(begun(), idem(IdemOp::abandon), kStart + 10);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->decision, IdemDecision::abandoned);
  EXPECT_TRUE(out->changed);
  ASSERT_TRUE(out->row.has_value());  // kept, so that attempt numbers keep increasing
  EXPECT_EQ(out->row->state, IdemState::abandoned);
  EXPECT_EQ(out->row->expires_at_ms, kStart + 10);

  // the key can be begun afresh
  const auto again = decide_idempotency(out->row, idem(IdemOp::begin), kStart + 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->decision, IdemDecision::started);
  EXPECT_FALSE(again->taken_over);
  EXPECT_EQ(again->row->created_at_ms, kStart + 20);
  EXPECT_EQ(again->row->attempt, 2);
}

TEST(IdempotencyRules, AbandoningAFinishedKeyIsAConflict) {
  const auto out = decide_idempotency(finished(), idem(IdemOp::abandon), kStart + 600);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.code(), Code::conflict);
}

TEST(IdempotencyRules, StateNamesRoundTrip) {
  for (const IdemState s : {IdemState::started, IdemState::finished, IdemState::abandoned}) EXPECT_EQ(parse_idem_state(idem_state_name(s)), s);
  EXPECT_FALSE(parse_idem_state("done").has_value());
  EXPECT_FALSE(parse_idem_state("").has_value());
}

// ---------------------------------------------------------------------------------------------
// GCRA rate limits.

// Policies whose period (in µs) the limit divides: the emission interval is exact.
const std::vector<GcraPolicy>& exact_policies() {
  static const std::vector<GcraPolicy> p = {
      {1, 1'000}, {10, 1'000}, {5, 60'000}, {1'000, 1'000}, {7, 7}, {4, 10}, {100, 3'600'000},
  };
  return p;
}

// How many cost-1 checks at `now_ms` are admitted in a row, starting from `tat`.
std::int64_t admitted_at_once(const GcraPolicy& p, std::optional<std::int64_t> tat, std::int64_t now_ms) {
  std::int64_t n = 0;
  for (;;) {
    const GcraDecision d = gcra_check(p, tat, 1, now_ms);
    if (!d.allowed) return n;
    tat = d.new_tat_ns;
    ++n;
    TG_ASSERT(n <= p.limit + 1);  // a runaway would be a failure, not a hang
  }
}

TEST(GcraRules, TheEmissionIntervalIsThePeriodOverTheLimitRoundedUpInNanoseconds) {
  EXPECT_EQ((GcraPolicy{10, 1'000}.emission_ns()), 100'000'000);
  EXPECT_EQ((GcraPolicy{3, 1'000}.emission_ns()), 333'333'334);
  EXPECT_EQ((GcraPolicy{1, 1}.emission_ns()), 1'000'000);
  EXPECT_EQ((GcraPolicy{7, 1'000}.emission_ns()), 142'857'143);
}

TEST(GcraRules, AFreshKeyAdmitsExactlyLimitAtOnceThenRefusesUntilTheNextUnit) {
  for (const GcraPolicy& p : exact_policies()) {
    SCOPED_TRACE(testing::Message() << "limit " << p.limit << " period " << p.period_ms);
    std::optional<std::int64_t> tat;
    for (std::int64_t i = 1; i <= p.limit; ++i) {
      const GcraDecision d = gcra_check(p, tat, 1, kStart);
      ASSERT_TRUE(d.allowed) << i;
      ASSERT_TRUE(d.new_tat_ns.has_value());
      EXPECT_EQ(d.remaining, p.limit - i);
      EXPECT_EQ(d.retry_after_ms, 0);
      tat = d.new_tat_ns;
    }
    const GcraDecision refused = gcra_check(p, tat, 1, kStart);
    ASSERT_FALSE(refused.allowed);
    EXPECT_FALSE(refused.new_tat_ns.has_value());
    EXPECT_EQ(refused.remaining, 0);
    EXPECT_GE(refused.retry_after_ms, 1);
    // the next unit is admitted exactly when retry_after_ms says, not a millisecond earlier
    const std::int64_t emission_ms = (p.emission_ns() + 999'999) / 1'000'000;
    EXPECT_EQ(refused.retry_after_ms, emission_ms);
    if (refused.retry_after_ms > 1) {
      EXPECT_FALSE(gcra_check(p, tat, 1, kStart + refused.retry_after_ms - 1).allowed);
    }
    EXPECT_TRUE(gcra_check(p, tat, 1, kStart + refused.retry_after_ms).allowed);
  }
}

TEST(GcraRules, RetryAfterIsExactlyWhenTheRefusedAttemptIsAdmitted) {
  // Spent keys at sub-millisecond tats, checked with every cost at many instants.
  const GcraPolicy p{4, 10};  // emission 2'500 µs
  for (std::int64_t spent = 1; spent <= 4; ++spent) {
    for (std::int64_t offset_us = 0; offset_us < 10'000; offset_us += 250) {
      const std::int64_t tat = kStart * 1'000'000 + spent * p.emission_ns() - offset_us * 1'000;
      for (std::int64_t cost = 1; cost <= p.limit; ++cost) {
        const GcraDecision d = gcra_check(p, tat, cost, kStart);
        if (d.allowed) continue;
        SCOPED_TRACE(testing::Message() << "spent " << spent << " offset " << offset_us << " cost " << cost);
        ASSERT_GE(d.retry_after_ms, 1);
        EXPECT_TRUE(gcra_check(p, tat, cost, kStart + d.retry_after_ms).allowed);
        if (d.retry_after_ms > 1) {
          EXPECT_FALSE(gcra_check(p, tat, cost, kStart + d.retry_after_ms - 1).allowed);
        }
      }
    }
  }
}

TEST(GcraRules, ACostAboveOneConsumesSeveralUnitsAndRemainingIsExact) {
  const GcraPolicy p{10, 1'000};
  const GcraDecision a = gcra_check(p, std::nullopt, 3, kStart);
  ASSERT_TRUE(a.allowed);
  EXPECT_EQ(a.remaining, 7);
  EXPECT_EQ(*a.new_tat_ns, kStart * 1'000'000 + 300'000'000);
  const GcraDecision b = gcra_check(p, a.new_tat_ns, 4, kStart);
  ASSERT_TRUE(b.allowed);
  EXPECT_EQ(b.remaining, 3);
  const GcraDecision c = gcra_check(p, b.new_tat_ns, 4, kStart);
  ASSERT_FALSE(c.allowed);  // 4 > 3 left: refused as a whole, nothing taken
  EXPECT_EQ(c.remaining, 3);
  EXPECT_EQ(c.retry_after_ms, 100);  // one more unit must refill
  const GcraDecision d = gcra_check(p, b.new_tat_ns, 3, kStart);
  ASSERT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  // a whole-limit cost is admitted only by a full budget
  const GcraDecision whole = gcra_check(p, std::nullopt, 10, kStart);
  ASSERT_TRUE(whole.allowed);
  EXPECT_EQ(whole.remaining, 0);
  EXPECT_FALSE(gcra_check(p, gcra_check(p, std::nullopt, 1, kStart).new_tat_ns, 10, kStart + 99).allowed);
}

TEST(GcraRules, AfterAFullPeriodTheBudgetIsFullAgain) {
  for (const GcraPolicy& p : exact_policies()) {
    SCOPED_TRACE(testing::Message() << "limit " << p.limit << " period " << p.period_ms);
    const GcraDecision spent = gcra_check(p, std::nullopt, p.limit, kStart);
    ASSERT_TRUE(spent.allowed);
    EXPECT_EQ(spent.remaining, 0);
    EXPECT_EQ(spent.reset_after_ms, p.period_ms);
    for (const std::int64_t cost : {std::int64_t{1}, p.limit}) {
      const GcraDecision later = gcra_check(p, spent.new_tat_ns, cost, kStart + p.period_ms);
      ASSERT_TRUE(later.allowed) << cost;
      EXPECT_EQ(later.remaining, p.limit - cost);
    }
    // and a key idle for much longer is no richer than a fresh one
    const GcraDecision idle = gcra_check(p, spent.new_tat_ns, 1, kStart + 100 * p.period_ms);
    EXPECT_EQ(idle.remaining, p.limit - 1);
  }
}

TEST(GcraRules, ARefusedCheckReturnsNoNewTatAndReportsTheKeyAsItIs) {
  const GcraPolicy p{10, 1'000};
  const std::int64_t tat = kStart * 1'000'000 + 950'000'000;  // 9.5 units spent
  const GcraDecision d = gcra_check(p, tat, 1, kStart);
  ASSERT_FALSE(d.allowed);
  EXPECT_FALSE(d.new_tat_ns.has_value());
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after_ms, 50);
  EXPECT_EQ(d.reset_after_ms, 950);
}

TEST(GcraRules, ResetAfterIsWhenTheKeyIsBackToAFullBudget) {
  const GcraPolicy p{10, 1'000};
  const GcraDecision one = gcra_check(p, std::nullopt, 1, kStart);
  EXPECT_EQ(one.reset_after_ms, 100);
  const GcraDecision four = gcra_check(p, one.new_tat_ns, 3, kStart + 30);
  EXPECT_EQ(four.reset_after_ms, 370);  // 400 ms of units from kStart, 30 ms of which have passed
  // Exactly at reset_after the full limit is admitted; a millisecond earlier it is not.
  EXPECT_TRUE(gcra_check(p, four.new_tat_ns, p.limit, kStart + 30 + four.reset_after_ms).allowed);
  EXPECT_FALSE(gcra_check(p, four.new_tat_ns, p.limit, kStart + 30 + four.reset_after_ms - 1).allowed);
  // Partial milliseconds round up.
  const GcraPolicy q{3, 1};  // emission 334 µs
  const GcraDecision r = gcra_check(q, std::nullopt, 1, kStart);
  ASSERT_TRUE(r.allowed);
  EXPECT_EQ(r.reset_after_ms, 1);
}

// The header promises "bursts of up to `limit`" and "cost: 1..limit". When the limit does not
// divide the period in µs, the emission interval rounds up and `limit` of them overshoot the period
// by a few µs, which the strict `new_tat - now > period` test refuses.
TEST(GcraRules, ALimitThatDoesNotDivideThePeriodStillAdmitsAFullBurst) {
  for (const GcraPolicy p : {GcraPolicy{3, 1'000}, GcraPolicy{7, 1'000}, GcraPolicy{3, 1}, GcraPolicy{6, 1'000}}) {
    SCOPED_TRACE(testing::Message() << "limit " << p.limit << " period " << p.period_ms);
    EXPECT_EQ(admitted_at_once(p, std::nullopt, kStart), p.limit);
    const GcraDecision fresh = gcra_check(p, std::nullopt, 1, kStart);
    EXPECT_EQ(fresh.remaining, p.limit - 1);
  }
}

TEST(GcraRules, ACostOfTheWholeLimitIsAdmittedByAFullBudget) {
  for (const GcraPolicy p : {GcraPolicy{3, 1'000}, GcraPolicy{7, 1'000}}) {
    SCOPED_TRACE(testing::Message() << "limit " << p.limit << " period " << p.period_ms);
    const GcraDecision d = gcra_check(p, std::nullopt, p.limit, kStart);
    EXPECT_TRUE(d.allowed);
    if (!d.allowed) {
      // and retry_after_ms must not promise what never comes
      EXPECT_FALSE(gcra_check(p, std::nullopt, p.limit, kStart + d.retry_after_ms).allowed)
          << "retry_after_ms " << d.retry_after_ms << " is admitted after all";
    }
  }
}

// A limit above the period in µs (validate.cc accepts up to limits::kRateLimitMax = 10^9 units for a
// period of 1 ms) makes period/limit < 1 µs, which rounds up to 1 µs: a 100% error, not "less than
// 1 µs". The header still promises `limit` per `period_ms`, i.e. a full budget again after a period.
TEST(GcraRules, ALimitAboveThePeriodInMicrosecondsStillRefillsWithinOnePeriod) {
  for (const GcraPolicy p : {GcraPolicy{2'000, 1}, GcraPolicy{5'000, 2}, GcraPolicy{1'000'000'000, 1'000}}) {
    SCOPED_TRACE(testing::Message() << "limit " << p.limit << " period " << p.period_ms);
    const GcraDecision spent = gcra_check(p, std::nullopt, p.limit, kStart);
    ASSERT_TRUE(spent.allowed);
    EXPECT_EQ(spent.reset_after_ms, p.period_ms);
    const GcraDecision later = gcra_check(p, spent.new_tat_ns, p.limit, kStart + p.period_ms);
    EXPECT_TRUE(later.allowed) << "remaining after one unit would be "
                               << gcra_check(p, spent.new_tat_ns, 1, kStart + p.period_ms).remaining;
  }
}

struct Admission {
  std::int64_t at_ms;
  std::int64_t units;
};

TEST(GcraProperties, RandomSequencesNeverExceedTheBurstOrTheWindowBoundAndRemainingIsExact) {
  std::int64_t total_allowed = 0;
  std::int64_t total_refused = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    std::mt19937_64 rng(seed);
    auto uniform = [&rng](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    };
    GcraPolicy p;
    if (seed % 20 == 0) {  // more units than microseconds in the period
      p.limit = uniform(1'000, 4'000);
      p.period_ms = uniform(1, 3);
    } else {
      p.limit = uniform(1, 40);
      p.period_ms = seed % 3 == 0 ? uniform(1, 20) : uniform(1, 5'000);
    }
    const std::int64_t step_max = std::max<std::int64_t>(1, 2 * p.period_ms / p.limit);
    SCOPED_TRACE(testing::Message() << "seed " << seed << " limit " << p.limit << " period " << p.period_ms);

    std::optional<std::int64_t> tat;
    std::int64_t now = kStart;
    std::vector<Admission> admitted;
    for (int i = 0; i < 400; ++i) {
      const int kind = static_cast<int>(uniform(0, 99));
      if (kind < 40) {
        // the same instant
      } else if (kind < 95) {
        now += uniform(1, step_max);
      } else {
        now += uniform(1, 2 * p.period_ms);
      }
      const std::int64_t cost = uniform(0, 2) == 0 ? uniform(1, p.limit) : 1;
      const GcraDecision d = gcra_check(p, tat, cost, now);
      ASSERT_GE(d.remaining, 0);
      ASSERT_GE(d.reset_after_ms, 0);
      if (!d.allowed) {
        ++total_refused;
        ASSERT_FALSE(d.new_tat_ns.has_value());
        ASSERT_GE(d.retry_after_ms, 1);
        continue;
      }
      ++total_allowed;
      ASSERT_TRUE(d.new_tat_ns.has_value());
      ASSERT_EQ(d.retry_after_ms, 0);
      tat = d.new_tat_ns;
      admitted.push_back({now, cost});
      ASSERT_EQ(d.remaining, admitted_at_once(p, tat, now)) << "at step " << i;
    }

    // In any single instant at most `limit` units; in any window [s, s + period) at most 2·limit − 1.
    for (std::size_t i = 0; i < admitted.size(); ++i) {
      std::int64_t same_instant = 0;
      std::int64_t in_window = 0;
      for (std::size_t j = i; j < admitted.size() && admitted[j].at_ms < admitted[i].at_ms + p.period_ms; ++j) {
        in_window += admitted[j].units;
        if (admitted[j].at_ms == admitted[i].at_ms) same_instant += admitted[j].units;
      }
      ASSERT_LE(same_instant, p.limit) << "at " << admitted[i].at_ms - kStart;
      ASSERT_LE(in_window, 2 * p.limit - 1) << "window from " << admitted[i].at_ms - kStart;
    }
  }
  // the sequences did exercise both sides
  EXPECT_GT(total_allowed, 10'000);
  EXPECT_GT(total_refused, 10'000);
}

TEST(GcraProperties, AHeavyLoadReachesButNeverPassesTheWindowBound) {
  // A key hammered every millisecond: the first window sees the burst plus the refill.
  const GcraPolicy p{10, 1'000};
  std::optional<std::int64_t> tat;
  std::vector<Admission> admitted;
  for (std::int64_t ms = 0; ms < 5'000; ++ms) {
    for (int k = 0; k < 3; ++k) {
      const GcraDecision d = gcra_check(p, tat, 1, kStart + ms);
      if (d.allowed) {
        tat = d.new_tat_ns;
        admitted.push_back({kStart + ms, 1});
      }
    }
  }
  std::int64_t max_window = 0;
  for (std::size_t i = 0; i < admitted.size(); ++i) {
    std::int64_t n = 0;
    for (std::size_t j = i; j < admitted.size() && admitted[j].at_ms < admitted[i].at_ms + p.period_ms; ++j) ++n;
    max_window = std::max(max_window, n);
  }
  EXPECT_EQ(max_window, 2 * p.limit - 1);
  // and over the long run the rate is limit per period: 10 at once, then one every 100 ms
  EXPECT_EQ(static_cast<std::int64_t>(admitted.size()), 10 + 49);
}

}  // namespace
}  // namespace tollgate::coord
