// Coordination rows on SQLite (see sqlite_coord.h; the tables are migration 6).
#include "store/sqlite/sqlite_coord.h"

#include <string>

#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {

const char* const kLockColumns = "key, owner, fence, expires_at_ms, cancelled, updated_at_ms";
const char* const kIdempotencyColumns =
    "key, fingerprint, state, response, created_at_ms, expires_at_ms, finished_at_ms, attempt";

coord::Lock read_lock(Stmt& r) {
  return coord::Lock{r.text(0), r.optional_text(1), r.int64(2), r.optional_int64(3), r.int64(4) != 0, r.int64(5)};
}

coord::IdempotencyKey read_idem(Stmt& r) {
  const auto state = coord::parse_idem_state(r.text(2));
  if (!state) throw SqlError(SQLITE_CORRUPT, "idempotency key " + r.text(0) + " has state " + r.text(2));
  return coord::IdempotencyKey{r.text(0), r.text(1),  *state, r.optional_text(3), r.int64(4), r.int64(5),
                               r.optional_int64(6), r.int64(7)};
}

namespace {

std::optional<coord::Lock> lock_row(Conn& db, std::string_view key) {
  static const std::string sql = std::string("SELECT ") + kLockColumns + " FROM locks WHERE key = ?1";
  Query q(db.stmt(sql.c_str()), key);
  if (!q.step()) return std::nullopt;
  return read_lock(q.row());
}

std::optional<coord::IdempotencyKey> idem_row(Conn& db, std::string_view key) {
  static const std::string sql = std::string("SELECT ") + kIdempotencyColumns + " FROM idempotency_keys WHERE key = ?1";
  Query q(db.stmt(sql.c_str()), key);
  if (!q.step()) return std::nullopt;
  return read_idem(q.row());
}

}  // namespace

void load_rows(Conn& db, const coord::CoordKeys& keys, std::int64_t now_ms, coord::CoordSnapshot& out) {
  for (const std::string& key : keys.locks) {
    if (auto l = lock_row(db, key)) out.locks.push_back(std::move(*l));
  }
  for (const std::string& key : keys.idempotency) {
    if (auto i = idem_row(db, key)) out.idempotency.push_back(std::move(*i));
  }
  for (const auto& [policy, key] : keys.rates) {
    Query q(db.stmt("SELECT tat_ns FROM ratelimits WHERE policy = ?1 AND key = ?2"), policy, key);
    if (q.step()) out.rates.push_back(coord::RateLimitRow{policy, key, q->int64(0)});
  }
  if (keys.prune_max > 0) {
    static const std::string finished = std::string("SELECT ") + kIdempotencyColumns +
                                        " FROM idempotency_keys WHERE expires_at_ms < ?1 "
                                        "ORDER BY expires_at_ms LIMIT ?2";
    Query q(db.stmt(finished.c_str()), now_ms - keys.prune_retention_ms, keys.prune_max);
    while (q.step()) out.prunable.push_back(read_idem(q.row()));
    Query idle(db.stmt("SELECT policy, key, tat_ns FROM ratelimits WHERE tat_ns <= ?1 ORDER BY tat_ns LIMIT ?2"),
               now_ms * 1'000'000, keys.prune_max);
    while (idle.step()) out.idle_rates.push_back(coord::RateLimitRow{idle->text(0), idle->text(1), idle->int64(2)});
  }
}

void write_rows(Conn& db, const coord::CoordEffects& e) {
  for (const auto& [before, after] : e.locks) {
    TG_ASSERT(after.has_value());  // a lock's row is never deleted: it keeps the fence
    const coord::Lock& l = *after;
    if (!before) {
      Query q(db.stmt("INSERT INTO locks (key, owner, fence, expires_at_ms, cancelled, updated_at_ms) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
              l.key, l.owner, l.fence, l.expires_at_ms, std::int64_t{l.cancelled}, l.updated_at_ms);
      q.step();
      continue;
    }
    Query q(db.stmt("UPDATE locks SET owner = ?2, fence = ?3, expires_at_ms = ?4, cancelled = ?5, updated_at_ms = ?6 "
                    "WHERE key = ?1 AND fence = ?7 AND updated_at_ms = ?8 AND owner IS ?9"),
            l.key, l.owner, l.fence, l.expires_at_ms, std::int64_t{l.cancelled}, l.updated_at_ms, before->fence,
            before->updated_at_ms, before->owner);
    q.step();
    expect_one_change(db, "lock " + l.key);
  }
  for (const auto& [before, after] : e.idempotency) {
    if (before) {
      Query q(db.stmt("DELETE FROM idempotency_keys WHERE key = ?1 AND state = ?2 AND expires_at_ms = ?3 AND attempt = ?4"),
              before->key, coord::idem_state_name(before->state), before->expires_at_ms, before->attempt);
      q.step();
      expect_one_change(db, "idempotency key " + before->key);
    }
    if (after) {
      Query q(db.stmt("INSERT INTO idempotency_keys (key, fingerprint, state, response, created_at_ms, expires_at_ms, "
                      "finished_at_ms, attempt) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
              after->key, after->fingerprint, coord::idem_state_name(after->state), after->response_json,
              after->created_at_ms, after->expires_at_ms, after->finished_at_ms, after->attempt);
      q.step();
    }
  }
  for (const auto& [before, after] : e.rates) {
    const coord::RateLimitRow& key = after ? *after : *before;
    if (before && after) {
      Query q(db.stmt("UPDATE ratelimits SET tat_ns = ?3 WHERE policy = ?1 AND key = ?2 AND tat_ns = ?4"),
              key.policy, key.key, after->tat_ns, before->tat_ns);
      q.step();
      expect_one_change(db, "rate limit " + key.policy + "/" + key.key);
    } else if (after) {
      Query q(db.stmt("INSERT INTO ratelimits (policy, key, tat_ns) VALUES (?1, ?2, ?3)"), key.policy, key.key,
              after->tat_ns);
      q.step();
    } else {
      Query q(db.stmt("DELETE FROM ratelimits WHERE policy = ?1 AND key = ?2 AND tat_ns = ?3"), key.policy, key.key,
              before->tat_ns);
      q.step();
      expect_one_change(db, "rate limit " + key.policy + "/" + key.key);
    }
  }
}

}  // namespace tollgate::sqlite
