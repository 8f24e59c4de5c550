// What run_batch (store/batch_runner.h) does when the connection breaks, on a real SQLite file: the
// backend's BatchIo is wrapped so that one call "loses its connection" — while loading (nothing
// written: the batch runs again) or right after a COMMIT that did land (only its answer lost: the
// batch answers `unavailable` and is not run again, since an extend has no id that would make a
// second run a replay). The chaos soak found the second case on PostgreSQL: one extend request, two
// `extended` events.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/clock.h"
#include "core/hold_id.h"
#include "store/batch_runner.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/sqlite_write.h"
#include "support/backends.h"

namespace tollgate {
namespace {

// The failure a broken connection raises, as the wrapper's classify() tells the runner.
struct ConnectionLost : std::runtime_error {
  ConnectionLost() : std::runtime_error("server closed the connection unexpectedly (injected)") {}
};

enum class LoseAt { load, after_commit };

// A real BatchIo that loses its connection once, at `at`.
class LosingBatchIo final : public BatchIo {
 public:
  LosingBatchIo(BatchIo& real, LoseAt at) : real_(real), at_(at) {}
  batch::Snapshot begin_and_load(const batch::Keys& keys) override {
    if (at_ == LoseAt::load && !lost_) {
      lost_ = true;
      throw ConnectionLost();
    }
    return real_.begin_and_load(keys);
  }
  std::vector<std::int64_t> write_and_commit(const batch::Effects& effects) override {
    auto ids = real_.write_and_commit(effects);  // committed: durable in the file
    if (at_ == LoseAt::after_commit && !lost_) {
      lost_ = true;
      throw ConnectionLost();  // ... and the answer never arrives
    }
    return ids;
  }
  void rollback() noexcept override { real_.rollback(); }
  FailureKind classify(const std::exception& failure) const override {
    if (dynamic_cast<const ConnectionLost*>(&failure)) return FailureKind::connection_lost;
    return real_.classify(failure);
  }
  Error to_error(const std::exception& failure) const override {
    if (dynamic_cast<const ConnectionLost*>(&failure)) return Error::make(Code::unavailable, failure.what());
    return real_.to_error(failure);
  }
  bool lost() const { return lost_; }

 private:
  BatchIo& real_;
  LoseAt at_;
  bool lost_ = false;
};

class BatchRunnerConnectionLost : public ::testing::Test {
 protected:
  void SetUp() override {
    // The schema and an active hold, made through the store itself.
    auto store = SqliteStore::open(SqliteOptions{.path = path_}, clock_);
    ASSERT_TRUE(store) << store.error().detail;
    std::vector<CommandResult> r;
    const std::vector<Command> setup{CreateAccountCommand{"a"}, CreditCommand{"a", 10, "seed"},
                                     ReserveCommand{"a", 3, "r-1", 60'000, "", "abc"}};
    ASSERT_TRUE((*store)->apply(setup, r));
    ASSERT_EQ(r.size(), 3u);
    ASSERT_TRUE(r[2].ok()) << r[2].error().detail;
    hold_id_ = std::get<HoldOutcome>(r[2].value()).hold.hold_id;
  }

  // Runs one extend of the hold through a LosingBatchIo on a writer connection of the file.
  Status extend(LoseAt at, std::vector<CommandResult>& results, BatchRunCounters& counters) {
    sqlite::OpenOptions options;
    sqlite::Conn writer(path_, options);
    sqlite::SqliteBatchIo real(writer, clock_);
    LosingBatchIo io(real, at);
    clock_.advance_ms(1'000);
    const std::vector<Command> commands{ExtendCommand{hold_id_, 60'000}};
    Status s = run_batch(io, commands, results, BatchRunOptions{}, counters);
    EXPECT_TRUE(io.lost());
    return s;
  }

  // The hold's `extended` events, read back from the file.
  int extended_events() {
    auto store = SqliteStore::open(SqliteOptions{.path = path_}, clock_);
    EXPECT_TRUE(store) << store.error().detail;
    auto page = (*store)->read_events("a", 0, 100);
    EXPECT_TRUE(page) << page.error().detail;
    int n = 0;
    for (const Event& e : page->events) n += e.type == EventType::extended ? 1 : 0;
    return n;
  }

  testing::TempDir dir_;
  std::string path_ = dir_.file("ledger.db");
  ManualClock clock_;
  std::string hold_id_;
};

TEST_F(BatchRunnerConnectionLost, WhileLoadingTheBatchRunsAgainAndIsAppliedOnce) {
  std::vector<CommandResult> results;
  BatchRunCounters counters;
  const Status s = extend(LoseAt::load, results, counters);
  ASSERT_TRUE(s) << s.error().detail;
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].ok()) << results[0].error().detail;
  EXPECT_EQ(counters.reconnect_reruns.load(), 1u);
  EXPECT_EQ(counters.unknown_commits.load(), 0u);
  EXPECT_EQ(extended_events(), 1);
}

TEST_F(BatchRunnerConnectionLost, AfterACommitThatLandedTheBatchAnswersUnavailableAndIsNotAppliedTwice) {
  std::vector<CommandResult> results;
  BatchRunCounters counters;
  const Status s = extend(LoseAt::after_commit, results, counters);
  ASSERT_FALSE(s) << "a batch whose commit answer was lost must not claim an outcome";
  EXPECT_EQ(s.error().code, Code::unavailable);
  EXPECT_NE(s.error().detail.find("retry with the same ids"), std::string::npos) << s.error().detail;
  EXPECT_EQ(counters.reconnect_reruns.load(), 0u);
  EXPECT_EQ(counters.unknown_commits.load(), 1u);
  EXPECT_EQ(extended_events(), 1) << "the extend was applied once (it committed), not run again";
}

}  // namespace
}  // namespace tollgate
