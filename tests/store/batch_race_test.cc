// PostgreSQL only: a batch of the batch path (PgBatchIo) that loses a race to another instance and
// is run again, made deterministic; and two instances whose batches name the same accounts in
// opposite orders, which must never deadlock.
//
// The race: a third connection plays the other instance. It opens a transaction and writes what an
// instance would write (the account row locked and updated, the hold and its `reserved` event; or a
// transfer and its `credited` event; or a new account), and keeps the transaction open. Meanwhile a
// PgStore's batch needs the same unique key (a request_id, a reference, an account id) on another
// row: its load cannot see the uncommitted row, so it decides to insert, and its INSERT waits on the
// unique index. The test waits until PostgreSQL reports the batch blocked by the third connection
// (pg_blocking_pids, on that very INSERT), then COMMITs the third connection: the batch gets
// unique_violation, is rolled back and re-run (PgStore::counters().conflict_reruns), and the re-run
// sees the winner's row. Afterwards nothing of the first attempt may be left: the other commands of
// the batch are applied exactly once, the audit is clean, the balances are the hand-computed ones.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "slices.h"
#include "core/limits.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using testing::PgSchema;

// The test server, or a failure/skip as the run demands.
std::unique_ptr<PgStore> open_store(const std::string& uri, const Clock* clock) {
  PgOptions options;
  options.uri = uri;
  options.clock = clock;
  options.readers_max = 2;
  options.statement_timeout_ms = 30'000;  // a hang detector (see tests/support/backends.cc)
  auto opened = PgStore::open(options);
  if (!opened) throw std::runtime_error("open: " + opened.error().detail);
  return std::move(opened).value();
}

std::vector<CommandResult> apply_ok(Store& store, const std::vector<Command>& commands) {
  std::vector<CommandResult> results;
  const Status s = store.apply(commands, results);
  EXPECT_TRUE(s.ok()) << s.error().detail;
  EXPECT_EQ(results.size(), commands.size());
  return results;
}

ReserveCommand reserve(const std::string& account, std::int64_t amount, const std::string& request) {
  return ReserveCommand{account, amount, request, 60'000, "", "0123456789abcdef"};
}

std::vector<Event> events_of(Store& store, const std::string& account_id) {
  auto page = store.read_events(account_id, 0, limits::kEventsPageMax);
  EXPECT_TRUE(page.ok()) << page.error().detail;
  return page.ok() ? page->events : std::vector<Event>{};
}

std::vector<std::string> event_summary(Store& store, const std::string& account_id) {
  std::vector<std::string> out;
  for (const Event& e : events_of(store, account_id)) {
    out.push_back(std::string(event_type_name(e.type)) + " " + std::to_string(e.amount) +
                  (e.reference ? " " + *e.reference : ""));
  }
  return out;
}

void expect_audit_clean(Store& store) {
  auto report = store.audit(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.error().detail;
  EXPECT_GE(report->accounts_checked, 1);
  for (const auto& v : report->violations) ADD_FAILURE() << "audit: " << v.account_id << ": " << v.message;
}

Balances balances(Store& store, const std::string& account_id) {
  auto a = store.get_account(account_id);
  EXPECT_TRUE(a.ok()) << account_id << ": " << a.error().detail;
  return a.ok() ? a->balances : Balances{};
}

// An event's id as every instance takes it (pg_store.h): from event_ids, locked until COMMIT.
constexpr const char* kNextEventId =
    "WITH n AS (UPDATE event_ids SET last_event_id = last_event_id + 1 RETURNING last_event_id AS id) ";

// The other instance: a connection of its own, with a transaction it keeps open.
class OtherInstance {
 public:
  explicit OtherInstance(const std::string& uri)
      : conn_(pg::Conn::connect(uri, pg::ConnectOptions{})), pid_(conn_->exec("SELECT pg_backend_pid()").int64(0, 0)) {}
  pg::Conn& conn() { return *conn_; }
  std::int64_t pid() const { return pid_; }

  // BEGIN, and the account locked and read as an instance's batch does: (available, reserved, used).
  Balances begin_and_lock(const std::string& account_id) {
    conn_->exec("BEGIN");
    pg::Rows r = conn_->query("SELECT available, reserved, used, purchased FROM accounts WHERE account_id = $1 FOR UPDATE",
                              account_id);
    if (r.size() != 1) throw std::runtime_error("no account " + account_id);
    return Balances{r.int64(0, 0), r.int64(0, 1), r.int64(0, 2), r.int64(0, 3)};
  }

  // A reservation of `amount` on `account_id` under `request_id`, written as an instance writes it
  // (inside the open transaction). Returns the hold id.
  std::string reserve(const std::string& account_id, std::int64_t amount, const std::string& request_id,
                      std::int64_t now_ms) {
    Balances b = begin_and_lock(account_id);
    b.available -= amount;
    b.reserved += amount;
    conn_->query("UPDATE accounts SET available = $2, reserved = $3, active_holds = active_holds + 1 "
                 "WHERE account_id = $1",
                 account_id, b.available, b.reserved);
    pg::Rows h = conn_->query(
        "INSERT INTO holds (seq, hold_id, account_id, request_id, amount, committed_amount, status, created_at_ms, "
        "expires_at_ms, metadata) SELECT s, 'hold_' || s || '_feedfacefeedface', $1, $2, $3, 0, 'active', $4, $5, '{}' "
        "FROM (SELECT nextval('holds_seq') AS s) n RETURNING hold_id",
        account_id, request_id, amount, now_ms, now_ms + 60'000);
    const std::string hold_id = h.text(0, 0);
    conn_->query(std::string(kNextEventId) +
                     "INSERT INTO events (event_id, account_id, type, amount, hold_id, at_ms, available_after, "
                     "reserved_after, used_after) SELECT n.id, $1, 'reserved', $2, $3, $4, $5, $6, $7 FROM n",
                 account_id, amount, hold_id, now_ms, b.available, b.reserved, b.used);
    return hold_id;
  }

  // A credit of `amount` to `account_id` under `reference`, inside the open transaction.
  void credit(const std::string& account_id, std::int64_t amount, const std::string& reference, std::int64_t now_ms) {
    Balances b = begin_and_lock(account_id);
    b.available += amount;
    b.purchased += amount;
    conn_->query("UPDATE accounts SET available = $2, purchased = $3 WHERE account_id = $1", account_id, b.available,
                 b.purchased);
    pg::Rows e = conn_->query(std::string(kNextEventId) +
                                  "INSERT INTO events (event_id, account_id, type, amount, reference, at_ms, "
                                  "available_after, reserved_after, used_after) SELECT n.id, $1, 'credited', $2, $3, "
                                  "$4, $5, $6, $7 FROM n RETURNING event_id",
                              account_id, amount, reference, now_ms, b.available, b.reserved, b.used);
    conn_->query("INSERT INTO transfers (reference, account_id, kind, amount, reason, event_id) "
                 "VALUES ($1, $2, 'credited', $3, '', $4)",
                 reference, account_id, amount, e.int64(0, 0));
  }

  // A new account, inside a new transaction.
  void create_account(const std::string& account_id, std::int64_t overdraft, std::int64_t now_ms) {
    conn_->exec("BEGIN");
    conn_->query("INSERT INTO accounts (account_id, available, reserved, used, purchased, overdraft_limit, "
                 "max_active_holds, active_holds, created_at_ms) VALUES ($1, 0, 0, 0, 0, $2, NULL, 0, $3)",
                 account_id, overdraft, now_ms);
  }

  void commit() { conn_->exec("COMMIT"); }

 private:
  std::unique_ptr<pg::Conn> conn_;
  std::int64_t pid_;
};

// Waits until a session is blocked by `blocker_pid` while it runs a statement containing
// `statement` (as pg_stat_activity shows it). False after ~10 s.
bool wait_blocked(const std::string& uri, std::int64_t blocker_pid, const std::string& statement) {
  auto observer = pg::Conn::connect(uri, pg::ConnectOptions{});
  for (int i = 0; i < 2'000; ++i) {
    pg::Rows r = observer->query(
        "SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid)) "
        "AND position($2::text in query) > 0",
        blocker_pid, statement);
    if (r.int64(0, 0) > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Runs `commands` on `store` in a thread; the other instance commits once the batch is blocked on
// `statement`. Returns the results and whether the batch was seen blocked.
struct RaceOutcome {
  std::vector<CommandResult> results;
  bool blocked = false;
  std::uint64_t reruns = 0;
};
RaceOutcome race(PgStore& store, const std::string& uri, OtherInstance& other, const std::vector<Command>& commands,
                 const std::string& statement) {
  RaceOutcome out;
  const std::uint64_t reruns_before = store.counters().conflict_reruns.load();
  std::optional<Status> status;
  std::thread batch([&] { status.emplace(store.apply(commands, out.results)); });
  out.blocked = wait_blocked(uri, other.pid(), statement);
  other.commit();
  batch.join();
  EXPECT_TRUE(status && status->ok()) << (status ? status->error().detail : "no status");
  EXPECT_EQ(out.results.size(), commands.size());
  out.reruns = store.counters().conflict_reruns.load() - reruns_before;
  return out;
}

class BatchRace : public ::testing::Test {
 protected:
  void open(const std::string& server) {
    schema_ = std::make_unique<PgSchema>(server);
    store_ = open_store(schema_->uri(), &clock_);
    const auto r = apply_ok(*store_, {CreateAccountCommand{"a", 0, std::nullopt}, CreateAccountCommand{"b", 0, std::nullopt},
                                      CreditCommand{"a", 50, "setup-a"}, CreditCommand{"b", 50, "setup-b"}});
    for (const auto& x : r) ASSERT_TRUE(x.ok()) << x.error().detail;
  }
  void TearDown() override {
    if (store_) expect_audit_clean(*store_);
    store_.reset();
    schema_.reset();
  }

  ManualClock clock_;
  std::unique_ptr<PgSchema> schema_;
  std::unique_ptr<PgStore> store_;
};

TEST_F(BatchRace, AReserveThatLosesItsRequestIdToAnotherInstanceIsRerunAndAnswersIdempotencyMismatch) {
  REQUIRE_POSTGRES(server);
  open(server);
  OtherInstance other(schema_->uri());
  const std::string winner = other.reserve("b", 5, "req-x", clock_.now_ms());
  const RaceOutcome out = race(*store_, schema_->uri(), other,
                               {CreditCommand{"a", 7, "credit-a"}, reserve("a", 5, "req-x"), reserve("a", 3, "req-y")},
                               "INSERT INTO holds");
  ASSERT_TRUE(out.blocked) << "the batch never waited on the other instance's uncommitted hold";
  EXPECT_EQ(out.reruns, 1u) << "the batch should have lost the race once and been re-run";
  ASSERT_EQ(out.results.size(), 3u);
  ASSERT_TRUE(out.results[0].ok()) << out.results[0].error().detail;
  EXPECT_TRUE(std::get<TransferOutcome>(out.results[0].value()).created);
  ASSERT_EQ(code_name(out.results[1].code()), code_name(Code::idempotency_mismatch));
  EXPECT_NE(out.results[1].error().detail.find("on account b"), std::string::npos) << out.results[1].error().detail;
  ASSERT_TRUE(out.results[2].ok()) << out.results[2].error().detail;
  EXPECT_TRUE(std::get<HoldOutcome>(out.results[2].value()).created);
  // Nothing of the first attempt: the credit once, one hold on a, the winner's hold on b.
  EXPECT_EQ(event_summary(*store_, "a"),
            (std::vector<std::string>{"credited 50 setup-a", "credited 7 credit-a", "reserved 3"}));
  EXPECT_EQ(event_summary(*store_, "b"), (std::vector<std::string>{"credited 50 setup-b", "reserved 5"}));
  EXPECT_EQ(balances(*store_, "a"), (Balances{54, 3, 0, 57}));
  EXPECT_EQ(balances(*store_, "b"), (Balances{45, 5, 0, 50}));
  auto hold = store_->get_hold(winner);
  ASSERT_TRUE(hold.ok());
  EXPECT_EQ(hold->account_id, "b");
  auto holds = store_->lists().list_holds(HoldQuery{std::string("a")}, PageRequest{});
  ASSERT_TRUE(holds.ok());
  ASSERT_EQ(holds->items.size(), 1u);
  EXPECT_EQ(holds->items[0].request_id, "req-y");
}

TEST_F(BatchRace, AReserveOfTheSameRequestOnTheSameAccountWaitsForTheWinnerAndReplaysItsHold) {
  // The same account: the batch waits on the account's row lock, not on the unique index, and its
  // load (after the lock) sees the winner's hold — a replay, without a re-run.
  REQUIRE_POSTGRES(server);
  open(server);
  OtherInstance other(schema_->uri());
  const std::string winner = other.reserve("a", 5, "req-x", clock_.now_ms());
  const RaceOutcome out =
      race(*store_, schema_->uri(), other, {reserve("a", 5, "req-x"), CreditCommand{"a", 1, "credit-a"}}, "FOR UPDATE");
  ASSERT_TRUE(out.blocked) << "the batch never waited on the other instance's account lock";
  EXPECT_EQ(out.reruns, 0u);
  ASSERT_TRUE(out.results[0].ok()) << out.results[0].error().detail;
  const auto& replay = std::get<HoldOutcome>(out.results[0].value());
  EXPECT_FALSE(replay.created);
  EXPECT_EQ(replay.hold.hold_id, winner);
  ASSERT_TRUE(out.results[1].ok());
  EXPECT_EQ(event_summary(*store_, "a"),
            (std::vector<std::string>{"credited 50 setup-a", "reserved 5", "credited 1 credit-a"}));
  EXPECT_EQ(balances(*store_, "a"), (Balances{46, 5, 0, 51}));
}

TEST_F(BatchRace, ACreditThatLosesItsReferenceToAnotherInstanceIsRerunAndAnswersIdempotencyMismatch) {
  REQUIRE_POSTGRES(server);
  open(server);
  OtherInstance other(schema_->uri());
  other.credit("b", 10, "ref-r", clock_.now_ms());
  const RaceOutcome out = race(*store_, schema_->uri(), other,
                               {reserve("a", 4, "req-1"), CreditCommand{"a", 10, "ref-r"}, CreditCommand{"a", 2, "ref-s"}},
                               "INSERT INTO events");
  ASSERT_TRUE(out.blocked) << "the batch never waited on the other instance's uncommitted transfer";
  EXPECT_EQ(out.reruns, 1u);
  ASSERT_TRUE(out.results[0].ok()) << out.results[0].error().detail;
  EXPECT_TRUE(std::get<HoldOutcome>(out.results[0].value()).created);
  ASSERT_EQ(code_name(out.results[1].code()), code_name(Code::idempotency_mismatch));
  EXPECT_NE(out.results[1].error().detail.find("on account b"), std::string::npos) << out.results[1].error().detail;
  ASSERT_TRUE(out.results[2].ok()) << out.results[2].error().detail;
  // The re-run's credit answers with its own event (ids taken in the re-run, not the first attempt).
  const auto& credited = std::get<TransferOutcome>(out.results[2].value());
  EXPECT_TRUE(credited.created);
  const auto a_events = events_of(*store_, "a");
  ASSERT_EQ(a_events.size(), 3u);
  EXPECT_EQ(credited.event, a_events[2]);
  EXPECT_EQ(event_summary(*store_, "a"),
            (std::vector<std::string>{"credited 50 setup-a", "reserved 4", "credited 2 ref-s"}));
  EXPECT_EQ(event_summary(*store_, "b"), (std::vector<std::string>{"credited 50 setup-b", "credited 10 ref-r"}));
  EXPECT_EQ(balances(*store_, "a"), (Balances{48, 4, 0, 52}));
  EXPECT_EQ(balances(*store_, "b"), (Balances{60, 0, 0, 60}));
}

TEST_F(BatchRace, ANewAccountCreatedByAnotherInstanceFirstIsRerunAndReplayedWithTheSameSettings) {
  REQUIRE_POSTGRES(server);
  open(server);
  OtherInstance other(schema_->uri());
  other.create_account("n", 0, clock_.now_ms());
  const RaceOutcome out = race(*store_, schema_->uri(), other,
                               {CreateAccountCommand{"n", 0, std::nullopt}, CreditCommand{"n", 5, "ref-n"},
                                CreditCommand{"a", 1, "ref-a"}},
                               "INSERT INTO accounts");
  ASSERT_TRUE(out.blocked) << "the batch never waited on the other instance's uncommitted account";
  EXPECT_EQ(out.reruns, 1u);
  ASSERT_TRUE(out.results[0].ok()) << out.results[0].error().detail;
  EXPECT_FALSE(std::get<AccountOutcome>(out.results[0].value()).created) << "the winner's account: a replay";
  ASSERT_TRUE(out.results[1].ok()) << out.results[1].error().detail;
  ASSERT_TRUE(out.results[2].ok()) << out.results[2].error().detail;
  EXPECT_EQ(balances(*store_, "n"), (Balances{5, 0, 0, 5}));
  EXPECT_EQ(event_summary(*store_, "n"), (std::vector<std::string>{"credited 5 ref-n"}));
  EXPECT_EQ(event_summary(*store_, "a"), (std::vector<std::string>{"credited 50 setup-a", "credited 1 ref-a"}));
}

TEST_F(BatchRace, ANewAccountCreatedByAnotherInstanceWithOtherSettingsIsRerunAndAnswersConflict) {
  REQUIRE_POSTGRES(server);
  open(server);
  OtherInstance other(schema_->uri());
  other.create_account("n", 7, clock_.now_ms());
  const RaceOutcome out =
      race(*store_, schema_->uri(), other, {CreateAccountCommand{"n", 0, std::nullopt}, CreditCommand{"n", 5, "ref-n"}},
           "INSERT INTO accounts");
  ASSERT_TRUE(out.blocked);
  EXPECT_EQ(out.reruns, 1u);
  ASSERT_EQ(code_name(out.results[0].code()), code_name(Code::conflict));
  ASSERT_TRUE(out.results[1].ok()) << out.results[1].error().detail;  // the account exists: the credit applies
  auto n = store_->get_account("n");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->overdraft_limit, 7);
  EXPECT_EQ(n->balances, (Balances{5, 0, 0, 5}));
}

// Two instances whose batches name the same two accounts in opposite orders (and a third ending
// their holds by id, two accounts per batch, and running the reaper): every batch locks its
// accounts in id order whatever the commands' order, so none may deadlock — no 40P01, so no re-run,
// and every command succeeds.
TEST(BatchNoDeadlock, InstancesNamingAccountsInOppositeOrdersNeverDeadlock) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  std::vector<std::unique_ptr<PgStore>> stores;
  for (int i = 0; i < 3; ++i) stores.push_back(open_store(schema.uri(), /*clock=*/nullptr));  // the database's clock
  {
    const auto r = apply_ok(*stores[0], {CreateAccountCommand{"a", 0, std::nullopt}, CreateAccountCommand{"b", 0, std::nullopt},
                                         CreditCommand{"a", 1'000'000, "setup-a"}, CreditCommand{"b", 1'000'000, "setup-b"}});
    for (const auto& x : r) ASSERT_TRUE(x.ok()) << x.error().detail;
  }
  constexpr int kIterations = 120;
  std::mutex mu;
  std::vector<std::string> made;  // hold ids for the third instance to end
  int writers_done = 0;  // writer threads finished (of 2)
  std::atomic<int> failures{0};
  std::atomic<std::int64_t> credits{0}, debits{0};
  // Batches in flight at once (the most seen): the test means something only if they overlapped.
  std::atomic<int> in_flight{0}, most_in_flight{0};
  const auto apply = [&](PgStore& store, const std::vector<Command>& batch, std::vector<CommandResult>& results) {
    const int now = ++in_flight;
    for (int seen = most_in_flight.load(); now > seen && !most_in_flight.compare_exchange_weak(seen, now);) {
    }
    const Status s = store.apply(batch, results);
    --in_flight;
    return s;
  };
  std::latch start(3);
  const auto check = [&](const Status& s, const std::vector<CommandResult>& results, const std::vector<Command>& batch) {
    if (!s.ok()) {
      ADD_FAILURE() << "batch failed: " << s.error().detail;
      ++failures;
      return false;
    }
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) {
        ADD_FAILURE() << "command " << i << " of " << batch.size() << ": " << results[i].error().detail;
        ++failures;
      }
    }
    return true;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kIterations && failures == 0; ++i) {
        // Instance 0 names a then b, instance 1 b then a (and each flips every other batch).
        const bool a_first = (t == 0) == (i % 2 == 0);
        std::vector<Command> batch;
        for (const std::string account : {a_first ? "a" : "b", a_first ? "b" : "a"}) {
          const std::string id = std::to_string(t) + "-" + std::to_string(i) + "-" + account;
          batch.push_back(CreditCommand{account, 3, "c-" + id});
          // Some holds expire almost at once, so the reaper and late commits have work.
          batch.push_back(ReserveCommand{account, 2, "r-" + id, i % 4 == 0 ? 1 : 60'000, "", "00000000000000aa"});
          batch.push_back(DebitCommand{account, 1, "d-" + id, ""});
        }
        std::vector<CommandResult> results;
        if (!check(apply(*stores[t], batch, results), results, batch)) return;
        credits += 6;
        debits += 2;
        std::lock_guard lock(mu);
        for (const auto& r : results) {
          if (r.ok()) {
            if (const auto* h = std::get_if<HoldOutcome>(&r.value())) made.push_back(h->hold.hold_id);
          }
        }
      }
      std::lock_guard lock(mu);
      ++writers_done;
    });
  }
  threads.emplace_back([&] {
    start.arrive_and_wait();
    for (int i = 0; failures == 0; ++i) {
      std::vector<Command> batch;
      bool last = false;
      {
        std::lock_guard lock(mu);
        last = writers_done == 2 && made.size() < 4;
        // The newest holds first: of both accounts, named by id (their accounts locked through the
        // holds), in the order they came.
        while (!made.empty() && batch.size() < 4) {
          const std::string id = made.back();
          made.pop_back();
          if (batch.size() % 2 == 0) {
            batch.push_back(CommitCommand{id, std::nullopt, LateCommitPolicy::charge});
          } else {
            batch.push_back(ReleaseCommand{id});
          }
        }
      }
      if (i % 3 == 0) batch.push_back(ExpireOverdueCommand{20});
      if (!batch.empty()) {
        std::vector<CommandResult> results;
        if (!check(apply(*stores[2], batch, results), results, batch)) return;
      }
      if (last) {
        std::lock_guard lock(mu);
        if (made.empty()) return;
      }
      if (batch.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(most_in_flight.load(), 2) << "the instances' batches never overlapped";
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(stores[i]->counters().conflict_reruns.load(), 0u)
        << "instance " << i << " re-ran a batch: a deadlock (40P01) or another conflict between instances";
    EXPECT_EQ(stores[i]->counters().isolated_batches.load(), 0u) << "instance " << i;
  }
  for (const std::string account : {"a", "b"}) {
    auto a = stores[0]->get_account(account);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->balances.purchased, 1'000'000 + credits.load() / 2 - debits.load() / 2) << account;
    EXPECT_EQ(a->active_holds, 0) << account;
  }
  expect_audit_clean(*stores[1]);
}

}  // namespace
}  // namespace tollgate
