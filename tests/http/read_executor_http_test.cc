// No blocking work on the I/O threads (server.h): reads run on the reader executor, and a full
// audit runs there in parts of limits::kAuditAccountsPerTask accounts, so that health checks,
// reservations and other reads keep answering while an audit of every account runs.
//
// A real server process on a database prefilled (through the store, in batches: fast) with
// 100,000 accounts (20,000 under sanitizers; 5,000 on PostgreSQL). Two full audits run at once — as many as the server has I/O threads, so that
// an audit run on the I/O threads (the code before the executor) would stall every connection —
// while this test measures /healthz, reservations and account reads. It asserts that they keep
// answering, each within a generous bound over its own p99 before the audit (not a performance
// target: a hang detector that would fail if they waited for the audit), and that the audits were
// still running when they answered.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

#include "support/sanitizers.h"
#include "core/clock.h"
#include "http/http_test_support.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"

namespace tollgate::httptest {
namespace {

#if defined(TOLLGATE_ASAN) || defined(TOLLGATE_TSAN)
constexpr std::int64_t kSqliteAccounts = 20'000;  // sanitizers make every read ~10x slower: scaled down
#else
constexpr std::int64_t kSqliteAccounts = 100'000;
#endif
// PostgreSQL audits an account in three round trips (its row, its events, its active holds): two
// audits of 100,000 accounts take minutes there, so its run is scaled down.
constexpr std::int64_t kPostgresAccounts = 5'000;

using SteadyClock = std::chrono::steady_clock;
using Ms = std::chrono::duration<double, std::milli>;

// Creates `accounts` accounts (acct-000000 …) straight through the store, in large batches.
void prefill(Store& store, std::int64_t accounts) {
  constexpr std::int64_t kBatch = 2'000;
  std::vector<Command> commands;
  std::vector<CommandResult> results;
  for (std::int64_t first = 0; first < accounts; first += kBatch) {
    commands.clear();
    for (std::int64_t i = first; i < std::min(accounts, first + kBatch); ++i) {
      char id[32];
      std::snprintf(id, sizeof id, "acct-%06lld", static_cast<long long>(i));
      commands.emplace_back(CreateAccountCommand{id, 0, std::nullopt});
    }
    results.clear();
    ASSERT_TRUE(store.apply(commands, results).ok());
    for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.error().detail;
  }
  ASSERT_TRUE(store.sync().ok());
}

double p99_ms(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return samples[std::min(samples.size() - 1, samples.size() * 99 / 100)];
}

struct Sample {
  double ms;
  SteadyClock::time_point answered;
};

class HttpAuditUnderLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    SystemClock clock;
    ServerOptions options = server_options();
    if (http_suites_on_postgres()) {
      const auto uri = testing::postgres_server_uri();
      if (!uri) {
        if (testing::postgres_required()) FAIL() << "TOLLGATE_REQUIRE_POSTGRES=1 but no TOLLGATE_TEST_POSTGRES";
        GTEST_SKIP() << "no PostgreSQL server (TOLLGATE_TEST_POSTGRES)";
      }
      schema_ = std::make_unique<testing::PgSchema>(*uri);
      PgOptions pg;
      pg.uri = schema_->uri();
      auto store = PgStore::open(pg);
      ASSERT_TRUE(store.ok()) << store.error().detail;
      accounts_ = kPostgresAccounts;
      prefill(**store, accounts_);
      options.database = schema_->uri();
    } else {
      SqliteOptions sqlite;
      sqlite.path = dir_.file("audit.db");
      auto store = SqliteStore::open(sqlite, clock);
      ASSERT_TRUE(store.ok()) << store.error().detail;
      prefill(**store, accounts_);
      options.database = "sqlite:" + sqlite.path;
    }
    server_ = std::make_unique<ServerProcess>(options);
    ASSERT_EQ(wait_until_ready(server_->port()).status, 200u) << server_->log();
  }
  void TearDown() override {
    if (server_) {
      EXPECT_EQ(server_->stop(SIGTERM), 0) << server_->log();
    }
    server_.reset();
    schema_.reset();  // after the server that used it
  }

  std::int64_t accounts_ = kSqliteAccounts;
  testing::TempDir dir_;
  std::unique_ptr<testing::PgSchema> schema_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(HttpAuditUnderLoad, HealthzReservationsAndReadsKeepAnsweringWhileTwoFullAuditsRun) {
  HttpClient admin(server_->port(), kAdminKey);
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "load"}}).status, 201u);
  ASSERT_EQ(admin.post("/v1/accounts/load/credits", json::object{{"amount", 1'000'000'000}, {"reference", "load-c"}}).status,
            201u);
  int reservation = 0;
  // One round: a health check, a reservation, an account read; each one's latency.
  auto round = [&](HttpClient& client, std::vector<Sample>& healthz, std::vector<Sample>& reserve,
                   std::vector<Sample>& read) {
    auto timed = [&](std::vector<Sample>& into, unsigned expected, auto&& call) {
      const auto start = SteadyClock::now();
      const HttpResponse r = call();
      const auto end = SteadyClock::now();
      ASSERT_EQ(r.status, expected) << r;
      into.push_back(Sample{Ms(end - start).count(), end});
    };
    timed(healthz, 200, [&] { return client.get("/healthz"); });
    timed(reserve, 201, [&] {
      return client.post("/v1/holds", json::object{{"account_id", "load"},
                                                    {"amount", 1},
                                                    {"request_id", "r-" + std::to_string(++reservation)}});
    });
    timed(read, 200, [&] { return client.get("/v1/accounts/acct-000042"); });
  };

  // Before: the usual latencies.
  std::vector<Sample> healthz_before, reserve_before, read_before;
  for (int i = 0; i < 200; ++i) round(admin, healthz_before, reserve_before, read_before);
  const double healthz_p99 = p99_ms([&] {
    std::vector<double> v;
    for (const auto& s : healthz_before) v.push_back(s.ms);
    return v;
  }());
  auto p99_of = [](const std::vector<Sample>& samples) {
    std::vector<double> v;
    for (const auto& s : samples) v.push_back(s.ms);
    return p99_ms(v);
  };
  const double reserve_p99 = p99_of(reserve_before), read_p99 = p99_of(read_before);

  // During: two full audits at once, each on its own connection.
  std::atomic<int> audits_running{2};
  auto audit = [&] {
    HttpClient client(server_->port(), kAdminKey, std::chrono::minutes(10));
    HttpResponse r = client.get("/v1/audit");
    const auto answered = SteadyClock::now();
    audits_running.fetch_sub(1);
    return std::make_pair(r, answered);
  };
  auto first = std::async(std::launch::async, audit);
  auto second = std::async(std::launch::async, audit);
  std::vector<Sample> healthz_during, reserve_during, read_during;
  HttpClient during(server_->port(), kAdminKey);
  while (audits_running.load() == 2) round(during, healthz_during, reserve_during, read_during);
  const auto [audit1, audit1_at] = first.get();
  const auto [audit2, audit2_at] = second.get();
  const auto first_audit_done = std::min(audit1_at, audit2_at);

  for (const auto& r : {audit1, audit2}) {
    ASSERT_EQ(r.status, 200u) << r;
    EXPECT_EQ(jint(r.json().as_object(), "accounts_checked"), accounts_ + 1);
    EXPECT_TRUE(r.json().as_object().at("violations").as_array().empty()) << r;
  }
  // The audits were running while these answered: count only what answered before either ended.
  auto before_audit_end = [&](const std::vector<Sample>& samples) {
    std::vector<Sample> out;
    for (const auto& s : samples) {
      if (s.answered < first_audit_done) out.push_back(s);
    }
    return out;
  };
  const auto healthz = before_audit_end(healthz_during);
  const auto reserve = before_audit_end(reserve_during);
  const auto read = before_audit_end(read_during);
  ASSERT_GE(healthz.size(), 10u) << "too few requests answered while the audits ran (" << healthz.size() << " of "
                                 << healthz_during.size() << ")";
  // 10 × the usual p99, at least 200 ms for a health check (answered on the I/O thread) and 1 s for
  // a reservation (a durable write) or a read (on the executor, behind at most a part of each
  // audit): far below what waiting for a whole audit takes.
  auto bound = [](double p99, double floor_ms) { return std::max(10 * p99, floor_ms); };
  auto worst = [](const std::vector<Sample>& samples) {
    double w = 0;
    for (const auto& s : samples) w = std::max(w, s.ms);
    return w;
  };
  std::printf("[ audit ] %lld accounts; during two audits, %zu rounds: healthz p99 %.2f -> %.2f ms (worst %.2f), "
              "reserve p99 %.2f -> %.2f ms (worst %.2f), read p99 %.2f -> %.2f ms (worst %.2f)\n",
              static_cast<long long>(accounts_), healthz.size(), healthz_p99, p99_of(healthz), worst(healthz), reserve_p99,
              p99_of(reserve), worst(reserve), read_p99, p99_of(read), worst(read));
  EXPECT_LE(worst(healthz), bound(healthz_p99, 200));
  EXPECT_LE(worst(reserve), bound(reserve_p99, 1000));
  EXPECT_LE(worst(read), bound(read_p99, 1000));
}

}  // namespace
}  // namespace tollgate::httptest
