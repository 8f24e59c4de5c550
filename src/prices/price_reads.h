// tollgate prices: the reads of prices and priced holds (store/reads.h implements them once for
// every backend). The rows are written through the store's batches (prices/price_batch.h).
//
// Thread safety: any thread; each call answers from one snapshot.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string_view>

#include "core/result.h"
#include "prices/price_batch.h"
#include "store/lists.h"

namespace tollgate::prices {

class PriceReads {
 public:
  virtual ~PriceReads() = default;
  // The feature's current price, or not_found.
  virtual Result<Price> get_price(std::string_view feature) = 0;
  // Current prices by feature, after page.starting_after (a feature), at most page.limit.
  virtual Result<Page<Price>> list_prices(const PageRequest& page) = 0;
  // The feature's versions, newest first, after page.starting_after (a version number of it; one
  // that is not a number: invalid_request), at most page.limit. not_found: no such feature.
  virtual Result<Page<Price>> list_versions(std::string_view feature, const PageRequest& page) = 0;
  // What the holds of `hold_seqs` (at most limits::kListPageMax) were priced at, by hold_seq; holds
  // made by amount have none.
  virtual Result<std::map<std::int64_t, PricedHold>> priced_holds(std::span<const std::int64_t> hold_seqs) = 0;
};

}  // namespace tollgate::prices
