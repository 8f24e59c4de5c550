// Price rows on PostgreSQL (see pg_prices.h; the tables are schema version 17).
#include "store/postgres/pg_prices.h"

#include <string>

#include "store/postgres/pg_rows.h"
#include "store/postgres/pg_write.h"

namespace tollgate::pg {
namespace {

// The array is sorted (PriceSlice::finish) and unnest() yields it in order. A price change takes
// its features' locks exclusively; a batch that only reserves takes them shared (reservations never
// wait for each other), in a statement of its own before the price is read, so that the read's
// snapshot is taken with the lock held: a change waits for the reservations that read the old price
// to commit, and a reservation that reads after a change committed sees it.
const std::string kLockFeatures =
    "SELECT pg_advisory_xact_lock(hashtextextended('tollgate price ' || current_schema() || ' ' || f, 0)) "
    "FROM unnest($1::text[]) AS f";
const std::string kLockFeaturesShared =
    "SELECT pg_advisory_xact_lock_shared(hashtextextended('tollgate price ' || current_schema() || ' ' || f, 0)) "
    "FROM unnest($1::text[]) AS f";
// One statement (each costs the batch's pipeline its own parse and plan): rows of three kinds, in
// columns (kind, t1..t4, n1..n3) —
//   kPrice: a named feature's price (feature, -, -, -, credits_per_unit, version, updated_at_ms);
//   kKnown: when any named feature is unknown, the first known features by name (feature): what
//           the refusal lists;
//   kPriced: a priced hold of a named request_id (request_id, hold_id, account_id, feature,
//           quantity, unit_price, price_version), found through the holds' own request_id index.
enum RowKind : std::int64_t { kKnown = 0, kPrice = 1, kPriced = 2 };
const std::string kLoadPrices =
    "SELECT 1::bigint, feature, ''::text, ''::text, ''::text, credits_per_unit, version, updated_at_ms FROM prices "
    "WHERE feature = ANY($1::text[]) "
    "UNION ALL (SELECT 0, feature, '', '', '', 0, 0, 0 FROM prices "
    "WHERE (SELECT count(*) FROM prices WHERE feature = ANY($1::text[])) < cardinality($1::text[]) "
    "ORDER BY feature LIMIT $2::bigint) "
    "UNION ALL SELECT 2, h.request_id, h.hold_id, h.account_id, p.feature, p.quantity, p.unit_price, p.price_version "
    "FROM holds h JOIN priced_holds p ON p.hold_seq = h.seq WHERE h.request_id = ANY($3::text[])";
const std::string kInsertPrices =
    "INSERT INTO prices (feature, credits_per_unit, version, updated_at_ms) "
    "SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])";
const std::string kUpdatePrices =
    "WITH u AS (UPDATE prices p SET credits_per_unit = n.credits_per_unit, version = n.version, "
    "updated_at_ms = n.updated_at_ms "
    "FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) "
    "AS n(feature, credits_per_unit, version, updated_at_ms, before_version) "
    "WHERE p.feature = n.feature AND p.version = n.before_version RETURNING 1) "
    "SELECT tollgate_assert(count(*) = cardinality($1::text[]), 'a price changed behind the batch''s lock') FROM u";
const std::string kInsertVersions =
    "INSERT INTO price_versions (feature, version, credits_per_unit, created_at_ms) "
    "SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])";
const std::string kInsertPricedHolds =
    "INSERT INTO priced_holds (hold_seq, feature, quantity, unit_price, price_version) "
    "SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[])";

}  // namespace

PriceLoads add_loads(const prices::PriceKeys& keys, std::vector<Conn::Pipelined>& st) {
  PriceLoads at;
  if (keys.features.empty()) return at;  // every command of the slice names a feature
  st.push_back({keys.sets_prices ? &kLockFeatures : &kLockFeaturesShared, Params(text_array(keys.features))});
  st.push_back({&kLoadPrices, Params(text_array(keys.features), prices::kKnownFeaturesListed + 1,
                                     text_array(keys.request_ids))});
  at.prices = st.size() - 1;
  return at;
}

void take_rows(const PriceLoads& at, const std::vector<Rows>& r, prices::PriceSnapshot& out) {
  if (at.prices == PriceLoads::kNoLoad) return;
  const Rows& rows = r[at.prices];
  for (int i = 0; i < rows.size(); ++i) {
    switch (rows.int64(i, 0)) {
      case kPrice:
        out.prices.push_back(prices::Price{rows.text(i, 1), rows.int64(i, 5), rows.int64(i, 6), rows.int64(i, 7)});
        break;
      case kKnown:
        out.known_features.push_back(rows.text(i, 1));
        break;
      case kPriced:
        out.priced_holds.push_back(prices::PricedHold{rows.text(i, 1), rows.text(i, 2), rows.text(i, 3), rows.text(i, 4),
                                                      rows.int64(i, 5), rows.int64(i, 6), rows.int64(i, 7)});
        break;
      default:
        TG_ASSERT(false);  // the statement makes only these kinds
    }
  }
}

void add_writes(const prices::PriceEffects& e, std::vector<Conn::Pipelined>& st) {
  using P = prices::Price;
  if (!e.new_prices.empty()) {
    const auto& v = e.new_prices;
    st.push_back({&kInsertPrices, Params(text_array(column(v, [](const P& x) { return x.feature; })),
                                         int_array(column(v, [](const P& x) { return x.credits_per_unit; })),
                                         int_array(column(v, [](const P& x) { return x.version; })),
                                         int_array(column(v, [](const P& x) { return x.updated_at_ms; })))});
  }
  if (!e.changed.empty()) {
    using C = batch::Change<P>;
    const auto& v = e.changed;
    st.push_back({&kUpdatePrices, Params(text_array(column(v, [](const C& x) { return x.after.feature; })),
                                         int_array(column(v, [](const C& x) { return x.after.credits_per_unit; })),
                                         int_array(column(v, [](const C& x) { return x.after.version; })),
                                         int_array(column(v, [](const C& x) { return x.after.updated_at_ms; })),
                                         int_array(column(v, [](const C& x) { return x.before.version; })))});
  }
  if (!e.versions.empty()) {
    const auto& v = e.versions;
    st.push_back({&kInsertVersions, Params(text_array(column(v, [](const P& x) { return x.feature; })),
                                           int_array(column(v, [](const P& x) { return x.version; })),
                                           int_array(column(v, [](const P& x) { return x.credits_per_unit; })),
                                           int_array(column(v, [](const P& x) { return x.updated_at_ms; })))});
  }
  if (!e.new_priced_holds.empty()) {
    using H = prices::PricedHold;
    const auto& v = e.new_priced_holds;
    st.push_back({&kInsertPricedHolds, Params(int_array(column(v, [](const H& x) { return prices::hold_seq_of(x); })),
                                              text_array(column(v, [](const H& x) { return x.feature; })),
                                              int_array(column(v, [](const H& x) { return x.quantity; })),
                                              int_array(column(v, [](const H& x) { return x.unit_price; })),
                                              int_array(column(v, [](const H& x) { return x.price_version; })))});
  }
}

}  // namespace tollgate::pg
