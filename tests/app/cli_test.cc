// The command-line client and the client library, against the real server process.
//
// CLI tests run `tollgate <command> … --url --key` as child processes and check what a user or a
// script sees: exit codes (0 done, 1 refused, 2 usage, 3 unreachable), output, and that --json
// prints one JSON document per line. Client tests check the retry policy of
// include/tollgate/client.h over real connections; a small fault-injecting proxy between the client
// and the server loses an answer, answers 503, or never answers.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <csignal>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http/http_test_support.h"
#include "payments/signature.h"
#include "support/cli_output.h"
#include "support/server_process.h"
#include "tollgate/client.h"

namespace tollgate {
namespace {

namespace json = boost::json;
using testing::ProcessResult;
using testing::describe;
using testing::one_document;
using testing::ServerProcess;
using testing::run_tollgate;

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// How many requests the server logged (its request log is flushed at least every 200 ms).
std::size_t count_requests(const std::string& log) {
  std::size_t n = 0;
  for (std::size_t at = log.find("\"msg\":\"request\""); at != std::string::npos;
       at = log.find("\"msg\":\"request\"", at + 1)) {
    ++n;
  }
  return n;
}

// Parses the only JSON document of `text` (one line); fails the test if it is not one.


// What `events --follow --json` printed, run with `args` until `run_for` ends it (SIGKILL — it
// runs until interrupted) while `meanwhile` runs: the references of the events, in the order
// printed. Each line must be one non-empty page (empty polls print nothing).
std::vector<std::string> followed_references(const std::vector<std::string>& args, const std::function<void()>& meanwhile,
                                             std::chrono::milliseconds run_for) {
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(800));
    meanwhile();
  });
  const ProcessResult r = run_tollgate(args, {}, run_for);
  later.join();
  EXPECT_TRUE(r.timed_out) << describe(r);
  std::vector<std::string> references;
  for (const std::string& line : lines_of(r.out)) {
    boost::system::error_code ec;
    const json::value page = json::parse(line, ec);
    EXPECT_FALSE(ec) << line;
    if (ec) continue;
    EXPECT_FALSE(page.at("events").as_array().empty()) << line;
    for (const json::value& e : page.at("events").as_array()) references.emplace_back(e.at("reference").as_string());
  }
  return references;
}

// =====================================================================================================
// The CLI
// =====================================================================================================
class CliTest : public ::testing::Test {
 protected:
  // Runs `tollgate args… --url <server> --key <admin key>`.
  ProcessResult cli(std::vector<std::string> args) { return cli_as(server_.admin_key(), std::move(args)); }
  ProcessResult cli_as(const std::string& key, std::vector<std::string> args) {
    args.insert(args.end(), {"--url", server_.url(), "--key", key});
    return run_tollgate(args);
  }

  ServerProcess server_;
};

TEST_F(CliTest, CreateCreditReserveCommitSessionShowsBalancesAndEvents) {
  ProcessResult r = cli({"account", "create", "alice"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("account alice created"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("available:"), std::string::npos) << r.out;

  r = cli({"account", "create", "alice"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("already exists with these settings"), std::string::npos) << r.out;

  r = cli({"account", "credit", "alice", "10", "--reference", "buy-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("credited 10 to alice (event 1, reference buy-1)"), std::string::npos) << r.out;
  r = cli({"account", "credit", "alice", "10", "--reference", "buy-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("nothing added"), std::string::npos) << r.out;

  r = cli({"hold", "reserve", "alice", "3", "--request-id", "kiosk-1", "--ttl-ms", "60000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value hold = one_document(r);
  ASSERT_TRUE(hold.is_object());
  const std::string hold_id(hold.at("hold_id").as_string());
  EXPECT_EQ(hold.at("status"), "active");
  EXPECT_EQ(hold.at("request_id"), "kiosk-1");

  r = cli({"hold", "commit", hold_id, "--amount", "2"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("2 used, 1 returned to available"), std::string::npos) << r.out;

  r = cli({"account", "show", "alice", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value account = one_document(r);
  EXPECT_EQ(account.at("available"), 8);
  EXPECT_EQ(account.at("reserved"), 0);
  EXPECT_EQ(account.at("used"), 2);
  EXPECT_EQ(account.at("purchased"), 10);

  r = cli({"events", "alice", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value page = one_document(r);
  const json::array& events = page.at("events").as_array();
  ASSERT_EQ(events.size(), 3u) << r.out;
  EXPECT_EQ(events[0].at("type"), "credited");
  EXPECT_EQ(events[1].at("type"), "reserved");
  EXPECT_EQ(events[2].at("type"), "committed");
  EXPECT_EQ(page.at("next_after"), events[2].at("event_id"));

  // The human table has a header and one row per event.
  r = cli({"events", "alice"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto table = lines_of(r.out);
  ASSERT_EQ(table.size(), 4u) << r.out;
  EXPECT_EQ(table[0].rfind("EVENT", 0), 0u) << r.out;
  EXPECT_NE(table[3].find("committed"), std::string::npos) << r.out;

  r = cli({"events", "alice", "--after", "1", "--limit", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("events").as_array().at(0).at("type"), "reserved");

  r = cli({"audit"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("violations: none"), std::string::npos) << r.out;
}

TEST_F(CliTest, HoldCommandsReleaseExtendShowAndList) {
  ASSERT_EQ(cli({"account", "create", "bob"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "bob", "5", "--reference", "r1"}).exit_code, 0);
  ProcessResult r = cli({"hold", "reserve", "bob", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value hold = one_document(r);
  const std::string hold_id(hold.at("hold_id").as_string());
  // Without --request-id the CLI makes one.
  EXPECT_EQ(std::string(hold.at("request_id").as_string()).rfind("cli-", 0), 0u) << r.out;

  r = cli({"hold", "extend", hold_id, "--ttl-ms", "120000"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("now expires at"), std::string::npos) << r.out;

  r = cli({"hold", "list", "--account", "bob", "--status", "active"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("HOLD_ID"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(hold_id), std::string::npos) << r.out;

  r = cli({"hold", "release", hold_id, "--reason", "user cancelled"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("released: 2 returned to available"), std::string::npos) << r.out;
  r = cli({"hold", "release", hold_id});  // again: the same answer
  ASSERT_EQ(r.exit_code, 0) << describe(r);

  r = cli({"hold", "show", hold_id, "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("status"), "released");

  r = cli({"hold", "list", "--account", "bob", "--status", "active"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "no holds\n");

  r = cli({"hold", "commit", hold_id});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("tollgate: hold commit: hold_released:"), std::string::npos) << r.err;
}

TEST_F(CliTest, RefundGivesBackPartOfAChargeOncePerRequestIdThenRefusesMore) {
  ASSERT_EQ(cli({"account", "create", "rita"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "rita", "10", "--reference", "rita-buy"}).exit_code, 0);
  ProcessResult r = cli({"hold", "reserve", "rita", "6", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string hold_id(one_document(r).at("hold_id").as_string());
  ASSERT_EQ(cli({"hold", "commit", hold_id}).exit_code, 0);

  r = cli({"refund", "hold", hold_id, "--amount", "2", "--reason", "the print jammed", "--request-id", "rf-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("hold " + hold_id + ": 2 of 6 charged refunded in all"), std::string::npos) << r.out;
  r = cli({"refund", "hold", hold_id, "--amount", "2", "--reason", "the print jammed", "--request-id", "rf-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);  // the same refund again: nothing more
  EXPECT_NE(r.out.find("2 of 6 charged refunded in all"), std::string::npos) << r.out;
  r = cli({"refund", "hold", hold_id, "--reason", "complaint", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("refunded_amount"), 6);
  r = cli({"account", "show", "rita", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("available"), 10);
  EXPECT_EQ(one_document(r).at("used"), 0);

  r = cli({"refund", "hold", hold_id, "--reason", "again"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("tollgate: refund hold: refund_exceeds_charge:"), std::string::npos) << r.err;
  r = cli({"refund", "job", "no-such-job", "--reason", "x"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
}

TEST_F(CliTest, KeysAreCreatedShownOnceAndRevoked) {
  ASSERT_EQ(cli({"account", "create", "carol"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "create", "dave"}).exit_code, 0);
  ProcessResult r = cli({"key", "create", "carol", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value key = one_document(r);
  const std::string key_id(key.at("key_id").as_string());
  const std::string secret(key.at("secret").as_string());

  r = cli_as(secret, {"account", "show", "carol"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  r = cli_as(secret, {"account", "show", "dave"});  // another account: as if it did not exist
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
  r = cli_as(secret, {"audit"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("tollgate: audit: forbidden:"), std::string::npos) << r.err;

  r = cli({"key", "revoke", key_id});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("key " + key_id + " revoked"), std::string::npos) << r.out;
  r = cli_as(secret, {"account", "show", "carol"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("unauthorized"), std::string::npos) << r.err;
}

// Keys with scopes, an expiry and a name (issue 32): `key create --scope … --expires-in … --name`,
// `key create --admin --scope admin:read`, `key whoami`, and `key list` showing them.
TEST_F(CliTest, KeyScopesExpiryAndNamesAreCreatedShownAndEnforced) {
  ASSERT_EQ(cli({"account", "create", "sam"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "sam", "5", "--reference", "sam-buy"}).exit_code, 0);
  ProcessResult r = cli({"key", "create", "sam", "--scope", "read", "--name", "sam's dashboard", "--expires-in", "30d",
                         "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value reader = one_document(r);
  EXPECT_EQ(reader.at("scopes"), (json::array{"read"}));
  EXPECT_EQ(reader.at("name"), "sam's dashboard");
  ASSERT_TRUE(reader.at("expires_at").is_string());
  EXPECT_GT(std::string(reader.at("expires_at").as_string()), std::string("2026"));
  const std::string reader_secret(reader.at("secret").as_string());
  const std::string reader_id(reader.at("key_id").as_string());

  // Scopes answered in the canonical order, whatever order they were given in.
  r = cli({"key", "create", "sam", "--scope", "read", "--scope", "holds:write", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("scopes"), (json::array{"holds:write", "read"}));
  // Without --scope: all three; printed for people on one line, and the secret warning.
  r = cli({"key", "create", "sam"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("holds:write jobs:write read"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("shown only this once"), std::string::npos) << r.err;

  // whoami: the calling key, without its secret.
  r = cli_as(reader_secret, {"key", "whoami", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value me = one_document(r);
  EXPECT_EQ(me.at("key_id"), reader_id.c_str());
  EXPECT_EQ(me.at("account_id"), "sam");
  EXPECT_EQ(me.at("scopes"), (json::array{"read"}));
  EXPECT_EQ(r.out.find(reader_secret), std::string::npos) << r.out;
  r = cli({"key", "whoami"});  // the configured admin key
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("key_id:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("admin"), std::string::npos) << r.out;

  // A read key reads, and cannot reserve: 403 naming the scope it lacks.
  r = cli_as(reader_secret, {"account", "show", "sam"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  r = cli_as(reader_secret, {"hold", "reserve", "sam", "1"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("forbidden"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("holds:write"), std::string::npos) << r.err;

  // An admin:read key: every read, no change.
  r = cli({"key", "create", "--admin", "--scope", "admin:read", "--name", "auditor", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value auditor = one_document(r);
  EXPECT_TRUE(auditor.at("account_id").is_null());
  EXPECT_EQ(auditor.at("scopes"), (json::array{"admin:read"}));
  const std::string auditor_secret(auditor.at("secret").as_string());
  EXPECT_EQ(cli_as(auditor_secret, {"account", "list"}).exit_code, 0);
  EXPECT_EQ(cli_as(auditor_secret, {"audit"}).exit_code, 0);
  r = cli_as(auditor_secret, {"account", "credit", "sam", "1", "--reference", "auditor-credit"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("forbidden"), std::string::npos) << r.err;
  r = cli_as(auditor_secret, {"key", "whoami", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("scopes"), (json::array{"admin:read"}));

  // key list: SCOPES, NAME and EXPIRES columns.
  r = cli({"key", "list", "--account", "sam"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::vector<std::string> table = lines_of(r.out);
  ASSERT_EQ(table.size(), 4u) << r.out;
  for (const char* column : {"SCOPES", "NAME", "EXPIRES"}) EXPECT_NE(table[0].find(column), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("holds:write,read"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("holds:write,jobs:write,read"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(reader.at("expires_at").as_string().c_str()), std::string::npos) << r.out;

  // The server's own refusals: an expiry in the past (400), then a key that expires.
  r = cli({"key", "create", "sam", "--expires-at", "2020-01-01T00:00:00Z"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("invalid_request"), std::string::npos) << r.err;
  r = cli({"key", "create", "sam", "--expires-in", "1s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string brief_secret(one_document(r).at("secret").as_string());
  std::this_thread::sleep_for(milliseconds(1600));
  r = cli_as(brief_secret, {"account", "show", "sam"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("unauthorized"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("expired"), std::string::npos) << r.err;
}

// Bad values of key create's flags: usage errors (exit 2) naming the flag, and nothing is sent.
TEST_F(CliTest, KeyCreateBadFlagsAreUsageErrorsNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"key", "create", "sam", "--expires-in", "30w"}, "--expires-in"},
      {{"key", "create", "sam", "--expires-in", "0d"}, "--expires-in"},
      {{"key", "create", "sam", "--expires-in=-5d"}, "--expires-in"},
      {{"key", "create", "sam", "--expires-in", "d"}, "--expires-in"},
      {{"key", "create", "sam", "--expires-in", "1.5h"}, "--expires-in"},
      {{"key", "create", "sam", "--expires-in", "99999999999d"}, "--expires-in"},
      {{"key", "create", "sam", "--expires-in", "1d", "--expires-at", "2030-01-01T00:00:00Z"}, "--expires-"},
      {{"key", "create", "sam", "--expires-at", "tomorrow"}, "--expires-at"},
      {{"key", "create", "sam", "--expires-at", "2030-01-01 00:00:00"}, "--expires-at"},
      {{"key", "create", "sam", "--scope", "hold:write"}, "did you mean holds:write"},
      {{"key", "create", "sam", "--scope", "admin"}, "--scope"},
      {{"key", "create", "sam", "--scope", "read", "--scope", "read"}, "--scope"},
      {{"key", "create", "--admin", "--scope", "read"}, "--scope"},
      {{"key", "create", "--admin"}, "--scope"},
      {{"key", "create", "--admin", "--scope", "admin", "--scope", "admin:read"}, "--scope"},
      {{"key", "create", "sam", "--admin", "--scope", "admin"}, "--admin"},
      {{"key", "create"}, "ACCOUNT"},
      {{"key", "create", "sam", "--name", ""}, "--name"},
      {{"key", "create", "sam", "--name", std::string(101, 'n')}, "--name"},
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

TEST_F(CliTest, WebhookEndpointsAreAddedListedDisabledRotatedAndDeleted) {
  ASSERT_EQ(cli({"account", "create", "kiosk-owner"}).exit_code, 0);
  ProcessResult r = cli({"webhook", "add", "https://hooks.example/tollgate", "--event-type", "balance_low",
                         "--event-type", "balance_depleted", "--account", "kiosk-owner", "--description", "owner",
                         "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value made = one_document(r);
  const std::string id(made.at("endpoint_id").as_string());
  const std::string secret(made.at("secret").as_string());
  EXPECT_EQ(secret.substr(0, 6), "whsec_");
  EXPECT_EQ(made.at("event_types"), (json::array{"balance_low", "balance_depleted"}));

  r = cli({"webhook", "list"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find(id), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("whsec_"), std::string::npos) << r.out;
  r = cli({"webhook", "disable", id, "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("status"), "disabled");
  r = cli({"webhook", "show", id});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("disabled"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("whsec_"), std::string::npos) << r.out;
  r = cli({"webhook", "enable", id, "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("status"), "enabled");
  r = cli({"webhook", "rotate", id, "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string rotated(one_document(r).at("secret").as_string());
  EXPECT_NE(rotated, secret);
  r = cli({"webhook", "delete", id});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("webhook endpoint " + id + " deleted"), std::string::npos) << r.out;
  r = cli({"webhook", "show", id});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
  r = cli({"webhook", "add", "ftp://hooks.example/"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("url"), std::string::npos) << r.err;
  r = cli({"webhook", "add", "https://hooks.example/", "--event-type", "balance_lo"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("did you mean balance_low"), std::string::npos) << r.err;
}

// `webhook deliveries` lists what the deliverer recorded (here: attempts at a port where nothing
// listens, so each shows its error and its next attempt); `webhook replay --after N` answers the
// endpoint, its cursor moved back. A bad status, a negative cursor or no endpoint id is a usage error
// naming what is wrong, and nothing is sent.
TEST_F(CliTest, WebhookDeliveriesShowTheFailedAttemptsAndReplayMovesTheCursorBack) {
  ASSERT_EQ(cli({"account", "create", "hook-owner"}).exit_code, 0);
  const std::string dead = "http://127.0.0.1:" + std::to_string(testing::unused_port()) + "/";
  ProcessResult r = cli({"webhook", "add", dead, "--account", "hook-owner", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string id(one_document(r).at("endpoint_id").as_string());
  ASSERT_EQ(cli({"account", "credit", "hook-owner", "5", "--reference", "hook-1"}).exit_code, 0);

  // The deliverer's first attempt fails at once (connection refused); wait until it is recorded.
  json::value delivery;
  for (const auto deadline = Clock::now() + std::chrono::seconds(20); Clock::now() < deadline;) {
    r = cli({"webhook", "deliveries", id, "--json"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const json::value page = one_document(r);
    const json::array& deliveries = page.at("deliveries").as_array();
    if (!deliveries.empty() && deliveries[0].at("attempts").as_int64() >= 1) {
      delivery = deliveries[0];
      break;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  ASSERT_TRUE(delivery.is_object()) << "no attempt recorded\n" << server_.log();
  EXPECT_EQ(delivery.at("endpoint_id").as_string(), id);
  EXPECT_EQ(delivery.at("event_type"), "credited");
  EXPECT_EQ(delivery.at("status"), "pending");
  EXPECT_TRUE(delivery.at("last_status_code").is_null()) << delivery;
  EXPECT_FALSE(delivery.at("last_error").as_string().empty()) << delivery;
  const std::string webhook_id(delivery.at("webhook_id").as_string());
  const std::int64_t event_id = delivery.at("event_id").as_int64();

  // The table: a header, one row with its id, status and error; the filters reach the server.
  r = cli({"webhook", "deliveries", id});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto table = lines_of(r.out);
  ASSERT_EQ(table.size(), 2u) << r.out;
  EXPECT_EQ(table[0].rfind("WEBHOOK_ID", 0), 0u) << r.out;
  EXPECT_NE(table[0].find("LAST_ERROR"), std::string::npos) << r.out;
  EXPECT_NE(table[1].find(webhook_id), std::string::npos) << r.out;
  EXPECT_NE(table[1].find("pending"), std::string::npos) << r.out;
  r = cli({"webhook", "deliveries", id, "--status", "delivered"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "no deliveries\n");
  r = cli({"webhook", "deliveries", id, "--status", "pending", "--limit", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("deliveries").as_array().size(), 1u) << r.out;
  r = cli({"webhook", "deliveries", id, "--starting-after", webhook_id, "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(one_document(r).at("deliveries").as_array().empty()) << r.out;

  r = cli({"webhook", "replay", id, "--after", std::to_string(event_id - 1), "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value replayed = one_document(r);
  EXPECT_EQ(replayed.at("endpoint_id").as_string(), id);
  EXPECT_FALSE(replayed.as_object().contains("secret")) << r.out;
  EXPECT_LE(replayed.at("delivery_cursor").as_int64(), event_id - 1) << r.out;
  r = cli({"webhook", "replay", id, "--after", "0"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("replaying the events after 0"), std::string::npos) << r.out;
  r = cli({"webhook", "replay", "we_0000000000000000", "--after", "0"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;

  std::this_thread::sleep_for(milliseconds(400));  // the requests above are in the log
  const std::size_t requests_before = count_requests(server_.log());
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"webhook", "deliveries", id, "--status", "sent"}, "--status"},
      {{"webhook", "deliveries", id, "--limit", "0"}, "--limit"},
      {{"webhook", "deliveries"}, "ENDPOINT_ID"},
      {{"webhook", "replay", id, "--after", "-1"}, "--after"},
      {{"webhook", "replay", id, "--after", "one"}, "--after"},
      {{"webhook", "replay", id}, "--after"},
      {{"webhook", "replay", "--after", "0"}, "ENDPOINT_ID"},
  };
  for (const auto& [args, named] : bad) {
    r = cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << "\n" << describe(r);
    EXPECT_NE(r.err.find(named), std::string::npos) << args[1] << "\n" << r.err;
  }
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(count_requests(server_.log()), requests_before) << "a usage error reached the server";
}

TEST_F(CliTest, JsonOutputIsOneServerDocumentPerLine) {
  const std::vector<std::vector<std::string>> commands = {
      {"account", "create", "erin", "--overdraft-limit", "0", "--max-active-holds", "3", "--json"},
      {"account", "credit", "erin", "4", "--reference", "p1", "--json"},
      {"account", "debit", "erin", "1", "--reference", "d1", "--reason", "refund", "--json"},
      {"hold", "reserve", "erin", "1", "--json"},
      {"hold", "list", "--json"},
      {"events", "erin", "--json"},
      {"audit", "--account", "erin", "--json"},
      {"key", "create", "erin", "--json"},
  };
  for (const auto& command : commands) {
    const ProcessResult r = cli(command);
    ASSERT_EQ(r.exit_code, 0) << command[0] << " " << command[1] << "\n" << describe(r);
    const json::value doc = one_document(r);
    EXPECT_TRUE(doc.is_object()) << r.out;
  }
  const json::value debit = one_document(cli({"account", "debit", "erin", "1", "--reference", "d1", "--reason", "refund",
                                              "--json"}));
  EXPECT_EQ(debit.at("account").at("purchased"), 3);
}

TEST_F(CliTest, RefusedRequestsExitOneWithTheServersCodeAndDetail) {
  ASSERT_EQ(cli({"account", "create", "frank"}).exit_code, 0);

  ProcessResult r = cli({"hold", "reserve", "frank", "1"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "tollgate: hold reserve: insufficient_credits: No credits available. Another device may be using this "
            "account right now. (available 0, requested 1)\n");

  r = cli({"hold", "show", "hold_404_nope"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("tollgate: hold show: not_found:"), std::string::npos) << r.err;

  r = cli({"account", "credit", "frank", "5", "--reference", "x"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = cli({"account", "credit", "frank", "6", "--reference", "x"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("idempotency_mismatch"), std::string::npos) << r.err;

  r = cli_as("not-a-key", {"account", "show", "frank"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("tollgate: account show: unauthorized:"), std::string::npos) << r.err;

  r = run_tollgate({"account", "show", "frank", "--url", server_.url()});  // no key at all
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("no key given: pass --key or set TOLLGATE_KEY"), std::string::npos) << r.err;
}

// Found while writing fuzz_cli_args (reading how CLI11 converts): CLI11 converts integers with strtoll(..., 0), so "010" would have
// been read as octal 8 after the validator had checked it as decimal 10. Amounts and every ranged
// integer are decimal, leading zeros and all.
TEST_F(CliTest, LeadingZerosAreDecimalNotOctal) {
  ASSERT_EQ(cli({"account", "create", "oscar"}).exit_code, 0);
  ProcessResult r = cli({"account", "credit", "oscar", "010", "--reference", "buy-octal"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = cli({"hold", "reserve", "oscar", "0009", "--ttl-ms", "060000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string hold_id(one_document(r).at("hold_id").as_string());
  r = cli({"hold", "commit", hold_id, "--amount", "08"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = cli({"account", "show", "oscar", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value account = one_document(r);
  EXPECT_EQ(account.at("purchased"), 10);  // not 8
  EXPECT_EQ(account.at("used"), 8);        // "08" is not an octal error either
  EXPECT_EQ(account.at("available"), 2);
}

TEST_F(CliTest, UsageErrorsExitTwoWithoutAskingTheServer) {
  const std::vector<std::vector<std::string>> bad = {
      {"hold", "reserve", "g", "0"},
      {"hold", "reserve", "g", "-5"},
      {"hold", "reserve", "g", "1.5"},
      {"hold", "reserve", "g", "1e3"},
      {"hold", "reserve", "g", "9007199254740992"},
      {"hold", "reserve", "has space", "1"},
      {"hold", "reserve", "..", "1"},  // not an id: a URL path cannot carry it (the server's rule)
      {"account", "show", "."},
      {"hold", "extend", "h"},  // --ttl-ms is required
      {"account", "credit", "g", "5"},  // --reference is required
      {"account", "debit", "g", "5", "--reference", "r"},  // --reason is required
      {"account", "frobnicate", "g"},
      {"hold"},
      {"events", "g", "--limit", "1001"},
      {"hold", "list", "--status", "pending"},
      {"refund", "hold", "h"},                                 // --reason is required
      {"refund", "hold", "h", "--reason", "x", "--amount", "0"},
      {"refund", "job", "has space", "--reason", "x"},
      {"refund", "job", "j", "--reason", "x", "--request-id", "a b"},
      {"refund"},
  };
  for (const auto& args : bad) {
    const ProcessResult r = cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << (args.size() > 1 ? args[1] : "") << "\n" << describe(r);
    EXPECT_FALSE(r.err.empty());
  }
  // None of them reached the server (its request log is flushed at least every 200 ms).
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(server_.log().find("\"msg\":\"request\""), std::string::npos) << server_.log();

  ProcessResult r = run_tollgate({"account", "show", "g", "--url", "ftp://127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 2) << describe(r);
  EXPECT_NE(r.err.find("the scheme must be http or https"), std::string::npos) << r.err;

  // The largest amount passes local checks; the server answers for it.
  ASSERT_EQ(cli({"account", "create", "g"}).exit_code, 0);
  r = cli({"hold", "reserve", "g", "9007199254740991"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("insufficient_credits"), std::string::npos) << r.err;
}

TEST_F(CliTest, EnvironmentGivesUrlAndKeyButTheCommandLineWins) {
  ASSERT_EQ(cli({"account", "create", "hank"}).exit_code, 0);
  const testing::EnvVars env = {{"TOLLGATE_URL", server_.url()}, {"TOLLGATE_KEY", server_.admin_key()}};
  ProcessResult r = run_tollgate({"account", "show", "hank"}, env);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  // A --key given on the command line is the one used, whatever TOLLGATE_KEY says.
  r = run_tollgate({"account", "show", "hank", "--key", "wrong-key"}, env);
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("unauthorized"), std::string::npos) << r.err;
  r = run_tollgate({"account", "show", "hank", "--timeout-ms", "500", "--url",
                    "http://127.0.0.1:" + std::to_string(testing::unused_port())},
                   env);
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  // With neither --key nor TOLLGATE_KEY, TOLLGATE_ADMIN_KEY (the server's variable) is the key;
  // TOLLGATE_KEY wins over it.
  const testing::EnvVars admin_env = {{"TOLLGATE_URL", server_.url()}, {"TOLLGATE_ADMIN_KEY", server_.admin_key()}};
  r = run_tollgate({"account", "show", "hank"}, admin_env);
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  r = run_tollgate({"account", "show", "hank"},
                   {{"TOLLGATE_URL", server_.url()}, {"TOLLGATE_ADMIN_KEY", server_.admin_key()}, {"TOLLGATE_KEY", "wrong-key"}});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("unauthorized"), std::string::npos) << r.err;
  r = run_tollgate({"account", "show", "--help"});
  EXPECT_NE(r.out.find("TOLLGATE_ADMIN_KEY"), std::string::npos) << r.out;
}

TEST_F(CliTest, EventsFollowPrintsNewEventsAsTheyHappen) {
  ASSERT_EQ(cli({"account", "create", "ivy"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "ivy", "1", "--reference", "first"}).exit_code, 0);
  // --follow runs until interrupted; here the time-out ends it, and what it printed stays. It starts
  // at the newest event: what is already there is not shown again.
  std::vector<std::string> references = followed_references(
      {"events", "ivy", "--follow", "--json", "--url", server_.url(), "--key", server_.admin_key()},
      [this] { cli({"account", "credit", "ivy", "2", "--reference", "second"}); }, milliseconds(2500));
  EXPECT_EQ(references, (std::vector<std::string>{"second"}));
  // --from-start shows the whole trail first; --after N from event N on.
  references = followed_references(
      {"events", "ivy", "--follow", "--from-start", "--json", "--url", server_.url(), "--key", server_.admin_key()},
      [this] { cli({"account", "credit", "ivy", "3", "--reference", "third"}); }, milliseconds(2500));
  EXPECT_EQ(references, (std::vector<std::string>{"first", "second", "third"}));
}

// `account list` and `key list` page with --limit and --starting-after: a table per page, and on
// stderr the flag that reads on while more follow; an empty page says so.
TEST_F(CliTest, AccountAndKeyListsPageWithTheCursorTheyPrint) {
  for (const char* id : {"pa", "pb", "pc"}) ASSERT_EQ(cli({"account", "create", id}).exit_code, 0);
  ProcessResult r = cli({"account", "list", "--limit", "2"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  std::vector<std::string> table = lines_of(r.out);
  ASSERT_EQ(table.size(), 3u) << r.out;
  EXPECT_EQ(table[0].rfind("ACCOUNT", 0), 0u) << r.out;
  EXPECT_EQ(table[1].rfind("pa ", 0), 0u) << r.out;
  EXPECT_EQ(table[2].rfind("pb ", 0), 0u) << r.out;
  EXPECT_EQ(r.err, "tollgate: account list: there are more: --starting-after pb\n");
  r = cli({"account", "list", "--limit", "2", "--starting-after", "pb"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  table = lines_of(r.out);
  ASSERT_EQ(table.size(), 2u) << r.out;
  EXPECT_EQ(table[1].rfind("pc ", 0), 0u) << r.out;
  EXPECT_EQ(r.err, "");  // the last page
  r = cli({"account", "list", "--starting-after", "pc"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "no accounts\n");

  r = cli({"key", "create", "pa", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string key_id(one_document(r).at("key_id").as_string());
  r = cli({"key", "list", "--account", "pa"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  table = lines_of(r.out);
  ASSERT_EQ(table.size(), 2u) << r.out;
  EXPECT_EQ(table[0].rfind("KEY_ID", 0), 0u) << r.out;
  EXPECT_EQ(table[1].substr(0, table[1].find(' ')), key_id) << r.out;
  EXPECT_EQ(r.out.find("secret"), std::string::npos) << r.out;
  r = cli({"key", "list", "--account", "pb"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "no keys\n");
}

// `account update` changes only what it is given; a frozen account refuses a reservation with
// 409 account_frozen; `none` removes the hold limit; nothing given is a usage error.
TEST_F(CliTest, AccountUpdateChangesTheGivenSettingsAndFrozenRefusesNewHolds) {
  ASSERT_EQ(cli({"account", "create", "kim", "--max-active-holds", "2"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "kim", "5", "--reference", "kim-1"}).exit_code, 0);
  ProcessResult r = cli({"account", "update", "kim", "--frozen", "true", "--overdraft-limit", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  json::value account = one_document(r);
  EXPECT_EQ(account.at("frozen"), true);
  EXPECT_TRUE(account.at("frozen_reason").is_null()) << "an admin's freeze has no reason: " << r.out;
  EXPECT_EQ(account.at("overdraft_limit"), 3);
  EXPECT_EQ(account.at("max_active_holds"), 2);  // not given: unchanged
  r = cli({"hold", "reserve", "kim", "1", "--request-id", "kim-r1"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("account_frozen"), std::string::npos) << r.err;

  r = cli({"account", "update", "kim", "--frozen", "false", "--max-active-holds", "none", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  account = one_document(r);
  EXPECT_EQ(account.at("frozen"), false);
  EXPECT_TRUE(account.at("max_active_holds").is_null()) << r.out;
  EXPECT_EQ(cli({"hold", "reserve", "kim", "1", "--request-id", "kim-r2"}).exit_code, 0);

  // Two account_updated events, each with the settings after it.
  r = cli({"events", "kim", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  int updates = 0;
  const json::value page = one_document(r);
  for (const json::value& e : page.at("events").as_array()) updates += e.at("type") == "account_updated";
  EXPECT_EQ(updates, 2) << r.out;

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"account", "update", "kim"}, {"account", "update", "kim", "--frozen", "yes"},
        {"account", "update", "kim", "--max-active-holds", "0"}, {"account", "update", "kim", "--overdraft-limit", "-1"}}) {
    r = cli(bad);
    EXPECT_EQ(r.exit_code, 2) << describe(r);
  }
  r = cli({"account", "show", "kim", "--json"});
  EXPECT_EQ(one_document(r).at("frozen"), false) << "a refused update changed something";
}

// The value `account show` printed for `key` ("key:   value"), or "(no line)".
std::string shown_field(const std::string& out, const std::string& key) {
  for (const std::string& line : lines_of(out)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    const std::size_t value = line.find_first_not_of(' ', key.size() + 1);
    return value == std::string::npos ? "" : line.substr(value);
  }
  return "(no line)";
}

// A payment provider's freeze says why: after a signed Stripe checkout and its dispute, `account
// show` prints frozen: true and frozen_reason: payment disputed (and "-" before it, and once an
// admin unfreezes the account).
TEST(CliFrozenReason, AccountShowSaysWhyAPaymentProviderFroze) {
  constexpr const char* kSecret = "whsec_cli_frozen_reason_test";
  testing::ServerOptions options;
  options.env = {{"TOLLGATE_STRIPE_SIGNING_SECRETS", kSecret}};
  ServerProcess server(options);
  const auto cli = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--url", server.url(), "--key", server.admin_key()});
    return run_tollgate(args);
  };
  // POST /v1/payments/stripe, signed as Stripe signs (t=, v1= HMAC-SHA256 of "{t}.{body}").
  const auto stripe = [&](const std::string& id, const std::string& type, json::object object) {
    const std::string body = json::serialize(json::object{
        {"id", id}, {"object", "event"}, {"type", type}, {"data", json::object{{"object", std::move(object)}}}});
    const std::int64_t t = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    httptest::HttpClient open(server.port());
    return open.post("/v1/payments/stripe", body,
                     {{"Stripe-Signature", "t=" + std::to_string(t) + ",v1=" + payments::stripe_signature(kSecret, t, body)}});
  };

  ASSERT_EQ(cli({"account", "create", "dora"}).exit_code, 0);
  ProcessResult r = cli({"account", "show", "dora"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(shown_field(r.out, "frozen"), "false") << r.out;
  EXPECT_EQ(shown_field(r.out, "frozen_reason"), "-") << r.out;

  const auto paid = stripe("evt_cli_1", "checkout.session.completed",
                           {{"id", "cs_cli_1"}, {"object", "checkout.session"}, {"client_reference_id", "dora"},
                            {"payment_status", "paid"}, {"payment_intent", "pi_cli_1"},
                            {"metadata", json::object{{"tollgate_credits", "10"}}}});
  ASSERT_EQ(paid.status, 200u) << paid;
  const auto disputed = stripe("evt_cli_2", "charge.dispute.created",
                               {{"id", "dp_cli_1"}, {"object", "dispute"}, {"payment_intent", "pi_cli_1"},
                                {"charge", "ch_cli_1"}});
  ASSERT_EQ(disputed.status, 200u) << disputed;

  r = cli({"account", "show", "dora"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(shown_field(r.out, "available"), "10") << r.out;
  EXPECT_EQ(shown_field(r.out, "frozen"), "true") << r.out;
  EXPECT_EQ(shown_field(r.out, "frozen_reason"), "payment disputed") << r.out;
  r = cli({"account", "show", "dora", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("frozen_reason"), "payment disputed") << r.out;

  // Only an admin unfreezes a disputed account; the reason goes with the freeze.
  r = cli({"account", "update", "dora", "--frozen", "false"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(shown_field(r.out, "frozen"), "false") << r.out;
  EXPECT_EQ(shown_field(r.out, "frozen_reason"), "-") << r.out;
}

// `account update --low-balance-threshold N|none` sets and clears the balance notices' threshold;
// a debit across it is followed by its notice in `events`; 0 or a word is a usage error.
TEST_F(CliTest, AccountUpdateSetsTheLowBalanceThresholdAndItsNoticesFollowTheMovement) {
  ASSERT_EQ(cli({"account", "create", "nia"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "nia", "8", "--reference", "nia-1"}).exit_code, 0);
  ProcessResult r = cli({"account", "update", "nia", "--low-balance-threshold", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("low_balance_threshold"), 5);
  ASSERT_EQ(cli({"account", "debit", "nia", "4", "--reference", "nia-2", "--reason", "test"}).exit_code, 0);
  r = cli({"events", "nia", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value page = one_document(r);
  const json::array& events = page.at("events").as_array();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().at("type"), "balance_low") << r.out;
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"account", "update", "nia", "--low-balance-threshold", "0"},
        {"account", "update", "nia", "--low-balance-threshold", "some"}}) {
    EXPECT_EQ(cli(bad).exit_code, 2) << describe(cli(bad));
  }
  r = cli({"account", "update", "nia", "--low-balance-threshold", "none", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(one_document(r).at("low_balance_threshold").is_null()) << r.out;
}

// Without an account, `events` reads the change feed: every account's events in commit order, each
// row naming its account; --follow long-polls it and prints events as they are committed.
TEST_F(CliTest, EventsWithoutAnAccountFollowsTheChangeFeedOfEveryAccount) {
  ASSERT_EQ(cli({"account", "create", "lee"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "create", "max"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "lee", "1", "--reference", "feed-1"}).exit_code, 0);
  ASSERT_EQ(cli({"account", "credit", "max", "2", "--reference", "feed-2"}).exit_code, 0);
  ProcessResult r = cli({"events"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto table = lines_of(r.out);
  ASSERT_EQ(table.size(), 3u) << r.out;
  EXPECT_EQ(table[0].rfind("EVENT", 0), 0u) << r.out;
  EXPECT_NE(table[0].find("ACCOUNT"), std::string::npos) << r.out;
  EXPECT_NE(table[1].find("lee"), std::string::npos) << r.out;
  EXPECT_NE(table[2].find("max"), std::string::npos) << r.out;
  // An account key may not read the feed.
  r = cli({"key", "create", "lee", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::string secret(one_document(r).at("secret").as_string());
  r = cli_as(secret, {"events"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("forbidden"), std::string::npos) << r.err;

  const std::vector<std::string> references = followed_references(
      {"events", "--follow", "--json", "--after", "1", "--url", server_.url(), "--key", server_.admin_key()},
      [this] { cli({"account", "credit", "max", "3", "--reference", "feed-3"}); }, milliseconds(2500));
  EXPECT_EQ(references, (std::vector<std::string>{"feed-2", "feed-3"}));
  // Without --after, following the feed starts at its head (after=latest).
  const std::vector<std::string> from_head = followed_references(
      {"events", "--follow", "--json", "--url", server_.url(), "--key", server_.admin_key()},
      [this] { cli({"account", "credit", "lee", "4", "--reference", "feed-4"}); }, milliseconds(2500));
  EXPECT_EQ(from_head, (std::vector<std::string>{"feed-4"}));
}

TEST_F(CliTest, StoppedServerExitsThreeAfterBoundedRetries) {
  ASSERT_EQ(cli({"account", "create", "jo"}).exit_code, 0);
  ASSERT_EQ(server_.stop(SIGTERM), 0) << server_.log();
  // A refused connect is retried within the client's budget (10 s); --timeout-ms bounds it here.
  ProcessResult r = cli({"account", "show", "jo", "--timeout-ms", "1500"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_GE(r.duration, milliseconds(500));
  EXPECT_LT(r.duration, milliseconds(5000));
  EXPECT_NE(r.err.find("Connection refused"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(gave up after "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--timeout-ms 1500"), std::string::npos) << r.err;

  r = cli({"hold", "reserve", "jo", "1", "--request-id", "kiosk-9", "--timeout-ms", "500"});
  EXPECT_EQ(r.exit_code, 3) << describe(r);
  EXPECT_NE(r.err.find("--request-id kiosk-9"), std::string::npos) << r.err;  // how to retry safely
}

// =====================================================================================================
// The client library's retry policy
// =====================================================================================================

// A TCP proxy in front of the server that can break the next requests on purpose. It reads each
// request whole (head and Content-Length body), then, by the next queued fault: forwards it and
// its answer (none); forwards it and closes the client's connection instead of answering
// (drop_answer: the server did the work, the client never hears); answers 503 itself and closes
// (answer_503); or never answers (hang).
class FaultProxy {
 public:
  // answer_502/answer_504: answered by the proxy itself as a balancer does (HTML, no Retry-After).
  enum class Fault { none, drop_answer, answer_502, answer_503, answer_504, hang };

  explicit FaultProxy(std::uint16_t upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error(std::string("proxy: ") + std::strerror(errno));
    }
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~FaultProxy() {
    stopping_ = true;
    acceptor_.join();
    ::close(listen_fd_);
    std::lock_guard lock(mu_);
    for (auto& t : connections_) t.join();
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void inject(Fault fault) {
    std::lock_guard lock(mu_);
    faults_.push_back(fault);
  }
  // Every request that reached the proxy, in order, as received.
  std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  int connections_accepted() const { return accepted_.load(); }

 private:
  // Waits for `fd` to be readable, checking stopping_ every 50 ms. False when stopping.
  bool wait_readable(int fd) {
    while (!stopping_) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) return true;
    }
    return false;
  }

  // Reads one whole HTTP message (head and Content-Length body) into `message`; `buffer` keeps
  // bytes that arrived early. False on EOF, error or stop.
  bool read_message(int fd, std::string& buffer, std::string& message) {
    for (;;) {
      const std::size_t head_end = buffer.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::string head = buffer.substr(0, head_end);
        for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        std::size_t length = 0;
        if (auto at = head.find("content-length:"); at != std::string::npos) {
          length = std::stoul(head.substr(at + 15));
        }
        const std::size_t total = head_end + 4 + length;
        if (buffer.size() >= total) {
          message = buffer.substr(0, total);
          buffer.erase(0, total);
          return true;
        }
      }
      if (!wait_readable(fd)) return false;
      char chunk[16 * 1024];
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) return false;
      buffer.append(chunk, static_cast<std::size_t>(n));
    }
  }

  static bool send_all(int fd, const std::string& data) {
    std::size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  void accept_loop() {
    while (wait_readable(listen_fd_)) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      accepted_.fetch_add(1);
      std::lock_guard lock(mu_);
      connections_.emplace_back([this, client] { serve(client); });
    }
  }

  void serve(int client) {
    int upstream = -1;
    std::string from_client, from_upstream;
    for (;;) {
      std::string request;
      if (!read_message(client, from_client, request)) break;
      Fault fault = Fault::none;
      {
        std::lock_guard lock(mu_);
        requests_.push_back(request);
        if (!faults_.empty()) {
          fault = faults_.front();
          faults_.pop_front();
        }
      }
      if (fault == Fault::answer_502 || fault == Fault::answer_504) {
        const std::string status = fault == Fault::answer_502 ? "502 Bad Gateway" : "504 Gateway Timeout";
        const std::string body = "<html><body>" + status + "</body></html>";
        send_all(client, "HTTP/1.1 " + status + "\r\nContent-Type: text/html\r\nConnection: close\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\n\r\n" + body);
        break;
      }
      if (fault == Fault::answer_503) {
        send_all(client,
                 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nRetry-After: 0\r\n"
                 "Connection: close\r\nContent-Length: 55\r\n\r\n"
                 "{\"status\":503,\"code\":\"unavailable\",\"detail\":\"injected\"}");
        break;
      }
      if (fault == Fault::hang) {
        std::string ignored;
        read_message(client, from_client, ignored);  // until the client gives up (or we stop)
        break;
      }
      if (upstream < 0) {
        upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(upstream_port_);
        if (::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) break;
      }
      std::string answer;
      if (!send_all(upstream, request) || !read_message(upstream, from_upstream, answer)) break;
      if (fault == Fault::drop_answer) break;  // the server acted; the client never hears of it
      if (!send_all(client, answer)) break;
    }
    if (upstream >= 0) ::close(upstream);
    ::shutdown(client, SHUT_RDWR);
    ::close(client);
  }

  const std::uint16_t upstream_port_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<std::thread> connections_;  // protected by mu_
  std::deque<Fault> faults_;              // protected by mu_
  std::vector<std::string> requests_;     // protected by mu_
};

client::Options fast_options(const std::string& url, const std::string& key) {
  client::Options o;
  o.base_url = url;
  o.key = key;
  o.connect_timeout = milliseconds(1000);
  o.request_timeout = milliseconds(3000);
  o.retry.attempts_max = 4;
  o.retry.backoff_initial = milliseconds(20);
  o.retry.backoff_max = milliseconds(100);
  return o;
}

std::string body_of(const std::string& request) { return request.substr(request.find("\r\n\r\n") + 4); }

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client::Client admin(fast_options(server_.url(), server_.admin_key()));
    ASSERT_TRUE(admin.create_account({"acct", std::nullopt, std::nullopt}).ok());
    ASSERT_TRUE(admin.credit("acct", 10, "seed").ok());
  }
  client::Client client_for(const std::string& url) { return client::Client(fast_options(url, server_.admin_key())); }
  std::size_t holds_of(client::Client& c, const std::string& account) {
    const auto r = c.list_holds({account, std::nullopt, std::nullopt});
    EXPECT_TRUE(r.ok()) << r.describe();
    return r.ok() ? r.json().at("holds").as_array().size() : 0;
  }

  ServerProcess server_;
};

TEST_F(ClientTest, TypedCallsAnswerTheServersJsonAndProblems) {
  client::Client c = client_for(server_.url());
  auto health = c.healthz();
  ASSERT_TRUE(health.ok()) << health.describe();
  EXPECT_EQ(health.json().at("status"), "ok");

  auto account = c.get_account("acct");
  ASSERT_TRUE(account.ok()) << account.describe();
  EXPECT_EQ(account.status(), 200u);
  EXPECT_EQ(account.json().at("available"), 10);

  auto hold = c.reserve({"acct", 4, "", 60000, json::object{{"order", "o-1"}}});
  ASSERT_TRUE(hold.ok()) << hold.describe();
  EXPECT_EQ(hold.status(), 201u);
  EXPECT_EQ(hold.json().at("metadata").at("order"), "o-1");
  const std::string hold_id(hold.json().at("hold_id").as_string());
  EXPECT_EQ(std::string(hold.json().at("request_id").as_string()).rfind("client-", 0), 0u);

  EXPECT_TRUE(c.extend(hold_id, 90000).ok());
  auto committed = c.commit(hold_id, 3);
  ASSERT_TRUE(committed.ok()) << committed.describe();
  EXPECT_EQ(committed.json().at("committed_amount"), 3);
  auto released = c.release(hold_id);
  ASSERT_TRUE(released.is_problem());
  EXPECT_EQ(released.status(), 409u);
  EXPECT_EQ(released.problem().code, "hold_committed");
  EXPECT_EQ(released.attempts(), 1);  // a 409 is reported at once

  auto events = c.events("acct", 0, 2);
  ASSERT_TRUE(events.ok()) << events.describe();
  EXPECT_EQ(events.json().at("events").as_array().size(), 2u);
  EXPECT_EQ(events.json().at("next_after"), 2);

  auto audit = c.audit();
  ASSERT_TRUE(audit.ok()) << audit.describe();
  EXPECT_TRUE(audit.json().at("violations").as_array().empty());

  auto key = c.create_key("acct");
  ASSERT_TRUE(key.ok()) << key.describe();
  client::Client kiosk(fast_options(server_.url(), std::string(key.json().at("secret").as_string())));
  EXPECT_TRUE(kiosk.get_account("acct").ok());
  EXPECT_EQ(kiosk.audit().problem().code, "forbidden");
  ASSERT_TRUE(c.revoke_key(std::string(key.json().at("key_id").as_string())).ok());
  EXPECT_EQ(kiosk.get_account("acct").problem().code, "unauthorized");

  auto missing = c.get_hold("hold_0_missing");
  ASSERT_TRUE(missing.is_problem());
  EXPECT_EQ(missing.problem().status, 404u);
  EXPECT_EQ(missing.problem().code, "not_found");
  EXPECT_EQ(missing.problem().title, "Not Found");
}

// The client's key options (issue 32): create_key with scopes, expiry and name; create_admin_key;
// get_key; a call outside the key's scopes is a Problem naming the missing scope.
TEST_F(ClientTest, KeyScopesAndWhoamiAndTheMissingScope) {
  client::Client c = client_for(server_.url());
  client::CreateKeyRequest request;
  request.scopes = {"read", "jobs:write"};
  request.name = "kiosk 7";
  request.expires_at = "2099-01-01T00:00:00Z";
  auto key = c.create_key("acct", request);
  ASSERT_TRUE(key.ok()) << key.describe();
  EXPECT_EQ(key.status(), 201u);
  EXPECT_EQ(key.json().at("scopes"), (json::array{"jobs:write", "read"}));
  EXPECT_EQ(key.json().at("name"), "kiosk 7");
  EXPECT_TRUE(key.json().at("expires_at").is_string());

  client::Client kiosk(fast_options(server_.url(), std::string(key.json().at("secret").as_string())));
  auto me = kiosk.get_key();
  ASSERT_TRUE(me.ok()) << me.describe();
  EXPECT_EQ(me.json().at("key_id"), key.json().at("key_id"));
  EXPECT_EQ(me.json().at("account_id"), "acct");
  EXPECT_FALSE(me.json().as_object().contains("secret"));
  auto reserve = kiosk.reserve({"acct", 1, "", std::nullopt, std::nullopt});
  ASSERT_TRUE(reserve.is_problem()) << reserve.describe();
  EXPECT_EQ(reserve.status(), 403u);
  EXPECT_EQ(reserve.problem().code, "forbidden");
  EXPECT_EQ(reserve.problem().missing_scope, std::optional<std::string>("holds:write"));

  auto admin_me = c.get_key();
  ASSERT_TRUE(admin_me.ok()) << admin_me.describe();
  EXPECT_EQ(admin_me.json().at("key_id"), "admin");
  EXPECT_EQ(admin_me.json().at("scopes"), (json::array{"admin"}));

  client::CreateKeyRequest reader;
  reader.scopes = {"admin:read"};
  auto admin_key = c.create_admin_key(reader);
  ASSERT_TRUE(admin_key.ok()) << admin_key.describe();
  EXPECT_TRUE(admin_key.json().at("account_id").is_null());
  client::Client auditor(fast_options(server_.url(), std::string(admin_key.json().at("secret").as_string())));
  EXPECT_TRUE(auditor.audit().ok());
  auto credit = auditor.credit("acct", 1, "auditor");
  ASSERT_TRUE(credit.is_problem()) << credit.describe();
  EXPECT_EQ(credit.problem().missing_scope, std::optional<std::string>("admin"));

  client::CreateKeyRequest wrong;
  wrong.scopes = {"admin"};
  auto refused = c.create_key("acct", wrong);
  ASSERT_TRUE(refused.is_problem());
  EXPECT_EQ(refused.status(), 400u);
  EXPECT_EQ(refused.problem().code, "invalid_request");
  EXPECT_FALSE(refused.problem().missing_scope);
}

TEST_F(ClientTest, PathSegmentsAreEncodedNotInterpreted) {
  client::Client c = client_for(server_.url());
  // "a/b" must reach the server as one segment (a bad id), never as a different route.
  auto r = c.get_account("a/b");
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "invalid_request") << r.describe();
  r = c.get_account("acct?x=1");
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "invalid_request") << r.describe();
  EXPECT_EQ(client::Client::encode_component("a/b c"), "a%2Fb%20c");
  EXPECT_EQ(client::Client::encode_component("user@host:1.x_y-z~"), "user@host:1.x_y-z~");
  EXPECT_EQ(client::Client::encode_component(".."), "%2E%2E");
}

// An unknown command is named with the ones that exist and the closest of them (issue 9), a missing
// one with the ones that exist; nothing is asked of any server.
TEST(CliUsage, AnUnknownOrMissingCommandNamesTheCommandsThatExistAndTheClosest) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases{
      {{"acount", "create", "a"},
       "tollgate: unknown command 'acount' (did you mean account?); the commands are: account, audit, config, demo, events, "
       "fake-provider, hold, idem, job, key, lock, lots, price, ratelimit, refund, serve, transfer, version, webhook\n"},
      {{"frobnicate"}, "tollgate: unknown command 'frobnicate'; the commands are: account, audit, config, demo, events, "
                       "fake-provider, hold, idem, job, key, lock, lots, price, ratelimit, refund, serve, transfer, version, webhook\n"},
      {{"account", "crate", "a", "--url", "http://127.0.0.1:1"},
       "tollgate: unknown command 'account crate' (did you mean create?); the account commands are: create, credit, "
       "debit, list, show, update\n"},
      {{"hold", "comit", "h"},
       "tollgate: unknown command 'hold comit' (did you mean commit?); the hold commands are: check, commit, extend, list, "
       "release, reserve, show\n"},
      {{"key", "revok", "k"}, "tollgate: unknown command 'key revok' (did you mean revoke?); the key commands are: "
                              "create, list, revoke, whoami\n"},
      {{"lock", "aquire", "k"}, "tollgate: unknown command 'lock aquire' (did you mean acquire?); the lock commands are: "
                                "acquire, cancel, release, renew, show\n"},
      {{"idem", "begn", "k"}, "tollgate: unknown command 'idem begn' (did you mean begin?); the idem commands are: "
                              "abandon, begin, finish\n"},
  };
  for (const Case& c : cases) {
    const ProcessResult r = run_tollgate(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << "\n" << r.err;
    EXPECT_EQ(r.err, c.err);
    EXPECT_EQ(r.out, "");
  }
  // A command that needs another, without it.
  ProcessResult r = run_tollgate({"hold"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tollgate: a command is missing after 'hold'; the hold commands are: check, commit, extend, list, release, "
                   "reserve, show\n");
  r = run_tollgate({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tollgate: a command is missing; the commands are: account, audit, config, demo, events, fake-provider, hold, idem, "
                   "job, key, lock, lots, price, ratelimit, refund, serve, transfer, version, webhook\n");
  r = run_tollgate({"ratelimit"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tollgate: a command is missing after 'ratelimit'; the ratelimit commands are: check, reset\n");
  // Other usage errors keep CLI11's own message (a command's arguments are not commands).
  const ProcessResult extra = run_tollgate({"events", "a", "b"});
  EXPECT_EQ(extra.exit_code, 2);
  EXPECT_EQ(extra.err.find("unknown command"), std::string::npos) << extra.err;
}

TEST(ClientConfiguration, BadBaseUrlsAreRefusedWithoutSendingAnything) {
  for (const char* url : {"127.0.0.1:8080", "http://127.0.0.1:8080/v1", "https://127.0.0.1:8080/v1",
                          "http://user:pw@127.0.0.1:8080", "http://127.0.0.1:8080/?x=1", "ftp://h:1"}) {
    client::Options o;
    o.base_url = url;
    client::Client c(o);
    ASSERT_NE(c.configuration_error(), nullptr) << url;
    auto r = c.healthz();
    ASSERT_TRUE(r.is_transport_error()) << url;
    EXPECT_EQ(r.transport_error().failure, client::TransportFailure::invalid_url) << url;
  }
  for (const char* url : {"http://127.0.0.1:8080", "http://127.0.0.1:8080/", "http://localhost:1", "http://[::1]:80",
                          "https://127.0.0.1:8443", "https://localhost"}) {
    client::Options o;
    o.base_url = url;
    EXPECT_EQ(client::Client(o).configuration_error(), nullptr) << url;
  }
}

TEST_F(ClientTest, ReserveResentAfterALostAnswerReusesItsRequestIdAndMakesOneHold) {
  FaultProxy proxy(server_.port());
  proxy.inject(FaultProxy::Fault::drop_answer);  // the server reserves; the client never hears
  client::Client c = client_for(proxy.url());
  auto r = c.reserve({"acct", 3, "", std::nullopt, std::nullopt});  // the client makes the request_id
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.attempts(), 2);
  EXPECT_EQ(r.status(), 200u) << "the second attempt must find the first one's hold";

  const auto requests = proxy.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(body_of(requests[0]), body_of(requests[1]));  // exactly the same body, the same request_id
  EXPECT_EQ(json::parse(body_of(requests[0])).at("request_id"), r.json().at("request_id"));

  EXPECT_EQ(holds_of(c, "acct"), 1u);
  auto account = c.get_account("acct");
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account.json().at("reserved"), 3);
  EXPECT_EQ(account.json().at("available"), 7);
}

TEST_F(ClientTest, ReserveWaitsOutAServerRestartAndReusesItsRequestId) {
  client::Options options = fast_options(server_.url(), server_.admin_key());
  options.retry.attempts_max = 30;  // 30 × ≤100 ms: enough for a restart, still bounded
  client::Client c(options);
  ASSERT_TRUE(c.healthz().ok());  // a kept-alive connection that the stop below will break

  ASSERT_EQ(server_.stop(SIGTERM), 0) << server_.log();
  std::thread restarter([this] {
    std::this_thread::sleep_for(milliseconds(300));
    server_.restart();  // same database, same port
  });
  auto first = c.reserve({"acct", 2, "restart-1", std::nullopt, std::nullopt});
  restarter.join();
  ASSERT_TRUE(first.ok()) << first.describe();
  EXPECT_GT(first.attempts(), 1);
  EXPECT_EQ(first.status(), 201u);

  auto again = c.reserve({"acct", 2, "restart-1", std::nullopt, std::nullopt});
  ASSERT_TRUE(again.ok()) << again.describe();
  EXPECT_EQ(again.status(), 200u);
  EXPECT_EQ(again.json().at("hold_id"), first.json().at("hold_id"));
  EXPECT_EQ(holds_of(c, "acct"), 1u);
}

TEST_F(ClientTest, AConnectionClosedByTheServerIsReplacedWithoutCountingAnAttempt) {
  client::Client c = client_for(server_.url());
  ASSERT_TRUE(c.healthz().ok());
  server_.restart();  // graceful stop closes the idle kept-alive connection
  auto r = c.get_account("acct");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.attempts(), 1);
}

TEST_F(ClientTest, InsufficientCreditsIsAskedOnceMoreAtOnceThenReported) {
  client::Client c = client_for(server_.url());
  const auto started = Clock::now();
  auto r = c.reserve({"acct", 11, "too-much", std::nullopt, std::nullopt});
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "insufficient_credits");
  EXPECT_EQ(r.problem().available, 10);
  EXPECT_EQ(r.problem().requested, 11);
  EXPECT_EQ(r.attempts(), 2);
  EXPECT_LT(Clock::now() - started, milliseconds(1000));  // no back-off
  EXPECT_EQ(r.describe(),
            "insufficient_credits: Not enough credits: 10 available, 11 needed. (available 10, requested 11)");

  client::Options once = fast_options(server_.url(), server_.admin_key());
  once.retry.retry_insufficient_credits_once = false;
  client::Client c2(once);
  EXPECT_EQ(c2.reserve({"acct", 11, "too-much", std::nullopt, std::nullopt}).attempts(), 1);
  // Other calls are never asked again on a 409.
  EXPECT_EQ(c.debit("acct", 11, "d-1", "x").attempts(), 1);
}

TEST_F(ClientTest, Answer503IsRetriedWithTheSameBodyButNotForCreateKey) {
  FaultProxy proxy(server_.port());
  client::Client c = client_for(proxy.url());
  proxy.inject(FaultProxy::Fault::answer_503);
  auto r = c.credit("acct", 5, "buy-503");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.attempts(), 2);
  auto requests = proxy.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(body_of(requests[0]), body_of(requests[1]));

  proxy.inject(FaultProxy::Fault::answer_503);
  auto key = c.create_key("acct");  // not idempotent: the 503 is reported, not repeated
  ASSERT_TRUE(key.is_problem()) << key.describe();
  EXPECT_EQ(key.status(), 503u);
  EXPECT_EQ(key.problem().code, "unavailable");
  EXPECT_EQ(key.attempts(), 1);

  for (int i = 0; i < 4; ++i) proxy.inject(FaultProxy::Fault::answer_503);
  auto gave_up = c.get_account("acct");
  ASSERT_TRUE(gave_up.is_problem()) << gave_up.describe();
  EXPECT_EQ(gave_up.status(), 503u);
  EXPECT_EQ(gave_up.attempts(), 4);
}

// call_raw sends the body's very bytes (a payment provider's signature covers them) and the given
// header fields, the same on every attempt; a field that would split the request sends nothing.
TEST_F(ClientTest, CallRawSendsTheBodyByteForByteWithItsHeadersOnEveryAttempt) {
  FaultProxy proxy(server_.port());
  client::Client c = client_for(proxy.url());
  const std::string raw = "{\"amount\": 3,   \"reference\":\"raw-1\"}";
  proxy.inject(FaultProxy::Fault::answer_503);
  auto r = c.call_raw("POST", "/v1/accounts/acct/credits", raw, {{"X-Signed", "t=1,v1=ab"}});
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.attempts(), 2);
  EXPECT_EQ(r.json().at("account").at("available"), 13);
  auto requests = proxy.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const auto& request : requests) {
    EXPECT_EQ(body_of(request), raw);
    EXPECT_NE(request.find("\r\nX-Signed: t=1,v1=ab\r\n"), std::string::npos) << request;
    EXPECT_NE(request.find("\r\nContent-Type: application/json\r\n"), std::string::npos) << request;
  }
  auto refused = c.call_raw("POST", "/v1/accounts/acct/credits", raw, {{"X-Signed", "a\r\nX-Injected: 1"}});
  ASSERT_TRUE(refused.is_transport_error());
  EXPECT_EQ(refused.transport_error().failure, client::TransportFailure::invalid_url);
  EXPECT_EQ(c.call_raw("POST", "/v1/accounts/acct/credits", raw, {{"Bad:Name", "x"}}).transport_error().failure,
            client::TransportFailure::invalid_url);
  EXPECT_EQ(proxy.requests().size(), 2u) << "nothing more was sent";
}

TEST_F(ClientTest, AServerThatNeverAnswersTimesOutAfterBoundedAttempts) {
  FaultProxy proxy(server_.port());
  for (int i = 0; i < 3; ++i) proxy.inject(FaultProxy::Fault::hang);
  client::Options o = fast_options(proxy.url(), server_.admin_key());
  o.request_timeout = milliseconds(200);
  o.retry.attempts_max = 3;
  client::Client c(o);
  const auto started = Clock::now();
  auto r = c.commit("hold_1_x");
  const auto took = Clock::now() - started;
  ASSERT_TRUE(r.is_transport_error()) << r.describe();
  EXPECT_EQ(r.transport_error().failure, client::TransportFailure::timeout);
  EXPECT_EQ(r.attempts(), 3);
  EXPECT_GE(took, milliseconds(600));
  EXPECT_LT(took, milliseconds(3000));
  EXPECT_EQ(proxy.connections_accepted(), 3);  // each time-out closed its connection

  // A create_key that may have reached the server is not sent again.
  proxy.inject(FaultProxy::Fault::hang);
  auto key = c.create_key("acct");
  ASSERT_TRUE(key.is_transport_error());
  EXPECT_EQ(key.attempts(), 1);
}

// A balancer whose upstreams restart (docs/reference/retries.md): a reserve with a request_id is
// sent again through a lost answer, 502, 504 and 503 with the same body, and reserves once.
TEST_F(ClientTest, ReserveRidesOutABalancersRestartAndReservesOnce) {
  FaultProxy proxy(server_.port());
  for (auto fault : {FaultProxy::Fault::drop_answer, FaultProxy::Fault::answer_502, FaultProxy::Fault::answer_504,
                     FaultProxy::Fault::answer_503}) {
    proxy.inject(fault);
  }
  client::Options o = fast_options(proxy.url(), server_.admin_key());
  o.retry.attempts_max = 10;  // the budget (10 s) bounds it
  client::Client c(o);
  auto r = c.reserve({"acct", 3, "click-1", std::nullopt, std::nullopt});
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.attempts(), 5);
  EXPECT_EQ(r.status(), 200u) << "the first attempt (its answer lost) made the hold";
  const auto requests = proxy.requests();
  ASSERT_EQ(requests.size(), 5u);
  for (const auto& request : requests) EXPECT_EQ(body_of(request), body_of(requests[0]));
  EXPECT_EQ(holds_of(c, "acct"), 1u);
  auto account = c.get_account("acct");
  ASSERT_TRUE(account.ok());
  EXPECT_EQ(account.json().at("available"), 7);
  EXPECT_EQ(account.json().at("reserved"), 3);
}

// extend carries no id: a 502 or a lost answer may have reached the server, so it is not resent.
TEST_F(ClientTest, ExtendIsNotResentOnceItMayHaveReachedTheServer) {
  client::Client direct = client_for(server_.url());
  auto hold = direct.reserve({"acct", 1, "ext-1", 60000, std::nullopt});
  ASSERT_TRUE(hold.ok()) << hold.describe();
  const std::string hold_id(hold.json().at("hold_id").as_string());
  FaultProxy proxy(server_.port());
  client::Client c = client_for(proxy.url());
  proxy.inject(FaultProxy::Fault::answer_502);
  auto refused = c.extend(hold_id, 600000);
  ASSERT_TRUE(refused.is_problem()) << refused.describe();
  EXPECT_EQ(refused.status(), 502u);
  EXPECT_EQ(refused.problem().code, "http_502");
  EXPECT_EQ(refused.attempts(), 1);
  proxy.inject(FaultProxy::Fault::drop_answer);
  auto lost = c.extend(hold_id, 600000);
  ASSERT_TRUE(lost.is_transport_error()) << lost.describe();
  EXPECT_EQ(lost.attempts(), 1);
  EXPECT_EQ(proxy.requests().size(), 2u);
}

// The budget, not a count of attempts, bounds the retries; set_retry changes it for later calls.
TEST_F(ClientTest, TheRetryBudgetBoundsACallAndCanBeSetPerCall) {
  FaultProxy proxy(server_.port());
  for (int i = 0; i < 100; ++i) proxy.inject(FaultProxy::Fault::answer_502);
  client::Options o = fast_options(proxy.url(), server_.admin_key());
  o.retry.attempts_max = 100;
  o.retry.budget = milliseconds(800);
  o.retry.backoff_initial = milliseconds(40);
  o.retry.backoff_max = milliseconds(160);
  client::Client c(o);
  const auto started = Clock::now();
  auto r = c.get_account("acct");
  const auto took = Clock::now() - started;
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "http_502");
  EXPECT_GT(r.attempts(), 3);
  EXPECT_LT(r.attempts(), 100);
  EXPECT_GE(took, milliseconds(400));
  EXPECT_LT(took, milliseconds(800 + 1000));  // no wait ends after the budget; then one attempt

  client::RetryPolicy none = o.retry;
  none.budget = milliseconds(0);
  ASSERT_TRUE(c.set_retry(none));
  EXPECT_EQ(c.get_account("acct").attempts(), 1);
  none.attempts_max = 0;
  EXPECT_FALSE(c.set_retry(none));
  EXPECT_EQ(c.options().retry.attempts_max, 100);
  EXPECT_EQ(client::RetryPolicy{}.budget, milliseconds(10000));
}

TEST(ClientRetry, NothingListeningGivesUpAfterAttemptsMax) {
  client::Options o = fast_options("http://127.0.0.1:" + std::to_string(testing::unused_port()), "k");
  client::Client c(o);
  const auto started = Clock::now();
  auto r = c.create_key("acct");  // even create_key: a refused connect certainly sent nothing
  ASSERT_TRUE(r.is_transport_error());
  EXPECT_EQ(r.transport_error().failure, client::TransportFailure::connect);
  EXPECT_EQ(r.attempts(), 4);
  EXPECT_LT(Clock::now() - started, milliseconds(2000));
}


// Coordination calls (issue 11) through a proxy that loses the first answer: the calls for which
// a second send does what the first did are resent (and end as if sent once); begin_idempotency and
// check_ratelimit are not (the lost attempt acted: a resent begin would meet its own claim, a
// resent check would count twice). Each dropped call uses a fresh client: the stale-connection
// resend (a kept-alive connection closed before any answer) is a different rule.
TEST(ClientRetry, CoordinationCallsAreResentOnlyWhenASecondSendDoesWhatTheFirstDid) {
  testing::TempDir dir;
  const std::string config = dir.file("tollgate.toml");
  std::ofstream(config) << "[ratelimits.login]\nlimit = 5\nperiod_ms = 60000\nstore = \"shared\"\n";
  testing::ServerOptions options;
  options.extra_args = {"--config", config};
  ServerProcess server(options);
  FaultProxy proxy(server.port());
  client::Client direct(fast_options(server.url(), server.admin_key()));
  const auto through_proxy = [&] { return client::Client(fast_options(proxy.url(), server.admin_key())); };
  const auto dropped = [&](auto call) {
    proxy.inject(FaultProxy::Fault::drop_answer);
    const std::size_t before = proxy.requests().size();
    client::Client c = through_proxy();
    client::Response r = call(c);
    return std::make_pair(std::move(r), proxy.requests().size() - before);
  };

  // begin: not resent; the lost attempt's claim is there (a resend would have met it: in_progress).
  auto [begun, begin_sends] = dropped([](client::Client& c) { return c.begin_idempotency("charge-1", "fp", 60'000); });
  ASSERT_TRUE(begun.is_transport_error()) << begun.describe();
  EXPECT_EQ(begun.attempts(), 1);
  EXPECT_EQ(begin_sends, 1u);
  const client::Response again = direct.begin_idempotency("charge-1", "fp", 60'000);
  ASSERT_TRUE(again.is_problem()) << again.describe();
  EXPECT_EQ(again.problem().code, "in_progress");

  // finish: resent; the second send answers the finished key.
  auto [finished, finish_sends] =
      dropped([](client::Client& c) { return c.finish_idempotency("charge-1", "fp", json::value{{"charge", "ch_1"}}); });
  ASSERT_TRUE(finished.ok()) << finished.describe();
  EXPECT_EQ(finished.attempts(), 2);
  EXPECT_EQ(finish_sends, 2u);
  EXPECT_EQ(finished.json().at("state"), "finished");

  // check: not resent; the lost attempt counted once (5 - 1 lost - 1 now = 3 remaining).
  auto [checked, check_sends] = dropped([](client::Client& c) { return c.check_ratelimit("login", "u1"); });
  ASSERT_TRUE(checked.is_transport_error()) << checked.describe();
  EXPECT_EQ(checked.attempts(), 1);
  EXPECT_EQ(check_sends, 1u);
  const client::Response counted = direct.check_ratelimit("login", "u1");
  ASSERT_TRUE(counted.ok()) << counted.describe();
  EXPECT_EQ(counted.json().at("remaining"), 3);

  // acquire and renew: resent; the same owner again keeps the fence.
  auto [acquired, acquire_sends] = dropped([](client::Client& c) { return c.acquire_lock("nightly", "w1", 60'000); });
  ASSERT_TRUE(acquired.ok()) << acquired.describe();
  EXPECT_EQ(acquired.attempts(), 2);
  EXPECT_EQ(acquire_sends, 2u);
  const std::optional<client::LockHolder> holder = client::LockHolder::from(acquired);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->fence, 1);
  auto [renewed, renew_sends] = dropped([&](client::Client& c) { return c.renew_lock(*holder, 60'000); });
  ASSERT_TRUE(renewed.ok()) << renewed.describe();
  EXPECT_EQ(renewed.attempts(), 2);
  EXPECT_EQ(renew_sends, 2u);
  EXPECT_EQ(renewed.json().at("fence"), 1);

  // release: resent, and the second send reports lock_lost — the first one released it (client.h).
  auto [released, release_sends] = dropped([&](client::Client& c) { return c.release_lock(*holder); });
  ASSERT_TRUE(released.is_problem()) << released.describe();
  EXPECT_EQ(released.problem().code, "lock_lost");
  EXPECT_EQ(released.attempts(), 2);
  EXPECT_EQ(release_sends, 2u);
  const client::Response lock = direct.get_lock("nightly");
  ASSERT_TRUE(lock.ok()) << lock.describe();
  EXPECT_EQ(lock.json().at("held"), false);
  EXPECT_TRUE(lock.json().at("owner").is_null());
}

}  // namespace
}  // namespace tollgate
