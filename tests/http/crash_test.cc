// kill -9 of the real server under HTTP load, then a restart on the same database: every answer
// the clients got (2xx) is still true, a request whose answer was lost can be retried with its id
// and makes no second hold, and the audit is clean. Twice: the second round runs on a database that
// already recovered from the first crash.
//
// Each client thread has its own account and loops: reserve (request_id), then commit all, commit
// part, release, or leave the hold active. It journals every 2xx and the one request it had in
// flight when the connection died. The kill lands at a random time after the load is running; the
// seed (printed) picks it and the clients' choices: rerun with TOLLGATE_HTTP_CRASH_SEED=<seed>.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <thread>

#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

constexpr int kThreads = 8;
constexpr int kRounds = 2;
// Per thread and round; with kRounds, stays below the 1000 holds one list call returns.
constexpr int kReservesPerRound = 400;
constexpr std::int64_t kCredits = 1'000'000'000;

std::uint64_t base_seed() {
  if (const char* text = std::getenv("TOLLGATE_HTTP_CRASH_SEED"); text && *text) return std::strtoull(text, nullptr, 10);
  return 4242;
}

enum class End { commit_all, commit_part, release, none };

struct Reserved {
  std::string request_id;
  std::int64_t amount = 0;
  std::string hold_id;
};

struct Settle {
  std::string hold_id;
  End end = End::none;
  std::int64_t amount = 0;  // commit_part: the amount asked for
};

// What one client thread learned from the server's answers.
struct Journal {
  std::string account;
  std::vector<Reserved> reserved;                 // every reservation answered 2xx
  std::map<std::string, std::int64_t> committed;  // hold_id → committed_amount, answered 200
  std::set<std::string> released;                 // answered 200
  std::optional<Reserved> reserve_in_flight;      // sent, no answer (hold_id empty)
  std::optional<Settle> settle_in_flight;         // sent, no answer
  std::vector<std::string> unexpected;            // answers that should not have happened
};

void run_client(std::uint16_t port, Journal& j, int round, std::uint64_t seed, const std::atomic<bool>& stop,
                std::atomic<int>& answered) {
  std::mt19937_64 rng(seed);
  HttpClient client(port, kAdminKey, 15s);
  for (int i = 0; i < kReservesPerRound && !stop.load(); ++i) {
    Reserved r{j.account + "-r" + std::to_string(round) + "-" + std::to_string(i), 1 + static_cast<std::int64_t>(rng() % 3), ""};
    j.reserve_in_flight = r;
    const HttpResponse res = client.post(
        "/v1/holds", json::object{{"account_id", j.account}, {"amount", r.amount}, {"request_id", r.request_id}});
    if (!res.answered()) return;  // the server died: this request's fate is unknown
    j.reserve_in_flight.reset();
    if (res.status != 201) {
      j.unexpected.push_back("reserve " + r.request_id + ": " + res.describe());
      return;
    }
    r.hold_id = res.object().at("hold_id").as_string().c_str();
    j.reserved.push_back(r);
    answered.fetch_add(1);

    Settle s{r.hold_id, static_cast<End>(rng() % 4), 0};
    if (s.end == End::none) continue;
    std::string target = "/v1/holds/" + s.hold_id + (s.end == End::release ? "/release" : "/commit");
    json::object body;
    if (s.end == End::commit_part) {
      s.amount = std::max<std::int64_t>(1, r.amount - 1);
      body["amount"] = s.amount;
    }
    j.settle_in_flight = s;
    const HttpResponse done = client.post(target, body);
    if (!done.answered()) return;
    j.settle_in_flight.reset();
    if (done.status != 200) {
      j.unexpected.push_back("settle " + s.hold_id + ": " + done.describe());
      return;
    }
    if (s.end == End::release) {
      j.released.insert(s.hold_id);
    } else {
      j.committed[s.hold_id] = jint(done.object(), "committed_amount");
    }
    answered.fetch_add(1);
  }
}

// After the restart: every journaled answer is still true; what was in flight is retried.
void check_and_resolve(HttpClient& admin, Journal& j) {
  SCOPED_TRACE("account " + j.account);
  for (const Reserved& r : j.reserved) {
    const HttpResponse h = admin.get("/v1/holds/" + r.hold_id);
    ASSERT_EQ(h.status, 200u) << "acknowledged reservation " << r.request_id << " → " << r.hold_id << " is lost: " << h;
    EXPECT_EQ(jstr(h.object(), "request_id"), r.request_id);
    EXPECT_EQ(jstr(h.object(), "account_id"), j.account);
    EXPECT_EQ(jint(h.object(), "amount"), r.amount);
    const std::string status = jstr(h.object(), "status");
    if (j.committed.count(r.hold_id)) {
      EXPECT_EQ(status, "committed") << r.hold_id << " was acknowledged committed";
      EXPECT_EQ(jint(h.object(), "committed_amount"), j.committed.at(r.hold_id)) << r.hold_id;
    } else if (j.released.count(r.hold_id)) {
      EXPECT_EQ(status, "released") << r.hold_id << " was acknowledged released";
    } else if (!(j.settle_in_flight && j.settle_in_flight->hold_id == r.hold_id)) {
      EXPECT_EQ(status, "active") << r.hold_id << " was never settled";
    }
  }

  if (j.reserve_in_flight) {
    // The answer was lost: the hold may or may not exist. Retrying with the same id is safe, and a
    // second retry answers the same hold.
    const Reserved& r = *j.reserve_in_flight;
    const json::object body{{"account_id", j.account}, {"amount", r.amount}, {"request_id", r.request_id}};
    const HttpResponse first = admin.post("/v1/holds", body);
    ASSERT_TRUE(first.status == 200 || first.status == 201) << "retry of " << r.request_id << ": " << first;
    const HttpResponse second = admin.post("/v1/holds", body);
    ASSERT_EQ(second.status, 200u) << "second retry of " << r.request_id << ": " << second;
    EXPECT_EQ(jstr(second.object(), "hold_id"), jstr(first.object(), "hold_id")) << "a retry made a second hold";
    EXPECT_EQ(jstr(second.object(), "request_id"), r.request_id);
    j.reserved.push_back({r.request_id, r.amount, jstr(first.object(), "hold_id")});
    j.reserve_in_flight.reset();
  }
  if (j.settle_in_flight) {
    const Settle& s = *j.settle_in_flight;
    json::object body;
    if (s.end == End::commit_part) body["amount"] = s.amount;
    const HttpResponse retried =
        admin.post("/v1/holds/" + s.hold_id + (s.end == End::release ? "/release" : "/commit"), body);
    ASSERT_EQ(retried.status, 200u) << "retry of the settlement of " << s.hold_id << ": " << retried;
    if (s.end == End::release) {
      EXPECT_EQ(jstr(retried.object(), "status"), "released");
      j.released.insert(s.hold_id);
    } else {
      EXPECT_EQ(jstr(retried.object(), "status"), "committed");
      j.committed[s.hold_id] = jint(retried.object(), "committed_amount");
    }
    j.settle_in_flight.reset();
  }

  // The account holds exactly the journaled holds: one per request_id, none unaccounted for.
  const HttpResponse listed = admin.get("/v1/holds?account_id=" + j.account + "&limit=1000");
  ASSERT_EQ(listed.status, 200u) << listed;
  std::map<std::string, std::string> by_request;  // request_id → hold_id
  std::int64_t reserved_sum = 0, used_sum = 0;
  for (const auto& v : listed.object().at("holds").as_array()) {
    const json::object& h = v.as_object();
    const auto [it, fresh] = by_request.emplace(jstr(h, "request_id"), jstr(h, "hold_id"));
    EXPECT_TRUE(fresh) << "request_id " << jstr(h, "request_id") << " has two holds";
    if (jstr(h, "status") == "active") reserved_sum += jint(h, "amount");
    used_sum += jint(h, "committed_amount");
  }
  EXPECT_EQ(by_request.size(), j.reserved.size()) << "holds that no client asked for, or lost ones";
  for (const Reserved& r : j.reserved) {
    auto it = by_request.find(r.request_id);
    ASSERT_NE(it, by_request.end()) << r.request_id;
    EXPECT_EQ(it->second, r.hold_id) << r.request_id;
  }
  const json::object a = admin.get("/v1/accounts/" + j.account).object();
  EXPECT_EQ(jint(a, "purchased"), kCredits);
  EXPECT_EQ(jint(a, "reserved"), reserved_sum);
  EXPECT_EQ(jint(a, "used"), used_sum);
  EXPECT_EQ(jint(a, "available") + jint(a, "reserved") + jint(a, "used"), kCredits);
}

TEST(HttpCrash, EveryAcknowledgedAnswerSurvivesKillNineAndLostAnswersRetrySafely) {
  const std::uint64_t seed = base_seed();
  std::printf("[ http crash ] seed %llu (rerun: TOLLGATE_HTTP_CRASH_SEED=%llu)\n", static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  std::mt19937_64 rng(seed);

  ServerProcess server(server_options());
  ASSERT_EQ(wait_until_ready(server.port()).status, 200u) << server.log();
  std::vector<Journal> journals(kThreads);
  {
    HttpClient admin(server.port(), kAdminKey);
    for (int t = 0; t < kThreads; ++t) {
      journals[static_cast<std::size_t>(t)].account = "crash-" + std::to_string(t);
      ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "crash-" + std::to_string(t)}}).status, 201u);
      ASSERT_EQ(admin.post("/v1/accounts/crash-" + std::to_string(t) + "/credits",
                           json::object{{"amount", kCredits}, {"reference", "crash-buy-" + std::to_string(t)}})
                    .status,
                201u);
    }
  }

  for (int round = 1; round <= kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::atomic<bool> stop{false};
    std::atomic<int> answered{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back(run_client, server.port(), std::ref(journals[static_cast<std::size_t>(t)]), round,
                           rng(), std::cref(stop), std::ref(answered));
    }
    // Let the load run, then kill at a random moment in the middle of it.
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (answered.load() < 40 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + static_cast<int>(rng() % 200)));
    const int answered_before_kill = answered.load();
    const int code = server.stop(SIGKILL);
    stop = true;
    for (auto& t : threads) t.join();
    ASSERT_EQ(code, 128 + SIGKILL) << "the server ended otherwise than by our SIGKILL";
    EXPECT_GE(answered_before_kill, 40) << "the load never got going:\n" << server.log();

    int in_flight = 0;
    for (const Journal& j : journals) {
      for (const std::string& u : j.unexpected) ADD_FAILURE() << u;
      in_flight += j.reserve_in_flight.has_value() + j.settle_in_flight.has_value();
    }
    std::printf("[ http crash ] round %d: killed after %d acknowledged answers, %d requests in flight\n", round,
                answered_before_kill, in_flight);
    std::fflush(stdout);

    server.restart();  // the same database (and port)
    ASSERT_EQ(wait_until_ready(server.port()).status, 200u) << server.log();
    HttpClient admin(server.port(), kAdminKey);
    for (Journal& j : journals) check_and_resolve(admin, j);
    const HttpResponse audit = admin.get("/v1/audit");
    ASSERT_EQ(audit.status, 200u) << audit;
    EXPECT_TRUE(audit.object().at("violations").as_array().empty()) << audit.body;
    EXPECT_EQ(jint(audit.object(), "accounts_checked"), kThreads);
  }
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

}  // namespace
}  // namespace tollgate::httptest
