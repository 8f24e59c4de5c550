#include "prices/price_batch.h"

#include <algorithm>
#include <utility>

#include "core/checked.h"
#include "core/limits.h"
#include "core/rules.h"

namespace tollgate::prices {

Result<std::int64_t> priced_amount(std::int64_t quantity, std::int64_t unit_price) {
  const auto amount = checked_mul(quantity, unit_price);
  if (!amount || *amount > limits::kAmountMax) {
    return invalid("quantity " + std::to_string(quantity) + " at " + std::to_string(unit_price) +
                   " credits per unit is more than " + std::to_string(limits::kAmountMax) + " credits");
  }
  return *amount;
}

void PriceSlice::finish(PriceKeys& k) {
  for (auto* v : {&k.features, &k.request_ids}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
}

void PriceSlice::add_keys(const SetPriceCommand& c, PriceKeys& k, batch::LedgerKeys& /*ledger*/) {
  k.features.push_back(c.feature);
  k.sets_prices = true;
}

void PriceSlice::add_keys(const ReserveByFeatureCommand& c, PriceKeys& k, batch::LedgerKeys& ledger) {
  k.features.push_back(c.feature);
  k.request_ids.push_back(c.reserve.request_id);
  batch::add_keys(c.reserve, ledger);  // its account locked, its request_id looked up, one new hold
}

Status PriceSlice::validate(const SetPriceCommand& c, const ValidationLimits& /*limits*/) {
  if (auto s = check_id(c.feature, "feature"); !s) return s;
  return check_amount(c.credits_per_unit, "credits_per_unit");
}

Status PriceSlice::validate(const ReserveByFeatureCommand& c, const ValidationLimits& limits) {
  if (c.reserve.amount != 0) return invalid("give either amount or feature, not both");
  if (auto s = check_id(c.feature, "feature"); !s) return s;
  if (auto s = check_amount(c.quantity, "quantity"); !s) return s;
  // The reservation's own checks (account_id, request_id and its prefix, ttl_ms, metadata), with an
  // amount that passes: the amount is the batch's to compute.
  ReserveCommand as_checked = c.reserve;
  as_checked.amount = 1;
  return validate_command(as_checked, limits);
}

void PriceSlice::complete(ReserveByFeatureCommand& c, const batch::Completion& completion) {
  if (!c.reserve.ttl_ms) c.reserve.ttl_ms = completion.hold_ttl_ms_default;
  c.reserve.hold_id_random = completion.hold_id_random();
}

PriceState::PriceState(PriceSnapshot snapshot, std::int64_t now_ms)
    : now_ms_(now_ms), known_features_(std::move(snapshot.known_features)) {
  for (Price& p : snapshot.prices) {
    const std::string feature = p.feature;
    prices_.try_emplace(feature, PriceSlot{p, p});
  }
  for (PricedHold& h : snapshot.priced_holds) {
    const std::string id = h.request_id;
    loaded_priced_.try_emplace(id, std::move(h));
  }
}

Error unknown_feature(std::string_view feature, const std::vector<std::string>& known) {
  const std::string name(feature);
  if (known.empty()) return invalid("unknown feature \"" + name + "\": no feature has a price yet (PUT /v1/prices/{feature})");
  std::string list;
  const std::size_t shown = std::min<std::size_t>(known.size(), kKnownFeaturesListed);
  for (std::size_t i = 0; i < shown; ++i) list += (i == 0 ? "" : ", ") + known[i];
  if (known.size() > shown) list += ", … (GET /v1/prices lists them all)";
  return invalid("unknown feature \"" + name + "\"; known features: " + list);
}

Error PriceState::refuse_unknown(const std::string& feature) const {
  std::vector<std::string> known = known_features_;
  for (const auto& [name, slot] : prices_) known.push_back(name);  // priced earlier in this batch too
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  return unknown_feature(feature, known);
}

Result<PriceOutcome> PriceState::set(const SetPriceCommand& c) {
  auto it = prices_.find(c.feature);
  if (it != prices_.end() && it->second.now.credits_per_unit == c.credits_per_unit) {
    return PriceOutcome{it->second.now, false};
  }
  Price next{c.feature, c.credits_per_unit, 1, now_ms_};
  if (it == prices_.end()) {
    it = prices_.try_emplace(c.feature, PriceSlot{std::nullopt, next}).first;
  } else {
    next.version = it->second.now.version + 1;
    it->second.now = next;
  }
  versions_.push_back(next);
  return PriceOutcome{next, true};
}

Result<PricedHoldOutcome> PriceState::reserve(const ReserveByFeatureCommand& c, batch::LedgerBatch& ledger) {
  const std::string& request_id = c.reserve.request_id;
  if (const Hold* existing = ledger.hold_by_request(request_id)) {
    const PricedHold* priced = nullptr;
    if (auto it = loaded_priced_.find(request_id); it != loaded_priced_.end()) priced = &it->second;
    if (auto it = new_priced_.find(request_id); it != new_priced_.end()) priced = &it->second;
    // What the earlier request was is told only to its own account (a request_id is unique over all
    // accounts: another account's key must learn nothing of it).
    if (existing->account_id != c.reserve.account_id) {
      return Error::make(Code::idempotency_mismatch,
                         "request_id " + request_id + " was already used for another reservation");
    }
    if (priced == nullptr) {
      return Error::make(Code::idempotency_mismatch, "request_id " + request_id + " already made a hold of " +
                                                         std::to_string(existing->amount) +
                                                         " by amount, not by feature");
    }
    if (priced->feature != c.feature || priced->quantity != c.quantity) {
      return Error::make(Code::idempotency_mismatch, "request_id " + request_id + " already made a hold of " +
                                                         std::to_string(priced->quantity) + " × " + priced->feature);
    }
    ReserveCommand replay = c.reserve;
    replay.amount = existing->amount;
    auto held = ledger.reserve(replay);  // the replay: the hold as it is now, nothing moves
    if (!held) return held.error();
    return PricedHoldOutcome{std::move(held->hold), *priced, false};
  }
  if (!ledger.account_exists(c.reserve.account_id)) {  // as a reserve by amount answers it, before the price
    return Error::make(Code::not_found, "account " + c.reserve.account_id + " does not exist");
  }
  auto price = prices_.find(c.feature);
  if (price == prices_.end()) return refuse_unknown(c.feature);
  const Price& p = price->second.now;
  auto amount = priced_amount(c.quantity, p.credits_per_unit);
  if (!amount) return amount.error();
  ReserveCommand priced_reserve = c.reserve;
  priced_reserve.amount = *amount;
  auto held = ledger.reserve(priced_reserve);
  if (!held) return held.error();
  TG_ASSERT(held->created);  // no hold had this request_id (looked up above)
  PricedHold row{request_id, held->hold.hold_id, held->hold.account_id, c.feature, c.quantity, p.credits_per_unit,
                 p.version};
  new_priced_.try_emplace(request_id, row);
  return PricedHoldOutcome{std::move(held->hold), std::move(row), true};
}

PriceEffects PriceState::effects() && {
  PriceEffects e;
  for (auto& [feature, slot] : prices_) {  // map order: by feature
    if (!slot.loaded) {
      e.new_prices.push_back(std::move(slot.now));
    } else if (!(*slot.loaded == slot.now)) {
      e.changed.push_back(batch::Change<Price>{std::move(*slot.loaded), std::move(slot.now)});
    }
  }
  std::sort(versions_.begin(), versions_.end(),
            [](const Price& a, const Price& b) { return std::tie(a.feature, a.version) < std::tie(b.feature, b.version); });
  e.versions = std::move(versions_);
  for (auto& [id, row] : new_priced_) e.new_priced_holds.push_back(std::move(row));  // by request_id
  return e;
}

}  // namespace tollgate::prices
