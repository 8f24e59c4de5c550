// Races on one account with real threads: "two kiosks, one credit", at scale.
//
// Every test releases its threads at once with a start barrier (std::latch), so their requests land
// in the group committer together: in one batch or in several, in an order no test controls. The
// assertions hold for every order: exactly as many holds as there were credits, one hold per
// request_id, one state change per hold. A reader thread samples the account during each race and
// checks that no intermediate state ever breaks the identity or shows negative credits.
//
// Value-parameterized over testing::all_backends(), so every backend (SQLite now, PostgreSQL later)
// runs the same races unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "ledger/ledger.h"
#include "support/backends.h"

namespace tollgate {
namespace {

constexpr int kThreads = 64;
constexpr std::uint64_t kIdSeed = 0x7011'6a7e;  // hold ids are deterministic

// A fresh store on `backend` and a ledger over it with a manual clock (nothing expires unless a test
// moves time) and no reaper thread.
struct Harness {
  explicit Harness(const testing::StoreBackend& backend) : store(backend.open_fresh(clock)) {
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.id_seed = kIdSeed;
    ledger = std::make_unique<Ledger>(*store, clock, options);
  }

  // Creates `account_id` with `credits` purchased credits and no overdraft.
  void open_account(const std::string& account_id, std::int64_t credits) {
    auto created = ledger->create_account({account_id, 0, std::nullopt});
    ASSERT_TRUE(created.ok()) << created.error().detail;
    auto credited = ledger->credit({account_id, credits, "purchase-" + account_id});
    ASSERT_TRUE(credited.ok()) << credited.error().detail;
  }

  // Every event of `account_id`, oldest first.
  std::vector<Event> all_events(const std::string& account_id) {
    std::vector<Event> out;
    std::int64_t after = 0;
    for (;;) {
      auto page = ledger->read_events(account_id, after, limits::kEventsPageMax);
      EXPECT_TRUE(page.ok()) << page.error().detail;
      if (!page.ok() || page->events.empty()) return out;
      out.insert(out.end(), page->events.begin(), page->events.end());
      after = page->next_after;
    }
  }

  void expect_audit_clean() {
    auto report = ledger->audit(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.error().detail;
    EXPECT_GE(report->accounts_checked, 1);
    for (const auto& v : report->violations) ADD_FAILURE() << "audit: " << v.account_id << ": " << v.message;
  }

  ManualClock clock;
  std::unique_ptr<Store> store;
  std::unique_ptr<Ledger> ledger;  // last: stopped before the store goes
};

// Samples get_account on its own thread while a race runs. Every sample must satisfy the identity,
// show no negative balance, and keep the account's purchased credits and `used` as they were: a race
// of reservations only moves credits between available and reserved.
class AccountSampler {
 public:
  AccountSampler(Ledger& ledger, std::string account_id, Balances expected_fixed)
      : ledger_(ledger), account_id_(std::move(account_id)), fixed_(expected_fixed) {
    thread_ = std::thread([this] { loop(); });
  }
  ~AccountSampler() { stop(); }

  // Stops sampling; returns the number of samples taken (at least one: the last is taken after stop).
  std::int64_t stop() {
    if (thread_.joinable()) {
      done_.store(true, std::memory_order_release);
      thread_.join();
      sample();  // one sample after the race, so that there always is one
    }
    return samples_;
  }

 private:
  void loop() {
    while (!done_.load(std::memory_order_acquire)) sample();
  }

  void sample() {
    auto account = ledger_.get_account(account_id_);
    ASSERT_TRUE(account.ok()) << account.error().detail;
    const Balances& b = account->balances;
    ++samples_;
    EXPECT_GE(b.available, 0) << "sample " << samples_;
    EXPECT_GE(b.reserved, 0) << "sample " << samples_;
    EXPECT_EQ(b.available + b.reserved + b.used, b.purchased) << "sample " << samples_;
    EXPECT_EQ(b.purchased, fixed_.purchased);
    EXPECT_EQ(b.used, fixed_.used);
    // Reservations only add to reserved during a reservation race; it never shrinks.
    EXPECT_GE(b.reserved, last_reserved_) << "reserved went back from " << last_reserved_ << " to " << b.reserved;
    last_reserved_ = b.reserved;
  }

  Ledger& ledger_;
  const std::string account_id_;
  const Balances fixed_;
  std::atomic<bool> done_{false};
  std::int64_t samples_ = 0;        // used by the sampling thread, then by stop()'s caller after join
  std::int64_t last_reserved_ = 0;  // idem
  std::thread thread_;
};

// Runs `body(i)` on `threads` threads released together by a start barrier; joins them all.
template <typename Body>
void race(int threads, Body body) {
  std::latch start(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      start.arrive_and_wait();
      body(i);
    });
  }
  for (auto& t : pool) t.join();
}

// --- two kiosks, one credit: 64 threads, B credits ------------------------------------------------

class LedgerRaceTwoKiosks : public ::testing::TestWithParam<std::tuple<testing::StoreBackend, std::int64_t>> {};

TEST_P(LedgerRaceTwoKiosks, ExactlyAsManyHoldsAsCreditsAndNoCreditTwice) {
  const auto& [backend, credits] = GetParam();
  Harness h(backend);
  ASSERT_NO_FATAL_FAILURE(h.open_account("kiosk", credits));
  const std::int64_t winners_expected = std::min<std::int64_t>(credits, kThreads);

  std::vector<std::optional<Result<HoldOutcome>>> answers(kThreads);
  AccountSampler sampler(*h.ledger, "kiosk", Balances{credits, 0, 0, credits});
  race(kThreads, [&](int i) {
    answers[i].emplace(h.ledger->reserve({"kiosk", 1, "kiosk-req-" + std::to_string(i), std::nullopt, "", ""}));
  });
  EXPECT_GE(sampler.stop(), 1);

  std::int64_t winners = 0;
  std::set<std::string> hold_ids;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(answers[i].has_value());
    const auto& answer = *answers[i];
    if (answer.ok()) {
      ++winners;
      EXPECT_TRUE(answer->created) << "thread " << i;
      EXPECT_EQ(answer->hold.request_id, "kiosk-req-" + std::to_string(i));
      EXPECT_EQ(answer->hold.account_id, "kiosk");
      EXPECT_EQ(answer->hold.amount, 1);
      EXPECT_EQ(answer->hold.status, HoldStatus::active);
      EXPECT_TRUE(hold_ids.insert(answer->hold.hold_id).second) << "hold id given twice: " << answer->hold.hold_id;
    } else {
      EXPECT_EQ(answer.code(), Code::insufficient_credits) << "thread " << i << ": " << answer.error().detail;
      // The refusal names what the decision saw: nothing left, one asked for.
      EXPECT_EQ(answer.error().available, std::optional<std::int64_t>(0)) << "thread " << i;
      EXPECT_EQ(answer.error().requested, std::optional<std::int64_t>(1)) << "thread " << i;
    }
  }
  EXPECT_EQ(winners, winners_expected);
  EXPECT_EQ(kThreads - winners, kThreads - winners_expected) << "the others get insufficient_credits";

  auto account = h.ledger->get_account("kiosk");
  ASSERT_TRUE(account.ok()) << account.error().detail;
  EXPECT_EQ(account->balances, (Balances{credits - winners_expected, winners_expected, 0, credits}));
  EXPECT_EQ(account->active_holds, winners_expected);

  // The store agrees with the answers: the same holds, each active, nothing more.
  auto active = h.ledger->list_holds({std::string("kiosk"), HoldStatus::active}, {limits::kListPageMax});
  ASSERT_TRUE(active.ok()) << active.error().detail;
  std::set<std::string> stored;
  for (const Hold& hold : active->items) stored.insert(hold.hold_id);
  EXPECT_EQ(stored, hold_ids);

  // No event ever recorded a negative available, and each winner wrote exactly one reservation.
  std::int64_t reserved_events = 0;
  for (const Event& e : h.all_events("kiosk")) {
    EXPECT_GE(e.available_after, 0) << "event " << e.event_id;
    if (e.type == EventType::reserved) ++reserved_events;
  }
  EXPECT_EQ(reserved_events, winners_expected);
  h.expect_audit_clean();
}

std::string TwoKiosksName(const ::testing::TestParamInfo<LedgerRaceTwoKiosks::ParamType>& info) {
  return std::get<0>(info.param).name + "_credits" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Backends, LedgerRaceTwoKiosks,
                         ::testing::Combine(::testing::ValuesIn(testing::all_backends()),
                                            ::testing::Values(1, 2, 7, 63, 64, 100)),
                         TwoKiosksName);

// --- retries of one request, one hold's settlement --------------------------------------------------

class LedgerRace : public ::testing::TestWithParam<testing::StoreBackend> {};

TEST_P(LedgerRace, SixtyFourRetriesOfOneRequestIdMakeOneHold) {
  Harness h(GetParam());
  ASSERT_NO_FATAL_FAILURE(h.open_account("kiosk", 10));

  std::vector<std::optional<Result<HoldOutcome>>> answers(kThreads);
  AccountSampler sampler(*h.ledger, "kiosk", Balances{10, 0, 0, 10});
  race(kThreads, [&](int i) { answers[i].emplace(h.ledger->reserve({"kiosk", 1, "same-request", std::nullopt, "", ""})); });
  EXPECT_GE(sampler.stop(), 1);

  std::set<std::string> named;
  int created = 0;
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(answers[i].has_value());
    const auto& answer = *answers[i];
    ASSERT_TRUE(answer.ok()) << "thread " << i << ": " << answer.error().detail;
    named.insert(answer->hold.hold_id);
    if (answer->created) ++created;
    EXPECT_EQ(answer->hold.request_id, "same-request");
    EXPECT_EQ(answer->hold.amount, 1);
    EXPECT_EQ(answer->hold.status, HoldStatus::active);
  }
  EXPECT_EQ(created, 1) << "one answer creates the hold, the others replay it";
  ASSERT_EQ(named.size(), 1u) << "every answer names the same hold";

  auto holds = h.ledger->list_holds({std::string("kiosk")}, {limits::kListPageMax});
  ASSERT_TRUE(holds.ok()) << holds.error().detail;
  ASSERT_EQ(holds->items.size(), 1u) << "exactly one hold exists";
  EXPECT_EQ(holds->items.front().hold_id, *named.begin());
  EXPECT_EQ(holds->items.front().request_id, "same-request");

  auto account = h.ledger->get_account("kiosk");
  ASSERT_TRUE(account.ok()) << account.error().detail;
  EXPECT_EQ(account->balances, (Balances{9, 1, 0, 10}));
  h.expect_audit_clean();
}

TEST_P(LedgerRace, SixteenCommitsOfOneHoldCommitItOnce) {
  constexpr int kCommitters = 16;
  Harness h(GetParam());
  ASSERT_NO_FATAL_FAILURE(h.open_account("kiosk", 10));
  auto hold = h.ledger->reserve({"kiosk", 5, "to-commit", std::nullopt, "", ""});
  ASSERT_TRUE(hold.ok()) << hold.error().detail;
  const std::string hold_id = hold->hold.hold_id;

  std::vector<std::optional<Result<HoldOutcome>>> answers(kCommitters);
  race(kCommitters, [&](int i) { answers[i].emplace(h.ledger->commit({hold_id, 3})); });

  int created = 0;
  for (int i = 0; i < kCommitters; ++i) {
    ASSERT_TRUE(answers[i].has_value());
    const auto& answer = *answers[i];
    ASSERT_TRUE(answer.ok()) << "committer " << i << ": " << answer.error().detail;
    if (answer->created) ++created;
    EXPECT_EQ(answer->hold.hold_id, hold_id);
    EXPECT_EQ(answer->hold.status, HoldStatus::committed);
    EXPECT_EQ(answer->hold.committed_amount, 3);
  }
  EXPECT_EQ(created, 1) << "one commit moves credits, the others are replays";

  auto account = h.ledger->get_account("kiosk");
  ASSERT_TRUE(account.ok()) << account.error().detail;
  EXPECT_EQ(account->balances, (Balances{7, 0, 3, 10})) << "used increases once";
  std::int64_t committed_events = 0;
  for (const Event& e : h.all_events("kiosk")) committed_events += e.type == EventType::committed ? 1 : 0;
  EXPECT_EQ(committed_events, 1);
  h.expect_audit_clean();
}

// Commits and releases of one hold race: whichever lands first ends the hold, every other answer is
// either its replay or the refusal that names the winner's state; credits move once.
TEST_P(LedgerRace, CommitsAndReleasesOfOneHoldEndItOnce) {
  constexpr int kRacers = 16;
  Harness h(GetParam());
  ASSERT_NO_FATAL_FAILURE(h.open_account("kiosk", 10));
  auto hold = h.ledger->reserve({"kiosk", 4, "contested", std::nullopt, "", ""});
  ASSERT_TRUE(hold.ok()) << hold.error().detail;
  const std::string hold_id = hold->hold.hold_id;

  std::vector<std::optional<Result<HoldOutcome>>> answers(kRacers);
  race(kRacers, [&](int i) {
    answers[i].emplace(i % 2 == 0 ? h.ledger->commit({hold_id, std::nullopt}) : h.ledger->release({hold_id}));
  });

  int created = 0;
  std::optional<HoldStatus> winner;
  for (int i = 0; i < kRacers; ++i) {
    const auto& answer = *answers[i];
    if (answer.ok() && answer->created) {
      ++created;
      winner = answer->hold.status;
    }
  }
  ASSERT_EQ(created, 1) << "exactly one operation ends the hold";
  ASSERT_TRUE(winner == HoldStatus::committed || winner == HoldStatus::released);
  for (int i = 0; i < kRacers; ++i) {
    const auto& answer = *answers[i];
    const bool is_commit = i % 2 == 0;
    const bool same_kind = is_commit == (winner == HoldStatus::committed);
    if (same_kind) {
      ASSERT_TRUE(answer.ok()) << "racer " << i << ": " << answer.error().detail;
      EXPECT_EQ(answer->hold.status, *winner);
    } else {
      EXPECT_EQ(answer.code(), is_commit ? Code::hold_released : Code::hold_committed) << "racer " << i;
    }
  }

  auto account = h.ledger->get_account("kiosk");
  ASSERT_TRUE(account.ok()) << account.error().detail;
  EXPECT_EQ(account->balances, winner == HoldStatus::committed ? (Balances{6, 0, 4, 10}) : (Balances{10, 0, 0, 10}));
  h.expect_audit_clean();
}

// Holds at their deadline, committed while reapers run: whoever comes first expires the hold, so
// every commit is a late commit (charged) and every hold ends exactly once, whatever the order.
TEST_P(LedgerRace, CommitsRacingTheReaperEndEachHoldOnce) {
  constexpr int kHolds = 32;
  constexpr int kReapers = 4;
  constexpr std::int64_t kTtlMs = 10;
  Harness h(GetParam());
  ASSERT_NO_FATAL_FAILURE(h.open_account("kiosk", 1000));
  std::vector<std::string> hold_ids;
  for (int i = 0; i < kHolds; ++i) {
    auto hold = h.ledger->reserve({"kiosk", 3, "due-" + std::to_string(i), kTtlMs, "", ""});
    ASSERT_TRUE(hold.ok()) << hold.error().detail;
    hold_ids.push_back(hold->hold.hold_id);
  }
  h.clock.advance_ms(kTtlMs);  // now == expires_at: overdue

  std::vector<std::optional<Result<HoldOutcome>>> answers(kHolds);
  std::atomic<std::int64_t> reaped{0};
  race(kHolds + kReapers, [&](int i) {
    if (i < kHolds) {
      answers[i].emplace(h.ledger->commit({hold_ids[i], 2}));
    } else {
      auto r = h.ledger->reap_once();
      ASSERT_TRUE(r.ok()) << r.error().detail;
      reaped.fetch_add(*r);
    }
  });

  for (int i = 0; i < kHolds; ++i) {
    const auto& answer = *answers[i];
    ASSERT_TRUE(answer.ok()) << "commit " << i << ": " << answer.error().detail;
    EXPECT_TRUE(answer->created);
    EXPECT_EQ(answer->hold.status, HoldStatus::expired) << "a hold at its deadline is expired, reaper or not";
    EXPECT_EQ(answer->hold.late_outcome, LateOutcome::charged);
    EXPECT_EQ(answer->hold.committed_amount, 2);
  }
  EXPECT_LE(reaped.load(), kHolds);
  auto account = h.ledger->get_account("kiosk");
  ASSERT_TRUE(account.ok()) << account.error().detail;
  EXPECT_EQ(account->balances, (Balances{1000 - 2 * kHolds, 0, 2 * kHolds, 1000}));
  EXPECT_EQ(account->active_holds, 0);
  std::map<EventType, int> counts;
  for (const Event& e : h.all_events("kiosk")) ++counts[e.type];
  EXPECT_EQ(counts[EventType::expired], kHolds) << "each hold expired once, by the reaper or by its commit";
  EXPECT_EQ(counts[EventType::late_charged], kHolds);
  EXPECT_EQ(counts[EventType::committed], 0);
  h.expect_audit_clean();
}

// stop() while 32 threads keep reserving: every caller gets an answer (nobody hangs); each `ok` is
// in the store and each `unavailable` made nothing.
TEST_P(LedgerRace, StopWhileThreadsReserveAnswersEveryCallerTruthfully) {
  constexpr int kClients = 32;
  constexpr int kAttemptsMax = 25;  // 800 holds at most: list_holds sees them all in one page
  Harness h(GetParam());
  ASSERT_NO_FATAL_FAILURE(h.open_account("kiosk", 100'000));
  std::atomic<int> ok_count{0};
  std::mutex mu;
  std::set<std::string> made;     // request ids answered ok
  std::set<std::string> refused;  // request ids answered unavailable
  std::vector<std::thread> clients;
  std::latch start(kClients + 1);
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      start.arrive_and_wait();
      for (int attempt = 0; attempt < kAttemptsMax; ++attempt) {
        const std::string request_id = "stop-" + std::to_string(c) + "-" + std::to_string(attempt);
        auto answer = h.ledger->reserve({"kiosk", 1, request_id, std::nullopt, "", ""});
        std::lock_guard lock(mu);
        if (answer.ok()) {
          made.insert(request_id);
          ok_count.fetch_add(1);
        } else {
          EXPECT_EQ(answer.code(), Code::unavailable) << request_id << ": " << answer.error().detail;
          refused.insert(request_id);
          return;  // the ledger is stopping: so does the client
        }
      }
    });
  }
  start.arrive_and_wait();
  while (ok_count.load() < 100) std::this_thread::yield();  // stop in the middle of the load
  h.ledger->stop();
  for (auto& t : clients) t.join();

  auto holds = h.ledger->list_holds({std::string("kiosk")}, {limits::kListPageMax});
  ASSERT_TRUE(holds.ok()) << holds.error().detail;
  std::set<std::string> stored;
  for (const Hold& hold : holds->items) stored.insert(hold.request_id);
  EXPECT_EQ(stored, made) << "the store holds exactly the acknowledged reservations";
  for (const auto& request_id : refused) EXPECT_FALSE(stored.count(request_id)) << request_id;
  auto account = h.ledger->get_account("kiosk");
  ASSERT_TRUE(account.ok()) << account.error().detail;
  EXPECT_EQ(account->balances.reserved, static_cast<std::int64_t>(made.size()));
  h.expect_audit_clean();
}

INSTANTIATE_TEST_SUITE_P(Backends, LedgerRace, ::testing::ValuesIn(testing::all_backends()), testing::BackendName{});

}  // namespace
}  // namespace tollgate
