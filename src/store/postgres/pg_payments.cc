// Payment rows on PostgreSQL (see pg_payments.h; the tables are schema version 13).
#include "store/postgres/pg_payments.h"

#include <string>

#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"

namespace tollgate::pg {
namespace {

// The arrays are sorted (PaymentSlice::finish) and unnest() yields them in order.
const std::string kLockPaymentKeys =
    "SELECT pg_advisory_xact_lock(hashtextextended('tollgate payment ' || current_schema() || ' ' || k, 0)) "
    "FROM unnest($1::text[]) AS k";
const std::string kLoadPayments =
    "SELECT payment_id, provider, provider_payment, account_id, credits, refunded_credits, taken_back, created_at_ms, "
    "updated_at_ms FROM payments WHERE payment_id = ANY($1::text[])";
const std::string kLoadPaymentEvents =
    "SELECT reference, payment_id, kind, owed, taken, at_ms FROM payment_events WHERE reference = ANY($1::text[])";
const std::string kInsertPayments =
    "INSERT INTO payments (payment_id, provider, provider_payment, account_id, credits, refunded_credits, taken_back, "
    "created_at_ms, updated_at_ms) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], "
    "$6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[])";
const std::string kUpdatePayments =
    "WITH u AS (UPDATE payments p SET refunded_credits = v.refunded_credits, taken_back = v.taken_back, "
    "updated_at_ms = v.updated_at_ms FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], "
    "$6::bigint[]) AS v(payment_id, refunded_credits, taken_back, updated_at_ms, b_refunded_credits, b_taken_back) "
    "WHERE p.payment_id = v.payment_id AND p.refunded_credits = v.b_refunded_credits "
    "AND p.taken_back = v.b_taken_back RETURNING 1) "
    "SELECT tollgate_assert(count(*) = $7, 'a payment changed behind the batch''s lock') FROM u";
const std::string kInsertPaymentEvents =
    "INSERT INTO payment_events (reference, payment_id, kind, owed, taken, at_ms) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])";

template <typename T>
T decoded(std::optional<T> v) {
  TG_ASSERT(v.has_value());  // the columns' CHECKs
  return *v;
}

}  // namespace

PaymentLoads add_loads(const payments::PaymentKeys& keys, std::vector<Conn::Pipelined>& st) {
  PaymentLoads at;
  if (keys.payment_ids.empty() && keys.references.empty()) return at;
  std::vector<std::string> lock_keys = keys.payment_ids;  // payment ids first, then references: one order
  lock_keys.insert(lock_keys.end(), keys.references.begin(), keys.references.end());
  st.push_back({&kLockPaymentKeys, Params(text_array(lock_keys))});
  st.push_back({&kLoadPayments, Params(text_array(keys.payment_ids))});
  at.payments = st.size() - 1;
  st.push_back({&kLoadPaymentEvents, Params(text_array(keys.references))});
  at.events = st.size() - 1;
  return at;
}

void take_rows(const PaymentLoads& at, const std::vector<Rows>& r, payments::PaymentSnapshot& out) {
  if (at.payments == PaymentLoads::kNoLoad) return;
  const Rows& p = r[at.payments];
  for (int i = 0; i < p.size(); ++i) {
    out.payments.push_back(payments::Payment{p.text(i, 0), decoded(payments::parse_provider(p.text(i, 1))),
                                             p.optional_text(i, 2), p.text(i, 3), p.int64(i, 4), p.int64(i, 5),
                                             p.int64(i, 6), p.int64(i, 7), p.int64(i, 8)});
  }
  const Rows& e = r[at.events];
  for (int i = 0; i < e.size(); ++i) {
    out.events.push_back(payments::PaymentEvent{e.text(i, 0), e.text(i, 1), decoded(payments::parse_event_kind(e.text(i, 2))),
                                                e.int64(i, 3), e.int64(i, 4), e.int64(i, 5)});
  }
}

void add_writes(const payments::PaymentEffects& e, std::vector<Conn::Pipelined>& st) {
  using P = payments::Payment;
  if (!e.new_payments.empty()) {
    const auto& v = e.new_payments;
    st.push_back({&kInsertPayments,
                  Params(text_array(column(v, [](const P& x) { return x.payment_id; })),
                         text_array(column(v, [](const P& x) { return std::string(payments::provider_name(x.provider)); })),
                         text_array(column(v, [](const P& x) { return x.provider_payment; })),
                         text_array(column(v, [](const P& x) { return x.account_id; })),
                         int_array(column(v, [](const P& x) { return x.credits; })),
                         int_array(column(v, [](const P& x) { return x.refunded_credits; })),
                         int_array(column(v, [](const P& x) { return x.taken_back; })),
                         int_array(column(v, [](const P& x) { return x.created_at_ms; })),
                         int_array(column(v, [](const P& x) { return x.updated_at_ms; })))});
  }
  if (!e.changed_payments.empty()) {
    using C = batch::Change<P>;
    const auto& c = e.changed_payments;
    st.push_back({&kUpdatePayments,
                  Params(text_array(column(c, [](const C& x) { return x.after.payment_id; })),
                         int_array(column(c, [](const C& x) { return x.after.refunded_credits; })),
                         int_array(column(c, [](const C& x) { return x.after.taken_back; })),
                         int_array(column(c, [](const C& x) { return x.after.updated_at_ms; })),
                         int_array(column(c, [](const C& x) { return x.before.refunded_credits; })),
                         int_array(column(c, [](const C& x) { return x.before.taken_back; })),
                         static_cast<std::int64_t>(c.size()))});
  }
  if (!e.new_events.empty()) {
    using E = payments::PaymentEvent;
    const auto& v = e.new_events;
    st.push_back({&kInsertPaymentEvents,
                  Params(text_array(column(v, [](const E& x) { return x.reference; })),
                         text_array(column(v, [](const E& x) { return x.payment_id; })),
                         text_array(column(v, [](const E& x) { return std::string(payments::event_kind_name(x.kind)); })),
                         int_array(column(v, [](const E& x) { return x.owed; })),
                         int_array(column(v, [](const E& x) { return x.taken; })),
                         int_array(column(v, [](const E& x) { return x.at_ms; })))});
  }
}

}  // namespace tollgate::pg
