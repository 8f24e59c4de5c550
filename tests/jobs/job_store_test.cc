// The job conformance suite: what every store backend does with jobs — a job and its hold made in
// one batch, claimed with a lease, ended exactly once together with its hold, its history, the
// list and the jobs recovery must claim — written only against the Ledger and jobs::JobReads, and
// run on every backend (a real SQLite file; a real PostgreSQL schema in CI).
//
// Time is a ManualClock; the reaper thread is off. After every test the audit must be clean.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "slices.h"
#include "ledger/ledger.h"
#include "store/store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using jobs::Job;
using jobs::JobStatus;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::int64_t kTtl = 60'000;
constexpr std::int64_t kLease = 10'000;

#define ASSERT_OK(r) ASSERT_TRUE((r).ok()) << (r).error().detail
#define EXPECT_CODE(r, c) EXPECT_EQ(code_name((r).code()), code_name(c))

class JobStoreConformance : public ::testing::TestWithParam<testing::StoreBackend> {
 protected:
  void SetUp() override {
    store_ = GetParam().open_fresh(clock_);
    ASSERT_NE(store_, nullptr);
    start_ledger(LateCommitPolicy::charge);
    ASSERT_OK(ledger_->create_account({"kiosk", 0, std::nullopt}));
    ASSERT_OK(ledger_->credit({"kiosk", 10, "purchase-1"}));
  }

  void TearDown() override {
    if (!store_) return;
    auto report = store_->audit(std::nullopt);
    ASSERT_OK(report);
    for (const auto& v : report->violations) ADD_FAILURE() << v.account_id << ": " << v.message;
    ledger_.reset();
    store_.reset();
  }

  void start_ledger(LateCommitPolicy policy) {
    ledger_.reset();
    LedgerOptions options;
    options.reaper_interval_ms = 0;
    options.late_commit = policy;
    ledger_ = std::make_unique<Ledger>(*store_, clock_, options);
  }

  static SubmitJobCommand submit(const std::string& id, std::int64_t cost = 3, const std::string& input = R"({"prompt":"a cat"})") {
    SubmitJobCommand c;
    c.client_request_id = id;
    c.account_id = "kiosk";
    c.cost = cost;
    c.provider = "imagegen";
    c.input_json = input;
    c.ttl_ms = kTtl;
    c.owner = "instance-a";
    c.lease_ms = kLease;
    return c;
  }

  Job submitted(const std::string& id, std::int64_t cost = 3) {
    auto r = ledger_->submit_job(submit(id, cost));
    EXPECT_TRUE(r.ok()) << r.error().detail;
    if (!r.ok()) return Job{};
    EXPECT_TRUE(r->created);
    return r->job;
  }

  Result<JobOutcome> claim(const Job& j, const std::string& owner, bool attempt = true, std::string note = "") {
    return ledger_->claim_job({j.client_request_id, j.hold_id, owner, kLease, attempt, std::move(note)});
  }

  Result<JobOutcome> end(const Job& j, JobStatus status, std::optional<std::string> result = std::nullopt,
                         jobs::EndedBy by = jobs::EndedBy::provider) {
    EndJobCommand c;
    c.client_request_id = j.client_request_id;
    c.hold_id = j.hold_id;
    c.end = status;
    c.result_json = std::move(result);
    if (status == JobStatus::failed) c.error = "the provider refused: 422";
    c.by = by;
    return ledger_->end_job(std::move(c));
  }

  Job job(const std::string& id) {
    auto r = ledger_->get_job(id);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? *r : Job{};
  }
  Hold hold_of(const Job& j) {
    auto r = ledger_->get_hold(j.hold_id);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    return r.ok() ? *r : Hold{};
  }
  Balances balances() {
    auto r = ledger_->get_account("kiosk");
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->balances : Balances{};
  }
  std::vector<std::string> history_kinds(const std::string& id) {
    auto r = ledger_->job_history(id);
    EXPECT_TRUE(r.ok()) << r.error().detail;
    std::vector<std::string> out;
    if (r.ok()) {
      for (const auto& e : *r) out.push_back(e.kind);
    }
    return out;
  }
  std::vector<Event> events() {
    auto r = ledger_->read_events("kiosk", 0, 1000);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->events : std::vector<Event>{};
  }
  std::vector<std::string> listed(const jobs::JobQuery& q, std::int64_t limit = 100,
                                  std::optional<std::string> after = std::nullopt) {
    auto r = ledger_->list_jobs(q, PageRequest{limit, after});
    EXPECT_TRUE(r.ok()) << r.error().detail;
    std::vector<std::string> out;
    if (r.ok()) {
      for (const Job& j : r->items) out.push_back(j.client_request_id);
    }
    return out;
  }

  ManualClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Ledger> ledger_;
};

TEST_P(JobStoreConformance, SubmitMakesAPendingJobAndItsHoldTogether) {
  const Job j = submitted("gen-1");
  EXPECT_EQ(j.status, JobStatus::pending);
  EXPECT_EQ(j.account_id, "kiosk");
  EXPECT_EQ(j.cost, 3);
  EXPECT_EQ(j.attempts, 0);
  EXPECT_FALSE(j.charged);
  EXPECT_EQ(j.lease_owner, "instance-a");
  EXPECT_EQ(job("gen-1"), j);
  const Hold h = hold_of(j);
  EXPECT_EQ(h.request_id, "job:gen-1");
  EXPECT_EQ(h.amount, 3);
  EXPECT_EQ(h.status, HoldStatus::active);
  EXPECT_EQ(h.expires_at_ms, clock_.now_ms() + kTtl);
  EXPECT_EQ(balances().available, 7);
  EXPECT_EQ(balances().reserved, 3);
  const auto ev = events();
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().type, EventType::reserved);
  EXPECT_EQ(ev.back().job_id, "gen-1");
  EXPECT_THAT(history_kinds("gen-1"), ElementsAre("submitted"));
}

TEST_P(JobStoreConformance, SubmittingTheSameJobAgainAnswersItAndReservesNothingMore) {
  const Job j = submitted("gen-1");
  auto again = ledger_->submit_job(submit("gen-1"));
  ASSERT_OK(again);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job, j);
  EXPECT_EQ(balances().reserved, 3);
}

TEST_P(JobStoreConformance, TheSameIdWithOtherParametersIsAMismatchAndChangesNothing) {
  submitted("gen-1");
  const auto before = events();
  EXPECT_CODE(ledger_->submit_job(submit("gen-1", 4)), Code::idempotency_mismatch);
  EXPECT_CODE(ledger_->submit_job(submit("gen-1", 3, R"({"prompt":"a dog"})")), Code::idempotency_mismatch);
  EXPECT_EQ(events(), before);
  EXPECT_EQ(balances().reserved, 3);
}

TEST_P(JobStoreConformance, NotEnoughCreditsMakesNoJobAndNoHold) {
  auto r = ledger_->submit_job(submit("too-big", 11));
  EXPECT_CODE(r, Code::insufficient_credits);
  EXPECT_CODE(ledger_->get_job("too-big"), Code::not_found);
  auto holds = ledger_->list_holds(HoldQuery{std::nullopt, std::nullopt, "job:too-big"}, PageRequest{});
  ASSERT_OK(holds);
  EXPECT_THAT(holds->items, IsEmpty());
  EXPECT_EQ(balances().available, 10);
}

TEST_P(JobStoreConformance, TenSubmitsOfOneIdAtOnceMakeOneJobAndOneHold) {
  std::vector<std::optional<CommandResult>> results(10);
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i) {
    threads.emplace_back([&, i] { results[static_cast<std::size_t>(i)] = ledger_->run(submit("same")); });
  }
  for (auto& t : threads) t.join();
  int created = 0;
  for (auto& r : results) {
    ASSERT_TRUE(r && r->ok()) << (r ? r->error().detail : "no result");
    created += std::get<JobOutcome>(r->value()).created ? 1 : 0;
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(balances().reserved, 3);
  EXPECT_THAT(listed({}), ElementsAre("same"));
}

TEST_P(JobStoreConformance, ClaimStartsTheJobCountsAttemptsAndHoldsTheLeaseAgainstOthers) {
  const Job j = submitted("gen-1");
  auto first = claim(j, "instance-a");
  ASSERT_OK(first);
  EXPECT_EQ(first->job.status, JobStatus::running);
  EXPECT_EQ(first->job.attempts, 1);
  EXPECT_EQ(first->job.lease_expires_at_ms, clock_.now_ms() + kLease);
  auto stolen = claim(j, "instance-b");
  EXPECT_CODE(stolen, Code::conflict);
  EXPECT_THAT(stolen.error().detail, HasSubstr("leased by instance-a"));
  auto second = claim(j, "instance-a", true, "answered 503: unknown");
  ASSERT_OK(second);
  EXPECT_EQ(second->job.attempts, 2);
  EXPECT_THAT(history_kinds("gen-1"), ElementsAre("submitted", "running", "attempt", "answer", "attempt"));
}

TEST_P(JobStoreConformance, AnotherInstanceClaimsARunningJobOnlyOnceItsLeaseExpired) {
  const Job j = submitted("gen-1");
  ASSERT_OK(claim(j, "instance-a"));
  clock_.advance_ms(kLease);
  auto r = ledger_->jobs_to_recover(10);
  ASSERT_OK(r);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(r->front().client_request_id, "gen-1");
  auto taken = claim(j, "instance-b", false);
  ASSERT_OK(taken);
  EXPECT_EQ(taken->job.status, JobStatus::running);
  EXPECT_EQ(taken->job.lease_owner, "instance-b");
  EXPECT_EQ(taken->job.attempts, 1);  // recovery asks before it sends again
  EXPECT_THAT(history_kinds("gen-1"), ElementsAre("submitted", "running", "attempt", "claimed"));
  auto again = ledger_->jobs_to_recover(10);
  ASSERT_OK(again);
  EXPECT_THAT(*again, IsEmpty());
}

TEST_P(JobStoreConformance, CompletingCommitsTheHoldInTheSameBatchAndAJobEndsOnce) {
  const Job j = submitted("gen-1");
  ASSERT_OK(claim(j, "instance-a"));
  auto done = end(j, JobStatus::completed, R"({"image_url":"https://fake/gen-1.png"})");
  ASSERT_OK(done);
  EXPECT_TRUE(done->created);
  EXPECT_EQ(done->job.status, JobStatus::completed);
  EXPECT_TRUE(done->job.charged);
  EXPECT_EQ(done->job.result_json, R"({"image_url":"https://fake/gen-1.png"})");
  EXPECT_FALSE(done->job.lease_owner.has_value());
  EXPECT_EQ(hold_of(j).status, HoldStatus::committed);
  EXPECT_EQ(balances().used, 3);
  EXPECT_EQ(balances().available, 7);
  EXPECT_EQ(events().back().type, EventType::committed);
  EXPECT_EQ(events().back().job_id, "gen-1");
  // Whatever races for it afterwards changes nothing.
  const auto before = events();
  for (JobStatus s : {JobStatus::completed, JobStatus::failed, JobStatus::cancelled}) {
    auto again = end(j, s, s == JobStatus::completed ? std::optional<std::string>("{}") : std::nullopt);
    ASSERT_OK(again);
    EXPECT_FALSE(again->created);
    EXPECT_EQ(again->job, done->job);
  }
  EXPECT_CODE(claim(j, "instance-b"), Code::conflict);
  EXPECT_EQ(events(), before);
  EXPECT_EQ(balances().used, 3);
}

TEST_P(JobStoreConformance, FailingReleasesTheHold) {
  const Job j = submitted("gen-1");
  ASSERT_OK(claim(j, "instance-a"));
  auto failed = end(j, JobStatus::failed);
  ASSERT_OK(failed);
  EXPECT_EQ(failed->job.status, JobStatus::failed);
  EXPECT_EQ(failed->job.error, "the provider refused: 422");
  EXPECT_FALSE(failed->job.charged);
  EXPECT_EQ(hold_of(j).status, HoldStatus::released);
  EXPECT_EQ(balances().available, 10);
  EXPECT_EQ(events().back().type, EventType::released);
  EXPECT_EQ(events().back().job_id, "gen-1");
}

TEST_P(JobStoreConformance, AResultAfterACancelIsRecordedAndChargesNothing) {
  const Job j = submitted("gen-1");
  ASSERT_OK(claim(j, "instance-a"));
  auto cancelled = end(j, JobStatus::cancelled, std::nullopt, jobs::EndedBy::client);
  ASSERT_OK(cancelled);
  EXPECT_EQ(cancelled->job.status, JobStatus::cancelled);
  EXPECT_EQ(hold_of(j).status, HoldStatus::released);
  auto late = end(j, JobStatus::completed, R"({"image_url":"x"})");
  ASSERT_OK(late);
  EXPECT_EQ(late->job.status, JobStatus::cancelled);
  EXPECT_EQ(late->job.result_json, R"({"image_url":"x"})");
  EXPECT_FALSE(late->job.charged);
  EXPECT_EQ(balances().available, 10);
  EXPECT_EQ(balances().used, 0);
  EXPECT_THAT(history_kinds("gen-1"),
              ElementsAre("submitted", "running", "attempt", "cancelled", "late_result"));
}

TEST_P(JobStoreConformance, AResultAfterTheHoldExpiredFollowsTheLateCommitPolicy) {
  struct Case {
    LateCommitPolicy policy;
    JobStatus status;
    bool charged;
    EventType last_event;
  };
  const Case cases[] = {{LateCommitPolicy::charge, JobStatus::completed, true, EventType::late_charged},
                        {LateCommitPolicy::forgive, JobStatus::completed, false, EventType::late_forgiven},
                        {LateCommitPolicy::reject, JobStatus::failed, false, EventType::expired}};
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.policy));
    start_ledger(c.policy);
    const Job j = submitted("late-" + std::to_string(++n), 1);
    ASSERT_OK(claim(j, "instance-a"));
    clock_.advance_ms(kTtl + 1);
    auto r = end(j, JobStatus::completed, R"({"image_url":"late"})");
    ASSERT_OK(r);
    EXPECT_EQ(r->job.status, c.status);
    EXPECT_EQ(r->job.charged, c.charged);
    EXPECT_EQ(r->job.result_json, R"({"image_url":"late"})");
    EXPECT_EQ(hold_of(j).status, HoldStatus::expired);
    EXPECT_EQ(events().back().type, c.last_event);
    EXPECT_EQ(events().back().job_id, j.client_request_id);
  }
  EXPECT_EQ(balances().used, 1);  // only the charged one
}

TEST_P(JobStoreConformance, APendingJobWhoseHoldExpiredFailsWhenClaimedAndIsNeverSent) {
  const Job j = submitted("gen-1");
  clock_.advance_ms(kTtl + 1);
  auto r = claim(j, "instance-b");
  ASSERT_OK(r);
  EXPECT_EQ(r->job.status, JobStatus::failed);
  EXPECT_EQ(r->job.attempts, 0);
  EXPECT_THAT(*r->job.error, HasSubstr("expired before the job was sent"));
  EXPECT_EQ(hold_of(j).status, HoldStatus::expired);
  EXPECT_EQ(balances().available, 10);
}

TEST_P(JobStoreConformance, TheReapersExpiryOfAJobsHoldNamesTheJob) {
  submitted("gen-1");
  clock_.advance_ms(kTtl + 1);
  ASSERT_OK(ledger_->reap_once());
  EXPECT_EQ(events().back().type, EventType::expired);
  EXPECT_EQ(events().back().job_id, "gen-1");
}

TEST_P(JobStoreConformance, TheHoldsApiCannotEndOrExtendAJobsHoldNorUseTheJobPrefix) {
  const Job j = submitted("gen-1");
  const auto before = events();
  auto commit = ledger_->commit({j.hold_id, std::nullopt, LateCommitPolicy::charge});
  EXPECT_CODE(commit, Code::conflict);
  EXPECT_THAT(commit.error().detail, HasSubstr("belongs to job gen-1"));
  EXPECT_CODE(ledger_->release({j.hold_id, std::nullopt}), Code::conflict);
  EXPECT_CODE(ledger_->extend({j.hold_id, 1000}), Code::conflict);
  auto reserve = ledger_->reserve({"kiosk", 1, "job:sneaky", kTtl, "", ""});
  EXPECT_CODE(reserve, Code::invalid_request);
  EXPECT_EQ(events(), before);
  EXPECT_EQ(hold_of(j).status, HoldStatus::active);
}

TEST_P(JobStoreConformance, ClaimAndEndRefuseUnknownJobsAndAHoldThatIsNotTheJobs) {
  const Job j = submitted("gen-1");
  const Job other = submitted("gen-2");
  EXPECT_CODE(ledger_->claim_job({"nope", j.hold_id, "a", kLease, true, ""}), Code::not_found);
  EXPECT_CODE(ledger_->claim_job({"gen-1", other.hold_id, "a", kLease, true, ""}), Code::conflict);
  Job wrong = j;
  wrong.hold_id = other.hold_id;
  EXPECT_CODE(end(wrong, JobStatus::failed), Code::conflict);
  EXPECT_EQ(job("gen-1").status, JobStatus::pending);
  EXPECT_EQ(job("gen-2").status, JobStatus::pending);
}

TEST_P(JobStoreConformance, ListsNewestFirstByAccountAndStatusWithACursor) {
  ASSERT_OK(ledger_->create_account({"other", 0, std::nullopt}));
  ASSERT_OK(ledger_->credit({"other", 5, "purchase-2"}));
  const Job a = submitted("a", 1);
  submitted("b", 1);
  SubmitJobCommand c = submit("c", 1);
  c.account_id = "other";
  ASSERT_OK(ledger_->submit_job(c));
  ASSERT_OK(claim(a, "instance-a"));
  ASSERT_OK(end(a, JobStatus::failed));
  EXPECT_THAT(listed({}), ElementsAre("c", "b", "a"));
  EXPECT_THAT(listed({"kiosk", std::nullopt}), ElementsAre("b", "a"));
  EXPECT_THAT(listed({std::nullopt, JobStatus::pending}), ElementsAre("c", "b"));
  EXPECT_THAT(listed({"kiosk", JobStatus::failed}), ElementsAre("a"));
  auto page = ledger_->list_jobs({}, PageRequest{2, std::nullopt});
  ASSERT_OK(page);
  EXPECT_TRUE(page->has_more);
  EXPECT_THAT(listed({}, 2, "b"), ElementsAre("a"));
  EXPECT_CODE(ledger_->list_jobs({"kiosk", std::nullopt}, PageRequest{2, "c"}), Code::invalid_request);
  EXPECT_CODE(ledger_->list_jobs({}, PageRequest{2, "nope"}), Code::invalid_request);
  EXPECT_CODE(ledger_->list_jobs({"ghost", std::nullopt}, PageRequest{}), Code::not_found);
  EXPECT_CODE(ledger_->job_history("nope"), Code::not_found);
}

TEST_P(JobStoreConformance, UnendedJobsAreCountedByStatus) {
  const Job a = submitted("a", 1);
  submitted("b", 1);
  const Job c = submitted("c", 1);
  ASSERT_OK(claim(a, "instance-a"));
  ASSERT_OK(claim(c, "instance-a"));
  ASSERT_OK(end(c, JobStatus::failed));
  auto counts = ledger_->count_unended_jobs();
  ASSERT_OK(counts);
  EXPECT_EQ(counts->pending, 1);  // b
  EXPECT_EQ(counts->running, 1);  // a; c ended
}

INSTANTIATE_TEST_SUITE_P(AllBackends, JobStoreConformance, ::testing::ValuesIn(testing::all_backends()),
                         testing::BackendName{});

}  // namespace
}  // namespace tollgate
