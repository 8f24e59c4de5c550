// ConnPool (src/store/conn_pool.h): a bounded pool whose lease() waits a bounded time.
#include "store/conn_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace tollgate {
namespace {

using namespace std::chrono_literals;

struct FakeConn {
  int id = 0;
};

ConnPool<FakeConn>::Open counting_open(int& opened) {
  return [&opened] { return std::make_unique<FakeConn>(FakeConn{++opened}); };
}

TEST(ConnPool, ALeaseWhenEveryConnectionIsBusyAnswersUnavailableAfterTheWait) {
  int opened = 0;
  ConnPool<FakeConn> pool(1, 50, counting_open(opened));
  auto first = pool.lease();
  ASSERT_TRUE(first.ok());
  const auto start = std::chrono::steady_clock::now();
  auto second = pool.lease();
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.code(), Code::unavailable);
  EXPECT_NE(second.error().detail.find("50 ms"), std::string::npos) << second.error().detail;
  EXPECT_GE(waited, 50ms);  // it did wait, and then gave up
  EXPECT_EQ(opened, 1);     // no connection beyond the bound
}

TEST(ConnPool, ALeaseWaitingForABusyConnectionGetsItWhenItComesBack) {
  int opened = 0;
  ConnPool<FakeConn> pool(1, 10'000, counting_open(opened));
  std::optional<ConnPool<FakeConn>::Lease> first;
  {
    auto lease = pool.lease();
    ASSERT_TRUE(lease.ok());
    first.emplace(std::move(lease).value());
  }
  auto waiter = std::async(std::launch::async, [&] {
    auto lease = pool.lease();
    return lease.ok() ? (*lease.value()).id : -1;
  });
  EXPECT_EQ(waiter.wait_for(50ms), std::future_status::timeout);  // waiting: every connection is out
  first.reset();                                                    // given back
  EXPECT_EQ(waiter.get(), 1);                                       // the same connection, reused
  EXPECT_EQ(opened, 1);
}

TEST(ConnPool, AZeroWaitAnswersAtOnceWhenNoneIsFreeAndLeasesWhenOneIs) {
  int opened = 0;
  ConnPool<FakeConn> pool(2, 0, counting_open(opened));
  auto a = pool.lease();
  auto b = pool.lease();
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(pool.lease().code(), Code::unavailable);
  EXPECT_EQ(opened, 2);
}

}  // namespace
}  // namespace tollgate
