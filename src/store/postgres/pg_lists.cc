#include "store/postgres/pg_lists.h"

#include <array>
#include <limits>
#include <string>

#include "core/hold_id.h"
#include "core/rules.h"
#include "store/postgres/pg_read.h"
#include "store/postgres/pg_rows.h"

namespace tollgate::pg {
namespace {

// A parameter that a statement does not filter on is still named (prepared statements take a fixed
// list of parameters); `$n IS NULL OR true` is folded away by the planner.
std::string unused(const char* parameter) { return std::string(" AND (") + parameter + " IS NULL OR true)"; }

// The statement for one combination of filters. Parameters: $1 account_id, $2 request_id, $3 now,
// $4 status, $5 cursor seq, $6 limit.
const std::string& holds_sql(const HoldQueryShape& wanted) {
  static const auto statements = [] {
    std::array<std::string, kHoldQueryShapes> out;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const HoldQueryShape shape = HoldQueryShape::of(i);
      std::string sql = std::string("SELECT ") + kHoldColumns + " FROM holds WHERE seq < $5::bigint";
      sql += shape.by_account ? " AND account_id = $1::text" : unused("$1::text");
      sql += shape.by_request ? " AND request_id = $2::text" : unused("$2::text");
      switch (shape.status) {
        case HoldStatusFilter::stored: sql += " AND status = $4::text" + unused("$3::bigint"); break;
        case HoldStatusFilter::live:
          sql += " AND status = 'active' AND expires_at_ms > $3::bigint" + unused("$4::text");
          break;
        case HoldStatusFilter::expired_or_overdue:
          sql += " AND (status = 'expired' OR (status = 'active' AND expires_at_ms <= $3::bigint))" + unused("$4::text");
          break;
        case HoldStatusFilter::any: sql += unused("$3::bigint") + unused("$4::text"); break;
      }
      out[i] = sql + " ORDER BY seq DESC LIMIT $6::bigint";
    }
    return out;
  }();
  return statements[wanted.index()];
}

Error account_not_found(std::string_view account_id) {
  return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
}

bool account_exists(Conn& db, std::string_view account_id) {
  return !db.query("SELECT 1 FROM accounts WHERE account_id = $1", account_id).empty();
}

}  // namespace

Result<Page<Account>> PgLists::list_accounts(const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t now) -> Result<Page<Account>> {
    if (page.starting_after && !account_exists(db, *page.starting_after)) {
      return unknown_cursor("account", *page.starting_after);
    }
    static const std::string sql = kAccountViewSql + "WHERE a.account_id > $1 ORDER BY a.account_id LIMIT $3";
    Rows r = db.query(sql, page.starting_after.value_or(""), now, page.limit + 1);
    std::vector<Account> rows;
    rows.reserve(static_cast<std::size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) rows.push_back(read_account_view(r, i, now));
    return page_of(std::move(rows), page);
  });
}

Result<Page<Hold>> PgLists::list_holds(const HoldQuery& query, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t now) -> Result<Page<Hold>> {
    if (query.account_id && !account_exists(db, *query.account_id)) return account_not_found(*query.account_id);
    std::int64_t cursor_seq = kNoHoldCursor;
    if (page.starting_after) {
      const auto cursor = hold_by_id(db, *page.starting_after, /*for_update=*/false);
      if (!cursor || (query.account_id && cursor->account_id != *query.account_id)) {
        return unknown_cursor("hold", *page.starting_after);
      }
      cursor_seq = *hold_id_seq(cursor->hold_id);
    }
    const std::optional<std::string> status =
        query.status ? std::optional<std::string>(hold_status_name(*query.status)) : std::nullopt;
    std::vector<Hold> rows = read_holds(
        db.query(holds_sql(HoldQueryShape::of(query)),
                 query.account_id, query.request_id, now, status, cursor_seq, page.limit + 1));
    for (Hold& h : rows) h = rules::hold_view(std::move(h), now);
    return page_of(std::move(rows), page);
  });
}

Result<Page<KeySummary>> PgLists::list_keys(std::optional<std::string_view> account_id, const PageRequest& page) {
  if (auto valid = validate_page(page); !valid) return valid.error();
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t) -> Result<Page<KeySummary>> {
    if (account_id && !account_exists(db, *account_id)) return account_not_found(*account_id);
    // The position after which to read: (created_at_ms, key_id), descending.
    std::int64_t cursor_created = std::numeric_limits<std::int64_t>::max();
    std::string cursor_id;
    if (page.starting_after) {
      Rows c = db.query("SELECT account_id, created_at_ms FROM api_keys WHERE key_id = $1", *page.starting_after);
      if (c.empty() || (account_id && c.optional_text(0, 0) != std::optional<std::string>(*account_id))) {
        return unknown_cursor("key", *page.starting_after);
      }
      cursor_created = c.int64(0, 1);
      cursor_id = *page.starting_after;
    }
    static const std::string columns = "SELECT key_id, account_id, created_at_ms, last_used_at_ms, revoked_at_ms ";
    static const std::string of_account = columns +
                                          "FROM api_keys WHERE account_id = $1 AND (created_at_ms, key_id) < ($2, $3) "
                                          "ORDER BY created_at_ms DESC, key_id DESC LIMIT $4";
    static const std::string of_all = columns +
                                      "FROM api_keys WHERE (created_at_ms, key_id) < ($2, $3)" + unused("$1::text") +
                                      " ORDER BY created_at_ms DESC, key_id DESC LIMIT $4";
    Rows r = db.query(account_id ? of_account : of_all, std::string(account_id.value_or("")), cursor_created,
                      cursor_id, page.limit + 1);
    std::vector<KeySummary> rows;
    for (int i = 0; i < r.size(); ++i) {
      rows.push_back(KeySummary{r.text(i, 0), r.optional_text(i, 1), r.int64(i, 2), r.optional_int64(i, 3),
                                r.optional_int64(i, 4)});
    }
    return page_of(std::move(rows), page);
  });
}

Result<TransferRecord> PgLists::get_transfer(std::string_view reference) {
  return read_snapshot(readers_, clock_, [&](Conn& db, std::int64_t) -> Result<TransferRecord> {
    static const std::string sql = std::string("SELECT ") + kTransferColumns +
                                   " FROM transfers t JOIN events e ON e.event_id = t.event_id WHERE t.reference = $1";
    Rows r = db.query(sql, reference);
    if (r.empty()) return transfer_not_found(reference);
    auto [transfer, event] = read_transfer(r, 0);
    return TransferRecord{std::move(transfer), std::move(event)};
  });
}

}  // namespace tollgate::pg
