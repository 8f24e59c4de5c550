// deploy/prometheus/tollgate-rules.yml and the Grafana dashboard beside it name only metrics this
// server exports: a real server's /metrics is scraped and every tollgate_… name in the rules (and
// the dashboard's queries) must be a family the scrape declares with # TYPE. (promtool checks the
// rules' syntax and behaviour: deploy/prometheus/check.)
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

std::string read_source(const std::string& path) {
  std::ifstream in(std::string(TOLLGATE_SOURCE_DIR) + "/" + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The metric families a scrape declares.
std::set<std::string> declared_families(const std::string& scrape) {
  std::set<std::string> out;
  const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) )");
  std::istringstream lines(scrape);
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, type)) out.insert(m[1]);
  }
  return out;
}

// Every tollgate_… name in `text` (comment lines of YAML skipped), with a histogram's
// _bucket/_sum/_count suffix taken off.
std::set<std::string> named_metrics(const std::string& text) {
  std::set<std::string> out;
  const std::regex name(R"(tollgate_[a-z0-9_]+)");
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto first = line.find_first_not_of(' ');
    if (first != std::string::npos && line[first] == '#') continue;
    for (std::sregex_iterator it(line.begin(), line.end(), name), end; it != end; ++it) {
      std::string n = it->str();
      for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
        if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
          n.resize(n.size() - suffix.size());
        }
      }
      out.insert(n);
    }
  }
  return out;
}


TEST(AlertRules, EveryMetricTheRulesAndTheDashboardNameIsExported) {
  ServerProcess server(server_options());
  HttpClient admin(server.port(), kAdminKey);
  const HttpResponse scraped = admin.get("/metrics");
  ASSERT_EQ(scraped.status, 200u) << scraped;
  const std::set<std::string> exported = declared_families(scraped.body);
  ASSERT_GT(exported.size(), 20u);

  const std::string rules = read_source("deploy/prometheus/tollgate-rules.yml");
  ASSERT_FALSE(rules.empty()) << "deploy/prometheus/tollgate-rules.yml not found";
  const std::set<std::string> in_rules = named_metrics(rules);
  EXPECT_GE(in_rules.size(), 10u);
  for (const std::string& name : in_rules) {
    EXPECT_TRUE(exported.count(name)) << "the rules name " << name << ", which /metrics does not export";
  }

  const std::string dashboard = read_source("deploy/grafana/tollgate.json");
  ASSERT_FALSE(dashboard.empty()) << "deploy/grafana/tollgate.json not found";
  const boost::json::value parsed = boost::json::parse(dashboard);  // throws if it is not JSON
  ASSERT_TRUE(parsed.is_object());
  ASSERT_TRUE(parsed.as_object().contains("panels"));
  const std::set<std::string> in_dashboard = named_metrics(dashboard);
  EXPECT_GE(in_dashboard.size(), 10u);
  for (const std::string& name : in_dashboard) {
    EXPECT_TRUE(exported.count(name)) << "the dashboard names " << name << ", which /metrics does not export";
  }
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

}  // namespace
}  // namespace tollgate::httptest
