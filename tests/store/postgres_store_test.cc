// What only a shared database has to get right: several instances (each its own PgStore and
// Ledger, its own writer connection and group committer) on one PostgreSQL schema, time from the
// database's clock, migrations racing at start-up, a database that cannot be reached.
//
// The conformance, race, stress and bad-input suites already run on PostgreSQL through
// testing::all_backends(); these tests add the multi-instance behaviour. They need a server
// (TOLLGATE_TEST_POSTGRES); CI requires one (TOLLGATE_REQUIRE_POSTGRES=1), so there a missing
// server fails them instead of skipping.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ledger/ledger.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"
#include "support/backends.h"
#include "support/server_process.h"

namespace tollgate {
namespace {

using testing::PgSchema;

// The test server, or a failure/skip as the run demands.
// One tollgate instance: its own store (connections) and ledger on a shared schema.
struct Instance {
  Instance(const std::string& uri, const Clock* store_clock, const Clock& ledger_clock) {
    PgOptions options;
    options.uri = uri;
    options.clock = store_clock;
    options.readers_max = 2;
    options.statement_timeout_ms = 30'000;  // a hang detector (see tests/support/backends.cc)
    auto opened = PgStore::open(options);
    if (!opened) throw std::runtime_error("open: " + opened.error().detail);
    store = std::move(opened).value();
    LedgerOptions ledger_options;
    ledger_options.reaper_interval_ms = 0;
    ledger = std::make_unique<Ledger>(*store, ledger_clock, ledger_options);
  }
  std::unique_ptr<PgStore> store;
  std::unique_ptr<Ledger> ledger;  // last: stopped before the store goes
};

std::vector<Event> all_events(Ledger& ledger, const std::string& account_id) {
  std::vector<Event> out;
  std::int64_t after = 0;
  for (;;) {
    auto page = ledger.read_events(account_id, after, limits::kEventsPageMax);
    EXPECT_TRUE(page.ok()) << page.error().detail;
    if (!page.ok() || page->events.empty()) return out;
    out.insert(out.end(), page->events.begin(), page->events.end());
    after = page->next_after;
  }
}

void expect_audit_clean(Ledger& ledger) {
  auto report = ledger.audit(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.error().detail;
  EXPECT_GE(report->accounts_checked, 1);
  for (const auto& v : report->violations) ADD_FAILURE() << "audit: " << v.account_id << ": " << v.message;
}

void open_account(Ledger& ledger, const std::string& id, std::int64_t credits) {
  ASSERT_TRUE(ledger.create_account({id, 0, std::nullopt}).ok());
  ASSERT_TRUE(ledger.credit({id, credits, "purchase-" + id}).ok());
}

TEST(PostgresStore, TheTestRunHasAServerWhenItMustTestPostgres) {
  if (testing::postgres_required()) {
    ASSERT_TRUE(testing::postgres_server_uri().has_value())
        << "TOLLGATE_REQUIRE_POSTGRES=1 but TOLLGATE_TEST_POSTGRES is unset: the PostgreSQL tests would not run";
  }
  if (auto uri = testing::postgres_server_uri()) {
    auto conn = pg::Conn::connect(*uri, pg::ConnectOptions{});
    EXPECT_EQ(conn->exec("SHOW synchronous_commit").text(0, 0), "on");
  }
}

TEST(PostgresStore, TimeIsTheDatabaseClockNotTheInstanceClock) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  // An instance whose own clock is 1970: every time the ledger writes must still be the database's.
  ManualClock skewed(0);
  Instance instance(schema.uri(), /*store_clock=*/nullptr, skewed);
  auto db = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  const auto db_now = [&] {
    return db->exec("SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint").int64(0, 0);
  };
  open_account(*instance.ledger, "clock-1", 5);
  const std::int64_t before = db_now();
  auto hold = instance.ledger->reserve({"clock-1", 1, "clock-r1", 60'000, "", ""});
  const std::int64_t after = db_now();
  ASSERT_TRUE(hold.ok()) << hold.error().detail;
  EXPECT_GE(hold->hold.created_at_ms, before);
  EXPECT_LE(hold->hold.created_at_ms, after);
  EXPECT_EQ(hold->hold.expires_at_ms, hold->hold.created_at_ms + 60'000);
  const std::int64_t store_now = instance.store->now_ms();
  EXPECT_GE(store_now, after);
  EXPECT_LE(store_now, db_now());
  // A TTL that has passed by the database's clock reads expired, whatever the instance's clock says.
  auto short_hold = instance.ledger->reserve({"clock-1", 1, "clock-r2", 1, "", ""});
  ASSERT_TRUE(short_hold.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto read = instance.ledger->get_hold(short_hold->hold.hold_id);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->status, HoldStatus::expired);
}

TEST(PostgresStore, InstancesStartingTogetherMigrateTheSchemaOnce) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  constexpr int kInstances = 6;
  std::latch start(kInstances);
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  std::vector<std::string> errors(kInstances);
  for (int i = 0; i < kInstances; ++i) {
    threads.emplace_back([&, i] {
      PgOptions options;
      options.uri = schema.uri();
      start.arrive_and_wait();
      auto store = PgStore::open(options);
      if (store && (*store)->ping().ok()) {
        ++opened;
      } else {
        errors[i] = store ? "ping failed" : store.error().detail;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(opened.load(), kInstances);
  for (const auto& e : errors) EXPECT_EQ(e, "");
  auto db = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  EXPECT_EQ(db->exec("SELECT count(*) FROM schema_migrations").int64(0, 0), PgStore::kSchemaVersion);
}

TEST(PostgresStore, TwoInstancesRacingForTenCreditsMakeExactlyTenHolds) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  Instance a(schema.uri(), &clock, clock);
  Instance b(schema.uri(), &clock, clock);
  open_account(*a.ledger, "race", 10);
  constexpr int kThreads = 64;
  std::latch start(kThreads);
  std::atomic<int> created{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Ledger& ledger = i % 2 == 0 ? *a.ledger : *b.ledger;
      start.arrive_and_wait();
      auto r = ledger.reserve({"race", 1, "race-" + std::to_string(i), 60'000, "", ""});
      if (r.ok() && r->created) ++created;
      else if (!r.ok() && r.error().code == Code::insufficient_credits) ++refused;
      else ++other;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), 10);
  EXPECT_EQ(refused.load(), kThreads - 10);
  EXPECT_EQ(other.load(), 0);
  auto account = b.ledger->get_account("race");
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account->balances.available, 0);
  EXPECT_EQ(account->balances.reserved, 10);
  expect_audit_clean(*a.ledger);
}

// The webhook endpoints' limit holds across instances: a create counts the endpoints under the
// endpoints' advisory lock (store/postgres/pg_webhooks.h), so two instances cannot both find room.
TEST(PostgresStore, TwoInstancesRacingForTheLastWebhookEndpointsMakeExactlyTheLimit) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  Instance a(schema.uri(), &clock, clock);
  Instance b(schema.uri(), &clock, clock);
  constexpr int kThreads = static_cast<int>(limits::kWebhookEndpointsMax) + 20;
  std::latch start(kThreads);
  std::atomic<int> created{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      Ledger& ledger = i % 2 == 0 ? *a.ledger : *b.ledger;
      CreateEndpointCommand c;
      c.url = "https://hooks.example/" + std::to_string(i);
      start.arrive_and_wait();
      const CommandResult r = ledger.run(std::move(c));
      if (r.ok()) ++created;
      else if (r.error().code == Code::invalid_request) ++refused;
      else ++other;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(created.load(), limits::kWebhookEndpointsMax);
  EXPECT_EQ(refused.load(), kThreads - limits::kWebhookEndpointsMax);
  EXPECT_EQ(other.load(), 0);
  auto db = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  EXPECT_EQ(db->exec("SELECT count(*) FROM webhook_endpoints").int64(0, 0), limits::kWebhookEndpointsMax);
}

TEST(PostgresStore, TheSameRequestIdOnTwoInstancesAtOnceMakesOneHold) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  Instance a(schema.uri(), &clock, clock);
  Instance b(schema.uri(), &clock, clock);
  open_account(*a.ledger, "dup", 100);
  constexpr int kThreads = 32;
  for (int round = 0; round < 5; ++round) {
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    std::vector<std::string> hold_ids(kThreads);
    const std::string request_id = "dup-" + std::to_string(round);
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        Ledger& ledger = i % 2 == 0 ? *a.ledger : *b.ledger;
        start.arrive_and_wait();
        auto r = ledger.reserve({"dup", 2, request_id, 60'000, "", ""});
        if (r.ok()) hold_ids[i] = r->hold.hold_id;
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& id : hold_ids) EXPECT_EQ(id, hold_ids[0]) << "round " << round;
    EXPECT_FALSE(hold_ids[0].empty());
  }
  auto account = a.ledger->get_account("dup");
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account->balances.reserved, 10);  // 5 request ids × 2
  expect_audit_clean(*b.ledger);
}

TEST(PostgresStore, ReapersOnThreeInstancesExpireEachOverdueHoldExactlyOnce) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  std::vector<std::unique_ptr<Instance>> instances;
  for (int i = 0; i < 3; ++i) instances.push_back(std::make_unique<Instance>(schema.uri(), &clock, clock));
  constexpr int kAccounts = 5, kHoldsPerAccount = 60;
  for (int a = 0; a < kAccounts; ++a) open_account(*instances[0]->ledger, "reap-" + std::to_string(a), kHoldsPerAccount);
  for (int a = 0; a < kAccounts; ++a) {
    for (int h = 0; h < kHoldsPerAccount; ++h) {
      auto r = instances[h % 3]->ledger->reserve({"reap-" + std::to_string(a), 1,
                                                  "reap-" + std::to_string(a) + "-" + std::to_string(h), 1'000, "", ""});
      ASSERT_TRUE(r.ok()) << r.error().detail;
    }
  }
  clock.advance_ms(5'000);
  std::atomic<std::int64_t> expired{0};
  std::latch start(3);
  std::vector<std::thread> reapers;
  for (auto& instance : instances) {
    reapers.emplace_back([&, ledger = instance->ledger.get()] {
      start.arrive_and_wait();
      for (int pass = 0; pass < 200; ++pass) {
        auto n = ledger->reap_once();
        ASSERT_TRUE(n.ok()) << n.error().detail;
        expired += *n;
        if (*n == 0) break;
      }
    });
  }
  for (auto& t : reapers) t.join();
  EXPECT_EQ(expired.load(), kAccounts * kHoldsPerAccount);
  for (int a = 0; a < kAccounts; ++a) {
    const std::string id = "reap-" + std::to_string(a);
    std::map<std::string, int> expired_events;
    for (const Event& e : all_events(*instances[1]->ledger, id)) {
      if (e.type == EventType::expired) ++expired_events[*e.hold_id];
    }
    EXPECT_EQ(expired_events.size(), static_cast<std::size_t>(kHoldsPerAccount)) << id;
    for (const auto& [hold, count] : expired_events) EXPECT_EQ(count, 1) << hold;
    auto account = instances[2]->ledger->get_account(id);
    ASSERT_TRUE(account.ok());
    EXPECT_EQ(account->balances.available, kHoldsPerAccount);
    EXPECT_EQ(account->balances.reserved, 0);
  }
  expect_audit_clean(*instances[0]->ledger);
}

// A reader following one account's events with `after` (as GET …/events?after= does) while two
// instances write to it must see every event exactly once: ids increase with commit order.
TEST(PostgresStore, AFollowerOfOneAccountsEventsMissesNoneWhileTwoInstancesWrite) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  Instance a(schema.uri(), &clock, clock);
  Instance b(schema.uri(), &clock, clock);
  Instance reader(schema.uri(), &clock, clock);
  open_account(*a.ledger, "feed", 1'000'000);
  open_account(*a.ledger, "other", 1'000'000);
  std::atomic<bool> writing{true};
  std::vector<Event> followed;
  std::thread follower([&] {
    std::int64_t after = 0;
    for (;;) {
      const bool last_round = !writing.load();
      auto page = reader.ledger->read_events("feed", after, 100);
      ASSERT_TRUE(page.ok());
      followed.insert(followed.end(), page->events.begin(), page->events.end());
      after = page->next_after;
      if (last_round && page->events.empty()) return;
    }
  });
  constexpr int kWriters = 8, kLifecycles = 40;
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      Ledger& ledger = w % 2 == 0 ? *a.ledger : *b.ledger;
      for (int i = 0; i < kLifecycles; ++i) {
        // Batches that touch both accounts, in both orders, so the instances' transactions interleave.
        const std::string first = (w + i) % 2 == 0 ? "feed" : "other";
        const std::string second = first == "feed" ? "other" : "feed";
        for (const auto& account : {first, second}) {
          auto r = ledger.reserve({account, 1, account + "-" + std::to_string(w) + "-" + std::to_string(i), 60'000, "", ""});
          ASSERT_TRUE(r.ok()) << r.error().detail;
          ASSERT_TRUE(ledger.commit({r->hold.hold_id, std::nullopt, LateCommitPolicy::charge}).ok());
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  writing = false;
  follower.join();
  const std::vector<Event> all = all_events(*reader.ledger, "feed");
  ASSERT_EQ(all.size(), 1u + 2u * kWriters * kLifecycles);  // credit + reserve/commit per lifecycle
  ASSERT_EQ(followed.size(), all.size()) << "the follower missed or repeated events";
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(followed[i].event_id, all[i].event_id);
  expect_audit_clean(*a.ledger);
}

// The window between a refused conditional write and the locked read that explains the refusal:
// another instance's credit commits in it. Made deterministic with a third session holding the
// account's row lock: the credit (instance B) queues on it first, then the reservation (instance A)
// finds too little, takes its refusal's locked read and queues behind the credit. When the lock
// goes, the credit commits and the reservation's locked read sees credits the refused write did
// not: it must reserve them (not refuse, and not abort).
TEST(PostgresStore, ACreditCommittedBetweenARefusedReservationAndItsLockedReadIsUsed) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  Instance a(schema.uri(), &clock, clock);
  Instance b(schema.uri(), &clock, clock);
  ASSERT_TRUE(a.ledger->create_account({"gap", 0, std::nullopt}).ok());
  auto holder = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  auto observer = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  const std::int64_t holder_pid = holder->exec("SELECT pg_backend_pid()").int64(0, 0);
  holder->exec("BEGIN; SELECT 1 FROM accounts WHERE account_id = 'gap' FOR UPDATE");
  const auto blocked_by_holder = [&] {
    // Waiting on the holder, or queued behind a session that is (a row lock's later waiters wait
    // on its first waiter).
    return observer
        ->query("WITH first AS (SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))) "
                "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid)) "
                "OR pg_blocking_pids(pid) && ARRAY(SELECT pid FROM first)",
                holder_pid)
        .int64(0, 0);
  };
  const auto wait_for_blocked = [&](std::int64_t n) {
    for (int i = 0; i < 1000 && blocked_by_holder() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return blocked_by_holder() >= n;
  };
  std::optional<Result<TransferOutcome>> credited;
  std::optional<Result<HoldOutcome>> reserved;
  std::thread credit([&] { credited = b.ledger->credit({"gap", 10, "gap-credit"}); });
  ASSERT_TRUE(wait_for_blocked(1)) << "the credit did not queue on the row lock";
  std::thread reserve([&] { reserved = a.ledger->reserve({"gap", 5, "gap-reserve", 60'000, "", ""}); });
  const bool both_queued = wait_for_blocked(2);
  holder->exec("COMMIT");
  credit.join();
  reserve.join();
  ASSERT_TRUE(both_queued) << "the reservation did not queue behind the credit";
  ASSERT_TRUE(credited && credited->ok()) << (credited ? credited->error().detail : "no answer");
  ASSERT_TRUE(reserved && reserved->ok()) << (reserved ? reserved->error().detail : "no answer");
  EXPECT_TRUE((*reserved)->created);
  auto account = a.ledger->get_account("gap");
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account->balances.available, 5);
  EXPECT_EQ(account->balances.reserved, 5);
  expect_audit_clean(*b.ledger);
}

// Every account's events, followed with the change feed's cursor (GET /v1/events?after=)
// from `after` on.
std::vector<Event> follow_feed(Ledger& ledger, std::int64_t& after) {
  std::vector<Event> out;
  for (;;) {
    auto page = ledger.read_feed(after, 100);
    EXPECT_TRUE(page.ok()) << page.error().detail;
    if (!page.ok() || page->events.empty()) return out;
    out.insert(out.end(), page->events.begin(), page->events.end());
    after = page->next_after;
  }
}

// The change feed's hazard on a shared database: a batch that took its event ids and commits LATE
// while another instance commits after it. With ids from a sequence the second batch commits
// higher ids first, a follower reading then stores a cursor past the late batch's ids, and never
// sees them. Made deterministic: a third session inserts (and holds, uncommitted) the transfer
// reference instance A's credit is about to insert, so A stops in its last statement — after its
// event ids are taken — on that unique key; then instance B credits another account. The follower
// reads while A waits, the third session rolls back, and the follower reads on from its cursor: it
// must end with exactly every event of the database, the late one included, each once.
TEST(PostgresStore, AFeedFollowerNeverSkipsABatchThatTookItsIdsAndCommittedLate) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  Instance a(schema.uri(), &clock, clock);
  Instance b(schema.uri(), &clock, clock);
  open_account(*a.ledger, "late", 10);
  open_account(*a.ledger, "early", 10);
  open_account(*a.ledger, "bystander", 10);
  std::int64_t cursor = 0;
  std::vector<Event> followed = follow_feed(*a.ledger, cursor);
  ASSERT_EQ(followed.size(), 3u);

  auto blocker = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  auto observer = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  const std::int64_t blocker_pid = blocker->exec("SELECT pg_backend_pid()").int64(0, 0);
  // Of another account than A's credit, so that A's account lock does not wait for it.
  blocker->exec("BEGIN; INSERT INTO transfers (reference, account_id, kind, amount, reason, event_id) "
                "VALUES ('ref-late', 'bystander', 'credited', 1, '', 0)");
  const auto blocked_by = [&](std::int64_t pid) -> std::optional<std::int64_t> {
    pg::Rows r = observer->query("SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid);
    if (r.empty()) return std::nullopt;
    return r.int64(0, 0);
  };
  std::optional<Result<TransferOutcome>> late, early;
  std::atomic<bool> early_done{false};
  std::thread late_writer([&] { late = a.ledger->credit({"late", 5, "ref-late"}); });
  std::optional<std::int64_t> late_pid;
  for (int i = 0; i < 2000 && !late_pid; ++i) {
    late_pid = blocked_by(blocker_pid);
    if (!late_pid) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::thread early_writer([&] {
    early = b.ledger->credit({"early", 3, "ref-early"});
    early_done = true;
  });
  bool early_waits_for_late = false;
  if (late_pid) {
    // Until B either committed (ids from a sequence would let it) or waits for A's ids.
    for (int i = 0; i < 2000 && !early_done; ++i) {
      if (blocked_by(*late_pid)) {
        early_waits_for_late = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  // The follower reads while A's batch waits with its ids taken.
  const std::vector<Event> while_late = follow_feed(*a.ledger, cursor);
  followed.insert(followed.end(), while_late.begin(), while_late.end());
  blocker->exec("ROLLBACK");
  late_writer.join();
  early_writer.join();
  ASSERT_TRUE(late_pid.has_value()) << "A's credit never waited on the uncommitted transfer";
  ASSERT_TRUE(late && late->ok()) << (late ? late->error().detail : "no answer");
  ASSERT_TRUE(early && early->ok()) << (early ? early->error().detail : "no answer");
  EXPECT_TRUE(early_waits_for_late) << "B committed while A held ids: the order of commits and ids differ";
  EXPECT_TRUE(while_late.empty()) << "the follower saw an event committed after A took its ids";
  const std::vector<Event> rest = follow_feed(*a.ledger, cursor);
  followed.insert(followed.end(), rest.begin(), rest.end());

  std::int64_t from_zero = 0;
  const std::vector<Event> all = follow_feed(*b.ledger, from_zero);
  ASSERT_EQ(all.size(), 5u);
  ASSERT_EQ(followed.size(), all.size()) << "the follower missed or repeated events";
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(followed[i], all[i]);
  EXPECT_EQ(all[3].reference, "ref-late");  // A took its ids first, so it comes first
  EXPECT_EQ(all[4].reference, "ref-early");
  expect_audit_clean(*a.ledger);
}

// A feed read waiting on one instance is woken by another instance's write (the waiters poll the
// database's last event id while anyone waits).
TEST(PostgresStore, AWaitingFeedReadOnOneInstanceWakesForAWriteOfAnother) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  Instance a(schema.uri(), &clock, clock);
  Instance b(schema.uri(), &clock, clock);
  open_account(*b.ledger, "acct", 10);
  std::int64_t cursor = 0;
  ASSERT_EQ(follow_feed(*a.ledger, cursor).size(), 1u);
  const auto started = std::chrono::steady_clock::now();
  std::optional<Result<EventPage>> page;
  std::thread reader([&] { page = a.ledger->read_feed_waiting(cursor, 100, 30'000); });
  while (a.ledger->event_waiters().waiting() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(b.ledger->credit({"acct", 2, "second"}).ok());
  reader.join();
  ASSERT_TRUE(page && page->ok());
  ASSERT_EQ((*page)->events.size(), 1u);
  EXPECT_EQ((*page)->events[0].reference, "second");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));  // woken, not timed out
}

// Event ids come from event_ids, not a sequence: refused commands take none, ids have no gaps.
TEST(PostgresStore, EventIdsComeFromTheCounterWithoutGaps) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ManualClock clock;
  Instance a(schema.uri(), &clock, clock);
  open_account(*a.ledger, "acct", 10);
  ASSERT_TRUE(a.ledger->credit({"acct", 1, "c-2"}).ok());
  EXPECT_FALSE(a.ledger->credit({"ghost", 1, "c-3"}).ok());  // refused: takes no id
  ASSERT_TRUE(a.ledger->credit({"acct", 1, "c-4"}).ok());
  std::vector<std::int64_t> ids;
  for (const Event& e : all_events(*a.ledger, "acct")) ids.push_back(e.event_id);
  EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 2, 3}));
  auto db = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  EXPECT_EQ(db->exec("SELECT last_event_id FROM event_ids").int64(0, 0), 3);
  EXPECT_EQ(db->exec("SELECT to_regclass('events_seq') IS NULL").text(0, 0), "t");
}

TEST(PostgresStore, AnUnreachableDatabaseIsUnavailableWithinTheConnectTimeout) {
  PgOptions options;
  options.uri = "postgresql://tollgate@127.0.0.1:" + std::to_string(testing::unused_port()) + "/tollgate";
  options.connect_timeout_ms = 2'000;
  const auto started = std::chrono::steady_clock::now();
  auto store = PgStore::open(options);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code, Code::unavailable) << store.error().detail;
  EXPECT_NE(store.error().detail.find("could not connect"), std::string::npos) << store.error().detail;
  EXPECT_LT(took, std::chrono::seconds(5));
}

}  // namespace
}  // namespace tollgate
