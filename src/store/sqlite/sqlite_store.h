// tollgate store/sqlite: the embedded store — one SQLite file, one writer, many readers.
//
// Opened in WAL mode with foreign keys on and every setting explicit. apply() runs on one writer
// connection inside BEGIN IMMEDIATE … COMMIT (the batch decided in memory: sqlite_write.h); reads
// use a small pool of reader connections that see the last committed state without blocking the
// writer. The schema is versioned and migrated at open().
//
// One process owns the file: open() takes an exclusive lock on it (flock) for the store's life and
// refuses with a clear error when another process holds it — run one `tollgate serve` per SQLite
// database (for many instances, use PostgreSQL). Being provably the only writer is what lets a
// batch decide on rows it read without further checks.
//
// Durability — the power-loss argument. The writer runs with synchronous=NORMAL: COMMIT appends the
// batch's frames (its commit frame last) to the WAL with write(2) and returns without a flush. The
// store's sync() then flushes the WAL file (the VFS's xSync: fdatasync on Linux) on another thread
// while the writer already applies the next batch, and the group committer answers a batch only
// after a sync() that *started after its COMMIT returned* has completed. So:
//   1. every frame of an acknowledged batch, its commit frame included, was written before a flush
//      began and is on stable storage when the flush returns (fdatasync flushes the file's data,
//      whichever descriptor wrote it, and the size needed to read it back);
//   2. after a power cut, SQLite's WAL recovery replays every frame up to the last valid commit
//      frame (checksummed, salted), so the batch is recovered — or, for a batch not yet
//      acknowledged, is either wholly there or wholly absent (torn frames fail their checksum);
//   3. checkpoints keep NORMAL's order: the WAL is synced before frames are copied into the
//      database file and the database file is synced before the WAL is reset, and the WAL header
//      is synced when the WAL starts over — so the database file never holds a page whose frame
//      was not durable, and a restarting WAL never overwrites frames the database lacks (the
//      checkpointer connection runs with FULL, never OFF);
//   4. the first sync of the WAL file also syncs its directory (the unix VFS's DIRSYNC on a file
//      opened for creation), so a new WAL file's name survives too;
//   5. a flush that fails leaves durability unknown (the kernel may have dropped the pages it
//      could not write while still showing them, and reports the error once: a second fsync that
//      succeeds proves nothing — PostgreSQL's "fsyncgate"). The batches it was to cover are never
//      acknowledged (their callers get `storage_failed`), and the store refuses every later write
//      with `storage_failed`, without trying, and reports not ready (ping) until it is opened
//      again, when WAL recovery reads the file: every acknowledged batch was covered by an earlier
//      flush that succeeded; the unacknowledged ones are there wholly or not at all. It stops
//      rather than crashes so that reads (balances, the audit, the durable change feed) go on while
//      an operator looks at the device; a restart is the recovery (docs/operations/disk-faults.md).
//   6. a full disk (SQLITE_FULL: a WAL append found no space) fails the COMMIT itself, before
//      anything was published: the batch answers `storage_full`, nothing of it is written, and the
//      next batch tries again — writes resume by themselves once there is space.
// tests/store/storage_faults_test.cc and tests/faults/storage_faults_http_test.cc check 5 and 6.
// tests/store/power_loss_test.cc checks it: a VFS that forgets every write not yet synced (whole
// or sector by sector) at a random moment, over many seeded cuts; every acknowledged operation
// must be in the reopened file and the audit clean.
//
// Thread safety: as Store — apply() from one thread at a time, sync() from one thread at a time
// (concurrently with apply()), reads from any thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sqlite3.h>

#include <atomic>
#include <cstdint>

#include "core/clock.h"
#include "core/thread_annotations.h"
#include "store/batch_runner.h"
#include "store/conn_pool.h"
#include "store/reads.h"
#include "store/schema.h"
#include "store/sqlite/sqlite_reads.h"
#include "store/store.h"

namespace tollgate {

namespace sqlite {
class Conn;
}

// An exclusive advisory lock (flock) on a file, held while the object lives.
class FileLock {
 public:
  FileLock() = default;
  explicit FileLock(int fd) : fd_(fd) {}
  ~FileLock();
  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

struct SqliteOptions {
  std::string path;             // the database file; created when missing
  int busy_timeout_ms = limits::kSqliteBusyTimeoutMsDefault;  // how long a statement waits for a lock held by another process
  int readers_max = limits::kSqliteReadersMaxDefault;  // reader connections kept open
  // A read waits at most this long for a free reader connection, then answers `unavailable`.
  std::int64_t lease_wait_ms = limits::kConnLeaseWaitMsDefault;
  int cache_size_kib = limits::kSqliteCacheKibDefault;
  // A background connection checkpoints the WAL into the database file every this often, so that
  // commits do not pay for checkpoints. 0: SQLite checkpoints inside commits (its default).
  int checkpoint_interval_ms = limits::kSqliteCheckpointIntervalMsDefault;
  // The writer still checkpoints by itself past this many WAL pages (a bound if the background
  // checkpointer falls behind).
  int wal_autocheckpoint_pages = limits::kSqliteWalAutocheckpointPagesDefault;
  // The SQLite VFS under every connection (and the WAL flush), beneath the store's WAL batching
  // layer (wal_batching_vfs.h); empty: the default one. Tests register a VFS that simulates power loss.
  std::string vfs;
  // The WAL batching layer (wal_batching_vfs.h): on unless a benchmark measures what it saves.
  bool batch_wal_writes = true;
  // The page size of a new database file (an existing one keeps its own; 0: SQLite's 4096). Every
  // dirty page is flushed whole: a reservation dirties about seven (the account, the hold row, its
  // four indexes — one a random leaf of request ids —, the event and its index), so smaller pages
  // make each flush smaller. Measured here (ledger_bench --page-size, same minutes, baseline on the
  // same page size): 1 KiB against 4 KiB — one caller +35%, spread/64 +16%, hot/64 unchanged.
  int page_size_bytes = 1024;
};

class SqliteStore final : public Store {
 public:
  // The schema version this binary writes and expects.
  static constexpr int kSchemaVersion = schema::kCurrentVersion;  // store/schema.h, as every backend

  // Opens or creates the database and migrates its schema. `clock` must outlive the store.
  static Result<std::unique_ptr<SqliteStore>> open(const SqliteOptions& options, const Clock& clock);
  ~SqliteStore() override;

  Status apply(std::span<const Command> commands, std::vector<CommandResult>& results) override;
  Status sync() override;
  Result<Account> get_account(std::string_view account_id) override;
  Result<Hold> get_hold(std::string_view hold_id) override;
  Result<EventPage> read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) override;
  // Only events a completed sync() made durable (the last one it covered: last_event_id()).
  Result<EventPage> read_feed(std::int64_t after, std::int64_t limit) override;
  Result<std::int64_t> last_event_id() override { return durable_event_id_.load(std::memory_order_acquire); }
  Result<AuditReport> audit(std::optional<std::string_view> account_id) override;
  Result<AuditPage> audit_range(std::string_view after, std::int64_t limit) override;
  ListReads& lists() override { return lists_; }
  jobs::JobReads& jobs() override { return jobs_; }
  coord::CoordReads& coord() override { return coord_; }
  webhooks::WebhookReads& webhooks() override { return webhooks_; }
  payments::PaymentReads& payments() override { return payments_; }
  prices::PriceReads& prices() override { return prices_; }
  Result<LedgerStats> stats() override;
  Result<std::vector<std::string>> list_account_ids(std::string_view after, std::int64_t limit) override;
  Result<KeyLookup> find_key(std::string_view secret_sha256) override;
  Result<bool> has_admin_key() override;
  Status ping() override;
  std::int64_t now_ms() override { return clock_.now_ms(); }

  const BatchRunCounters& counters() const { return counters_; }

 private:
  SqliteStore(SqliteOptions options, const Clock& clock, FileLock lock, std::string vfs, const char* wal_path,
              std::unique_ptr<sqlite::Conn> writer);
  void checkpoint_loop();
  template <typename F>
  auto read(F&& body) -> decltype(body(std::declval<sqlite::Conn&>()));

  // Constant after construction.
  const SqliteOptions options_;
  const Clock& clock_;
  // The exclusive flock on the database file; closed last, after every connection (a descriptor
  // of the file closed earlier would drop this process's POSIX locks on it, SQLite's included).
  FileLock lock_;
  const std::string vfs_;       // the WAL batching layer over options_.vfs: every connection's VFS
  // The WAL file's name: SQLite's filename object, owned by writer_ (sync() opens the WAL with it).
  const char* const wal_path_;
  // Used only by the thread in apply().
  std::unique_ptr<sqlite::Conn> writer_;
  BatchRunCounters counters_;
  // Used only by the thread in sync(): the WAL file, opened through the store's VFS on first use.
  Mutex sync_mu_;
  std::unique_ptr<sqlite3_file, void (*)(sqlite3_file*)> wal_ GUARDED_BY(sync_mu_){nullptr, nullptr};
  // Set when a flush failed: every later write answers `storage_failed` (see the argument above).
  std::atomic<bool> flush_failed_{false};
  // The change feed shows only durable events: the largest event id committed (set by apply()
  // after its COMMIT), and the largest a completed sync() covered (the committed id it read before
  // it flushed). One writer: ids increase with commit order.
  std::atomic<std::int64_t> committed_event_id_{0};
  std::atomic<std::int64_t> durable_event_id_{0};
  ConnPool<sqlite::Conn> readers_;
  sqlite::SqliteReadSource source_;  // reads through readers_
  reads::LedgerReads ledger_;        // these four through source_
  reads::Lists lists_;
  reads::JobReads jobs_;
  reads::CoordReads coord_;
  reads::WebhookReads webhooks_;
  reads::PaymentReads payments_;
  reads::PriceReads prices_;
  // Background checkpointer.
  Mutex checkpoint_mu_;
  CondVar checkpoint_cv_;
  bool checkpoint_stopping_ GUARDED_BY(checkpoint_mu_) = false;
  std::thread checkpointer_;
};

}  // namespace tollgate
