// The reader executor (src/http/read_executor.h): reads off the I/O threads, a bounded queue, long
// reads in parts that queue behind the reads that arrived meanwhile.
#include "http/read_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

namespace tollgate::http {
namespace {

using namespace std::chrono_literals;

// A latch the test opens: tasks that wait on it keep their thread busy until then.
struct Gate {
  std::promise<void> opened;
  std::shared_future<void> wait = opened.get_future().share();
  void open() { opened.set_value(); }
};

TEST(ReadExecutor, RunsEveryPostedTaskOnItsOwnThreads) {
  ReadExecutor executor(2, 16);
  std::atomic<int> ran{0};
  std::promise<std::thread::id> where;
  ASSERT_TRUE(executor.try_post([&] { where.set_value(std::this_thread::get_id()); }));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(executor.try_post([&] { ran.fetch_add(1); }));
  EXPECT_NE(where.get_future().get(), std::this_thread::get_id());
  executor.stop();
  EXPECT_EQ(ran.load(), 10);
}

TEST(ReadExecutor, AFullQueueRefusesTheTaskAndCountsIt) {
  ReadExecutor executor(1, 2);
  Gate gate;
  std::promise<void> started;
  ASSERT_TRUE(executor.try_post([&] {
    started.set_value();
    gate.wait.wait();
  }));
  started.get_future().wait();  // the one thread is busy; the queue is empty
  std::atomic<int> ran{0};
  EXPECT_TRUE(executor.try_post([&] { ran.fetch_add(1); }));
  EXPECT_TRUE(executor.try_post([&] { ran.fetch_add(1); }));
  EXPECT_EQ(executor.queue_depth(), 2u);
  EXPECT_FALSE(executor.try_post([&] { ran.fetch_add(100); }));  // queue_max waiting already
  EXPECT_EQ(executor.refused(), 1u);
  gate.open();
  executor.stop();
  EXPECT_EQ(ran.load(), 2);  // the refused one never ran
}

TEST(ReadExecutor, AContinuationQueuesBehindTheTasksThatArrivedMeanwhile) {
  ReadExecutor executor(1, 8);
  std::mutex mu;
  std::vector<std::string> order;  // protected by mu
  auto note = [&](std::string what) {
    std::lock_guard lock(mu);
    order.push_back(std::move(what));
  };
  Gate gate;
  // A long read in three parts; while its first part runs, two short reads arrive.
  std::function<void(int)> part = [&](int n) {
    if (n == 1) gate.wait.wait();
    note("audit " + std::to_string(n));
    if (n < 3) executor.continue_with([&, n] { part(n + 1); });
  };
  ASSERT_TRUE(executor.try_post([&] { part(1); }));
  ASSERT_TRUE(executor.try_post([&] { note("read a"); }));
  ASSERT_TRUE(executor.try_post([&] { note("read b"); }));
  gate.open();
  executor.stop();  // runs what is queued, continuations included
  EXPECT_EQ(order, (std::vector<std::string>{"audit 1", "read a", "read b", "audit 2", "audit 3"}));
}

TEST(ReadExecutor, AContinuationIsNeverRefusedEvenWhenTheQueueIsFull) {
  ReadExecutor executor(1, 1);
  Gate gate;
  std::atomic<int> parts{0};
  std::promise<void> started;
  ASSERT_TRUE(executor.try_post([&] {
    started.set_value();
    gate.wait.wait();
    parts.fetch_add(1);
    executor.continue_with([&] { parts.fetch_add(1); });  // the queue is full (one waits)
  }));
  started.get_future().wait();
  ASSERT_TRUE(executor.try_post([] {}));
  EXPECT_FALSE(executor.try_post([] {}));
  gate.open();
  executor.stop();
  EXPECT_EQ(parts.load(), 2);
}

TEST(ReadExecutor, AfterStopNothingIsAccepted) {
  ReadExecutor executor(2, 4);
  executor.stop();
  EXPECT_FALSE(executor.try_post([] { ADD_FAILURE() << "ran after stop()"; }));
}

}  // namespace
}  // namespace tollgate::http
