// Credit lots on a database made before them (api.md "Credit lots", "Existing databases"), on SQLite
// and on PostgreSQL, through a real server: the release databases of tests/store/fixtures (made by
// release c39df68's own binary: see make-release-fixtures), with two accounts added the way that
// release writes them — carol, never credited (available 0), and dave, 3 into his overdraft
// (available −3: a hold of 3 past his credits, committed). Today's server opens the database and
// upgrades it; then each account with positive available has exactly one lot — no expiry, priority
// 50, paid, reference null, amount and available what the account had available — and the others
// none; the balances are what the release showed (alice's hold that ran out meanwhile counts as
// available for both); the audit is clean; a second start makes no second lot; and the lots are
// live: a hold draws from alice's, a credit pays dave's debt before it makes one.
#include <sqlite3.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "http/http_test_support.h"
#include "http/lots_test_support.h"
#include "store/postgres/pg_conn.h"

namespace tollgate::httptest::lotsmigration {
namespace {

using namespace lotstest;

constexpr const char* kFixtureSchema = "release_c39df68";  // the schema the PostgreSQL dump was made in

std::string fixture(const std::string& suffix) {
  const std::string path = std::string(TOLLGATE_SOURCE_DIR) + "/tests/store/fixtures/release-c39df68." + suffix;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// carol and dave, as the release writes them: carol's row (no event: creating an account writes
// none); dave with an overdraft of 5, a hold of 3 reserved past his (no) credits and committed, its
// two events. `frozen` is the backend's spelling of false; `t` a time after the release's session.
std::string added_accounts(const std::string& frozen, std::int64_t t) {
  const std::string at = std::to_string(t);
  const auto later = [&](int ms) { return std::to_string(t + ms); };
  const std::string hold = "'hold_6_0123456789abcdef'";
  return "INSERT INTO accounts VALUES ('carol', 0, 0, 0, 0, 0, NULL, 0, " + at + ", " + frozen + ");\n"
         "INSERT INTO accounts VALUES ('dave', -3, 0, 3, 0, 5, NULL, 0, " + at + ", " + frozen + ");\n"
         "INSERT INTO holds VALUES (6, " + hold + ", 'dave', 'r-dave', 3, 3, 'committed', NULL, " + later(1) + ", " +
         later(300'001) + ", " + later(2) + ", '{}', NULL);\n"
         "INSERT INTO events VALUES (16, 'dave', 'reserved', 3, " + hold + ", NULL, NULL, " + later(1) +
         ", -3, 3, 0, NULL, NULL, NULL, NULL, NULL);\n"
         "INSERT INTO events VALUES (17, 'dave', 'committed', 3, " + hold + ", NULL, NULL, " + later(2) +
         ", -3, 0, 3, NULL, NULL, NULL, NULL, NULL);\n";
}

// The release's SQLite database (its dump) with carol and dave, in a new file at `path`.
void make_sqlite_release(const std::string& path) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const std::string sql = fixture("sqlite.sql") + "BEGIN;\n" + added_accounts("0", 1796549470000) + "COMMIT;\n";
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

// The release's PostgreSQL dump moved into `schema`, with carol and dave (and the hold sequence and
// the event counter where the release would have left them).
void make_postgres_release(const testing::PgSchema& schema, const std::string& server) {
  std::istringstream in(fixture("postgres.sql"));
  std::string sql, line;
  while (std::getline(in, line)) {
    if (line.starts_with("\\") || line.starts_with("CREATE SCHEMA ")) continue;  // psql's \restrict; the schema is made
    for (std::size_t at = line.find(kFixtureSchema); at != std::string::npos; at = line.find(kFixtureSchema, at)) {
      line.replace(at, std::string(kFixtureSchema).size(), schema.name());
      at += schema.name().size();
    }
    sql += line + "\n";
  }
  pg::Conn::connect(server, pg::ConnectOptions{})->exec(sql);
  auto db = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  db->exec("BEGIN;\n" + added_accounts("false", 1796549490000) +
           "SELECT setval('holds_seq', 6, true);\nUPDATE event_ids SET last_event_id = 17;\nCOMMIT;");
}

// The balances each account must show: the release's (release-c39df68.expect), alice's hold r3 —
// overdue for a day — counted as available, as the release's own reads showed it too.
std::map<std::string, AccountView> expected_accounts() {
  std::map<std::string, AccountView> out;
  std::istringstream lines(fixture("expect"));
  std::string id;
  AccountView a;
  while (lines >> id >> a.available >> a.reserved >> a.used >> a.purchased) out[id] = a;
  EXPECT_EQ(out.size(), 2u);
  out["alice"].available += out["alice"].reserved;
  out["alice"].reserved = 0;
  out["carol"] = AccountView{0, 0, 0, 0, 0};
  out["dave"] = AccountView{-3, 0, 3, 0, 0};
  return out;
}

// What today's server shows of the upgraded database: one lot per account with credits available.
void expect_one_lot_each(HttpClient& admin, const std::string& when) {
  SCOPED_TRACE(when);
  const std::map<std::string, std::int64_t> available_before{{"alice", 86}, {"bob", 18}, {"carol", 0}, {"dave", -3}};
  for (const auto& [id, want] : expected_accounts()) {
    const HttpResponse r = admin.get("/v1/accounts/" + id);
    ASSERT_EQ(r.status, 200u) << r;
    EXPECT_EQ(account_view(r.object()), want) << id;
    EXPECT_TRUE(identity_holds(account_view(r.object()))) << id;
    const auto lots = all_lots(admin, id);
    ASSERT_TRUE(lots.has_value()) << id;
    const std::int64_t before = available_before.at(id);
    if (before <= 0) {
      EXPECT_TRUE(lots->empty()) << id << " had nothing available, yet has " << lots->size() << " lots";
      continue;
    }
    ASSERT_EQ(lots->size(), 1u) << id;
    const LotView& l = lots->front();
    EXPECT_EQ(l.lot_id.rfind("lot_", 0), 0u) << l;
    EXPECT_EQ(l.reference, std::nullopt) << l;
    EXPECT_EQ(l.category, "paid") << l;
    EXPECT_EQ(l.priority, 50) << l;
    EXPECT_EQ(l.expires_at_ms, std::nullopt) << l;
    EXPECT_EQ(l.amount, before) << l;
    EXPECT_EQ(l.available, before) << l;
    EXPECT_EQ(l.reserved + l.used + l.expired, 0) << l;
    EXPECT_EQ(l.status, "active") << l;
  }
  EXPECT_TRUE(audit_clean(admin));
}

// Upgrades the database by starting today's server on it, then checks, restarts, checks again, and
// spends from the lots.
void upgrade_and_check(const std::string& database) {
  ServerOptions options = server_options();
  options.database = database;
  ServerProcess server(options);
  ASSERT_EQ(wait_until_ready(server.port()).status, 200u) << server.log();
  HttpClient admin(server.port(), kAdminKey);
  expect_one_lot_each(admin, "after the upgrade");
  server.restart();
  ASSERT_EQ(wait_until_ready(server.port()).status, 200u) << server.log();
  admin.close();  // its connection was to the server that stopped
  expect_one_lot_each(admin, "after a second start");

  // alice's lot is the one a hold draws from; dave's next credit pays his 3 first.
  const std::string alice_lot = all_lots(admin, "alice").value().front().lot_id;
  const HttpResponse hold =
      admin.post("/v1/holds", json::object{{"account_id", "alice"}, {"amount", 5}, {"request_id", "after-upgrade"}});
  ASSERT_EQ(hold.status, 201u) << hold;
  EXPECT_EQ(hold_draws(hold.object()), (Draws{{alice_lot, 5}}));
  const HttpResponse credit =
      admin.post("/v1/accounts/dave/credits", json::object{{"amount", 5}, {"reference", "dave-after-upgrade"}});
  ASSERT_EQ(credit.status, 201u) << credit;
  const auto dave = all_lots(admin, "dave");
  ASSERT_TRUE(dave.has_value());
  ASSERT_EQ(dave->size(), 1u);
  EXPECT_EQ(dave->front().amount, 2);
  EXPECT_EQ(account_view(admin.get("/v1/accounts/dave").object()), (AccountView{2, 0, 3, 0, 5}));
  EXPECT_TRUE(audit_clean(admin));
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

TEST(HttpLotsMigration, TheSqliteReleaseDatabaseGetsOneLotPerAccountWithCredits) {
  testing::TempDir dir;
  const std::string path = dir.file("release.db");
  make_sqlite_release(path);
  if (::testing::Test::HasFatalFailure()) return;
  upgrade_and_check("sqlite:" + path);
}

TEST(HttpLotsMigration, ThePostgresReleaseDatabaseGetsOneLotPerAccountWithCredits) {
  REQUIRE_POSTGRES(server);
  testing::PgSchema schema(server);
  make_postgres_release(schema, server);
  upgrade_and_check(schema.uri());
}

}  // namespace
}  // namespace tollgate::httptest::lotsmigration
