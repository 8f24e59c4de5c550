// Payment rows on SQLite (see sqlite_payments.h; the tables are schema version 13).
#include "store/sqlite/sqlite_payments.h"

#include <string>

#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {
namespace {

payments::Provider provider_of(const std::string& name) {
  const auto p = payments::parse_provider(name);
  TG_ASSERT(p.has_value());  // the column's CHECK
  return *p;
}

payments::EventKind kind_of(const std::string& name) {
  const auto k = payments::parse_event_kind(name);
  TG_ASSERT(k.has_value());  // the column's CHECK
  return *k;
}

}  // namespace

void load_rows(Conn& db, const payments::PaymentKeys& keys, std::int64_t /*now_ms*/, payments::PaymentSnapshot& out) {
  for (const std::string& id : keys.payment_ids) {
    Query q(db.stmt("SELECT payment_id, provider, provider_payment, account_id, credits, refunded_credits, taken_back, "
                    "created_at_ms, updated_at_ms FROM payments WHERE payment_id = ?1"),
            id);
    if (!q.step()) continue;
    Stmt& r = q.row();
    out.payments.push_back(payments::Payment{r.text(0), provider_of(r.text(1)), r.optional_text(2), r.text(3),
                                             r.int64(4), r.int64(5), r.int64(6), r.int64(7), r.int64(8)});
  }
  for (const std::string& ref : keys.references) {
    Query q(db.stmt("SELECT reference, payment_id, kind, owed, taken, at_ms FROM payment_events WHERE reference = ?1"),
            ref);
    if (!q.step()) continue;
    Stmt& r = q.row();
    out.events.push_back(
        payments::PaymentEvent{r.text(0), r.text(1), kind_of(r.text(2)), r.int64(3), r.int64(4), r.int64(5)});
  }
}

void write_rows(Conn& db, const payments::PaymentEffects& e) {
  using P = payments::Payment;
  insert_rows(db,
              "INSERT INTO payments (payment_id, provider, provider_payment, account_id, credits, refunded_credits, "
              "taken_back, created_at_ms, updated_at_ms)",
              9, e.new_payments, [](Stmt& s, int i, const P& p) {
                s.bind(i, p.payment_id);
                s.bind(i + 1, std::string(payments::provider_name(p.provider)));
                s.bind(i + 2, p.provider_payment);
                s.bind(i + 3, p.account_id);
                s.bind(i + 4, p.credits);
                s.bind(i + 5, p.refunded_credits);
                s.bind(i + 6, p.taken_back);
                s.bind(i + 7, p.created_at_ms);
                s.bind(i + 8, p.updated_at_ms);
              });
  for (const auto& [before, after] : e.changed_payments) {
    Query q(db.stmt("UPDATE payments SET refunded_credits = ?2, taken_back = ?3, updated_at_ms = ?4 "
                    "WHERE payment_id = ?1 AND refunded_credits = ?5 AND taken_back = ?6"),
            after.payment_id, after.refunded_credits, after.taken_back, after.updated_at_ms, before.refunded_credits,
            before.taken_back);
    q.step();
    expect_one_change(db, "payment " + after.payment_id);
  }
  insert_rows(db, "INSERT INTO payment_events (reference, payment_id, kind, owed, taken, at_ms)", 6, e.new_events,
              [](Stmt& s, int i, const payments::PaymentEvent& x) {
                s.bind(i, x.reference);
                s.bind(i + 1, x.payment_id);
                s.bind(i + 2, std::string(payments::event_kind_name(x.kind)));
                s.bind(i + 3, x.owed);
                s.bind(i + 4, x.taken);
                s.bind(i + 5, x.at_ms);
              });
}

}  // namespace tollgate::sqlite
