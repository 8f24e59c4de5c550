// tollgate store/sqlite: the embedded store — one SQLite file, one writer, many readers.
//
// Opened in WAL mode with synchronous=FULL (a commit is on disk before apply() returns), a busy
// time-out and foreign keys on. apply() runs on one writer connection inside BEGIN IMMEDIATE … COMMIT;
// reads use a small pool of reader connections that see the last committed state without blocking
// the writer. The schema is versioned and migrated at open().
//
// One process owns the file for writing: run one `tollgate serve` per SQLite database (for many
// instances, use PostgreSQL). A second writer process would wait on the busy time-out, not corrupt.
//
// Thread safety: as Store — apply() from one thread at a time; reads from any thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "store/conn_pool.h"
#include "store/store.h"

namespace tollgate {

namespace sqlite {
class Conn;
}

struct SqliteOptions {
  std::string path;             // the database file; created when missing
  int busy_timeout_ms = 5000;   // how long a statement waits for a lock held by another process
  int readers_max = 4;          // reader connections kept open
  int cache_size_kib = 64 * 1024;
  // A background connection checkpoints the WAL into the database file every this often, so that
  // commits do not pay for checkpoints. 0: SQLite checkpoints inside commits (its default).
  int checkpoint_interval_ms = 100;
  // The writer still checkpoints by itself past this many WAL pages (a bound if the background
  // checkpointer falls behind).
  int wal_autocheckpoint_pages = 20'000;
};

class SqliteStore final : public Store {
 public:
  // The schema version this binary writes and expects.
  static constexpr int kSchemaVersion = 2;

  // Opens or creates the database and migrates its schema. `clock` must outlive the store.
  static Result<std::unique_ptr<SqliteStore>> open(const SqliteOptions& options, const Clock& clock);
  ~SqliteStore() override;

  Status apply(std::span<const Command> commands, std::vector<CommandResult>& results) override;
  Result<Account> get_account(std::string_view account_id) override;
  Result<Hold> get_hold(std::string_view hold_id) override;
  Result<std::vector<Hold>> list_holds(const HoldFilter& filter) override;
  Result<EventPage> read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) override;
  Result<AuditReport> audit(std::optional<std::string_view> account_id) override;
  Result<LedgerStats> stats() override;
  Result<std::vector<std::string>> list_account_ids(std::string_view after, std::int64_t limit) override;
  Result<std::optional<ApiKey>> find_key(std::string_view secret_sha256) override;
  Result<bool> has_admin_key() override;
  Status ping() override;
  std::int64_t now_ms() override { return clock_.now_ms(); }

 private:
  SqliteStore(SqliteOptions options, const Clock& clock, std::unique_ptr<sqlite::Conn> writer);
  void checkpoint_loop();
  template <typename F>
  auto read(F&& body) -> decltype(body(std::declval<sqlite::Conn&>()));

  // Constant after construction.
  const SqliteOptions options_;
  const Clock& clock_;
  // Used only by the thread in apply().
  std::unique_ptr<sqlite::Conn> writer_;
  ConnPool<sqlite::Conn> readers_;
  // Background checkpointer.
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  bool checkpoint_stopping_ = false;  // protected by checkpoint_mu_
  std::thread checkpointer_;
};

}  // namespace tollgate
