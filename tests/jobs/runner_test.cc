// The job runner (jobs/runner.h) against an in-process Provider (jobs/provider.h): answers that are
// hard to produce over HTTP at a chosen moment — a status URL that says "unknown", a send refused
// before anything was sent and then accepted, a status that never resolves while the lease would
// have ended long ago. Real stores (every backend), the real ledger, the real runner and its timers;
// only the provider is a fake, scripted per test. The HTTP provider is tested end to end elsewhere
// (fake_provider_test.cc, http/jobs_api_test.cc).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/limits.h"
#include "jobs/job_service.h"
#include "jobs/provider.h"
#include "jobs/runner.h"
#include "ledger/ledger.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using jobs::CallHandle;
using jobs::Exchange;
using jobs::Job;
using jobs::JobStatus;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail

Exchange answered(unsigned status, std::string body) { return Exchange{Exchange::Kind::answered, status, std::move(body)}; }

// A Provider in process. Each send answers the next scripted send answer, each status question the
// next scripted status answer (or `status_otherwise` once the script is used up); a send with none
// left never answers until cancelled. Answers come on the fake's own thread after `answer_delay`,
// never inside the call. Records every call's job id. At most kPendingMax calls wait at once.
class ScriptedProvider final : public jobs::Provider {
 public:
  static constexpr std::size_t kPendingMax = 64;
  std::chrono::milliseconds answer_delay{5};
  std::optional<Exchange> status_otherwise;

  ScriptedProvider() : thread_([this] { loop(); }) {}
  ~ScriptedProvider() override {  // after the runner stopped: nothing is waiting any more
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  void script_send(Exchange e) {
    std::lock_guard lock(mu_);
    sends_script_.push_back(std::move(e));
  }
  void script_status(Exchange e) {
    std::lock_guard lock(mu_);
    status_script_.push_back(std::move(e));
  }
  std::vector<std::string> sends() const {
    std::lock_guard lock(mu_);
    return sends_;
  }
  std::vector<std::string> questions() const {
    std::lock_guard lock(mu_);
    return questions_;
  }

  std::shared_ptr<CallHandle> send_job(const ProviderConfig&, std::string_view client_request_id,
                                       std::string_view input_json, Done done) override {
    std::lock_guard lock(mu_);
    EXPECT_EQ(input_json, R"({"prompt":"a cat"})");
    sends_.emplace_back(client_request_id);
    std::optional<Exchange> answer;
    if (!sends_script_.empty()) {
      answer = std::move(sends_script_.front());
      sends_script_.pop_front();
    }
    return add(std::move(answer), std::move(done));
  }

  std::shared_ptr<CallHandle> ask_status(const ProviderConfig& provider, std::string_view client_request_id,
                                         Done done) override {
    std::lock_guard lock(mu_);
    EXPECT_TRUE(provider.status_url.has_value());  // the runner asks only a provider that has one
    questions_.emplace_back(client_request_id);
    std::optional<Exchange> answer = status_otherwise;
    if (!status_script_.empty()) {
      answer = std::move(status_script_.front());
      status_script_.pop_front();
    }
    return add(std::move(answer), std::move(done));
  }

  std::size_t in_flight() const override {
    std::lock_guard lock(mu_);
    return pending_.size() + answering_;
  }

 private:
  struct Pending {
    Done done;
    std::optional<Exchange> answer;  // nullopt: answers only when cancelled
    std::chrono::steady_clock::time_point due;
  };
  class Call final : public CallHandle {
   public:
    Call(ScriptedProvider& fake, std::weak_ptr<Pending> pending) : fake_(fake), pending_(std::move(pending)) {}
    void cancel() override {
      auto p = pending_.lock();
      if (!p) return;  // answered already
      {
        std::lock_guard lock(fake_.mu_);
        p->answer = Exchange{Exchange::Kind::connection_lost, 0, "cancelled"};
        p->due = std::chrono::steady_clock::now();
      }
      fake_.wake_.notify_all();
    }

   private:
    ScriptedProvider& fake_;
    std::weak_ptr<Pending> pending_;
  };

  // Under mu_.
  std::shared_ptr<CallHandle> add(std::optional<Exchange> answer, Done done) {
    EXPECT_LT(pending_.size(), kPendingMax);
    auto p = std::make_shared<Pending>(Pending{std::move(done), std::move(answer), std::chrono::steady_clock::now() + answer_delay});
    pending_.push_back(p);
    wake_.notify_all();
    return std::make_shared<Call>(*this, p);
  }

  void loop() {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      auto now = std::chrono::steady_clock::now();
      auto next = now + std::chrono::milliseconds(50);
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (!(*it)->answer) continue;
        if ((*it)->due <= now) {
          std::shared_ptr<Pending> p = std::move(*it);
          pending_.erase(it);
          ++answering_;
          lock.unlock();
          p->done(std::move(*p->answer));
          lock.lock();
          --answering_;
          next = now;  // look again at once
          break;
        }
        next = std::min(next, (*it)->due);
      }
      wake_.wait_until(lock, next);
    }
  }

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Exchange> sends_script_, status_script_;  // guarded by mu_
  std::vector<std::string> sends_, questions_;         // guarded by mu_
  std::deque<std::shared_ptr<Pending>> pending_;        // guarded by mu_
  std::size_t answering_ = 0;                           // guarded by mu_: a `done` running now
  bool stopping_ = false;                               // guarded by mu_
  std::thread thread_;                                  // last: started when the rest exists
};

class JobRunnerTest : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.events_poll_interval_ms = 20;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
    ASSERT_OK(ledger_->create_account({"kiosk", 0, std::nullopt}));
    ASSERT_OK(ledger_->credit({"kiosk", 10, "purchase-1"}));
  }

  void TearDown() override {
    for (auto& r : runners_) r->stop();  // while the ledger runs: hands their jobs back
    if (ledger_) ledger_->stop();
    services_.clear();
    runners_.clear();
    ledger_.reset();
    store_.reset();
  }

  static ProviderConfig config(bool status_url) {
    ProviderConfig p;
    p.url = "inproc://fake/generate";
    if (status_url) p.status_url = "inproc://fake/status/{id}";
    p.timeout_ms = 10'000;
    p.expected_duration_ms = 50;  // status questions at most 50 ms apart
    p.max_attempts = 3;
    return p;
  }

  // A runner (and the service that starts its jobs) over `provider` (one of the fixture's: they
  // outlive the runners).
  jobs::JobRunner& runner(jobs::Provider& provider, bool status_url, std::string instance) {
    jobs::JobRunnerOptions o;
    o.instance_id = std::move(instance);
    o.providers.emplace("fake", config(status_url));
    o.recovery_interval_ms = 0;  // recover_once() by hand
    o.seed = 7;
    runners_.push_back(std::make_unique<jobs::JobRunner>(*ledger_, provider, std::move(o)));
    services_.push_back(std::make_unique<jobs::JobService>(*ledger_, runners_.back().get()));
    return *runners_.back();
  }

  Job submit(const std::string& id) {
    std::promise<Result<JobOutcome>> answer;
    services_.back()->submit({id, "kiosk", 3, "fake", R"({"prompt":"a cat"})"},
                             [&](Result<JobOutcome> r) { answer.set_value(std::move(r)); });
    auto r = answer.get_future().get();
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? r->job : Job{};
  }

  // The job once it ended (polled, at most `within`), or as it is then.
  Job ended(const std::string& id, std::chrono::milliseconds within = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    for (;;) {
      auto j = ledger_->get_job(id);
      EXPECT_TRUE(j.ok()) << j.error().detail;
      if (!j.ok() || jobs::is_ended(j->status) || std::chrono::steady_clock::now() >= deadline) return j.ok() ? *j : Job{};
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  Balances balances() {
    auto a = ledger_->get_account("kiosk");
    EXPECT_TRUE(a.ok()) << a.error().detail;
    return a.ok() ? a->balances : Balances{};
  }

  SystemClock clock_;  // leases and hold deadlines in real time: the runner's timers are real
  ScriptedProvider provider_, next_provider_;  // outlive the runners
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
  std::vector<std::unique_ptr<jobs::JobRunner>> runners_;
  std::vector<std::unique_ptr<jobs::JobService>> services_;
};

// Sent, 503 (unknown: it may have been received), so asked; the status URL answers a status it does
// not define — "unknown" — which is no outcome: asked again until "completed". Sent once; charged.
TEST_P(JobRunnerTest, AStatusOfUnknownIsAskedAgainUntilItKnows) {
  ScriptedProvider& provider = provider_;
  provider.script_send(answered(503, "busy"));
  provider.script_status(answered(200, R"({"status":"unknown"})"));
  provider.script_status(answered(200, R"({"status":"unknown"})"));
  provider.script_status(answered(200, R"({"status":"completed","result":{"image":"cat.png"}})"));
  auto& r = runner(provider, /*status_url=*/true, "instance-a");
  submit("gen-1");

  const Job j = ended("gen-1");
  EXPECT_EQ(j.status, JobStatus::completed);
  EXPECT_EQ(j.result_json, std::optional<std::string>(R"({"image":"cat.png"})"));
  EXPECT_EQ(j.attempts, 1);
  EXPECT_EQ(provider.sends(), std::vector<std::string>{"gen-1"});
  EXPECT_EQ(provider.questions(), (std::vector<std::string>{"gen-1", "gen-1", "gen-1"}));
  EXPECT_EQ(r.stats().resends, 0u);
  EXPECT_EQ(balances(), (Balances{7, 0, 3, 10}));
}

// The first send is refused before anything was sent (not_connected: the provider cannot have
// received it); a retryable error, so it is sent again — the same job id, which is the
// Idempotency-Key — and the second send completes it. Two attempts, one charge.
TEST_P(JobRunnerTest, AStartThatFailsBeforeSendingIsSentAgainAndSucceeds) {
  ScriptedProvider& provider = provider_;
  provider.script_send(Exchange{Exchange::Kind::not_connected, 0, "connection refused"});
  provider.script_send(answered(200, R"({"result":{"image":"cat.png"}})"));
  auto& r = runner(provider, /*status_url=*/false, "instance-a");
  submit("gen-2");

  const Job j = ended("gen-2");
  EXPECT_EQ(j.status, JobStatus::completed);
  EXPECT_EQ(j.attempts, 2);
  EXPECT_EQ(provider.sends(), (std::vector<std::string>{"gen-2", "gen-2"}));
  EXPECT_TRUE(provider.questions().empty());
  EXPECT_EQ(r.stats().sends, 2u);
  EXPECT_EQ(r.stats().resends, 1u);
  EXPECT_EQ(r.stats().not_connected, 1u);
  EXPECT_EQ(balances(), (Balances{7, 0, 3, 10}));
}

// The send times out and the status URL answers "running" for ever. The runner keeps asking and
// keeps renewing the lease, far past the lease a claim takes (limits::kJobLeaseMs): no recovery may
// take the job over, and nothing is sent again. Stopped, the runner hands the job back (its lease
// ends now); another instance recovers it, asks — never sends — and completes it.
TEST_P(JobRunnerTest, AStatusThatNeverResolvesKeepsTheLeaseAndIsNeverSentAgain) {
  ScriptedProvider& provider = provider_;
  provider.script_send(Exchange{Exchange::Kind::timed_out, 0, "no answer within 10000 ms"});
  provider.status_otherwise = answered(200, R"({"status":"running"})");
  auto& first = runner(provider, /*status_url=*/true, "instance-a");
  const Job submitted = submit("gen-3");
  ASSERT_TRUE(submitted.lease_expires_at_ms.has_value());

  std::this_thread::sleep_for(std::chrono::milliseconds(limits::kJobLeaseMs + limits::kJobLeaseRenewIntervalMs));
  auto j = ledger_->get_job("gen-3");
  ASSERT_OK(j);
  EXPECT_EQ(j->status, JobStatus::running);
  EXPECT_EQ(j->attempts, 1);
  EXPECT_EQ(j->lease_owner, std::optional<std::string>("instance-a"));
  ASSERT_TRUE(j->lease_expires_at_ms.has_value());
  EXPECT_GT(*j->lease_expires_at_ms, *submitted.lease_expires_at_ms);  // renewed
  EXPECT_GT(*j->lease_expires_at_ms, clock_.now_ms());                 // and not over
  auto to_recover = ledger_->jobs_to_recover(10);
  ASSERT_OK(to_recover);
  EXPECT_TRUE(to_recover->empty());
  EXPECT_EQ(provider.sends().size(), 1u);
  EXPECT_GE(provider.questions().size(), 3u);
  EXPECT_GE(first.stats().lease_renewals, 2u);
  EXPECT_EQ(balances(), (Balances{7, 3, 0, 10}));  // still held

  first.stop();
  EXPECT_EQ(first.stats().handed_back, 1u);
  ScriptedProvider& next_provider = next_provider_;
  next_provider.script_status(answered(200, R"({"status":"completed","result":{"image":"cat.png"}})"));
  auto& second = runner(next_provider, /*status_url=*/true, "instance-b");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the handed-back lease is over
  EXPECT_EQ(second.recover_once(), 1u);
  const Job done = ended("gen-3");
  EXPECT_EQ(done.status, JobStatus::completed);
  EXPECT_EQ(done.attempts, 1);
  EXPECT_TRUE(next_provider.sends().empty());
  EXPECT_EQ(next_provider.questions(), std::vector<std::string>{"gen-3"});
  EXPECT_EQ(provider.sends().size(), 1u);
  EXPECT_EQ(balances(), (Balances{7, 0, 3, 10}));
  second.stop();
}

INSTANTIATE_TEST_SUITE_P(Backends, JobRunnerTest, ::testing::ValuesIn(testing::all_backends()), testing::BackendName());

}  // namespace
}  // namespace tollgate
