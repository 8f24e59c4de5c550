// tollgate store/sqlite: the rows of the schema as values, and the small reads every part of the
// SQLite store shares (the reads and the batch's loads).
//
// Thread safety: functions over the Conn they are given (one thread at a time per Conn).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "core/model.h"
#include "jobs/job.h"
#include "store/sqlite/sqlite_db.h"

namespace tollgate::sqlite {

// Column lists in the order read_hold / read_event / read_key expect them.
extern const char* const kHoldColumns;
extern const char* const kEventColumns;
extern const char* const kEventColumnsOfE;  // the same, of a table aliased `e`
extern const char* const kKeyColumns;
extern const char* const kLotColumns;
// A transfer joined with its event: FROM transfers t JOIN events e ON e.event_id = t.event_id.
extern const char* const kTransferColumns;

// A job row, and a job's history entry (in the order read_job / read_job_entry expect).
extern const char* const kJobColumns;
extern const char* const kJobEntryColumns;

// Rows of a statement that selected the columns above (starting at column `first`). A stored value
// that no longer parses (an unknown status) throws SqlError(SQLITE_CORRUPT).
Hold read_hold(Stmt& s, int first = 0);
Event read_event(Stmt& s, int first = 0);
ApiKey read_key(Stmt& s);
Lot read_lot(Stmt& s);
std::pair<Transfer, Event> read_transfer(Stmt& s);
jobs::Job read_job(Stmt& s);
jobs::JobEntry read_job_entry(Stmt& s);
// The job, or nullopt.
std::optional<jobs::Job> job_row(Conn& db, std::string_view client_request_id);

// The account row as stored (no overdue adjustment), or nullopt.
std::optional<Account> account_row(Conn& db, std::string_view account_id);
// The account as a reader sees it at now_ms: overdue holds already count as available.
std::optional<Account> account_view(Conn& db, std::string_view account_id, std::int64_t now_ms);
// The hold with exactly this id (found by the sequence number inside it), or nullopt.
std::optional<Hold> hold_by_id(Conn& db, std::string_view hold_id);

}  // namespace tollgate::sqlite
