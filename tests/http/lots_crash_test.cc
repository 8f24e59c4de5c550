// kill -9 around credit lots' expiry (api.md "Credit lots"), on SQLite and on PostgreSQL: a real
// server with many accounts, each with a lot that never expires and a lot (spent first: priority 10)
// whose expires_at falls within one short window; every third of those lots has a hold on it. While
// their expiries fall due — the reaper (every 10 ms) writing them, and client threads crediting 1
// to random accounts beside it, so that the next write on an account writes them too — the server
// is killed with SIGKILL at a seeded moment inside the window, and started again on the same
// database. Twice: the second round's lots expire on a database that recovered from the first kill.
//
// After each restart, once every expiry is due: every such lot is expired, with nothing available;
// its expiry wrote exactly one lot_expired event (never two, however the kill fell), of the credits
// it moved, which are the lot's expired credits (no hold has ended since); every figure adds up, per
// lot and per account; the audit is clean. Then the holds are released, their credits go to the
// expired lots, and the audit is clean again.
//
// The seed (printed) picks the kill moments and the threads' accounts: rerun with
// TOLLGATE_LOTS_CRASH_SEED=<seed>. Where exactly the kill lands is up to the scheduler.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "http/http_test_support.h"
#include "http/lots_test_support.h"

namespace tollgate::httptest::lotscrash {
namespace {

using namespace lotstest;

constexpr int kAccounts = 120;
constexpr int kRounds = 2;
constexpr int kClientThreads = 3;
constexpr std::int64_t kWindowMs = 1200;   // the expiries of one round fall within this
constexpr std::int64_t kLeadMs = 1500;     // the window starts this long after the round's first credit
constexpr std::int64_t kMinAheadMs = 300;  // a lot is never made to expire sooner than this after its credit

std::uint64_t crash_seed() {
  if (const char* text = std::getenv("TOLLGATE_LOTS_CRASH_SEED"); text && *text) return std::strtoull(text, nullptr, 10);
  return 5151;
}

// Runs `fn(i)` for i in [0, n) on `threads` threads, each with its own client.
template <typename Fn>
void in_parallel(std::uint16_t port, int n, int threads, Fn fn) {
  std::atomic<int> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      HttpClient client(port, kAdminKey);
      for (int i = next++; i < n; i = next++) fn(client, i);
    });
  }
  for (std::thread& t : pool) t.join();
}

struct Round {
  std::vector<std::string> lots;           // by account: this round's expiring lot
  std::vector<std::int64_t> expires_at;    // by account
  std::vector<std::string> held;           // the round's holds of 2, on every third account's expiring lot
  std::vector<std::int64_t> moved;         // by account: what its lot's expiry moved (its lot_expired event)
  std::int64_t window_end = 0;
};

class LotsCrash {
 public:
  explicit LotsCrash(const std::string& database) {
    ServerOptions options = server_options();
    options.database = database;
    options.env.emplace_back("TOLLGATE_REAPER_INTERVAL_MS", "10");
    server_ = std::make_unique<ServerProcess>(options);
  }

  void run(std::uint64_t seed) {
    ASSERT_EQ(wait_until_ready(server_->port()).status, 200u) << server_->log();
    make_accounts();
    if (::testing::Test::HasFatalFailure()) return;
    std::mt19937_64 rng(seed);
    for (int round = 1; round <= kRounds; ++round) {
      SCOPED_TRACE("round " + std::to_string(round));
      Round r = make_lots(round);
      if (::testing::Test::HasFatalFailure()) return;
      kill_inside_the_window(r, rng);
      if (::testing::Test::HasFatalFailure()) return;
      check_after_restart(r);
      if (::testing::Test::HasFailure()) return;
      release_and_check(r);
      if (::testing::Test::HasFailure()) return;
    }
  }

 private:
  std::string account(int i) const { return "crash-lots-" + std::to_string(i); }

  void make_accounts() {
    std::atomic<int> failures{0};
    in_parallel(server_->port(), kAccounts, 4, [&](HttpClient& client, int i) {
      const HttpResponse a = client.post("/v1/accounts", json::object{{"account_id", account(i)}});
      const HttpResponse c = client.post("/v1/accounts/" + account(i) + "/credits",
                                         json::object{{"amount", 1000}, {"reference", account(i) + "-base"}});
      if (a.status != 201 || c.status != 201) {
        if (failures++ == 0) ADD_FAILURE() << "setting up " << account(i) << ": " << a << " / " << c;
      }
    });
    ASSERT_EQ(failures.load(), 0);
  }

  // Each account gets a lot of 10 + i % 7, priority 10, expiring at its place in the window; one in
  // three a hold of 2 on it.
  Round make_lots(int round) {
    Round r;
    r.lots.resize(kAccounts);
    r.expires_at.resize(kAccounts);
    const std::int64_t start = wall_ms() + kLeadMs;
    std::atomic<int> failures{0};
    in_parallel(server_->port(), kAccounts, 4, [&](HttpClient& client, int i) {
      const std::int64_t at = std::max(start + kWindowMs * i / kAccounts, wall_ms() + kMinAheadMs);
      const HttpResponse c = client.post(
          "/v1/accounts/" + account(i) + "/credits",
          json::object{{"amount", 10 + i % 7}, {"reference", account(i) + "-r" + std::to_string(round)},
                       {"priority", 10}, {"expires_at", rfc3339(at)}});
      const json::value* id = c.status == 201 ? c.object().at("event").as_object().if_contains("lot_id") : nullptr;
      if (!id || !id->is_string()) {
        if (failures++ == 0) ADD_FAILURE() << "crediting " << account(i) << ": " << c;
        return;
      }
      r.lots[i] = std::string(id->as_string());
      r.expires_at[i] = at;
    });
    EXPECT_EQ(failures.load(), 0);
    for (int i = 0; i < kAccounts; i += 3) {
      HttpClient client(server_->port(), kAdminKey);
      const HttpResponse h = client.post("/v1/holds", json::object{{"account_id", account(i)}, {"amount", 2},
                                                                   {"request_id", account(i) + "-h" + std::to_string(round)},
                                                                   {"ttl_ms", 3'600'000}});
      EXPECT_EQ(h.status, 201u) << h;
      if (h.status == 201) r.held.push_back(jstr(h.object(), "hold_id"));
    }
    for (std::int64_t at : r.expires_at) r.window_end = std::max(r.window_end, at);
    return r;
  }

  // Client threads credit 1 (a lot spent last) to random accounts — each a write that meets
  // whatever expiry is due on the account, and takes nothing from the expiring lot — until the
  // server dies; it is killed at a seeded moment inside the window.
  void kill_inside_the_window(Round& r, std::mt19937_64& rng) {
    const std::int64_t window_start = r.window_end - kWindowMs;
    const std::int64_t kill_at = window_start + kWindowMs / 5 + static_cast<std::int64_t>(rng() % (kWindowMs * 3 / 5));
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int t = 0; t < kClientThreads; ++t) {
      clients.emplace_back([&, seed = rng()] {
        std::mt19937_64 mine(seed);
        HttpClient client(server_->port(), kAdminKey, 5s);
        for (int n = 0; !stop.load(); ++n) {
          const int i = static_cast<int>(mine() % kAccounts);
          const HttpResponse c = client.post(
              "/v1/accounts/" + account(i) + "/credits",
              json::object{{"amount", 1}, {"priority", 90}, {"reference", "load-" + std::to_string(seed) + "-" + std::to_string(n)}});
          if (!c.answered()) return;  // the server died
        }
      });
    }
    sleep_until_wall_ms(kill_at);
    const bool late = wall_ms() > kill_at + 100;
    EXPECT_EQ(server_->stop(SIGKILL), 128 + SIGKILL);
    stop = true;
    for (std::thread& t : clients) t.join();
    std::printf("[ lots     ] killed -9 %lld ms into the expiry window of %lld ms%s\n",
                static_cast<long long>(kill_at - window_start), static_cast<long long>(kWindowMs),
                late ? " (the kill came late: the machine is busy)" : "");
    std::fflush(stdout);
    server_->restart();
    ASSERT_EQ(wait_until_ready(server_->port()).status, 200u) << server_->log();
  }

  // Every expiring lot of the round: expired, nothing available, one lot_expired event of what it
  // moved (= its expired credits: no hold on it has ended), each figure adding up; the audit clean.
  void check_after_restart(Round& r) {
    r.moved.assign(kAccounts, -1);
    sleep_until_wall_ms(r.window_end + 50);
    HttpClient client(server_->port(), kAdminKey);
    int checked = 0;
    for (int i = 0; i < kAccounts; ++i) {
      std::vector<std::int64_t> events;
      const auto deadline = std::chrono::steady_clock::now() + kPatience;
      do {  // the reaper writes it soon after the restart
        events.clear();
        for (const json::object& e : account_events(client, account(i), "lot_expired")) {
          const json::value* id = e.if_contains("lot_id");
          if (id && id->is_string() && id->as_string() == r.lots[i]) events.push_back(jint(e, "amount"));
        }
        if (!events.empty()) break;
        std::this_thread::sleep_for(20ms);
      } while (std::chrono::steady_clock::now() < deadline);
      const auto lots = all_lots(client, account(i));
      ASSERT_TRUE(lots.has_value());
      std::optional<LotView> lot;
      for (const LotView& l : *lots) {
        EXPECT_TRUE(lot_identity_holds(l)) << account(i);
        if (l.lot_id == r.lots[i]) lot = l;
      }
      ASSERT_TRUE(lot.has_value()) << r.lots[i] << " of " << account(i) << " is gone";
      EXPECT_EQ(lot->status, "expired") << *lot;
      EXPECT_EQ(lot->available, 0) << *lot;
      ASSERT_EQ(events.size(), 1u) << "lot_expired events of " << *lot << " in " << account(i);
      EXPECT_EQ(events[0], lot->expired) << *lot;
      r.moved[i] = events[0];
      EXPECT_TRUE(identity_holds(account_view(client.get("/v1/accounts/" + account(i)).object()))) << account(i);
      ++checked;
    }
    EXPECT_EQ(checked, kAccounts);
    EXPECT_TRUE(audit_clean(client));
  }

  // The holds on the expired lots end: their credits go to expired, and nothing else moves.
  void release_and_check(const Round& r) {
    HttpClient client(server_->port(), kAdminKey);
    for (const std::string& hold : r.held) {
      const HttpResponse rel = client.post("/v1/holds/" + hold + "/release", json::object{});
      EXPECT_EQ(rel.status, 200u) << rel;
    }
    for (int i = 0; i < kAccounts; i += 3) {
      const auto lots = all_lots(client, account(i));
      ASSERT_TRUE(lots.has_value());
      for (const LotView& l : *lots) {
        if (l.lot_id != r.lots[i]) continue;
        // The round's hold of 2 came back into expired; the load's holds on it stay reserved.
        EXPECT_EQ(l.available, 0) << l;
        EXPECT_EQ(l.expired, r.moved[i] + 2) << l;
        EXPECT_TRUE(lot_identity_holds(l)) << l;
      }
    }
    EXPECT_TRUE(audit_clean(client));
  }

  std::unique_ptr<ServerProcess> server_;
};

void run_on(const std::string& database) {
  const std::uint64_t seed = crash_seed();
  std::printf("[ lots     ] seed %llu (rerun: TOLLGATE_LOTS_CRASH_SEED=%llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  LotsCrash crash(database);
  crash.run(seed);
}

TEST(HttpLotsCrash, KillNineWhileLotsExpireOnSqliteLeavesEachExpiredOnce) { run_on(""); }

TEST(HttpLotsCrash, KillNineWhileLotsExpireOnPostgresLeavesEachExpiredOnce) {
  REQUIRE_POSTGRES(server);
  testing::PgSchema schema(server);
  run_on(schema.uri());
}

}  // namespace
}  // namespace tollgate::httptest::lotscrash
