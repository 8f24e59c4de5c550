// Credit lots at the edges (api.md, Credit lots): `account credit` with --expires-in/--expires-at,
// --priority and --category, `lots ACCOUNT`, a hold's draw and the lots in `events`, and the C++
// client's credit(CreditRequest) and list_lots — each against a real server process.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/cli_output.h"
#include "support/server_process.h"
#include "tollgate/client.h"

namespace tollgate {
namespace {

namespace json = boost::json;
using testing::ProcessResult;
using testing::ServerOptions;
using testing::ServerProcess;
using testing::describe;
using testing::one_document;
using testing::run_tollgate;
using std::chrono::milliseconds;

std::vector<std::string> table_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string text_of(const json::value& v) { return v.is_string() ? std::string(v.as_string()) : json::serialize(v); }

ServerOptions fast_reaper() {
  ServerOptions o;
  o.env = {{"TOLLGATE_REAPER_INTERVAL_MS", "100"}};
  return o;
}

class LotsCliTest : public ::testing::Test {
 protected:
  LotsCliTest() : server_(fast_reaper()) {}

  ProcessResult cli(std::vector<std::string> args) { return cli_as(server_.admin_key(), std::move(args)); }
  ProcessResult cli_as(const std::string& key, std::vector<std::string> args) {
    args.insert(args.end(), {"--url", server_.url(), "--key", key});
    return run_tollgate(args);
  }
  // `lots ACCOUNT --json …`: the page.
  json::value lots_page(const std::string& account, std::vector<std::string> more = {}) {
    std::vector<std::string> args{"lots", account, "--json"};
    args.insert(args.end(), more.begin(), more.end());
    const ProcessResult r = cli(args);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return one_document(r);
  }
  // The lot a credit made (`account credit … --json`): its event's lot_id.
  std::string credit(const std::string& account, const std::string& amount, const std::string& reference,
                     std::vector<std::string> flags = {}) {
    std::vector<std::string> args{"account", "credit", account, amount, "--reference", reference, "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    const ProcessResult r = cli(args);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    const json::value answer = one_document(r);
    const json::value* lot = answer.at("event").as_object().if_contains("lot_id");
    EXPECT_TRUE(lot && lot->is_string()) << r.out;
    return lot && lot->is_string() ? std::string(lot->as_string()) : "";
  }

  ServerProcess server_;
};

TEST_F(LotsCliTest, CreditWithLotFlagsMakesLotsThatLotsListsInSpendingOrder) {
  ASSERT_EQ(cli({"account", "create", "ann"}).exit_code, 0);
  ProcessResult r = cli({"account", "credit", "ann", "10", "--reference", "paid-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("credited 10 to ann (event 1, reference paid-1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("new lot lot_"), std::string::npos) << r.out;
  const std::string promo = credit("ann", "5", "promo-1", {"--priority", "10", "--category", "promotional",
                                                             "--expires-in", "30d"});
  const std::string dated = credit("ann", "7", "dated-1", {"--expires-at", "2099-01-31T12:00:00Z"});

  // A replay answers the first credit, whatever lot fields it carries: no new lot.
  r = cli({"account", "credit", "ann", "5", "--reference", "promo-1", "--priority", "90"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("nothing added"), std::string::npos) << r.out;

  // Spending order: priority 10 first; then the dated lot before the one that never expires.
  const json::value page = lots_page("ann");
  const json::array& lots = page.at("lots").as_array();
  ASSERT_EQ(lots.size(), 3u) << page;
  EXPECT_EQ(lots[0].at("lot_id"), promo.c_str());
  EXPECT_EQ(lots[0].at("category"), "promotional");
  EXPECT_EQ(lots[0].at("priority"), 10);
  EXPECT_EQ(lots[0].at("amount"), 5);
  EXPECT_TRUE(lots[0].at("expires_at").is_string());
  EXPECT_EQ(lots[1].at("lot_id"), dated.c_str());
  EXPECT_EQ(text_of(lots[1].at("expires_at")).rfind("2099-01-31T12:00:00", 0), 0u) << lots[1];
  EXPECT_EQ(lots[2].at("category"), "paid");
  EXPECT_EQ(lots[2].at("priority"), 50);
  EXPECT_EQ(lots[2].at("reference"), "paid-1");
  EXPECT_FALSE(lots[2].as_object().contains("expires_at")) << lots[2];
  EXPECT_EQ(lots[2].at("status"), "active");
  EXPECT_EQ(page.at("has_more"), false);

  // The table: every column, "never" for a lot without expiry.
  r = cli({"lots", "ann"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::vector<std::string> table = table_lines(r.out);
  ASSERT_EQ(table.size(), 4u) << r.out;
  for (const char* column : {"LOT", "CATEGORY", "PRIORITY", "AMOUNT", "AVAILABLE", "RESERVED", "USED", "EXPIRED",
                             "EXPIRES", "STATUS"}) {
    EXPECT_NE(table[0].find(column), std::string::npos) << column << "\n" << r.out;
  }
  EXPECT_NE(table[1].find(promo), std::string::npos) << r.out;
  EXPECT_NE(table[1].find("promotional"), std::string::npos) << r.out;
  EXPECT_NE(table[3].find("never"), std::string::npos) << r.out;

  // Paging with the cursor it prints; a status no lot has.
  r = cli({"lots", "ann", "--limit", "2"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.err.find("--starting-after " + dated), std::string::npos) << r.err;
  const json::value rest = lots_page("ann", {"--starting-after", dated});
  ASSERT_EQ(rest.at("lots").as_array().size(), 1u) << rest;
  EXPECT_EQ(rest.at("lots").as_array()[0].at("reference"), "paid-1");
  r = cli({"lots", "ann", "--status", "spent"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("no lots"), std::string::npos) << r.out;
}

TEST_F(LotsCliTest, AHoldShowsItsDrawAndEventsShowTheLotAndTheExpiredBalance) {
  ASSERT_EQ(cli({"account", "create", "bo"}).exit_code, 0);
  const std::string first = credit("bo", "4", "bo-1", {"--priority", "1"});
  const std::string second = credit("bo", "10", "bo-2");
  ProcessResult r = cli({"hold", "reserve", "bo", "6", "--request-id", "gen-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value hold = one_document(r);
  EXPECT_EQ(hold.at("lots"), (json::array{json::object{{"lot_id", first}, {"amount", 4}},
                                           json::object{{"lot_id", second}, {"amount", 2}}}))
      << hold;
  r = cli({"hold", "show", text_of(hold.at("hold_id"))});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find(first + ":4 " + second + ":2"), std::string::npos) << r.out;

  const json::value page = lots_page("bo");
  EXPECT_EQ(page.at("lots").as_array()[0].at("reserved"), 4) << page;
  EXPECT_EQ(page.at("lots").as_array()[1].at("available"), 8) << page;

  r = cli({"events", "bo"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::vector<std::string> table = table_lines(r.out);
  ASSERT_GE(table.size(), 4u) << r.out;
  EXPECT_NE(table[0].find("EXPIRED"), std::string::npos) << r.out;
  EXPECT_NE(table[0].find("LOT"), std::string::npos) << r.out;
  EXPECT_NE(table[1].find(first), std::string::npos) << r.out;   // credited: its lot
  EXPECT_NE(table[2].find(second), std::string::npos) << r.out;
}

TEST_F(LotsCliTest, ALotThatExpiresShowsExpiredAtOnceAndItsEventIsLotExpired) {
  ASSERT_EQ(cli({"account", "create", "cy"}).exit_code, 0);
  const std::string brief = credit("cy", "3", "cy-1", {"--expires-in", "1s"});
  credit("cy", "2", "cy-2");
  std::this_thread::sleep_for(milliseconds(1300));
  json::value page = lots_page("cy", {"--status", "expired"});
  ASSERT_EQ(page.at("lots").as_array().size(), 1u) << page;
  EXPECT_EQ(page.at("lots").as_array()[0].at("lot_id"), brief.c_str());
  EXPECT_EQ(page.at("lots").as_array()[0].at("expired"), 3);
  ProcessResult r = cli({"account", "show", "cy", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value account = one_document(r);
  EXPECT_EQ(account.at("available"), 2) << account;
  EXPECT_EQ(account.at("expired"), 3) << account;

  // The reaper writes lot_expired (every 100 ms here): the table names its lot.
  std::string events;
  for (int i = 0; i < 50 && events.find("lot_expired") == std::string::npos; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    events = cli({"events", "cy"}).out;
  }
  const std::vector<std::string> table = table_lines(events);
  ASSERT_EQ(table.size(), 4u) << events;
  EXPECT_NE(table[3].find("lot_expired"), std::string::npos) << events;
  EXPECT_NE(table[3].find(brief), std::string::npos) << events;
}

// Spending past every lot (the overdraft) comes from no lot; the next credit pays that debt first
// and only its rest becomes a lot.
TEST_F(LotsCliTest, ACreditThatOnlyPaysDebtMakesNoLotAndTheNextOneOnlyItsRest) {
  ASSERT_EQ(cli({"account", "create", "dan", "--overdraft-limit", "5"}).exit_code, 0);
  ProcessResult r = cli({"hold", "reserve", "dan", "3", "--request-id", "dan-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value hold = one_document(r);
  EXPECT_EQ(hold.at("lots"), json::array{}) << hold;  // from no lot: the overdraft
  ASSERT_EQ(cli({"hold", "commit", text_of(hold.at("hold_id"))}).exit_code, 0);

  r = cli({"account", "credit", "dan", "2", "--reference", "dan-pay-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("no new lot: the credit only paid the account's debt"), std::string::npos) << r.out;
  r = cli({"account", "credit", "dan", "10", "--reference", "dan-pay-2"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("new lot lot_"), std::string::npos) << r.out;
  const json::value page = lots_page("dan");
  ASSERT_EQ(page.at("lots").as_array().size(), 1u) << page;
  EXPECT_EQ(page.at("lots").as_array()[0].at("amount"), 9) << page;
  EXPECT_EQ(page.at("lots").as_array()[0].at("reference"), "dan-pay-2");
}

TEST_F(LotsCliTest, BadLotFlagsAreUsageErrorsNamingTheFlagAndNothingIsSent) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"account", "credit", "dee", "5", "--reference", "r", "--priority", "101"}, "--priority"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--priority=-1"}, "--priority"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--priority", "high"}, "--priority"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--category", "free"}, "--category"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--expires-in", "0d"}, "--expires-in"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--expires-in", "3w"}, "--expires-in"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--expires-in", "1.5h"}, "--expires-in"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--expires-at", "tomorrow"}, "--expires-at"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--expires-at", "2099-01-01 00:00:00"}, "--expires-at"},
      {{"account", "credit", "dee", "5", "--reference", "r", "--expires-in", "1d", "--expires-at",
        "2099-01-01T00:00:00Z"},
       "--expires-"},
      {{"lots"}, "ACCOUNT"},
      {{"lots", "has space"}, "ACCOUNT"},
      {{"lots", "dee", "--status", "pending"}, "--status"},
      {{"lots", "dee", "--limit", "0"}, "--limit"},
      {{"lots", "dee", "--limit", "1001"}, "--limit"},
      {{"lots", "dee", "--starting-after", "a b"}, "--starting-after"},
  };
  for (const auto& [args, named] : bad) {
    const ProcessResult r = cli(args);
    std::string line;
    for (const std::string& a : args) line += a + " ";
    EXPECT_EQ(r.exit_code, 2) << line << "\n" << describe(r);
    EXPECT_NE(r.err.find(named), std::string::npos) << line << "\n" << r.err;
  }
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(server_.log().find("\"msg\":\"request\""), std::string::npos) << server_.log();
}

TEST_F(LotsCliTest, TheServerRefusesAPastExpiryAndLotsOfAnAccountItCannotSee) {
  ASSERT_EQ(cli({"account", "create", "eve"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "create", "fay"}).exit_code, 0);
  ProcessResult r = cli({"account", "credit", "eve", "5", "--reference", "old", "--expires-at", "2020-01-01T00:00:00Z"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("invalid_request"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("expires_at"), std::string::npos) << r.err;
  EXPECT_EQ(lots_page("eve").at("lots").as_array().size(), 0u);

  r = cli({"lots", "nobody"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;

  // An account key reads its own lots (scope read); another account's are 404; without read, 403.
  r = cli({"key", "create", "eve", "--scope", "read", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string reader = text_of(one_document(r).at("secret"));
  EXPECT_EQ(cli_as(reader, {"lots", "eve"}).exit_code, 0);
  r = cli_as(reader, {"lots", "fay"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
  r = cli({"key", "create", "eve", "--scope", "holds:write", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = cli_as(text_of(one_document(r).at("secret")), {"lots", "eve"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("read"), std::string::npos) << r.err;
}

// --- the C++ client ---------------------------------------------------------------------------------

client::Options client_options(const ServerProcess& server) {
  client::Options o;
  o.base_url = server.url();
  o.key = server.admin_key();
  o.retry.attempts_max = 2;
  return o;
}

TEST(LotsClient, CreditSendsTheLotFieldsAndListLotsPagesByStatus) {
  ServerProcess server;
  client::Client c(client_options(server));
  ASSERT_TRUE(c.create_account({"gus", std::nullopt, std::nullopt}).ok());
  client::CreditRequest promo{5, "gus-1", "2099-06-01T00:00:00Z", 5, "promotional"};
  auto credited = c.credit("gus", promo);
  ASSERT_TRUE(credited.ok()) << credited.describe();
  EXPECT_EQ(credited.status(), 201u);
  const std::string promo_lot = text_of(credited.json().at("event").at("lot_id"));
  auto plain = c.credit("gus", 8, "gus-2");  // the three-argument credit: the server's defaults
  ASSERT_TRUE(plain.ok()) << plain.describe();
  auto replay = c.credit("gus", client::CreditRequest{5, "gus-1", std::nullopt, 70, std::nullopt});
  ASSERT_TRUE(replay.ok()) << replay.describe();
  EXPECT_EQ(replay.status(), 200u);

  auto first = c.list_lots("gus", {std::nullopt, {1, std::nullopt}});
  ASSERT_TRUE(first.ok()) << first.describe();
  ASSERT_EQ(first.json().at("lots").as_array().size(), 1u);
  const json::value& lot = first.json().at("lots").as_array()[0];
  EXPECT_EQ(lot.at("lot_id"), promo_lot.c_str());
  EXPECT_EQ(lot.at("priority"), 5);
  EXPECT_EQ(lot.at("category"), "promotional");
  EXPECT_EQ(first.json().at("has_more"), true);
  auto second = c.list_lots("gus", {"active", {std::nullopt, promo_lot}});
  ASSERT_TRUE(second.ok()) << second.describe();
  ASSERT_EQ(second.json().at("lots").as_array().size(), 1u);
  EXPECT_EQ(second.json().at("lots").as_array()[0].at("amount"), 8);

  auto hold = c.reserve({"gus", 6, "", std::nullopt, std::nullopt});
  ASSERT_TRUE(hold.ok()) << hold.describe();
  EXPECT_EQ(hold.json().at("lots").as_array().size(), 2u) << hold.json();
}

TEST(LotsClient, BadLotFieldsAndParametersAreRefusedNamingThem) {
  ServerProcess server;
  client::Client c(client_options(server));
  ASSERT_TRUE(c.create_account({"hal", std::nullopt, std::nullopt}).ok());
  const std::vector<std::pair<client::CreditRequest, std::string>> bad = {
      {{1, "h-1", "2020-01-01T00:00:00Z", std::nullopt, std::nullopt}, "expires_at"},
      {{1, "h-2", "next week", std::nullopt, std::nullopt}, "expires_at"},
      {{1, "h-3", std::nullopt, 101, std::nullopt}, "priority"},
      {{1, "h-4", std::nullopt, -1, std::nullopt}, "priority"},
      {{1, "h-5", std::nullopt, std::nullopt, "gift"}, "category"},
  };
  for (const auto& [request, named] : bad) {
    auto r = c.credit("hal", request);
    ASSERT_TRUE(r.is_problem()) << named;
    EXPECT_EQ(r.status(), 400u) << r.describe();
    EXPECT_EQ(r.problem().code, "invalid_request") << r.describe();
    EXPECT_NE(r.problem().detail.find(named), std::string::npos) << r.describe();
  }
  EXPECT_EQ(c.get_account("hal").json().at("purchased"), 0);

  const std::vector<std::pair<client::ListLotsRequest, std::string>> bad_lists = {
      {{"pending", {}}, "status"},
      {{std::nullopt, {1001, std::nullopt}}, "limit"},
      {{std::nullopt, {std::nullopt, "lot_999"}}, "starting_after"},
  };
  for (const auto& [request, named] : bad_lists) {
    auto r = c.list_lots("hal", request);
    ASSERT_TRUE(r.is_problem()) << named;
    EXPECT_EQ(r.status(), 400u) << r.describe();
    EXPECT_NE(r.problem().detail.find(named), std::string::npos) << r.describe();
  }
  auto missing = c.list_lots("nobody");
  ASSERT_TRUE(missing.is_problem());
  EXPECT_EQ(missing.problem().code, "not_found");
}

}  // namespace
}  // namespace tollgate
