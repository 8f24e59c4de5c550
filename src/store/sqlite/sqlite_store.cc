#include "store/sqlite/sqlite_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/invariants.h"
#include "core/log.h"
#include "core/limits.h"
#include "core/rules.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/sqlite_read.h"
#include "store/sqlite/sqlite_rows.h"
#include "store/sqlite/sqlite_write.h"
#include "store/sqlite/wal_batching_vfs.h"

namespace tollgate {
namespace {

using sqlite::account_row;
using sqlite::account_view;
using sqlite::Conn;
using sqlite::hold_by_id;
using sqlite::kEventColumns;
using sqlite::kHoldColumns;
using sqlite::kKeyColumns;
using sqlite::Query;
using sqlite::read_event;
using sqlite::read_hold;
using sqlite::read_key;
using sqlite::sql_failure;
using sqlite::SqlError;
using sqlite::Stmt;

// --- schema ---------------------------------------------------------------------------------------
// Migration N takes the schema from version N−1 to N. Never edit a shipped migration: add one.
// The CHECK constraints repeat the invariants, so even a bug cannot store a broken row; the
// triggers keep the event log append-only.
constexpr const char* kMigrations[] = {
    // 1: accounts, holds, transfers, events
    R"sql(
CREATE TABLE accounts (
  account_id       TEXT    PRIMARY KEY,
  available        INTEGER NOT NULL,
  reserved         INTEGER NOT NULL CHECK (reserved >= 0),
  used             INTEGER NOT NULL CHECK (used >= 0),
  purchased        INTEGER NOT NULL,
  overdraft_limit  INTEGER NOT NULL CHECK (overdraft_limit >= 0),
  max_active_holds INTEGER CHECK (max_active_holds IS NULL OR max_active_holds >= 1),
  active_holds     INTEGER NOT NULL CHECK (active_holds >= 0),
  created_at_ms    INTEGER NOT NULL,
  CHECK (available + reserved + used = purchased),
  CHECK (available >= -overdraft_limit)
) WITHOUT ROWID;

CREATE TABLE holds (
  seq              INTEGER PRIMARY KEY,           -- creation order (newest first = seq DESC)
  hold_id          TEXT    NOT NULL,              -- 'hold_<seq>_<random>': found by seq, checked whole
  account_id       TEXT    NOT NULL REFERENCES accounts(account_id),
  request_id       TEXT    NOT NULL UNIQUE,
  amount           INTEGER NOT NULL CHECK (amount >= 1),
  committed_amount INTEGER NOT NULL CHECK (committed_amount >= 0 AND committed_amount <= amount),
  status           TEXT    NOT NULL CHECK (status IN ('active', 'committed', 'released', 'expired')),
  late_outcome     TEXT    CHECK (late_outcome IS NULL OR (status = 'expired' AND late_outcome IN ('charged', 'forgiven'))),
  created_at_ms    INTEGER NOT NULL,
  expires_at_ms    INTEGER NOT NULL,
  closed_at_ms     INTEGER,
  metadata         TEXT    NOT NULL
);
CREATE INDEX holds_by_account ON holds(account_id);   -- (account_id, seq): newest first per account
CREATE INDEX holds_active_by_deadline ON holds(expires_at_ms) WHERE status = 'active';
CREATE INDEX holds_active_by_account ON holds(account_id, expires_at_ms) WHERE status = 'active';

CREATE TABLE transfers (
  reference   TEXT    PRIMARY KEY,
  account_id  TEXT    NOT NULL REFERENCES accounts(account_id),
  kind        TEXT    NOT NULL CHECK (kind IN ('credited', 'debited')),
  amount      INTEGER NOT NULL CHECK (amount >= 1),
  reason      TEXT    NOT NULL,
  event_id    INTEGER NOT NULL
) WITHOUT ROWID;

-- event_id is the rowid: events are never deleted, so max(rowid)+1 increases strictly with commit
-- order (one writer); AUTOINCREMENT would only add a write per insert.
CREATE TABLE events (
  event_id        INTEGER PRIMARY KEY,
  account_id      TEXT    NOT NULL REFERENCES accounts(account_id),
  type            TEXT    NOT NULL,
  amount          INTEGER NOT NULL CHECK (amount >= 0),
  hold_id         TEXT,
  job_id          TEXT,
  reference       TEXT,
  at_ms           INTEGER NOT NULL,
  available_after INTEGER NOT NULL,
  reserved_after  INTEGER NOT NULL,
  used_after      INTEGER NOT NULL
);
CREATE INDEX events_by_account ON events(account_id);  -- (account_id, event_id)
CREATE TRIGGER events_are_never_updated BEFORE UPDATE ON events
  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
CREATE TRIGGER events_are_never_deleted BEFORE DELETE ON events
  BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
)sql",
    // 2: API keys (only the SHA-256 of a secret is stored)
    R"sql(
CREATE TABLE api_keys (
  key_id         TEXT    PRIMARY KEY,
  account_id     TEXT    REFERENCES accounts(account_id),   -- NULL: an admin key
  secret_sha256  TEXT    NOT NULL UNIQUE,
  created_at_ms  INTEGER NOT NULL,
  revoked_at_ms  INTEGER
) WITHOUT ROWID;
)sql",
    // 3: the last use of an API key (ledger/key_use.h); the key list's order, newest first
    // (store/lists.h), of every key and of one account's
    R"sql(
ALTER TABLE api_keys ADD COLUMN last_used_at_ms INTEGER;
CREATE INDEX api_keys_newest_first ON api_keys(created_at_ms, key_id);
CREATE INDEX api_keys_by_account ON api_keys(account_id, created_at_ms, key_id);
)sql",
    // 4: account settings that change (frozen; account_updated events carry the settings after
    // the change), the reason of a release (on the hold and on its event; a debit's event too)
    R"sql(
ALTER TABLE accounts ADD COLUMN frozen INTEGER NOT NULL DEFAULT 0 CHECK (frozen IN (0, 1));
ALTER TABLE holds ADD COLUMN release_reason TEXT CHECK (release_reason IS NULL OR status = 'released');
ALTER TABLE events ADD COLUMN reason TEXT;
ALTER TABLE events ADD COLUMN overdraft_limit INTEGER CHECK (overdraft_limit IS NULL OR overdraft_limit >= 0);
ALTER TABLE events ADD COLUMN max_active_holds INTEGER CHECK (max_active_holds IS NULL OR max_active_holds >= 1);
ALTER TABLE events ADD COLUMN frozen INTEGER
  CHECK ((frozen IS NULL OR frozen IN (0, 1)) AND (frozen IS NOT NULL) = (type = 'account_updated')
         AND (overdraft_limit IS NOT NULL) = (type = 'account_updated')
         AND (max_active_holds IS NULL OR type = 'account_updated'));
)sql",
    // 5: jobs (jobs/job.h) — written with their holds in the same batches — and their histories
    R"sql(
CREATE TABLE jobs (
  client_request_id   TEXT PRIMARY KEY,
  account_id          TEXT NOT NULL,
  cost                INTEGER NOT NULL CHECK (cost >= 1),
  provider            TEXT NOT NULL,
  input               TEXT NOT NULL,
  status              TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
  hold_id             TEXT NOT NULL UNIQUE,
  hold_seq            INTEGER NOT NULL UNIQUE,  -- the hold's sequence number: the list's order
  attempts            INTEGER NOT NULL CHECK (attempts >= 0),
  result              TEXT,
  error               TEXT,
  charged             INTEGER NOT NULL CHECK (charged IN (0, 1) AND (charged = 0 OR status = 'completed')),
  created_at_ms       INTEGER NOT NULL,
  updated_at_ms       INTEGER NOT NULL,
  lease_owner         TEXT,
  lease_expires_at_ms INTEGER,
  CHECK ((lease_owner IS NULL) = (lease_expires_at_ms IS NULL))
);
CREATE INDEX jobs_by_account ON jobs(account_id, hold_seq);
CREATE INDEX jobs_by_status ON jobs(status, hold_seq);
CREATE INDEX jobs_by_account_status ON jobs(account_id, status, hold_seq);
CREATE INDEX jobs_unended_by_lease ON jobs(lease_expires_at_ms) WHERE status IN ('pending', 'running');
CREATE TABLE job_history (
  entry_id          INTEGER PRIMARY KEY,  -- increasing: the story's order
  client_request_id TEXT NOT NULL,
  at_ms             INTEGER NOT NULL,
  kind              TEXT NOT NULL,
  attempt           INTEGER CHECK (attempt IS NULL OR attempt >= 1),
  detail            TEXT NOT NULL
);
CREATE INDEX job_history_by_job ON job_history(client_request_id, entry_id);
CREATE TRIGGER job_history_is_never_updated BEFORE UPDATE ON job_history
  BEGIN SELECT RAISE(ABORT, 'job_history is append-only'); END;
CREATE TRIGGER job_history_is_never_deleted BEFORE DELETE ON job_history
  BEGIN SELECT RAISE(ABORT, 'job_history is append-only'); END;
)sql",
    // 6: locks, idempotency keys and shared rate limits (coord/coord.h), written through the batches
    R"sql(
CREATE TABLE locks (
  key           TEXT    PRIMARY KEY,
  owner         TEXT,
  fence         INTEGER NOT NULL CHECK (fence >= 1),
  expires_at_ms INTEGER,
  cancelled     INTEGER NOT NULL CHECK (cancelled IN (0, 1)),
  updated_at_ms INTEGER NOT NULL,
  CHECK ((owner IS NULL) = (expires_at_ms IS NULL)),
  CHECK (cancelled = 0 OR owner IS NOT NULL)
) WITHOUT ROWID;
CREATE TRIGGER locks_are_never_deleted BEFORE DELETE ON locks
  BEGIN SELECT RAISE(ABORT, 'a lock row keeps its fence: it is never deleted'); END;
CREATE TRIGGER lock_fences_never_decrease BEFORE UPDATE OF fence ON locks WHEN NEW.fence < OLD.fence
  BEGIN SELECT RAISE(ABORT, 'a lock fence never decreases'); END;
CREATE TABLE idempotency_keys (
  key            TEXT    PRIMARY KEY,
  fingerprint    TEXT    NOT NULL,
  state          TEXT    NOT NULL CHECK (state IN ('started', 'finished', 'abandoned')),
  response       TEXT,
  created_at_ms  INTEGER NOT NULL,
  expires_at_ms  INTEGER NOT NULL,
  finished_at_ms INTEGER,
  attempt        INTEGER NOT NULL CHECK (attempt >= 1),
  CHECK ((state = 'finished') = (response IS NOT NULL AND finished_at_ms IS NOT NULL))
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_by_end ON idempotency_keys(expires_at_ms);  -- the prune pass
CREATE TABLE ratelimits (
  policy TEXT    NOT NULL,
  key    TEXT    NOT NULL,
  tat_ns INTEGER NOT NULL,
  PRIMARY KEY (policy, key)
) WITHOUT ROWID;
CREATE INDEX ratelimits_by_tat ON ratelimits(tat_ns);
)sql",
    // 7: an extended event carries the hold's new deadline (NULL on those written before)
    R"sql(
ALTER TABLE events ADD COLUMN expires_at_ms INTEGER CHECK (expires_at_ms IS NULL OR type = 'extended');
)sql",
};
constexpr int kMigrationCount = static_cast<int>(std::size(kMigrations));
static_assert(kMigrationCount == SqliteStore::kSchemaVersion);

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
      lists_(readers_, clock),
      jobs_(readers_, clock),
      coord_(readers_, clock) {
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
    writer->exec("BEGIN IMMEDIATE");
    try {
      const int version = schema_version(*writer);
      if (version > kSchemaVersion) {
        writer->exec("ROLLBACK");
        return Error::make(Code::internal, options.path + " has schema version " + std::to_string(version) +
                                               ", newer than this tollgate (" + std::to_string(kSchemaVersion) +
                                               "): upgrade tollgate");
      }
      writer->exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at_ms INTEGER NOT NULL)");
      for (int v = version + 1; v <= kSchemaVersion; ++v) {
        writer->exec(kMigrations[v - 1]);
        Query record(writer->stmt("INSERT INTO schema_migrations (version, applied_at_ms) VALUES (?1, ?2)"),
                     std::int64_t{v}, clock.now_ms());
        record.step();
      }
      writer->exec("COMMIT");
    } catch (...) {
      sqlite3_exec(writer->raw(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
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
  if (options_.write_path == SqliteWritePath::per_statement) {
    Status applied = sqlite::apply_per_statement(*writer_, clock_, commands, results);
    if (applied) {
      try {
        raise_to(committed_event_id_, max_event_id(*writer_));
      } catch (const SqlError& e) {
        return sql_failure(e);
      }
    }
    return applied;
  }
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
Result<Account> SqliteStore::get_account(std::string_view account_id) {
  const std::int64_t now = clock_.now_ms();
  return read([&](Conn& db) -> Result<Account> {
    auto a = account_view(db, account_id, now);
    if (!a) return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
    return std::move(*a);
  });
}

Result<Hold> SqliteStore::get_hold(std::string_view hold_id) {
  const std::int64_t now = clock_.now_ms();
  return read([&](Conn& db) -> Result<Hold> {
    auto hold = hold_by_id(db, hold_id);
    if (!hold) return Error::make(Code::not_found, "hold " + std::string(hold_id) + " does not exist");
    return rules::hold_view(std::move(*hold), now);
  });
}

Result<EventPage> SqliteStore::read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kEventsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kEventsPageMax));
  }
  if (after < 0) return invalid("after must be 0 or a previous next_after");
  return read([&](Conn& db) -> Result<EventPage> {
    if (!account_row(db, account_id)) {
      return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
    }
    static const std::string sql = std::string("SELECT ") + kEventColumns +
                                   " FROM events WHERE account_id = ?1 AND event_id > ?2 ORDER BY event_id LIMIT ?3";
    EventPage page;
    page.next_after = after;
    Query q(db.stmt(sql.c_str()), account_id, after, limit);
    while (q.step()) page.events.push_back(read_event(q.row()));
    if (!page.events.empty()) page.next_after = page.events.back().event_id;
    return page;
  });
}

namespace {

// Audits the accounts `ids` (each exists) in the snapshot `db` reads.
AuditReport audit_accounts(Conn& db, const std::vector<std::string>& ids) {
  AuditReport report;
  static const std::string events_sql =
      std::string("SELECT ") + kEventColumns + " FROM events WHERE account_id = ?1 ORDER BY event_id";
  for (const std::string& id : ids) {
    const auto row = account_row(db, id);
    TG_ASSERT(row.has_value());
    std::vector<Event> events;
    {
      Query q(db.stmt(events_sql.c_str()), id);
      while (q.step()) events.push_back(read_event(q.row()));
    }
    Query active(db.stmt("SELECT coalesce(sum(amount), 0), count(*) FROM holds "
                         "WHERE account_id = ?1 AND status = 'active'"),
                 id);
    TG_ASSERT(active.step());
    for (auto& message : invariants::check_account(*row, events, active->int64(0), active->int64(1))) {
      report.violations.push_back(AuditViolation{id, std::move(message)});
    }
    ++report.accounts_checked;
  }
  return report;
}

}  // namespace

Result<EventPage> SqliteStore::read_feed(std::int64_t after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kEventsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kEventsPageMax));
  }
  if (after < 0) return invalid("after must be 0 or a previous next_after");
  const std::int64_t durable = durable_event_id_.load(std::memory_order_acquire);
  return read([&](Conn& db) -> Result<EventPage> {
    static const std::string sql = std::string("SELECT ") + kEventColumns +
                                   " FROM events WHERE event_id > ?1 AND event_id <= ?2 ORDER BY event_id LIMIT ?3";
    EventPage page;
    page.next_after = after;
    Query q(db.stmt(sql.c_str()), after, durable, limit);
    while (q.step()) page.events.push_back(read_event(q.row()));
    if (!page.events.empty()) page.next_after = page.events.back().event_id;
    return page;
  });
}

Result<AuditReport> SqliteStore::audit(std::optional<std::string_view> account_id) {
  return read([&](Conn& db) -> Result<AuditReport> {
    std::vector<std::string> ids;
    if (account_id) {
      if (!account_row(db, *account_id)) {
        return Error::make(Code::not_found, "account " + std::string(*account_id) + " does not exist");
      }
      ids.emplace_back(*account_id);
    } else {
      Query q(db.stmt("SELECT account_id FROM accounts ORDER BY account_id"));
      while (q.step()) ids.push_back(q->text(0));
    }
    return audit_accounts(db, ids);
  });
}

Result<AuditPage> SqliteStore::audit_range(std::string_view after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kHoldsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kHoldsPageMax));
  }
  return read([&](Conn& db) -> Result<AuditPage> {
    std::vector<std::string> ids;
    Query q(db.stmt("SELECT account_id FROM accounts WHERE account_id > ?1 ORDER BY account_id LIMIT ?2"), after, limit);
    while (q.step()) ids.push_back(q->text(0));
    AuditPage page;
    page.report = audit_accounts(db, ids);
    page.last_account_id = ids.empty() ? std::string(after) : ids.back();
    page.has_more = static_cast<std::int64_t>(ids.size()) == limit;
    return page;
  });
}

Result<std::optional<ApiKey>> SqliteStore::find_key(std::string_view secret_sha256) {
  return read([&](Conn& db) -> Result<std::optional<ApiKey>> {
    static const std::string sql = std::string("SELECT ") + kKeyColumns + " FROM api_keys WHERE secret_sha256 = ?1";
    Query q(db.stmt(sql.c_str()), secret_sha256);
    if (!q.step()) return std::optional<ApiKey>();
    return std::optional<ApiKey>(read_key(q.row()));
  });
}

Result<LedgerStats> SqliteStore::stats() {
  const std::int64_t now = clock_.now_ms();
  return read([&](Conn& db) -> Result<LedgerStats> {
    LedgerStats out;
    Query holds(db.stmt("SELECT count(*), min(created_at_ms) FROM holds WHERE status = 'active' AND expires_at_ms > ?1"),
                now);
    TG_ASSERT(holds.step());
    out.active_holds = holds->int64(0);
    if (auto oldest = holds->optional_int64(1)) out.oldest_active_hold_age_ms = std::max<std::int64_t>(0, now - *oldest);
    Query accounts(db.stmt("SELECT count(*) FROM accounts"));
    TG_ASSERT(accounts.step());
    out.accounts = accounts->int64(0);
    return out;
  });
}

Result<std::vector<std::string>> SqliteStore::list_account_ids(std::string_view after, std::int64_t limit) {
  if (limit < 1 || limit > limits::kHoldsPageMax) {
    return invalid("limit must be from 1 to " + std::to_string(limits::kHoldsPageMax));
  }
  return read([&](Conn& db) -> Result<std::vector<std::string>> {
    std::vector<std::string> out;
    Query q(db.stmt("SELECT account_id FROM accounts WHERE account_id > ?1 ORDER BY account_id LIMIT ?2"), after, limit);
    while (q.step()) out.push_back(q->text(0));
    return out;
  });
}

Result<bool> SqliteStore::has_admin_key() {
  return read([&](Conn& db) -> Result<bool> {
    Query q(db.stmt("SELECT EXISTS (SELECT 1 FROM api_keys WHERE account_id IS NULL AND revoked_at_ms IS NULL)"));
    TG_ASSERT(q.step());
    return q->int64(0) != 0;
  });
}

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
