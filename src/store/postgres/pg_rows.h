// tollgate store/postgres: the rows of the schema as values, and the small reads every part of the
// PostgreSQL store shares (the reads and the batch's loads).
//
// Thread safety: functions over the Conn they are given (one thread at a time per Conn).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/model.h"
#include "core/result.h"
#include "jobs/job.h"
#include "store/postgres/pg_conn.h"

namespace tollgate::pg {

// Column lists in the order read_hold / read_event / read_account / read_key expect them.
extern const char* const kHoldColumns;
extern const char* const kEventColumns;
extern const char* const kEventColumnsOfE;  // the same, of a table aliased `e`
extern const char* const kAccountColumns;
extern const char* const kKeyColumns;
extern const char* const kLotColumns;
// A transfer joined with its event: FROM transfers t JOIN events e ON e.event_id = t.event_id.
extern const char* const kTransferColumns;
// The database's clock in ms since the epoch: the real time, not the transaction's start.
extern const char* const kNowSql;

// Rows of a result that selected the columns above (starting at column `first`). A stored value that
// no longer parses throws PgError (XX000).
Hold read_hold(const Rows& r, int row, int first = 0);
Event read_event(const Rows& r, int row, int first = 0);
Account read_account(const Rows& r, int row);
ApiKey read_key(const Rows& r, int row);
Lot read_lot(const Rows& r, int row);
std::pair<Transfer, Event> read_transfer(const Rows& r, int row);

// The account row as stored (no overdue adjustment); `for_update` locks it.
std::optional<Account> account_row(Conn& db, std::string_view account_id, bool for_update);
// The account as a reader sees it at now_ms: overdue holds already count as available.
std::optional<Account> account_view(Conn& db, std::string_view account_id, std::int64_t now_ms);
// The same for many accounts: kAccountViewSql + a WHERE clause (…, $2 = now_ms, …) selects the
// rows; read_account_view maps each.
extern const std::string kAccountViewSql;
Account read_account_view(const Rows& r, int row, std::int64_t now_ms);
// The hold with exactly this id (found by the sequence number inside it); `for_update` locks it.
std::optional<Hold> hold_by_id(Conn& db, std::string_view hold_id, bool for_update);

// A job row and a job's history entry (columns in the order read_job / read_job_entry expect).
extern const char* const kJobColumns;
extern const char* const kJobEntryColumns;
jobs::Job read_job(const Rows& r, int row);
jobs::JobEntry read_job_entry(const Rows& r, int row);

// A PostgreSQL array literal of text ({"a","b"}; nullopt items are NULL) or of integers.
std::string text_array(const std::vector<std::string>& items);
std::string text_array(const std::vector<std::optional<std::string>>& items);
std::string int_array(const std::vector<std::int64_t>& items);
std::string int_array(const std::vector<std::optional<std::int64_t>>& items);
std::string bool_array(const std::vector<bool>& items);
std::string bool_array(const std::vector<std::optional<bool>>& items);

// PgError → what the caller does next: transient → unavailable, else internal.
Error pg_failure(const PgError& e);

}  // namespace tollgate::pg
