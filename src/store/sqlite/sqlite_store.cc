#include "store/sqlite/sqlite_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/log.h"
#include "core/limits.h"
#include "store/schema.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/sqlite_read.h"
#include "store/sqlite/sqlite_write.h"
#include "store/sqlite/wal_batching_vfs.h"

namespace tollgate {
namespace {

using sqlite::Conn;
using sqlite::Query;
using sqlite::sql_failure;
using sqlite::SqlError;
using sqlite::Stmt;

// --- schema ---------------------------------------------------------------------------------------
// The versions and their DDL: store/schema.cc. SQLite's connection for schema::migrate().
class SchemaConn final : public schema::Connection {
 public:
  explicit SchemaConn(Conn& db) : db_(db) {}
  void exec(const std::string& sql) override { db_.exec(sql.c_str()); }
  std::int64_t query_int(const std::string& sql) override {
    Stmt q(db_.raw(), sql);  // not the connection's cache: that is keyed by the text's address
    TG_ASSERT(q.step());
    return q.int64(0);
  }

 private:
  Conn& db_;
};

Error flush_failure() {
  return Error::make(Code::storage_failed,
                     "the database file could not be flushed to disk; writes are refused until tollgate restarts");
}

int schema_version(Conn& db) {
  Query exists(db.stmt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"));
  TG_ASSERT(exists.step());
  if (exists->int64(0) == 0) return 0;
  Query q(db.stmt("SELECT coalesce(max(version), 0) FROM schema_migrations"));
  TG_ASSERT(q.step());
  return static_cast<int>(q->int64(0));
}

std::int64_t max_event_id(Conn& db) {
  Query q(db.stmt("SELECT coalesce(max(event_id), 0) FROM events"));
  TG_ASSERT(q.step());
  return q->int64(0);
}

void raise_to(std::atomic<std::int64_t>& value, std::int64_t at_least) {
  std::int64_t now = value.load(std::memory_order_acquire);
  while (now < at_least && !value.compare_exchange_weak(now, at_least, std::memory_order_acq_rel)) {
  }
}

// Brings the file's schema to the current version in one transaction (store/schema.h).
// A migration may rebuild a table that others refer to (SQLite cannot change a CHECK in place: its
// documented twelve steps — a new table, the rows copied, the old one dropped, the new one renamed).
// Foreign keys are off while it runs (the pragma is a no-op inside a transaction) and, when a version
// was applied, every reference is checked before the commit: a violation rolls the migration back.
// (A start with nothing to migrate checks nothing: the check reads every referring table.)
Status migrate(Conn& writer, const Clock& clock, const std::string& path) {
  writer.exec("PRAGMA foreign_keys=OFF");
  writer.exec("BEGIN IMMEDIATE");
  try {
    const int version_before = schema_version(writer);
    SchemaConn schema_conn(writer);
    Status migrated = schema::migrate(schema::Dialect::sqlite, schema_conn, clock.now_ms(), path);
    if (migrated && schema_version(writer) != version_before) {
      Query broken(writer.stmt("PRAGMA foreign_key_check"));
      if (broken.step()) {
        migrated = Error::make(Code::internal, "the schema migration of " + path + " left table " + broken->text(0) +
                                                   " referring to a row that does not exist");
      }
    }
    writer.exec(migrated ? "COMMIT" : "ROLLBACK");
    writer.exec("PRAGMA foreign_keys=ON");
    return migrated;
  } catch (...) {
    sqlite3_exec(writer.raw(), "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_exec(writer.raw(), "PRAGMA foreign_keys=ON", nullptr, nullptr, nullptr);
    throw;
  }
}

}  // namespace

// Runs `body` on a reader inside one read transaction (one snapshot); SQL failures become errors.
template <typename F>
auto SqliteStore::read(F&& body) -> decltype(body(std::declval<sqlite::Conn&>())) {
  return sqlite::read_snapshot(readers_, std::forward<F>(body));
}

// --- open / migrate -------------------------------------------------------------------------------
FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

SqliteStore::SqliteStore(SqliteOptions options, const Clock& clock, FileLock lock, std::string vfs,
                         const char* wal_path, std::unique_ptr<sqlite::Conn> writer)
    : options_(std::move(options)),
      clock_(clock),
      lock_(std::move(lock)),
      vfs_(std::move(vfs)),
      wal_path_(wal_path),
      writer_(std::move(writer)),
      readers_(options_.readers_max, options_.lease_wait_ms, [this] {
        sqlite::OpenOptions open;
        open.read_only = true;
        open.busy_timeout_ms = options_.busy_timeout_ms;
        open.cache_size_kib = options_.cache_size_kib / 4;
        open.vfs = vfs_.empty() ? nullptr : vfs_.c_str();
        return std::make_unique<Conn>(options_.path, open);
      }),
      source_(readers_, clock),
      ledger_(source_),
      lists_(source_),
      jobs_(source_),
      coord_(source_),
      webhooks_(source_),
      payments_(source_),
      prices_(source_) {
  if (options_.checkpoint_interval_ms > 0) checkpointer_ = std::thread([this] { checkpoint_loop(); });
}

SqliteStore::~SqliteStore() {
  {
    MutexLock lock(checkpoint_mu_);
    checkpoint_stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
}

void SqliteStore::checkpoint_loop() {
  std::unique_ptr<Conn> conn;
  MutexLock lock(checkpoint_mu_);
  while (!checkpoint_cv_.wait_for(checkpoint_mu_, std::chrono::milliseconds(options_.checkpoint_interval_ms),
                                  [&]() REQUIRES(checkpoint_mu_) { return checkpoint_stopping_; })) {
    lock.unlock();
    try {
      if (!conn) {
        sqlite::OpenOptions open;
        open.busy_timeout_ms = 0;  // a passive checkpoint never waits
        open.cache_size_kib = 1024;
        open.synchronous = "FULL";  // checkpoints sync the WAL before copying, the database after
        open.vfs = vfs_.empty() ? nullptr : vfs_.c_str();
        conn = std::make_unique<Conn>(options_.path, open);
      }
      // PASSIVE: copies what it can without blocking the writer or readers; it syncs the WAL
      // before copying and the database file after, off the commit path.
      sqlite3_wal_checkpoint_v2(conn->raw(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    } catch (const SqlError& e) {
      log("warn", std::string("sqlite checkpointer: ") + e.what());
      conn.reset();
    }
    lock.lock();
  }
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const SqliteOptions& options, const Clock& clock) {
  if (options.path.empty()) return invalid("the SQLite database path is empty");
  if (options.readers_max < 1) return invalid("readers_max must be at least 1");
  if (options.lease_wait_ms < 0) return invalid("lease_wait_ms must be 0 or more");
  // One process owns the file (see sqlite_store.h); the lock goes with the process, also on kill -9.
  const int lock_fd = ::open(options.path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return Error::make(Code::unavailable, "cannot open " + options.path + ": " + std::strerror(errno));
  }
  FileLock lock(lock_fd);
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      return Error::make(Code::conflict, options.path + " is in use by another tollgate process: run one `tollgate "
                                                         "serve` per SQLite file (for many instances, use PostgreSQL)");
    }
    return Error::make(Code::unavailable, "cannot lock " + options.path + ": " + std::strerror(err));
  }
  // Every connection goes through the WAL batching layer (wal_batching_vfs.h) over the chosen VFS.
  Result<std::string> vfs = options.batch_wal_writes ? sqlite::register_wal_batching_vfs(options.vfs)
                                                     : Result<std::string>(options.vfs);
  if (!vfs) return vfs.error();
  try {
    sqlite::OpenOptions open;
    open.busy_timeout_ms = options.busy_timeout_ms;
    open.cache_size_kib = options.cache_size_kib;
    open.synchronous = "NORMAL";  // the WAL is flushed by sync(), off the writer's path
    open.page_size_bytes = options.page_size_bytes;
    open.vfs = vfs->empty() ? nullptr : vfs->c_str();
    auto writer = std::make_unique<Conn>(options.path, open);
    if (options.checkpoint_interval_ms > 0) {
      const std::string pages = "PRAGMA wal_autocheckpoint=" + std::to_string(options.wal_autocheckpoint_pages);
      writer->exec(pages.c_str());
    }
    writer->exec("PRAGMA journal_size_limit=67108864");  // truncate a WAL that grew past 64 MiB once reset
    {
      Query mode(writer->stmt("PRAGMA journal_mode"));
      if (!mode.step() || mode->text(0) != "wal") {
        return Error::make(Code::internal, "could not put " + options.path + " in WAL mode");
      }
    }
    if (Status migrated = migrate(*writer, clock, options.path); !migrated) return migrated.error();
    // The migration's commit is durable before the store is handed out.
    // The WAL's name as SQLite made it (a filename object of the writer connection, valid while
    // it is open: a VFS may read the URI parameters around it).
    const char* wal_path = sqlite3_filename_wal(sqlite3_db_filename(writer->raw(), "main"));
    const std::int64_t last_event_id = max_event_id(*writer);
    auto store = std::unique_ptr<SqliteStore>(
        new SqliteStore(options, clock, std::move(lock), std::move(*vfs), wal_path, std::move(writer)));
    store->committed_event_id_.store(last_event_id, std::memory_order_release);
    if (auto synced = store->sync(); !synced) return synced.error();
    return store;
  } catch (const SqlError& e) {
    return sql_failure(e);
  }
}

// --- writes ---------------------------------------------------------------------------------------
Status SqliteStore::apply(std::span<const Command> commands, std::vector<CommandResult>& results) {
  if (flush_failed_.load(std::memory_order_acquire)) return flush_failure();
  sqlite::SqliteBatchIo io(*writer_, clock_);
  Status applied = run_batch(io, commands, results, BatchRunOptions{}, counters_);
  // Also after a failed batch: a batch isolated into one command per transaction may have
  // committed some of them.
  raise_to(committed_event_id_, io.last_event_id());
  return applied;
}

Status SqliteStore::sync() {
  MutexLock lock(sync_mu_);
  if (flush_failed_.load(std::memory_order_acquire)) return flush_failure();
  if (!wal_) {
    // The WAL file through the store's VFS (its own handle: the writer's is the writer's thread's).
    // Opened for creation, so its first sync also syncs the directory (unix VFS: DIRSYNC).
    sqlite3_vfs* vfs = sqlite3_vfs_find(vfs_.empty() ? nullptr : vfs_.c_str());
    TG_ASSERT(vfs != nullptr);  // open() opened the database through it
    auto* file = static_cast<sqlite3_file*>(sqlite3_malloc(vfs->szOsFile));
    if (file == nullptr) return Error::make(Code::unavailable, "out of memory opening the WAL");
    std::memset(file, 0, static_cast<std::size_t>(vfs->szOsFile));
    std::unique_ptr<sqlite3_file, void (*)(sqlite3_file*)> handle(file, [](sqlite3_file* f) {
      if (f->pMethods != nullptr) f->pMethods->xClose(f);
      sqlite3_free(f);
    });
    int out_flags = 0;
    const int rc = vfs->xOpen(vfs, wal_path_, file,
                              SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_WAL, &out_flags);
    if (rc != SQLITE_OK) {
      return Error::make(Code::unavailable, "cannot open the WAL " + std::string(wal_path_) + " to flush it: " +
                                                sqlite3_errstr(rc));
    }
    wal_ = std::move(handle);
  }
  // Read before the flush: every batch that set it committed (its frames written) before this
  // flush starts, so the flush makes it durable.
  const std::int64_t committed_event_id = committed_event_id_.load(std::memory_order_acquire);
  const int rc = wal_->pMethods->xSync(wal_.get(), SQLITE_SYNC_NORMAL);
  if (rc != SQLITE_OK) {
    flush_failed_.store(true, std::memory_order_release);
    log("error", "sqlite: flushing the WAL failed (" + std::string(sqlite3_errstr(rc)) +
                     "); refusing writes until tollgate is restarted (check the device and the kernel log "
                     "first: a restart recovers from the WAL as it is on disk)");
    return flush_failure();
  }
  raise_to(durable_event_id_, committed_event_id);
  return ok_status();
}

// --- reads ----------------------------------------------------------------------------------------
Result<Account> SqliteStore::get_account(std::string_view account_id) { return ledger_.get_account(account_id); }

Result<Hold> SqliteStore::get_hold(std::string_view hold_id) { return ledger_.get_hold(hold_id); }

Result<EventPage> SqliteStore::read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) {
  return ledger_.read_events(account_id, after, limit);
}

Result<EventPage> SqliteStore::read_feed(std::int64_t after, std::int64_t limit) {
  return ledger_.read_feed(after, limit, durable_event_id_.load(std::memory_order_acquire));
}

Result<AuditReport> SqliteStore::audit(std::optional<std::string_view> account_id) { return ledger_.audit(account_id); }

Result<AuditPage> SqliteStore::audit_range(std::string_view after, std::int64_t limit) {
  return ledger_.audit_range(after, limit);
}

Result<KeyLookup> SqliteStore::find_key(std::string_view secret_sha256) {
  return ledger_.find_key(secret_sha256);
}

Result<LedgerStats> SqliteStore::stats() { return ledger_.stats(); }

Result<std::vector<std::string>> SqliteStore::list_account_ids(std::string_view after, std::int64_t limit) {
  return ledger_.list_account_ids(after, limit);
}

Result<bool> SqliteStore::has_admin_key() { return ledger_.has_admin_key(); }

Status SqliteStore::ping() {
  // Not ready after a failed flush (see the power-loss argument, point 5): reads still work, but
  // no write will until a restart.
  if (flush_failed_.load(std::memory_order_acquire)) return flush_failure();
  return read([&](Conn& db) -> Status {
    const int version = schema_version(db);
    if (version != kSchemaVersion) {
      return Error::make(Code::unavailable, "schema version " + std::to_string(version) + ", expected " +
                                                std::to_string(kSchemaVersion));
    }
    return ok_status();
  });
}

}  // namespace tollgate
