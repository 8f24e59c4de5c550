// tollgate store: lists and lookups — the reads behind GET /v1/accounts, /v1/holds, /v1/keys and
// /v1/transfers/{reference}, as one narrow interface every backend implements (a role of the store,
// apart from Store's writes and single-row reads).
//
// Every list is paged with a cursor (api.md, Conventions): a PageRequest names at most `limit`
// items after the item `starting_after`; the Page answers them and whether more follow. A backend
// reads limit + 1 rows and drops the last to know has_more, so has_more is exact at the moment of
// the read. The order of every list is total and fixed by values that never change (an account id,
// a hold's sequence number, a key's creation time and id), and the cursor is a position in that
// order, never an offset: a pager sees every item that existed when it started exactly once,
// however many items are written before, between or after its pages. (Items created while it
// pages may or may not be seen — newest-first lists put them before the cursor — but never twice.)
//
// A cursor that names no item of the list (unknown, or of another account than the one asked
// for) is refused with invalid_request naming `starting_after` — as Stripe does: a client with a
// stale or mistyped cursor learns it instead of silently reading from the start.
//
// Thread safety: every method may be called from any thread; each answers from one snapshot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/limits.h"
#include "core/lots.h"
#include "core/model.h"
#include "core/result.h"

namespace tollgate {

struct PageRequest {
  std::int64_t limit = limits::kListPageDefault;  // 1..limits::kListPageMax
  std::optional<std::string> starting_after;      // the id of the last item seen; unset: from the start
};

template <typename T>
struct Page {
  std::vector<T> items;
  bool has_more = false;  // items follow the last one answered
};

// invalid_request naming the parameter when `page` is out of range (every backend checks it first).
Status validate_page(const PageRequest& page);
// Reads limit + 1 rows into `rows`; trims it to `limit` and answers the page.
template <typename T>
Page<T> page_of(std::vector<T> rows, const PageRequest& request) {
  Page<T> page;
  page.has_more = static_cast<std::int64_t>(rows.size()) > request.limit;
  if (page.has_more) rows.resize(static_cast<std::size_t>(request.limit));
  page.items = std::move(rows);
  return page;
}
// The refusal of a cursor that names no item of the list (`what`: "account", "hold", "key").
Error unknown_cursor(std::string_view what, std::string_view id);
// not_found for a reference that names no credit or debit (or one the caller may not see).
Error transfer_not_found(std::string_view reference);

// Holds to list, newest first (by creation order). Every filter set must match.
struct HoldQuery {
  std::optional<std::string> account_id;  // not_found when the account does not exist
  std::optional<HoldStatus> status;       // compared with the effective status (overdue = expired)
  std::optional<std::string> request_id;  // the one hold of that request, if any
};

// For backends: a hold query's shape, the same decision on every backend (each keeps one statement
// per shape, so that every plan can use its index). The status filters on the effective status:
// `live` is stored active and not overdue, `expired_or_overdue` stored expired or active past its
// deadline, `stored` any other status as stored.
enum class HoldStatusFilter : std::size_t { any, stored, live, expired_or_overdue };
inline constexpr std::size_t kHoldQueryShapes = 16;
struct HoldQueryShape {
  bool by_account = false;
  bool by_request = false;
  HoldStatusFilter status = HoldStatusFilter::any;
  // 0..kHoldQueryShapes-1, and back.
  std::size_t index() const;
  static HoldQueryShape of(std::size_t index);
  static HoldQueryShape of(const HoldQuery& query);
};
// A hold cursor's position: a hold sequence that no hold reaches, for "from the newest".
inline constexpr std::int64_t kNoHoldCursor = std::numeric_limits<std::int64_t>::max();

// An API key as listed: never its secret nor the secret's hash.
struct KeySummary {
  std::string key_id;
  std::optional<std::string> account_id;  // unset: an admin key
  std::int64_t created_at_ms = 0;
  std::optional<std::int64_t> last_used_at_ms;  // see ledger/key_use.h for its precision
  std::optional<std::int64_t> revoked_at_ms;
  ScopeSet scopes = kAccountKeyScopes;
  std::optional<std::int64_t> expires_at_ms;
  std::optional<std::string> name;

  friend bool operator==(const KeySummary&, const KeySummary&) = default;
};

// An account's credit lots to list, in spending order (core/lots.h), each as a reader sees it.
struct LotQuery {
  std::string account_id;                  // not_found when the account does not exist
  std::optional<lots::LotStatus> status;  // compared with the effective status (overdue = expired)
};
// The number that stands for "never" in a lot's place in the spending order (its expires_at unset).
inline constexpr std::int64_t kLotNeverExpires = std::numeric_limits<std::int64_t>::max();

// A credit or debit found by its reference, with the event it wrote (its id and time).
struct TransferRecord {
  Transfer transfer;
  Event event;
};

class ListReads {
 public:
  virtual ~ListReads() = default;

  // Accounts by account_id ascending (bytewise), each as a reader sees it (overdue holds counted
  // as available). starting_after: an account id.
  virtual Result<Page<Account>> list_accounts(const PageRequest& page) = 0;
  // Holds newest first, each as a reader sees it. starting_after: a hold id that matches the
  // query's account (when one is given).
  virtual Result<Page<Hold>> list_holds(const HoldQuery& query, const PageRequest& page) = 0;
  // API keys newest first (created_at, then key_id, both descending): of one account (not_found
  // when it does not exist), or every key, admin keys included. starting_after: a key id of the list.
  virtual Result<Page<KeySummary>> list_keys(std::optional<std::string_view> account_id, const PageRequest& page) = 0;
  // The credit or debit recorded under `reference`; not_found when there is none.
  virtual Result<TransferRecord> get_transfer(std::string_view reference) = 0;
  // An account's lots in spending order. starting_after: a lot id of that account.
  virtual Result<Page<lots::LotView>> list_lots(const LotQuery& query, const PageRequest& page) = 0;
};

}  // namespace tollgate
