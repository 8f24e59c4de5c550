// tollgate store/postgres: the paged lists and lookups (store/lists.h) on the PostgreSQL store's
// readers.
//
// Each list is one statement (after the cursor's lookup) that reads limit + 1 rows in the list's
// order from an index: accounts by their primary key (with each account's overdue holds through
// holds_active_by_account, in the same statement), holds by seq (per account through
// holds_by_account), keys through api_keys_newest_first / api_keys_by_account (migration 5). A
// statement per combination of filters, so that every prepared plan can use its index — checked
// with EXPLAIN on generic plans (plan_cache_mode = force_generic_plan): backward index scans with
// the cursor in the index condition, no sort.
//
// Thread safety: as ListReads — any thread; each call leases its own reader connection.
#pragma once

#include "core/clock.h"
#include "store/conn_pool.h"
#include "store/lists.h"

namespace tollgate::pg {

class Conn;

class PgLists final : public ListReads {
 public:
  // `readers` (and `clock` when set) must outlive this. `clock` null: the database's clock.
  PgLists(ConnPool<Conn>& readers, const Clock* clock) : readers_(readers), clock_(clock) {}

  Result<Page<Account>> list_accounts(const PageRequest& page) override;
  Result<Page<Hold>> list_holds(const HoldQuery& query, const PageRequest& page) override;
  Result<Page<KeySummary>> list_keys(std::optional<std::string_view> account_id, const PageRequest& page) override;
  Result<TransferRecord> get_transfer(std::string_view reference) override;

 private:
  ConnPool<Conn>& readers_;
  const Clock* const clock_;
};

}  // namespace tollgate::pg
