// tollgate prices: the price slice of a write batch (core/batch.h's seam) — the server's price of a
// feature, and holds reserved by feature and quantity instead of an amount (docs/api.md "Prices:
// holds by feature and quantity"). Pure: no I/O, no clock, no threads.
//
// A price is a feature's credits per unit; every change is a new version (kept: the history is
// readable), and the current one is what a reservation computes with. A hold reserved by feature
// freezes the unit price it was made at (a PricedHold row: its feature, quantity, unit price and
// price version, never changed afterwards), so a price change between a reserve and its commit
// changes nothing for that hold; its commit by quantity is priced at the frozen unit price.
//
// The money moves through the ledger's part (batch::LedgerBatch::reserve): the slice computes the
// amount (quantity × credits_per_unit, checked) from the price as the batch read it and asks for an
// ordinary reservation, so every rule of holds (frozen, too many holds, not enough credits, lots)
// exists once. Idempotency is the hold's request_id: the same request again answers the hold as it
// is (whatever the price is now); the same request_id with another feature, quantity or account, or
// one that made a hold by amount, is idempotency_mismatch.
//
// Keys: the features named (their current price; and, when one is unknown, the first known ones, so
// the refusal can list them) and the request_ids of the priced holds (their PricedHold rows); in the
// ledger's keys, a reservation's account and request_id. On PostgreSQL a price change takes a
// transaction-scoped advisory lock per feature first (two instances changing one price write
// versions one after the other), a reservation the same lock shared: a change waits for the
// reservations in flight that read the old price, and one that reads after it sees the new price. Effects: changed or new prices (guarded by their version), their
// version rows, new priced holds. The dialects' loaders and writers: store/sqlite/sqlite_prices.h,
// store/postgres/pg_prices.h.
//
// Thread safety: plain values; a PriceState is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/batch.h"
#include "core/commands.h"
#include "core/hold_id.h"
#include "core/model.h"
#include "core/result.h"
#include "core/validate.h"

namespace tollgate::prices {

// A feature's price: the current one, or one version of its history.
struct Price {
  std::string feature;
  std::int64_t credits_per_unit = 0;  // 1 ≤ credits_per_unit ≤ limits::kAmountMax
  std::int64_t version = 0;           // 1, 2, … per feature: one per change
  std::int64_t updated_at_ms = 0;     // when this version was set

  friend bool operator==(const Price&, const Price&) = default;
};

// What a hold reserved by feature was priced at; written with the hold, never changed.
struct PricedHold {
  std::string request_id;
  std::string hold_id;
  std::string account_id;
  std::string feature;
  std::int64_t quantity = 0;
  std::int64_t unit_price = 0;  // the price's credits_per_unit when the hold was made
  std::int64_t price_version = 0;

  friend bool operator==(const PricedHold&, const PricedHold&) = default;
};

// The sequence number of a priced hold's hold (its id is one the ledger made: asserted).
inline std::int64_t hold_seq_of(const PricedHold& h) {
  const auto seq = hold_id_seq(h.hold_id);
  TG_ASSERT(seq.has_value());
  return *seq;
}

// How many known features a refusal of an unknown one lists at most (the rest: GET /v1/prices).
inline constexpr std::int64_t kKnownFeaturesListed = 20;

// --- the commands ---------------------------------------------------------------------------------

// Sets a feature's price. A new feature gets version 1; another credits_per_unit than the current
// one makes the next version (created=true); the same one changes nothing (created=false).
struct SetPriceCommand {
  std::string feature;
  std::int64_t credits_per_unit = 0;
};

struct PriceOutcome {
  Price price;           // as it is now
  bool created = false;  // a new version was made
};

// Reserves `quantity` units of `feature` at its current price: `reserve` is the reservation with
// its amount left 0 (the batch computes it); its account, request_id, ttl_ms and metadata as a
// reserve by amount has them. Refusals: invalid_request (unknown feature, naming the known ones;
// quantity × price past limits::kAmountMax), idempotency_mismatch, and the reservation's own.
struct ReserveByFeatureCommand {
  ReserveCommand reserve;
  std::string feature;
  std::int64_t quantity = 1;
};

struct PricedHoldOutcome {
  Hold hold;          // as it is now
  PricedHold priced;  // what it was priced at
  bool created = false;
};

// --- the rows -------------------------------------------------------------------------------------

struct PriceKeys {
  std::vector<std::string> features;     // sorted, unique once finished
  std::vector<std::string> request_ids;  // of reservations by feature; sorted, unique
  bool sets_prices = false;              // a SetPriceCommand is in the batch (PostgreSQL: its locks)
};

struct PriceSnapshot {
  std::vector<Price> prices;  // current prices of PriceKeys::features that exist
  // When a feature named is unknown: the first known features by name (at most
  // kKnownFeaturesListed + 1: one more says there are more).
  std::vector<std::string> known_features;
  std::vector<PricedHold> priced_holds;  // of PriceKeys::request_ids that exist
};

struct PriceEffects {
  std::vector<Price> new_prices;              // features priced for the first time, by feature
  std::vector<batch::Change<Price>> changed;  // by feature, each once (before: as loaded)
  std::vector<Price> versions;                // every version this batch made, by (feature, version)
  std::vector<PricedHold> new_priced_holds;   // by request_id
  bool empty() const { return new_prices.empty() && changed.empty() && versions.empty() && new_priced_holds.empty(); }
};

// The prices and priced holds of a batch in memory.
class PriceState {
 public:
  PriceState(PriceSnapshot snapshot, std::int64_t now_ms);

  Result<PriceOutcome> set(const SetPriceCommand& c);
  Result<PricedHoldOutcome> reserve(const ReserveByFeatureCommand& c, batch::LedgerBatch& ledger);

  PriceEffects effects() &&;

 private:
  struct PriceSlot {
    std::optional<Price> loaded;  // as loaded (nullopt: priced by this batch)
    Price now;
  };
  Error refuse_unknown(const std::string& feature) const;

  std::int64_t now_ms_;
  std::map<std::string, PriceSlot> prices_;
  std::vector<Price> versions_;
  std::vector<std::string> known_features_;
  std::map<std::string, PricedHold> loaded_priced_;  // by request_id
  std::map<std::string, PricedHold> new_priced_;     // by request_id
};

// --- the slice (core/batch.h's seam) --------------------------------------------------------------
struct PriceSlice {
  using Commands = std::tuple<SetPriceCommand, ReserveByFeatureCommand>;
  using Outcomes = std::tuple<PriceOutcome, PricedHoldOutcome>;
  using Keys = PriceKeys;
  using Snapshot = PriceSnapshot;
  using Effects = PriceEffects;
  using State = PriceState;

  static void finish(PriceKeys& k);
  static void add_keys(const SetPriceCommand& c, PriceKeys& k, batch::LedgerKeys& ledger);
  static void add_keys(const ReserveByFeatureCommand& c, PriceKeys& k, batch::LedgerKeys& ledger);
  static Result<PriceOutcome> decide(const SetPriceCommand& c, PriceState& s, batch::LedgerBatch& /*ledger*/) {
    return s.set(c);
  }
  static Result<PricedHoldOutcome> decide(const ReserveByFeatureCommand& c, PriceState& s, batch::LedgerBatch& ledger) {
    return s.reserve(c, ledger);
  }
  static Status validate(const SetPriceCommand& c, const ValidationLimits& limits);
  static Status validate(const ReserveByFeatureCommand& c, const ValidationLimits& limits);
  static void complete(ReserveByFeatureCommand& c, const batch::Completion& completion);
};

// The refusal of a feature that has no price, naming the known ones: `known` sorted by name, as many
// as are at hand (past kKnownFeaturesListed: "…", GET /v1/prices lists them all). Also the check's.
Error unknown_feature(std::string_view feature, const std::vector<std::string>& known);

// The amount `quantity` units cost at `unit_price`; invalid_request naming both when past
// limits::kAmountMax.
Result<std::int64_t> priced_amount(std::int64_t quantity, std::int64_t unit_price);

}  // namespace tollgate::prices
