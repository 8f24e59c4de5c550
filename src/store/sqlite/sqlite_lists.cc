#include "store/sqlite/sqlite_lists.h"

#include <array>
#include <limits>
#include <string>

#include "core/hold_id.h"
#include "core/rules.h"
#include "store/sqlite/sqlite_read.h"
#include "store/sqlite/sqlite_rows.h"

namespace tollgate::sqlite {
namespace {

// The statement for one combination of filters (statements are cached by address, so each text is
// built once). Parameters: ?1 account_id, ?2 request_id, ?3 now, ?4 status, ?5 cursor seq, ?6 limit.
const char* holds_sql(const HoldQueryShape& wanted) {
  static const auto statements = [] {
    std::array<std::string, kHoldQueryShapes> out;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const HoldQueryShape shape = HoldQueryShape::of(i);
      std::string sql = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE seq < ?5";
      if (shape.by_account) sql += " AND account_id = ?1";
      if (shape.by_request) sql += " AND request_id = ?2";
      switch (shape.status) {
        case HoldStatusFilter::stored: sql += " AND status = ?4"; break;
        case HoldStatusFilter::live: sql += " AND status = 'active' AND expires_at_ms > ?3"; break;
        case HoldStatusFilter::expired_or_overdue:
          sql += " AND (status = 'expired' OR (status = 'active' AND expires_at_ms <= ?3))";
          break;
        case HoldStatusFilter::any: break;
      }
      out[i] = sql + " ORDER BY seq DESC LIMIT ?6";
    }
    return out;
  }();
  return statements[wanted.index()].c_str();
}

Error account_not_found(std::string_view account_id) {
  return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
}

}  // namespace

Result<Page<Account>> SqliteLists::list_accounts(const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const std::int64_t now = clock_.now_ms();
  return read_snapshot(readers_, [&](Conn& db) -> Result<Page<Account>> {
    if (page.starting_after && !account_row(db, *page.starting_after)) {
      return unknown_cursor("account", *page.starting_after);
    }
    std::vector<std::string> ids;
    Query q(db.stmt("SELECT account_id FROM accounts WHERE account_id > ?1 ORDER BY account_id LIMIT ?2"),
            page.starting_after.value_or(""), page.limit + 1);
    while (q.step()) ids.push_back(q->text(0));
    std::vector<Account> rows;
    rows.reserve(ids.size());
    for (const std::string& id : ids) {
      auto a = account_view(db, id, now);
      TG_ASSERT(a.has_value());  // read in the same snapshot; accounts are never deleted
      rows.push_back(std::move(*a));
    }
    return page_of(std::move(rows), page);
  });
}

Result<Page<Hold>> SqliteLists::list_holds(const HoldQuery& query, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  const std::int64_t now = clock_.now_ms();
  return read_snapshot(readers_, [&](Conn& db) -> Result<Page<Hold>> {
    if (query.account_id && !account_row(db, *query.account_id)) return account_not_found(*query.account_id);
    std::int64_t cursor_seq = kNoHoldCursor;
    if (page.starting_after) {
      const auto cursor = hold_by_id(db, *page.starting_after);
      if (!cursor || (query.account_id && cursor->account_id != *query.account_id)) {
        return unknown_cursor("hold", *page.starting_after);
      }
      cursor_seq = *hold_id_seq(cursor->hold_id);
    }
    const std::optional<std::string> status =
        query.status ? std::optional<std::string>(hold_status_name(*query.status)) : std::nullopt;
    Query q(db.stmt(holds_sql(HoldQueryShape::of(query))),
            query.account_id, query.request_id, now, status, cursor_seq, page.limit + 1);
    std::vector<Hold> rows;
    while (q.step()) rows.push_back(rules::hold_view(read_hold(q.row()), now));
    return page_of(std::move(rows), page);
  });
}

Result<Page<KeySummary>> SqliteLists::list_keys(std::optional<std::string_view> account_id, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  return read_snapshot(readers_, [&](Conn& db) -> Result<Page<KeySummary>> {
    if (account_id && !account_row(db, *account_id)) return account_not_found(*account_id);
    // The position after which to read: (created_at_ms, key_id), descending.
    std::int64_t cursor_created = std::numeric_limits<std::int64_t>::max();
    std::string cursor_id;
    if (page.starting_after) {
      Query c(db.stmt("SELECT account_id, created_at_ms FROM api_keys WHERE key_id = ?1"), *page.starting_after);
      if (!c.step() || (account_id && c->optional_text(0) != std::optional<std::string>(*account_id))) {
        return unknown_cursor("key", *page.starting_after);
      }
      cursor_created = c->int64(1);
      cursor_id = *page.starting_after;
    }
    static const char* const kColumns = "key_id, account_id, created_at_ms, last_used_at_ms, revoked_at_ms";
    static const std::string of_account = std::string("SELECT ") + kColumns +
                                          " FROM api_keys WHERE account_id = ?1 AND (created_at_ms, key_id) < (?2, ?3) "
                                          "ORDER BY created_at_ms DESC, key_id DESC LIMIT ?4";
    static const std::string of_all = std::string("SELECT ") + kColumns +
                                      " FROM api_keys WHERE (created_at_ms, key_id) < (?2, ?3) "
                                      "ORDER BY created_at_ms DESC, key_id DESC LIMIT ?4";
    Query q(db.stmt(account_id ? of_account.c_str() : of_all.c_str()), account_id.value_or(""), cursor_created,
            cursor_id, page.limit + 1);
    std::vector<KeySummary> rows;
    while (q.step()) {
      rows.push_back(KeySummary{q->text(0), q->optional_text(1), q->int64(2), q->optional_int64(3), q->optional_int64(4)});
    }
    return page_of(std::move(rows), page);
  });
}

Result<TransferRecord> SqliteLists::get_transfer(std::string_view reference) {
  return read_snapshot(readers_, [&](Conn& db) -> Result<TransferRecord> {
    static const std::string sql = std::string("SELECT ") + kTransferColumns +
                                   " FROM transfers t JOIN events e ON e.event_id = t.event_id WHERE t.reference = ?1";
    Query q(db.stmt(sql.c_str()), reference);
    if (!q.step()) return transfer_not_found(reference);
    auto [transfer, event] = read_transfer(q.row());
    return TransferRecord{std::move(transfer), std::move(event)};
  });
}

}  // namespace tollgate::sqlite
