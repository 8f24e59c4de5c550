// tollgate store/sqlite: the paged lists and lookups (store/lists.h) on the SQLite store's readers.
//
// Every query reads limit + 1 rows in the list's order from an index, never sorting (EXPLAIN QUERY
// PLAN, when written): accounts by their primary key; holds by their sequence number (the rowid: a
// range on it; per account through holds_by_account, request_id through its unique index); keys
// through api_keys_newest_first / api_keys_by_account (migration 5), a row-value range.
//
// Thread safety: as ListReads — any thread; each call leases its own reader connection.
#pragma once

#include "core/clock.h"
#include "store/conn_pool.h"
#include "store/lists.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

class SqliteLists final : public ListReads {
 public:
  // `readers` and `clock` must outlive this (both are the store's).
  SqliteLists(ConnPool<Conn>& readers, const Clock& clock) : readers_(readers), clock_(clock) {}

  Result<Page<Account>> list_accounts(const PageRequest& page) override;
  Result<Page<Hold>> list_holds(const HoldQuery& query, const PageRequest& page) override;
  Result<Page<KeySummary>> list_keys(std::optional<std::string_view> account_id, const PageRequest& page) override;
  Result<TransferRecord> get_transfer(std::string_view reference) override;

 private:
  ConnPool<Conn>& readers_;
  const Clock& clock_;
};

}  // namespace tollgate::sqlite
