// tollgate store/postgres: the shared store — many `tollgate serve` instances, one PostgreSQL.
//
// Each instance batches its writes (group commit) into one transaction on its writer connection;
// instances run such transactions concurrently and PostgreSQL's row locks order them. The ledger's
// logic is the same as SQLite's (store/execute.cc over the Transaction primitives); what differs:
//   - time is the database's (clock_timestamp(), read once per batch and once per read), so
//     instances with skewed clocks agree on every expiry; tests may inject a Clock instead;
//   - a hold or account row about to change is read FOR UPDATE, the reaper's pass takes overdue
//     holds FOR UPDATE SKIP LOCKED, so every instance's reaper can run at once and each overdue
//     hold expires exactly once;
//   - event_id comes from a sequence and is taken only while the transaction holds the account's
//     row lock (every event follows a write or a FOR UPDATE read of its account row), so the
//     events of one account — the only order the API exposes — increase with commit order;
//   - a batch that lost a race to another instance (unique violation on a request_id or a
//     reference, deadlock, serialization failure) is rolled back and run again, where the winner's
//     effects are visible (a retried reserve is then a replay);
//   - a lost connection: the batch (or read) runs once more on a new connection — safe even when
//     the COMMIT's answer was what got lost, since every command is idempotent (request_id,
//     reference, hold state) and a batch that did commit replays. If that fails too the batch
//     answers `unavailable` (all of it or none of it happened: the commit is atomic; the client's
//     retry with the same ids settles which) and the next call connects again — libpq multi-host
//     URIs with target_session_attrs=read-write follow a fail-over to a promoted standby.
// Commits are durable: the session sets synchronous_commit=on.
//
// The schema is versioned and migrated at open() under an advisory lock, so instances starting
// together do not race. Every table lives in the connection's current schema (the URI may set
// search_path via options=-csearch_path=…, which the tests use for one fresh schema per test).
//
// Thread safety: as Store — apply() from one thread at a time; reads from any thread (a pool of
// reader connections, opened on demand up to `readers_max`).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/clock.h"
#include "store/conn_pool.h"
#include "store/store.h"

namespace tollgate {

namespace pg {
class Conn;
}

struct PgOptions {
  std::string uri;                  // libpq URI: postgresql://user@host:port/db?…
  int readers_max = 8;              // reader connections kept open (the writer is one more)
  int connect_timeout_ms = 5000;    // to open a connection
  int statement_timeout_ms = 5000;  // any one statement or lock wait; a stuck database answers 503
  int conflict_retries_max = 16;    // batch re-runs after losing a race to another instance
  // nullptr: the database's clock (production). Tests inject a ManualClock to drive expiry.
  const Clock* clock = nullptr;
};

class PgStore final : public Store {
 public:
  static constexpr int kSchemaVersion = 2;

  // Connects, migrates the schema (under an advisory lock) and returns the store.
  static Result<std::unique_ptr<PgStore>> open(const PgOptions& options);
  ~PgStore() override;

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
  // The database's clock (one query), or the injected one. 0 if the database cannot be reached.
  std::int64_t now_ms() override;

 private:
  explicit PgStore(PgOptions options);
  template <typename F>
  auto read(F&& body) -> decltype(body(std::declval<pg::Conn&>(), std::int64_t{}));
  Status apply_once(std::span<const Command> commands, std::vector<bool>& dropped,
                    std::vector<CommandResult>& results, std::size_t& current, bool& command_failed);

  const PgOptions options_;
  // Used only by the thread in apply(); null until connected, dropped when the connection breaks.
  std::unique_ptr<pg::Conn> writer_;
  ConnPool<pg::Conn> readers_;  // a broken connection is dropped, not given back
};

}  // namespace tollgate
