// The group committer's promises (ledger/group_commit.h), checked against a store that records what
// happens and when: nobody is answered before a flush that started after their batch committed; a
// lone caller is answered by the writer itself; a failed flush answers `unavailable`; callbacks run
// in batch order; waiting callers are split in two to overlap the flush only when that is faster.
// Real threads; the store's apply() and sync() take the time a test gives them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "ledger/group_commit.h"

namespace tollgate {
namespace {


// A store that only writes: apply() answers every command ok after `apply_time`, sync() after
// `sync_time`; both record when they started and ended, in one sequence (the order of events).
class RecordingStore final : public Store {
 public:
  std::chrono::microseconds apply_time{0};
  std::chrono::microseconds sync_time{0};
  std::atomic<bool> fail_sync{false};

  struct Batch {
    std::size_t size = 0;
    std::uint64_t committed_at = 0;  // sequence number when apply() returned
  };
  struct Sync {
    std::uint64_t started_at = 0, ended_at = 0;
  };

  // Each command's result carries the moment its batch committed (as ExpireOutcome::expired).
  Status apply(std::span<const Command> commands, std::vector<CommandResult>& results) override {
    std::this_thread::sleep_for(apply_time);
    std::lock_guard lock(mu_);
    const std::uint64_t committed_at = ++seq_;
    batches_.push_back(Batch{commands.size(), committed_at});
    results.assign(commands.size(), ExpireOutcome{static_cast<std::int64_t>(committed_at)});
    return ok_status();
  }
  Status sync() override {
    std::uint64_t started = 0;
    {
      std::lock_guard lock(mu_);
      started = ++seq_;
    }
    std::this_thread::sleep_for(sync_time);
    std::lock_guard lock(mu_);
    syncs_.push_back(Sync{started, ++seq_});
    if (fail_sync) return Error::make(Code::unavailable, "the disk said no");
    return ok_status();
  }
  // The sequence number now (to compare with a callback's moment).
  std::uint64_t now() {
    std::lock_guard lock(mu_);
    return ++seq_;
  }
  std::vector<Batch> batches() {
    std::lock_guard lock(mu_);
    return batches_;
  }
  std::vector<Sync> syncs() {
    std::lock_guard lock(mu_);
    return syncs_;
  }

  Result<Account> get_account(std::string_view) override { return unsupported(); }
  Result<Hold> get_hold(std::string_view) override { return unsupported(); }
  ListReads& lists() override { return no_lists_; }
  jobs::JobReads& jobs() override { return no_jobs_; }
  coord::CoordReads& coord() override { return no_coord_; }
  webhooks::WebhookReads& webhooks() override { return no_webhooks_; }
  payments::PaymentReads& payments() override { return no_payments_; }
  prices::PriceReads& prices() override { return no_prices_; }
  Result<EventPage> read_events(std::string_view, std::int64_t, std::int64_t) override { return unsupported(); }
  Result<EventPage> read_feed(std::int64_t, std::int64_t) override { return unsupported(); }
  Result<std::int64_t> last_event_id() override { return unsupported(); }
  Result<AuditReport> audit(std::optional<std::string_view>) override { return unsupported(); }
  Result<AuditPage> audit_range(std::string_view, std::int64_t) override { return unsupported(); }
  Result<LedgerStats> stats() override { return unsupported(); }
  Result<std::vector<std::string>> list_account_ids(std::string_view, std::int64_t) override { return unsupported(); }
  Result<KeyLookup> find_key(std::string_view) override { return unsupported(); }
  Result<bool> has_admin_key() override { return unsupported(); }
  Status ping() override { return ok_status(); }
  std::int64_t now_ms() override { return 0; }

 private:
  static Error unsupported() { return Error::make(Code::internal, "not a reading store"); }
  struct NoLists final : ListReads {
    Result<Page<Account>> list_accounts(const PageRequest&) override { return unsupported(); }
    Result<Page<Hold>> list_holds(const HoldQuery&, const PageRequest&) override { return unsupported(); }
    Result<Page<KeySummary>> list_keys(std::optional<std::string_view>, const PageRequest&) override {
      return unsupported();
    }
    Result<TransferRecord> get_transfer(std::string_view) override { return unsupported(); }
    Result<Page<lots::LotView>> list_lots(const LotQuery&, const PageRequest&) override { return unsupported(); }
  } no_lists_;
  struct NoJobs final : jobs::JobReads {
    Result<jobs::Job> get_job(std::string_view) override { return unsupported(); }
    Result<Page<jobs::Job>> list_jobs(const jobs::JobQuery&, const PageRequest&) override { return unsupported(); }
    Result<std::vector<jobs::JobEntry>> job_history(std::string_view) override { return unsupported(); }
    Result<std::vector<jobs::Job>> jobs_to_recover(std::int64_t) override { return unsupported(); }
    Result<jobs::UnendedJobs> count_unended() override { return unsupported(); }
  } no_jobs_;
  struct NoCoord final : coord::CoordReads {
    Result<coord::RowRead<coord::Lock>> get_lock(std::string_view) override { return unsupported(); }
    Result<coord::RowRead<coord::IdempotencyKey>> get_idempotency_key(std::string_view) override {
      return unsupported();
    }
    Result<coord::LockPage> list_locks(const PageRequest&, bool) override { return unsupported(); }
  } no_coord_;
  struct NoWebhooks final : webhooks::WebhookReads {
    Result<webhooks::Endpoint> get_endpoint(std::string_view) override { return unsupported(); }
    Result<Page<webhooks::Endpoint>> list_endpoints(const PageRequest&) override { return unsupported(); }
    Result<Page<webhooks::Delivery>> list_deliveries(std::string_view, std::optional<webhooks::DeliveryStatus>,
                                                     const PageRequest&) override {
      return unsupported();
    }
    Result<std::vector<webhooks::Delivery>> due_deliveries(std::int64_t) override { return unsupported(); }
    Result<std::optional<std::int64_t>> oldest_pending_event_at(std::string_view) override { return unsupported(); }
  } no_webhooks_;
  struct NoPayments final : payments::PaymentReads {
    Result<payments::Payment> get_payment(std::string_view) override { return Error::make(Code::not_found, "none"); }
    Result<payments::Payment> find_payment(payments::Provider, std::string_view) override {
      return Error::make(Code::not_found, "none");
    }
  } no_payments_;
  struct NoPrices final : prices::PriceReads {
    Result<prices::Price> get_price(std::string_view) override { return unsupported(); }
    Result<Page<prices::Price>> list_prices(const PageRequest&) override { return unsupported(); }
    Result<Page<prices::Price>> list_versions(std::string_view, const PageRequest&) override { return unsupported(); }
    Result<std::map<std::int64_t, prices::PricedHold>> priced_holds(std::span<const std::int64_t>) override {
      return unsupported();
    }
  } no_prices_;
  std::mutex mu_;
  std::uint64_t seq_ = 0;
  std::vector<Batch> batches_;
  std::vector<Sync> syncs_;
};

Command any_command() { return ExpireOverdueCommand{1}; }

// A caller's answer and the moment it came (the store's sequence number).
struct Answer {
  std::optional<CommandResult> result;
  std::uint64_t at = 0;
};

TEST(GroupCommit, NobodyIsAnsweredBeforeAFlushThatStartedAfterTheirBatchCommitted) {
  RecordingStore store;
  store.apply_time = std::chrono::microseconds(300);
  store.sync_time = std::chrono::microseconds(2'000);
  constexpr int kCallers = 8, kEach = 25;
  struct Seen {
    std::uint64_t committed_at = 0, answered_at = 0;
  };
  std::vector<std::vector<Seen>> seen(kCallers);
  GroupCommitStats stats;
  {
    GroupCommitter committer(store, GroupCommitOptions{});
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        for (int i = 0; i < kEach; ++i) {
          const CommandResult r = committer.submit_and_wait(any_command());
          ASSERT_TRUE(r.ok());
          seen[c].push_back(Seen{static_cast<std::uint64_t>(std::get<ExpireOutcome>(r.value()).expired), store.now()});
        }
      });
    }
    for (auto& t : callers) t.join();
    stats = committer.stats();
  }
  EXPECT_GT(stats.batches, 0u);
  EXPECT_LT(stats.batches, static_cast<std::uint64_t>(kCallers * kEach));  // callers did share batches
  const auto syncs = store.syncs();
  std::size_t checked = 0;
  for (const auto& caller : seen) {
    for (const Seen& s : caller) {
      bool flushed = false;
      for (const auto& f : syncs) flushed = flushed || (f.started_at > s.committed_at && f.ended_at < s.answered_at);
      EXPECT_TRUE(flushed) << "answered at " << s.answered_at << " without a flush that started after its commit at "
                           << s.committed_at;
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<std::size_t>(kCallers * kEach));
}

TEST(GroupCommit, ALoneCallerIsAnsweredByTheWriterItselfWithOneFlushPerBatch) {
  RecordingStore store;
  GroupCommitter committer(store, GroupCommitOptions{});
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(committer.submit_and_wait(any_command()).ok());
  const GroupCommitStats stats = committer.stats();
  EXPECT_EQ(stats.batches, 50u);
  EXPECT_EQ(stats.syncs, 50u);
  EXPECT_EQ(stats.answered_inline, 50u);  // no hand-off to the syncer
}

TEST(GroupCommit, ACallerThatSubmitsFromItsCallbackIsServedWithoutAHandOff) {
  RecordingStore store;
  GroupCommitter committer(store, GroupCommitOptions{});
  std::latch done(1);
  std::atomic<int> left{100};
  std::atomic<std::thread::id> answered_on{};
  std::function<void(CommandResult)> next = [&](CommandResult r) {
    ASSERT_TRUE(r.ok());
    answered_on = std::this_thread::get_id();
    if (--left == 0) return done.count_down();
    committer.submit(any_command(), next);
  };
  committer.submit(any_command(), next);
  done.wait();
  EXPECT_EQ(committer.stats().answered_inline, 100u);
  EXPECT_NE(answered_on.load(), std::this_thread::get_id());
}

TEST(GroupCommit, AFailedFlushAnswersTheCommittedCallersUnavailable) {
  RecordingStore store;
  store.fail_sync = true;
  GroupCommitter committer(store, GroupCommitOptions{});
  const CommandResult r = committer.submit_and_wait(any_command());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), Code::unavailable);
  EXPECT_EQ(r.error().detail, "the disk said no");
}

TEST(GroupCommit, BatchesAreAnsweredInTheOrderTheyCommitted) {
  RecordingStore store;
  store.apply_time = std::chrono::microseconds(200);
  store.sync_time = std::chrono::microseconds(1'500);
  std::mutex mu;
  std::vector<int> order;
  constexpr int kCommands = 400;
  std::latch done(kCommands);
  {
    GroupCommitter committer(store, GroupCommitOptions{});
    std::vector<std::thread> submitters;
    for (int t = 0; t < 4; ++t) {
      submitters.emplace_back([&, t] {
        for (int i = 0; i < kCommands / 4; ++i) {
          // The queue is FIFO and batches are taken from its front, so the global submission
          // order (serialized here) must be the answer order.
          std::lock_guard lock(mu);
          const int id = t * 1000 + i;
          committer.submit(any_command(), [&, id](CommandResult r) {
            EXPECT_TRUE(r.ok());
            std::lock_guard answer_lock(mu);
            order.push_back(id);
            done.count_down();
          });
          order.push_back(-1 - id);  // the submission
        }
      });
    }
    for (auto& t : submitters) t.join();
    done.wait();
  }
  // Answers, read in order, come in the same order as the submissions.
  std::vector<int> submitted, answered;
  for (int x : order) (x < 0 ? submitted : answered).push_back(x < 0 ? -1 - x : x);
  EXPECT_EQ(submitted, answered);
}

// Callers that submit their next command from their callback (as the HTTP edge does) all wait in
// one batch; whether the writer splits them depends on how apply() compares with a flush.
TEST(GroupCommit, CallersAreSplitToOverlapTheFlushOnlyWhenTheFlushIsShorterThanApplyingThemButNotNegligible) {
  // Enough rounds that the writer's running averages (weight 1/8 per batch) forget the first,
  // smaller batches well before the callers are done — sleeps that overshoot on a loaded machine
  // shift both times alike and keep the flush inside the window that splits.
  constexpr int kCallers = 16, kEach = 80;
  const auto run = [&](std::chrono::microseconds apply, std::chrono::microseconds sync) {
    RecordingStore store;
    store.apply_time = apply;
    store.sync_time = sync;
    GroupCommitter committer(store, GroupCommitOptions{});
    std::latch done(kCallers);
    std::vector<int> left(kCallers, kEach);
    std::vector<std::function<void(CommandResult)>> next(kCallers);
    for (int c = 0; c < kCallers; ++c) {
      next[c] = [&, c](CommandResult r) {
        ASSERT_TRUE(r.ok());
        if (--left[c] == 0) return done.count_down();
        committer.submit(any_command(), next[c]);
      };
    }
    for (int c = 0; c < kCallers; ++c) committer.submit(any_command(), next[c]);
    done.wait();
    return committer.stats();
  };
  // apply() is far shorter than a flush (its time does not grow with the batch here): everyone
  // waits in one batch.
  const GroupCommitStats in_step = run(std::chrono::microseconds(50), std::chrono::microseconds(10'000));
  EXPECT_EQ(in_step.split_batches, 0u);
  // The store's commit already flushed (sync() has next to nothing to do, as on PostgreSQL): two
  // batches would only cost twice the fixed cost, with nothing to overlap.
  const GroupCommitStats no_flush = run(std::chrono::microseconds(3'000), std::chrono::microseconds(0));
  EXPECT_EQ(no_flush.split_batches, 0u);
  // A flush shorter than applying everything, but long: waiting callers are split so that the
  // halves overlap.
  const GroupCommitStats split = run(std::chrono::microseconds(3'000), std::chrono::microseconds(1'200));
  EXPECT_GT(split.split_batches, 0u);
  EXPECT_LT(split.answered_inline, split.batches);  // the halves went through the syncer
}

}  // namespace
}  // namespace tollgate
