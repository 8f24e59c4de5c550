// tollgate cli: `job …` — the client side of routes_jobs.cc.

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/limits.h"
#include "core/result.h"
#include "core/suggest.h"
#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {

namespace {

// `job wait`: how long each long poll asks the server to hold the read (the API's maximum).
constexpr std::int64_t kJobWaitPollMaxMs = limits::kJobWaitMsMax;

bool job_ended(std::string_view status) {
  return status == "completed" || status == "failed" || status == "cancelled";
}

// The exit code of `job wait` for a job in `status`.
int job_exit_code(std::string_view status) {
  if (status == "completed") return kExitOk;
  if (status == "failed") return kExitJobFailed;
  if (status == "cancelled") return kExitJobCancelled;
  return kExitJobNotEnded;
}

void print_job_list(const std::string& command, const json::value& page) {
  print_page(command, page, "jobs", "client_request_id",
             {{"CLIENT_REQUEST_ID", false}, {"ACCOUNT", false}, {"COST", true}, {"PROVIDER", false},
              {"STATUS", false}, {"ATTEMPTS", true}, {"CHARGED", false}, {"CREATED_AT", false}},
             {"client_request_id", "account_id", "cost", "provider", "status", "attempts", "charged", "created_at"});
}

int run_job_wait(const Args& a, std::optional<std::int64_t> timeout_ms) {
  const std::string command = "job wait";
  Client client = make_client(a.connection);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::int64_t wait = kJobWaitPollMaxMs;
    if (timeout_ms) {
      const auto spent =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
      wait = std::clamp<std::int64_t>(*timeout_ms - spent, 0, kJobWaitPollMaxMs);
      // A server that never answers is given up on too: each poll, retries included, may take what
      // is left of --timeout-ms plus a second for the long poll's answer to arrive.
      Connection bounded = a.connection;
      bounded.timeout_ms = wait + kJobWaitAnswerGraceMs;
      client = make_client(bounded);
    }
    const Response r = client.get_job(a.job_id, wait);
    if (!r.ok()) return report_failure(command, a.connection, r);
    const std::string status = field(r.json(), "status");
    const auto spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    const bool out_of_time = timeout_ms && spent >= *timeout_ms;
    if (!job_ended(status) && !out_of_time) continue;
    if (a.connection.json) {
      print_json_line(r.json());
    } else {
      if (job_ended(status)) {
        std::printf("job %s %s\n", a.job_id.c_str(), status.c_str());
      } else {
        std::printf("job %s has not ended: %s\n", a.job_id.c_str(), status.c_str());
      }
      print_fields(r.json());
    }
    if (!job_ended(status)) {
      note(command, "still " + status + " after " + std::to_string(*timeout_ms) + " ms (exit " +
                        std::to_string(kExitJobNotEnded) + ")");
    } else if (status != "completed") {
      const std::string error = field(r.json(), "error");
      note(command, "job " + status + (error != "-" ? ": " + error : std::string()));
    }
    return job_exit_code(status);
  }
}

}  // namespace

void add_job_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* job = app.add_subcommand("job", "submit paid provider calls (jobs) and follow, cancel and list them");
  job->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* submit = job->add_subcommand(
      "submit", "reserve --cost on --account, then the server calls --provider with --input in the background");
  submit->add_option("--account", a->account_id, "account id")->required()->check(kId);
  submit->add_option("--cost", a->amount, "credits, 1 to 2^53-1")->required()->transform(kAmount);
  submit->add_option("--provider", a->provider, "a provider named in the server's configuration")
      ->required()
      ->check(kId);
  submit->add_option("--input", a->input, "JSON value the provider is sent (default {})")
      ->check([](const std::string& s) -> std::string {
        boost::system::error_code ec;
        json::parse(s, ec);
        return ec ? "must be JSON (" + ec.message() + "), got '" + s + "'" : std::string();
      });
  submit->add_option("--id", a->job_id,
                     "the job's client_request_id: the same id again answers the same job (default: a new random "
                     "id, printed so that a retry can reuse it)")
      ->check(kId);
  add_connection_options(submit, a->connection);
  submit->callback([a, &exit_code] {
    client::SubmitJobRequest request;
    request.account_id = a->account_id;
    request.cost = a->amount;
    request.provider = a->provider;
    request.input = a->input.empty() ? json::value(json::object{}) : json::parse(a->input);
    const bool generated = a->job_id.empty();
    // Made here, not in the client, so that it can be named for a safe retry.
    request.client_request_id = generated ? Client::new_request_id("cli-job-") : a->job_id;
    if (generated) {
      note("job submit", "job id " + request.client_request_id + " (to retry without submitting twice: --id " +
                             request.client_request_id + ")");
    }
    Response last = Response::success(0, nullptr);
    exit_code = run(
        "job submit", a->connection,
        [&](Client& c) {
          last = c.submit_job(request);
          return last;
        },
        [&](const Response& r) {
          if (r.status() == 202) {
            std::printf("job %s submitted: %s reserved on %s for %s\n", request.client_request_id.c_str(),
                        field(r.json(), "cost").c_str(), a->account_id.c_str(), a->provider.c_str());
          } else {
            std::printf("job %s was already submitted; shown as it is now\n", request.client_request_id.c_str());
          }
          print_fields(r.json());
        });
    if (last.is_transport_error() || (last.is_problem() && last.status() >= 500)) {
      note("job submit", "to try again without ever submitting twice, run it again with --id " +
                             request.client_request_id);
    }
  });

  a = std::make_shared<Args>();
  auto* show = job->add_subcommand("show", "show a job as it is now");
  show->add_option("ID", a->job_id, "the job's client_request_id")->required()->check(kId);
  add_connection_options(show, a->connection);
  show->callback([a, &exit_code] {
    exit_code = run(
        "job show", a->connection, [&](Client& c) { return c.get_job(a->job_id); },
        [](const Response& r) { print_fields(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* wait = job->add_subcommand(
      "wait", "wait until a job ends (long polls); exit 0 completed, 5 failed, 6 cancelled, 7 not ended in time");
  wait->add_option("ID", a->job_id, "the job's client_request_id")->required()->check(kId);
  auto* timeout = wait->add_option("--timeout-ms", a->timeout_ms, "give up after this many ms (default: wait until it ends)")
                      ->transform(integer_range(0, std::numeric_limits<std::int32_t>::max()));
  add_connection_options(wait, a->connection, /*with_timeout=*/false);
  wait->callback([a, &exit_code, timeout] {
    exit_code = run_job_wait(*a, timeout->count() > 0 ? std::optional<std::int64_t>(a->timeout_ms) : std::nullopt);
  });

  a = std::make_shared<Args>();
  auto* cancel = job->add_subcommand("cancel", "stop a job that has not ended; its hold is released");
  cancel->add_option("ID", a->job_id, "the job's client_request_id")->required()->check(kId);
  add_connection_options(cancel, a->connection);
  cancel->callback([a, &exit_code] {
    exit_code = run(
        "job cancel", a->connection, [&](Client& c) { return c.cancel_job(a->job_id); },
        [&](const Response& r) {
          const std::string status = field(r.json(), "status");
          if (status == "cancelled") {
            std::printf("job %s cancelled; its hold is released\n", a->job_id.c_str());
          } else {
            std::printf("job %s had already ended: %s; nothing changed\n", a->job_id.c_str(), status.c_str());
          }
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* list = job->add_subcommand("list", "list jobs, newest first");
  auto* account = list->add_option("--account", a->account_id, "only this account's jobs")->check(kId);
  auto* status = list->add_option("--status", a->status, "only jobs in this status")
                     ->check(CLI::IsMember({"pending", "running", "completed", "failed", "cancelled"}));
  const PageOptions list_page = add_page_options(list, *a, "job id");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, account, status, list_page] {
    client::ListJobsRequest request;
    if (account->count() > 0) request.account_id = a->account_id;
    if (status->count() > 0) request.status = a->status;
    request.page = page_request(list_page, *a);
    exit_code = run(
        "job list", a->connection, [&](Client& c) { return c.list_jobs(request); },
        [](const Response& r) { print_job_list("job list", r.json()); });
  });

  a = std::make_shared<Args>();
  auto* history = job->add_subcommand("history", "a job's story, oldest first: status changes, provider attempts, answers");
  history->add_option("ID", a->job_id, "the job's client_request_id")->required()->check(kId);
  add_connection_options(history, a->connection);
  history->callback([a, &exit_code] {
    exit_code = run(
        "job history", a->connection, [&](Client& c) { return c.job_history(a->job_id); },
        [](const Response& r) {
          const json::array& entries = array_field(r.json(), "entries");
          if (entries.empty()) {
            std::printf("no entries\n");
            return;
          }
          std::vector<std::vector<std::string>> rows;
          for (const json::value& e : entries) {
            rows.push_back({field(e, "at"), field(e, "kind"), field(e, "attempt"), field(e, "detail")});
          }
          print_table({{"AT", false}, {"KIND", false}, {"ATTEMPT", true}, {"DETAIL", false}}, rows, true, true);
        });
  });
}


}  // namespace tollgate::app::cli
