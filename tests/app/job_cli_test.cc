// `tollgate job …` (issue 10): the CLI against a real server process whose configuration names
// three in-process fake providers — one that answers in 50–100 ms, one that takes 20 s (to cancel
// while it runs) and one that refuses every call (the job fails). Each command runs as a child
// process; the tests check exit codes, output and what the server then says.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "demo/fake_provider.h"
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



jobs::FakeProviderOptions fake_options(std::int64_t min_ms, std::int64_t max_ms, double fail_rate = 0) {
  jobs::FakeProviderOptions o;
  o.latency_min_ms = min_ms;
  o.latency_max_ms = max_ms;
  o.fail_rate = fail_rate;
  return o;
}

std::string provider_toml(const std::string& name, const jobs::FakeProvider& fake, std::int64_t expected_ms) {
  return "[providers." + name + "]\nurl = \"" + fake.base_url() + "/generate\"\nstatus_url = \"" + fake.base_url() +
         "/status/{id}\"\ntimeout_ms = " + std::to_string(3 * expected_ms) +
         "\nexpected_duration_ms = " + std::to_string(expected_ms) + "\n";
}

class JobCliTest : public ::testing::Test {
 protected:
  JobCliTest()
      : fast_(fake_options(50, 100)), slow_(fake_options(20'000, 20'000)), refusing_(fake_options(50, 50, 1.0)) {
    const std::string path = dir_.file("tollgate.toml");
    std::ofstream(path) << provider_toml("imagegen", fast_, 1000) << provider_toml("slow", slow_, 20'000)
                        << provider_toml("refusing", refusing_, 1000);
    ServerOptions options;
    options.extra_args = {"--config", path};
    server_ = std::make_unique<ServerProcess>(options);
  }

  ProcessResult cli(std::vector<std::string> args) {
    args.insert(args.end(), {"--url", server_->url(), "--key", server_->admin_key()});
    return run_tollgate(args);
  }

  void make_account(const std::string& id, std::int64_t credits) {
    ProcessResult r = cli({"account", "create", id});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
    r = cli({"account", "credit", id, std::to_string(credits), "--reference", "buy-" + id});
    ASSERT_EQ(r.exit_code, 0) << describe(r);
  }

  json::value account(const std::string& id) {
    const ProcessResult r = cli({"account", "show", id, "--json"});
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    return one_document(r);
  }

  testing::TempDir dir_;
  jobs::FakeProvider fast_;
  jobs::FakeProvider slow_;
  jobs::FakeProvider refusing_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(JobCliTest, SubmitWaitShowHistoryListSession) {
  make_account("ann", 100);

  ProcessResult r = cli({"job", "submit", "--account", "ann", "--cost", "10", "--provider", "imagegen", "--input",
                         R"({"prompt":"a cat"})", "--id", "cat-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("job cat-1 submitted: 10 reserved on ann for imagegen"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("job id"), std::string::npos) << "an id was given: none is generated\n" << r.err;

  r = cli({"job", "wait", "cat-1", "--timeout-ms", "5000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value waited = one_document(r);
  ASSERT_TRUE(waited.is_object()) << r.out;
  EXPECT_EQ(waited.at("status"), "completed");
  EXPECT_EQ(waited.at("charged"), true);
  EXPECT_EQ(waited.at("cost"), 10);
  EXPECT_EQ(waited.at("result").at("image_url"), "https://fake/cat-1.png");

  r = cli({"job", "show", "cat-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("status:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("completed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("https://fake/cat-1.png"), std::string::npos) << r.out;

  // The same id again: the same job, nothing more reserved.
  r = cli({"job", "submit", "--account", "ann", "--cost", "10", "--provider", "imagegen", "--input",
           R"({"prompt":"a cat"})", "--id", "cat-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("job cat-1 was already submitted"), std::string::npos) << r.out;
  const json::value a = account("ann");
  EXPECT_EQ(a.at("available"), 90);
  EXPECT_EQ(a.at("reserved"), 0);
  EXPECT_EQ(a.at("used"), 10);

  r = cli({"job", "history", "cat-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value history = one_document(r);
  const json::array& entries = history.at("entries").as_array();
  ASSERT_GE(entries.size(), 2u) << r.out;
  EXPECT_EQ(entries.front().at("kind"), "submitted") << r.out;
  EXPECT_EQ(entries.back().at("kind"), "completed") << r.out;
  r = cli({"job", "history", "cat-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out.rfind("AT", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("KIND"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("submitted"), std::string::npos) << r.out;

  // Without --id: an id is made and named on stderr, so that a retry can reuse it.
  r = cli({"job", "submit", "--account", "ann", "--cost", "5", "--provider", "imagegen"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const std::size_t at = r.err.find("--id cli-job-");
  ASSERT_NE(at, std::string::npos) << r.err;
  const std::string generated = r.err.substr(at + 5, r.err.find(')', at) - at - 5);
  EXPECT_EQ(generated.size(), std::string("cli-job-").size() + 16) << generated;
  EXPECT_NE(r.out.find("job " + generated + " submitted"), std::string::npos) << r.out;
  r = cli({"job", "wait", generated, "--timeout-ms", "5000"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("job " + generated + " completed"), std::string::npos) << r.out;

  // Lists: newest first, filters, paging with the cursor printed.
  r = cli({"job", "list", "--account", "ann", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const json::value page = one_document(r);
  const json::array& list = page.at("jobs").as_array();
  ASSERT_EQ(list.size(), 2u) << r.out;
  EXPECT_EQ(list[0].at("client_request_id"), json::value(generated));
  EXPECT_EQ(list[1].at("client_request_id"), "cat-1");
  EXPECT_EQ(page.at("has_more"), false);

  r = cli({"job", "list", "--status", "completed", "--limit", "1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("CLIENT_REQUEST_ID"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(generated), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("cat-1"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("there are more: --starting-after " + generated), std::string::npos) << r.err;
  r = cli({"job", "list", "--status", "completed", "--limit", "1", "--starting-after", generated});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("cat-1"), std::string::npos) << r.out;

  r = cli({"job", "list", "--status", "cancelled"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(r.out, "no jobs\n");
}

TEST_F(JobCliTest, CancelStopsARunningJobAndWaitExitCodesSayHowItEnded) {
  make_account("bob", 50);
  ProcessResult r =
      cli({"job", "submit", "--account", "bob", "--cost", "20", "--provider", "slow", "--id", "slow-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_EQ(one_document(r).at("status"), "pending");
  EXPECT_EQ(account("bob").at("reserved"), 20);

  // Not ended within --timeout-ms: exit 7, the job shown as it is.
  r = cli({"job", "wait", "slow-1", "--timeout-ms", "300"});
  EXPECT_EQ(r.exit_code, 7) << describe(r);
  EXPECT_NE(r.out.find("job slow-1 has not ended"), std::string::npos) << r.out;
  EXPECT_GE(r.duration, milliseconds(300));
  EXPECT_NE(r.err.find("after 300 ms"), std::string::npos) << r.err;

  r = cli({"job", "cancel", "slow-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("job slow-1 cancelled; its hold is released"), std::string::npos) << r.out;
  const json::value a = account("bob");
  EXPECT_EQ(a.at("available"), 50);
  EXPECT_EQ(a.at("reserved"), 0);
  EXPECT_EQ(a.at("used"), 0);

  r = cli({"job", "wait", "slow-1"});
  EXPECT_EQ(r.exit_code, 6) << describe(r);
  EXPECT_NE(r.out.find("job slow-1 cancelled"), std::string::npos) << r.out;

  // A job that already ended is not changed by a cancel.
  r = cli({"job", "submit", "--account", "bob", "--cost", "5", "--provider", "imagegen", "--id", "done-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  ASSERT_EQ(cli({"job", "wait", "done-1", "--timeout-ms", "5000"}).exit_code, 0);
  r = cli({"job", "cancel", "done-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_NE(r.out.find("job done-1 had already ended: completed; nothing changed"), std::string::npos) << r.out;
  EXPECT_EQ(account("bob").at("used"), 5);

  // A provider that refuses: the job fails, exit 5, and the hold is released.
  r = cli({"job", "submit", "--account", "bob", "--cost", "7", "--provider", "refusing", "--id", "no-1"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  r = cli({"job", "wait", "no-1", "--timeout-ms", "5000"});
  EXPECT_EQ(r.exit_code, 5) << describe(r);
  EXPECT_NE(r.err.find("job failed"), std::string::npos) << r.err;
  EXPECT_EQ(account("bob").at("available"), 45);

  r = cli({"job", "show", "nope"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("not_found"), std::string::npos) << r.err;
}

TEST_F(JobCliTest, BadInputIsRefusedAndChangesNothing) {
  make_account("cy", 10);
  const std::vector<std::vector<std::string>> usage = {
      {"job", "submit", "--account", "cy", "--cost", "1", "--provider", "imagegen", "--input", "not json"},
      {"job", "submit", "--account", "cy", "--cost", "1", "--provider", "imagegen", "--input", "{\"a\":"},
      {"job", "submit", "--account", "cy", "--cost", "0", "--provider", "imagegen"},
      {"job", "submit", "--account", "cy", "--cost", "-3", "--provider", "imagegen"},
      {"job", "submit", "--account", "cy", "--cost", "1.5", "--provider", "imagegen"},
      {"job", "submit", "--account", "cy", "--cost", "1"},  // --provider is required
      {"job", "submit", "--cost", "1", "--provider", "imagegen"},  // --account is required
      {"job", "submit", "--account", "cy", "--cost", "1", "--provider", "imagegen", "--id", "has space"},
      {"job", "wait", "x", "--timeout-ms", "-1"},
      {"job", "list", "--status", "done"},
      {"job", "show"},
      {"job"},
  };
  for (const auto& args : usage) {
    const ProcessResult r = cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << "\n" << describe(r);
    EXPECT_FALSE(r.err.empty());
  }
  ProcessResult r = cli({"job", "submit", "--account", "cy", "--cost", "1", "--provider", "imagegen", "--input", "nope"});
  EXPECT_NE(r.err.find("--input: must be JSON"), std::string::npos) << r.err;

  // Refused by the server (exit 1): an unknown provider, more than is available. No job is made.
  r = cli({"job", "submit", "--account", "cy", "--cost", "1", "--provider", "nosuch", "--id", "u-1"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("invalid_request"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nosuch"), std::string::npos) << r.err;
  r = cli({"job", "submit", "--account", "cy", "--cost", "11", "--provider", "imagegen", "--id", "u-2"});
  EXPECT_EQ(r.exit_code, 1) << describe(r);
  EXPECT_NE(r.err.find("insufficient_credits"), std::string::npos) << r.err;

  r = cli({"job", "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  EXPECT_TRUE(one_document(r).at("jobs").as_array().empty()) << r.out;
  const json::value a = account("cy");
  EXPECT_EQ(a.at("available"), 10);
  EXPECT_EQ(a.at("reserved"), 0);
  EXPECT_EQ(a.at("used"), 0);
}

// The typed client's job calls. get_job's wait_ms raises that call's request time-out, so a long poll
// longer than request_timeout is answered, not cut short.
TEST_F(JobCliTest, ClientJobCallsAndALongPollLongerThanTheRequestTimeout) {
  make_account("dee", 30);
  client::Options options;
  options.base_url = server_->url();
  options.key = server_->admin_key();
  options.request_timeout = milliseconds(300);
  options.retry.attempts_max = 1;
  client::Client c(options);

  client::SubmitJobRequest submit;
  submit.account_id = "dee";
  submit.cost = 4;
  submit.provider = "slow";
  submit.input = json::object{{"prompt", "a dog"}};
  const client::Response made = c.submit_job(submit);
  ASSERT_TRUE(made.ok()) << made.describe();
  EXPECT_EQ(made.status(), 202u);
  const std::string id(made.json().at("client_request_id").as_string());
  EXPECT_EQ(id.rfind("client-", 0), 0u) << id;  // made by the client: request_id_prefix + 16 hex digits

  const auto before = std::chrono::steady_clock::now();
  const client::Response waited = c.get_job(id, 900);
  const auto took = std::chrono::steady_clock::now() - before;
  ASSERT_TRUE(waited.ok()) << waited.describe();
  EXPECT_GE(took, milliseconds(850));
  EXPECT_NE(waited.json().at("status"), "completed");
  // The extra time was for that call only: a plain read still has 300 ms, and gets its answer.
  ASSERT_TRUE(c.get_job(id).ok());

  const client::Response cancelled = c.cancel_job(id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.describe();
  EXPECT_EQ(cancelled.json().at("status"), "cancelled");
  EXPECT_EQ(cancelled.json().at("charged"), false);

  const client::Response history = c.job_history(id);
  ASSERT_TRUE(history.ok()) << history.describe();
  EXPECT_EQ(history.json().at("entries").as_array().back().at("kind"), "cancelled") << history.json();

  client::ListJobsRequest list;
  list.account_id = "dee";
  list.status = "cancelled";
  const client::Response listed = c.list_jobs(list);
  ASSERT_TRUE(listed.ok()) << listed.describe();
  ASSERT_EQ(listed.json().at("jobs").as_array().size(), 1u) << listed.json();
  EXPECT_EQ(listed.json().at("jobs").as_array()[0].at("client_request_id"), json::value(id));

  const client::Response missing = c.get_job("no-such-job", 100);
  ASSERT_TRUE(missing.is_problem());
  EXPECT_EQ(missing.problem().status, 404u);
}

}  // namespace
}  // namespace tollgate
