#include "store/postgres/pg_store.h"

#include <limits>

#include "core/log.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_read.h"
#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"

namespace tollgate {
namespace {

using pg::Conn;
using pg::kNowSql;
using pg::pg_failure;
using pg::PgError;
using pg::Rows;

// --- schema ---------------------------------------------------------------------------------------
// Migration N takes the schema from version N−1 to N. Never edit a shipped migration: add one.
// The same tables as SQLite's, with the same CHECK constraints; ids compare bytewise (COLLATE "C")
// so pages of account ids come in the same order on every backend.
constexpr const char* kMigrations[] = {
    // 1: accounts, holds, transfers, events
    R"sql(
CREATE TABLE accounts (
  account_id       text COLLATE "C" PRIMARY KEY,
  available        bigint NOT NULL,
  reserved         bigint NOT NULL CHECK (reserved >= 0),
  used             bigint NOT NULL CHECK (used >= 0),
  purchased        bigint NOT NULL,
  overdraft_limit  bigint NOT NULL CHECK (overdraft_limit >= 0),
  max_active_holds bigint CHECK (max_active_holds IS NULL OR max_active_holds >= 1),
  active_holds     bigint NOT NULL CHECK (active_holds >= 0),
  created_at_ms    bigint NOT NULL,
  CHECK (available + reserved + used = purchased),
  CHECK (available >= -overdraft_limit)
);

CREATE SEQUENCE holds_seq;
CREATE TABLE holds (
  seq              bigint PRIMARY KEY,             -- from holds_seq: creation order
  hold_id          text COLLATE "C" NOT NULL,      -- 'hold_<seq>_<random>': found by seq, checked whole
  account_id       text COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  request_id       text COLLATE "C" NOT NULL UNIQUE,
  amount           bigint NOT NULL CHECK (amount >= 1),
  committed_amount bigint NOT NULL CHECK (committed_amount >= 0 AND committed_amount <= amount),
  status           text NOT NULL CHECK (status IN ('active', 'committed', 'released', 'expired')),
  late_outcome     text CHECK (late_outcome IS NULL OR (status = 'expired' AND late_outcome IN ('charged', 'forgiven'))),
  created_at_ms    bigint NOT NULL,
  expires_at_ms    bigint NOT NULL,
  closed_at_ms     bigint,
  metadata         text NOT NULL
);
CREATE INDEX holds_by_account ON holds(account_id, seq);
CREATE INDEX holds_active_by_deadline ON holds(expires_at_ms) WHERE status = 'active';
CREATE INDEX holds_active_by_account ON holds(account_id, expires_at_ms) WHERE status = 'active';

CREATE TABLE transfers (
  reference   text COLLATE "C" PRIMARY KEY,
  account_id  text COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  kind        text NOT NULL CHECK (kind IN ('credited', 'debited')),
  amount      bigint NOT NULL CHECK (amount >= 1),
  reason      text NOT NULL,
  event_id    bigint NOT NULL
);

-- event_id: taken while the transaction holds the account's row lock (see pg_store.h), so one
-- account's events increase with commit order.
CREATE SEQUENCE events_seq;
CREATE TABLE events (
  event_id        bigint PRIMARY KEY DEFAULT nextval('events_seq'),
  account_id      text COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  type            text NOT NULL,
  amount          bigint NOT NULL CHECK (amount >= 0),
  hold_id         text,
  job_id          text,
  reference       text,
  at_ms           bigint NOT NULL,
  available_after bigint NOT NULL,
  reserved_after  bigint NOT NULL,
  used_after      bigint NOT NULL
);
CREATE INDEX events_by_account ON events(account_id, event_id);
CREATE FUNCTION events_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN RAISE EXCEPTION 'events are append-only'; END $$;
CREATE TRIGGER events_are_never_changed BEFORE UPDATE OR DELETE ON events
  FOR EACH ROW EXECUTE FUNCTION events_are_append_only();
CREATE TRIGGER events_are_never_truncated BEFORE TRUNCATE ON events
  FOR EACH STATEMENT EXECUTE FUNCTION events_are_append_only();
)sql",
    // 2: API keys (only the SHA-256 of a secret is stored)
    R"sql(
CREATE TABLE api_keys (
  key_id         text COLLATE "C" PRIMARY KEY,
  account_id     text COLLATE "C" REFERENCES accounts(account_id),   -- NULL: an admin key
  secret_sha256  text NOT NULL UNIQUE,
  created_at_ms  bigint NOT NULL,
  revoked_at_ms  bigint
);
)sql",
    // 3: tollgate_assert(), with which a batch's set-based writes abort their own transaction when a
    // guarded row was not as the batch read it (pg_write.h); the active-hold indexes end with seq, so
    // "oldest deadline first, then creation order" — of one account or of all — is an index scan
    R"sql(
CREATE FUNCTION tollgate_assert(ok boolean, message text) RETURNS boolean LANGUAGE plpgsql AS $$
  BEGIN
    IF NOT ok THEN RAISE EXCEPTION USING ERRCODE = 'assert_failure', MESSAGE = message; END IF;
    RETURN true;
  END $$;
DROP INDEX holds_active_by_deadline;
CREATE INDEX holds_active_by_deadline ON holds(expires_at_ms, seq) WHERE status = 'active';
DROP INDEX holds_active_by_account;
CREATE INDEX holds_active_by_account ON holds(account_id, expires_at_ms, seq) WHERE status = 'active';
)sql",
    // 4: the last use of an API key (ledger/key_use.h); the key list's order, newest first
    // (store/lists.h), of every key and of one account's
    R"sql(
ALTER TABLE api_keys ADD COLUMN last_used_at_ms bigint;
CREATE INDEX api_keys_newest_first ON api_keys(created_at_ms, key_id);
CREATE INDEX api_keys_by_account ON api_keys(account_id, created_at_ms, key_id);
)sql",
    // 5: account settings that change (frozen; account_updated events carry the settings after the
    // change); the reason of a release (on the hold and its event; a debit's event too); event ids
    // in commit order over every instance: from a one-row counter that a batch takes as its last
    // lock, right before it inserts its events (pg_store.h), instead of a sequence
    R"sql(
ALTER TABLE accounts ADD COLUMN frozen boolean NOT NULL DEFAULT false;
ALTER TABLE holds ADD COLUMN release_reason text CHECK (release_reason IS NULL OR status = 'released');
ALTER TABLE events
  ADD COLUMN reason text,
  ADD COLUMN overdraft_limit bigint CHECK (overdraft_limit IS NULL OR overdraft_limit >= 0),
  ADD COLUMN max_active_holds bigint CHECK (max_active_holds IS NULL OR max_active_holds >= 1),
  ADD COLUMN frozen boolean,
  ADD CONSTRAINT events_settings_of_account_updated CHECK (
    (frozen IS NOT NULL) = (type = 'account_updated') AND (overdraft_limit IS NOT NULL) = (type = 'account_updated')
    AND (max_active_holds IS NULL OR type = 'account_updated'));
CREATE TABLE event_ids (
  only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  last_event_id  bigint NOT NULL CHECK (last_event_id >= 0)
);
INSERT INTO event_ids (last_event_id)
  SELECT greatest((SELECT coalesce(max(event_id), 0) FROM events),
                  (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM events_seq));
ALTER TABLE events ALTER COLUMN event_id DROP DEFAULT;
DROP SEQUENCE events_seq;
)sql",
    // 6: jobs (jobs/job.h) — written with their holds in the same batches, under the lock of the
    // hold's account — and their histories
    R"sql(
CREATE TABLE jobs (
  client_request_id   text COLLATE "C" PRIMARY KEY,
  account_id          text COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  cost                bigint NOT NULL CHECK (cost >= 1),
  provider            text NOT NULL,
  input               text NOT NULL,
  status              text NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
  hold_id             text NOT NULL UNIQUE,
  hold_seq            bigint NOT NULL UNIQUE,  -- the hold's sequence number: the list's order
  attempts            integer NOT NULL CHECK (attempts >= 0),
  result              text,
  error               text,
  charged             boolean NOT NULL CHECK (NOT charged OR status = 'completed'),
  created_at_ms       bigint NOT NULL,
  updated_at_ms       bigint NOT NULL,
  lease_owner         text,
  lease_expires_at_ms bigint,
  CHECK ((lease_owner IS NULL) = (lease_expires_at_ms IS NULL))
);
CREATE INDEX jobs_by_account ON jobs(account_id, hold_seq);
CREATE INDEX jobs_by_status ON jobs(status, hold_seq);
CREATE INDEX jobs_by_account_status ON jobs(account_id, status, hold_seq);
CREATE INDEX jobs_unended_by_lease ON jobs(lease_expires_at_ms) WHERE status IN ('pending', 'running');
CREATE TABLE job_history (
  entry_id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  client_request_id text COLLATE "C" NOT NULL REFERENCES jobs(client_request_id),
  at_ms             bigint NOT NULL,
  kind              text NOT NULL,
  attempt           integer CHECK (attempt IS NULL OR attempt >= 1),
  detail            text NOT NULL
);
CREATE INDEX job_history_by_job ON job_history(client_request_id, entry_id);
CREATE TRIGGER job_history_is_append_only BEFORE UPDATE OR DELETE ON job_history
  FOR EACH ROW EXECUTE FUNCTION events_are_append_only();
)sql",
    // 7: locks, idempotency keys and shared rate limits (coord/coord.h), written through the batches
    R"sql(
CREATE TABLE locks (
  key           text COLLATE "C" PRIMARY KEY,
  owner         text,
  fence         bigint NOT NULL CHECK (fence >= 1),
  expires_at_ms bigint,
  cancelled     boolean NOT NULL,
  updated_at_ms bigint NOT NULL,
  CHECK ((owner IS NULL) = (expires_at_ms IS NULL)),
  CHECK (NOT cancelled OR owner IS NOT NULL)
);
CREATE FUNCTION locks_keep_their_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN RAISE EXCEPTION 'a lock row keeps its fence: it is never deleted'; END IF;
  IF NEW.fence < OLD.fence THEN RAISE EXCEPTION 'a lock fence never decreases'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER locks_keep_their_fence BEFORE UPDATE OR DELETE ON locks
  FOR EACH ROW EXECUTE FUNCTION locks_keep_their_fence();
CREATE TABLE idempotency_keys (
  key            text COLLATE "C" PRIMARY KEY,
  fingerprint    text NOT NULL,
  state          text NOT NULL CHECK (state IN ('started', 'finished', 'abandoned')),
  response       text,
  created_at_ms  bigint NOT NULL,
  expires_at_ms  bigint NOT NULL,
  finished_at_ms bigint,
  attempt        bigint NOT NULL CHECK (attempt >= 1),
  CHECK ((state = 'finished') = (response IS NOT NULL AND finished_at_ms IS NOT NULL))
);
CREATE INDEX idempotency_keys_by_end ON idempotency_keys(expires_at_ms);  -- the prune pass
CREATE TABLE ratelimits (
  policy text COLLATE "C" NOT NULL,
  key    text COLLATE "C" NOT NULL,
  tat_ns bigint NOT NULL,
  PRIMARY KEY (policy, key)
);
CREATE INDEX ratelimits_by_tat ON ratelimits(tat_ns);
)sql",
    // 8: an extended event carries the hold's new deadline (NULL on those written before)
    R"sql(
ALTER TABLE events ADD COLUMN expires_at_ms bigint CHECK (expires_at_ms IS NULL OR type = 'extended');
)sql",
};
constexpr int kMigrationCount = static_cast<int>(std::size(kMigrations));
static_assert(kMigrationCount == PgStore::kSchemaVersion);







int schema_version(Conn& db) {
  Rows exists = db.exec("SELECT to_regclass('schema_migrations') IS NOT NULL");
  if (exists.text(0, 0) != "t") return 0;
  Rows r = db.exec("SELECT coalesce(max(version), 0) FROM schema_migrations");
  return static_cast<int>(r.int64(0, 0));
}

// Reads the clock the store decides with.
std::int64_t clock_now(Conn& db, const Clock* clock) {
  if (clock) return clock->now_ms();
  return db.query(kNowSql).int64(0, 0);
}

}  // namespace

// Runs `body(conn, now_ms)` in one read-only snapshot; database failures become errors.
template <typename F>
auto PgStore::read(F&& body) -> decltype(body(std::declval<pg::Conn&>(), std::int64_t{})) {
  return pg::read_snapshot(readers_, options_.clock, std::forward<F>(body));
}

// --- open / migrate -------------------------------------------------------------------------------
PgStore::PgStore(PgOptions options)
    : options_(std::move(options)),
      readers_(
          options_.readers_max, options_.lease_wait_ms,
          [this] {
            return Conn::connect(options_.uri,
                                 pg::ConnectOptions{options_.connect_timeout_ms, options_.statement_timeout_ms});
          },
          [](const Conn& conn) { return conn.healthy(); }),
      source_(readers_, options_.clock),
      ledger_(source_),
      lists_(source_),
      jobs_(source_),
      coord_(source_) {}
PgStore::~PgStore() = default;

Result<std::unique_ptr<PgStore>> PgStore::open(const PgOptions& options) {
  if (options.uri.empty()) return invalid("the PostgreSQL URI is empty");
  if (options.readers_max < 1) return invalid("readers_max must be at least 1");
  if (options.lease_wait_ms < 0) return invalid("lease_wait_ms must be 0 or more");
  if (options.connect_timeout_ms < 1 || options.statement_timeout_ms < 1) {
    return invalid("database time-outs must be at least 1 ms");
  }
  try {
    auto db = Conn::connect(options.uri, pg::ConnectOptions{options.connect_timeout_ms, options.statement_timeout_ms});
    // Instances starting together: one migrates, the others wait for it and then find the
    // schema current. The lock is per schema, released at COMMIT.
    db->exec("BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('tollgate schema ' || current_schema(), 0))");
    try {
      const int version = schema_version(*db);
      if (version > kSchemaVersion) {
        db->rollback();
        return Error::make(Code::internal, "the database has schema version " + std::to_string(version) +
                                               ", newer than this tollgate (" + std::to_string(kSchemaVersion) +
                                               "): upgrade tollgate");
      }
      db->exec("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at_ms bigint NOT NULL)");
      for (int v = version + 1; v <= kSchemaVersion; ++v) {
        db->exec(kMigrations[v - 1]);
        db->query("INSERT INTO schema_migrations (version, applied_at_ms) VALUES ($1, $2)", std::int64_t{v},
                  clock_now(*db, options.clock));
      }
      db->exec("COMMIT");
    } catch (...) {
      db->rollback();
      throw;
    }
    auto store = std::unique_ptr<PgStore>(new PgStore(options));
    store->writer_ = std::move(db);
    return store;
  } catch (const PgError& e) {
    return pg_failure(e);
  }
}

// --- writes ---------------------------------------------------------------------------------------
Status PgStore::apply(std::span<const Command> commands, std::vector<CommandResult>& results) {
  if (options_.write_path == PgWritePath::per_statement) {
    return pg::apply_per_statement(writer_, options_, commands, results);
  }
  pg::PgBatchIo io(writer_, options_);
  return run_batch(io, commands, results, BatchRunOptions{options_.conflict_retries_max}, counters_);
}

// --- reads ----------------------------------------------------------------------------------------
Result<Account> PgStore::get_account(std::string_view account_id) { return ledger_.get_account(account_id); }

Result<Hold> PgStore::get_hold(std::string_view hold_id) { return ledger_.get_hold(hold_id); }

Result<EventPage> PgStore::read_events(std::string_view account_id, std::int64_t after, std::int64_t limit) {
  return ledger_.read_events(account_id, after, limit);
}

// One snapshot: every event it shows committed after every lower id did (event_ids is taken under a
// lock held until COMMIT, and a commit is visible before its locks are released), so the page has
// no hole a later commit could fill. Every committed event is shown.
Result<EventPage> PgStore::read_feed(std::int64_t after, std::int64_t limit) {
  return ledger_.read_feed(after, limit, std::numeric_limits<std::int64_t>::max());
}

Result<std::int64_t> PgStore::last_event_id() {
  return read([&](Conn& db, std::int64_t) -> Result<std::int64_t> {
    return db.exec("SELECT last_event_id FROM event_ids").int64(0, 0);
  });
}

Result<AuditReport> PgStore::audit(std::optional<std::string_view> account_id) { return ledger_.audit(account_id); }

Result<AuditPage> PgStore::audit_range(std::string_view after, std::int64_t limit) {
  return ledger_.audit_range(after, limit);
}

Result<std::optional<ApiKey>> PgStore::find_key(std::string_view secret_sha256) { return ledger_.find_key(secret_sha256); }

Result<LedgerStats> PgStore::stats() { return ledger_.stats(); }

Result<std::vector<std::string>> PgStore::list_account_ids(std::string_view after, std::int64_t limit) {
  return ledger_.list_account_ids(after, limit);
}

Result<bool> PgStore::has_admin_key() { return ledger_.has_admin_key(); }

Status PgStore::ping() {
  return read([&](Conn& db, std::int64_t) -> Status {
    const int version = schema_version(db);
    if (version != kSchemaVersion) {
      return Error::make(Code::unavailable, "schema version " + std::to_string(version) + ", expected " +
                                                std::to_string(kSchemaVersion));
    }
    return ok_status();
  });
}

std::int64_t PgStore::now_ms() {
  if (options_.clock) return options_.clock->now_ms();
  auto now = read([](Conn&, std::int64_t now) -> Result<std::int64_t> { return now; });
  return now ? *now : 0;
}

}  // namespace tollgate
