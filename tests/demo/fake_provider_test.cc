// The fake provider (demo/fake_provider.h) over real sockets: the provider contract of api.md as an
// AI image service would keep it — answers, the status URL, idempotency (work started once per id,
// however many POSTs), each fault (refused, answer lost, answer late, never received), latency,
// determinism per (seed, id), the HTTP edges (404, 405, 413, 400, 409, 415, 503), the counters, many
// requests at once — and `tollgate fake-provider` as a real process.
//
// Latencies are scaled down with time_scale so the whole file runs in a few seconds.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http/http_test_support.h"
#include "demo/fake_provider.h"
#include "support/server_process.h"

namespace tollgate::jobs {
namespace {

namespace json = boost::json;
using httptest::HttpClient;
using httptest::HttpResponse;
using httptest::RawConnection;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

// 20–30 s of provider time, run 100 times faster: 200–300 ms.
FakeProviderOptions fast(std::uint64_t seed = 1) {
  FakeProviderOptions o;
  o.seed = seed;
  o.latency_min_ms = 20'000;
  o.latency_max_ms = 30'000;
  o.time_scale = 100;
  return o;
}

std::string body_for(const std::string& id, const std::string& input = R"({"prompt":"a cat in a hat"})") {
  return R"({"id":)" + json::serialize(json::string(id)) + R"(,"input":)" + input + "}";
}

HttpResponse post(const FakeProvider& p, const std::string& id, milliseconds timeout = 5s,
                  const std::string& input = R"({"prompt":"a cat in a hat"})") {
  HttpClient client(p.port(), "", timeout);
  client.set_recorded(false);  // the fake provider is not tollgate: docs/openapi.json is not its contract
  return client.post("/generate", body_for(id, input), {{"Idempotency-Key", id}});
}

HttpResponse get(const FakeProvider& p, const std::string& target) {
  HttpClient client(p.port(), "", 5s);
  client.set_recorded(false);
  return client.get(target);
}

std::string status_of(const FakeProvider& p, const std::string& id) {
  const HttpResponse r = get(p, "/status/" + id);
  if (r.status == 404) return "404";
  return r.status == 200 ? httptest::jstr(r.object(), "status") : "HTTP " + std::to_string(r.status);
}

json::value expected_result(const FakeProviderOptions& o, const std::string& id) {
  return json::parse(fake_result_json(id, plan_request(o, id, 0).image_seed));
}

// Waits (a hang detector, not a performance goal) until `done` or 5 s.
template <typename F>
bool eventually(F done) {
  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return done();
}

// --- answers and the status URL -------------------------------------------------------------------

TEST(FakeProvider, ASuccessAnswersTheResultAndTheStatusSaysRunningThenCompleted) {
  FakeProvider p(fast());
  EXPECT_EQ(status_of(p, "job-1"), "404");  // never received yet
  std::thread client([&] {
    const HttpResponse r = post(p, "job-1");
    EXPECT_EQ(r.status, 200u) << r;
    EXPECT_EQ(r.header("Content-Type"), "application/json");
    ASSERT_TRUE(r.object().contains("result")) << r;
    EXPECT_EQ(r.object().at("result"), expected_result(p.options(), "job-1"));
    EXPECT_EQ(r.object().at("result").at("image_url"), "https://fake/job-1.png");
  });
  EXPECT_TRUE(eventually([&] { return status_of(p, "job-1") == "running"; }));
  client.join();
  const HttpResponse status = get(p, "/status/job-1");
  ASSERT_EQ(status.status, 200u) << status;
  EXPECT_EQ(status.json(), (json::object{{"status", "completed"}, {"result", expected_result(p.options(), "job-1")}}));
  const auto outcome = p.outcome_of("job-1");
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->state, FakeOutcome::State::completed);
  EXPECT_EQ(outcome->posts, 1u);
  EXPECT_EQ(p.stats().work_started, 1u);
  EXPECT_EQ(p.stats().completed, 1u);
  EXPECT_EQ(p.stats().in_flight, 0u);
}

TEST(FakeProvider, TheStatusUrlTakesThePercentEncodedId) {
  FakeProviderOptions o = fast();
  o.latency_min_ms = o.latency_max_ms = 0;
  FakeProvider p(o);
  const std::string id = "kiosk 7/guest:3";
  ASSERT_EQ(post(p, id).status, 200u);
  const HttpResponse r = get(p, "/status/kiosk%207%2Fguest:3");
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(httptest::jstr(r.object(), "status"), "completed");
  EXPECT_EQ(r.object().at("result").at("image_url"), "https://fake/kiosk%207%2Fguest%3A3.png");
}

// --- idempotency ----------------------------------------------------------------------------------

TEST(FakeProvider, TheSameKeyTwiceInARowStartsTheWorkOnceAndAnswersTheSameResult) {
  FakeProviderOptions o = fast();
  o.latency_min_ms = o.latency_max_ms = 100'000;  // 1 s: "at once" below is far from it
  FakeProvider p(o);
  const HttpResponse first = post(p, "twice");
  ASSERT_EQ(first.status, 200u) << first;
  const auto before = Clock::now();
  const HttpResponse second = post(p, "twice");
  EXPECT_LT(Clock::now() - before, 500ms) << "an ended work is replayed at once, not done again";
  ASSERT_EQ(second.status, 200u) << second;
  EXPECT_EQ(first.json(), second.json());
  EXPECT_EQ(p.stats().work_started, 1u);
  EXPECT_EQ(p.stats().duplicates_of_work, 1u);
  EXPECT_EQ(p.outcome_of("twice")->posts, 2u);
}

TEST(FakeProvider, TheSameKeyTenTimesAtOnceStartsTheWorkOnceAndAllGetTheSameResult) {
  FakeProviderOptions o = fast();
  o.threads = 4;  // the POSTs race on several I/O threads
  FakeProvider p(o);
  constexpr int kClients = 10;
  std::latch start(kClients);
  std::vector<HttpResponse> answers(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      start.arrive_and_wait();
      answers[i] = post(p, "ten-at-once");
    });
  }
  for (auto& t : clients) t.join();
  for (const HttpResponse& r : answers) {
    ASSERT_EQ(r.status, 200u) << r;
    EXPECT_EQ(r.object().at("result"), expected_result(p.options(), "ten-at-once"));
  }
  EXPECT_EQ(p.stats().work_started, 1u);
  EXPECT_EQ(p.stats().completed, 1u);
  EXPECT_EQ(p.stats().duplicates_of_work, 9u);
  EXPECT_EQ(p.outcome_of("ten-at-once")->posts, 10u);
}

TEST(FakeProvider, TheSameKeyWithADifferentInputIsRefusedWithoutTouchingTheWork) {
  FakeProvider p(fast());
  ASSERT_EQ(post(p, "same-key").status, 200u);
  const HttpResponse other = post(p, "same-key", 5s, R"({"prompt":"a dog"})");
  EXPECT_EQ(other.status, 409u) << other;
  EXPECT_EQ(p.stats().work_started, 1u);
  EXPECT_EQ(p.stats().rejected, 1u);
  EXPECT_EQ(p.outcome_of("same-key")->posts, 1u);
}

// --- faults ---------------------------------------------------------------------------------------

TEST(FakeProvider, FailRateOneRefuses422AtOnceAndTheStatusSaysFailed) {
  FakeProviderOptions o = fast();
  o.latency_min_ms = o.latency_max_ms = 100'000;  // 1 s, which a refusal does not wait
  o.fail_rate = 1;
  FakeProvider p(o);
  const auto before = Clock::now();
  const HttpResponse r = post(p, "refused");
  EXPECT_LT(Clock::now() - before, 500ms) << "a refusal does no work";
  ASSERT_EQ(r.status, 422u) << r;
  EXPECT_FALSE(httptest::jstr(r.object(), "error").empty());
  const HttpResponse status = get(p, "/status/refused");
  ASSERT_EQ(status.status, 200u) << status;
  EXPECT_EQ(httptest::jstr(status.object(), "status"), "failed");
  EXPECT_FALSE(httptest::jstr(status.object(), "error").empty());
  // Sent again: the recorded refusal, not a new draw.
  EXPECT_EQ(post(p, "refused").status, 422u);
  EXPECT_EQ(p.outcome_of("refused")->state, FakeOutcome::State::failed);
  const FakeProviderStats s = p.stats();
  EXPECT_EQ(s.work_started, 1u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_EQ(s.completed, 0u);
  EXPECT_EQ(s.duplicates_of_work, 1u);
}

TEST(FakeProvider, LostAnswerRateOneAnswers500ButTheWorkIsCompletedAndASecondSendGetsTheResult) {
  FakeProviderOptions o = fast();
  o.lost_answer_rate = 1;
  FakeProvider p(o);
  const HttpResponse r = post(p, "lost");
  ASSERT_EQ(r.status, 500u) << r;
  const HttpResponse status = get(p, "/status/lost");
  ASSERT_EQ(status.status, 200u) << status;
  EXPECT_EQ(httptest::jstr(status.object(), "status"), "completed");
  EXPECT_EQ(status.object().at("result"), expected_result(o, "lost"));
  // What a client without a status URL does: send again with the same key.
  const HttpResponse again = post(p, "lost");
  ASSERT_EQ(again.status, 200u) << again;
  EXPECT_EQ(again.object().at("result"), expected_result(o, "lost"));
  EXPECT_EQ(p.stats().work_started, 1u);
  EXPECT_EQ(p.stats().answers_lost, 1u);
}

TEST(FakeProvider, LateAnswerRateOneAnswersAfterTheClientsTimeOutWhileTheStatusAlreadySaysCompleted) {
  FakeProviderOptions o;
  o.latency_min_ms = o.latency_max_ms = 100;
  o.late_answer_rate = 1;
  o.late_extra_ms = 900;
  FakeProvider p(o);
  const std::string body = body_for("late");
  RawConnection connection(p.port());
  const auto sent = Clock::now();
  ASSERT_TRUE(connection.send("POST /generate HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n"
                              "Idempotency-Key: late\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body));
  // A client that waits 400 ms gets nothing...
  EXPECT_EQ(connection.read_response(400ms), "");
  // ...while the status URL already knows.
  EXPECT_EQ(status_of(p, "late"), "completed");
  // A second send with the same key gets the result at once.
  const HttpResponse again = post(p, "late", 300ms);
  ASSERT_EQ(again.status, 200u) << again;
  EXPECT_EQ(again.object().at("result"), expected_result(o, "late"));
  // The late answer comes after latency + late_extra_ms.
  const std::string late = connection.read_response(3s);
  const auto took = Clock::now() - sent;
  ASSERT_EQ(httptest::raw_status(late), 200u) << late;
  EXPECT_EQ(json::parse(httptest::raw_body(late)).at("result"), expected_result(o, "late"));
  EXPECT_GE(took, 990ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(p.stats().work_started, 1u);
  EXPECT_EQ(p.stats().answers_late, 1u);
}

TEST(FakeProvider, NeverReceivedRateOneClosesTheConnectionAndRecordsNothing) {
  FakeProviderOptions o = fast();
  o.never_received_rate = 1;
  FakeProvider p(o);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const HttpResponse r = post(p, "never");
    EXPECT_FALSE(r.answered()) << r;
    EXPECT_EQ(r.error.rfind("read:", 0), 0u) << r.error;  // the connection closed, no answer
    EXPECT_EQ(status_of(p, "never"), "404");
  }
  EXPECT_FALSE(p.outcome_of("never"));
  const FakeProviderStats s = p.stats();
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.never_received, 2u);
  EXPECT_EQ(s.work_started, 0u);
  EXPECT_EQ(s.in_flight, 0u);
}

TEST(FakeProvider, AfterANeverReceivedPostTheSameKeyIsANewRequest) {
  FakeProviderOptions o = fast();
  o.never_received_rate = 0.5;
  // An id whose first delivery is never received and whose second is (the draw is per delivery).
  std::string id;
  for (int i = 0; id.empty(); ++i) {
    const std::string candidate = "retry-" + std::to_string(i);
    if (plan_request(o, candidate, 0).fault == FakeFault::never_receive &&
        plan_request(o, candidate, 1).fault == FakeFault::none) {
      id = candidate;
    }
    ASSERT_LT(i, 1000);
  }
  FakeProvider p(o);
  EXPECT_FALSE(post(p, id).answered());
  EXPECT_EQ(status_of(p, id), "404");
  const HttpResponse second = post(p, id);
  ASSERT_EQ(second.status, 200u) << second;
  EXPECT_EQ(second.object().at("result"), expected_result(o, id));
  EXPECT_EQ(p.stats().work_started, 1u);
  EXPECT_EQ(p.stats().duplicates_of_work, 0u);
  EXPECT_EQ(p.outcome_of(id)->posts, 1u);
}

// --- latency and determinism ----------------------------------------------------------------------

TEST(FakeProvider, LatencyIsDrawnFromTheRangeDividedByTheTimeScale) {
  FakeProviderOptions o;
  o.latency_min_ms = 1'000;
  o.latency_max_ms = 3'000;
  o.time_scale = 10;  // 100..300 ms
  // The draws cover the scaled range.
  milliseconds low = 1h, high = 0ms;
  for (int i = 0; i < 500; ++i) {
    const auto latency = std::chrono::duration_cast<milliseconds>(plan_request(o, "id-" + std::to_string(i), 0).latency);
    ASSERT_GE(latency, 100ms);
    ASSERT_LE(latency, 300ms);
    low = std::min(low, latency);
    high = std::max(high, latency);
  }
  EXPECT_LT(low, 110ms);
  EXPECT_GT(high, 290ms);
  // And the server waits that long (at once, each on its own connection).
  FakeProvider p(o);
  std::vector<std::thread> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      const std::string id = "timed-" + std::to_string(i);
      const auto expected = plan_request(o, id, 0).latency;
      const auto before = Clock::now();
      const HttpResponse r = post(p, id);
      const auto took = Clock::now() - before;
      EXPECT_EQ(r.status, 200u) << r;
      EXPECT_GE(took, expected) << id;
      EXPECT_LT(took, expected + 1s) << id;  // roughly: a loaded machine (sanitizers, parallel tests) is slow
    });
  }
  for (auto& t : clients) t.join();
}

TEST(FakeProvider, TheRatesAreTheSharesOfDeliveriesThatMeetEachFault) {
  FakeProviderOptions o;
  o.fail_rate = 0.1;
  o.lost_answer_rate = 0.2;
  o.late_answer_rate = 0.15;
  o.never_received_rate = 0.05;
  std::map<FakeFault, int> seen;
  constexpr int kIds = 20'000;
  for (int i = 0; i < kIds; ++i) ++seen[plan_request(o, "share-" + std::to_string(i), 0).fault];
  auto share = [&](FakeFault f) { return static_cast<double>(seen[f]) / kIds; };
  EXPECT_NEAR(share(FakeFault::refuse), 0.1, 0.015);
  EXPECT_NEAR(share(FakeFault::lose_answer), 0.2, 0.015);
  EXPECT_NEAR(share(FakeFault::answer_late), 0.15, 0.015);
  EXPECT_NEAR(share(FakeFault::never_receive), 0.05, 0.015);
  EXPECT_NEAR(share(FakeFault::none), 0.5, 0.015);
}

TEST(FakeProvider, TwoProvidersWithTheSameSeedBehaveTheSamePerIdWhateverTheOrder) {
  FakeProviderOptions o;
  o.seed = 42;
  o.latency_min_ms = 5;
  o.latency_max_ms = 40;
  o.fail_rate = 0.3;
  o.lost_answer_rate = 0.2;
  o.never_received_rate = 0.2;
  FakeProvider a(o), b(o);
  std::vector<std::string> ids;
  for (int i = 0; i < 24; ++i) ids.push_back("det-" + std::to_string(i));
  auto outcome = [](const HttpResponse& r) { return r.answered() ? std::to_string(r.status) + " " + r.body : "closed"; };
  // a in order, one at a time; b in reverse order, all at once.
  std::map<std::string, std::string> seen_a, seen_b;
  for (const auto& id : ids) seen_a[id] = outcome(post(a, id));
  std::vector<std::string> answers_b(ids.size());
  std::vector<std::thread> clients;
  for (std::size_t i = ids.size(); i-- > 0;) {
    clients.emplace_back([&, i] { answers_b[i] = outcome(post(b, ids[i])); });
  }
  for (auto& t : clients) t.join();
  std::set<std::string> kinds;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    seen_b[ids[i]] = answers_b[i];
    kinds.insert(answers_b[i].substr(0, 3));
  }
  EXPECT_EQ(seen_a, seen_b);
  EXPECT_GE(kinds.size(), 3u) << "the mix exercised several behaviours";
  EXPECT_EQ(a.stats().work_started, b.stats().work_started);
  // Another seed draws differently.
  FakeProviderOptions other = o;
  other.seed = 43;
  int differences = 0;
  for (const auto& id : ids) {
    const FakeRequestPlan x = plan_request(o, id, 0), y = plan_request(other, id, 0);
    differences += x.fault != y.fault || x.latency != y.latency || x.image_seed != y.image_seed;
  }
  EXPECT_GT(differences, 0);
}

// --- the HTTP edges -------------------------------------------------------------------------------

TEST(FakeProvider, AnUnknownPathIs404AndAWrongMethod405) {
  FakeProvider p(fast());
  EXPECT_EQ(get(p, "/nothing-here").status, 404u);
  EXPECT_EQ(get(p, "/v1/generate").status, 404u);
  const HttpResponse wrong = get(p, "/generate");
  EXPECT_EQ(wrong.status, 405u);
  EXPECT_EQ(wrong.header("Allow"), "POST");
  HttpClient client(p.port());
  client.set_recorded(false);
  EXPECT_EQ(client.post("/status/x", std::string("{}")).status, 405u);
  const HttpResponse health = get(p, "/healthz");
  EXPECT_EQ(health.status, 200u);
  EXPECT_EQ(health.json(), json::parse(R"({"status":"ok"})"));
}

TEST(FakeProvider, ABodyOver64KiBIs413) {
  FakeProvider p(fast());
  const std::string big = R"({"prompt":")" + std::string(70 * 1024, 'x') + R"("})";
  const HttpResponse r = post(p, "big", 5s, big);
  EXPECT_EQ(r.status, 413u) << r;
  // Announced too large: refused before the body is sent.
  RawConnection raw(p.port());
  ASSERT_TRUE(raw.send("POST /generate HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n"
                       "Idempotency-Key: big\r\nContent-Length: 1000000\r\n\r\n"));
  EXPECT_EQ(httptest::raw_status(raw.read_response(3s)), 413u);
  EXPECT_EQ(p.stats().work_started, 0u);
  EXPECT_EQ(p.stats().rejected, 2u);
  EXPECT_EQ(status_of(p, "big"), "404");
}

TEST(FakeProvider, BadRequestsAre400Or415AndStartNoWork) {
  FakeProvider p(fast());
  HttpClient client(p.port());
  client.set_recorded(false);
  EXPECT_EQ(client.post("/generate", std::string("{not json"), {{"Idempotency-Key", "bad"}}).status, 400u);
  EXPECT_EQ(client.post("/generate", std::string("[1,2]"), {{"Idempotency-Key", "bad"}}).status, 400u);
  EXPECT_EQ(client.post("/generate", std::string(R"({"id":7,"input":{}})"), {{"Idempotency-Key", "7"}}).status, 400u);
  EXPECT_EQ(client.post("/generate", body_for("bad")).status, 400u) << "no Idempotency-Key";
  EXPECT_EQ(client.post("/generate", body_for("bad"), {{"Idempotency-Key", "other"}}).status, 400u);
  EXPECT_EQ(client.post("/generate", body_for("bad"), {{"Idempotency-Key", "bad"}, {"Content-Type", "text/plain"}}).status,
            415u);
  const HttpResponse r = client.post("/generate", std::string("{not json"), {{"Idempotency-Key", "bad"}});
  EXPECT_FALSE(httptest::jstr(r.object(), "error").empty()) << r;
  EXPECT_EQ(p.stats().work_started, 0u);
  EXPECT_EQ(p.stats().rejected, 7u);
  EXPECT_EQ(p.stats().requests, 7u);
  EXPECT_EQ(status_of(p, "bad"), "404");
}

TEST(FakeProvider, WhenTheRememberedIdsAreFullTheOldestEndedOneIsForgotten) {
  FakeProviderOptions o = fast();
  o.latency_min_ms = o.latency_max_ms = 0;
  o.ids_remembered_max = 2;
  FakeProvider p(o);
  ASSERT_EQ(post(p, "first").status, 200u);
  ASSERT_EQ(post(p, "second").status, 200u);
  ASSERT_EQ(post(p, "third").status, 200u);
  EXPECT_EQ(status_of(p, "first"), "404");
  EXPECT_EQ(status_of(p, "second"), "completed");
  EXPECT_EQ(status_of(p, "third"), "completed");
}

TEST(FakeProvider, WhenTheOldestRememberedIdStillRunsANewIdIs503) {
  FakeProviderOptions o = fast();
  o.latency_min_ms = o.latency_max_ms = 50'000;  // 500 ms to see it running
  o.ids_remembered_max = 1;
  FakeProvider p(o);
  std::thread slow([&] { EXPECT_EQ(post(p, "running").status, 200u); });
  ASSERT_TRUE(eventually([&] { return p.stats().running == 1; }));
  const HttpResponse r = post(p, "new");
  EXPECT_EQ(r.status, 503u) << r;
  slow.join();
  EXPECT_EQ(post(p, "new").status, 200u);
}

// --- counters ---------------------------------------------------------------------------------------

TEST(FakeProvider, StatsCountRequestsWorkAndDuplicates) {
  FakeProviderOptions o = fast();
  o.latency_min_ms = o.latency_max_ms = 5'000;  // 50 ms
  o.fail_rate = 0.5;
  FakeProvider p(o);
  int refused = 0, completed = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string id = "count-" + std::to_string(i);
    (plan_request(o, id, 0).fault == FakeFault::refuse ? refused : completed) += 1;
    const HttpResponse r = post(p, id);
    EXPECT_EQ(r.status, plan_request(o, id, 0).fault == FakeFault::refuse ? 422u : 200u) << r;
  }
  ASSERT_GT(refused, 0);
  ASSERT_GT(completed, 0);
  post(p, "count-0");  // a duplicate
  HttpClient rejected(p.port());
  rejected.set_recorded(false);
  rejected.post("/generate", std::string("nope"), {{"Idempotency-Key", "x"}});  // rejected
  FakeProviderStats expected;
  expected.requests = 10;
  expected.work_started = 8;
  expected.completed = static_cast<std::uint64_t>(completed);
  expected.failed = static_cast<std::uint64_t>(refused);
  expected.duplicates_of_work = 1;
  expected.rejected = 1;
  EXPECT_EQ(stats_json(p.stats()), stats_json(expected));
  const HttpResponse over_http = get(p, "/stats");
  ASSERT_EQ(over_http.status, 200u);
  EXPECT_EQ(over_http.json(), json::parse(stats_json(expected)));
}

TEST(FakeProvider, AThousandRequestsWaitAtOnceOnOneThread) {
  constexpr int kRequests = 1000;
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur < 2 * kRequests + 200) GTEST_SKIP() << "RLIMIT_NOFILE " << files.rlim_cur << " is too low";
  FakeProviderOptions o = fast();  // 200–300 ms each
  FakeProvider p(o);
  std::vector<std::unique_ptr<RawConnection>> connections;
  const auto before = Clock::now();
  for (int i = 0; i < kRequests; ++i) {
    const std::string id = "many-" + std::to_string(i), body = body_for(id);
    connections.push_back(std::make_unique<RawConnection>(p.port()));
    ASSERT_TRUE(connections.back()->send("POST /generate HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n"
                                         "Idempotency-Key: " + id + "\r\nContent-Length: " +
                                         std::to_string(body.size()) + "\r\n\r\n" + body));
  }
  int ok = 0;
  for (auto& c : connections) ok += httptest::raw_status(c->read_response(5s)) == 200;
  EXPECT_EQ(ok, kRequests);
  EXPECT_LT(Clock::now() - before, 20s) << "the waits overlap (one after the other: over 200 s)";
  EXPECT_EQ(p.stats().work_started, static_cast<std::uint64_t>(kRequests));
  EXPECT_EQ(p.stats().in_flight, 0u);
}

TEST(FakeProvider, OptionsThatCannotRunAreRefused) {
  FakeProviderOptions o;
  EXPECT_EQ(options_error(o), "");
  o.fail_rate = 0.6;
  o.lost_answer_rate = 0.6;
  EXPECT_NE(options_error(o), "");
  EXPECT_THROW(FakeProvider{o}, std::invalid_argument);
  o = {};
  o.latency_min_ms = 10;
  o.latency_max_ms = 5;
  EXPECT_NE(options_error(o), "");
  o = {};
  o.time_scale = 0;
  EXPECT_NE(options_error(o), "");
  o = {};
  o.host = "not-an-ip";
  EXPECT_THROW(FakeProvider{o}, std::invalid_argument);
}

TEST(FakeProvider, StopClosesConnectionsThatWaitForAnAnswer) {
  FakeProviderOptions o;
  o.latency_min_ms = o.latency_max_ms = 60'000;
  FakeProvider p(o);
  const std::string body = body_for("waiting");
  RawConnection connection(p.port());
  ASSERT_TRUE(connection.send("POST /generate HTTP/1.1\r\nHost: fake\r\nContent-Type: application/json\r\n"
                              "Idempotency-Key: waiting\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_TRUE(eventually([&] { return p.stats().running == 1; }));
  p.stop();
  bool closed = false;
  EXPECT_EQ(connection.read_until_closed(2s, &closed), "");
  EXPECT_TRUE(closed);
}

// --- `tollgate fake-provider`, the process ----------------------------------------------------------

class FakeProviderProcess {
 public:
  explicit FakeProviderProcess(std::vector<std::string> args) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    out_ = fds[0];
    args.insert(args.begin(), {TOLLGATE_BINARY, "fake-provider"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    const int rc = posix_spawn(&pid_, TOLLGATE_BINARY, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) throw std::runtime_error("posix_spawn failed");
  }
  ~FakeProviderProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(out_);
  }

  // The first line on stdout, or "" if none within `patience`.
  std::string first_line(milliseconds patience) {
    std::string text;
    const auto deadline = Clock::now() + patience;
    while (text.find('\n') == std::string::npos && Clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[256];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    const auto end = text.find('\n');
    return end == std::string::npos ? "" : text.substr(0, end);
  }

  // SIGTERM, then the exit code (or -1 if it did not end within 5 s).
  int terminate() {
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + 5s;
    while (Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

TEST(FakeProviderCli, StartsOnAnyPortSaysWhereAndServes) {
  FakeProviderProcess process({"--listen", "127.0.0.1:0", "--latency-ms", "1000..2000", "--time-scale", "100",
                               "--seed", "9"});
  const std::string line = process.first_line(10s);
  const std::string prefix = "listening on 127.0.0.1:";
  ASSERT_EQ(line.rfind(prefix, 0), 0u) << "first line: \"" << line << "\"";
  const int port = std::stoi(line.substr(prefix.size()));
  ASSERT_GT(port, 0);
  HttpClient client(static_cast<std::uint16_t>(port));
  client.set_recorded(false);
  const HttpResponse health = client.get("/healthz");
  EXPECT_EQ(health.status, 200u) << health;
  // The options reached the provider: 10–20 ms of latency, seed 9's result.
  FakeProviderOptions same;
  same.seed = 9;
  const auto before = Clock::now();
  const HttpResponse r = client.post("/generate", body_for("cli-1"), {{"Idempotency-Key", "cli-1"}});
  EXPECT_LT(Clock::now() - before, 5s) << "scaled, not the 15-25 s of the defaults";
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(r.object().at("result"), expected_result(same, "cli-1"));
  EXPECT_EQ(process.terminate(), 0);
}

TEST(FakeProviderCli, OptionsThatCannotRunAreAUsageError) {
  testing::ProcessResult r = testing::run_tollgate({"fake-provider", "--fail-rate", "0.7", "--lost-answer-rate", "0.7"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("add up to more than 1"), std::string::npos) << r.err;
  r = testing::run_tollgate({"fake-provider", "--listen", "127.0.0.1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  r = testing::run_tollgate({"fake-provider", "--latency-ms", "5..1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace tollgate::jobs
