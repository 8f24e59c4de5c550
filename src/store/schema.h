// tollgate store: the schema — one list of logical versions, each with its DDL for SQLite and for
// PostgreSQL side by side, and the migration both backends run at open() (store/schema.cc).
//
// Versions. Version N takes the schema from N−1 to N on both backends: the same tables, columns,
// constraints and indexes, each in its dialect (a version may have nothing to do in one dialect:
// its DDL there is empty, and it is recorded all the same). kCurrentVersion is the version this
// binary writes and expects, on either backend. Never edit a shipped version: add one.
//
// The record. Every database has a table schema_migrations (version, applied_at_ms, description):
// one row per version applied, the description being the version's own. max(version) is the
// database's version; ping() compares it with kCurrentVersion.
//
// Old numbering. Until this list, each backend numbered its own migrations: SQLite 1–7, PostgreSQL
// 1–8 (PostgreSQL had one more: tollgate_assert() and the active-hold indexes ending with seq,
// version 3 here — SQLite's indexes end with the rowid, seq, already). Such a database has
// schema_migrations without the description column; that absence is how it is told apart, since
// the numbers alone are ambiguous (SQLite's 7 is version 8 here). Each version below names the
// number its step had in each backend's old list (`sqlite_legacy`, `postgres_legacy`; 0: none —
// and 0 on every version added since, as the old lists are closed). At open, a database in the old
// numbering (its max(version) = L) is renumbered, in the same transaction as the migrations after
// it, so that it happens once and durably or not at all:
//   1. the version whose old number in this dialect is L is the logical version it is at (L = 0,
//      a new database: 0); an L past the old list's end (a database newer than this binary that
//      still used the old numbering — no release made one) is refused as newer, changing nothing;
//   2. the description column is added;
//   3. each row's old number becomes its logical one (on PostgreSQL every number stays: its old
//      numbering is the logical one; on SQLite 1–2 stay, 3–7 become 4–8), keeping its applied_at_ms;
//   4. a row is added, at now_ms, for each version up to the logical one that had no step in this
//      dialect's old list (on SQLite: version 3, which has no SQLite DDL), and every row gets its
//      version's description.
// A new database goes the same way (an empty old-numbered record, L = 0), so a migrated
// database's schema — schema_migrations included — is the one a new database gets, statement for
// statement. Then the versions after the database's are applied, each recorded with now_ms; a
// database whose version is past kCurrentVersion is refused (Code::internal, "…newer than this
// tollgate…: upgrade tollgate") and left as it is.
// An older binary (which reads max(version) only) keeps refusing what is newer than it; on SQLite
// the release before this list refuses a renumbered database (8 > its 7), as it would any newer one.
//
// Thread safety: versions() is immutable; migrate() uses only the connection it is given, which
// the caller holds inside one write transaction (and, on PostgreSQL, an advisory lock) that it
// commits when migrate() succeeds and rolls back when it fails or throws.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/result.h"

namespace tollgate::schema {

enum class Dialect : std::uint8_t { sqlite, postgres };

struct Version {
  int number;               // 1, 2, …: the order they are applied in
  const char* description;  // one line, stored with the version's row
  int sqlite_legacy;        // this step's number in SQLite's old list (0: none)
  int postgres_legacy;      // this step's number in PostgreSQL's old list (0: none)
  const char* sqlite;       // the DDL on SQLite ("": nothing to do there)
  const char* postgres;     // the DDL on PostgreSQL ("": nothing to do there)
};

inline constexpr int kCurrentVersion = 17;

// Every version, in order: versions()[i].number == i + 1; the last is kCurrentVersion.
std::span<const Version> versions();

// The version's DDL in `dialect` (may be empty).
const char* ddl(const Version& version, Dialect dialect);

// The logical version a database in `dialect`'s old numbering is at when its max(version) is
// `legacy` (0 → 0); an error (Code::internal) when `legacy` is past the old list's end.
Result<int> logical_from_legacy(Dialect dialect, int legacy);

// What migrate() needs of a connection; each store implements it over its own. Both run SQL inside
// the caller's transaction and throw the store's SQL error on failure.
class Connection {
 public:
  virtual ~Connection() = default;
  // Statements that return no rows (several, separated by ';').
  virtual void exec(const std::string& sql) = 0;
  // A query that answers one row of one integer.
  virtual std::int64_t query_int(const std::string& sql) = 0;
};

// Brings the database on `db` to kCurrentVersion as described above, recording with `now_ms`.
// `what` names the database in a refusal ("the database", a file's path). A refusal changes
// nothing; the caller rolls back either way.
Status migrate(Dialect dialect, Connection& db, std::int64_t now_ms, std::string_view what);

}  // namespace tollgate::schema
