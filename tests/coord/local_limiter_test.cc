// The bounded in-memory GCRA table of a `local` rate-limit policy (coord/local_limiter.h): the same
// decisions as gcra_check per key, a table that never outgrows max_keys, idle keys dropped before
// busy ones, and one budget per key however many threads check it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/sanitizers.h"
#include "coord/coord.h"
#include "coord/local_limiter.h"
#include "core/limits.h"

namespace tollgate::coord {
namespace {

constexpr std::int64_t kStart = 1'767'225'600'000;  // 2026-01-01
const GcraPolicy kTenPerSecond{10, 1'000};           // one unit every 100 ms

TEST(LocalLimiter, DecidesExactlyAsGcraCheckDoesPerKey) {
  const GcraPolicy p{5, 500};
  LocalLimiter limiter(p, 1'000);
  std::map<std::string, std::optional<std::int64_t>> tats;  // the reference: gcra_check on its own rows
  std::mt19937_64 rng(11);
  std::int64_t now = kStart;
  int allowed = 0;
  int refused = 0;
  for (int i = 0; i < 20'000; ++i) {
    if (rng() % 3 == 0) now += static_cast<std::int64_t>(rng() % 60);
    const std::string key = "user-" + std::to_string(rng() % 7);
    const std::int64_t cost = rng() % 4 == 0 ? 1 + static_cast<std::int64_t>(rng() % p.limit) : 1;
    const GcraDecision want = gcra_check(p, tats[key], cost, now);
    const GcraDecision got = limiter.check(key, cost, now);
    ASSERT_EQ(got.allowed, want.allowed) << i;
    ASSERT_EQ(got.remaining, want.remaining) << i;
    ASSERT_EQ(got.reset_after_ms, want.reset_after_ms) << i;
    ASSERT_EQ(got.retry_after_ms, want.retry_after_ms) << i;
    ASSERT_EQ(got.new_tat_ns, want.new_tat_ns) << i;
    if (want.allowed) {
      tats[key] = want.new_tat_ns;
      ++allowed;
    } else {
      ++refused;
    }
  }
  EXPECT_EQ(limiter.evictions(), 0u);
  EXPECT_GT(allowed, 1'000);
  EXPECT_GT(refused, 1'000);
}

TEST(LocalLimiter, AFreshKeyAdmitsTheLimitThenRefusesUntilTheNextUnit) {
  LocalLimiter limiter(kTenPerSecond, 10);
  for (int i = 1; i <= 10; ++i) {
    const GcraDecision d = limiter.check("k", 1, kStart);
    ASSERT_TRUE(d.allowed) << i;
    EXPECT_EQ(d.remaining, 10 - i);
  }
  const GcraDecision refused = limiter.check("k", 1, kStart);
  ASSERT_FALSE(refused.allowed);
  EXPECT_EQ(refused.retry_after_ms, 100);
  EXPECT_FALSE(limiter.check("k", 1, kStart + 99).allowed);
  EXPECT_TRUE(limiter.check("k", 1, kStart + 100).allowed);
  EXPECT_EQ(limiter.size(), 1u);
}

TEST(LocalLimiter, PeekTellsWithoutCounting) {
  LocalLimiter limiter(GcraPolicy{2, 1000}, 1);
  EXPECT_TRUE(limiter.peek("a", 1, 0).allowed);
  EXPECT_EQ(limiter.size(), 0u);  // nothing remembered
  EXPECT_TRUE(limiter.check("a", 1, 0).allowed);
  EXPECT_TRUE(limiter.check("a", 1, 0).allowed);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(limiter.peek("a", 1, 0).allowed);
  EXPECT_EQ(limiter.peek("a", 1, 0).retry_after_ms, 500);
  EXPECT_TRUE(limiter.peek("a", 1, 500).allowed);
  EXPECT_TRUE(limiter.peek("b", 1, 0).allowed);
  EXPECT_EQ(limiter.size(), 1u);
}

TEST(LocalLimiter, KeysHaveIndependentBudgets) {
  LocalLimiter limiter(kTenPerSecond, 10);
  ASSERT_TRUE(limiter.check("a", 10, kStart).allowed);
  EXPECT_FALSE(limiter.check("a", 1, kStart).allowed);
  const GcraDecision b = limiter.check("b", 1, kStart);
  ASSERT_TRUE(b.allowed);
  EXPECT_EQ(b.remaining, 9);
  EXPECT_FALSE(limiter.check("a", 1, kStart).allowed);  // b's check did not refill a
  EXPECT_EQ(limiter.size(), 2u);
}

TEST(LocalLimiter, ARefusedCheckOfAnUnknownKeyIsNotStoredAndAnAllowedOneIs) {
  LocalLimiter limiter(kTenPerSecond, 10);
  EXPECT_EQ(limiter.size(), 0u);
  ASSERT_TRUE(limiter.check("a", 2, kStart).allowed);
  EXPECT_EQ(limiter.size(), 1u);
  ASSERT_FALSE(limiter.check("a", 9, kStart).allowed);
  EXPECT_EQ(limiter.size(), 1u);
}

TEST(LocalLimiter, ResetForgetsAKeyAndItsSpentBudget) {
  LocalLimiter limiter(kTenPerSecond, 10);
  ASSERT_TRUE(limiter.check("a", 10, kStart).allowed);
  ASSERT_TRUE(limiter.check("b", 3, kStart).allowed);
  ASSERT_FALSE(limiter.check("a", 1, kStart).allowed);
  EXPECT_EQ(limiter.size(), 2u);

  limiter.reset("a");
  EXPECT_EQ(limiter.size(), 1u);
  const GcraDecision a = limiter.check("a", 1, kStart);
  ASSERT_TRUE(a.allowed);
  EXPECT_EQ(a.remaining, 9);
  // b is untouched
  const GcraDecision b = limiter.check("b", 1, kStart);
  ASSERT_TRUE(b.allowed);
  EXPECT_EQ(b.remaining, 6);

  limiter.reset("never-seen");  // a no-op
  EXPECT_EQ(limiter.size(), 2u);
  EXPECT_EQ(limiter.evictions(), 0u);
}

TEST(LocalLimiter, TheTableNeverHoldsMoreThanMaxKeysHoweverManyKeysAreChecked) {
  LocalLimiter limiter(kTenPerSecond, 100);
  for (int i = 0; i < 10'000; ++i) {
    const GcraDecision d = limiter.check("attacker-" + std::to_string(i), 1, kStart);
    ASSERT_TRUE(d.allowed) << i;  // a key it forgot, or never saw, has a full budget
    ASSERT_LE(limiter.size(), 100u) << i;
  }
  EXPECT_EQ(limiter.size(), 100u);
  EXPECT_EQ(limiter.evictions(), 10'000u - 100u);  // every key is busy at kStart: each newcomer evicts one

  // with time passing, and keys coming back, it stays bounded as well
  std::mt19937_64 rng(3);
  std::int64_t now = kStart;
  for (int i = 0; i < 20'000; ++i) {
    now += static_cast<std::int64_t>(rng() % 3);
    (void)limiter.check("k" + std::to_string(rng() % 5'000), 1 + static_cast<std::int64_t>(rng() % 10), now);
    ASSERT_LE(limiter.size(), 100u) << i;
  }
}

TEST(LocalLimiter, IdleKeysMakeRoomWithoutEvictions) {
  LocalLimiter limiter(kTenPerSecond, 100);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(limiter.check("old-" + std::to_string(i), 1, kStart).allowed);
  ASSERT_EQ(limiter.size(), 100u);
  // a second later every old key is idle (its tat is in the past): as good as never seen
  for (int i = 0; i < 1'000; ++i) {
    ASSERT_TRUE(limiter.check("new-" + std::to_string(i), 1, kStart + 1'000 + i).allowed);
    ASSERT_LE(limiter.size(), 100u);
  }
  EXPECT_EQ(limiter.evictions(), 0u);
}

TEST(LocalLimiter, AnIdleKeyIsDroppedBeforeAnOlderBusyOne) {
  LocalLimiter limiter(kTenPerSecond, 2);
  ASSERT_TRUE(limiter.check("busy", 10, kStart).allowed);  // spent until kStart + 1000
  ASSERT_TRUE(limiter.check("idle", 1, kStart).allowed);   // idle from kStart + 100; checked more recently
  ASSERT_TRUE(limiter.check("new", 1, kStart + 500).allowed);
  EXPECT_EQ(limiter.size(), 2u);
  EXPECT_EQ(limiter.evictions(), 0u);
  // busy kept its spent budget: half a period later 5 units have come back, not 10
  const GcraDecision busy = limiter.check("busy", 1, kStart + 500);
  ASSERT_TRUE(busy.allowed);
  EXPECT_EQ(busy.remaining, 4);
  EXPECT_EQ(limiter.evictions(), 0u);
}

TEST(LocalLimiter, WhenEveryKeyIsBusyTheLeastRecentlyCheckedIsEvictedAndCounted) {
  LocalLimiter limiter(kTenPerSecond, 2);
  ASSERT_TRUE(limiter.check("a", 1, kStart).allowed);
  ASSERT_TRUE(limiter.check("b", 1, kStart).allowed);
  ASSERT_TRUE(limiter.check("a", 1, kStart + 5).allowed);  // a is now the more recent
  ASSERT_TRUE(limiter.check("c", 1, kStart + 10).allowed);  // a and b are busy: b goes
  EXPECT_EQ(limiter.evictions(), 1u);
  EXPECT_EQ(limiter.size(), 2u);
  // a kept its two spent units (tat kStart + 200): remaining 7 after this one
  const GcraDecision a = limiter.check("a", 1, kStart + 10);
  ASSERT_TRUE(a.allowed);
  EXPECT_EQ(a.remaining, 7);
  EXPECT_EQ(limiter.evictions(), 1u);  // a known key never evicts
  // b was forgotten: a full budget again, and taking it back in evicts c (now the least recent)
  const GcraDecision b = limiter.check("b", 1, kStart + 10);
  ASSERT_TRUE(b.allowed);
  EXPECT_EQ(b.remaining, 9);
  EXPECT_EQ(limiter.evictions(), 2u);
  EXPECT_EQ(limiter.size(), 2u);
}

// local_limiter.h: "when every key is busy, the least recently checked one is evicted". A refused
// check is a check: the key an attacker is hammering (and being refused on) is the one whose spent
// budget matters most, and should not be the first forgotten.
TEST(LocalLimiter, ARefusedCheckCountsAsRecentWhenChoosingWhomToEvict) {
  LocalLimiter limiter(kTenPerSecond, 2);
  ASSERT_TRUE(limiter.check("hammered", 10, kStart).allowed);  // spent until kStart + 1000
  ASSERT_TRUE(limiter.check("other", 1, kStart + 1).allowed);  // busy until kStart + 101
  ASSERT_FALSE(limiter.check("hammered", 1, kStart + 2).allowed);  // checked (and refused) most recently
  ASSERT_TRUE(limiter.check("newcomer", 1, kStart + 3).allowed);  // both busy: one is evicted
  EXPECT_EQ(limiter.evictions(), 1u);
  // the least recently checked is "other", so "hammered" must still be refused
  EXPECT_FALSE(limiter.check("hammered", 1, kStart + 4).allowed);
}

TEST(LocalLimiter, FourThreadsOnOneKeyAdmitExactlyTheLimitInTotal) {
  const GcraPolicy p{1'000, 1'000};
  LocalLimiter limiter(p, 16);
  std::atomic<std::int64_t> admitted{0};
  std::atomic<std::int64_t> refused{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int i = 0; i < 2'000; ++i) {
        if (limiter.check("shared", 1, kStart).allowed) {
          admitted.fetch_add(1);
        } else {
          refused.fetch_add(1);
        }
      }
    });
  }
  go.store(true);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(admitted.load(), p.limit);
  EXPECT_EQ(refused.load(), 4 * 2'000 - p.limit);
  EXPECT_EQ(limiter.size(), 1u);
  EXPECT_EQ(limiter.evictions(), 0u);
  EXPECT_FALSE(limiter.check("shared", 1, kStart).allowed);
}

TEST(LocalLimiter, FourThreadsOnManyKeysKeepEveryKeysBudgetAndTheBound) {
  const GcraPolicy p{50, 1'000};
  LocalLimiter limiter(p, 64);  // 32 keys: room for all, no evictions
  std::vector<std::atomic<std::int64_t>> admitted(32);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3'000; ++i) {
        const int k = (i * 7 + t) % 32;
        if (limiter.check("key-" + std::to_string(k), 1, kStart).allowed) admitted[k].fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int k = 0; k < 32; ++k) EXPECT_EQ(admitted[k].load(), p.limit) << k;
  EXPECT_EQ(limiter.size(), 32u);
  EXPECT_EQ(limiter.evictions(), 0u);
}

// The resident memory of this process, read from the kernel (not estimated from the table).
std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * ::sysconf(_SC_PAGESIZE);
}

// An attacker's distinct keys: the table keeps at most its bound, and a second million keys do not
// grow the process at all once the first million filled the table. Measured RSS; under
// AddressSanitizer (whose quarantine keeps freed memory resident by design) only the bound is
// checked — the normal build of the same test measures the memory.
TEST(LocalLimiter, AMillionDistinctKeysKeepTheTableAtItsBoundAndTheMemoryFlat) {
  constexpr std::size_t kBound = limits::kLocalRateKeysMaxDefault;
  LocalLimiter limiter(GcraPolicy{5, 900'000}, kBound);  // every key stays busy: evictions, not idle drops
  const std::int64_t before = resident_bytes();
  std::int64_t now = kStart;
  const auto flood = [&](int first, int count) {
    for (int i = first; i < first + count; ++i) {
      ASSERT_TRUE(limiter.check("attacker-key-" + std::to_string(i), 1, now).allowed);
      if (i % 1000 == 0) ++now;
    }
  };
  // Under AddressSanitizer, which checks only the bound here, three times the bound a flood is
  // enough to evict (the two millions took 11 s there).
#if defined(TOLLGATE_ASAN)
  constexpr int kFlood = 3 * static_cast<int>(kBound);
#else
  constexpr int kFlood = 1'000'000;
#endif
  flood(0, kFlood);
  ASSERT_EQ(limiter.size(), kBound);
  EXPECT_EQ(limiter.evictions(), static_cast<std::size_t>(kFlood) - kBound);
  const std::int64_t after_first = resident_bytes();
  flood(kFlood, kFlood);
  ASSERT_EQ(limiter.size(), kBound);
  const std::int64_t after_second = resident_bytes();
  std::printf("[ memory ] local limiter, %zu keys kept of %d: RSS +%.1f MiB after the first %d, "
              "+%.1f MiB more after the second\n",
              kBound, 2 * kFlood, static_cast<double>(after_first - before) / (1 << 20), kFlood,
              static_cast<double>(after_second - after_first) / (1 << 20));
#if !defined(TOLLGATE_ASAN) && !defined(TOLLGATE_TSAN)
  // 100,000 keys of ~20 bytes with a map node and a list node each: well under 64 MiB. (Not under
  // a sanitizer: ThreadSanitizer's shadow memory is resident too, about 6x here.)
  EXPECT_LT(after_first - before, 64LL << 20);
#endif
#if !defined(TOLLGATE_ASAN)
  // The second million reuses the memory of the keys it evicts: a few MiB of allocator slack at most.
  // (Not under AddressSanitizer, whose quarantine keeps freed memory resident by design.)
  EXPECT_LT(after_second - after_first, 8LL << 20);
#endif
}

}  // namespace
}  // namespace tollgate::coord
