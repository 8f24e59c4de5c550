// Price rows on SQLite (see sqlite_prices.h; the tables are schema version 17).
#include "store/sqlite/sqlite_prices.h"

#include <string>

#include "store/sqlite/sqlite_write.h"

namespace tollgate::sqlite {

void load_rows(Conn& db, const prices::PriceKeys& keys, std::int64_t /*now_ms*/, prices::PriceSnapshot& out) {
  bool unknown = false;
  for (const std::string& feature : keys.features) {
    Query q(db.stmt("SELECT feature, credits_per_unit, version, updated_at_ms FROM prices WHERE feature = ?1"), feature);
    if (!q.step()) {
      unknown = true;
      continue;
    }
    Stmt& r = q.row();
    out.prices.push_back(prices::Price{r.text(0), r.int64(1), r.int64(2), r.int64(3)});
  }
  if (unknown) {
    Query q(db.stmt("SELECT feature FROM prices ORDER BY feature LIMIT ?1"), prices::kKnownFeaturesListed + 1);
    while (q.step()) out.known_features.push_back(q.row().text(0));
  }
  for (const std::string& id : keys.request_ids) {
    Query q(db.stmt("SELECT h.request_id, h.hold_id, h.account_id, p.feature, p.quantity, p.unit_price, "
                    "p.price_version FROM holds h JOIN priced_holds p ON p.hold_seq = h.seq WHERE h.request_id = ?1"),
            id);
    if (!q.step()) continue;
    Stmt& r = q.row();
    out.priced_holds.push_back(
        prices::PricedHold{r.text(0), r.text(1), r.text(2), r.text(3), r.int64(4), r.int64(5), r.int64(6)});
  }
}

void write_rows(Conn& db, const prices::PriceEffects& e) {
  using P = prices::Price;
  insert_rows(db, "INSERT INTO prices (feature, credits_per_unit, version, updated_at_ms)", 4, e.new_prices,
              [](Stmt& s, int i, const P& p) {
                s.bind(i, p.feature);
                s.bind(i + 1, p.credits_per_unit);
                s.bind(i + 2, p.version);
                s.bind(i + 3, p.updated_at_ms);
              });
  for (const auto& [before, after] : e.changed) {
    Query q(db.stmt("UPDATE prices SET credits_per_unit = ?2, version = ?3, updated_at_ms = ?4 "
                    "WHERE feature = ?1 AND version = ?5"),
            after.feature, after.credits_per_unit, after.version, after.updated_at_ms, before.version);
    q.step();
    expect_one_change(db, "price of " + after.feature);
  }
  insert_rows(db, "INSERT INTO price_versions (feature, version, credits_per_unit, created_at_ms)", 4, e.versions,
              [](Stmt& s, int i, const P& p) {
                s.bind(i, p.feature);
                s.bind(i + 1, p.version);
                s.bind(i + 2, p.credits_per_unit);
                s.bind(i + 3, p.updated_at_ms);
              });
  insert_rows(db, "INSERT INTO priced_holds (hold_seq, feature, quantity, unit_price, price_version)", 5,
              e.new_priced_holds, [](Stmt& s, int i, const prices::PricedHold& h) {
                s.bind(i, prices::hold_seq_of(h));
                s.bind(i + 1, h.feature);
                s.bind(i + 2, h.quantity);
                s.bind(i + 3, h.unit_price);
                s.bind(i + 4, h.price_version);
              });
}

}  // namespace tollgate::sqlite
