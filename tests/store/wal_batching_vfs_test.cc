// The WAL batching layer (src/store/sqlite/wal_batching_vfs.h) over a base VFS that records every
// write reaching it and can be told to fail: a transaction's frames reach the base as a few large
// writes, once its commit frame is complete; what reaches the base is exactly what SQLite wrote
// (the file reopens clean); a failing write fails the commit instead of being lost.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "ledger/ledger.h"
#include "store/sqlite/sqlite_store.h"
#include "store/sqlite/wal_batching_vfs.h"
#include "support/backends.h"

namespace tollgate {
namespace {

// A VFS over the default one that counts the writes to WAL files and fails them on request.
class RecordingVfs {
 public:
  static RecordingVfs& instance() {
    static RecordingVfs vfs;
    return vfs;
  }
  static constexpr const char* kName = "tollgate-test-recording";

  std::atomic<int> wal_writes{0};
  std::atomic<long long> wal_bytes{0};
  std::atomic<int> largest_wal_write{0};
  std::atomic<bool> fail_wal_writes{false};

  void reset() {
    wal_writes = 0;
    wal_bytes = 0;
    largest_wal_write = 0;
    fail_wal_writes = false;
  }

 private:
  struct File {
    sqlite3_file base;
    sqlite3_file* real;
    bool wal;
  };
  static sqlite3_vfs* real_vfs() { return static_cast<sqlite3_vfs*>(instance().vfs_.pAppData); }
  static sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<File*>(f)->real; }

  RecordingVfs() {
    sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
    vfs_ = *base;
    vfs_.pNext = nullptr;
    vfs_.zName = kName;
    vfs_.pAppData = base;
    vfs_.szOsFile = static_cast<int>(sizeof(File)) + base->szOsFile;
    vfs_.xOpen = [](sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out) {
      auto* file = reinterpret_cast<File*>(f);
      file->real = reinterpret_cast<sqlite3_file*>(file + 1);
      file->wal = (flags & SQLITE_OPEN_WAL) != 0;
      file->base.pMethods = nullptr;
      const int rc = real_vfs()->xOpen(real_vfs(), name, file->real, flags, out);
      if (file->real->pMethods) file->base.pMethods = &instance().methods_;
      return rc;
    };
    vfs_.xDelete = [](sqlite3_vfs*, const char* n, int s) { return real_vfs()->xDelete(real_vfs(), n, s); };
    vfs_.xAccess = [](sqlite3_vfs*, const char* n, int f, int* o) { return real_vfs()->xAccess(real_vfs(), n, f, o); };
    vfs_.xFullPathname = [](sqlite3_vfs*, const char* n, int k, char* o) {
      return real_vfs()->xFullPathname(real_vfs(), n, k, o);
    };
    methods_.iVersion = 3;
    methods_.xClose = [](sqlite3_file* f) { return real(f)->pMethods->xClose(real(f)); };
    methods_.xRead = [](sqlite3_file* f, void* d, int n, sqlite3_int64 o) { return real(f)->pMethods->xRead(real(f), d, n, o); };
    methods_.xWrite = [](sqlite3_file* f, const void* d, int n, sqlite3_int64 o) {
      if (reinterpret_cast<File*>(f)->wal) {
        RecordingVfs& v = instance();
        if (v.fail_wal_writes) return SQLITE_IOERR_WRITE;
        ++v.wal_writes;
        v.wal_bytes += n;
        int seen = v.largest_wal_write.load();
        while (n > seen && !v.largest_wal_write.compare_exchange_weak(seen, n)) {
        }
      }
      return real(f)->pMethods->xWrite(real(f), d, n, o);
    };
    methods_.xTruncate = [](sqlite3_file* f, sqlite3_int64 s) { return real(f)->pMethods->xTruncate(real(f), s); };
    methods_.xSync = [](sqlite3_file* f, int fl) { return real(f)->pMethods->xSync(real(f), fl); };
    methods_.xFileSize = [](sqlite3_file* f, sqlite3_int64* s) { return real(f)->pMethods->xFileSize(real(f), s); };
    methods_.xLock = [](sqlite3_file* f, int l) { return real(f)->pMethods->xLock(real(f), l); };
    methods_.xUnlock = [](sqlite3_file* f, int l) { return real(f)->pMethods->xUnlock(real(f), l); };
    methods_.xCheckReservedLock = [](sqlite3_file* f, int* o) { return real(f)->pMethods->xCheckReservedLock(real(f), o); };
    methods_.xFileControl = [](sqlite3_file* f, int op, void* a) { return real(f)->pMethods->xFileControl(real(f), op, a); };
    methods_.xSectorSize = [](sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); };
    methods_.xDeviceCharacteristics = [](sqlite3_file* f) { return real(f)->pMethods->xDeviceCharacteristics(real(f)); };
    methods_.xShmMap = [](sqlite3_file* f, int r, int s, int e, void volatile** o) {
      return real(f)->pMethods->xShmMap(real(f), r, s, e, o);
    };
    methods_.xShmLock = [](sqlite3_file* f, int o, int n, int fl) { return real(f)->pMethods->xShmLock(real(f), o, n, fl); };
    methods_.xShmBarrier = [](sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); };
    methods_.xShmUnmap = [](sqlite3_file* f, int d) { return real(f)->pMethods->xShmUnmap(real(f), d); };
    methods_.xFetch = [](sqlite3_file* f, sqlite3_int64 o, int n, void** p) { return real(f)->pMethods->xFetch(real(f), o, n, p); };
    methods_.xUnfetch = [](sqlite3_file* f, sqlite3_int64 o, void* p) { return real(f)->pMethods->xUnfetch(real(f), o, p); };
    sqlite3_vfs_register(&vfs_, 0);
  }

  sqlite3_vfs vfs_{};
  sqlite3_io_methods methods_{};
};

class WalBatching : public ::testing::Test {
 protected:
  void SetUp() override { RecordingVfs::instance().reset(); }

  std::unique_ptr<SqliteStore> open(bool batching) {
    SqliteOptions options;
    options.path = dir_.file("t.db");
    options.vfs = RecordingVfs::kName;
    options.batch_wal_writes = batching;
    options.checkpoint_interval_ms = 0;  // no background checkpoints: count only the writer's frames
    auto store = SqliteStore::open(options, clock_);
    EXPECT_TRUE(store.ok()) << store.error().detail;
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // One batch of `n` credits to one account, straight through the store (one transaction).
  Status credit_batch(Store& store, int n, const std::string& prefix) {
    std::vector<Command> commands;
    for (int i = 0; i < n; ++i) commands.push_back(CreditCommand{"acct", 1, prefix + std::to_string(i)});
    std::vector<CommandResult> results;
    Status s = store.apply(commands, results);
    if (!s) return s;
    for (const auto& r : results) {
      if (!r) return r.error();
    }
    return store.sync();
  }

  testing::TempDir dir_;
  ManualClock clock_;
};

TEST_F(WalBatching, ATransactionsFramesReachTheBaseVfsAsAFewLargeWritesInsteadOfTwoPerFrame) {
  RecordingVfs& rec = RecordingVfs::instance();
  int with_layer = 0, without_layer = 0;
  long long bytes_with = 0, bytes_without = 0;
  for (bool batching : {true, false}) {
    {
      auto store = open(batching);
      ASSERT_NE(store, nullptr);
      std::vector<CommandResult> results;
      ASSERT_TRUE(store->apply(std::vector<Command>{CreateAccountCommand{"acct", 0, std::nullopt}}, results).ok());
      rec.reset();
      for (int b = 0; b < 20; ++b) ASSERT_TRUE(credit_batch(*store, 200, "b" + std::to_string(b) + "-").ok());
      (batching ? with_layer : without_layer) = rec.wal_writes.load();
      (batching ? bytes_with : bytes_without) = rec.wal_bytes.load();
    }
    std::filesystem::remove_all(dir_.path());
    std::filesystem::create_directories(dir_.path());
  }
  // The same frames (the same bytes) in far fewer writes: a transaction of dozens of frames costs a
  // handful of writes (pieces of at most 124 KiB), not two per frame.
  EXPECT_EQ(bytes_with, bytes_without);
  EXPECT_GT(without_layer, 20 * 2 * 10) << "the transactions were expected to write dozens of frames";
  RecordProperty("wal_writes_with_layer", with_layer);
  RecordProperty("wal_writes_without_layer", without_layer);
  EXPECT_LT(with_layer * 10, without_layer) << with_layer << " writes with the layer, " << without_layer << " without";
  EXPECT_LE(rec.largest_wal_write.load(), 31 * 4096);
}

TEST_F(WalBatching, WhatSqliteWroteIsWhatTheFileHoldsAfterAReopen) {
  {
    auto store = open(true);
    ASSERT_NE(store, nullptr);
    Ledger ledger(*store, clock_, [] {
      LedgerOptions o;
      o.reaper_interval_ms = 0;
      return o;
    }());
    ASSERT_TRUE(ledger.create_account({"acct", 0, std::nullopt}).ok());
    for (int i = 0; i < 300; ++i) {
      ASSERT_TRUE(ledger.credit({"acct", 2, "c" + std::to_string(i)}).ok());
      auto h = ledger.reserve({"acct", 1, "r" + std::to_string(i), 60'000, "", ""});
      ASSERT_TRUE(h.ok()) << h.error().detail;
      ASSERT_TRUE(ledger.commit({h->hold.hold_id, std::nullopt}).ok());
    }
  }
  auto store = open(false);  // read back without the layer: the bytes on disk alone
  ASSERT_NE(store, nullptr);
  auto account = store->get_account("acct");
  ASSERT_TRUE(account.ok()) << account.error().detail;
  EXPECT_EQ(account->balances, (Balances{300, 0, 300, 600}));
  auto audit = store->audit(std::nullopt);
  ASSERT_TRUE(audit.ok());
  EXPECT_TRUE(audit->violations.empty());
}

TEST_F(WalBatching, AWriteThatFailsAtTheCommitFailsTheTransactionAndLeavesNothingBehind) {
  auto store = open(true);
  ASSERT_NE(store, nullptr);
  std::vector<CommandResult> results;
  ASSERT_TRUE(store->apply(std::vector<Command>{CreateAccountCommand{"acct", 0, std::nullopt}}, results).ok());
  ASSERT_TRUE(credit_batch(*store, 5, "ok-").ok());
  RecordingVfs::instance().fail_wal_writes = true;
  const Status failed = credit_batch(*store, 50, "lost-");
  RecordingVfs::instance().fail_wal_writes = false;
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(code_name(failed.code()), code_name(Code::unavailable)) << failed.error().detail;
  // The failed transaction left nothing: the next one sees the account as before and succeeds.
  auto account = store->get_account("acct");
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account->balances.purchased, 5);
  ASSERT_TRUE(credit_batch(*store, 3, "after-").ok());
  EXPECT_EQ(store->get_account("acct")->balances.purchased, 8);
  auto audit = store->audit(std::nullopt);
  ASSERT_TRUE(audit.ok());
  EXPECT_TRUE(audit->violations.empty());
}

}  // namespace
}  // namespace tollgate
