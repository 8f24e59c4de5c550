// Refund rows on SQLite (see sqlite_refunds.h; the table is schema version 12).
#include "store/sqlite/sqlite_refunds.h"

#include <string>

#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {

void load_rows(Conn& db, const refunds::RefundKeys& keys, std::int64_t /*now_ms*/, refunds::RefundSnapshot& out) {
  for (const std::string& id : keys.request_ids) {
    Query q(db.stmt("SELECT request_id, hold_id, account_id, amount, requested_amount, reason, created_at_ms "
                    "FROM refunds WHERE request_id = ?1"),
            id);
    if (!q.step()) continue;
    Stmt& r = q.row();
    out.refunds.push_back(refunds::Refund{r.text(0), r.text(1), r.text(2), r.int64(3), r.optional_int64(4), r.text(5),
                                          r.int64(6)});
  }
}

void write_rows(Conn& db, const refunds::RefundEffects& e) {
  insert_rows(db, "INSERT INTO refunds (request_id, hold_id, account_id, amount, requested_amount, reason, created_at_ms)",
              7, e.new_refunds, [](Stmt& s, int i, const refunds::Refund& r) {
                s.bind(i, r.request_id);
                s.bind(i + 1, r.hold_id);
                s.bind(i + 2, r.account_id);
                s.bind(i + 3, r.amount);
                s.bind(i + 4, r.requested_amount);
                s.bind(i + 5, r.reason);
                s.bind(i + 6, r.created_at_ms);
              });
}

}  // namespace tollgate::sqlite
