// Refund rows on PostgreSQL (see pg_refunds.h; the table is schema version 12).
#include "store/postgres/pg_refunds.h"

#include <string>

#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"

namespace tollgate::pg {
namespace {

// The array is sorted (RefundSlice::finish) and unnest() yields it in order: the locks are taken in
// request_id order.
const std::string kLockRequestIds =
    "SELECT pg_advisory_xact_lock(hashtextextended('tollgate refund ' || current_schema() || ' ' || r, 0)) "
    "FROM unnest($1::text[]) AS r";
const std::string kLoadRefunds =
    "SELECT request_id, hold_id, account_id, amount, requested_amount, reason, created_at_ms FROM refunds "
    "WHERE request_id = ANY($1::text[])";
const std::string kInsertRefunds =
    "INSERT INTO refunds (request_id, hold_id, account_id, amount, requested_amount, reason, created_at_ms) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::bigint[])";

}  // namespace

RefundLoads add_loads(const refunds::RefundKeys& keys, std::vector<Conn::Pipelined>& st) {
  RefundLoads at;
  if (keys.request_ids.empty()) return at;
  st.push_back({&kLockRequestIds, Params(text_array(keys.request_ids))});
  st.push_back({&kLoadRefunds, Params(text_array(keys.request_ids))});
  at.refunds = st.size() - 1;
  return at;
}

void take_rows(const RefundLoads& at, const std::vector<Rows>& r, refunds::RefundSnapshot& out) {
  if (at.refunds == RefundLoads::kNoLoad) return;
  const Rows& rows = r[at.refunds];
  for (int i = 0; i < rows.size(); ++i) {
    out.refunds.push_back(refunds::Refund{rows.text(i, 0), rows.text(i, 1), rows.text(i, 2), rows.int64(i, 3),
                                          rows.optional_int64(i, 4), rows.text(i, 5), rows.int64(i, 6)});
  }
}

void add_writes(const refunds::RefundEffects& e, std::vector<Conn::Pipelined>& st) {
  if (e.new_refunds.empty()) return;
  using R = refunds::Refund;
  const auto& v = e.new_refunds;
  st.push_back({&kInsertRefunds, Params(text_array(column(v, [](const R& x) { return x.request_id; })),
                                        text_array(column(v, [](const R& x) { return x.hold_id; })),
                                        text_array(column(v, [](const R& x) { return x.account_id; })),
                                        int_array(column(v, [](const R& x) { return x.amount; })),
                                        int_array(column(v, [](const R& x) { return x.requested_amount; })),
                                        text_array(column(v, [](const R& x) { return x.reason; })),
                                        int_array(column(v, [](const R& x) { return x.created_at_ms; })))});
}

}  // namespace tollgate::pg
