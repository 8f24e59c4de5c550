// The metric families, declared once (core/counters.h): a counter counted through its field table
// shows in stats() and on /metrics under the family its row names; every family of a real server's
// scrape has one # HELP and one # TYPE, before its samples, which are together; and every row of
// every field table is on the scrape once.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "http/http_test_support.h"
#include "http/metrics.h"
#include "jobs/runner.h"
#include "ledger/group_commit.h"
#include "ledger/ledger.h"

namespace tollgate::httptest {
namespace {

struct TestCounts {
  std::uint64_t sent = 0, refused = 0, unshown = 0;
};
constexpr metrics::Family kTestOutcomes{"test_outcomes_total", metrics::Type::counter, "Test outcomes, by outcome."};
constexpr auto kTestFields = std::to_array<metrics::Field<TestCounts>>({
    {&TestCounts::sent, kTestOutcomes, "outcome=\"sent\""},
    {&TestCounts::refused, kTestOutcomes, "outcome=\"refused\""},
    {&TestCounts::unshown, {}, ""},
});

TEST(MetricsRegistry, ACounterCountedThroughItsTableShowsInTheSnapshotAndUnderItsFamily) {
  metrics::Counters<TestCounts, kTestFields> counters;
  counters.add<&TestCounts::sent>(3);
  counters.add<&TestCounts::refused>();
  counters.add<&TestCounts::unshown>(7);
  const TestCounts s = counters.snapshot();
  EXPECT_EQ(s.sent, 3u);
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.unshown, 7u);
  EXPECT_EQ(counters.get<&TestCounts::sent>(), 3u);

  http::Exposition out;
  out.fields(kTestFields, s);
  EXPECT_EQ(out.text(),
            "# HELP test_outcomes_total Test outcomes, by outcome.\n"
            "# TYPE test_outcomes_total counter\n"
            "test_outcomes_total{outcome=\"sent\"} 3\n"
            "test_outcomes_total{outcome=\"refused\"} 1\n");
}

TEST(MetricsRegistry, SamplesOfOneFamilyFromTwoTablesShareOneHeader) {
  http::Exposition out;
  out.fields(kOutcomeFields, OutcomeCounts{1, 2, 0, 0, 0, 0});
  LedgerCounts ledger;
  ledger.holds_expired = 5;
  out.fields(kLedgerFields, ledger);
  const std::string text = out.text();
  std::size_t headers = 0;
  for (auto at = text.find("# TYPE tollgate_holds_ended_total "); at != std::string::npos;
       at = text.find("# TYPE tollgate_holds_ended_total ", at + 1)) {
    ++headers;
  }
  EXPECT_EQ(headers, 1u) << text;
  EXPECT_NE(text.find("tollgate_holds_ended_total{outcome=\"committed\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tollgate_holds_ended_total{outcome=\"expired\"} 5\n"), std::string::npos) << text;
}

TEST(MetricsRegistry, TheEdgesCountersAreItsTable) {
  http::Metrics m({"GET /v1/x"});
  m.edge.add<&http::EdgeCounts::auth_failures>(4);
  EXPECT_EQ(m.edge.snapshot().auth_failures, 4u);
  http::Exposition out;
  out.fields(http::kEdgeFields, m.edge.snapshot());
  EXPECT_NE(out.text().find("\ntollgate_auth_failures_total 4\n"), std::string::npos) << out.text();
}

// The family a sample line belongs to: its name, less a histogram's suffix when that family is declared.
std::string family_of(const std::string& name, const std::set<std::string>& declared) {
  if (declared.count(name)) return name;
  for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return name.substr(0, name.size() - suffix.size());
    }
  }
  return name;
}

TEST(MetricsRegistry, EveryFamilyOfAScrapeHasOneHelpAndOneTypeAndEveryTableRowIsShownOnce) {
  ServerProcess server(server_options());
  HttpClient bad(server.port(), "tgk_not_a_key");
  ASSERT_EQ(bad.get("/v1/accounts").status, 401u);  // counted by the edge's table: auth_failures
  HttpClient admin(server.port(), kAdminKey);
  const HttpResponse scraped = admin.get("/metrics");
  ASSERT_EQ(scraped.status, 200u) << scraped;
  const std::string& text = scraped.body;

  std::map<std::string, int> helps, types;
  std::set<std::string> declared, ended;  // ended: families whose samples are behind us
  std::string current;
  std::multiset<std::string> series;  // name{labels}
  std::istringstream lines(text);
  std::string line;
  const std::regex help(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) \S.*$)");
  const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? \S+$)");
  std::string last_help;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_match(line, m, help)) {
      ++helps[m[1]];
      last_help = m[1];
      continue;
    }
    if (std::regex_match(line, m, type)) {
      ++types[m[1]];
      EXPECT_EQ(last_help, m[1]) << "# TYPE " << m[1] << " right after its # HELP";
      if (!current.empty()) ended.insert(current);
      current = m[1];
      declared.insert(current);
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, m, sample)) << "not a sample: " << line;
    const std::string family = family_of(m[1], declared);
    EXPECT_EQ(family, current) << "a sample away from its family's header: " << line;
    EXPECT_FALSE(ended.count(family)) << line;
    series.insert(std::string(m[1]) + std::string(m[2]));
  }
  EXPECT_GE(declared.size(), 50u);  // 50 with no provider samples or policies: every family is declared regardless
  for (const auto& [name, n] : helps) EXPECT_EQ(n, 1) << "# HELP " << name;
  for (const auto& [name, n] : types) EXPECT_EQ(n, 1) << "# TYPE " << name;
  EXPECT_EQ(helps.size(), types.size());

  // Every row of every field table, once.
  auto each_row = [&](const auto& table) {
    for (const auto& row : table) {
      if (row.family.name.empty()) continue;
      const std::string key =
          std::string(row.family.name) + (row.labels.empty() ? "" : "{" + std::string(row.labels) + "}");
      EXPECT_EQ(series.count(key), 1u) << key;
      EXPECT_NE(text.find("# TYPE " + std::string(row.family.name) + " " + std::string(metrics::type_name(row.family.type)) +
                          "\n"),
                std::string::npos)
          << row.family.name;
      EXPECT_NE(text.find("# HELP " + std::string(row.family.name) + " " + std::string(row.family.help) + "\n"),
                std::string::npos)
          << row.family.name;
    }
  };
  each_row(kOutcomeFields);
  each_row(kGroupCommitFields);
  each_row(kLedgerFields);
  each_row(http::kEdgeFields);
  each_row(jobs::kJobRunnerFields);

  // The 401 above, counted through the edge's table, is on the scrape.
  EXPECT_NE(text.find("\ntollgate_auth_failures_total 1\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace tollgate::httptest
