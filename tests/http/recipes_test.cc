// The recipes of examples/ (issue 11) run against a real `tollgate serve` whose configuration has the
// two login policies they need. Each script checks its own story and exits 0 only when it holds;
// this test runs each with bash (curl and jq on the PATH, as scripts/setup installs them), checks
// the exit code and the lines that tell the story, and that a script fails when the server does not
// behave as it expects (so the exit code means something).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>

#include "support/backends.h"
#include "support/cli_output.h"
#include "support/server_process.h"

namespace tollgate {
namespace {

using testing::ProcessResult;
using testing::describe;
using testing::ServerOptions;
using testing::ServerProcess;

// The configuration of docs/guides/recipes.md.
constexpr const char* kPolicies = R"([ratelimits.login_account]
limit = 5
period_ms = 15000
store = "shared"

[ratelimits.login_ip]
limit = 10
period_ms = 10000
store = "shared"
)";


ProcessResult run_recipe(const std::string& name, const std::string& url, const std::string& key) {
  const std::string script = std::string(TOLLGATE_SOURCE_DIR) + "/examples/" + name;
  return testing::run_process({"/bin/bash", script}, {{"TOLLGATE_URL", url}, {"TOLLGATE_ADMIN_KEY", key}},
                              std::chrono::seconds(120));
}

class Recipes : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const std::string path = dir_->file("tollgate.toml");
    std::ofstream(path) << kPolicies;
    ServerOptions options;
    options.extra_args = {"--config", path};
    try {
      server_ = new ServerProcess(options);
    } catch (const std::exception& e) {
      FAIL() << "the server did not start: " << e.what();
    }
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

 protected:
  void SetUp() override { ASSERT_NE(server_, nullptr) << "no server"; }
  static ProcessResult run(const std::string& name) { return run_recipe(name, server_->url(), server_->admin_key()); }
  static void expect_line(const ProcessResult& r, const std::string& text) {
    EXPECT_NE(r.out.find(text), std::string::npos) << "no \"" << text << "\" in\n" << describe(r);
  }

  static testing::TempDir* dir_;
  static ServerProcess* server_;
};

testing::TempDir* Recipes::dir_ = nullptr;
ServerProcess* Recipes::server_ = nullptr;

TEST_F(Recipes, PlanUpgradeChargesTheCardOnceAcrossADoubleClickACrashAndADecline) {
  const ProcessResult r = run("plan-upgrade.sh");
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  expect_line(r, "ok: exactly one of the two clicks charged (1)");
  expect_line(r, "still processing: try again in a moment");
  expect_line(r, "replayed: {\"status\":\"succeeded\",\"charge_id\":\"ch_1\",\"amount\":1200}");
  expect_line(r, "ok: charges for alice's upgrade (1)");
  expect_line(r, "crashed after the charge");
  expect_line(r, "ok: a retry while the crashed run's claim lasts is told to wait (3)");
  expect_line(r, "ok: charges for bob's upgrade (the processor answered its first one) (1)");
  expect_line(r, "declined: nothing charged");
  expect_line(r, "ok: charges for carol's upgrade (1)");
  expect_line(r, "ok: same key, other plan (4)");
  expect_line(r, "ok: with a lock alone, the retry charged the card a second time (2)");
  expect_line(r, "plan-upgrade: all checks passed");
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
}

TEST_F(Recipes, AssistantStreamRefusesASecondSendStopsOnCancelAndFencesOutAPausedStream) {
  const ProcessResult r = run("assistant-stream.sh");
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  expect_line(r, "busy: an answer is still streaming for bob.");
  expect_line(r, "done: 10 chunks under fence");
  expect_line(r, "ok: chunks in bob's transcript (10)");
  expect_line(r, "stopped by the user after ");
  expect_line(r, "ok: the lock is free after stop (false)");
  expect_line(r, "ok: the downstream refuses the paused stream's fence (1)");
  expect_line(r, "ok: and its renew answers (lock_lost)");
  expect_line(r, "assistant-stream: all checks passed");
  EXPECT_NE(r.err.find("downstream refused fence"), std::string::npos) << r.err;
}

TEST_F(Recipes, LoginGuardLimitsAccountsAndAddressesHonoursRetryAfterAndResets) {
  const ProcessResult r = run("login-guard.sh");
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  expect_line(r, "(0 attempts left)");
  expect_line(r, "429 too many attempts (login_account): retry after ");
  expect_line(r, "ok: from another address too: the budget is the account's (2)");
  expect_line(r, "ok: after Retry-After the right password gets in (0)");
  expect_line(r, "ok: the good login reset the account: a full budget again");
  expect_line(r, "429 too many attempts (login_ip): retry after 1 s");
  expect_line(r, "ok: every other attempt was refused (20)");
  expect_line(r, "login-guard: all checks passed");
}

// The scripts are checks: against a server that does not do what they expect, they fail.
TEST_F(Recipes, FailWhenTheServerDoesNotBehaveAsTheyExpect) {
  // A wrong admin key: every call answers 401.
  ProcessResult r = run_recipe("plan-upgrade.sh", server_->url(), "not-the-admin-key-0123456789");
  EXPECT_NE(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("FAILED"), std::string::npos) << describe(r);
  // A server without the login policies: the first check answers 404.
  ServerProcess bare;
  r = run_recipe("login-guard.sh", bare.url(), bare.admin_key());
  EXPECT_NE(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.err.find("check answered 404"), std::string::npos) << describe(r);
  // Nothing listens: the script says so and fails.
  r = run_recipe("assistant-stream.sh", "http://127.0.0.1:" + std::to_string(testing::unused_port()), "k");
  EXPECT_NE(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.err.find("cannot reach tollgate"), std::string::npos) << describe(r);
}

}  // namespace
}  // namespace tollgate
