// Many `tollgate serve` instances on one PostgreSQL database (design.md: "many stateless instances
// share one database"; api.md: 503 `unavailable` while the database is unreachable). Real server
// processes, a real PostgreSQL, real kill -9:
//   - three instances race for the credits of one account: exactly as many holds as credits;
//   - the reapers of three instances expire every overdue hold exactly once between them;
//   - a restart of the database under load: only 2xx or 503 answers, service resumes by itself, and
//     every acknowledged answer is still true (this test starts its own throw-away server with
//     scripts/pg, so that restarting it disturbs nobody else);
//   - kill -9 of one instance under load: its clients retry the same request on another instance,
//     the others never notice, nothing acknowledged is lost;
//   - one Stripe checkout (both of its events) and one refund, each delivered 10 times at once over
//     three instances: one credit, one debit;
//   - the primary crashes under load and its synchronous standby is promoted: the instances, given
//     both hosts with target_session_attrs=read-write, follow by themselves; only 2xx or 503 answers,
//     nothing acknowledged is lost (its own primary and standby, made with scripts/pg).
//
// They need a PostgreSQL server (TOLLGATE_TEST_POSTGRES, a libpq URI; scripts/test starts one). Without
// it they are skipped, unless TOLLGATE_REQUIRE_POSTGRES=1 (CI), where that is a failure. The restart
// and fail-over tests run scripts/pg from TOLLGATE_PG_SCRIPT (default: the source tree's). Time bounds
// are hang detectors, never performance goals; waits poll a condition, none sleeps and hopes.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <latch>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "core/clock.h"
#include "http/http_test_support.h"
#include "payments/signature.h"
#include "store/postgres/pg_conn.h"

namespace tollgate::httptest {
namespace {

using Steady = std::chrono::steady_clock;
using testing::EnvVars;

// The last `lines` lines of a (server) log, for failure messages: the logs have a line per request.
std::string tail(const std::string& text, std::size_t lines = 30) {
  std::size_t at = text.size();
  for (std::size_t n = 0; n <= lines && at > 0; ++n) {
    const std::size_t nl = text.rfind('\n', at - 1);
    if (nl == std::string::npos) return text;
    at = nl;
  }
  return text.substr(at + 1);
}

// Polls `done` every `period` until it is true or `patience` passes; whether it became true.
template <typename F>
bool eventually(F&& done, std::chrono::milliseconds patience = kPatience,
                std::chrono::milliseconds period = std::chrono::milliseconds(20)) {
  const auto deadline = Steady::now() + patience;
  for (;;) {
    if (done()) return true;
    if (Steady::now() >= deadline) return false;
    std::this_thread::sleep_for(period);
  }
}

// The seed of the clients' choices and of the moment of a kill or a database restart (printed; rerun
// with TOLLGATE_MULTI_INSTANCE_SEED=<seed>).
std::uint64_t base_seed() {
  if (const char* text = std::getenv("TOLLGATE_MULTI_INSTANCE_SEED"); text && *text) {
    return std::strtoull(text, nullptr, 10);
  }
  return 20240607;
}

std::uint64_t print_seed() {
  const std::uint64_t seed = base_seed();
  std::printf("[ multi ] seed %llu (rerun: TOLLGATE_MULTI_INSTANCE_SEED=%llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

// --- processes: instances on one database, a throw-away PostgreSQL server ------------------------

// `count` tollgate serve processes on one database, each on its own port. With `together`, they are
// started at the same moment (their schema migrations race, under the store's advisory lock).
class Instances {
 public:
  Instances(std::size_t count, const std::string& database, const EnvVars& env, bool together = false) {
    std::vector<std::unique_ptr<ServerProcess>> started(count);
    std::vector<std::string> errors(count);
    auto start = [&](std::size_t i) {
      try {
        ServerOptions options = server_options();
        options.database = database;
        options.env = env;
        options.start_timeout = std::chrono::milliseconds(30'000);
        started[i] = std::make_unique<ServerProcess>(options);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    };
    if (together) {
      std::vector<std::thread> threads;
      for (std::size_t i = 0; i < count; ++i) threads.emplace_back(start, i);
      for (auto& t : threads) t.join();
    } else {
      for (std::size_t i = 0; i < count; ++i) start(i);
    }
    for (std::size_t i = 0; i < count; ++i) {
      if (!started[i]) throw std::runtime_error("instance " + std::to_string(i) + " did not start: " + errors[i]);
    }
    servers_ = std::move(started);
  }

  std::size_t size() const { return servers_.size(); }
  ServerProcess& operator[](std::size_t i) { return *servers_.at(i); }
  std::vector<std::uint16_t> ports() const {
    std::vector<std::uint16_t> out;
    for (const auto& s : servers_) out.push_back(s->port());
    return out;
  }
  // The end of every instance's log, for failure messages.
  std::string logs() const {
    std::string out;
    for (std::size_t i = 0; i < servers_.size(); ++i) {
      out += "--- instance " + std::to_string(i) + " (port " + std::to_string(servers_[i]->port()) + "), last lines:\n" +
             tail(servers_[i]->log());
    }
    return out;
  }

 private:
  std::vector<std::unique_ptr<ServerProcess>> servers_;  // the destructor kills what still runs
};

std::string pg_script() {
  if (const char* s = std::getenv("TOLLGATE_PG_SCRIPT"); s && *s) return s;
  return std::string(TOLLGATE_SOURCE_DIR) + "/scripts/pg";
}

// A PostgreSQL server of this test alone (scripts/pg start in a fresh folder under /tmp), stopped and
// removed by the destructor. restart() is scripts/pg restart: fast shutdown, start on the same port;
// crash() is an immediate shutdown. Made with `standby_of`, it is a synchronous streaming standby of
// that server (scripts/pg standby) instead, which promote() turns into a primary.
class ThrowAwayPostgres {
 public:
  explicit ThrowAwayPostgres(const ThrowAwayPostgres* standby_of = nullptr) : script_(pg_script()) {
    char folder[] = "/tmp/tgmi-XXXXXX";  // short: the unix socket path must fit 107 bytes
    if (!::mkdtemp(folder)) throw std::runtime_error("mkdtemp failed");
    dir_ = folder;
    ::chmod(dir_.c_str(), 0755);  // scripts/pg hands it to the postgres user when run as root
    const std::vector<std::string> argv =
        standby_of ? std::vector<std::string>{script_, "standby", standby_of->dir_, dir_}
                   : std::vector<std::string>{script_, "start", dir_};
    const ProcessResult r = testing::run_process(argv, {}, std::chrono::seconds(120));
    if (r.exit_code != 0) {
      cleanup();
      throw std::runtime_error(script_ + " " + argv[1] + " " + dir_ + " exited with " + std::to_string(r.exit_code) +
                               ":\n" + r.err + r.out);
    }
    uri_ = r.out.substr(0, r.out.find('\n'));
    if (uri_.rfind("postgresql://", 0) != 0) {
      cleanup();
      throw std::runtime_error(script_ + " start printed no URI: '" + r.out + "'");
    }
  }
  ~ThrowAwayPostgres() { cleanup(); }
  ThrowAwayPostgres(const ThrowAwayPostgres&) = delete;
  ThrowAwayPostgres& operator=(const ThrowAwayPostgres&) = delete;

  const std::string& uri() const { return uri_; }
  // "127.0.0.1:PORT", the host part of uri(), for a URI that names several hosts.
  std::string host_port() const {
    const auto at = uri_.find('@') + 1;
    return uri_.substr(at, uri_.find('/', at) - at);
  }
  ProcessResult restart() { return testing::run_process({script_, "restart", dir_}, {}, std::chrono::seconds(120)); }
  ProcessResult crash() { return testing::run_process({script_, "crash", dir_}, {}, std::chrono::seconds(120)); }
  ProcessResult stop() { return testing::run_process({script_, "stop", dir_}, {}, std::chrono::seconds(120)); }
  ProcessResult promote() { return testing::run_process({script_, "promote", dir_}, {}, std::chrono::seconds(120)); }
  std::string log() const { return read_file(dir_ + "/postgres.log"); }
  const std::string& dir() const { return dir_; }
  const std::string& script() const { return script_; }

 private:
  void cleanup() {
    if (dir_.empty()) return;
    testing::run_process({script_, "stop", dir_}, {}, std::chrono::seconds(120));
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
  }

  std::string script_;
  std::string dir_;
  std::string uri_;
};

// --- reading the ledger over HTTP ----------------------------------------------------------------

// The value of one series of GET /metrics ("name" or "name{labels}"); -1 if it could not be read.
double metric(std::uint16_t port, const std::string& series) {
  HttpClient client(port);
  const HttpResponse r = client.get("/metrics");
  if (r.status != 200) return -1;
  const std::string text = "\n" + r.body;
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

// Every event of an account, oldest first (following next_after); checks that event ids increase.
std::vector<json::object> all_events(HttpClient& admin, const std::string& account) {
  std::vector<json::object> out;
  std::int64_t after = 0;
  for (int page = 0; page < 100; ++page) {
    const HttpResponse r = admin.get("/v1/accounts/" + account + "/events?limit=1000&after=" + std::to_string(after));
    EXPECT_EQ(r.status, 200u) << r;
    if (r.status != 200) return out;
    const json::array& events = r.object().at("events").as_array();
    if (events.empty()) return out;
    for (const auto& e : events) {
      const std::int64_t id = jint(e.as_object(), "event_id");
      EXPECT_GT(id, after) << "event ids of " << account << " do not increase";
      after = id;
      out.push_back(e.as_object());
    }
  }
  ADD_FAILURE() << "more than 100 pages of events for " << account;
  return out;
}

// Every hold of an account (one list call: the tests keep fewer than 1000 per account).
std::vector<json::object> all_holds(HttpClient& admin, const std::string& account) {
  const HttpResponse r = admin.get("/v1/holds?limit=1000&account_id=" + account);
  EXPECT_EQ(r.status, 200u) << r;
  std::vector<json::object> out;
  if (r.status != 200) return out;
  for (const auto& h : r.object().at("holds").as_array()) out.push_back(h.as_object());
  EXPECT_LT(out.size(), 1000u) << "the list may be cut off: keep fewer holds per account";
  return out;
}

// GET /v1/audit on `port`: 200, no violations, `accounts` accounts checked.
::testing::AssertionResult audit_is_clean(std::uint16_t port, std::int64_t accounts) {
  HttpClient admin(port, kAdminKey);
  const HttpResponse r = admin.get("/v1/audit");
  if (r.status != 200) return ::testing::AssertionFailure() << "audit: " << r;
  if (!r.object().at("violations").as_array().empty()) return ::testing::AssertionFailure() << "violations: " << r.body;
  if (jint(r.object(), "accounts_checked") != accounts) {
    return ::testing::AssertionFailure() << "accounts_checked is not " << accounts << ": " << r.body;
  }
  return ::testing::AssertionSuccess();
}

void make_account(HttpClient& admin, const std::string& id, std::int64_t credits) {
  const HttpResponse created = admin.post("/v1/accounts", json::object{{"account_id", id}});
  ASSERT_EQ(created.status, 201u) << created;
  const HttpResponse credited =
      admin.post("/v1/accounts/" + id + "/credits", json::object{{"amount", credits}, {"reference", id + "-buy"}});
  ASSERT_EQ(credited.status, 201u) << credited;
}

// --- clients under load, retrying with the same ids ----------------------------------------------

enum class End { commit_all, commit_part, release };

// One reserve → (read) → commit or release, as the client saw it answered.
struct Lifecycle {
  std::string request_id;
  std::int64_t amount = 0;
  End end = End::commit_all;
  std::string hold_id;
  std::string status;                 // answered by the commit or release
  std::int64_t committed_amount = 0;  // answered by the commit or release
};

// What one client thread did and saw. The counters are read by the test's thread while it runs.
struct LoadClient {
  int thread = 0;
  std::string account;
  std::size_t first_instance = 0;
  std::size_t instance = 0;  // the one it talks to now
  std::vector<Lifecycle> done;               // complete lifecycles, every step answered 2xx
  std::vector<std::string> unexpected;       // answers other than 2xx / 503 unavailable / no answer
  std::atomic<int> completed{0};             // == done.size()
  std::atomic<int> answered_503{0};
  std::atomic<int> transport_errors{0};      // no answer (connection refused, reset, time-out)
  std::atomic<int> retried{0};               // requests sent more than once
  std::atomic<int> switches{0};              // moves to another instance
};

struct LoadOptions {
  std::vector<std::uint16_t> ports;
  bool switch_instance_on_transport_error = false;
  int lifecycles_max = 400;  // per client; two clients per account stay below 1000 holds per account
  std::chrono::milliseconds retry_for{kPatience};
  std::chrono::milliseconds retry_pause{25};
};

// The client loop: lifecycles until `stop` (read between lifecycles: each one started is finished).
// A 503 or a lost answer is retried with the same method, target and body (so the same request_id
// or hold) until a final answer or `retry_for`; on a lost answer the client may move to the next
// instance first.
void run_load_client(const LoadOptions& o, LoadClient& c, std::uint64_t seed, const std::atomic<bool>& stop) {
  std::mt19937_64 rng(seed);
  HttpClient client(o.ports.at(c.instance), kAdminKey, std::chrono::milliseconds(10'000));

  // The final answer if it is one of `ok`; nullopt (and `unexpected` noted) otherwise.
  auto send = [&](const std::string& method, const std::string& target, const std::string& body,
                  std::initializer_list<unsigned> ok, int* attempts_out = nullptr) -> std::optional<HttpResponse> {
    const auto deadline = Steady::now() + o.retry_for;
    for (int attempt = 1;; ++attempt) {
      if (attempts_out) *attempts_out = attempt;
      if (attempt == 2) c.retried.fetch_add(1);
      HttpResponse r = client.request(method, target, body);
      const std::string what = method + " " + target + " " + body + " (attempt " + std::to_string(attempt) +
                               ", instance " + std::to_string(c.instance) + ")";
      if (!r.answered()) {
        c.transport_errors.fetch_add(1);
        if (o.switch_instance_on_transport_error) {
          c.instance = (c.instance + 1) % o.ports.size();
          client.set_port(o.ports[c.instance]);
          c.switches.fetch_add(1);
        }
      } else if (r.status == 503) {
        c.answered_503.fetch_add(1);
        if (!is_problem(r, 503, "unavailable") || !r.has_header("Retry-After")) {
          c.unexpected.push_back(what + " → 503 without problem unavailable and Retry-After: " + r.describe());
          return std::nullopt;
        }
      } else if (std::find(ok.begin(), ok.end(), r.status) != ok.end()) {
        return r;
      } else {
        c.unexpected.push_back(what + " → " + r.describe());
        return std::nullopt;
      }
      if (Steady::now() >= deadline) {
        c.unexpected.push_back(what + ": still no final answer after " + std::to_string(o.retry_for.count()) +
                               " ms; last: " + r.describe());
        return std::nullopt;
      }
      std::this_thread::sleep_for(o.retry_pause);
    }
  };

  for (int i = 0; i < o.lifecycles_max && !stop.load(); ++i) {
    Lifecycle l;
    l.request_id = c.account + "-t" + std::to_string(c.thread) + "-" + std::to_string(i);
    l.amount = 1 + static_cast<std::int64_t>(rng() % 3);
    l.end = static_cast<End>(rng() % 3);

    int attempts = 0;
    const auto reserved = send("POST", "/v1/holds",
                               json::serialize(json::object{
                                   {"account_id", c.account}, {"amount", l.amount}, {"request_id", l.request_id}}),
                               {200, 201}, &attempts);
    if (!reserved) return;
    const json::object& hold = reserved->object();
    if (reserved->status == 200 && attempts == 1) {
      c.unexpected.push_back("a new request_id " + l.request_id + " answered 200 at once: " + reserved->describe());
      return;
    }
    if (jstr(hold, "request_id") != l.request_id || jint(hold, "amount") != l.amount ||
        jstr(hold, "status") != "active") {
      c.unexpected.push_back("reserve " + l.request_id + " answered another hold: " + reserved->describe());
      return;
    }
    l.hold_id = jstr(hold, "hold_id");

    const auto read = send("GET", "/v1/holds/" + l.hold_id, "", {200});
    if (!read) return;
    if (jstr(read->object(), "hold_id") != l.hold_id || jstr(read->object(), "status") != "active") {
      c.unexpected.push_back("read of " + l.hold_id + ": " + read->describe());
      return;
    }

    json::object settle;
    std::int64_t expected_committed = 0;
    if (l.end == End::commit_all) expected_committed = l.amount;
    if (l.end == End::commit_part) {
      expected_committed = std::max<std::int64_t>(1, l.amount - 1);
      settle["amount"] = expected_committed;
    }
    const auto settled = send("POST", "/v1/holds/" + l.hold_id + (l.end == End::release ? "/release" : "/commit"),
                              json::serialize(settle), {200});
    if (!settled) return;
    l.status = jstr(settled->object(), "status");
    l.committed_amount = jint(settled->object(), "committed_amount");
    if (l.status != (l.end == End::release ? "released" : "committed") || l.committed_amount != expected_committed) {
      c.unexpected.push_back("settling " + l.hold_id + " answered " + settled->describe());
      return;
    }
    c.done.push_back(l);
    c.completed.fetch_add(1);
  }
}

// Makes the clients: two per account (account `prefix`<n>, `credits` purchased, added to
// `accounts`), on different instances.
void open_load_accounts(std::deque<LoadClient>& clients, const LoadOptions& options, const std::string& prefix,
                        std::int64_t credits, std::set<std::string>& accounts) {
  HttpClient admin(options.ports[0], kAdminKey);
  for (std::size_t t = 0; t < clients.size(); ++t) {
    LoadClient& c = clients[t];
    c.thread = static_cast<int>(t);
    c.account = prefix + std::to_string(t / 2);
    c.first_instance = c.instance = t % options.ports.size();
    if (accounts.insert(c.account).second) {
      ASSERT_NO_FATAL_FAILURE(make_account(admin, c.account, credits));
    }
  }
}

// Runs every client on a thread of its own until stop() (or the object goes): each lifecycle
// started is finished.
class LoadRun {
 public:
  LoadRun(const LoadOptions& options, std::deque<LoadClient>& clients, std::mt19937_64& rng) : clients_(clients) {
    for (auto& c : clients_) threads_.emplace_back(run_load_client, std::cref(options), std::ref(c), rng(), std::cref(stop_));
  }
  ~LoadRun() { stop(); }
  LoadRun(const LoadRun&) = delete;
  LoadRun& operator=(const LoadRun&) = delete;

  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  // Answers 503 and requests that got no answer, so far, over every client.
  int errors_seen() const {
    int n = 0;
    for (const auto& c : clients_) n += c.answered_503.load() + c.transport_errors.load();
    return n;
  }

 private:
  std::deque<LoadClient>& clients_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

int total_completed(const std::deque<LoadClient>& clients) {
  int n = 0;
  for (const auto& c : clients) n += c.completed.load();
  return n;
}

// Every acknowledged lifecycle of `account` is in the ledger as answered, each request_id made one
// hold, each hold has one `reserved` and one ending event, and the books add up.
void expect_books_match(HttpClient& admin, const std::string& account, std::int64_t credits,
                        const std::deque<LoadClient>& clients) {
  SCOPED_TRACE("account " + account);
  std::map<std::string, const Lifecycle*> by_request;
  std::int64_t used = 0;
  for (const LoadClient& c : clients) {
    if (c.account != account) continue;
    for (const Lifecycle& l : c.done) {
      by_request[l.request_id] = &l;
      used += l.committed_amount;
    }
  }

  // Each acknowledged hold, read back: its state is the one answered.
  for (const auto& [request_id, l] : by_request) {
    const HttpResponse h = admin.get("/v1/holds/" + l->hold_id);
    ASSERT_EQ(h.status, 200u) << "acknowledged hold " << l->hold_id << " (" << request_id << ") is lost: " << h;
    EXPECT_EQ(jstr(h.object(), "request_id"), request_id);
    EXPECT_EQ(jstr(h.object(), "account_id"), account);
    EXPECT_EQ(jint(h.object(), "amount"), l->amount) << l->hold_id;
    EXPECT_EQ(jstr(h.object(), "status"), l->status) << l->hold_id;
    EXPECT_EQ(jint(h.object(), "committed_amount"), l->committed_amount) << l->hold_id;
  }

  // The account's holds are exactly those: one per request_id, none that no client asked for.
  std::set<std::string> listed_requests;
  for (const json::object& h : all_holds(admin, account)) {
    const std::string request_id = jstr(h, "request_id");
    EXPECT_TRUE(listed_requests.insert(request_id).second) << "request_id " << request_id << " made two holds";
    auto it = by_request.find(request_id);
    if (it == by_request.end()) {
      ADD_FAILURE() << "a hold no acknowledged lifecycle names: " << json::serialize(h);
    } else {
      EXPECT_EQ(jstr(h, "hold_id"), it->second->hold_id) << request_id;
    }
  }
  EXPECT_EQ(listed_requests.size(), by_request.size());

  // The event log: per hold one `reserved` and one ending event, as answered.
  std::map<std::string, std::vector<std::string>> events_of;  // hold_id → types
  int credited = 0;
  for (const json::object& e : all_events(admin, account)) {
    const std::string type = jstr(e, "type");
    if (type == "credited") {
      ++credited;
      continue;
    }
    auto* hold_id = e.if_contains("hold_id");
    ASSERT_TRUE(hold_id && hold_id->is_string()) << json::serialize(e);
    events_of[std::string(hold_id->as_string())].push_back(type);
  }
  EXPECT_EQ(credited, 1);
  EXPECT_EQ(events_of.size(), by_request.size()) << "events name holds that were not acknowledged, or miss some";
  for (const auto& [request_id, l] : by_request) {
    const std::vector<std::string> expected{"reserved", l->status};
    EXPECT_EQ(events_of[l->hold_id], expected) << l->hold_id << " (" << request_id << ")";
  }

  const HttpResponse a = admin.get("/v1/accounts/" + account);
  ASSERT_EQ(a.status, 200u) << a;
  EXPECT_EQ(jint(a.object(), "purchased"), credits);
  EXPECT_EQ(jint(a.object(), "used"), used) << "used is not the sum of the acknowledged commits";
  EXPECT_EQ(jint(a.object(), "reserved"), 0);
  EXPECT_EQ(jint(a.object(), "active_holds"), 0);
  EXPECT_EQ(jint(a.object(), "available"), credits - used);
}

std::string describe(const std::deque<LoadClient>& clients) {
  std::string out;
  for (const LoadClient& c : clients) {
    out += "  client " + std::to_string(c.thread) + " (" + c.account + ", instance " + std::to_string(c.first_instance) +
           (c.instance != c.first_instance ? "→" + std::to_string(c.instance) : "") +
           "): " + std::to_string(c.completed.load()) + " lifecycles, " + std::to_string(c.answered_503.load()) +
           " × 503, " + std::to_string(c.transport_errors.load()) + " lost answers, " + std::to_string(c.retried.load()) +
           " requests retried\n";
  }
  return out;
}

// --- the fixture -----------------------------------------------------------------------------------

class MultiInstance : public ::testing::Test {
 protected:
  void SetUp() override {
    auto uri = testing::postgres_server_uri();
    if (!uri) {
      if (testing::postgres_required()) {
        FAIL() << "TOLLGATE_REQUIRE_POSTGRES=1 but TOLLGATE_TEST_POSTGRES names no PostgreSQL server: the "
                  "multi-instance tests cannot run (scripts/test starts one)";
      }
      GTEST_SKIP() << "no PostgreSQL server (set TOLLGATE_TEST_POSTGRES to a libpq URI to run these tests)";
    }
    server_uri_ = *uri;
  }

  const std::string& server_uri() const { return server_uri_; }

 private:
  std::string server_uri_;
};

// 1. Three instances, one account with kCredits, every client fires at once over the three: the
// database's conditional write hands out exactly kCredits holds, whichever instance took them.
TEST_F(MultiInstance, ThreeInstancesOnOneDatabaseGrantExactlyAsManyHoldsAsThereAreCredits) {
  constexpr std::int64_t kCredits = 25;
  constexpr int kRequests = 48;
  constexpr int kRounds = 5;  // one account each

  testing::PgSchema schema(server_uri());
  std::unique_ptr<Instances> instances;
  try {
    instances = std::make_unique<Instances>(3, schema.uri(), EnvVars{}, /*together=*/true);
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const auto ports = instances->ports();
  for (const auto port : ports) ASSERT_EQ(wait_until_ready(port).status, 200u) << instances->logs();

  HttpClient admin(ports[0], kAdminKey);
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string account = "race-" + std::to_string(round);
    make_account(admin, account, kCredits);

    std::vector<HttpResponse> answers(kRequests);
    std::latch connected(kRequests);
    std::latch go(1);
    std::vector<std::thread> threads;
    for (int i = 0; i < kRequests; ++i) {
      threads.emplace_back([&, i] {
        HttpClient device(ports[static_cast<std::size_t>(i) % ports.size()], kAdminKey);
        std::string error;
        const bool ok = device.connect(&error);
        connected.count_down();
        go.wait();
        if (!ok) {
          answers[static_cast<std::size_t>(i)].error = error;
          return;
        }
        answers[static_cast<std::size_t>(i)] = device.post(
            "/v1/holds",
            json::object{{"account_id", account}, {"amount", 1}, {"request_id", account + "-dev-" + std::to_string(i)}});
      });
    }
    connected.wait();
    go.count_down();  // every device fires at once, a third of them on each instance
    for (auto& t : threads) t.join();

    int created = 0, refused = 0;
    std::set<std::string> holds;
    std::vector<int> created_by_instance(ports.size(), 0);
    for (int i = 0; i < kRequests; ++i) {
      const HttpResponse& r = answers[static_cast<std::size_t>(i)];
      if (r.status == 201) {
        ++created;
        ++created_by_instance[static_cast<std::size_t>(i) % ports.size()];
        holds.insert(jstr(r.object(), "hold_id"));
        EXPECT_EQ(jstr(r.object(), "status"), "active");
      } else if (is_problem(r, 409, "insufficient_credits")) {
        ++refused;
        EXPECT_EQ(jint(r.object(), "available"), 0) << r;
        EXPECT_EQ(jint(r.object(), "requested"), 1) << r;
      } else {
        ADD_FAILURE() << "device " << i << " (instance " << i % ports.size() << "): unexpected answer " << r;
      }
    }
    std::printf("[ multi ] round %d: holds created by instance: %d %d %d\n", round, created_by_instance[0],
                created_by_instance[1], created_by_instance[2]);
    EXPECT_EQ(created, kCredits);
    EXPECT_EQ(refused, kRequests - kCredits);
    EXPECT_EQ(holds.size(), static_cast<std::size_t>(kCredits)) << "two devices got the same hold";

    // Every instance reads the same account: nothing available, everything reserved.
    for (std::size_t i = 0; i < ports.size(); ++i) {
      HttpClient reader(ports[i], kAdminKey);
      const HttpResponse a = reader.get("/v1/accounts/" + account);
      ASSERT_EQ(a.status, 200u) << a;
      EXPECT_EQ(jint(a.object(), "available"), 0) << "instance " << i;
      EXPECT_EQ(jint(a.object(), "reserved"), kCredits) << "instance " << i;
      EXPECT_EQ(jint(a.object(), "active_holds"), kCredits) << "instance " << i;
      EXPECT_EQ(jint(a.object(), "used"), 0) << "instance " << i;
    }
    // The event log: one credit, then one `reserved` per hold.
    int reserved_events = 0;
    for (const json::object& e : all_events(admin, account)) {
      if (jstr(e, "type") == "reserved") {
        ++reserved_events;
        auto* hold_id = e.if_contains("hold_id");
        EXPECT_TRUE(hold_id && hold_id->is_string() && holds.count(std::string(hold_id->as_string())))
            << json::serialize(e);
      }
    }
    EXPECT_EQ(reserved_events, kCredits);
    for (std::size_t i = 0; i < ports.size(); ++i) {
      EXPECT_TRUE(audit_is_clean(ports[i], round + 1)) << "instance " << i;
    }
  }
  for (std::size_t i = 0; i < instances->size(); ++i) {
    EXPECT_EQ((*instances)[i].stop(SIGTERM), 0) << "instance " << i << ":\n" << tail((*instances)[i].log());
  }
}

// 1b. A payment provider delivers the same events many times at once, to every instance: Stripe's
// checkout.session.completed and its async_payment_succeeded 10 times each, then one
// charge.refunded 10 times — over three instances. One credit, one debit, nothing else.
TEST_F(MultiInstance, OnePaymentsEventsDeliveredTenTimesAtOnceToThreeInstancesCreditOnceAndRefundOnce) {
  constexpr const char* kSecret = "whsec_multi_instance_signing_secret";
  testing::PgSchema schema(server_uri());
  std::unique_ptr<Instances> instances;
  try {
    instances = std::make_unique<Instances>(3, schema.uri(), EnvVars{{"TOLLGATE_STRIPE_SIGNING_SECRETS", kSecret}});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const auto ports = instances->ports();
  for (const auto port : ports) ASSERT_EQ(wait_until_ready(port).status, 200u) << instances->logs();
  HttpClient admin(ports[0], kAdminKey);
  const std::string account = "buyer";
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", account}}).status, 201u);

  const auto event = [&](const std::string& id, const std::string& type, json::object object) {
    return json::serialize(json::object{{"id", id}, {"type", type}, {"data", json::object{{"object", std::move(object)}}}});
  };
  const json::object session{{"id", "cs_multi"},          {"client_reference_id", account},
                             {"payment_status", "paid"},   {"payment_intent", "pi_multi"},
                             {"metadata", json::object{{"tollgate_credits", "50"}}}};
  // Sends each body `copies` times at once, spread over the instances; every answer must be 200.
  const auto deliver = [&](const std::vector<std::string>& bodies, int copies) {
    const std::int64_t t =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::vector<std::pair<std::string, HttpResponse>> answers(bodies.size() * static_cast<std::size_t>(copies));
    std::latch go(1);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < answers.size(); ++i) {
      threads.emplace_back([&, i] {
        const std::string& body = bodies[i % bodies.size()];
        HttpClient provider(ports[i % ports.size()]);
        go.wait();
        answers[i] = {body, provider.post("/v1/payments/stripe", body,
                                          {{"Stripe-Signature", "t=" + std::to_string(t) + ",v1=" +
                                                                    payments::stripe_signature(kSecret, t, body)}})};
      });
    }
    go.count_down();
    for (auto& th : threads) th.join();
    std::map<std::string, int> outcomes;
    for (const auto& [body, r] : answers) {
      EXPECT_EQ(r.status, 200u) << r << instances->logs();
      if (r.status == 200) ++outcomes[jstr(r.object(), "outcome")];
    }
    return outcomes;
  };

  auto paid = deliver({event("evt_1", "checkout.session.completed", session),
                       event("evt_2", "checkout.session.async_payment_succeeded", session)},
                      10);
  EXPECT_EQ(paid["credited"], 1);
  EXPECT_EQ(paid["replayed"], 19);
  const json::object refunded{{"id", "ch_multi"}, {"payment_intent", "pi_multi"}, {"amount", 2000}, {"amount_refunded", 500}};
  auto refunds = deliver({event("evt_3", "charge.refunded", refunded)}, 10);
  EXPECT_EQ(refunds["taken_back"], 1);
  EXPECT_EQ(refunds["replayed"], 9);

  const std::vector<json::object> events = all_events(admin, account);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(jstr(events[0], "type"), "credited");
  EXPECT_EQ(jint(events[0], "amount"), 50);
  EXPECT_EQ(jstr(events[1], "type"), "debited");
  EXPECT_EQ(jint(events[1], "amount"), 13);  // ceil(50 × 500 / 2000) = 12.5 → 13
  for (std::size_t i = 0; i < ports.size(); ++i) {
    HttpClient reader(ports[i], kAdminKey);
    EXPECT_EQ(jint(reader.get("/v1/accounts/" + account).object(), "available"), 37) << "instance " << i;
    EXPECT_TRUE(audit_is_clean(ports[i], 1)) << "instance " << i;
  }
  for (std::size_t i = 0; i < instances->size(); ++i) {
    EXPECT_EQ((*instances)[i].stop(SIGTERM), 0) << "instance " << i << ":\n" << tail((*instances)[i].log());
  }
}

// 2. Short holds on several accounts, reapers running every 20 ms on all three instances: every hold
// gets exactly one `expired` event, the instances' expired counters add up to the number of holds
// (so no hold was expired twice, by two instances), and the work was shared.
TEST_F(MultiInstance, ReapersOnEveryInstanceExpireEachOverdueHoldExactlyOnce) {
  constexpr int kAccounts = 6;
  constexpr int kHolds = 300;  // 50 per account
  constexpr std::int64_t kCredits = 1000;

  testing::PgSchema schema(server_uri());
  std::unique_ptr<Instances> instances;
  try {
    instances = std::make_unique<Instances>(3, schema.uri(), EnvVars{{"TOLLGATE_REAPER_INTERVAL_MS", "20"}});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const auto ports = instances->ports();
  for (const auto port : ports) ASSERT_EQ(wait_until_ready(port).status, 200u) << instances->logs();

  HttpClient admin(ports[0], kAdminKey);
  std::vector<std::string> accounts;
  for (int a = 0; a < kAccounts; ++a) {
    accounts.push_back("reap-" + std::to_string(a));
    make_account(admin, accounts.back(), kCredits);
  }

  // Holds reserved through every instance, expiring spread over 0.3–1.9 s, so that expiries keep
  // coming while the three reapers run. A reservation expires its account's zombies first (the
  // reaper's work done early, not counted by the reapers' metric): the events are the record.
  std::vector<std::vector<std::string>> hold_ids(ports.size());
  std::vector<std::string> errors(ports.size());
  {
    std::vector<std::thread> threads;
    for (std::size_t k = 0; k < ports.size(); ++k) {
      threads.emplace_back([&, k] {
        HttpClient client(ports[k], kAdminKey);
        for (int i = static_cast<int>(k); i < kHolds; i += static_cast<int>(ports.size())) {
          const std::int64_t ttl_ms = 300 + (i * 7 % 41) * 40;
          const HttpResponse r = client.post(
              "/v1/holds", json::object{{"account_id", accounts[static_cast<std::size_t>(i % kAccounts)]},
                                        {"amount", 1 + i % 3},
                                        {"request_id", "reap-r" + std::to_string(i)},
                                        {"ttl_ms", ttl_ms}});
          if (r.status != 201) {
            errors[k] = "reserve " + std::to_string(i) + " on instance " + std::to_string(k) + ": " + r.describe();
            return;
          }
          hold_ids[k].push_back(jstr(r.object(), "hold_id"));
        }
      });
    }
    for (auto& t : threads) t.join();
  }
  for (const std::string& e : errors) ASSERT_TRUE(e.empty()) << e;

  const std::string series = "tollgate_holds_ended_total{outcome=\"expired\"}";
  auto expired_by = [&] {
    std::vector<double> out;
    for (const auto port : ports) out.push_back(metric(port, series));
    return out;
  };
  auto sum = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s;
  };
  auto expired_events = [&] {
    std::size_t n = 0;
    for (const std::string& account : accounts) {
      for (const json::object& e : all_events(admin, account)) n += jstr(e, "type") == "expired" ? 1 : 0;
    }
    return n;
  };
  const bool all_reaped = eventually([&] { return expired_events() >= static_cast<std::size_t>(kHolds); }, kPatience, 100ms);
  const std::vector<double> counts = expired_by();
  std::printf("[ multi ] holds expired by instance's reapers: %.0f %.0f %.0f\n", counts[0], counts[1], counts[2]);
  ASSERT_TRUE(all_reaped) << expired_events() << " of " << kHolds << " holds expired\n" << instances->logs();

  // The ledger: every hold expired by exactly one `expired` event, the credits are back.
  for (const std::string& account : accounts) {
    SCOPED_TRACE(account);
    std::map<std::string, std::vector<std::string>> events_of;
    for (const json::object& e : all_events(admin, account)) {
      if (jstr(e, "type") == "credited") continue;
      events_of[jstr(e, "hold_id")].push_back(jstr(e, "type"));
    }
    const std::vector<json::object> holds = all_holds(admin, account);
    EXPECT_EQ(holds.size(), static_cast<std::size_t>(kHolds / kAccounts));
    for (const json::object& h : holds) {
      EXPECT_EQ(jstr(h, "status"), "expired") << json::serialize(h);
      EXPECT_EQ(events_of[jstr(h, "hold_id")], (std::vector<std::string>{"reserved", "expired"})) << jstr(h, "hold_id");
    }
    EXPECT_EQ(events_of.size(), holds.size()) << "events of holds that are not listed";
    const HttpResponse a = admin.get("/v1/accounts/" + account);
    ASSERT_EQ(a.status, 200u) << a;
    EXPECT_EQ(jint(a.object(), "available"), kCredits);
    EXPECT_EQ(jint(a.object(), "reserved"), 0);
    EXPECT_EQ(jint(a.object(), "used"), 0);
    EXPECT_EQ(jint(a.object(), "active_holds"), 0);
  }

  // Read again after the checks (the reapers kept running): still exactly one expiry per hold.
  const std::vector<double> final_counts = expired_by();
  EXPECT_LE(sum(final_counts), kHolds) << "some hold was expired more than once, across instances";
  EXPECT_EQ(expired_events(), static_cast<std::size_t>(kHolds)) << "one expired event per hold, no more";
  const auto reaping = std::count_if(final_counts.begin(), final_counts.end(), [](double c) { return c > 0; });
  EXPECT_GE(reaping, 2) << "one instance's reaper did all the work: the reapers did not run side by side";
  for (std::size_t i = 0; i < ports.size(); ++i) {
    EXPECT_TRUE(audit_is_clean(ports[i], kAccounts)) << "instance " << i;
    EXPECT_EQ((*instances)[i].stop(SIGTERM), 0) << "instance " << i << ":\n" << tail((*instances)[i].log());
  }
}

// 3. The database restarts (scripts/pg restart: fast shutdown, start) while three instances serve
// lifecycles. Every answer is 2xx or 503 `unavailable` with Retry-After (or no answer); the clients
// retry the same request and carry on after the restart with no instance restarted; every
// acknowledged answer is still true and each retried request_id made one hold.
TEST_F(MultiInstance, ADatabaseRestartUnderLoadAnswersOnly2xxOr503AndServiceResumesWithNothingLost) {
  constexpr int kClients = 6;  // two per account, on different instances
  constexpr std::int64_t kCredits = 1'000'000;
  constexpr int kRestarts = 2;

  std::unique_ptr<ThrowAwayPostgres> pg;
  try {
    pg = std::make_unique<ThrowAwayPostgres>();
  } catch (const std::exception& e) {
    FAIL() << "could not start a PostgreSQL server of this test: " << e.what();
  }
  std::unique_ptr<Instances> instances;
  try {
    instances = std::make_unique<Instances>(3, pg->uri(), EnvVars{{"TOLLGATE_REAPER_INTERVAL_MS", "100"}});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  LoadOptions options;
  options.ports = instances->ports();
  for (const auto port : options.ports) ASSERT_EQ(wait_until_ready(port).status, 200u) << instances->logs();

  std::deque<LoadClient> clients(kClients);
  std::set<std::string> accounts;
  ASSERT_NO_FATAL_FAILURE(open_load_accounts(clients, options, "restart-", kCredits, accounts));
  const std::uint64_t seed = print_seed();
  std::mt19937_64 rng(seed);
  LoadRun load(options, clients, rng);
  // Two restarts: the second one hits connections the instances opened again after the first.
  for (int round = 1; round <= kRestarts; ++round) {
    SCOPED_TRACE("restart " + std::to_string(round));
    const int target = total_completed(clients) + 30;
    if (!eventually([&] { return total_completed(clients) >= target; })) {
      ADD_FAILURE() << "the load is not running:\n" << describe(clients) << instances->logs();
      break;  // the clients' own findings are reported below
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 200));  // a random moment in the load

    const int errors_before = load.errors_seen();
    const auto restart_started = Steady::now();
    const ProcessResult restarted = pg->restart();
    const auto restart_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - restart_started).count();
    ASSERT_EQ(restarted.exit_code, 0) << "scripts/pg restart failed:\n" << restarted.err << restarted.out;
    const int errors_during = load.errors_seen() - errors_before;

    // The service resumes by itself: every client completes more lifecycles after the restart.
    std::vector<int> after_restart;
    for (const auto& c : clients) after_restart.push_back(c.completed.load());
    const bool resumed = eventually([&] {
      for (std::size_t i = 0; i < clients.size(); ++i) {
        if (clients[i].completed.load() < after_restart[i] + 10) return false;
      }
      return true;
    });
    std::printf("[ multi ] database restart %d took %lld ms; %d answers 503 or lost during it\n", round,
                static_cast<long long>(restart_ms), errors_during);
    std::fflush(stdout);
    EXPECT_GT(errors_during, 0) << "no request noticed the database restart: the test did not test it";
    if (!resumed) {
      ADD_FAILURE() << "the clients did not carry on after the database restart:\n"
                    << describe(clients) << instances->logs() << "\n--- postgres:\n"
                    << tail(pg->log());
      break;
    }
  }
  load.stop();
  std::printf("[ multi ] clients:\n%s", describe(clients).c_str());
  std::fflush(stdout);
  for (const auto& c : clients) {
    for (const std::string& u : c.unexpected) ADD_FAILURE() << "client " << c.thread << ": " << u;
  }

  // No instance was restarted: the same processes are ready again, and stop cleanly (exit 0) below.
  for (std::size_t i = 0; i < instances->size(); ++i) {
    EXPECT_EQ(wait_until_ready(options.ports[i]).status, 200u) << "instance " << i << "\n" << instances->logs();
  }
  HttpClient admin(options.ports[1], kAdminKey);
  for (const std::string& account : accounts) expect_books_match(admin, account, kCredits, clients);
  for (std::size_t i = 0; i < instances->size(); ++i) {
    EXPECT_TRUE(audit_is_clean(options.ports[i], static_cast<std::int64_t>(accounts.size()))) << "instance " << i;
    EXPECT_EQ((*instances)[i].stop(SIGTERM), 0) << "instance " << i << " did not survive the restart cleanly:\n"
                                                << tail((*instances)[i].log());
  }
}

// 4. kill -9 of one of three instances under load: its clients retry their request in flight, with
// the same request_id or hold, on another instance; the clients of the other two never see an error;
// every acknowledged answer is still true; the killed instance starts again on the same database.
TEST_F(MultiInstance, KillNineOfOneInstanceUnderLoadLosesNothingAndTheOthersCarryOn) {
  constexpr int kClients = 6;  // two per account, on different instances
  constexpr std::int64_t kCredits = 1'000'000;
  constexpr std::size_t kVictim = 1;

  testing::PgSchema schema(server_uri());
  std::unique_ptr<Instances> instances;
  try {
    instances = std::make_unique<Instances>(3, schema.uri(), EnvVars{});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  LoadOptions options;
  options.ports = instances->ports();
  options.switch_instance_on_transport_error = true;
  for (const auto port : options.ports) ASSERT_EQ(wait_until_ready(port).status, 200u) << instances->logs();

  std::deque<LoadClient> clients(kClients);
  std::set<std::string> accounts;
  ASSERT_NO_FATAL_FAILURE(open_load_accounts(clients, options, "kill-", kCredits, accounts));
  const std::uint64_t seed = print_seed();
  std::mt19937_64 rng(seed);
  LoadRun load(options, clients, rng);
  const bool loaded = eventually([&] { return total_completed(clients) >= 60; });
  int killed_code = 0;
  bool carried_on = false;
  if (loaded) {
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 200));  // a random moment in the load
    killed_code = (*instances)[kVictim].stop(SIGKILL);
    std::vector<int> at_kill;
    for (const auto& c : clients) at_kill.push_back(c.completed.load());
    // Every client, the victim's included (now on another instance), completes more lifecycles.
    carried_on = eventually([&] {
      for (std::size_t i = 0; i < clients.size(); ++i) {
        if (clients[i].completed.load() < at_kill[i] + 10) return false;
      }
      return true;
    });
  }
  load.stop();
  std::printf("[ multi ] killed instance %zu; clients:\n%s", kVictim, describe(clients).c_str());
  std::fflush(stdout);
  for (const auto& c : clients) {
    for (const std::string& u : c.unexpected) ADD_FAILURE() << "client " << c.thread << ": " << u;
  }
  ASSERT_TRUE(loaded) << "the load never got going:\n" << describe(clients) << instances->logs();
  ASSERT_EQ(killed_code, 128 + SIGKILL) << "the instance ended otherwise than by our SIGKILL";
  EXPECT_TRUE(carried_on) << "the clients did not carry on after the kill:\n" << describe(clients) << instances->logs();
  for (const auto& c : clients) {
    if (c.first_instance == kVictim) {
      EXPECT_GE(c.switches.load(), 1) << "client " << c.thread << " never noticed that its instance died";
      EXPECT_NE(c.instance, kVictim) << "client " << c.thread;
    } else {
      EXPECT_EQ(c.transport_errors.load(), 0) << "client " << c.thread << " of a surviving instance lost answers";
      EXPECT_EQ(c.answered_503.load(), 0) << "client " << c.thread << " of a surviving instance got 503s";
      EXPECT_EQ(c.switches.load(), 0) << "client " << c.thread;
    }
  }

  HttpClient admin(options.ports[0], kAdminKey);
  for (const std::string& account : accounts) expect_books_match(admin, account, kCredits, clients);
  for (std::size_t i = 0; i < instances->size(); ++i) {
    if (i != kVictim) {
      EXPECT_TRUE(audit_is_clean(options.ports[i], static_cast<std::int64_t>(accounts.size()))) << "instance " << i;
    }
  }

  // The killed instance starts again on the same database and sees the same ledger.
  ServerProcess& victim = (*instances)[kVictim];
  ASSERT_NO_THROW(victim.restart(/*same_port=*/false)) << tail(victim.log());
  ASSERT_EQ(wait_until_ready(victim.port()).status, 200u) << tail(victim.log());
  EXPECT_TRUE(audit_is_clean(victim.port(), static_cast<std::int64_t>(accounts.size())));
  HttpClient again(victim.port(), kAdminKey);
  for (const std::string& account : accounts) {
    json::object there = again.get("/v1/accounts/" + account).object();
    json::object here = admin.get("/v1/accounts/" + account).object();
    there.erase("oldest_active_hold_age_ms");
    here.erase("oldest_active_hold_age_ms");
    EXPECT_EQ(there, here) << account;
  }
  for (std::size_t i = 0; i < instances->size(); ++i) {
    EXPECT_EQ((*instances)[i].stop(SIGTERM), 0) << "instance " << i << ":\n" << tail((*instances)[i].log());
  }
}

// 5. Fail-over: a primary with a synchronous streaming standby (scripts/pg start, scripts/pg standby),
// two instances given both hosts with target_session_attrs=read-write. Under load the primary
// crashes (immediate shutdown) and the standby is promoted. Every answer is 2xx or 503 `unavailable`
// with Retry-After (or no answer); the clients retry the same request and carry on against the
// promoted standby with no instance restarted; every acknowledged answer is still true there (the
// standby was synchronous: an acknowledged commit was flushed on it before it was answered).
TEST_F(MultiInstance, APrimaryCrashAndPromotedStandbyIsFollowedWithNothingAcknowledgedLost) {
  constexpr int kClients = 4;  // two per account, on different instances
  constexpr std::int64_t kCredits = 1'000'000;

  std::unique_ptr<ThrowAwayPostgres> primary, standby;
  try {
    primary = std::make_unique<ThrowAwayPostgres>();
    standby = std::make_unique<ThrowAwayPostgres>(primary.get());
  } catch (const std::exception& e) {
    FAIL() << "could not start a primary and a standby of this test: " << e.what();
  }
  const std::string database = "postgresql://tollgate@" + primary->host_port() + "," + standby->host_port() +
                               "/tollgate?target_session_attrs=read-write";
  std::unique_ptr<Instances> instances;
  try {
    instances = std::make_unique<Instances>(
        2, database, EnvVars{{"TOLLGATE_REAPER_INTERVAL_MS", "100"}, {"TOLLGATE_DATABASE_TIMEOUT_MS", "2000"}});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  LoadOptions options;
  options.ports = instances->ports();
  for (const auto port : options.ports) ASSERT_EQ(wait_until_ready(port).status, 200u) << instances->logs();

  std::deque<LoadClient> clients(kClients);
  std::set<std::string> accounts;
  ASSERT_NO_FATAL_FAILURE(open_load_accounts(clients, options, "failover-", kCredits, accounts));
  const std::uint64_t seed = print_seed();
  std::mt19937_64 rng(seed);
  LoadRun load(options, clients, rng);
  const bool loaded = eventually([&] { return total_completed(clients) >= 40; });
  bool followed = false;
  int errors_during = 0;
  ProcessResult crashed, promoted;
  if (loaded) {
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 200));  // a random moment in the load
    const int errors_before = load.errors_seen();
    const auto failover_started = Steady::now();
    crashed = primary->crash();
    promoted = standby->promote();
    const auto failover_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - failover_started).count();
    // The service follows by itself: every client completes more lifecycles after the promotion.
    std::vector<int> at_promotion;
    for (const auto& c : clients) at_promotion.push_back(c.completed.load());
    followed = eventually([&] {
      for (std::size_t i = 0; i < clients.size(); ++i) {
        if (clients[i].completed.load() < at_promotion[i] + 20) return false;
      }
      return true;
    });
    errors_during = load.errors_seen() - errors_before;
    std::printf("[ multi ] crash + promote took %lld ms; %d answers 503 or lost since the crash\n",
                static_cast<long long>(failover_ms), errors_during);
    std::fflush(stdout);
  }
  load.stop();
  std::printf("[ multi ] clients:\n%s", describe(clients).c_str());
  std::fflush(stdout);
  for (const auto& c : clients) {
    for (const std::string& u : c.unexpected) ADD_FAILURE() << "client " << c.thread << ": " << u;
  }
  ASSERT_TRUE(loaded) << "the load never got going:\n" << describe(clients) << instances->logs();
  ASSERT_EQ(crashed.exit_code, 0) << "scripts/pg crash failed:\n" << crashed.err << crashed.out;
  ASSERT_EQ(promoted.exit_code, 0) << "scripts/pg promote failed:\n" << promoted.err << promoted.out;
  ASSERT_TRUE(followed) << "the clients did not carry on after the promotion:\n"
                        << describe(clients) << instances->logs() << "\n--- promoted standby:\n"
                        << tail(standby->log());
  EXPECT_GT(errors_during, 0) << "no request noticed the fail-over: the test did not test it";

  // No instance was restarted: the same processes are ready, on the promoted standby (the old
  // primary is down, so every answer below comes from it), and stop cleanly (exit 0) below.
  for (std::size_t i = 0; i < instances->size(); ++i) {
    EXPECT_EQ(wait_until_ready(options.ports[i]).status, 200u) << "instance " << i << "\n" << instances->logs();
  }
  HttpClient admin(options.ports[1], kAdminKey);
  for (const std::string& account : accounts) expect_books_match(admin, account, kCredits, clients);
  for (std::size_t i = 0; i < instances->size(); ++i) {
    EXPECT_TRUE(audit_is_clean(options.ports[i], static_cast<std::int64_t>(accounts.size()))) << "instance " << i;
    EXPECT_EQ((*instances)[i].stop(SIGTERM), 0) << "instance " << i << " did not survive the fail-over cleanly:\n"
                                                << tail((*instances)[i].log());
  }
}

// 6. The change feed while three instances write (reservations, commits, releases and credits on
// many accounts): three readers follow GET /v1/events with their stored cursor (next_after), each
// request to the next instance in turn, some waiting (wait_ms). At the end each reader has exactly
// the events in the database — no gap, no duplicate —, in event_id order, which keeps each
// account's order (its own events page says the same).
TEST_F(MultiInstance, ThreeFeedReadersSeeEveryEventExactlyOnceWhileThreeInstancesWrite) {
  const std::uint64_t seed = print_seed();
  std::mt19937_64 rng(seed);
  testing::PgSchema schema(server_uri());
  std::unique_ptr<Instances> instances;
  try {
    instances = std::make_unique<Instances>(3, schema.uri(), EnvVars{});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  LoadOptions options;
  options.ports = instances->ports();
  options.lifecycles_max = 60;
  for (const auto port : options.ports) ASSERT_EQ(wait_until_ready(port).status, 200u) << instances->logs();

  std::deque<LoadClient> clients(12);  // two per account, six accounts
  std::set<std::string> accounts;
  ASSERT_NO_FATAL_FAILURE(open_load_accounts(clients, options, "feed-", 1'000'000, accounts));

  struct Reader {
    std::vector<json::object> events;
    std::vector<std::string> problems;
    int waits = 0;
  };
  std::vector<Reader> readers(3);
  std::atomic<bool> writing{true};
  std::vector<std::thread> reader_threads;
  for (std::size_t r = 0; r < readers.size(); ++r) {
    reader_threads.emplace_back([&, r] {
      Reader& reader = readers[r];
      std::vector<std::unique_ptr<HttpClient>> to;
      for (const auto port : options.ports) to.push_back(std::make_unique<HttpClient>(port, kAdminKey, std::chrono::seconds(20)));
      std::int64_t after = 0;  // the stored cursor
      for (std::size_t i = r;; ++i) {
        const bool last_round = !writing.load();
        const int limit = 1 + static_cast<int>((i * 37 + r * 11) % 200);
        const bool wait = i % 3 == 0;
        reader.waits += wait;
        const HttpResponse page = to[i % to.size()]->get("/v1/events?after=" + std::to_string(after) + "&limit=" +
                                                         std::to_string(limit) + (wait ? "&wait_ms=200" : ""));
        if (page.status != 200) {
          reader.problems.push_back(page.describe());
          return;
        }
        const json::array& events = page.object().at("events").as_array();
        for (const auto& e : events) reader.events.push_back(e.as_object());
        const std::int64_t next = jint(page.object(), "next_after");
        if (events.empty() ? next != after : next != jint(events.back().as_object(), "event_id")) {
          reader.problems.push_back("next_after " + std::to_string(next) + " after " + std::to_string(after) + ": " +
                                    page.body);
          return;
        }
        after = next;
        if (last_round && events.empty()) return;
      }
    });
  }
  std::vector<std::thread> crediters;
  std::atomic<int> credits_failed{0};
  for (std::size_t w = 0; w < options.ports.size(); ++w) {
    crediters.emplace_back([&, w] {
      HttpClient admin(options.ports[w], kAdminKey);
      std::size_t n = 0;
      for (const std::string& account : accounts) {
        for (int i = 0; i < 10; ++i) {
          const HttpResponse r = admin.post(
              "/v1/accounts/" + account + "/credits",
              json::object{{"amount", 1 + (n++ % 5)}, {"reference", account + "-w" + std::to_string(w) + "-" + std::to_string(i)}});
          if (r.status != 201) credits_failed.fetch_add(1);
        }
      }
    });
  }
  {
    LoadRun load(options, clients, rng);
    for (auto& t : crediters) t.join();
    EXPECT_TRUE(eventually([&] { return total_completed(clients) >= 12 * options.lifecycles_max; },
                           std::chrono::milliseconds(120'000)))
        << describe(clients);
    load.stop();
  }
  writing = false;
  for (auto& t : reader_threads) t.join();
  EXPECT_EQ(credits_failed.load(), 0);
  for (const auto& c : clients) {
    for (const std::string& u : c.unexpected) ADD_FAILURE() << "client " << c.thread << ": " << u;
  }

  // What the database holds, read straight from it.
  auto db = pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  const pg::Rows rows = db->exec("SELECT event_id, account_id FROM events ORDER BY event_id");
  std::vector<std::int64_t> in_database;
  for (int i = 0; i < rows.size(); ++i) in_database.push_back(rows.int64(i, 0));
  ASSERT_GT(in_database.size(), 12u * 60u * 2u);
  std::map<std::string, std::vector<std::int64_t>> per_account;  // each account's own events page
  for (const std::string& account : accounts) {
    HttpClient admin(options.ports[0], kAdminKey);
    for (const json::object& e : all_events(admin, account)) per_account[account].push_back(jint(e, "event_id"));
  }
  for (std::size_t r = 0; r < readers.size(); ++r) {
    SCOPED_TRACE("reader " + std::to_string(r));
    for (const std::string& p : readers[r].problems) ADD_FAILURE() << p;
    std::vector<std::int64_t> followed;
    std::map<std::string, std::vector<std::int64_t>> followed_per_account;
    for (const json::object& e : readers[r].events) {
      followed.push_back(jint(e, "event_id"));
      followed_per_account[jstr(e, "account_id")].push_back(jint(e, "event_id"));
    }
    EXPECT_EQ(std::set<std::int64_t>(followed.begin(), followed.end()).size(), followed.size()) << "duplicates";
    EXPECT_EQ(followed, in_database) << "the reader missed events, repeated some, or saw them out of order";
    EXPECT_EQ(followed_per_account, per_account) << "an account's events in another order than its own page";
    EXPECT_GT(readers[r].waits, 0);
  }
  for (std::size_t i = 0; i < instances->size(); ++i) {
    EXPECT_TRUE(audit_is_clean(options.ports[i], static_cast<std::int64_t>(accounts.size()))) << "instance " << i;
    EXPECT_EQ((*instances)[i].stop(SIGTERM), 0) << "instance " << i << ":\n" << tail((*instances)[i].log());
  }
}


// A 5xx answer says what the caller can do, never the internals: with the database stopped under a
// running instance, requests answer 503 unavailable whose document carries the request's id (the
// X-Request-Id header's) and neither the database's address nor the driver's or SQL's words; the
// instance's log has those, on the line of that request id.
// api.md "Keys with scopes": an expired key is refused (401) by every instance at the same moment,
// also by those that have it in their authentication cache. Each instance keeps using the key (so it
// stays cached) across its expiry; each accepts only requests sent before the expiry and refuses
// only requests answered after it — so the three switch at one moment, whatever their caches hold.
TEST_F(MultiInstance, AnExpiredKeyIsRefusedByEveryInstanceAtTheSameMomentCachedOrNot) {
  testing::PgSchema schema(server_uri());
  std::unique_ptr<Instances> instances;
  try {
    instances = std::make_unique<Instances>(3, schema.uri(), EnvVars{});
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const auto ports = instances->ports();
  for (const auto port : ports) ASSERT_EQ(wait_until_ready(port).status, 200u) << instances->logs();
  HttpClient admin(ports[0], kAdminKey);
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "kiosk"}}).status, 201u);
  const auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const std::int64_t expires_at_ms = wall_ms() + 2'500;
  const HttpResponse created =
      admin.post("/v1/accounts/kiosk/keys", json::object{{"expires_at", format_rfc3339_ms(expires_at_ms)}});
  ASSERT_EQ(created.status, 201u) << created;
  const std::string secret = jstr(created.object(), "secret");

  std::vector<std::unique_ptr<HttpClient>> kiosks;
  for (const auto port : ports) kiosks.push_back(std::make_unique<HttpClient>(port, secret));
  // An instance decides between a request's sending and its answer: an accepted request must have
  // been sent before the expiry, a refused one answered after it — however slow the machine.
  std::vector<std::int64_t> last_accepted_sent_ms(ports.size(), 0), first_refused_answered_ms(ports.size(), 0);
  while (wall_ms() < expires_at_ms + 3'000) {
    bool all_refused = true;
    for (std::size_t i = 0; i < kiosks.size(); ++i) {
      if (first_refused_answered_ms[i] != 0) continue;
      all_refused = false;
      const std::int64_t sent_ms = wall_ms();
      const HttpResponse r = kiosks[i]->get("/v1/accounts/kiosk");
      if (r.status == 200) {
        last_accepted_sent_ms[i] = sent_ms;
      } else {
        ASSERT_TRUE(is_problem(r, 401, "unauthorized")) << "instance " << i << ": " << r;
        first_refused_answered_ms[i] = wall_ms();
      }
    }
    if (all_refused) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::size_t i = 0; i < ports.size(); ++i) {
    SCOPED_TRACE("instance " + std::to_string(i));
    ASSERT_NE(first_refused_answered_ms[i], 0) << "still accepted 3 s after its expiry";
    ASSERT_NE(last_accepted_sent_ms[i], 0) << "never accepted before its expiry (it was cached from the first call)";
    // Accepted only what was sent before the expiry, refused only what was answered after it (one
    // machine's clock; 50 ms for the clock's and the cache's rounding).
    EXPECT_LE(last_accepted_sent_ms[i], expires_at_ms + 50);
    EXPECT_GE(first_refused_answered_ms[i], expires_at_ms - 50);
  }
}

TEST_F(MultiInstance, ADatabaseOutageAnswers503WithARequestIdAndNoInternals) {
  ThrowAwayPostgres pg;
  ServerOptions options = server_options();
  options.database = pg.uri();
  ServerProcess server(options);
  HttpClient admin(server.port(), server.admin_key());
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "kiosk"}}).status, 201u);
  const HttpResponse used = admin.post("/v1/accounts/kiosk/keys", json::object{});
  const HttpResponse unused = admin.post("/v1/accounts/kiosk/keys", json::object{});
  ASSERT_EQ(used.status, 201u) << used;
  ASSERT_EQ(unused.status, 201u) << unused;
  HttpClient kiosk(server.port(), jstr(used.object(), "secret"));  // a key the instance has cached
  ASSERT_EQ(kiosk.get("/v1/accounts/kiosk").status, 200u);
  HttpClient fresh(server.port(), jstr(unused.object(), "secret"));  // one only the database knows

  ASSERT_EQ(pg.stop().exit_code, 0);
  const std::string port = pg.host_port().substr(pg.host_port().find(':') + 1);
  for (HttpClient* client : {&kiosk, &fresh, &admin}) {
    HttpResponse r;
    ASSERT_TRUE(eventually([&] {
      r = client->get("/v1/accounts/kiosk");
      return r.status == 503;
    })) << r;
    ASSERT_TRUE(is_problem(r, 503, "unavailable")) << r;
    for (const char* internal : {"127.0.0.1", "connect", "server at", "SELECT", "FROM", "database: "}) {
      EXPECT_EQ(r.body.find(internal), std::string::npos) << internal << " in " << r;
    }
    EXPECT_EQ(r.body.find(port), std::string::npos) << r;
    EXPECT_NE(jstr(r.object(), "detail").find("retry"), std::string::npos) << r;
    EXPECT_FALSE(r.header("Retry-After").empty()) << r;
    const std::string id = jstr(r.object(), "request_id");
    ASSERT_FALSE(id.empty()) << r;
    EXPECT_EQ(r.header("X-Request-Id"), id);
    // The log line of that request holds what the answer left out.
    ASSERT_TRUE(eventually([&] { return server.log().find("\"request_id\":\"" + id + "\"") != std::string::npos; }))
        << tail(server.log());
    const std::string log = server.log();
    const std::size_t line_start = log.find("\"request_id\":\"" + id + "\"");
    const std::string line = log.substr(line_start, log.find('\n', line_start) - line_start);
    EXPECT_NE(line.find("\"code\":\"unavailable\""), std::string::npos) << line;
    EXPECT_NE(line.find("\"detail\":\""), std::string::npos) << line;
  }
  // /readyz is open to anyone: it says the database is unavailable, not where it is.
  const HttpResponse ready = admin.get("/readyz");
  EXPECT_EQ(ready.status, 503u) << ready;
  EXPECT_EQ(ready.body.find(port), std::string::npos) << ready;
  EXPECT_EQ(ready.body.find("127.0.0.1"), std::string::npos) << ready;
}


// scripts/pg start on a stopped cluster (one made by an earlier start) refuses to delete it unless
// --replace is given; restart brings it back with its data.
TEST_F(MultiInstance, ScriptsPgStartKeepsAStoppedClusterUnlessToldToReplaceIt) {
  ThrowAwayPostgres pg;
  pg::Conn::connect(pg.uri(), pg::ConnectOptions{})->exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)");
  ASSERT_EQ(pg.stop().exit_code, 0);
  const ProcessResult refused = testing::run_process({pg.script(), "start", pg.dir()}, {}, std::chrono::seconds(120));
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_NE(refused.err.find("--replace"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("restart"), std::string::npos) << refused.err;
  EXPECT_TRUE(std::filesystem::exists(pg.dir() + "/data/PG_VERSION")) << "the stopped cluster was deleted";
  ASSERT_EQ(pg.restart().exit_code, 0);
  // The data survived (a replaced cluster would have no table `kept`: PgError).
  EXPECT_EQ(pg::Conn::connect(pg.uri(), pg::ConnectOptions{})->exec("SELECT v FROM kept").int64(0, 0), 7);
  ASSERT_EQ(pg.stop().exit_code, 0);
  const ProcessResult replaced =
      testing::run_process({pg.script(), "start", pg.dir(), "--replace"}, {}, std::chrono::seconds(120));
  ASSERT_EQ(replaced.exit_code, 0) << replaced.err;
  EXPECT_NE(replaced.err.find("replacing"), std::string::npos) << replaced.err;
}

}  // namespace
}  // namespace tollgate::httptest
