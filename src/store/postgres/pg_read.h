// tollgate store/postgres: one read on a pooled reader connection, in one read-only snapshot
// (REPEATABLE READ) with the clock read once; database failures become errors. A pooled connection
// may have died while idle (a database restart, a fail-over): a read is safe to run again, once, on
// a new connection. Shared by the store's reads and its lists.
//
// Thread safety: any thread; the body runs on the calling thread with a leased connection.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "core/clock.h"
#include "store/conn_pool.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_rows.h"

namespace tollgate::pg {

// Runs `body(conn, now_ms)`; `clock` null: now is the database's clock.
template <typename F>
auto read_snapshot(ConnPool<Conn>& readers, const Clock* clock, F&& body)
    -> decltype(body(std::declval<Conn&>(), std::int64_t{})) {
  for (int attempt = 0;; ++attempt) {
    try {
      auto lease = readers.lease();
      if (!lease) return lease.error();
      Conn& db = *lease.value();
      try {
        std::int64_t now = 0;
        if (clock) {
          db.exec("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY");
          now = clock->now_ms();
        } else {
          now = db.exec(std::string("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; ") + kNowSql).int64(0, 0);
        }
        auto result = body(db, now);
        db.exec("COMMIT");
        return result;
      } catch (...) {
        db.rollback();
        throw;
      }
    } catch (const PgError& e) {
      if (e.connection_lost() && attempt == 0) continue;
      return pg_failure(e);
    }
  }
}

}  // namespace tollgate::pg
