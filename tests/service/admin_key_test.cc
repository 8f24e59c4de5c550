// The admin key (api.md: "Configuring a key retires the generated one"), with real server
// processes on SQLite and on PostgreSQL:
//   - the key generated at the first start stops working once a key is configured and the server
//     restarted, in the database too (revoked through the ordinary write path), while the
//     configured key and account keys work;
//   - DELETE /v1/keys/admin answers what README and api.md say: 409 with advice that works while
//     the generated key is the only way in, 200 (already revoked) once a configured key retired it;
//   - a start without a configured key after that refuses clearly instead of generating another;
//   - several instances starting together with the key configured all retire it, none fails;
//   - a busy port fails start-up before any key is generated, and the next start prints the key.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "core/clock.h"
#include "http/auth.h"
#include "http/http_test_support.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"

namespace tollgate::httptest {
namespace {

constexpr const char* kConfiguredKey = "configured-admin-key-0123456789";
constexpr const char* kGeneratedKeyMarker = "generated admin key (shown once, stored hashed): ";

// A database for `tollgate serve`: a SQLite file, or a fresh schema on the test PostgreSQL server.
class AdminKey : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      database_ = "sqlite:" + dir_.file("tollgate.db");
      return;
    }
    auto uri = testing::postgres_server_uri();
    if (!uri) {
      if (testing::postgres_required()) FAIL() << "TOLLGATE_REQUIRE_POSTGRES=1 but TOLLGATE_TEST_POSTGRES is not set";
      GTEST_SKIP() << "no PostgreSQL server (set TOLLGATE_TEST_POSTGRES)";
    }
    schema_ = std::make_unique<testing::PgSchema>(*uri);
    database_ = schema_->uri();
  }

  ServerOptions options(const std::string& admin_key) const {
    ServerOptions o;
    o.admin_key = admin_key;  // empty: none configured
    o.database = database_;
    return o;
  }

  // The stored key whose secret is `secret`, read straight from the database (the server stopped).
  std::optional<ApiKey> stored_key(const std::string& secret) {
    SystemClock clock;
    std::unique_ptr<Store> store;
    if (GetParam() == "sqlite") {
      SqliteOptions o;
      o.path = database_.substr(std::string("sqlite:").size());
      auto opened = SqliteStore::open(o, clock);
      if (!opened) ADD_FAILURE() << opened.error().detail;
      if (!opened) return std::nullopt;
      store = std::move(opened).value();
    } else {
      PgOptions o;
      o.uri = database_;
      auto opened = PgStore::open(o);
      if (!opened) ADD_FAILURE() << opened.error().detail;
      if (!opened) return std::nullopt;
      store = std::move(opened).value();
    }
    auto found = store->find_key(http::sha256_hex(secret));
    if (!found) ADD_FAILURE() << found.error().detail;
    return found ? found->key : std::nullopt;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::PgSchema> schema_;
  std::string database_;
};

TEST_P(AdminKey, AGeneratedKeyStopsWorkingOnceAKeyIsConfiguredAndTheServerRestarted) {
  std::string generated;
  std::string account_secret;
  {
    ServerProcess first(options(""));
    generated = first.admin_key();
    ASSERT_FALSE(generated.empty()) << "no key printed:\n" << first.output();
    HttpClient admin(first.port(), generated);
    ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "kiosk"}}).status, 201u);
    const HttpResponse key = admin.post("/v1/accounts/kiosk/keys", json::object{});
    ASSERT_EQ(key.status, 201u) << key;
    account_secret = jstr(key.object(), "secret");

    // The generated key is the only way in: the API refuses to revoke it, and says what works.
    const HttpResponse refused = admin.del("/v1/keys/admin");
    EXPECT_TRUE(is_problem(refused, 409, "conflict")) << refused;
    EXPECT_EQ(jstr(refused.object(), "detail"),
              "the generated admin key cannot be revoked through the API (that would lock every operator out); set "
              "admin_key (or TOLLGATE_ADMIN_KEY) and restart the server: a configured admin key retires the generated "
              "one");
    EXPECT_EQ(admin.get("/v1/accounts/kiosk").status, 200u) << "the refused revocation changed something";
    ASSERT_EQ(first.stop(SIGTERM), 0) << first.log();
  }
  {
    // The advice followed: a configured key, a restart.
    ServerProcess second(options(kConfiguredKey));
    EXPECT_EQ(second.output().find(kGeneratedKeyMarker), std::string::npos) << second.output();
    EXPECT_NE(second.log().find("the generated admin key is retired: an admin key is configured"), std::string::npos)
        << second.log();
    HttpClient old_admin(second.port(), generated);
    EXPECT_TRUE(is_problem(old_admin.get("/v1/accounts/kiosk"), 401, "unauthorized"));
    EXPECT_TRUE(is_problem(old_admin.post("/v1/accounts", json::object{{"account_id", "intruder"}}), 401, "unauthorized"));
    HttpClient admin(second.port(), kConfiguredKey);
    EXPECT_EQ(admin.get("/v1/accounts/kiosk").status, 200u);
    EXPECT_EQ(admin.get("/v1/accounts/intruder").status, 404u);
    // Account keys are not admin keys: they keep working.
    EXPECT_EQ(HttpClient(second.port(), account_secret).get("/v1/accounts/kiosk").status, 200u);
    // Revoking the retired key again is what revoking a revoked key always is: 200, nothing more.
    const HttpResponse again = admin.del("/v1/keys/admin");
    EXPECT_EQ(again.status, 200u) << again;
    EXPECT_EQ(again.object().at("revoked"), json::value(true)) << again;
    ASSERT_EQ(second.stop(SIGTERM), 0) << second.log();
  }
  // Retired in the database, not only refused by this server: every instance sharing it agrees.
  const auto stored = stored_key(generated);
  ASSERT_TRUE(stored.has_value());
  EXPECT_FALSE(stored->account_id.has_value());
  EXPECT_TRUE(stored->revoked_at_ms.has_value()) << "the generated key is still active in the database";

  // Without a configured key now, start-up refuses instead of quietly generating another one.
  const ProcessResult third = testing::run_tollgate({"serve", "--listen", "127.0.0.1:0", "--database", database_}, {},
                                                    std::chrono::seconds(30));
  EXPECT_EQ(third.exit_code, 2) << third.err;
  EXPECT_NE(third.err.find("the generated admin key was retired when an admin key was configured; configure one here "
                           "too (admin_key or TOLLGATE_ADMIN_KEY)"),
            std::string::npos)
      << third.err;
  EXPECT_EQ(third.out.find(kGeneratedKeyMarker), std::string::npos) << third.out;

  // With the key configured again, it starts: retiring twice is idempotent.
  ServerProcess fourth(options(kConfiguredKey));
  EXPECT_EQ(HttpClient(fourth.port(), kConfiguredKey).get("/v1/accounts/kiosk").status, 200u);
  EXPECT_TRUE(is_problem(HttpClient(fourth.port(), generated).get("/v1/accounts/kiosk"), 401, "unauthorized"));
}

TEST_P(AdminKey, AConfiguredKeyFromTheFirstStartGeneratesNothing) {
  ServerProcess server(options(kConfiguredKey));
  EXPECT_EQ(server.output().find(kGeneratedKeyMarker), std::string::npos) << server.output();
  HttpClient admin(server.port(), kConfiguredKey);
  EXPECT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "a"}}).status, 201u);
  // There is no generated key to revoke.
  EXPECT_TRUE(is_problem(admin.del("/v1/keys/admin"), 404, "not_found"));
}

// A port that something else listens on, for as long as the object lives.
class BusyPort {
 public:
  BusyPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    socklen_t length = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
  }
  ~BusyPort() { ::close(fd_); }
  BusyPort(const BusyPort&) = delete;
  BusyPort& operator=(const BusyPort&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

TEST_P(AdminKey, ABusyPortFailsStartUpBeforeAnyKeyIsGeneratedAndTheNextStartPrintsTheKey) {
  {
    BusyPort busy;
    const std::string listen = "127.0.0.1:" + std::to_string(busy.port());
    const ProcessResult r =
        testing::run_tollgate({"serve", "--listen", listen, "--database", database_}, {}, std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("listen on " + listen + ": Address already in use"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find(kGeneratedKeyMarker), std::string::npos) << "a key was printed and lost:\n" << r.out;
    EXPECT_EQ(r.err.find("listening on"), std::string::npos) << r.err;
  }
  // Nothing was stored either: the next start, on a free port, generates the key and prints it.
  ServerProcess next(options(""));
  ASSERT_FALSE(next.admin_key().empty()) << "the next start printed no key:\n" << next.output() << next.log();
  EXPECT_EQ(HttpClient(next.port(), next.admin_key()).post("/v1/accounts", json::object{{"account_id", "a"}}).status, 201u);
  // The key is printed before the server says it listens, so whoever waits for that line has it.
  EXPECT_NE(next.output().find(kGeneratedKeyMarker), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Backends, AdminKey, ::testing::Values("sqlite", "postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// On PostgreSQL, instances starting together with a key configured all retire the generated key
// through the same locked write: one revokes it, the others find it revoked; none fails to start.
class AdminKeyPostgres : public AdminKey {};

TEST_P(AdminKeyPostgres, ThreeInstancesStartingTogetherWithAConfiguredKeyAllStartAndRetireTheGeneratedKeyOnce) {
  std::string generated;
  {
    ServerProcess first(options(""));
    generated = first.admin_key();
    ASSERT_FALSE(generated.empty());
    ASSERT_EQ(first.stop(SIGTERM), 0) << first.log();
  }
  std::vector<std::unique_ptr<ServerProcess>> instances(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> starters;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    starters.emplace_back([&, i] {
      try {
        instances[i] = std::make_unique<ServerProcess>(options(kConfiguredKey));
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : starters) t.join();
  int retired_here = 0;
  for (std::size_t i = 0; i < instances.size(); ++i) {
    ASSERT_TRUE(instances[i]) << "instance " << i << " did not start: " << errors[i];
    EXPECT_TRUE(is_problem(HttpClient(instances[i]->port(), generated).get("/v1/accounts/x"), 401, "unauthorized"));
    EXPECT_EQ(HttpClient(instances[i]->port(), kConfiguredKey).get("/v1/accounts/x").status, 404u);
    retired_here += instances[i]->log().find("the generated admin key is retired") != std::string::npos;
  }
  EXPECT_EQ(retired_here, 1) << "exactly one instance revoked it; the others found it revoked";
  for (auto& instance : instances) EXPECT_EQ(instance->stop(SIGTERM), 0) << instance->log();
  const auto stored = stored_key(generated);
  ASSERT_TRUE(stored.has_value());
  EXPECT_TRUE(stored->revoked_at_ms.has_value());
}

INSTANTIATE_TEST_SUITE_P(Backends, AdminKeyPostgres, ::testing::Values("postgresql"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace tollgate::httptest
