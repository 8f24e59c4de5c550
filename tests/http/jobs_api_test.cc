// Jobs over HTTP, end to end: a real tollgate process (SQLite, or PostgreSQL in the HttpSuitesOnPostgres
// run) calling real fake providers (demo/fake_provider.h, in this process, on real sockets) — every
// provider outcome of the contract, idempotent submits, cancel, wait_ms, a late result under each
// late-commit policy, `kill -9` in the middle of a call, and three instances sharing the jobs of
// one that was killed (PostgreSQL).
//
// "In agreement with what the provider did" is checked against the fake provider's own record of
// each id (outcome_of): a job is charged exactly when the provider completed its work, and the
// provider started the work of an id once, however often it was asked.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_test_support.h"
#include "demo/fake_provider.h"
#include "support/backends.h"

namespace tollgate::httptest {
namespace {

using jobs::FakeProvider;
using jobs::FakeProviderOptions;

FakeProviderOptions fake_options(std::int64_t min_ms, std::int64_t max_ms, std::uint64_t seed) {
  FakeProviderOptions o;
  o.latency_min_ms = min_ms;
  o.latency_max_ms = max_ms;
  o.seed = seed;
  return o;
}

// [providers.NAME] for a fake (status URL optional).
std::string provider_toml(const std::string& name, const std::string& base, bool status_url, std::int64_t timeout_ms,
                          std::int64_t expected_ms, std::int64_t max_attempts = 3) {
  std::string t = "[providers." + name + "]\nurl = \"" + base + "/generate\"\n";
  if (status_url) t += "status_url = \"" + base + "/status/{id}\"\n";
  t += "timeout_ms = " + std::to_string(timeout_ms) + "\nexpected_duration_ms = " + std::to_string(expected_ms) +
       "\nmax_attempts = " + std::to_string(max_attempts) + "\n";
  return t;
}

std::string write_config(const testing::TempDir& dir, const std::string& toml) {
  const std::string path = dir.file("tollgate.toml");
  std::ofstream(path) << toml;
  return path;
}

class HttpJobs : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    normal_ = new FakeProvider(fake_options(30, 80, 1));
    auto lossy = fake_options(30, 80, 2);
    lossy.lost_answer_rate = 1.0;  // does the work, answers 500
    lossy_ = new FakeProvider(lossy);
    auto refusing = fake_options(10, 20, 3);
    refusing.fail_rate = 1.0;  // 422
    refusing_ = new FakeProvider(refusing);
    slow_ = new FakeProvider(fake_options(1500, 1500, 4));
    dir_ = new testing::TempDir();
    std::string toml = "reaper_interval_ms = 200\n";
    toml += provider_toml("imagegen", normal_->base_url(), true, 3000, 200);
    toml += provider_toml("lossy", lossy_->base_url(), true, 3000, 200);
    toml += provider_toml("lossy-nostatus", lossy_->base_url(), false, 3000, 200);
    toml += provider_toml("refusing", refusing_->base_url(), true, 3000, 200);
    toml += provider_toml("down", "http://127.0.0.1:" + std::to_string(testing::unused_port()), false, 500, 100);
    // Answers after 1.5 s, past its 1-s time-out: settled through the status URL. Its lease
    // (limits::kJobLeaseMs, renewed while its worker lives) ends within 5 s of a kill: the crash test's recovery.
    toml += provider_toml("slow", slow_->base_url(), true, 1000, 333);
    ServerOptions options = server_options();
    options.extra_args = {"--config", write_config(*dir_, toml)};
    if (http_suites_on_postgres()) {
      const auto uri = testing::postgres_server_uri();
      if (!uri) {
        if (testing::postgres_required()) FAIL() << "TOLLGATE_REQUIRE_POSTGRES=1 but no TOLLGATE_TEST_POSTGRES";
        skip_ = true;
        return;
      }
      schema_ = new testing::PgSchema(*uri);
      options.database = schema_->uri();
    }
    try {
      server_ = new ServerProcess(options);
    } catch (const std::exception& e) {
      FAIL() << "the server did not start: " << e.what();
    }
    ASSERT_EQ(wait_until_ready(server_->port()).status, 200u) << server_->log();
  }

  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->stop(SIGTERM), 0) << server_->log();
      delete server_;
      server_ = nullptr;
    }
    delete schema_;
    schema_ = nullptr;
    for (FakeProvider** f : {&normal_, &lossy_, &refusing_, &slow_}) {
      delete *f;
      *f = nullptr;
    }
    delete dir_;
    dir_ = nullptr;
    skip_ = false;
  }

 protected:
  void SetUp() override {
    if (skip_) GTEST_SKIP() << "no PostgreSQL server";
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->running()) << server_->log();
    admin_ = std::make_unique<HttpClient>(server_->port(), kAdminKey);
  }

  void TearDown() override {
    if (!server_ || !server_->running()) return;
    const HttpResponse audit = admin_->get("/v1/audit");
    ASSERT_EQ(audit.status, 200u) << audit;
    EXPECT_TRUE(audit.object().at("violations").as_array().empty()) << audit;
  }

  static std::string unique(std::string_view prefix) {
    static std::atomic<int> next{0};
    return std::string(prefix) + "-" + std::to_string(++next) + "-" + std::to_string(::getpid());
  }

  std::string make_account(std::int64_t credits) {
    const std::string id = unique("acct");
    EXPECT_EQ(admin_->post("/v1/accounts", json::object{{"account_id", id}}).status, 201u);
    EXPECT_EQ(admin_->post("/v1/accounts/" + id + "/credits", json::object{{"amount", credits}, {"reference", id}}).status,
              201u);
    return id;
  }

  HttpResponse submit(const std::string& account, const std::string& provider, const std::string& id, std::int64_t cost = 1) {
    return admin_->post("/v1/jobs", json::object{{"client_request_id", id},
                                                 {"account_id", account},
                                                 {"cost", cost},
                                                 {"provider", provider},
                                                 {"input", json::object{{"prompt", "a cat"}}}});
  }

  // The job once it ended (long-polls; fails the test if it does not end within `patience`).
  json::object wait_ended(const std::string& id, std::chrono::milliseconds patience = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
      const HttpResponse r = admin_->get("/v1/jobs/" + id + "?wait_ms=2000");
      EXPECT_EQ(r.status, 200u) << r;
      if (r.status != 200) return {};
      const std::string status = jstr(r.object(), "status");
      if (status == "completed" || status == "failed" || status == "cancelled") return r.object();
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "job " << id << " did not end: " << r << "\n" << server_->log().substr(0, 4000);
        return r.object();
      }
    }
  }

  std::vector<std::string> history_kinds(const std::string& id) {
    const HttpResponse r = admin_->get("/v1/jobs/" + id + "/history");
    EXPECT_EQ(r.status, 200u) << r;
    std::vector<std::string> out;
    for (const auto& e : r.object().at("entries").as_array()) out.emplace_back(e.as_object().at("kind").as_string());
    return out;
  }

  json::object account(const std::string& id) { return admin_->get("/v1/accounts/" + id).object(); }

  static inline FakeProvider* normal_ = nullptr;
  static inline FakeProvider* lossy_ = nullptr;
  static inline FakeProvider* refusing_ = nullptr;
  static inline FakeProvider* slow_ = nullptr;
  static inline testing::TempDir* dir_ = nullptr;
  static inline testing::PgSchema* schema_ = nullptr;
  static inline ServerProcess* server_ = nullptr;
  static inline bool skip_ = false;
  std::unique_ptr<HttpClient> admin_;
};

TEST_F(HttpJobs, ASuccessCompletesTheJobAndChargesItsHoldOnce) {
  const std::string acct = make_account(5);
  const std::string id = unique("ok");
  const HttpResponse r = submit(acct, "imagegen", id, 2);
  ASSERT_EQ(r.status, 202u) << r;
  EXPECT_EQ(jstr(r.object(), "status"), "pending");
  const json::object job = wait_ended(id);
  EXPECT_EQ(jstr(job, "status"), "completed");
  EXPECT_TRUE(job.at("charged").as_bool());
  EXPECT_EQ(jint(job, "attempts"), 1);
  EXPECT_TRUE(job.at("result").as_object().contains("image_url"));
  EXPECT_EQ(jint(account(acct), "used"), 2);
  EXPECT_EQ(jint(account(acct), "available"), 3);
  EXPECT_EQ(history_kinds(id), (std::vector<std::string>{"submitted", "running", "attempt", "completed"}));
  const auto outcome = normal_->outcome_of(id);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->state, jobs::FakeOutcome::State::completed);
  EXPECT_EQ(outcome->posts, 1u);
  // The hold's events name the job.
  const HttpResponse events = admin_->get("/v1/accounts/" + acct + "/events");
  int named = 0;
  for (const auto& e : events.object().at("events").as_array()) {
    if (e.as_object().contains("job_id") && e.as_object().at("job_id").as_string() == id) ++named;
  }
  EXPECT_EQ(named, 2);  // reserved, committed
}

// api.md "Refunds of a charge": a completed job's charge comes back through its job, in part or in
// whole, once per request_id; the holds API does not refund a job's hold; a job that did not
// complete has nothing to refund; an account key may not refund.
TEST_F(HttpJobs, ACompletedJobsChargeIsRefundedThroughItsJobOncePerRequest) {
  const std::string acct = make_account(10);
  const std::string id = unique("refunded");
  ASSERT_EQ(submit(acct, "imagegen", id, 4).status, 202u);
  const json::object job = wait_ended(id);
  ASSERT_EQ(jstr(job, "status"), "completed");
  const std::string hold_id = jstr(job, "hold_id");

  const HttpResponse part =
      admin_->post("/v1/jobs/" + id + "/refund", json::object{{"amount", 1}, {"reason", "the print jammed"}, {"request_id", id + "-r1"}});
  ASSERT_EQ(part.status, 200u) << part;
  EXPECT_EQ(jstr(part.object(), "client_request_id"), id);
  EXPECT_EQ(jint(part.object(), "refunded_amount"), 1);
  EXPECT_EQ(jint(account(acct), "used"), 3);
  EXPECT_EQ(jint(account(acct), "available"), 7);
  EXPECT_EQ(jint(account(acct), "purchased"), 10);
  // The same request again moves nothing; the rest, unnamed, is everything left.
  const HttpResponse again =
      admin_->post("/v1/jobs/" + id + "/refund", json::object{{"amount", 1}, {"reason", "the print jammed"}, {"request_id", id + "-r1"}});
  ASSERT_EQ(again.status, 200u) << again;
  EXPECT_EQ(jint(again.object(), "refunded_amount"), 1);
  const HttpResponse rest = admin_->post("/v1/jobs/" + id + "/refund", json::object{{"reason", "complaint"}},
                                         {{"Idempotency-Key", id + "-r2"}});
  ASSERT_EQ(rest.status, 200u) << rest;
  EXPECT_EQ(jint(rest.object(), "refunded_amount"), 4);
  EXPECT_EQ(jint(account(acct), "used"), 0);
  EXPECT_EQ(jint(account(acct), "available"), 10);
  const HttpResponse more = admin_->post("/v1/jobs/" + id + "/refund", json::object{{"reason", "x"}, {"request_id", id + "-r3"}});
  EXPECT_EQ(more.status, 409u) << more;
  EXPECT_EQ(more.code(), "refund_exceeds_charge");
  const HttpResponse hold = admin_->get("/v1/holds/" + hold_id);
  EXPECT_EQ(jint(hold.object(), "refunded_amount"), 4);

  // Through the holds API: the job's hold is the job's to refund.
  const HttpResponse via_hold =
      admin_->post("/v1/holds/" + hold_id + "/refund", json::object{{"reason", "x"}, {"request_id", id + "-r4"}});
  EXPECT_EQ(via_hold.status, 409u) << via_hold;
  EXPECT_EQ(via_hold.code(), "conflict");
  EXPECT_NE(via_hold.body.find("refund it through its job"), std::string::npos) << via_hold;

  // A job that failed charged nothing: conflict, nothing moves.
  const std::string failed = unique("refused");
  ASSERT_EQ(submit(acct, "refusing", failed, 2).status, 202u);
  ASSERT_EQ(jstr(wait_ended(failed), "status"), "failed");
  const HttpResponse nothing =
      admin_->post("/v1/jobs/" + failed + "/refund", json::object{{"reason", "x"}, {"request_id", failed + "-r"}});
  EXPECT_EQ(nothing.status, 409u) << nothing;
  EXPECT_EQ(nothing.code(), "conflict");
  EXPECT_EQ(jint(account(acct), "available"), 10);

  // An unknown job; an account key.
  const HttpResponse unknown =
      admin_->post("/v1/jobs/no-such-job/refund", json::object{{"reason", "x"}, {"request_id", id + "-r5"}});
  EXPECT_EQ(unknown.status, 404u) << unknown;
  const HttpResponse key = admin_->post("/v1/accounts/" + acct + "/keys", json::object{});
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient kiosk(server_->port(), jstr(key.object(), "secret"));
  const HttpResponse forbidden =
      kiosk.post("/v1/jobs/" + id + "/refund", json::object{{"reason", "x"}, {"request_id", id + "-r6"}});
  EXPECT_EQ(forbidden.status, 403u) << forbidden;
  EXPECT_EQ(jint(account(acct), "available"), 10);
}

TEST_F(HttpJobs, MetricsCountJobsAndEachProvidersOutcomesAndLatency) {
  const std::string acct = make_account(3);
  const std::string id = unique("metered");
  HttpResponse m = admin_->get("/metrics");
  ASSERT_EQ(m.status, 200u);
  const auto value = [&](const std::string& series) -> double {
    const auto at = m.body.find("\n" + series + " ");
    if (at == std::string::npos) return -1;
    return std::stod(m.body.substr(at + series.size() + 2));
  };
  const std::string released = "tollgate_holds_ended_total{outcome=\"released\"}";
  const double released_before = value(released);
  ASSERT_GE(released_before, 0);
  ASSERT_EQ(submit(acct, "refusing", id).status, 202u);
  wait_ended(id);
  m = admin_->get("/metrics");
  ASSERT_EQ(m.status, 200u);
  // The failed job released its hold: a hold ended through a job counts like any other.
  EXPECT_GE(value(released), released_before + 1);
  EXPECT_GE(value("tollgate_provider_outcomes_total{provider=\"refusing\",outcome=\"4xx\"}"), 1);
  EXPECT_GE(value("tollgate_provider_request_duration_seconds_count{provider=\"refusing\"}"), 1);
  EXPECT_GE(value("tollgate_provider_request_duration_seconds_bucket{provider=\"refusing\",le=\"+Inf\"}"), 1);
  EXPECT_GE(value("tollgate_jobs_ended_total{status=\"failed\"}"), 1);
  EXPECT_GE(value("tollgate_jobs{status=\"pending\"}"), 0);
  EXPECT_GE(value("tollgate_jobs{status=\"running\"}"), 0);
}

TEST_F(HttpJobs, TheSameIdPostedTenTimesAtOnceMakesOneJobAndOneProviderCall) {
  const std::string acct = make_account(5);
  const std::string id = unique("same");
  std::vector<std::future<unsigned>> answers;
  for (int i = 0; i < 10; ++i) {
    answers.push_back(std::async(std::launch::async, [&] {
      HttpClient c(server_->port(), kAdminKey);
      return c.post("/v1/jobs", json::object{{"client_request_id", id}, {"account_id", acct}, {"cost", 1},
                                             {"provider", "imagegen"}, {"input", "x"}})
          .status;
    }));
  }
  int created = 0, replayed = 0;
  for (auto& a : answers) {
    const unsigned s = a.get();
    created += s == 202;
    replayed += s == 200;
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(replayed, 9);
  EXPECT_EQ(jstr(wait_ended(id), "status"), "completed");
  EXPECT_EQ(normal_->outcome_of(id)->posts, 1u);
  EXPECT_EQ(jint(account(acct), "used"), 1);
  // Other parameters under the same id: refused, nothing changes.
  const HttpResponse other = submit(acct, "imagegen", id, 2);
  EXPECT_TRUE(is_problem(other, 422, "idempotency_mismatch")) << other;
}

TEST_F(HttpJobs, NotEnoughCreditsIsRefusedAndMakesNoJob) {
  const std::string acct = make_account(1);
  const std::string id = unique("poor");
  const HttpResponse r = submit(acct, "imagegen", id, 2);
  EXPECT_TRUE(is_problem(r, 409, "insufficient_credits")) << r;
  EXPECT_TRUE(is_problem(admin_->get("/v1/jobs/" + id), 404, "not_found"));
  EXPECT_FALSE(normal_->outcome_of(id).has_value());
}

TEST_F(HttpJobs, A4xxFailsTheJobAndReleasesTheHold) {
  const std::string acct = make_account(3);
  const std::string id = unique("refused");
  ASSERT_EQ(submit(acct, "refusing", id, 2).status, 202u);
  const json::object job = wait_ended(id);
  EXPECT_EQ(jstr(job, "status"), "failed");
  EXPECT_FALSE(job.at("charged").as_bool());
  EXPECT_EQ(jint(account(acct), "available"), 3);
  EXPECT_EQ(jint(account(acct), "used"), 0);
}

TEST_F(HttpJobs, ALostAnswerIsSettledThroughTheStatusUrlAndChargedOnce) {
  const std::string acct = make_account(3);
  const std::string id = unique("lost");
  ASSERT_EQ(submit(acct, "lossy", id).status, 202u);
  const json::object job = wait_ended(id);
  EXPECT_EQ(jstr(job, "status"), "completed") << job;
  EXPECT_TRUE(job.at("charged").as_bool());
  EXPECT_EQ(jint(job, "attempts"), 1);  // asked, never sent again
  EXPECT_EQ(lossy_->outcome_of(id)->posts, 1u);
  EXPECT_EQ(jint(account(acct), "used"), 1);
  const auto kinds = history_kinds(id);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "answer"), kinds.end());  // the 500 is in the story
}

TEST_F(HttpJobs, WithoutAStatusUrlA5xxIsSentAgainWithTheSameKeyAndChargedOnce) {
  const std::string acct = make_account(3);
  const std::string id = unique("resent");
  ASSERT_EQ(submit(acct, "lossy-nostatus", id).status, 202u);
  const json::object job = wait_ended(id);
  EXPECT_EQ(jstr(job, "status"), "completed") << job;
  EXPECT_EQ(jint(job, "attempts"), 2);
  const auto outcome = lossy_->outcome_of(id);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->posts, 2u);  // the same key twice; the work once
  EXPECT_EQ(jint(account(acct), "used"), 1);
}

TEST_F(HttpJobs, WithoutAStatusUrlAProviderThatNeverAnswersFailsAfterMaxAttemptsAndReleases) {
  const std::string acct = make_account(3);
  const std::string id = unique("down");
  ASSERT_EQ(submit(acct, "down", id, 2).status, 202u);
  const json::object job = wait_ended(id);
  EXPECT_EQ(jstr(job, "status"), "failed");
  EXPECT_EQ(jint(job, "attempts"), 3);
  EXPECT_FALSE(job.at("charged").as_bool());
  EXPECT_EQ(jint(account(acct), "available"), 3);
}

TEST_F(HttpJobs, WaitMsAnswersWhenTheJobEndsNotAtTheDeadline) {
  const std::string acct = make_account(3);
  const std::string id = unique("wait");
  ASSERT_EQ(submit(acct, "slow", id).status, 202u);
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse r = admin_->get("/v1/jobs/" + id + "?wait_ms=30000");
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(jstr(r.object(), "status"), "completed");
  EXPECT_GE(waited, std::chrono::milliseconds(1000));  // it did wait for the provider (1.5 s)
  EXPECT_LT(waited, std::chrono::seconds(15));         // and answered when it ended
}

TEST_F(HttpJobs, CancelDuringTheCallReleasesTheHoldAndNothingIsCharged) {
  const std::string acct = make_account(3);
  const std::string id = unique("cancel");
  ASSERT_EQ(submit(acct, "slow", id, 2).status, 202u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const HttpResponse r = admin_->post("/v1/jobs/" + id + "/cancel", json::object{});
  ASSERT_EQ(r.status, 200u) << r;
  EXPECT_EQ(jstr(r.object(), "status"), "cancelled");
  EXPECT_EQ(jint(account(acct), "available"), 3);
  // Cancelling again answers the job as it is; so does a later read.
  EXPECT_EQ(jstr(admin_->post("/v1/jobs/" + id + "/cancel", json::object{}).object(), "status"), "cancelled");
  std::this_thread::sleep_for(std::chrono::milliseconds(1600));  // past the provider's answer
  EXPECT_EQ(jint(account(acct), "used"), 0);
  EXPECT_EQ(jstr(admin_->get("/v1/jobs/" + id).object(), "status"), "cancelled");
}

TEST_F(HttpJobs, BadInputIsRefusedByNameAndChangesNothing) {
  const std::string acct = make_account(3);
  const json::object before = account(acct);
  struct Case {
    json::object body;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{{"account_id", acct}, {"cost", 1}, {"provider", "imagegen"}, {"input", 1}}, "client_request_id"},
      {{{"client_request_id", "x1"}, {"account_id", acct}, {"cost", 0}, {"provider", "imagegen"}, {"input", 1}}, "cost"},
      {{{"client_request_id", "x2"}, {"account_id", acct}, {"cost", "1"}, {"provider", "imagegen"}, {"input", 1}}, "cost"},
      {{{"client_request_id", "x3"}, {"account_id", acct}, {"cost", 1}, {"provider", "nope"}, {"input", 1}}, "nope"},
      {{{"client_request_id", "x4"}, {"account_id", acct}, {"cost", 1}, {"provider", "imagegen"}}, "input"},
      {{{"client_request_id", "x5"}, {"account_id", acct}, {"cost", 1}, {"provider", "imagegen"}, {"input", 1},
        {"priority", 1}},
       "priority"},
  };
  for (const Case& c : cases) {
    const HttpResponse r = admin_->post("/v1/jobs", c.body);
    EXPECT_TRUE(is_problem(r, 400, "invalid_request")) << r;
    EXPECT_NE(jstr(r.object(), "detail").find(c.names), std::string::npos) << r;
  }
  EXPECT_TRUE(is_problem(admin_->post("/v1/jobs", std::string("{not json")), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin_->get("/v1/jobs/unknown-job"), 404, "not_found"));
  EXPECT_TRUE(is_problem(admin_->get("/v1/jobs/x?wait_ms=60001"), 400, "invalid_request"));
  EXPECT_TRUE(is_problem(admin_->get("/v1/jobs?status=done"), 400, "invalid_request"));
  EXPECT_EQ(account(acct), before);
}

TEST_F(HttpJobs, AnAccountKeySeesOnlyItsOwnJobs) {
  const std::string mine = make_account(3);
  const std::string theirs = make_account(3);
  const HttpResponse key = admin_->post("/v1/accounts/" + mine + "/keys", json::object{});
  ASSERT_EQ(key.status, 201u) << key;
  HttpClient kiosk(server_->port(), jstr(key.object(), "secret"));
  const std::string their_job = unique("theirs");
  ASSERT_EQ(submit(theirs, "imagegen", their_job).status, 202u);
  EXPECT_TRUE(is_problem(kiosk.get("/v1/jobs/" + their_job), 404, "not_found"));
  EXPECT_TRUE(is_problem(kiosk.post("/v1/jobs/" + their_job + "/cancel", json::object{}), 404, "not_found"));
  EXPECT_TRUE(is_problem(kiosk.get("/v1/jobs/" + their_job + "/history"), 404, "not_found"));
  const std::string my_job = unique("mine");
  const HttpResponse r = kiosk.post("/v1/jobs", json::object{{"client_request_id", my_job}, {"account_id", mine},
                                                             {"cost", 1}, {"provider", "imagegen"}, {"input", 1}});
  ASSERT_EQ(r.status, 202u) << r;
  const HttpResponse listed = kiosk.get("/v1/jobs");
  ASSERT_EQ(listed.status, 200u) << listed;
  ASSERT_EQ(listed.object().at("jobs").as_array().size(), 1u);
  EXPECT_EQ(listed.object().at("jobs").as_array()[0].as_object().at("client_request_id").as_string(), my_job);
  wait_ended(their_job);
  wait_ended(my_job);
}

TEST_F(HttpJobs, AKilledServerRestartedSettlesItsRunningJobWithTheProvider) {
  const std::string acct = make_account(3);
  const std::string id = unique("crash");
  ASSERT_EQ(submit(acct, "slow", id, 2).status, 202u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the request is at the provider
  EXPECT_EQ(server_->stop(SIGKILL), 128 + SIGKILL);
  server_->restart();
  ASSERT_EQ(wait_until_ready(server_->port()).status, 200u) << server_->log();
  admin_->set_port(server_->port());
  const json::object job = wait_ended(id, std::chrono::seconds(30));
  const auto outcome = slow_->outcome_of(id);
  ASSERT_TRUE(outcome.has_value());
  // The provider did the work (it was received): the job is completed and charged once.
  EXPECT_EQ(outcome->state, jobs::FakeOutcome::State::completed);
  EXPECT_EQ(jstr(job, "status"), "completed") << job;
  EXPECT_TRUE(job.at("charged").as_bool());
  EXPECT_EQ(jint(account(acct), "used"), 2);
  EXPECT_EQ(outcome->posts, 1u);  // asked about, never sent again
  const auto kinds = history_kinds(id);
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "claimed"), kinds.end());
}

// A late result after the hold expired, under each late-commit policy: its own server with a 1-s
// hold TTL and a provider that answers after 1.5 s.
TEST(HttpJobsLate, AResultAfterTheHoldExpiredFollowsEachLateCommitPolicy) {
  FakeProvider slow(fake_options(1500, 1500, 9));
  struct Case {
    const char* policy;
    const char* status;
    bool charged;
    std::int64_t used;
  };
  for (const Case& c : {Case{"charge", "completed", true, 1}, Case{"forgive", "completed", false, 0},
                        Case{"reject", "failed", false, 0}}) {
    SCOPED_TRACE(c.policy);
    testing::TempDir dir;
    std::string toml = std::string("hold_ttl_ms = 1000\nreaper_interval_ms = 100\nlate_commit = \"") + c.policy + "\"\n";
    toml += provider_toml("slow", slow.base_url(), true, 3000, 300);
    ServerOptions options = server_options();
    options.extra_args = {"--config", write_config(dir, toml)};
    ServerProcess server(options);
    HttpClient admin(server.port(), kAdminKey);
    ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "a"}}).status, 201u);
    ASSERT_EQ(admin.post("/v1/accounts/a/credits", json::object{{"amount", 1}, {"reference", "r"}}).status, 201u);
    const std::string id = std::string("late-") + c.policy;
    ASSERT_EQ(admin.post("/v1/jobs", json::object{{"client_request_id", id}, {"account_id", "a"}, {"cost", 1},
                                                  {"provider", "slow"}, {"input", 1}})
                  .status,
              202u);
    HttpResponse r;
    for (int i = 0; i < 20; ++i) {
      r = admin.get("/v1/jobs/" + id + "?wait_ms=2000");
      const std::string s = jstr(r.object(), "status");
      if (s == "completed" || s == "failed") break;
    }
    EXPECT_EQ(jstr(r.object(), "status"), c.status) << r;
    EXPECT_EQ(r.object().at("charged").as_bool(), c.charged) << r;
    EXPECT_TRUE(r.object().contains("result")) << r;  // kept, charged or not
    const HttpResponse acct = admin.get("/v1/accounts/a");
    EXPECT_EQ(jint(acct.object(), "used"), c.used) << acct;
    const HttpResponse audit = admin.get("/v1/audit");
    EXPECT_TRUE(audit.object().at("violations").as_array().empty()) << audit;
  }
}

// Three instances on one PostgreSQL database share the jobs; one is killed in the middle of its
// calls, and the other two finish them — each charged exactly when the provider did the work.
TEST(HttpJobsInstances, TwoInstancesFinishTheJobsOfAThirdThatWasKilled) {
  REQUIRE_POSTGRES(server_uri);
  testing::PgSchema schema(server_uri);
  FakeProvider slow(fake_options(1500, 1500, 11));
  testing::TempDir dir;
  const std::string config = write_config(dir, provider_toml("slow", slow.base_url(), true, 1000, 333));
  std::vector<std::unique_ptr<ServerProcess>> instances;
  for (int i = 0; i < 3; ++i) {
    ServerOptions options = server_options();
    options.database = schema.uri();
    options.extra_args = {"--config", config};
    instances.push_back(std::make_unique<ServerProcess>(options));
  }
  HttpClient admin0(instances[0]->port(), kAdminKey);
  ASSERT_EQ(admin0.post("/v1/accounts", json::object{{"account_id", "shared"}}).status, 201u);
  ASSERT_EQ(admin0.post("/v1/accounts/shared/credits", json::object{{"amount", 100}, {"reference", "r"}}).status, 201u);
  std::vector<std::string> ids;
  for (int i = 0; i < 9; ++i) {
    HttpClient c(instances[static_cast<std::size_t>(i % 3)]->port(), kAdminKey);
    ids.push_back("shared-job-" + std::to_string(i));
    ASSERT_EQ(c.post("/v1/jobs", json::object{{"client_request_id", ids.back()}, {"account_id", "shared"}, {"cost", 1},
                                              {"provider", "slow"}, {"input", i}})
                  .status,
              202u);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(instances[0]->stop(SIGKILL), 128 + SIGKILL);  // its three jobs are at the provider
  HttpClient admin1(instances[1]->port(), kAdminKey);
  std::int64_t charged = 0;
  for (const std::string& id : ids) {
    HttpResponse r;
    for (int i = 0; i < 20; ++i) {
      r = admin1.get("/v1/jobs/" + id + "?wait_ms=2000");
      const std::string s = jstr(r.object(), "status");
      if (s == "completed" || s == "failed" || s == "cancelled") break;
    }
    const auto outcome = slow.outcome_of(id);
    ASSERT_TRUE(outcome.has_value()) << id;
    EXPECT_EQ(jstr(r.object(), "status"), "completed") << id << ": " << r;
    EXPECT_EQ(outcome->state, jobs::FakeOutcome::State::completed) << id;
    EXPECT_EQ(outcome->posts, 1u) << id;
    charged += r.object().at("charged").as_bool() ? 1 : 0;
  }
  EXPECT_EQ(charged, 9);
  const HttpResponse acct = admin1.get("/v1/accounts/shared");
  EXPECT_EQ(jint(acct.object(), "used"), 9) << acct;
  EXPECT_TRUE(admin1.get("/v1/audit").object().at("violations").as_array().empty());
}

}  // namespace
}  // namespace tollgate::httptest
