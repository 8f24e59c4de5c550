// `tollgate lock|idem|ratelimit …` and the typed client's coordination calls (issue 11), against a
// real server process whose configuration names two rate-limit policies: `login` (shared: 3 per
// minute, in the database) and `quick` (local: 2 per minute, in the instance's memory). Each CLI
// command runs as a child process; the tests check exit codes, output and what the server then says.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/backends.h"
#include "support/cli_output.h"
#include "support/server_process.h"
#include "tollgate/client.h"

namespace tollgate {
namespace {

namespace json = boost::json;
using testing::ProcessResult;
using testing::describe;
using testing::one_document;
using testing::ServerOptions;
using testing::ServerProcess;
using testing::run_tollgate;
using std::chrono::milliseconds;



// The number after `label` in `text` ("retry_after_ms 19931" → 19931), or -1.
std::int64_t number_after(const std::string& text, const std::string& label) {
  const std::size_t at = text.find(label);
  if (at == std::string::npos) return -1;
  std::size_t i = at + label.size();
  std::int64_t n = 0;
  bool any = false;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    n = n * 10 + (text[i] - '0');
    any = true;
  }
  return any ? n : -1;
}

constexpr int kLockHeld = 8, kLockLost = 9, kLockCancelled = 10, kReplayed = 11, kInProgress = 12,
              kRateLimited = 13;

class CoordCliTest : public ::testing::Test {
 protected:
  CoordCliTest() {
    const std::string path = dir_.file("tollgate.toml");
    std::ofstream(path) << "[ratelimits.login]\nlimit = 3\nperiod_ms = 60000\nstore = \"shared\"\n"
                        << "[ratelimits.quick]\nlimit = 2\nperiod_ms = 60000\nstore = \"local\"\n";
    ServerOptions options;
    options.extra_args = {"--config", path};
    server_ = std::make_unique<ServerProcess>(options);
  }

  ProcessResult cli(std::vector<std::string> args) {
    args.insert(args.end(), {"--url", server_->url(), "--key", server_->admin_key()});
    return run_tollgate(args);
  }

  json::value lock(const std::string& key) {
    const ProcessResult r = cli({"lock", "show", key, "--json"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return one_document(r);
  }

  client::Client admin_client() {
    client::Options o;
    o.base_url = server_->url();
    o.key = server_->admin_key();
    o.retry.attempts_max = 1;
    return client::Client(o);
  }

  testing::TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(CoordCliTest, LockSessionRefusesASecondOwnerRenewsWithTheFenceAndStopsACancelledHolder) {
  ProcessResult r = cli({"lock", "acquire", "nightly", "--owner", "w1", "--ttl-ms", "60000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value taken = one_document(r);
  ASSERT_TRUE(taken.is_object()) << r.out;
  EXPECT_EQ(taken.at("owner"), "w1");
  EXPECT_EQ(taken.at("held"), true);
  const std::int64_t fence = taken.at("fence").as_int64();
  EXPECT_GE(fence, 1);

  // Another owner: exit 8, the holder's lease end named; with --json the problem document.
  r = cli({"lock", "acquire", "nightly", "--owner", "w2", "--ttl-ms", "60000"});
  EXPECT_EQ(r.exit_code, kLockHeld) << describe(r);
  EXPECT_NE(r.err.find("lock_held"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(expires_at " + std::string(taken.at("expires_at").as_string()) + ")"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  r = cli({"lock", "acquire", "nightly", "--owner", "w2", "--ttl-ms", "60000", "--json"});
  EXPECT_EQ(r.exit_code, kLockHeld) << describe(r);
  const json::value held = one_document(r);
  EXPECT_EQ(held.at("code"), "lock_held");
  EXPECT_EQ(held.at("status"), 409);
  EXPECT_EQ(held.at("expires_at"), taken.at("expires_at"));

  // The same owner again: the same fence.
  r = cli({"lock", "acquire", "nightly", "--owner", "w1", "--ttl-ms", "60000"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("lock nightly held by w1: fence " + std::to_string(fence)), std::string::npos) << r.out;

  // Renew with the holder's fence; another fence is not the holder (exit 9), and changes nothing.
  r = cli({"lock", "renew", "nightly", "--owner", "w1", "--fence", std::to_string(fence), "--ttl-ms", "90000",
           "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value renewed = one_document(r);
  EXPECT_EQ(renewed.at("fence"), fence);
  EXPECT_GT(std::string(renewed.at("expires_at").as_string()), std::string(taken.at("expires_at").as_string()))
      << "RFC 3339 UTC times sort as text";
  r = cli({"lock", "renew", "nightly", "--owner", "w1", "--fence", std::to_string(fence + 1), "--ttl-ms", "60000"});
  EXPECT_EQ(r.exit_code, kLockLost) << describe(r);
  EXPECT_NE(r.err.find("lock_lost"), std::string::npos) << r.err;
  EXPECT_EQ(lock("nightly").at("expires_at"), renewed.at("expires_at"));

  // Cancel: the holder's next renew answers lock_cancelled (exit 10) and frees the lock.
  r = cli({"lock", "cancel", "nightly"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("lock nightly: its holder w1 is asked to stop"), std::string::npos) << r.out;
  EXPECT_EQ(lock("nightly").at("cancelled"), true);
  r = cli({"lock", "renew", "nightly", "--owner", "w1", "--fence", std::to_string(fence), "--ttl-ms", "60000"});
  EXPECT_EQ(r.exit_code, kLockCancelled) << describe(r);
  EXPECT_NE(r.err.find("lock_cancelled"), std::string::npos) << r.err;
  json::value now = lock("nightly");
  EXPECT_EQ(now.at("held"), false);
  EXPECT_TRUE(now.at("owner").is_null()) << now;
  EXPECT_EQ(now.at("fence"), fence);  // kept: the next holder gets a higher one
  r = cli({"lock", "show", "nightly"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("lock nightly is free (last fence " + std::to_string(fence) + ")"), std::string::npos) << r.out;
  r = cli({"lock", "cancel", "nightly"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("lock nightly is not held; nothing to cancel"), std::string::npos) << r.out;

  // A new holder gets a higher fence; the old one cannot release it; the new one can.
  r = cli({"lock", "acquire", "nightly", "--owner", "w2", "--ttl-ms", "60000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("fence"), fence + 1);
  r = cli({"lock", "release", "nightly", "--owner", "w1", "--fence", std::to_string(fence)});
  EXPECT_EQ(r.exit_code, kLockLost) << describe(r);
  EXPECT_EQ(lock("nightly").at("owner"), "w2");
  r = cli({"lock", "release", "nightly", "--owner", "w2", "--fence", std::to_string(fence + 1)});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("lock nightly released by w2"), std::string::npos) << r.out;
  EXPECT_EQ(lock("nightly").at("held"), false);

  r = cli({"lock", "show", "never-used"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
}

TEST_F(CoordCliTest, IdempotencySessionStartsOnceThenReplaysTheStoredResponse) {
  ProcessResult r = cli({"idem", "begin", "upgrade-42", "--fingerprint", "plan=pro", "--ttl-ms", "60000"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("idempotency key upgrade-42 started: go ahead"), std::string::npos) << r.out;

  // Begun again while the claim is live: exit 12, nothing to do yet.
  r = cli({"idem", "begin", "upgrade-42", "--fingerprint", "plan=pro", "--ttl-ms", "60000"});
  EXPECT_EQ(r.exit_code, kInProgress) << describe(r);
  EXPECT_NE(r.err.find("in_progress"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(expires_at "), std::string::npos) << r.err;

  r = cli({"idem", "finish", "upgrade-42", "--fingerprint", "plan=pro", "--response", R"({"charge":"ch_1","amount":5})"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("idempotency key upgrade-42 finished"), std::string::npos) << r.out;

  // Begun after it finished: exit 11 (not 0: a script must not do it again), the response printed.
  r = cli({"idem", "begin", "upgrade-42", "--fingerprint", "plan=pro", "--ttl-ms", "60000"});
  EXPECT_EQ(r.exit_code, kReplayed) << describe(r);
  EXPECT_NE(r.out.find(R"({"charge":"ch_1","amount":5})"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("do not do it again"), std::string::npos) << r.err;
  r = cli({"idem", "begin", "upgrade-42", "--fingerprint", "plan=pro", "--ttl-ms", "60000", "--json"});
  EXPECT_EQ(r.exit_code, kReplayed) << describe(r);
  const json::value replay = one_document(r);
  EXPECT_EQ(replay.at("state"), "finished");
  EXPECT_EQ(replay.at("response"), (json::value{{"charge", "ch_1"}, {"amount", 5}}));

  // Another fingerprint under the same key: a different request (exit 1, 422).
  r = cli({"idem", "begin", "upgrade-42", "--fingerprint", "plan=team", "--ttl-ms", "60000"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("idempotency_mismatch"), std::string::npos) << r.err;
  // A finished key cannot be abandoned.
  r = cli({"idem", "abandon", "upgrade-42", "--fingerprint", "plan=pro"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("conflict"), std::string::npos) << r.err;

  // Abandoned after a failure that did nothing: it can be begun again at once.
  r = cli({"idem", "begin", "upgrade-43", "--fingerprint", "plan=pro", "--ttl-ms", "60000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("state"), "started");
  r = cli({"idem", "abandon", "upgrade-43", "--fingerprint", "plan=pro"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("idempotency key upgrade-43 abandoned"), std::string::npos) << r.out;
  r = cli({"idem", "begin", "upgrade-43", "--fingerprint", "plan=pro", "--ttl-ms", "60000"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);

  r = cli({"idem", "finish", "never-begun", "--fingerprint", "x", "--response", "1"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
}

TEST_F(CoordCliTest, RateLimitCheckIsRefusedWithRetryAfterUntilReset) {
  for (int remaining : {2, 1, 0}) {
    const ProcessResult r = cli({"ratelimit", "check", "login", "ann@example.com", "--json"});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    const json::value d = one_document(r);
    EXPECT_EQ(d.at("allowed"), true);
    EXPECT_EQ(d.at("remaining"), remaining);
    EXPECT_EQ(d.at("limit"), 3);
  }
  // Refused: exit 13, retry_after_ms on stderr (and in the document with --json).
  ProcessResult r = cli({"ratelimit", "check", "login", "ann@example.com"});
  EXPECT_EQ(r.exit_code, kRateLimited) << describe(r);
  EXPECT_NE(r.err.find("rate_limited"), std::string::npos) << r.err;
  const std::int64_t retry_after = number_after(r.err, "(retry_after_ms ");
  EXPECT_GT(retry_after, 0) << r.err;
  EXPECT_LE(retry_after, 20'000) << r.err;  // one unit of 3 per minute
  r = cli({"ratelimit", "check", "login", "ann@example.com", "--json"});
  EXPECT_EQ(r.exit_code, kRateLimited) << describe(r);
  const json::value refused = one_document(r);
  EXPECT_EQ(refused.at("code"), "rate_limited");
  EXPECT_EQ(refused.at("status"), 429);
  EXPECT_GT(refused.at("retry_after_ms").as_int64(), 0);

  // Another key has its own budget.
  r = cli({"ratelimit", "check", "login", "bob@example.com"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("allowed: 2 remaining"), std::string::npos) << r.out;

  r = cli({"ratelimit", "reset", "login", "ann@example.com"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("rate limit login: ann@example.com has a full budget again"), std::string::npos) << r.out;
  r = cli({"ratelimit", "check", "login", "ann@example.com", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("remaining"), 2);

  // A local policy, with --cost; a cost above its limit is the server's refusal (exit 1).
  r = cli({"ratelimit", "check", "quick", "k1", "--cost", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("remaining"), 0);
  r = cli({"ratelimit", "check", "quick", "k1"});
  EXPECT_EQ(r.exit_code, kRateLimited) << describe(r);
  r = cli({"ratelimit", "check", "quick", "k2", "--cost", "3"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("invalid_request"), std::string::npos) << r.err;

  r = cli({"ratelimit", "check", "nosuch", "k1"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
}

TEST_F(CoordCliTest, BadInputIsRefusedBeforeAnythingIsSentAndChangesNothing) {
  const std::string too_long_fingerprint(257, 'f');
  const std::string too_large_response = "\"" + std::string(32 * 1024, 'x') + "\"";
  struct Case {
    std::vector<std::string> args;
    std::string names;  // what the message must name
  };
  const std::vector<Case> cases = {
      {{"lock", "acquire", "bad", "--owner", "w1", "--ttl-ms", "0"}, "--ttl-ms"},
      {{"lock", "acquire", "bad", "--owner", "w1", "--ttl-ms", "86400001"}, "--ttl-ms"},
      {{"lock", "acquire", "bad", "--owner", "w1", "--ttl-ms", "1.5"}, "--ttl-ms"},
      {{"lock", "acquire", "bad", "--ttl-ms", "1000"}, "--owner"},
      {{"lock", "acquire", "bad", "--owner", "has space", "--ttl-ms", "1000"}, "--owner"},
      {{"lock", "acquire", "a/b", "--owner", "w1", "--ttl-ms", "1000"}, "KEY"},
      {{"lock", "renew", "bad", "--owner", "w1"}, "--ttl-ms"},
      {{"lock", "renew", "bad", "--owner", "w1", "--ttl-ms", "1000", "--fence", "0"}, "--fence"},
      {{"lock", "release", "bad", "--owner", "w1", "--fence", "-1"}, "--fence"},
      {{"lock", "release", "bad", "--owner", "w1", "--fence", "x"}, "--fence"},
      {{"lock", "show"}, "KEY"},
      {{"lock"}, "A subcommand is required"},  // with --url/--key after it: CLI11's message
      {{"idem", "begin", "bad-k", "--fingerprint", "", "--ttl-ms", "1000"}, "--fingerprint"},
      {{"idem", "begin", "bad-k", "--fingerprint", too_long_fingerprint, "--ttl-ms", "1000"}, "--fingerprint"},
      {{"idem", "begin", "bad-k", "--fingerprint", "fp"}, "--ttl-ms"},
      {{"idem", "begin", "bad-k", "--fingerprint", "fp", "--ttl-ms", "86400001"}, "--ttl-ms"},
      {{"idem", "finish", "bad-k", "--fingerprint", "fp", "--response", "not json"}, "--response"},
      {{"idem", "finish", "bad-k", "--fingerprint", "fp", "--response", "null"}, "--response"},
      {{"idem", "finish", "bad-k", "--fingerprint", "fp", "--response", too_large_response}, "--response"},
      {{"idem", "finish", "bad-k", "--fingerprint", "fp"}, "--response"},
      {{"idem", "abandon", "bad-k"}, "--fingerprint"},
      {{"ratelimit", "check", "login"}, "KEY"},
      {{"ratelimit", "check", "login", "bad-u", "--cost", "0"}, "--cost"},
      {{"ratelimit", "check", "login", "bad-u", "--cost", "1000000001"}, "--cost"},
      {{"ratelimit", "check", "bad policy", "bad-u"}, "POLICY"},
      {{"ratelimit", "reset", "login"}, "KEY"},
  };
  for (const Case& c : cases) {
    const ProcessResult r = cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << (c.args.size() > 1 ? c.args[1] : "") << "\n" << describe(r);
    EXPECT_NE(r.err.find(c.names), std::string::npos) << "the message must name " << c.names << "\n" << r.err;
    EXPECT_EQ(r.out, "");
  }
  ProcessResult r = cli({"idem", "finish", "bad-k", "--fingerprint", "fp", "--response", "{\"a\":"});
  EXPECT_NE(r.err.find("--response: must be JSON"), std::string::npos) << r.err;

  // Nothing reached the server: no lock, no key, and the budget is whole.
  r = cli({"lock", "show", "bad"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
  r = cli({"idem", "begin", "bad-k", "--fingerprint", "fp", "--ttl-ms", "1000"});
  EXPECT_EQ(r.exit_code, 0) << describe(r);  // started: not in progress, not finished
  r = cli({"ratelimit", "check", "login", "bad-u", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("remaining"), 2);
}

// --- the typed client -----------------------------------------------------------------------------

// LockHolder::from carries the fence: after a lease ran out and the same owner NAME took the lock
// again (a restarted worker), the stale holder can neither renew nor release the new lease.
TEST_F(CoordCliTest, ClientLockCallsCarryTheFenceSoAStaleHolderCannotTouchItsSuccessor) {
  client::Client c = admin_client();
  const client::Response first = c.acquire_lock("report", "worker", 200);
  ASSERT_TRUE(first.ok()) << first.describe();
  const std::optional<client::LockHolder> stale = client::LockHolder::from(first);
  ASSERT_TRUE(stale.has_value());
  EXPECT_EQ(stale->key, "report");
  EXPECT_EQ(stale->owner, "worker");
  ASSERT_TRUE(stale->fence.has_value());

  std::this_thread::sleep_for(milliseconds(400));  // the 200-ms lease runs out
  const client::Response second = c.acquire_lock("report", "worker", 60'000);
  ASSERT_TRUE(second.ok()) << second.describe();
  const std::optional<client::LockHolder> current = client::LockHolder::from(second);
  ASSERT_TRUE(current.has_value());
  EXPECT_EQ(current->fence, *stale->fence + 1);

  client::Response r = c.renew_lock(*stale, 60'000);
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().status, 409u);
  EXPECT_EQ(r.problem().code, "lock_lost");
  r = c.release_lock(*stale);
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "lock_lost");
  // Without the fence the owner name alone matches: that is what the fence is for.
  client::LockHolder by_name{"report", "worker", std::nullopt};
  r = c.renew_lock(by_name, 60'000);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("fence"), *current->fence);

  r = c.renew_lock(*current, 60'000);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(client::LockHolder::from(r)->fence, current->fence);

  // Another owner: lock_held with the lease's end.
  r = c.acquire_lock("report", "other", 1000);
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "lock_held");
  ASSERT_TRUE(r.problem().expires_at.has_value());
  EXPECT_FALSE(client::LockHolder::from(r).has_value());

  r = c.cancel_lock("report");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("cancelled"), true);
  r = c.renew_lock(*current, 60'000);
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "lock_cancelled");
  r = c.get_lock("report");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("held"), false);
  EXPECT_FALSE(client::LockHolder::from(r).has_value()) << "a free lock names no holder";

  r = c.acquire_lock("report", "other", 1000);
  ASSERT_TRUE(r.ok()) << r.describe();
  r = c.release_lock(*client::LockHolder::from(r));
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("held"), false);

  r = c.get_lock("never-used");
  ASSERT_TRUE(r.is_problem());
  EXPECT_EQ(r.problem().status, 404u);
  r = c.cancel_lock("never-used");
  ASSERT_TRUE(r.is_problem());
  EXPECT_EQ(r.problem().status, 404u);
}

TEST_F(CoordCliTest, ClientIdempotencyCallsStartFinishReplayAndAbandon) {
  client::Client c = admin_client();
  client::Response r = c.begin_idempotency("charge-7", "sha:abc", 60'000);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.status(), 201u);
  EXPECT_EQ(r.json().at("state"), "started");

  r = c.begin_idempotency("charge-7", "sha:abc", 60'000);
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().status, 409u);
  EXPECT_EQ(r.problem().code, "in_progress");
  ASSERT_TRUE(r.problem().expires_at.has_value());
  EXPECT_NE(r.describe().find("(expires_at " + *r.problem().expires_at + ")"), std::string::npos) << r.describe();

  const json::value stored{{"charge_id", "ch_9"}, {"ok", true}};
  r = c.finish_idempotency("charge-7", "sha:abc", stored);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("state"), "finished");
  // Finished again with something else: the first response stays.
  r = c.finish_idempotency("charge-7", "sha:abc", json::value("other"));
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("response"), stored);

  r = c.begin_idempotency("charge-7", "sha:abc", 60'000);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.status(), 200u);
  EXPECT_EQ(r.json().at("state"), "finished");
  EXPECT_EQ(r.json().at("response"), stored);

  r = c.begin_idempotency("charge-7", "sha:other", 60'000);
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().status, 422u);
  EXPECT_EQ(r.problem().code, "idempotency_mismatch");
  r = c.abandon_idempotency("charge-7", "sha:abc");
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "conflict");

  r = c.begin_idempotency("charge-8", "sha:def", 60'000);
  ASSERT_TRUE(r.ok()) << r.describe();
  r = c.abandon_idempotency("charge-8", "sha:def");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("state"), "abandoned");
  r = c.begin_idempotency("charge-8", "sha:def", 60'000);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.status(), 201u);
  EXPECT_EQ(r.json().at("attempt"), 2);  // a new claim after the abandon
  // The first attempt's claim was given back: naming it finishes nothing; the current one finishes.
  r = c.finish_idempotency("charge-8", "sha:def", json::value(1), 1);
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().code, "conflict");
  r = c.finish_idempotency("charge-8", "sha:def", json::value(2), 2);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("response"), 2);

  r = c.finish_idempotency("never-begun", "x", json::value(1));
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().status, 404u);
}

// A refused check exposes the document's exact retry_after_ms (not the header's whole seconds).
TEST_F(CoordCliTest, ClientRateLimitCallsExposeRetryAfterAndReset) {
  client::Client c = admin_client();
  client::Response r = c.check_ratelimit("login", "ip:10.0.0.1");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("allowed"), true);
  EXPECT_EQ(r.json().at("remaining"), 2);
  r = c.check_ratelimit("login", "ip:10.0.0.1", 2);
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("remaining"), 0);

  r = c.check_ratelimit("login", "ip:10.0.0.1");
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().status, 429u);
  EXPECT_EQ(r.problem().code, "rate_limited");
  ASSERT_TRUE(r.problem().retry_after_ms.has_value());
  EXPECT_GT(*r.problem().retry_after_ms, 0);
  EXPECT_LE(*r.problem().retry_after_ms, 20'000);
  EXPECT_EQ(*r.problem().retry_after_ms, r.problem().body.at("retry_after_ms").as_int64());
  EXPECT_NE(r.describe().find("(retry_after_ms " + std::to_string(*r.problem().retry_after_ms) + ")"),
            std::string::npos)
      << r.describe();

  r = c.reset_ratelimit("login", "ip:10.0.0.1");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("reset"), true);
  r = c.check_ratelimit("login", "ip:10.0.0.1");
  ASSERT_TRUE(r.ok()) << r.describe();
  EXPECT_EQ(r.json().at("remaining"), 2);

  r = c.check_ratelimit("nosuch", "ip:10.0.0.1");
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().status, 404u);
  r = c.reset_ratelimit("nosuch", "ip:10.0.0.1");
  ASSERT_TRUE(r.is_problem()) << r.describe();
  EXPECT_EQ(r.problem().status, 404u);
}

}  // namespace
}  // namespace tollgate
