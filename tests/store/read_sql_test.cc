// The statements of the shared reads (store/reads.h, reads_sql.cc) are one text per statement: the
// SQLite and PostgreSQL texts differ only in how a parameter is named (?n against $n or $n::type)
// and in PostgreSQL's clauses that name a parameter a statement does not filter on. A dialect that
// grew its own SQL for a read would fail here (the behaviour of each statement is tested on both
// backends by the store, list, job and coordination suites).
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "store/reads.h"

namespace tollgate::reads {
namespace {

// A PostgreSQL text in SQLite's naming: unused-parameter clauses dropped, $n::type → ?n.
std::string as_sqlite(std::string sql) {
  sql = std::regex_replace(sql, std::regex(R"( AND \(\$\d+::\w+ IS NULL OR true\))"), "");
  return std::regex_replace(sql, std::regex(R"(\$(\d+)(::\w+)?)"), "?$1");
}

std::vector<std::string> all(const ReadSql& s) {
  std::vector<std::string> out{s.account_exists,  s.account_ids_after, s.account_ids_all,   s.events_after,
                               s.events_of_account, s.active_hold_totals, s.feed,           s.key_by_secret,
                               s.live_hold_stats, s.account_count,     s.has_admin_key,     s.key_cursor,
                               s.keys_of_account, s.keys_all,          s.transfer,          s.job,
                               s.job_history,     s.jobs_to_recover,   s.unended_jobs,      s.idempotency_key};
  out.insert(out.end(), s.holds.begin(), s.holds.end());
  out.insert(out.end(), s.jobs.begin(), s.jobs.end());
  return out;
}

TEST(ReadSql, EveryStatementIsOneTextInBothDialects) {
  const std::vector<std::string> sqlite = all(read_sql(Dialect::sqlite));
  const std::vector<std::string> pg = all(read_sql(Dialect::postgres));
  ASSERT_EQ(sqlite.size(), pg.size());
  for (std::size_t i = 0; i < sqlite.size(); ++i) {
    EXPECT_EQ(as_sqlite(pg[i]), sqlite[i]) << "statement " << i;
    EXPECT_EQ(sqlite[i].find('$'), std::string::npos) << sqlite[i];
  }
  EXPECT_EQ(read_sql(Dialect::sqlite).holds.size(), kHoldQueryShapes);
  EXPECT_EQ(read_sql(Dialect::sqlite).jobs.size(), 4U);
}

TEST(ReadSql, LockStatementsDifferOnlyByTheirColumnCast) {
  // PostgreSQL reads the boolean `cancelled` as an integer, as the SQLite column stores it.
  const ReadSql& sqlite = read_sql(Dialect::sqlite);
  const ReadSql& pg = read_sql(Dialect::postgres);
  for (const auto& [s, p] : {std::pair(sqlite.lock, pg.lock), std::pair(sqlite.locks_after, pg.locks_after)}) {
    EXPECT_EQ(std::regex_replace(as_sqlite(p), std::regex("cancelled::int"), "cancelled"), s);
  }
}

}  // namespace
}  // namespace tollgate::reads
