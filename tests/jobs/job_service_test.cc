// The jobs use case (jobs/job_service.h) on every backend, without workers: what it refuses, how
// a cancel ends a job (and answers one already ended as it is), and how a wait answers — when the
// job ends, or when its deadline passes. Real stores, real threads (the ledger's and a waiter's).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "core/clock.h"
#include "jobs/job_service.h"
#include "ledger/ledger.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using jobs::Job;
using jobs::JobService;
using jobs::JobStatus;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail

class JobServiceTest : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.events_poll_interval_ms = 20;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
    service_ = std::make_unique<JobService>(*ledger_, nullptr);
    ASSERT_OK(ledger_->create_account({"kiosk", 0, std::nullopt}));
    ASSERT_OK(ledger_->credit({"kiosk", 10, "purchase-1"}));
  }

  void TearDown() override {
    service_.reset();
    ledger_.reset();
    store_.reset();
  }

  // A pending job, made as a worker-less instance of another process would (the ledger directly).
  Job pending(const std::string& id) {
    SubmitJobCommand c;
    c.client_request_id = id;
    c.account_id = "kiosk";
    c.cost = 3;
    c.provider = "imagegen";
    c.input_json = "{}";
    c.ttl_ms = 60'000;
    c.owner = "instance-a";
    c.lease_ms = 10'000;
    auto r = ledger_->submit_job(std::move(c));
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? r->job : Job{};
  }

  Result<JobOutcome> cancel(const Job& job) {
    std::promise<Result<JobOutcome>> answer;
    service_->cancel(job, "cancelled by the test", [&](Result<JobOutcome> r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  }

  // Waits (the service's way) for the job's end, up to `wait_ms`; reads run on a thread of their own.
  Result<Job> wait(const Job& job, std::int64_t after, std::int64_t wait_ms) {
    std::promise<Result<Job>> answer;
    service_->wait_for_end(
        job.client_request_id, after, std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms),
        [](std::function<void()> work) {
          std::thread(std::move(work)).detach();
          return true;
        },
        [&](Result<Job> r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
  std::unique_ptr<JobService> service_;
};

TEST_P(JobServiceTest, ASubmitNamingAProviderThatIsNotConfiguredIsRefusedAtOnceAndWritesNothing) {
  std::optional<Result<JobOutcome>> answer;
  service_->submit({"job-1", "kiosk", 3, "imagegen", "{}"}, [&](Result<JobOutcome> r) { answer = std::move(r); });
  ASSERT_TRUE(answer.has_value()) << "refused on the calling thread, before any batch";
  EXPECT_EQ(answer->code(), Code::invalid_request);
  EXPECT_NE(answer->error().detail.find("provider imagegen is not configured"), std::string::npos);
  EXPECT_EQ(ledger_->get_job("job-1").code(), Code::not_found);
  EXPECT_EQ(ledger_->get_account("kiosk")->balances.reserved, 0);
}

TEST_P(JobServiceTest, ACancelEndsThePendingJobAndReleasesItsHoldAndACancelOfAnEndedJobAnswersItAsItIs) {
  const Job job = pending("job-1");
  EXPECT_EQ(ledger_->get_account("kiosk")->balances.reserved, 3);
  auto cancelled = cancel(job);
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->job.status, JobStatus::cancelled);
  EXPECT_EQ(ledger_->get_account("kiosk")->balances.reserved, 0);
  EXPECT_EQ(ledger_->get_account("kiosk")->balances.available, 10);
  const std::int64_t events = *ledger_->last_event_id();
  auto again = cancel(cancelled->job);
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.status, JobStatus::cancelled);
  EXPECT_EQ(*ledger_->last_event_id(), events) << "answered as it is: nothing written";
}

TEST_P(JobServiceTest, AWaitAnswersTheJobOnceItEndsAndThePendingJobWhenItsDeadlinePasses) {
  const Job job = pending("job-1");
  auto read = service_->read_for_wait("job-1");
  ASSERT_OK(read);
  EXPECT_EQ(read->job.status, JobStatus::pending);
  auto timed_out = wait(job, read->last_event_id, 100);
  ASSERT_OK(timed_out);
  EXPECT_EQ(timed_out->status, JobStatus::pending);

  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(cancel(job).ok());
  });
  const auto started = std::chrono::steady_clock::now();
  auto ended = wait(job, read->last_event_id, 20'000);
  canceller.join();
  ASSERT_OK(ended);
  EXPECT_EQ(ended->status, JobStatus::cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10)) << "woken by the end, not the deadline";
}

INSTANTIATE_TEST_SUITE_P(Backends, JobServiceTest, ::testing::ValuesIn(testing::all_backends()), testing::BackendName());

}  // namespace
}  // namespace tollgate
