// tollgate cli: the command tree — registration of every resource's commands (one file each in
// src/app/cli/, as src/http/routes_*.cc) and the usage message for a command that does not exist.
#include "app/cli.h"

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

namespace tollgate::app {

using namespace cli;

namespace {

// The named subcommands of `command`.
std::vector<const CLI::App*> subcommands(const CLI::App& command) {
  return command.get_subcommands([](const CLI::App* sub) { return !sub->get_name().empty(); });
}

std::vector<std::string> names_of(const std::vector<const CLI::App*>& commands) {
  std::vector<std::string> names;
  for (const CLI::App* c : commands) names.push_back(c->get_name());
  std::sort(names.begin(), names.end());
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::optional<std::string> command_usage_message(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* command = &app;
  std::string path;  // the words that named commands, each followed by a space: "account "
  for (const std::string& word : args) {
    if (word.empty() || word[0] == '-') return std::nullopt;  // options: not a command's place
    const std::vector<const CLI::App*> subs = subcommands(*command);
    if (subs.empty()) return std::nullopt;  // a command's own arguments from here
    const auto named = std::find_if(subs.begin(), subs.end(), [&](const CLI::App* s) { return s->check_name(word); });
    if (named == subs.end()) {
      const std::vector<std::string> names = names_of(subs);
      return "unknown command '" + path + word + "'" + did_you_mean(word, names) + "; the " + path +
             "commands are: " + joined(names);
    }
    command = *named;
    path += word + " ";
  }
  const std::vector<const CLI::App*> subs = subcommands(*command);
  if (subs.empty()) return std::nullopt;
  const std::string after = path.empty() ? "" : " after '" + path.substr(0, path.size() - 1) + "'";
  return "a command is missing" + after + "; the " + path + "commands are: " + joined(names_of(subs));
}

void add_cli_commands(CLI::App& app, int& exit_code) {
  add_account_commands(app, exit_code);
  add_lots_command(app, exit_code);
  add_key_commands(app, exit_code);
  add_webhook_commands(app, exit_code);
  add_hold_commands(app, exit_code);
  add_price_commands(app, exit_code);
  add_job_commands(app, exit_code);
  add_refund_commands(app, exit_code);
  add_lock_commands(app, exit_code);
  add_idempotency_commands(app, exit_code);
  add_ratelimit_commands(app, exit_code);
  add_transfer_command(app, exit_code);
  add_events_command(app, exit_code);
  add_audit_command(app, exit_code);
  app.footer(
      "Client commands talk to a running server (--url, $TOLLGATE_URL) with --key or $TOLLGATE_KEY\n"
      "(or, when neither is given, $TOLLGATE_ADMIN_KEY);\n"
      "--timeout-ms N (1 to 3600000) gives up on it after N ms in all, retries included (each poll\n"
      "with --follow; `job wait`: its own --timeout-ms, plus 1 s for the last answer to arrive).\n"
      "Exit codes: 0 done, 1 refused by the server (4xx), 2 usage error, 3 server unreachable or\n"
      "unavailable (after bounded retries), 4 audit found violations; `job wait`: 5 the job failed,\n"
      "6 it was cancelled, 7 it had not ended within --timeout-ms; `lock`: 8 held by another owner,\n"
      "9 not the holder any more, 10 cancelled (stop; the lock is freed); `idem begin`: 11 finished\n"
      "before (its response is printed), 12 in progress elsewhere; `ratelimit check`: 13 refused;\n"
      "`hold check`: 14 a reservation would be refused now.");
}

}  // namespace tollgate::app
