// tollgate store/postgres: the read primitives of the shared reads (store/reads.h) on the
// PostgreSQL store's readers — one read in one read-only snapshot (pg_read.h: REPEATABLE READ, run
// again once on a new connection when a pooled one had died), statements prepared per connection,
// rows decoded by pg_rows.h.
//
// Each list statement (store/reads_sql.cc) reads limit + 1 rows in the list's order from an index:
// accounts by their primary key (with each account's overdue holds through holds_active_by_account,
// in the same statement), holds by seq (per account through holds_by_account), keys through
// api_keys_newest_first / api_keys_by_account. A statement per combination of filters, so that
// every prepared plan can use its index — checked with EXPLAIN on generic plans
// (plan_cache_mode = force_generic_plan): backward index scans with the cursor in the index
// condition, no sort.
//
// Thread safety: as ReadSource — run may be called from any thread; each call leases its own reader
// connection.
#pragma once

#include "core/clock.h"
#include "store/conn_pool.h"
#include "store/reads.h"

namespace tollgate::pg {

class Conn;

class PgReadSource final : public reads::ReadSource {
 public:
  // `readers` (and `clock` when set) must outlive this. `clock` null: the database's clock.
  PgReadSource(ConnPool<Conn>& readers, const Clock* clock) : readers_(readers), clock_(clock) {}

  const reads::ReadSql& sql() const override { return reads::read_sql(reads::Dialect::postgres); }
  Status run(const std::function<void(reads::ReadConn&, std::int64_t now_ms)>& body) override;

 private:
  ConnPool<Conn>& readers_;
  const Clock* const clock_;
};

}  // namespace tollgate::pg
