// tollgate store/postgres: the shared store — many `tollgate serve` instances, one PostgreSQL.
//
// Each instance batches its writes (group commit) into one transaction on its writer connection;
// instances run such transactions concurrently and PostgreSQL's row locks order them. A batch is
// decided the same way as on SQLite (core/batch.h, run by store/batch_runner.h; the statements are
// in pg_write.h); what differs:
//   - time is the database's (clock_timestamp(), read once per batch and once per read), so
//     instances with skewed clocks agree on every expiry; tests may inject a Clock instead;
//   - a batch locks every account it may change FOR UPDATE, in id order, before it reads any hold,
//     and decides under those locks; the reaper's pass takes the accounts of overdue holds FOR
//     UPDATE SKIP LOCKED, so every instance's reaper can run at once, each overdue hold expires
//     exactly once, and the one lock a batch waits for is always taken in the same order (no
//     deadlock between instances);
//   - event ids increase with commit order over every instance (the change feed, GET /v1/events,
//     relies on it): a batch takes its ids from the one-row table event_ids with an UPDATE, as the
//     LAST lock it takes — after its accounts, holds and keys — in the statement that inserts its
//     events, and holds it until COMMIT. PostgreSQL makes a commit visible before it releases its
//     locks, so the next batch's ids are larger than every committed one, and a reader that sees
//     id N committed sees every id below N (a sequence would hand out ids at any moment, and an
//     id taken earlier could commit later, behind a follower's cursor). Being last, the lock never
//     waits for anything while held, so it adds no deadlock; it does serialize the instances'
//     batches from their events' insert to their COMMIT (a rolled-back batch gives its ids back:
//     no gaps);
//   - a batch that lost a race to another instance (unique violation on a request_id, a reference
//     or a new account; a deadlock; a serialization failure) is rolled back and run again, where
//     the winner's effects are visible (a retried reserve is then a replay);
//   - a lost connection: a batch that was still loading (or a read) runs once more on a new
//     connection; a batch lost while writing and committing answers `unavailable` at once — its
//     COMMIT may have landed with only the answer lost, and an extend or a shared rate-limit check
//     run again would apply twice (store/batch_runner.h). All of it or none of it happened (the
//     commit is atomic); the client's retry with the same ids settles which, and the next call
//     connects again — libpq multi-host
//     URIs with target_session_attrs=read-write follow a fail-over to a promoted standby.
// Commits are durable: the session sets synchronous_commit=on, so sync() has nothing left to do.
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
#include "store/batch_runner.h"
#include "store/conn_pool.h"
#include "store/postgres/pg_coord.h"
#include "store/postgres/pg_jobs.h"
#include "store/postgres/pg_reads.h"
#include "store/reads.h"
#include "store/schema.h"
#include "store/store.h"

namespace tollgate {

namespace pg {
class Conn;
}

struct PgOptions {
  std::string uri;                  // libpq URI: postgresql://user@host:port/db?…
  int readers_max = limits::kPgReadersMaxDefault;  // reader connections kept open (the writer is one more)
  // A read waits at most this long for a free reader connection, then answers `unavailable`.
  std::int64_t lease_wait_ms = limits::kConnLeaseWaitMsDefault;
  int connect_timeout_ms = limits::kPgConnectTimeoutMsDefault;  // to open a connection
  int statement_timeout_ms = limits::kPgStatementTimeoutMsDefault;  // any one statement or lock wait; a stuck database answers 503
  int conflict_retries_max = limits::kConflictRetriesMaxDefault;  // batch re-runs after losing a race to another instance
  // nullptr: the database's clock (production). Tests inject a ManualClock to drive expiry.
  const Clock* clock = nullptr;
};

class PgStore final : public Store {
 public:
  static constexpr int kSchemaVersion = schema::kCurrentVersion;  // store/schema.h, as every backend

  // Connects, migrates the schema (under an advisory lock) and returns the store.
  static Result<std::unique_ptr<PgStore>> open(const PgOptions& options);
  ~PgStore() override;

  Status apply(std::span<const Command> commands, std::vector<CommandResult>& results) override;
  // COMMIT already waited for the flush (synchronous_commit=on): nothing left to do.
  Status sync() override { return ok_status(); }
  Result<Account> get_account(std::string_view account_id) override;
  Result<Hold> get_hold(std::string_view hold_id) override;
  Result<EventPage> read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) override;
  Result<EventPage> read_feed(std::int64_t after, std::int64_t limit) override;
  Result<std::int64_t> last_event_id() override;
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
  // The database's clock (one query), or the injected one. 0 if the database cannot be reached.
  std::int64_t now_ms() override;

  const BatchRunCounters& counters() const { return counters_; }

 private:
  explicit PgStore(PgOptions options);
  template <typename F>
  auto read(F&& body) -> decltype(body(std::declval<pg::Conn&>(), std::int64_t{}));

  const PgOptions options_;
  // Used only by the thread in apply(); null until connected, dropped when the connection breaks.
  std::unique_ptr<pg::Conn> writer_;
  ConnPool<pg::Conn> readers_;  // a broken connection is dropped, not given back
  pg::PgReadSource source_;     // reads through readers_
  reads::LedgerReads ledger_;   // these four through source_
  reads::Lists lists_;
  reads::JobReads jobs_;
  reads::CoordReads coord_;
  reads::WebhookReads webhooks_;
  reads::PaymentReads payments_;
  reads::PriceReads prices_;
  BatchRunCounters counters_;
};

}  // namespace tollgate
