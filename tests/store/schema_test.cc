// The logical schema versions (store/schema.h), on a real SQLite file and a real PostgreSQL schema:
// a new database is at the current version; a database made by the release before them (c39df68,
// numbered per backend — tests/store/fixtures, made by make-release-fixtures with that release's
// binary) migrates on open with its data intact and its schema the one a new database gets, and a
// second open changes nothing; a failed migration leaves the old numbering as it was; a database
// newer than this binary is refused and left as it is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ledger/ledger.h"
#include "store/postgres/pg_conn.h"
#include "store/postgres/pg_store.h"
#include "store/schema.h"
#include "store/sqlite/sqlite_store.h"
#include "support/backends.h"

namespace tollgate {
namespace {

using ::testing::HasSubstr;
using testing::PgSchema;
using testing::TempDir;

constexpr const char* kReleaseSchema = "release_c39df68";  // the schema the PostgreSQL dump was made in

std::string read_fixture(const std::string& suffix) {
  const std::string path = std::string(TOLLGATE_SOURCE_DIR) + "/tests/store/fixtures/release-c39df68." + suffix;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The balances the release's session ended with (release-c39df68.expect: "id available reserved used purchased").
std::map<std::string, Balances> expected_balances() {
  std::map<std::string, Balances> out;
  std::istringstream lines(read_fixture("expect"));
  std::string id;
  Balances b;
  while (lines >> id >> b.available >> b.reserved >> b.used >> b.purchased) out[id] = b;
  EXPECT_EQ(out.size(), 2u);
  return out;
}

// The rows of schema_migrations a migrated database must have: versions 1..current, each with its
// description, at the times given (version → applied_at_ms).
void expect_record(const std::vector<std::string>& rows, const std::map<int, std::int64_t>& applied_at_ms) {
  std::vector<std::string> want;
  for (const schema::Version& v : schema::versions()) {
    want.push_back(std::to_string(v.number) + "|" + std::to_string(applied_at_ms.at(v.number)) + "|" + v.description);
  }
  EXPECT_EQ(rows, want);
}

LedgerOptions no_reaper() {
  LedgerOptions o;
  o.reaper_interval_ms = 0;
  return o;
}

// What the release's session left, read through today's store: balances, settings, holds, events,
// the job and its story, keys; then the audit is clean, and new writes land after the old ones.
void expect_release_data(Store& store, const Clock& clock, std::int64_t events_in_database,
                         const std::string& alice_key_sha256) {
  for (const auto& [id, balances] : expected_balances()) {
    auto account = store.get_account(id);
    ASSERT_TRUE(account.ok()) << id << ": " << account.error().detail;
    EXPECT_EQ(account->balances, balances) << id;
  }
  auto bob = store.get_account("bob");
  ASSERT_TRUE(bob.ok());
  EXPECT_TRUE(bob->frozen);
  EXPECT_EQ(bob->max_active_holds, 3);
  EXPECT_EQ(store.get_account("alice")->overdraft_limit, 10);

  PageRequest page;
  page.limit = 100;
  auto holds = store.lists().list_holds(HoldQuery{}, page);
  ASSERT_TRUE(holds.ok()) << holds.error().detail;
  std::map<std::string, int> by_status;
  for (const Hold& h : holds->items) ++by_status[std::string(hold_status_name(h.status))];
  EXPECT_EQ(by_status, (std::map<std::string, int>{{"active", 1}, {"committed", 2}, {"expired", 1}, {"released", 1}}));

  std::int64_t events = 0;
  for (const char* id : {"alice", "bob"}) {
    auto read = store.read_events(id, 0, limits::kEventsPageMax);
    ASSERT_TRUE(read.ok()) << read.error().detail;
    events += static_cast<std::int64_t>(read->events.size());
  }
  EXPECT_EQ(events, events_in_database);

  auto job = store.jobs().get_job("job-1");
  ASSERT_TRUE(job.ok()) << job.error().detail;
  EXPECT_EQ(job->status, jobs::JobStatus::completed);
  auto story = store.jobs().job_history("job-1");
  ASSERT_TRUE(story.ok());
  EXPECT_GE(story->size(), 2u);

  // Credit lots (version 16): each account's available credits became one lot without expiry.
  for (const auto& [id, balances] : expected_balances()) {
    auto lots = store.lists().list_lots(LotQuery{id, std::nullopt}, page);
    ASSERT_TRUE(lots.ok()) << lots.error().detail;
    ASSERT_EQ(lots->items.size(), balances.available > 0 ? 1u : 0u) << id;
    if (lots->items.empty()) continue;
    const Lot& lot = lots->items[0].lot;
    EXPECT_EQ(lot.amount, balances.available) << id;
    EXPECT_EQ(lot.available, balances.available) << id;
    EXPECT_EQ(lot.terms, LotTerms{}) << id;  // no expiry, priority 50, paid
    EXPECT_EQ(lot.reference, std::nullopt) << id;
  }

  auto keys = store.lists().list_keys(std::nullopt, page);
  ASSERT_TRUE(keys.ok()) << keys.error().detail;
  EXPECT_EQ(keys->items.size(), 3u);  // the admin key, alice's (used), bob's (revoked)
  // Keys made before scopes existed keep today's meaning: an account key all three account scopes,
  // the admin key admin; no expiry, no name.
  for (const KeySummary& k : keys->items) {
    EXPECT_EQ(k.scopes, k.account_id ? kAccountKeyScopes : kAdminKeyScopes) << k.key_id;
    EXPECT_FALSE(k.expires_at_ms.has_value()) << k.key_id;
    EXPECT_FALSE(k.name.has_value()) << k.key_id;
  }
  auto alice = store.find_key(alice_key_sha256);
  ASSERT_TRUE(alice.ok() && alice->key.has_value());
  EXPECT_EQ(alice->key->scopes, kAccountKeyScopes);
  EXPECT_EQ(alice->key->account_id, std::optional<std::string>("alice"));

  auto audit = store.audit(std::nullopt);
  ASSERT_TRUE(audit.ok()) << audit.error().detail;
  EXPECT_EQ(audit->accounts_checked, 2);
  for (const auto& v : audit->violations) ADD_FAILURE() << "audit: " << v.account_id << ": " << v.message;

  const std::int64_t last_event = *store.last_event_id();
  Ledger ledger(store, clock, no_reaper());
  ASSERT_TRUE(ledger.credit({"alice", 5, "after-the-migration"}).ok());
  auto hold = ledger.reserve({"alice", 2, "after-the-migration", 60'000, "", ""});
  ASSERT_TRUE(hold.ok()) << hold.error().detail;
  auto read = ledger.read_events("alice", last_event, 10);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->events.size(), 2u);
  auto after = ledger.audit(std::nullopt);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->violations.empty());
}

// --- SQLite ---------------------------------------------------------------------------------------
using Columns = std::map<std::string, std::vector<std::string>>;  // table → its columns

class SqliteFile {
 public:
  explicit SqliteFile(const std::string& path) { EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK); }
  ~SqliteFile() { sqlite3_close(db_); }
  SqliteFile(const SqliteFile&) = delete;
  SqliteFile& operator=(const SqliteFile&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
  }
  // Every row, its columns joined by '|' (NULL: "NULL").
  std::vector<std::string> rows(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql << ": " << sqlite3_errmsg(db_);
    while (stmt && sqlite3_step(stmt) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        if (c > 0) row += '|';
        const auto* text = sqlite3_column_text(stmt, c);
        row += text ? reinterpret_cast<const char*>(text) : "NULL";
      }
      out.push_back(row);
    }
    sqlite3_finalize(stmt);
    return out;
  }
  // The schema as SQLite keeps it: every object with its CREATE text (SQLite's own tables aside).
  std::vector<std::string> schema() {
    return rows("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                "ORDER BY type, name");
  }
  // Every table's columns (the record's aside), in their order.
  Columns columns() {
    Columns out;
    for (const std::string& table : tables()) out[table] = rows("SELECT name FROM pragma_table_info('" + table + "')");
    return out;
  }
  // Every row of every table but the record, sorted; with `only`, only those tables and their columns
  // (the release's, so that the columns added since — NULL in its rows — leave its rows as they were,
  // and the tables added since are left out: version 10's webhook_endpoints, checked empty apart).
  std::map<std::string, std::vector<std::string>> data(const Columns* only = nullptr) {
    std::map<std::string, std::vector<std::string>> out;
    for (const std::string& table : tables()) {
      if (only != nullptr && only->count(table) == 0) continue;
      std::string list = "*";
      if (only != nullptr && only->count(table) != 0) {
        list.clear();
        for (const std::string& c : only->at(table)) list += (list.empty() ? "\"" : ", \"") + c + "\"";
      }
      auto r = rows("SELECT " + list + " FROM \"" + table + "\"");
      std::sort(r.begin(), r.end());
      out[table] = r;
    }
    return out;
  }
  std::vector<std::string> record() { return rows("SELECT * FROM schema_migrations ORDER BY version"); }

 private:
  std::vector<std::string> tables() {
    return rows("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                "AND name <> 'schema_migrations'");
  }

  sqlite3* db_ = nullptr;
};

class SqliteSchema : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return dir_.file(name); }
  Result<std::unique_ptr<SqliteStore>> open(const std::string& name) {
    SqliteOptions options;
    options.path = path(name);
    return SqliteStore::open(options, clock_);
  }
  // A file with the release's database (its dump), its clock after the session's last event.
  void make_release_file(const std::string& name) {
    SqliteFile(path(name)).exec(read_fixture("sqlite.sql"));
    SqliteFile db(path(name));
    clock_.set_ms(std::stoll(db.rows("SELECT max(at_ms) FROM events").at(0)) + 1000);
  }

  TempDir dir_;
  ManualClock clock_;
};

TEST_F(SqliteSchema, ANewDatabaseIsAtTheCurrentVersion) {
  ASSERT_TRUE(open("new.db").ok());
  SqliteFile db(path("new.db"));
  std::map<int, std::int64_t> at;
  for (const schema::Version& v : schema::versions()) at[v.number] = clock_.now_ms();
  expect_record(db.record(), at);
  EXPECT_EQ(db.rows("SELECT max(version) FROM schema_migrations"),
            std::vector<std::string>{std::to_string(schema::kCurrentVersion)});
}

TEST_F(SqliteSchema, TheReleaseDatabaseMigratesOnceWithItsDataIntact) {
  make_release_file("release.db");
  std::vector<std::string> old_record;
  std::map<std::string, std::vector<std::string>> old_data;
  Columns old_columns;
  {
    SqliteFile db(path("release.db"));
    old_record = db.record();
    old_data = db.data();
    old_columns = db.columns();
    // The release numbered SQLite's migrations 1–7 (no description column).
    ASSERT_EQ(old_record.size(), 7u);
    EXPECT_EQ(db.rows("SELECT count(*) FROM pragma_table_info('schema_migrations')"), std::vector<std::string>{"2"});
  }
  ASSERT_FALSE(old_data.at("events").empty());
  ASSERT_FALSE(old_data.at("jobs").empty());
  {
    auto store = open("release.db");
    ASSERT_TRUE(store.ok()) << store.error().detail;
    // alice's key's hash, as the fixture stored it.
    expect_release_data(**store, clock_, static_cast<std::int64_t>(old_data.at("events").size()),
                        "2f84349ef36814bb6a8da96b2bec141f01c4fd8d2f37d25f4e3463d9357c65c1");
  }
  ASSERT_TRUE(open("new.db").ok());  // a new database at the current version, to compare with
  SqliteFile migrated(path("release.db"));
  SqliteFile fresh(path("new.db"));
  EXPECT_EQ(migrated.schema(), fresh.schema());
  // Old rows keep their times (SQLite's 1–2 stay, 3–7 become 4–8); version 3 was recorded now.
  std::map<int, std::int64_t> at;
  // (Versions after the release, 9 to 17, were recorded now.)
  const int old_number_of[] = {0, 1, 2, 0, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  static_assert(std::size(old_number_of) == static_cast<std::size_t>(schema::kCurrentVersion) + 1);
  for (const schema::Version& v : schema::versions()) {
    const int old = old_number_of[v.number];
    at[v.number] = old == 0 ? clock_.now_ms() : std::stoll(old_record.at(old - 1).substr(old_record.at(old - 1).find('|') + 1));
  }
  const std::vector<std::string> record = migrated.record();
  expect_record(record, at);

  // Reopening changes nothing (the writes of expect_release_data aside, made above).
  const auto schema_before = migrated.schema();
  const auto data_before = migrated.data();
  clock_.advance_ms(60'000);
  ASSERT_TRUE(open("release.db").ok());
  EXPECT_EQ(migrated.record(), record);
  EXPECT_EQ(migrated.schema(), schema_before);
  EXPECT_EQ(migrated.data(), data_before);
  // And the data of the release is all there: every old row is still a row, in the release's columns
  // (holds and the account rows changed by the writes after the migration aside).
  const auto data_in_old_columns = migrated.data(&old_columns);
  for (const char* table : {"events", "transfers", "jobs", "job_history", "api_keys", "locks", "idempotency_keys",
                            "ratelimits"}) {
    const auto& old_rows = old_data.at(table);
    const auto& now_rows = data_in_old_columns.at(table);
    for (const std::string& row : old_rows) {
      EXPECT_TRUE(std::find(now_rows.begin(), now_rows.end(), row) != now_rows.end()) << table << ": " << row;
    }
  }
}

TEST_F(SqliteSchema, OpeningChangesNoRowOfTheRelease) {
  make_release_file("release.db");
  std::map<std::string, std::vector<std::string>> old_data;
  Columns old_columns;
  {
    SqliteFile release(path("release.db"));
    old_data = release.data();
    old_columns = release.columns();
  }
  ASSERT_TRUE(open("release.db").ok());
  SqliteFile migrated(path("release.db"));
  EXPECT_EQ(migrated.data(&old_columns), old_data);
  // The columns added since are NULL in the release's rows: no account has balance notices.
  EXPECT_EQ(migrated.rows("SELECT count(*) FROM accounts WHERE low_balance_threshold IS NOT NULL"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(migrated.rows("SELECT count(*) FROM events WHERE low_balance_threshold IS NOT NULL"),
            std::vector<std::string>{"0"});
  // Version 10's table is there, empty: the release had no webhook endpoints.
  EXPECT_EQ(old_columns.count("webhook_endpoints"), 0u);
  EXPECT_EQ(migrated.rows("SELECT count(*) FROM webhook_endpoints"), std::vector<std::string>{"0"});
  EXPECT_EQ(migrated.rows("SELECT count(*) FROM webhook_deliveries"), std::vector<std::string>{"0"});  // version 11's
}

TEST_F(SqliteSchema, AFailedMigrationLeavesTheOldNumberingAsItWas) {
  make_release_file("release.db");
  // As if the release's last migration (7: events.expires_at_ms) were not recorded: version 8 then
  // fails (the column is there), and the renumbering must go with it.
  SqliteFile db(path("release.db"));
  db.exec("DELETE FROM schema_migrations WHERE version = 7");
  const auto record = db.record();
  auto store = open("release.db");
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.error().detail, HasSubstr("expires_at_ms"));
  EXPECT_EQ(db.record(), record);
  EXPECT_EQ(db.rows("SELECT count(*) FROM pragma_table_info('schema_migrations')"), std::vector<std::string>{"2"});
}

TEST_F(SqliteSchema, ADatabaseNewerThanThisBinaryIsRefusedAndLeftAsItIs) {
  ASSERT_TRUE(open("newer.db").ok());
  SqliteFile newer(path("newer.db"));
  newer.exec("INSERT INTO schema_migrations (version, applied_at_ms, description) VALUES (" +
             std::to_string(schema::kCurrentVersion + 1) + ", 0, 'from the future')");
  const auto record = newer.record();
  auto refused = open("newer.db");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().detail, HasSubstr("has schema version " + std::to_string(schema::kCurrentVersion + 1) +
                                                ", newer than this tollgate (" +
                                                std::to_string(schema::kCurrentVersion) + ")"));
  EXPECT_EQ(newer.record(), record);

  // In the old numbering, past SQLite's last (7): newer too, and not renumbered.
  SqliteFile old(path("old-newer.db"));
  old.exec("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at_ms INTEGER NOT NULL);"
           "INSERT INTO schema_migrations VALUES (8, 0)");
  auto refused_old = open("old-newer.db");
  ASSERT_FALSE(refused_old.ok());
  EXPECT_THAT(refused_old.error().detail, HasSubstr("newer than this tollgate"));
  EXPECT_EQ(old.record(), std::vector<std::string>{"8|0"});
}

// --- PostgreSQL -----------------------------------------------------------------------------------
// One text per row of a one-column query.
std::vector<std::string> pg_rows(pg::Conn& db, const std::string& sql) {
  pg::Rows r = db.exec(sql);
  std::vector<std::string> out;
  for (int i = 0; i < r.size(); ++i) out.push_back(r.is_null(i, 0) ? "NULL" : r.text(i, 0));
  return out;
}

// The schema as the catalogs describe it: columns, indexes, constraints, triggers, functions,
// sequences of the connection's schema, without its name.
std::vector<std::string> pg_schema(pg::Conn& db) {
  return pg_rows(db, R"sql(
SELECT replace(line, current_schema() || '.', '') FROM (
  SELECT format('column %s.%s %s %s %s null=%s default=%s collation=%s identity=%s', table_name, column_name,
                ordinal_position, data_type, character_maximum_length, is_nullable, column_default, collation_name,
                is_identity) AS line
    FROM information_schema.columns WHERE table_schema = current_schema()
  UNION ALL
  SELECT format('index %s.%s %s', tablename, indexname, indexdef) FROM pg_indexes WHERE schemaname = current_schema()
  UNION ALL
  SELECT format('constraint %s %s %s', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid))
    FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = current_schema()
  UNION ALL
  SELECT format('trigger %s', pg_get_triggerdef(t.oid))
    FROM pg_trigger t JOIN pg_class r ON r.oid = t.tgrelid JOIN pg_namespace n ON n.oid = r.relnamespace
    WHERE n.nspname = current_schema() AND NOT t.tgisinternal
  UNION ALL
  SELECT format('function %s(%s) %s', p.proname, pg_get_function_identity_arguments(p.oid), p.prosrc)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema()
  UNION ALL
  SELECT format('sequence %s %s %s %s %s', sequencename, data_type, start_value, increment_by, max_value)
    FROM pg_sequences WHERE schemaname = current_schema()
) lines ORDER BY 1)sql");
}

std::vector<std::string> pg_tables(pg::Conn& db) {
  return pg_rows(db, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                     "AND tablename <> 'schema_migrations'");
}

// Every table's columns (the record's aside), in their order.
Columns pg_columns(pg::Conn& db) {
  Columns out;
  for (const std::string& table : pg_tables(db)) {
    out[table] = pg_rows(db, "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                             "current_schema() AND table_name = '" + table + "' ORDER BY ordinal_position");
  }
  return out;
}

// Every row of every table but the record, as text, sorted; and where each sequence stands. With
// `only`, only those tables and their columns (the release's: the columns added since are NULL in
// its rows; the tables added since are left out).
std::map<std::string, std::vector<std::string>> pg_data(pg::Conn& db, const Columns* only = nullptr) {
  std::map<std::string, std::vector<std::string>> out;
  for (const std::string& table : pg_tables(db)) {
    if (only != nullptr && only->count(table) == 0) continue;  // a table added since the release
    const std::string name = pg::quote_identifier(table);
    std::string row = "t";
    if (only != nullptr && only->count(table) != 0) {
      std::string list;
      for (const std::string& c : only->at(table)) list += (list.empty() ? "t." : ", t.") + pg::quote_identifier(c);
      row = "ROW(" + list + ")";
    }
    out[table] = pg_rows(db, "SELECT " + row + "::text FROM " + name + " t ORDER BY 1");
  }
  out["(sequences)"] = pg_rows(db, "SELECT format('%s %s', sequencename, last_value) FROM pg_sequences "
                                   "WHERE schemaname = current_schema() ORDER BY 1");
  return out;
}

std::vector<std::string> pg_record(pg::Conn& db) {
  return pg_rows(db, "SELECT concat_ws('|', version, applied_at_ms, description) FROM schema_migrations ORDER BY version");
}

// The release's dump, moved into `schema`.
void load_release_dump(const PgSchema& schema, const std::string& server) {
  std::istringstream in(read_fixture("postgres.sql"));
  std::string sql, line;
  while (std::getline(in, line)) {
    if (line.starts_with("\\") || line.starts_with("CREATE SCHEMA ")) continue;  // psql's \restrict; the schema is made
    for (std::size_t at = line.find(kReleaseSchema); at != std::string::npos; at = line.find(kReleaseSchema, at)) {
      line.replace(at, std::string(kReleaseSchema).size(), schema.name());
      at += schema.name().size();
    }
    sql += line + "\n";
  }
  auto db = pg::Conn::connect(server, pg::ConnectOptions{});
  db->exec(sql);
}

class PgSchemaTest : public ::testing::Test {
 protected:
  Result<std::unique_ptr<PgStore>> open(const PgSchema& schema) {
    PgOptions options;
    options.uri = schema.uri();
    options.clock = &clock_;
    options.readers_max = 2;
    return PgStore::open(options);
  }
  static std::unique_ptr<pg::Conn> connect(const PgSchema& schema) {
    return pg::Conn::connect(schema.uri(), pg::ConnectOptions{});
  }
  ManualClock clock_;
};

TEST_F(PgSchemaTest, ANewDatabaseIsAtTheCurrentVersion) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ASSERT_TRUE(open(schema).ok());
  auto db = connect(schema);
  std::map<int, std::int64_t> at;
  for (const schema::Version& v : schema::versions()) at[v.number] = clock_.now_ms();
  expect_record(pg_record(*db), at);
}

// The batch's loads compare id columns with arrays of bytewise ("C") text: a column of another
// collation cannot use its index there and is scanned whole on every batch (the lots table was, until
// this test). Every id column is bytewise but those listed, made before and never compared so.
TEST_F(PgSchemaTest, IdColumnsAreBytewiseSoTheBatchesArraysUseTheirIndexes) {
  REQUIRE_POSTGRES(server);
  PgSchema schema(server);
  ASSERT_TRUE(open(schema).ok());
  auto db = connect(schema);
  const std::vector<std::string> not_bytewise = pg_rows(
      *db, "SELECT table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = "
           "current_schema() AND data_type = 'text' AND (column_name LIKE '%\\_id' OR column_name IN "
           "('reference', 'key')) AND coalesce(collation_name, '') <> 'C' ORDER BY 1");
  EXPECT_EQ(not_bytewise, (std::vector<std::string>{"events.hold_id", "events.job_id", "events.reference", "jobs.hold_id"}));
}

TEST_F(PgSchemaTest, TheReleaseDatabaseMigratesOnceWithItsDataIntact) {
  REQUIRE_POSTGRES(server);
  PgSchema release(server);
  load_release_dump(release, server);
  auto db = connect(release);
  clock_.set_ms(db->exec("SELECT max(at_ms) FROM events").int64(0, 0) + 1000);
  const std::vector<std::string> old_record =
      pg_rows(*db, "SELECT concat_ws('|', version, applied_at_ms) FROM schema_migrations ORDER BY version");
  ASSERT_EQ(old_record.size(), 8u);  // the release numbered PostgreSQL's migrations 1–8
  const auto old_data = pg_data(*db);
  const Columns old_columns = pg_columns(*db);
  ASSERT_FALSE(old_data.at("jobs").empty());
  {
    auto store = open(release);
    ASSERT_TRUE(store.ok()) << store.error().detail;
    // The open alone changes no row; version 16 made each account's available credits a lot.
    auto migrated_data = pg_data(*db, &old_columns);
    std::erase(migrated_data.at("(sequences)"), "lots_seq 2");
    EXPECT_EQ(migrated_data, old_data);
    EXPECT_EQ(pg_rows(*db, "SELECT concat_ws(',', account_id, amount, available, reserved, used, expired, priority, "
                           "category, coalesce(expires_at_ms::text, '-'), coalesce(reference, '-')) FROM lots ORDER BY seq"),
              (std::vector<std::string>{"alice,86,86,0,0,0,50,paid,-,-", "bob,18,18,0,0,0,50,paid,-,-"}));
    EXPECT_EQ(pg_rows(*db, "SELECT count(*) FROM accounts WHERE low_balance_threshold IS NOT NULL"),
              std::vector<std::string>{"0"});
    EXPECT_EQ(old_columns.count("webhook_endpoints"), 0u);  // version 10's table: new, and empty
    EXPECT_EQ(pg_rows(*db, "SELECT count(*) FROM webhook_endpoints"), std::vector<std::string>{"0"});
    EXPECT_EQ(pg_rows(*db, "SELECT count(*) FROM webhook_deliveries"), std::vector<std::string>{"0"});  // version 11's
    expect_release_data(**store, clock_, static_cast<std::int64_t>(old_data.at("events").size()),
                        "b12c357a49138eb0845713f9e692ebd0e61a87a660d2d300c0499061c4b1a056");
  }
  PgSchema fresh(server);
  ASSERT_TRUE(open(fresh).ok());
  auto fresh_db = connect(fresh);
  EXPECT_EQ(pg_schema(*db), pg_schema(*fresh_db));
  // PostgreSQL's old numbers are the logical ones: every row keeps its number and time.
  std::map<int, std::int64_t> at;
  for (const schema::Version& v : schema::versions()) at[v.number] = clock_.now_ms();  // 9, 10 and 11: recorded now
  for (const std::string& row : old_record) {
    at[std::stoi(row.substr(0, row.find('|')))] = std::stoll(row.substr(row.find('|') + 1));
  }
  const auto record = pg_record(*db);
  expect_record(record, at);

  const auto schema_before = pg_schema(*db);
  const auto data_before = pg_data(*db);
  clock_.advance_ms(60'000);
  ASSERT_TRUE(open(release).ok());
  EXPECT_EQ(pg_record(*db), record);
  EXPECT_EQ(pg_schema(*db), schema_before);
  EXPECT_EQ(pg_data(*db), data_before);
}

TEST_F(PgSchemaTest, AFailedMigrationLeavesTheOldNumberingAsItWas) {
  REQUIRE_POSTGRES(server);
  PgSchema release(server);
  load_release_dump(release, server);
  auto db = connect(release);
  db->exec("DELETE FROM schema_migrations WHERE version = 8");
  const auto record = pg_rows(*db, "SELECT concat_ws('|', version, applied_at_ms) FROM schema_migrations ORDER BY version");
  auto store = open(release);
  ASSERT_FALSE(store.ok());
  EXPECT_THAT(store.error().detail, HasSubstr("expires_at_ms"));
  EXPECT_EQ(pg_rows(*db, "SELECT concat_ws('|', version, applied_at_ms) FROM schema_migrations ORDER BY version"),
            record);
  EXPECT_EQ(pg_rows(*db, "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
                         "AND table_name = 'schema_migrations'"),
            std::vector<std::string>{"2"});
}

TEST_F(PgSchemaTest, ADatabaseNewerThanThisBinaryIsRefusedAndLeftAsItIs) {
  REQUIRE_POSTGRES(server);
  PgSchema newer(server);
  ASSERT_TRUE(open(newer).ok());
  auto db = connect(newer);
  db->exec("INSERT INTO schema_migrations (version, applied_at_ms, description) VALUES (" +
           std::to_string(schema::kCurrentVersion + 1) + ", 0, 'from the future')");
  const auto record = pg_record(*db);
  auto refused = open(newer);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().detail, HasSubstr("has schema version " + std::to_string(schema::kCurrentVersion + 1) +
                                                ", newer than this tollgate (" +
                                                std::to_string(schema::kCurrentVersion) + ")"));
  EXPECT_EQ(pg_record(*db), record);

  PgSchema old(server);  // the old numbering, past PostgreSQL's last (8)
  auto old_db = connect(old);
  old_db->exec("CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at_ms bigint NOT NULL);"
               "INSERT INTO schema_migrations VALUES (9, 0)");
  auto refused_old = open(old);
  ASSERT_FALSE(refused_old.ok());
  EXPECT_THAT(refused_old.error().detail, HasSubstr("newer than this tollgate"));
  EXPECT_EQ(pg_rows(*old_db, "SELECT concat_ws('|', version, applied_at_ms) FROM schema_migrations"),
            std::vector<std::string>{"9|0"});
}

// --- the list itself ------------------------------------------------------------------------------
TEST(SchemaVersions, TheOldNumbersMapToTheLogicalOnes) {
  using schema::Dialect;
  using schema::logical_from_legacy;
  for (int n = 0; n <= 2; ++n) EXPECT_EQ(*logical_from_legacy(Dialect::sqlite, n), n);
  for (int n = 3; n <= 7; ++n) EXPECT_EQ(*logical_from_legacy(Dialect::sqlite, n), n + 1);
  for (int n = 0; n <= 8; ++n) EXPECT_EQ(*logical_from_legacy(Dialect::postgres, n), n);
  EXPECT_FALSE(logical_from_legacy(Dialect::sqlite, 8).ok());
  EXPECT_FALSE(logical_from_legacy(Dialect::postgres, 9).ok());
  EXPECT_EQ(static_cast<int>(schema::versions().size()), schema::kCurrentVersion);
  EXPECT_STREQ(schema::ddl(schema::versions()[2], Dialect::sqlite), "");  // PostgreSQL's tollgate_assert()
}

}  // namespace
}  // namespace tollgate
