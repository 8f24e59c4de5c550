// tollgate store/sqlite: one read on a pooled reader connection, inside one read transaction (one
// snapshot); SQL failures become errors (sql_failure). Shared by the store's reads and its lists.
//
// Thread safety: any thread; the body runs on the calling thread with a leased connection.
#pragma once

#include <sqlite3.h>

#include <utility>

#include "store/conn_pool.h"
#include "store/sqlite/sqlite_db.h"
#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {

template <typename F>
auto read_snapshot(ConnPool<Conn>& readers, F&& body) -> decltype(body(std::declval<Conn&>())) {
  try {
    auto lease = readers.lease();
    if (!lease) return lease.error();
    Conn& db = *lease.value();
    db.exec("BEGIN");
    try {
      auto result = body(db);
      db.exec("COMMIT");
      return result;
    } catch (...) {
      sqlite3_exec(db.raw(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  } catch (const SqlError& e) {
    return sql_failure(e);
  }
}

}  // namespace tollgate::sqlite
