// tollgate cli (internal to src/app/cli): what every client command shares — the connection options,
// the arguments one command parses into, output (fields, tables, JSON lines), the report of a failed
// call and its exit code (app/cli.h), paging. One file per resource registers its commands
// (accounts.cc, lots.cc, keys.cc, holds.cc, jobs.cc, coord.cc, events.cc, operations.cc), as src/http/routes_*.cc.
//
// Thread safety: main()'s thread only, like every command.
#pragma once

#include <CLI/CLI.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/cli.h"
#include "tollgate/client.h"
#include "core/limits.h"

namespace tollgate::app::cli {

namespace json = boost::json;
using client::Client;
using client::Response;

inline constexpr const char* kDefaultUrl = "http://127.0.0.1:8080";
inline constexpr auto kFollowInterval = std::chrono::milliseconds(limits::kCliFollowIntervalMs);
// Following the change feed: how long the server holds an empty read (and so how long an interrupt
// may take to end `events --follow`).
inline constexpr std::int64_t kFeedWaitMs = limits::kCliFeedWaitMs;
inline constexpr std::int64_t kPageDefault = limits::kPageDefault;  // the server's default page size (events, holds)

// --- arguments --------------------------------------------------------------------------------------
// The options every client command takes.
struct Connection {
  std::string url = kDefaultUrl;
  std::string key;
  bool json = false;
  // --ca-file: https only, the CA certificate(s) to trust instead of the system's.
  std::string ca_file;
  // --timeout-ms: the whole call's time limit (every attempt and retry included); 0: not given.
  std::int64_t timeout_ms = 0;
};

// --timeout-ms: from 1 ms to one hour.
inline constexpr std::int64_t kTimeoutMsMax = limits::kCliTimeoutMsMax;
// job wait --timeout-ms: the time a long poll's answer is given to arrive after its wait_ms.
inline constexpr std::int64_t kJobWaitAnswerGraceMs = limits::kCliJobWaitAnswerGraceMs;

// What one client command parses into. Each command has its own: CLI11 applies the environment
// (TOLLGATE_URL, TOLLGATE_KEY) to the options of every subcommand, parsed or not, so a variable
// shared between commands would be overwritten by the environment even when --key was given.
struct Args {
  Connection connection;
  std::string account_id;
  std::string hold_id;
  std::string key_id;
  std::string reference;
  std::string reason;
  std::string request_id;
  std::string status;
  std::string starting_after;
  std::string job_id;    // a job's client_request_id
  std::string provider;
  std::string input;     // job submit: JSON text
  std::int64_t amount = 0;
  std::int64_t timeout_ms = 0;
  std::int64_t overdraft_limit = 0;
  std::int64_t max_active_holds = 0;
  std::int64_t ttl_ms = 0;
  std::int64_t limit = 0;
  std::int64_t after = 0;
  bool follow = false;
  bool from_start = false;  // events --follow: from the first event, not from the head
  std::string max_active_holds_text;  // account update: a number, or "none"
  std::string frozen_text;            // account update: true | false
  std::string low_balance_threshold_text;  // account update: a number, or "none"
  std::string lock_key;               // lock, idem: the key; ratelimit: the limited key
  std::string owner;                  // lock
  std::int64_t fence = 0;             // lock renew, release
  std::string fingerprint;            // idem
  std::string response;               // idem finish: JSON text
  std::string policy;                 // ratelimit
  std::int64_t cost = 0;              // ratelimit check
  std::string url;                    // webhook add
  std::vector<std::string> event_types;  // webhook add --event-type (repeated)
  std::string description;            // webhook add
  std::string endpoint_id;            // webhook show, enable, disable, rotate, delete, deliveries, replay
  std::string feature;                // price; hold reserve, check --feature
  std::int64_t quantity = 0;          // hold reserve, commit, check --quantity
};


// --- arguments --------------------------------------------------------------------------------------
// Cheap local checks of an id and an amount; the server stays the authority.
extern const CLI::Validator kId;
extern const CLI::Validator kAmount;
CLI::Validator integer_range(std::int64_t min, std::int64_t max);
// --expires-in and --expires-at of a command (`key create`, `account credit`): a deadline, as a
// duration from now or a time.
struct ExpiryOptions {
  std::string in;
  std::string at;
  CLI::Option* in_option = nullptr;
  CLI::Option* at_option = nullptr;
};
// Adds both options; `what` begins their help ("the key stops working").
void add_expiry_options(CLI::App* command, ExpiryOptions& e, const std::string& what);
// The RFC 3339 time the options name; nullopt when neither was given. A usage error naming the flag
// (nothing sent) for a duration that is not a whole number above 0 with a unit (s, m, h, d) up to
// 100 years, a time that is not RFC 3339, or both options. Whether the time is in the future is the
// server's to say: its clock is the one that counts.
std::optional<std::string> expiry_of(const ExpiryOptions& e);
// --url, --key, --ca-file, --json and (unless `with_timeout` is false: job wait has its own) --timeout-ms.
void add_connection_options(CLI::App* command, Connection& c, bool with_timeout = true);
// Throws CLI::ValidationError for a --url the client cannot use.
Client make_client(const Connection& c);

// --- output -----------------------------------------------------------------------------------------
std::string text(const json::value& v);
std::string field(const json::value& object, std::string_view key);
std::int64_t number(const json::value& object, std::string_view key);
const json::value& member(const json::value& object, std::string_view key);
const json::array& array_field(const json::value& object, std::string_view key);
void print_json_line(const json::value& v);
// "key:  value" lines, values aligned, in the server's field order.
void print_fields(const json::value& v);
struct Column {
  const char* header;
  bool right_aligned;
  std::size_t width_min = 0;
};

// An aligned table. With `fit` the columns grow to their widest cell; without, they keep width_min
// (so that pages printed one after another line up, as in `events --follow`).
void print_table(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& rows,
                 bool with_header, bool fit);

// --- failures ---------------------------------------------------------------------------------------
// Reports a failed call on stderr; returns the exit code.
int report_failure(const std::string& command, const Connection& connection, const Response& r);
// Runs one call: prints its answer (as JSON, or through `print`) or reports its failure.
template <typename Call, typename Print>
int run(const std::string& command, const Connection& connection, Call call, Print print) {
  Client client = make_client(connection);
  const Response r = call(client);
  if (!r.ok()) return report_failure(command, connection, r);
  if (connection.json) {
    print_json_line(r.json());
  } else {
    print(r);
  }
  return kExitOk;
}

void note(const std::string& command, const std::string& message);

// --- paging -----------------------------------------------------------------------------------------
// Paging options of a list command: --limit and --starting-after.
struct PageOptions {
  CLI::Option* limit = nullptr;
  CLI::Option* starting_after = nullptr;
};

PageOptions add_page_options(CLI::App* command, Args& a, const char* what);
client::PageRequest page_request(const PageOptions& o, const Args& a);
// Tells how to read on when the page says more follow.
void note_more(const std::string& command, const json::value& page, std::string_view items, std::string_view id);
// One page of a list as a table (a row per item of `items`, `fields[i]` under `columns[i]`), "no
// <items>" when empty, then how to read on (the last item's `id` is the cursor).
void print_page(const std::string& command, const json::value& page, std::string_view items, std::string_view id,
                const std::vector<Column>& columns, const std::vector<std::string_view>& fields);

// --- the resources' commands (one file each) --------------------------------------------------------
void add_account_commands(CLI::App& app, int& exit_code);   // accounts.cc
void add_transfer_command(CLI::App& app, int& exit_code);   // accounts.cc
void add_key_commands(CLI::App& app, int& exit_code);       // keys.cc
void add_hold_commands(CLI::App& app, int& exit_code);      // holds.cc
void add_refund_commands(CLI::App& app, int& exit_code);    // refunds.cc
void add_job_commands(CLI::App& app, int& exit_code);       // jobs.cc
void add_lock_commands(CLI::App& app, int& exit_code);      // coord.cc
void add_idempotency_commands(CLI::App& app, int& exit_code);  // coord.cc
void add_ratelimit_commands(CLI::App& app, int& exit_code);    // coord.cc
void add_events_command(CLI::App& app, int& exit_code);     // events.cc
void add_lots_command(CLI::App& app, int& exit_code);       // lots.cc
void add_price_commands(CLI::App& app, int& exit_code);     // prices.cc
void add_audit_command(CLI::App& app, int& exit_code);
void add_webhook_commands(CLI::App& app, int& exit_code);   // webhooks.cc      // operations.cc

}  // namespace tollgate::app::cli
