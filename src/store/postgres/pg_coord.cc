// Coordination rows on PostgreSQL (see pg_coord.h; the tables are migration 7).
#include "store/postgres/pg_coord.h"

#include <string>

#include "store/postgres/pg_rows.h"

namespace tollgate::pg {
namespace {

#define TG_NOW "current_setting('tollgate.now')::bigint"
#define TG_LOCK_COLUMNS "key, owner, fence, expires_at_ms, cancelled::int, updated_at_ms"
#define TG_IDEM_COLUMNS "key, fingerprint, state, response, created_at_ms, expires_at_ms, finished_at_ms, attempt"

const std::string kLoadLocks = "SELECT " TG_LOCK_COLUMNS " FROM locks WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE";
const std::string kLoadIdem =
    "SELECT " TG_IDEM_COLUMNS " FROM idempotency_keys WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE";
const std::string kLoadRates =
    "SELECT r.policy, r.key, r.tat_ns FROM ratelimits r JOIN unnest($1::text[], $2::text[]) AS k(policy, key) "
    "ON r.policy = k.policy AND r.key = k.key ORDER BY r.policy, r.key FOR UPDATE OF r";
// The prune pass takes what nobody else is working on; the rest is pruned by a later pass.
const std::string kLoadPrunable = "SELECT " TG_IDEM_COLUMNS
                                  " FROM idempotency_keys WHERE expires_at_ms < " TG_NOW
                                  " - $1::bigint ORDER BY expires_at_ms LIMIT $2 FOR UPDATE SKIP LOCKED";
const std::string kLoadIdleRates = "SELECT policy, key, tat_ns FROM ratelimits WHERE tat_ns <= " TG_NOW
                                   " * 1000000 ORDER BY tat_ns LIMIT $1 FOR UPDATE SKIP LOCKED";

const std::string kInsertLock =
    "INSERT INTO locks (key, owner, fence, expires_at_ms, cancelled, updated_at_ms) "
    "VALUES ($1, $2, $3::bigint, $4::bigint, $5::boolean, $6::bigint)";
const std::string kUpdateLock =
    "WITH u AS (UPDATE locks SET owner = $2, fence = $3::bigint, expires_at_ms = $4::bigint, cancelled = $5::boolean, "
    "updated_at_ms = $6::bigint WHERE key = $1 AND fence = $7::bigint AND updated_at_ms = $8::bigint "
    "AND owner IS NOT DISTINCT FROM $9 RETURNING 1) "
    "SELECT tollgate_assert(count(*) = 1, 'a lock changed behind the batch''s lock') FROM u";
const std::string kDeleteIdem =
    "WITH d AS (DELETE FROM idempotency_keys WHERE key = $1 AND state = $2 AND expires_at_ms = $3::bigint "
    "AND attempt = $4::bigint RETURNING 1) SELECT tollgate_assert(count(*) = 1, 'an idempotency key changed behind the batch''s lock') FROM d";
const std::string kInsertIdem =
    "INSERT INTO idempotency_keys (key, fingerprint, state, response, created_at_ms, expires_at_ms, finished_at_ms, "
    "attempt) VALUES ($1, $2, $3, $4, $5::bigint, $6::bigint, $7::bigint, $8::bigint)";
const std::string kInsertRate = "INSERT INTO ratelimits (policy, key, tat_ns) VALUES ($1, $2, $3::bigint)";
const std::string kUpdateRate =
    "WITH u AS (UPDATE ratelimits SET tat_ns = $3::bigint WHERE policy = $1 AND key = $2 AND tat_ns = $4::bigint "
    "RETURNING 1) SELECT tollgate_assert(count(*) = 1, 'a rate limit changed behind the batch''s lock') FROM u";
const std::string kDeleteRate =
    "WITH d AS (DELETE FROM ratelimits WHERE policy = $1 AND key = $2 AND tat_ns = $3::bigint RETURNING 1) "
    "SELECT tollgate_assert(count(*) = 1, 'a rate limit changed behind the batch''s lock') FROM d";

#undef TG_NOW

}  // namespace

const char* const kLockColumns = TG_LOCK_COLUMNS;
const char* const kIdempotencyColumns = TG_IDEM_COLUMNS;
#undef TG_LOCK_COLUMNS
#undef TG_IDEM_COLUMNS

coord::Lock read_lock(const Rows& r, int i) {
  return coord::Lock{r.text(i, 0),  r.optional_text(i, 1), r.int64(i, 2), r.optional_int64(i, 3), r.int64(i, 4) != 0,
                     r.int64(i, 5)};
}

coord::IdempotencyKey read_idem(const Rows& r, int i) {
  const auto state = coord::parse_idem_state(r.text(i, 2));
  if (!state) throw PgError("XX000", false, "idempotency key " + r.text(i, 0) + " has state " + r.text(i, 2));
  return coord::IdempotencyKey{r.text(i, 0),  r.text(i, 1),          *state,       r.optional_text(i, 3),
                               r.int64(i, 4), r.int64(i, 5), r.optional_int64(i, 6), r.int64(i, 7)};
}

namespace {

std::string boolean(bool b) { return b ? "true" : "false"; }

}  // namespace

CoordLoads add_loads(const coord::CoordKeys& keys, std::vector<Conn::Pipelined>& st) {
  CoordLoads at;
  const auto add = [&](const std::string& sql, Params params) {
    st.push_back({&sql, std::move(params)});
    return st.size() - 1;
  };
  if (!keys.locks.empty()) at.locks = add(kLoadLocks, Params(text_array(keys.locks)));
  if (!keys.idempotency.empty()) at.idempotency = add(kLoadIdem, Params(text_array(keys.idempotency)));
  if (!keys.rates.empty()) {
    std::vector<std::string> policies, names;
    for (const auto& [policy, key] : keys.rates) {
      policies.push_back(policy);
      names.push_back(key);
    }
    at.rates = add(kLoadRates, Params(text_array(policies), text_array(names)));
  }
  if (keys.prune_max > 0) {
    at.prunable = add(kLoadPrunable, Params(keys.prune_retention_ms, keys.prune_max));
    at.idle_rates = add(kLoadIdleRates, Params(keys.prune_max));
  }
  return at;
}

void take_rows(const CoordLoads& at, const std::vector<Rows>& r, coord::CoordSnapshot& out) {
  if (at.locks != CoordLoads::kNoLoad) {
    for (int i = 0; i < r[at.locks].size(); ++i) out.locks.push_back(read_lock(r[at.locks], i));
  }
  if (at.idempotency != CoordLoads::kNoLoad) {
    for (int i = 0; i < r[at.idempotency].size(); ++i) out.idempotency.push_back(read_idem(r[at.idempotency], i));
  }
  if (at.rates != CoordLoads::kNoLoad) {
    const Rows& rows = r[at.rates];
    for (int i = 0; i < rows.size(); ++i) {
      out.rates.push_back(coord::RateLimitRow{rows.text(i, 0), rows.text(i, 1), rows.int64(i, 2)});
    }
  }
  if (at.prunable != CoordLoads::kNoLoad) {
    for (int i = 0; i < r[at.prunable].size(); ++i) out.prunable.push_back(read_idem(r[at.prunable], i));
    const Rows& idle = r[at.idle_rates];
    for (int i = 0; i < idle.size(); ++i) {
      out.idle_rates.push_back(coord::RateLimitRow{idle.text(i, 0), idle.text(i, 1), idle.int64(i, 2)});
    }
  }
}

void add_writes(const coord::CoordEffects& e, std::vector<Conn::Pipelined>& st) {
  for (const auto& [before, after] : e.locks) {
    TG_ASSERT(after.has_value());  // a lock's row is never deleted: it keeps the fence
    const coord::Lock& l = *after;
    if (!before) {
      st.push_back({&kInsertLock, Params(l.key, l.owner, l.fence, l.expires_at_ms, boolean(l.cancelled), l.updated_at_ms)});
    } else {
      st.push_back({&kUpdateLock, Params(l.key, l.owner, l.fence, l.expires_at_ms, boolean(l.cancelled),
                                         l.updated_at_ms, before->fence, before->updated_at_ms, before->owner)});
    }
  }
  for (const auto& [before, after] : e.idempotency) {
    if (before) {
      st.push_back({&kDeleteIdem, Params(before->key, std::string(coord::idem_state_name(before->state)),
                                         before->expires_at_ms, before->attempt)});
    }
    if (after) {
      st.push_back({&kInsertIdem, Params(after->key, after->fingerprint, std::string(coord::idem_state_name(after->state)),
                                         after->response_json, after->created_at_ms, after->expires_at_ms,
                                         after->finished_at_ms, after->attempt)});
    }
  }
  for (const auto& [before, after] : e.rates) {
    const coord::RateLimitRow& k = after ? *after : *before;
    if (before && after) {
      st.push_back({&kUpdateRate, Params(k.policy, k.key, after->tat_ns, before->tat_ns)});
    } else if (after) {
      st.push_back({&kInsertRate, Params(k.policy, k.key, after->tat_ns)});
    } else {
      st.push_back({&kDeleteRate, Params(k.policy, k.key, before->tat_ns)});
    }
  }
}

}  // namespace tollgate::pg
