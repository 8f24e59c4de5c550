// tollgate store/sqlite: the read primitives of the shared reads (store/reads.h) on the SQLite
// store's readers — one read in one read transaction on a leased reader connection, statements run
// from the connection's cache (by the address of their text), rows decoded by sqlite_rows.h.
//
// Every list statement (store/reads_sql.cc) reads limit + 1 rows in the list's order from an index,
// never sorting (EXPLAIN QUERY PLAN, when written).
//
// Thread safety: as ReadSource — run may be called from any thread; each call leases its own reader
// connection.
#pragma once

#include "core/clock.h"
#include "store/conn_pool.h"
#include "store/reads.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

class SqliteReadSource final : public reads::ReadSource {
 public:
  // `readers` and `clock` must outlive this (both are the store's).
  SqliteReadSource(ConnPool<Conn>& readers, const Clock& clock) : readers_(readers), clock_(clock) {}

  const reads::ReadSql& sql() const override { return reads::read_sql(reads::Dialect::sqlite); }
  // now_ms: the store's clock, read once inside the read transaction.
  Status run(const std::function<void(reads::ReadConn&, std::int64_t now_ms)>& body) override;

 private:
  ConnPool<Conn>& readers_;
  const Clock& clock_;
};

}  // namespace tollgate::sqlite
