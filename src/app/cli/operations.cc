// tollgate cli: `audit` — the client side of routes_operations.cc.

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

void add_audit_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* audit = app.add_subcommand("audit", "recompute balances from the event log and compare (admin key); exit 4 on violations");
  auto* account = audit->add_option("--account", a->account_id, "only this account")->check(kId);
  add_connection_options(audit, a->connection);
  audit->callback([a, &exit_code, account] {
    std::optional<std::string> only;
    if (account->count() > 0) only = a->account_id;
    std::size_t violations = 0;
    exit_code = run(
        "audit", a->connection,
        [&](Client& c) {
          Response r = c.audit(only);
          if (r.ok()) violations = array_field(r.json(), "violations").size();
          return r;
        },
        [](const Response& r) {
          std::printf("accounts checked: %s\n", field(r.json(), "accounts_checked").c_str());
          const json::array& found = array_field(r.json(), "violations");
          if (found.empty()) {
            std::printf("violations: none\n");
            return;
          }
          std::printf("violations: %zu\n", found.size());
          std::vector<std::vector<std::string>> rows;
          for (const json::value& v : found) rows.push_back({field(v, "account_id"), field(v, "message")});
          print_table({{"ACCOUNT", false}, {"MESSAGE", false}}, rows, true, true);
        });
    if (exit_code == kExitOk && violations > 0) {
      note("audit", std::to_string(violations) + " invariant violation(s) found");
      exit_code = kExitAuditViolations;
    }
  });
}


}  // namespace tollgate::app::cli
