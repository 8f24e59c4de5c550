// The logical schema versions and the migration (see schema.h). Never edit a shipped version: add
// one, with its DDL in both dialects and 0 as both legacy numbers.
#include "store/schema.h"

#include <cstddef>
#include <iterator>

#include "core/invariants.h"

namespace tollgate::schema {
namespace {

constexpr Version kVersions[] = {
    // 1: accounts, holds, transfers, events. The CHECK constraints repeat the invariants, so even a bug
    // cannot store a broken row; triggers keep the event log append-only. PostgreSQL: ids compare
    // bytewise (COLLATE "C") so pages of account ids come in the same order on every backend.
    {1, "accounts, holds, transfers, events",
     /*sqlite_legacy=*/1, /*postgres_legacy=*/1,
     // SQLite
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
     // PostgreSQL
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
)sql"},
    // 2: API keys (only the SHA-256 of a secret is stored).
    {2, "API keys (only the SHA-256 of a secret is stored)",
     /*sqlite_legacy=*/2, /*postgres_legacy=*/2,
     // SQLite
     R"sql(
CREATE TABLE api_keys (
  key_id         TEXT    PRIMARY KEY,
  account_id     TEXT    REFERENCES accounts(account_id),   -- NULL: an admin key
  secret_sha256  TEXT    NOT NULL UNIQUE,
  created_at_ms  INTEGER NOT NULL,
  revoked_at_ms  INTEGER
) WITHOUT ROWID;
)sql",
     // PostgreSQL
     R"sql(
CREATE TABLE api_keys (
  key_id         text COLLATE "C" PRIMARY KEY,
  account_id     text COLLATE "C" REFERENCES accounts(account_id),   -- NULL: an admin key
  secret_sha256  text NOT NULL UNIQUE,
  created_at_ms  bigint NOT NULL,
  revoked_at_ms  bigint
);
)sql"},
    // 3: tollgate_assert(), with which a batch's set-based writes abort their own transaction when a
    // guarded row was not as the batch read it (pg_write.h); the active-hold indexes end with seq, so
    // "oldest deadline first, then creation order" — of one account or of all — is an index scan.
    // SQLite: nothing — one writer, so a batch's rows are as it read them, and an index ends with the
    // rowid (seq) already.
    {3, "tollgate_assert() for the batches' guarded writes; the active-hold indexes end with seq",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/3,
     // SQLite
     "",
     // PostgreSQL
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
)sql"},
    // 4: the last use of an API key (ledger/key_use.h); the key list's order, newest first
    // (store/lists.h), of every key and of one account's.
    {4, "the last use of an API key; the key lists' indexes, newest first",
     /*sqlite_legacy=*/3, /*postgres_legacy=*/4,
     // SQLite
     R"sql(
ALTER TABLE api_keys ADD COLUMN last_used_at_ms INTEGER;
CREATE INDEX api_keys_newest_first ON api_keys(created_at_ms, key_id);
CREATE INDEX api_keys_by_account ON api_keys(account_id, created_at_ms, key_id);
)sql",
     // PostgreSQL
     R"sql(
ALTER TABLE api_keys ADD COLUMN last_used_at_ms bigint;
CREATE INDEX api_keys_newest_first ON api_keys(created_at_ms, key_id);
CREATE INDEX api_keys_by_account ON api_keys(account_id, created_at_ms, key_id);
)sql"},
    // 5: account settings that change (frozen; account_updated events carry the settings after the
    // change); the reason of a release (on the hold and its event; a debit's event too).
    // PostgreSQL: event ids in commit order over every instance, from a one-row counter that a batch
    // takes as its last lock, right before it inserts its events (pg_store.h), instead of a sequence.
    {5, "account settings that change (frozen); the reason of a release or a debit",
     /*sqlite_legacy=*/4, /*postgres_legacy=*/5,
     // SQLite
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
     // PostgreSQL
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
)sql"},
    // 6: jobs (jobs/job.h) — written with their holds in the same batches (on PostgreSQL under the lock
    // of the hold's account) — and their histories.
    {6, "jobs and their histories",
     /*sqlite_legacy=*/5, /*postgres_legacy=*/6,
     // SQLite
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
     // PostgreSQL
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
)sql"},
    // 7: locks, idempotency keys and shared rate limits (coord/coord.h), written through the batches.
    {7, "locks, idempotency keys and shared rate limits",
     /*sqlite_legacy=*/6, /*postgres_legacy=*/7,
     // SQLite
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
     // PostgreSQL
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
)sql"},
    // 8: an extended event carries the hold's new deadline (NULL on those written before).
    {8, "an extended event carries the hold's new deadline",
     /*sqlite_legacy=*/7, /*postgres_legacy=*/8,
     // SQLite
     R"sql(
ALTER TABLE events ADD COLUMN expires_at_ms INTEGER CHECK (expires_at_ms IS NULL OR type = 'extended');
)sql",
     // PostgreSQL
     R"sql(
ALTER TABLE events ADD COLUMN expires_at_ms bigint CHECK (expires_at_ms IS NULL OR type = 'extended');
)sql"},
    // 9: balance notices (docs/api.md "Balance notices"): an account's low_balance_threshold (NULL:
    // no notices, as every account had before), and an account_updated event's setting of it.
    {9, "balance notices: an account's low_balance_threshold",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
ALTER TABLE accounts ADD COLUMN low_balance_threshold INTEGER
  CHECK (low_balance_threshold IS NULL OR low_balance_threshold >= 1);
ALTER TABLE events ADD COLUMN low_balance_threshold INTEGER
  CHECK (low_balance_threshold IS NULL OR (low_balance_threshold >= 1 AND type = 'account_updated'));
)sql",
     // PostgreSQL
     R"sql(
ALTER TABLE accounts ADD COLUMN low_balance_threshold bigint
  CHECK (low_balance_threshold IS NULL OR low_balance_threshold >= 1);
ALTER TABLE events ADD COLUMN low_balance_threshold bigint
  CHECK (low_balance_threshold IS NULL OR (low_balance_threshold >= 1 AND type = 'account_updated'));
)sql"},
    // 10: webhook endpoints (webhooks/webhook.h; docs/api.md "Webhooks"). The secret is stored as it
    // signs (whsec_…): protected as the ledger itself is, by the file's mode and the role's grants.
    {10, "webhook endpoints",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
CREATE TABLE webhook_endpoints (
  endpoint_id              TEXT    PRIMARY KEY,
  url                      TEXT    NOT NULL CHECK (url <> ''),
  event_types              TEXT    NOT NULL,            -- comma-separated; '' = every type
  account_id               TEXT    REFERENCES accounts(account_id),
  description              TEXT    NOT NULL,
  status                   TEXT    NOT NULL CHECK (status IN ('enabled', 'disabled')),
  secret                   TEXT    NOT NULL CHECK (secret LIKE 'whsec\_%' ESCAPE '\'),
  previous_secret          TEXT,
  previous_secret_until_ms INTEGER,
  created_at_ms            INTEGER NOT NULL,
  updated_at_ms            INTEGER NOT NULL CHECK (updated_at_ms >= created_at_ms),
  CHECK ((previous_secret IS NULL) = (previous_secret_until_ms IS NULL))
) WITHOUT ROWID;
CREATE INDEX webhook_endpoints_by_creation ON webhook_endpoints(created_at_ms, endpoint_id);
)sql",
     // PostgreSQL
     R"sql(
CREATE TABLE webhook_endpoints (
  endpoint_id              text COLLATE "C" PRIMARY KEY,
  url                      text   NOT NULL CHECK (url <> ''),
  event_types              text   NOT NULL,
  account_id               text   COLLATE "C" REFERENCES accounts(account_id),
  description              text   NOT NULL,
  status                   text   NOT NULL CHECK (status IN ('enabled', 'disabled')),
  secret                   text   NOT NULL CHECK (secret LIKE 'whsec\_%' ESCAPE '\'),
  previous_secret          text,
  previous_secret_until_ms bigint,
  created_at_ms            bigint NOT NULL,
  updated_at_ms            bigint NOT NULL CHECK (updated_at_ms >= created_at_ms),
  CHECK ((previous_secret IS NULL) = (previous_secret_until_ms IS NULL))
);
CREATE INDEX webhook_endpoints_by_creation ON webhook_endpoints(created_at_ms, endpoint_id);
)sql"},
    // 11: webhook delivery (webhooks/webhook.h, delivery_worker.h; docs/api.md "Webhooks"): each
    // endpoint's place in the change feed (endpoints registered before delivery existed start at the
    // feed's head: they receive what follows, as a new endpoint does; a replay sends older events), the
    // lock fence that last moved it and its failing clock; each event's delivery to each endpoint.
    {11, "webhook delivery",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
ALTER TABLE webhook_endpoints ADD COLUMN delivery_cursor INTEGER NOT NULL DEFAULT 0 CHECK (delivery_cursor >= 0);
ALTER TABLE webhook_endpoints ADD COLUMN delivery_fence INTEGER NOT NULL DEFAULT 0 CHECK (delivery_fence >= 0);
ALTER TABLE webhook_endpoints ADD COLUMN failing_since_ms INTEGER;
UPDATE webhook_endpoints SET delivery_cursor = (SELECT coalesce(max(event_id), 0) FROM events);
CREATE TABLE webhook_deliveries (
  endpoint_id        TEXT    NOT NULL REFERENCES webhook_endpoints(endpoint_id),
  event_id           INTEGER NOT NULL CHECK (event_id >= 1),
  event_type         TEXT    NOT NULL,
  account_id         TEXT    NOT NULL,
  event_at_ms        INTEGER NOT NULL,
  status             TEXT    NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts           INTEGER NOT NULL CHECK (attempts >= 1),
  last_attempt_at_ms INTEGER NOT NULL,
  last_status_code   INTEGER,
  last_error         TEXT    NOT NULL,
  next_attempt_at_ms INTEGER,
  created_at_ms      INTEGER NOT NULL,
  PRIMARY KEY (endpoint_id, event_id),
  CHECK ((status = 'pending') = (next_attempt_at_ms IS NOT NULL))
) WITHOUT ROWID;
CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries(endpoint_id, status, event_id);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at_ms) WHERE status = 'pending';
)sql",
     // PostgreSQL
     R"sql(
ALTER TABLE webhook_endpoints ADD COLUMN delivery_cursor bigint NOT NULL DEFAULT 0 CHECK (delivery_cursor >= 0);
ALTER TABLE webhook_endpoints ADD COLUMN delivery_fence bigint NOT NULL DEFAULT 0 CHECK (delivery_fence >= 0);
ALTER TABLE webhook_endpoints ADD COLUMN failing_since_ms bigint;
UPDATE webhook_endpoints SET delivery_cursor = (SELECT coalesce(max(event_id), 0) FROM events);
CREATE TABLE webhook_deliveries (
  endpoint_id        text   COLLATE "C" NOT NULL REFERENCES webhook_endpoints(endpoint_id),
  event_id           bigint NOT NULL CHECK (event_id >= 1),
  event_type         text   NOT NULL,
  account_id         text   COLLATE "C" NOT NULL,
  event_at_ms        bigint NOT NULL,
  status             text   NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts           bigint NOT NULL CHECK (attempts >= 1),
  last_attempt_at_ms bigint NOT NULL,
  last_status_code   bigint,
  last_error         text   NOT NULL,
  next_attempt_at_ms bigint,
  created_at_ms      bigint NOT NULL,
  PRIMARY KEY (endpoint_id, event_id),
  CHECK ((status = 'pending') = (next_attempt_at_ms IS NOT NULL))
);
CREATE INDEX webhook_deliveries_by_status ON webhook_deliveries(endpoint_id, status, event_id);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at_ms) WHERE status = 'pending';
)sql"},
    // 12: refunds of a charge (refunds/refund_batch.h; docs/api.md "Refunds of a charge"): what each
    // hold gave back so far, never more than it charged (the rows written before have refunded
    // nothing), and one row per refund request_id (what makes a refund idempotent). PostgreSQL: the
    // CHECK is NOT VALID (the holds written before satisfy it, 0 ≤ committed_amount; checking them
    // would scan the table under an exclusive lock) — every row written from now on is checked.
    {12, "refunds",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
ALTER TABLE holds ADD COLUMN refunded_amount INTEGER NOT NULL DEFAULT 0
  CHECK (refunded_amount >= 0 AND refunded_amount <= committed_amount);
CREATE TABLE refunds (
  request_id       TEXT    PRIMARY KEY,
  hold_id          TEXT    NOT NULL,
  account_id       TEXT    NOT NULL REFERENCES accounts(account_id),
  amount           INTEGER NOT NULL CHECK (amount >= 1),
  requested_amount INTEGER CHECK (requested_amount IS NULL OR requested_amount = amount),
  reason           TEXT    NOT NULL CHECK (reason <> ''),
  created_at_ms    INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
     // PostgreSQL
     R"sql(
ALTER TABLE holds ADD COLUMN refunded_amount bigint NOT NULL DEFAULT 0;
ALTER TABLE holds ADD CONSTRAINT holds_refunded_within_charge
  CHECK (refunded_amount >= 0 AND refunded_amount <= committed_amount) NOT VALID;
CREATE TABLE refunds (
  request_id       text COLLATE "C" PRIMARY KEY,
  hold_id          text COLLATE "C" NOT NULL,
  account_id       text COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  amount           bigint NOT NULL CHECK (amount >= 1),
  requested_amount bigint CHECK (requested_amount IS NULL OR requested_amount = amount),
  reason           text   NOT NULL CHECK (reason <> ''),
  created_at_ms    bigint NOT NULL
);
)sql"},
    // 13: payments (payments/payment_batch.h): why tollgate froze an account, and the debt of a
    // refund shortfall (available below -overdraft_limit only on a frozen account: the CHECK of
    // version 1 is replaced — on SQLite by rebuilding the accounts table, a copy of its rows, since
    // SQLite cannot change a table's CHECK in place; on PostgreSQL NOT VALID, no scan under the
    // lock); each payment a provider told of (its credit's reference, its account, its credits, what
    // its refunds owed and took back) and each refund or dispute of one (once per provider event).
    {13, "payments",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
CREATE TABLE accounts_13 (
  account_id            TEXT    PRIMARY KEY,
  available             INTEGER NOT NULL,
  reserved              INTEGER NOT NULL CHECK (reserved >= 0),
  used                  INTEGER NOT NULL CHECK (used >= 0),
  purchased             INTEGER NOT NULL,
  overdraft_limit       INTEGER NOT NULL CHECK (overdraft_limit >= 0),
  max_active_holds      INTEGER CHECK (max_active_holds IS NULL OR max_active_holds >= 1),
  active_holds          INTEGER NOT NULL CHECK (active_holds >= 0),
  created_at_ms         INTEGER NOT NULL,
  frozen                INTEGER NOT NULL DEFAULT 0 CHECK (frozen IN (0, 1)),
  low_balance_threshold INTEGER CHECK (low_balance_threshold IS NULL OR low_balance_threshold >= 1),
  frozen_reason         TEXT    CHECK (frozen_reason IS NULL OR (frozen = 1 AND frozen_reason <> '')),
  CHECK (available + reserved + used = purchased),
  CHECK (available >= -overdraft_limit OR frozen = 1)
) WITHOUT ROWID;
INSERT INTO accounts_13 (account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds,
                         active_holds, created_at_ms, frozen, low_balance_threshold)
  SELECT account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds, active_holds,
         created_at_ms, frozen, low_balance_threshold FROM accounts;
DROP TABLE accounts;
ALTER TABLE accounts_13 RENAME TO accounts;
CREATE TABLE payments (
  payment_id       TEXT    PRIMARY KEY,
  provider         TEXT    NOT NULL CHECK (provider IN ('stripe', 'webhook')),
  provider_payment TEXT,
  account_id       TEXT    NOT NULL REFERENCES accounts(account_id),
  credits          INTEGER NOT NULL CHECK (credits >= 1),
  refunded_credits INTEGER NOT NULL CHECK (refunded_credits >= 0 AND refunded_credits <= credits),
  taken_back       INTEGER NOT NULL CHECK (taken_back >= 0 AND taken_back <= refunded_credits),
  created_at_ms    INTEGER NOT NULL,
  updated_at_ms    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX payments_by_provider_payment ON payments(provider, provider_payment) WHERE provider_payment IS NOT NULL;
CREATE TABLE payment_events (
  reference  TEXT    PRIMARY KEY,
  payment_id TEXT    NOT NULL REFERENCES payments(payment_id),
  kind       TEXT    NOT NULL CHECK (kind IN ('refund', 'dispute')),
  owed       INTEGER NOT NULL CHECK (owed >= 0),
  taken      INTEGER NOT NULL CHECK (taken >= 0 AND taken <= owed),
  at_ms      INTEGER NOT NULL
) WITHOUT ROWID;
)sql",
     // PostgreSQL
     R"sql(
ALTER TABLE accounts ADD COLUMN frozen_reason text;
ALTER TABLE accounts ADD CONSTRAINT accounts_frozen_reason
  CHECK (frozen_reason IS NULL OR (frozen AND frozen_reason <> '')) NOT VALID;
DO $$
DECLARE c text;
BEGIN
  -- Version 1's CHECK (available >= -overdraft_limit), found by the columns it names (no other
  -- CHECK of accounts names both), not by how this server's version prints it.
  FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'accounts'::regclass AND contype = 'c'
               AND pg_get_constraintdef(oid) LIKE '%available%' AND pg_get_constraintdef(oid) LIKE '%overdraft_limit%'
  LOOP
    EXECUTE format('ALTER TABLE accounts DROP CONSTRAINT %I', c);
  END LOOP;
  IF c IS NULL THEN RAISE EXCEPTION 'the accounts table has no CHECK (available >= -overdraft_limit) to replace'; END IF;
END $$;
ALTER TABLE accounts ADD CONSTRAINT accounts_within_overdraft_unless_frozen
  CHECK (available >= -overdraft_limit OR frozen) NOT VALID;
CREATE TABLE payments (
  payment_id       text   COLLATE "C" PRIMARY KEY,
  provider         text   NOT NULL CHECK (provider IN ('stripe', 'webhook')),
  provider_payment text   COLLATE "C",
  account_id       text   COLLATE "C" NOT NULL REFERENCES accounts(account_id),
  credits          bigint NOT NULL CHECK (credits >= 1),
  refunded_credits bigint NOT NULL CHECK (refunded_credits >= 0 AND refunded_credits <= credits),
  taken_back       bigint NOT NULL CHECK (taken_back >= 0 AND taken_back <= refunded_credits),
  created_at_ms    bigint NOT NULL,
  updated_at_ms    bigint NOT NULL
);
CREATE INDEX payments_by_provider_payment ON payments(provider, provider_payment) WHERE provider_payment IS NOT NULL;
CREATE TABLE payment_events (
  reference  text   COLLATE "C" PRIMARY KEY,
  payment_id text   COLLATE "C" NOT NULL REFERENCES payments(payment_id),
  kind       text   NOT NULL CHECK (kind IN ('refund', 'dispute')),
  owed       bigint NOT NULL CHECK (owed >= 0),
  taken      bigint NOT NULL CHECK (taken >= 0 AND taken <= owed),
  at_ms      bigint NOT NULL
);
)sql"},
    // 14: the expired balance (api.md "Credit lots": credits whose lot ran out unspent) on accounts
    // and on events (expired_after), 0 on every row there is; the identity becomes available +
    // reserved + used + expired = purchased — on SQLite by rebuilding the accounts table again (a
    // copy of its rows: SQLite cannot change a CHECK in place), on PostgreSQL NOT VALID (no scan
    // under the lock; ADD COLUMN with a constant default rewrites nothing).
    {14, "expired balance",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
CREATE TABLE accounts_14 (
  account_id            TEXT    PRIMARY KEY,
  available             INTEGER NOT NULL,
  reserved              INTEGER NOT NULL CHECK (reserved >= 0),
  used                  INTEGER NOT NULL CHECK (used >= 0),
  purchased             INTEGER NOT NULL,
  overdraft_limit       INTEGER NOT NULL CHECK (overdraft_limit >= 0),
  max_active_holds      INTEGER CHECK (max_active_holds IS NULL OR max_active_holds >= 1),
  active_holds          INTEGER NOT NULL CHECK (active_holds >= 0),
  created_at_ms         INTEGER NOT NULL,
  frozen                INTEGER NOT NULL DEFAULT 0 CHECK (frozen IN (0, 1)),
  low_balance_threshold INTEGER CHECK (low_balance_threshold IS NULL OR low_balance_threshold >= 1),
  frozen_reason         TEXT    CHECK (frozen_reason IS NULL OR (frozen = 1 AND frozen_reason <> '')),
  expired               INTEGER NOT NULL DEFAULT 0 CHECK (expired >= 0),
  CHECK (available + reserved + used + expired = purchased),
  CHECK (available >= -overdraft_limit OR frozen = 1)
) WITHOUT ROWID;
INSERT INTO accounts_14 (account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds,
                         active_holds, created_at_ms, frozen, low_balance_threshold, frozen_reason, expired)
  SELECT account_id, available, reserved, used, purchased, overdraft_limit, max_active_holds, active_holds,
         created_at_ms, frozen, low_balance_threshold, frozen_reason, 0 FROM accounts;
DROP TABLE accounts;
ALTER TABLE accounts_14 RENAME TO accounts;
ALTER TABLE events ADD COLUMN expired_after INTEGER NOT NULL DEFAULT 0 CHECK (expired_after >= 0);
)sql",
     // PostgreSQL
     R"sql(
ALTER TABLE accounts ADD COLUMN expired bigint NOT NULL DEFAULT 0;
ALTER TABLE accounts ADD CONSTRAINT accounts_expired_not_negative CHECK (expired >= 0) NOT VALID;
DO $$
DECLARE c text;
BEGIN
  -- Version 1's CHECK (available + reserved + used = purchased), found by the columns it names (no
  -- other CHECK of accounts names both used and purchased).
  FOR c IN SELECT conname FROM pg_constraint
             WHERE conrelid = 'accounts'::regclass AND contype = 'c'
               AND pg_get_constraintdef(oid) LIKE '%used%' AND pg_get_constraintdef(oid) LIKE '%purchased%'
  LOOP
    EXECUTE format('ALTER TABLE accounts DROP CONSTRAINT %I', c);
  END LOOP;
  IF c IS NULL THEN RAISE EXCEPTION 'the accounts table has no CHECK (available + reserved + used = purchased) to replace'; END IF;
END $$;
ALTER TABLE accounts ADD CONSTRAINT accounts_balances_add_up
  CHECK (available + reserved + used + expired = purchased) NOT VALID;
ALTER TABLE events ADD COLUMN expired_after bigint NOT NULL DEFAULT 0;
ALTER TABLE events ADD CONSTRAINT events_expired_after_not_negative CHECK (expired_after >= 0) NOT VALID;
)sql"},
    // 15: keys with scopes (core/scopes.h), an expiry and a name. A key made before has NULL scopes:
    // the scopes of its kind (an account key all three account scopes, an admin key admin).
    {15, "key scopes",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
ALTER TABLE api_keys ADD COLUMN scopes TEXT CHECK (scopes IS NULL OR scopes <> '');
ALTER TABLE api_keys ADD COLUMN expires_at_ms INTEGER;
ALTER TABLE api_keys ADD COLUMN name TEXT CHECK (name IS NULL OR name <> '');
)sql",
     // PostgreSQL
     R"sql(
ALTER TABLE api_keys ADD COLUMN scopes text CHECK (scopes IS NULL OR scopes <> '');
ALTER TABLE api_keys ADD COLUMN expires_at_ms bigint;
ALTER TABLE api_keys ADD COLUMN name text CHECK (name IS NULL OR name <> '');
)sql"},
    // 16: credit lots (core/lots.h). Each account's available credits become one lot without expiry
    // (its other credits, and every hold made before, are its base's: holds.lots NULL); holds remember
    // what they drew ("seq:amount,…"), events name their lot. The partial indexes are the batch's
    // loads: an account's live lots, and the reaper's overdue ones. They are keyed on `live` (available
    // or reserved > 0, kept by the writers: lot_is_live), never on the balances themselves: a spend
    // changes a lot's balances in every batch, and an index whose WHERE names a changed column is
    // rewritten — two more pages per batch on SQLite (measured: 3 WAL frames per lot update against
    // 1), and on PostgreSQL no HOT update (each index a new entry); `live` changes only when a lot is
    // used up or comes back. PostgreSQL's fillfactor leaves each page room for its HOT updates.
    {16, "credit lots",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
CREATE TABLE lots (
  seq           INTEGER PRIMARY KEY,
  account_id    TEXT    NOT NULL REFERENCES accounts (account_id),
  reference     TEXT,
  category      TEXT    NOT NULL CHECK (category IN ('paid', 'promotional')),
  priority      INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 100),
  expires_at_ms INTEGER,
  amount        INTEGER NOT NULL CHECK (amount >= 0),
  available     INTEGER NOT NULL CHECK (available >= 0),
  reserved      INTEGER NOT NULL CHECK (reserved >= 0),
  used          INTEGER NOT NULL CHECK (used >= 0),
  expired       INTEGER NOT NULL CHECK (expired >= 0),
  created_at_ms INTEGER NOT NULL,
  live          INTEGER NOT NULL CHECK (live = (available > 0 OR reserved > 0)),
  CHECK (available + reserved + used + expired = amount)
);
CREATE INDEX lots_live ON lots (account_id) WHERE live = 1;
CREATE INDEX lots_overdue ON lots (expires_at_ms, seq) WHERE live = 1 AND expires_at_ms IS NOT NULL;
CREATE INDEX lots_of_account ON lots (account_id, seq);
INSERT INTO lots (account_id, reference, category, priority, expires_at_ms, amount, available, reserved, used,
                  expired, created_at_ms, live)
  SELECT account_id, NULL, 'paid', 50, NULL, available, available, 0, 0, 0, created_at_ms, 1 FROM accounts
  WHERE available > 0 ORDER BY account_id;
ALTER TABLE holds ADD COLUMN lots TEXT CHECK (lots IS NULL OR lots <> '');
ALTER TABLE events ADD COLUMN lot_seq INTEGER;
)sql",
     // PostgreSQL
     R"sql(
CREATE SEQUENCE lots_seq;
CREATE TABLE lots (
  seq           bigint PRIMARY KEY DEFAULT nextval('lots_seq'),
  account_id    text COLLATE "C" NOT NULL REFERENCES accounts (account_id),
  reference     text COLLATE "C",
  category      text   NOT NULL CHECK (category IN ('paid', 'promotional')),
  priority      bigint NOT NULL CHECK (priority BETWEEN 0 AND 100),
  expires_at_ms bigint,
  amount        bigint NOT NULL CHECK (amount >= 0),
  available     bigint NOT NULL CHECK (available >= 0),
  reserved      bigint NOT NULL CHECK (reserved >= 0),
  used          bigint NOT NULL CHECK (used >= 0),
  expired       bigint NOT NULL CHECK (expired >= 0),
  created_at_ms bigint NOT NULL,
  live          smallint NOT NULL CHECK (live = CASE WHEN available > 0 OR reserved > 0 THEN 1 ELSE 0 END),
  CHECK (available + reserved + used + expired = amount)
) WITH (fillfactor = 80);
CREATE INDEX lots_live ON lots (account_id) WHERE live = 1;
CREATE INDEX lots_overdue ON lots (expires_at_ms, seq) WHERE live = 1 AND expires_at_ms IS NOT NULL;
CREATE INDEX lots_of_account ON lots (account_id, seq);
INSERT INTO lots (account_id, reference, category, priority, expires_at_ms, amount, available, reserved, used,
                  expired, created_at_ms, live)
  SELECT account_id, NULL, 'paid', 50, NULL, available, available, 0, 0, 0, created_at_ms, 1 FROM accounts
  WHERE available > 0 ORDER BY account_id;
ALTER TABLE holds ADD COLUMN lots text CHECK (lots IS NULL OR lots <> '');
ALTER TABLE events ADD COLUMN lot_seq bigint;
)sql"},
    // 17: prices (prices/price_batch.h; docs/api.md "Prices"): each feature's current price (what a
    // reservation by feature reads, by its key), every version it had (the history), and what each
    // hold reserved by feature was priced at — its own row, keyed by the hold's seq, written with the
    // hold and never changed, so the holds table is not widened for a feature most holds do not use.
    // Its only index is that key: a hold's page of a list finds its priced rows by seq, a batch by
    // request_id through the holds' own unique index (a replay) — an index of its own on request_id
    // was measured to cost a fifth of the hot account's 64-caller rate on SQLite (a random-key page
    // per hold in every batch).
    {17, "prices",
     /*sqlite_legacy=*/0, /*postgres_legacy=*/0,
     // SQLite
     R"sql(
CREATE TABLE prices (
  feature          TEXT    PRIMARY KEY,
  credits_per_unit INTEGER NOT NULL CHECK (credits_per_unit BETWEEN 1 AND 9007199254740991),
  version          INTEGER NOT NULL CHECK (version >= 1),
  updated_at_ms    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE price_versions (
  feature          TEXT    NOT NULL,
  version          INTEGER NOT NULL CHECK (version >= 1),
  credits_per_unit INTEGER NOT NULL CHECK (credits_per_unit BETWEEN 1 AND 9007199254740991),
  created_at_ms    INTEGER NOT NULL,
  PRIMARY KEY (feature, version)
) WITHOUT ROWID;
CREATE TABLE priced_holds (
  hold_seq      INTEGER PRIMARY KEY,  -- the hold's seq: written with it, in its batch
  feature       TEXT    NOT NULL,
  quantity      INTEGER NOT NULL CHECK (quantity >= 1),
  unit_price    INTEGER NOT NULL CHECK (unit_price >= 1),
  price_version INTEGER NOT NULL CHECK (price_version >= 1)
);
)sql",
     // PostgreSQL
     R"sql(
CREATE TABLE prices (
  feature          text COLLATE "C" PRIMARY KEY,
  credits_per_unit bigint NOT NULL CHECK (credits_per_unit BETWEEN 1 AND 9007199254740991),
  version          bigint NOT NULL CHECK (version >= 1),
  updated_at_ms    bigint NOT NULL
);
CREATE TABLE price_versions (
  feature          text COLLATE "C" NOT NULL,
  version          bigint NOT NULL CHECK (version >= 1),
  credits_per_unit bigint NOT NULL CHECK (credits_per_unit BETWEEN 1 AND 9007199254740991),
  created_at_ms    bigint NOT NULL,
  PRIMARY KEY (feature, version)
);
CREATE TABLE priced_holds (
  hold_seq      bigint PRIMARY KEY,  -- the hold's seq: written with it, in its batch
  feature       text COLLATE "C" NOT NULL,
  quantity      bigint NOT NULL CHECK (quantity >= 1),
  unit_price    bigint NOT NULL CHECK (unit_price >= 1),
  price_version bigint NOT NULL CHECK (price_version >= 1)
);
)sql"},
};

constexpr int legacy_number(const Version& version, Dialect dialect) {
  return dialect == Dialect::sqlite ? version.sqlite_legacy : version.postgres_legacy;
}

// Numbered 1, 2, … in order, up to kCurrentVersion; each dialect's old numbers 1, 2, … in the same
// order (so renumbering only raises a number), each version with both DDL texts.
constexpr bool well_formed(Dialect dialect) {
  int next_legacy = 1;
  for (std::size_t i = 0; i < std::size(kVersions); ++i) {
    const Version& v = kVersions[i];
    if (v.number != static_cast<int>(i) + 1 || v.sqlite == nullptr || v.postgres == nullptr) return false;
    const int legacy = legacy_number(v, dialect);
    if (legacy != 0) {
      if (legacy != next_legacy || legacy > v.number) return false;
      ++next_legacy;
    }
  }
  return kVersions[std::size(kVersions) - 1].number == kCurrentVersion;
}
static_assert(well_formed(Dialect::sqlite) && well_formed(Dialect::postgres));

// The last number of the dialect's old list.
constexpr int legacy_last(Dialect dialect) {
  int last = 0;
  for (const Version& v : kVersions) last = legacy_number(v, dialect) != 0 ? legacy_number(v, dialect) : last;
  return last;
}
static_assert(legacy_last(Dialect::sqlite) == 7 && legacy_last(Dialect::postgres) == 8);

const char* dialect_name(Dialect dialect) { return dialect == Dialect::sqlite ? "SQLite" : "PostgreSQL"; }

// The record's statements; the CREATE is the one the old numbering used, so that a new database's
// schema_migrations is the one an old database's becomes.
struct RecordSql {
  const char* exists;           // 1 when schema_migrations exists
  const char* create;
  const char* has_description;  // 1 when it has the description column: the logical numbering
  const char* add_description;
};
constexpr RecordSql kRecordSql[] = {
    {"SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
     "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at_ms INTEGER NOT NULL)",
     "SELECT count(*) FROM pragma_table_info('schema_migrations') WHERE name = 'description'",
     "ALTER TABLE schema_migrations ADD COLUMN description TEXT NOT NULL DEFAULT ''"},
    {"SELECT count(*) FROM pg_class WHERE oid = to_regclass('schema_migrations')",
     "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at_ms bigint NOT NULL)",
     "SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass('schema_migrations') "
     "AND attname = 'description' AND NOT attisdropped",
     "ALTER TABLE schema_migrations ADD COLUMN description text NOT NULL DEFAULT ''"},
};
const RecordSql& record_sql(Dialect dialect) { return kRecordSql[dialect == Dialect::sqlite ? 0 : 1]; }
constexpr const char* kMaxVersionSql = "SELECT coalesce(max(version), 0) FROM schema_migrations";

// A constant of this file as an SQL string literal (standard quoting: both dialects).
std::string literal(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    TG_ASSERT(c != '\\' && c != '\0');
    out += c == '\'' ? std::string("''") : std::string(1, c);
  }
  return out + "'";
}

std::string newer_than_this(std::string_view what, std::int64_t version, std::string_view numbering) {
  return std::string(what) + " has schema version " + std::to_string(version) + std::string(numbering) +
         ", newer than this tollgate (" + std::to_string(kCurrentVersion) + "): upgrade tollgate";
}

// Steps 2–4 of schema.h: the record of a database in the old numbering, now at `logical`, in the
// logical numbering.
void renumber(Dialect dialect, Connection& db, int logical, std::int64_t now_ms) {
  db.exec(record_sql(dialect).add_description);
  // From the highest down: a number only rises, so its new number is free when it moves.
  for (auto v = std::rbegin(kVersions); v != std::rend(kVersions); ++v) {
    const int legacy = legacy_number(*v, dialect);
    if (legacy == 0 || legacy == v->number || v->number > logical) continue;
    db.exec("UPDATE schema_migrations SET version = " + std::to_string(v->number) +
            " WHERE version = " + std::to_string(legacy));
  }
  for (const Version& v : kVersions) {
    if (v.number > logical) break;
    if (legacy_number(v, dialect) == 0) {
      db.exec("INSERT INTO schema_migrations (version, applied_at_ms, description) VALUES (" +
              std::to_string(v.number) + ", " + std::to_string(now_ms) + ", " + literal(v.description) + ")");
    } else {
      db.exec("UPDATE schema_migrations SET description = " + literal(v.description) +
              " WHERE version = " + std::to_string(v.number));
    }
  }
}

}  // namespace

std::span<const Version> versions() { return kVersions; }

const char* ddl(const Version& version, Dialect dialect) {
  return dialect == Dialect::sqlite ? version.sqlite : version.postgres;
}

Result<int> logical_from_legacy(Dialect dialect, int legacy) {
  if (legacy == 0) return 0;
  for (const Version& v : kVersions) {
    if (legacy_number(v, dialect) == legacy) return v.number;
  }
  return Error::make(Code::internal, "schema version " + std::to_string(legacy) + " is past the last of " +
                                         dialect_name(dialect) + "'s old numbering (" +
                                         std::to_string(legacy_last(dialect)) + ")");
}

Status migrate(Dialect dialect, Connection& db, std::int64_t now_ms, std::string_view what) {
  const RecordSql& sql = record_sql(dialect);
  const bool exists = db.query_int(sql.exists) != 0;
  const bool logical = exists && db.query_int(sql.has_description) != 0;
  std::int64_t version = exists ? db.query_int(kMaxVersionSql) : 0;
  if (!logical) {
    if (version < 0 || version > legacy_last(dialect)) {
      return Error::make(Code::internal, newer_than_this(what, version, " (in the old per-backend numbering)"));
    }
    Result<int> translated = logical_from_legacy(dialect, static_cast<int>(version));
    TG_ASSERT(translated.ok());  // every number of the old list up to its last has a version
    if (!exists) db.exec(sql.create);
    renumber(dialect, db, *translated, now_ms);
    version = *translated;
  }
  if (version > kCurrentVersion) return Error::make(Code::internal, newer_than_this(what, version, ""));
  for (const Version& v : kVersions) {
    if (v.number <= version) continue;
    if (const char* statements = ddl(v, dialect); *statements != '\0') db.exec(statements);
    db.exec("INSERT INTO schema_migrations (version, applied_at_ms, description) VALUES (" +
            std::to_string(v.number) + ", " + std::to_string(now_ms) + ", " + literal(v.description) + ")");
  }
  return ok_status();
}

}  // namespace tollgate::schema
