// Disk faults under the SQLite store, in process, through testing::FaultVfs (support/fault_vfs.h):
//   - a full disk: the write answers storage_full and changes nothing, reads keep answering the
//     acknowledged state, and writes succeed again once there is space — nothing acknowledged lost;
//   - a failing flush (fsync EIO): the batch is not acknowledged (storage_failed), the store refuses
//     every later write and reports not ready (ping) even once flushes would work again — the page
//     cache can no longer be trusted ("fsyncgate") —, and a store opened again on the file (WAL
//     recovery) holds every acknowledged operation, the unacknowledged one wholly or not at all.
// The same faults on a real volume and through a real server process: tests/faults/storage_faults_http_test.cc.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "core/clock.h"
#include "slices.h"
#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"
#include "support/backends.h"
#include "support/fault_vfs.h"

namespace tollgate {
namespace {

std::unique_ptr<SqliteStore> open_store(const std::string& path, const std::string& vfs, const Clock& clock) {
  SqliteOptions options;
  options.path = path;
  options.vfs = vfs;
  // No background checkpointer: the WAL only grows while the test runs, so every commit extends a
  // file (with checkpoints, a restarted WAL may be rewritten in place, which a full disk allows).
  options.checkpoint_interval_ms = 0;
  auto opened = SqliteStore::open(options, clock);
  if (!opened) ADD_FAILURE() << opened.error().detail;
  return opened ? std::move(opened).value() : nullptr;
}

LedgerOptions quiet_ledger() {
  LedgerOptions options;
  options.reaper_interval_ms = 0;
  options.key_use_flush_interval_ms = 0;
  return options;
}

std::int64_t available(Store& store, const std::string& account) {
  auto a = store.get_account(account);
  EXPECT_TRUE(a.ok()) << a.error().detail;
  return a ? a->balances.available : -1;
}

void expect_clean_audit(Store& store) {
  auto report = store.audit(std::nullopt);
  ASSERT_TRUE(report.ok()) << report.error().detail;
  EXPECT_TRUE(report->violations.empty()) << report->violations.front().message;
  EXPECT_GT(report->accounts_checked, 0);
}

TEST(StorageFaults, AFullDiskRefusesWritesWithStorageFullKeepsReadsAndResumesWhenSpaceReturns) {
  testing::TempDir dir;
  ManualClock clock;
  testing::FaultVfs vfs(testing::FaultVfs::unique_name());
  const std::string path = dir.file("ledger.db");
  {
    auto store = open_store(path, vfs.name(), clock);
    ASSERT_NE(store, nullptr);
    Ledger ledger(*store, clock, quiet_ledger());
    ASSERT_TRUE(ledger.create_account({"acct", 0, std::nullopt}).ok());
    ASSERT_TRUE(ledger.credit({"acct", 100, "before"}).ok());

    vfs.set_disk_full(true);
    for (int i = 0; i < 3; ++i) {  // every attempt, not only the first
      auto refused = ledger.credit({"acct", 50, "during"});
      ASSERT_FALSE(refused.ok());
      EXPECT_EQ(refused.code(), Code::storage_full) << refused.error().detail;
      auto reserve = ledger.run(ReserveCommand{"acct", 10, "req-during-" + std::to_string(i), 60'000, "{}"});
      EXPECT_EQ(reserve.code(), Code::storage_full);
    }
    EXPECT_GT(vfs.refused_writes(), 0u);
    EXPECT_EQ(available(*store, "acct"), 100);  // reads answer the acknowledged state
    EXPECT_TRUE(store->ping().ok());             // ready: reads work, and writes will once there is space
    expect_clean_audit(*store);
    const auto stats = ledger.write_stats();
    EXPECT_EQ(stats.disk_full_batches, stats.failed_batches);
    EXPECT_GE(stats.disk_full_batches, 6u);

    vfs.set_disk_full(false);
    auto resumed = ledger.credit({"acct", 50, "during"});  // the same request again: applied now
    ASSERT_TRUE(resumed.ok()) << resumed.error().detail;
    EXPECT_TRUE(resumed->created);
    ASSERT_TRUE(ledger.credit({"acct", 7, "after"}).ok());
    EXPECT_EQ(available(*store, "acct"), 157);
    expect_clean_audit(*store);
  }
  // Everything acknowledged is in the file, as SQLite recovers it with the default VFS.
  auto store = open_store(path, "", clock);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(available(*store, "acct"), 157);
  expect_clean_audit(*store);
}

TEST(StorageFaults, AFailedFlushIsNotAcknowledgedAndStopsWritesUntilTheStoreIsOpenedAgain) {
  testing::TempDir dir;
  ManualClock clock;
  testing::FaultVfs vfs(testing::FaultVfs::unique_name());
  const std::string path = dir.file("ledger.db");
  {
    auto store = open_store(path, vfs.name(), clock);
    ASSERT_NE(store, nullptr);
    Ledger ledger(*store, clock, quiet_ledger());
    ASSERT_TRUE(ledger.create_account({"acct", 0, std::nullopt}).ok());
    ASSERT_TRUE(ledger.credit({"acct", 100, "acknowledged"}).ok());

    vfs.set_sync_fails(true);
    auto unflushed = ledger.credit({"acct", 50, "unflushed"});
    ASSERT_FALSE(unflushed.ok());
    EXPECT_EQ(unflushed.code(), Code::storage_failed) << unflushed.error().detail;
    EXPECT_EQ(vfs.failed_syncs(), 1u);

    // The disk answers again, but what the page cache holds is not to be trusted: still refused,
    // without trying (no further flush), and not ready.
    vfs.set_sync_fails(false);
    const auto syncs = vfs.syncs();
    for (int i = 0; i < 3; ++i) {
      auto later = ledger.credit({"acct", 1, "later-" + std::to_string(i)});
      EXPECT_EQ(later.code(), Code::storage_failed);
    }
    EXPECT_EQ(vfs.syncs(), syncs);
    auto ping = store->ping();
    ASSERT_FALSE(ping.ok());
    EXPECT_EQ(ping.code(), Code::storage_failed);
    EXPECT_TRUE(store->get_account("acct").ok());  // reads still answer
    const auto stats = ledger.write_stats();
    EXPECT_EQ(stats.failed_syncs, 1u);
  }
  // Opened again (a restart): WAL recovery reads what the file holds. The acknowledged credit is
  // there; the unflushed one wholly or not at all (here the fault lost no data: it is there); the
  // later ones never happened. Writes work again.
  auto store = open_store(path, "", clock);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->ping().ok());
  const std::int64_t after_restart = available(*store, "acct");
  EXPECT_TRUE(after_restart == 100 || after_restart == 150) << after_restart;
  expect_clean_audit(*store);
  Ledger ledger(*store, clock, quiet_ledger());
  auto retried = ledger.credit({"acct", 50, "unflushed"});  // the client's retry, same reference
  ASSERT_TRUE(retried.ok()) << retried.error().detail;
  EXPECT_EQ(retried->created, after_restart == 100);
  EXPECT_EQ(available(*store, "acct"), 150);
  expect_clean_audit(*store);
}

}  // namespace
}  // namespace tollgate
