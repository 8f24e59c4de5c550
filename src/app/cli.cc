#include "app/cli.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "core/limits.h"
#include "core/parse.h"
#include "core/result.h"
#include "core/suggest.h"
#include "tollgate/client.h"

namespace tollgate::app {
namespace {

namespace json = boost::json;
using client::Client;
using client::Response;

constexpr const char* kDefaultUrl = "http://127.0.0.1:8080";
constexpr auto kFollowInterval = std::chrono::milliseconds(500);
// Following the change feed: how long the server holds an empty read (and so how long an interrupt
// may take to end `events --follow`).
constexpr std::int64_t kFeedWaitMs = 1000;
constexpr std::int64_t kPageDefault = 100;  // the server's default page size (events, holds)

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
constexpr std::int64_t kTimeoutMsMax = 3'600'000;
// job wait --timeout-ms: the time a long poll's answer is given to arrive after its wait_ms.
constexpr std::int64_t kJobWaitAnswerGraceMs = 1000;

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
  std::string lock_key;               // lock, idem: the key; ratelimit: the limited key
  std::string owner;                  // lock
  std::int64_t fence = 0;             // lock renew, release
  std::string fingerprint;            // idem
  std::string response;               // idem finish: JSON text
  std::string policy;                 // ratelimit
  std::int64_t cost = 0;              // ratelimit check
};

bool is_id(std::string_view s) {
  if (s.empty() || s.size() > limits::kIdLengthMax || s == "." || s == "..") return false;  // as the server's
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '@' || c == '-';
  });
}

// Cheap local checks; the server stays the authority.
const CLI::Validator kId(
    [](std::string& s) -> std::string {
      return is_id(s) ? std::string() : "must be 1-128 characters of [A-Za-z0-9._:@-], got \"" + s + "\"";
    },
    "ID", "id");

const CLI::Validator kAmount(
    [](std::string& s) -> std::string {
      std::int64_t n = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
      const bool digits_only = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (!digits_only || ec != std::errc() || end != s.data() + s.size() || n < limits::kAmountMin ||
          n > limits::kAmountMax) {
        return "must be an integer from 1 to " + std::to_string(limits::kAmountMax) + ", got \"" + s + "\"";
      }
      s = std::to_string(n);  // decimal, as checked: CLI11 would read "010" as octal 8
      return {};
    },
    "AMOUNT", "amount");

CLI::Validator integer_range(std::int64_t min, std::int64_t max) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        std::int64_t n = 0;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (s.empty() || ec != std::errc() || end != s.data() + s.size() || n < min || n > max) {
          return "must be an integer from " + std::to_string(min) + " to " + std::to_string(max) + ", got \"" + s + "\"";
        }
        s = std::to_string(n);  // decimal, as checked: CLI11 would read "010" as octal 8
        return {};
      },
      "INT in [" + std::to_string(min) + " - " + std::to_string(max) + "]", "range");
}

// `with_timeout` false: the command has its own --timeout-ms (job wait).
void add_connection_options(CLI::App* command, Connection& c, bool with_timeout = true) {
  command->add_option("--url", c.url, "the server, http://host:port or https://host:port")
      ->envname("TOLLGATE_URL")
      ->default_str(kDefaultUrl)
      ->group("Connection");
  command->add_option("--key", c.key,
                      "API key, admin or account (prefer $TOLLGATE_KEY: ps shows arguments; with neither, "
                      "$TOLLGATE_ADMIN_KEY)")
      ->envname("TOLLGATE_KEY")
      ->group("Connection");
  command
      ->add_option("--ca-file", c.ca_file,
                   "https: a PEM file of the CA certificate(s) to trust instead of the system's (e.g. a "
                   "self-signed server certificate)")
      ->envname("TOLLGATE_CA_FILE")
      ->group("Connection");
  command->add_flag("--json", c.json, "print the server's JSON, one document per line")->group("Connection");
  if (with_timeout) {
    command
        ->add_option("--timeout-ms", c.timeout_ms,
                     "give up on the server after this many ms in all, retries included (default: retries "
                     "for up to 10 s, each attempt up to 12 s)")
        ->transform(integer_range(1, kTimeoutMsMax))
        ->group("Connection");
  }
}

// The key: --key, else $TOLLGATE_KEY (CLI11 reads it into --key), else $TOLLGATE_ADMIN_KEY — the
// variable the server reads its admin key from, so that one variable serves both on an admin's shell.
std::string key_of(const Connection& c) {
  if (!c.key.empty()) return c.key;
  const char* admin = std::getenv("TOLLGATE_ADMIN_KEY");
  return admin ? admin : "";
}

Client make_client(const Connection& c) {
  client::Options options;
  options.base_url = c.url;
  options.key = key_of(c);
  options.tls_ca_file = c.ca_file;
  options.request_id_prefix = "cli-";
  options.call_timeout = std::chrono::milliseconds(c.timeout_ms);
  Client client(std::move(options));
  if (const std::string* error = client.configuration_error()) throw CLI::ValidationError("--url", *error);
  return client;
}

// --- output -----------------------------------------------------------------------------------------
std::string text(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "-";
    case json::kind::string: return std::string(v.get_string());
    case json::kind::int64: return std::to_string(v.get_int64());
    case json::kind::uint64: return std::to_string(v.get_uint64());
    case json::kind::bool_: return v.get_bool() ? "true" : "false";
    default: return json::serialize(v);
  }
}

std::string field(const json::value& object, std::string_view key) {
  if (!object.is_object()) return "-";
  const json::value* v = object.get_object().if_contains(key);
  return v ? text(*v) : "-";
}

std::int64_t number(const json::value& object, std::string_view key) {
  if (!object.is_object()) return 0;
  const json::value* v = object.get_object().if_contains(key);
  return v && v->is_int64() ? v->get_int64() : 0;
}

const json::value& member(const json::value& object, std::string_view key) {
  static const json::value kNull;
  if (!object.is_object()) return kNull;
  const json::value* v = object.get_object().if_contains(key);
  return v ? *v : kNull;
}

const json::array& array_field(const json::value& object, std::string_view key) {
  static const json::array kEmpty;
  if (!object.is_object()) return kEmpty;
  const json::value* v = object.get_object().if_contains(key);
  return v && v->is_array() ? v->get_array() : kEmpty;
}

void print_json_line(const json::value& v) {
  std::printf("%s\n", json::serialize(v).c_str());
  std::fflush(stdout);
}

// "key:  value" lines, values aligned, in the server's field order.
void print_fields(const json::value& v) {
  if (!v.is_object()) return print_json_line(v);
  std::size_t width = 0;
  for (const auto& [k, value] : v.get_object()) width = std::max(width, k.size() + 1);
  for (const auto& [k, value] : v.get_object()) {
    const std::string key = std::string(k) + ":";
    std::printf("%-*s  %s\n", static_cast<int>(width), key.c_str(), text(value).c_str());
  }
}

struct Column {
  const char* header;
  bool right_aligned;
  std::size_t width_min = 0;
};

// An aligned table. With `fit` the columns grow to their widest cell; without, they keep width_min
// (so that pages printed one after another line up, as in `events --follow`).
void print_table(const std::vector<Column>& columns, const std::vector<std::vector<std::string>>& rows,
                 bool with_header, bool fit) {
  std::vector<std::size_t> widths;
  for (const Column& c : columns) widths.push_back(std::max(c.width_min, std::string_view(c.header).size()));
  if (fit) {
    for (const auto& row : rows) {
      for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const std::string& cell = i < cells.size() ? cells[i] : std::string();
      const std::size_t pad = widths[i] > cell.size() ? widths[i] - cell.size() : 0;
      const bool last = i + 1 == columns.size();
      if (columns[i].right_aligned) out.append(pad, ' ');
      out += cell;
      if (!columns[i].right_aligned && !last) out.append(pad, ' ');
      if (!last) out += "  ";
    }
    std::printf("%s\n", out.c_str());
  };
  if (with_header) {
    std::vector<std::string> headers;
    for (const Column& c : columns) headers.emplace_back(c.header);
    line(headers);
  }
  for (const auto& row : rows) line(row);
  std::fflush(stdout);
}

// --- failures ---------------------------------------------------------------------------------------
// Reports a failed call on stderr; returns the exit code.
int report_failure(const std::string& command, const Connection& connection, const Response& r) {
  if (r.is_problem()) {
    const auto& p = r.problem();
    std::string line = "tollgate: " + command + ": " + r.describe();
    if (p.code == "unauthorized" && key_of(connection).empty()) {
      line += " (no key given: pass --key or set TOLLGATE_KEY or TOLLGATE_ADMIN_KEY)";
    }
    if (p.status >= 500 && r.attempts() > 1) line += " (after " + std::to_string(r.attempts()) + " attempts)";
    std::fprintf(stderr, "%s\n", line.c_str());
    return p.status >= 500 ? kExitUnavailable : kExitRefused;
  }
  const auto& t = r.transport_error();
  std::string line = "tollgate: " + command + ": ";
  if (t.failure == client::TransportFailure::invalid_url) {
    std::fprintf(stderr, "%s%s\n", line.c_str(), t.message.c_str());
    return kExitUsage;
  }
  line += "cannot get an answer from " + connection.url + ": " + t.message;
  if (r.attempts() > 1) line += " (gave up after " + std::to_string(r.attempts()) + " attempts)";
  if (connection.timeout_ms > 0 && t.failure == client::TransportFailure::timeout) {
    line += " (--timeout-ms " + std::to_string(connection.timeout_ms) + ")";
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  return kExitUnavailable;
}

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

void note(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "tollgate: %s: %s\n", command.c_str(), message.c_str());
}

// Paging options of a list command: --limit and --starting-after.
struct PageOptions {
  CLI::Option* limit = nullptr;
  CLI::Option* starting_after = nullptr;
};

PageOptions add_page_options(CLI::App* command, Args& a, const char* what) {
  PageOptions o;
  o.limit = command->add_option("--limit", a.limit, "at most this many (server default 100)")
                ->transform(integer_range(1, limits::kListPageMax));
  o.starting_after = command->add_option("--starting-after", a.starting_after,
                                         std::string("the next page: after this ") + what + " (the last one shown)")
                         ->check(kId);
  return o;
}

client::PageRequest page_request(const PageOptions& o, const Args& a) {
  client::PageRequest page;
  if (o.limit->count() > 0) page.limit = a.limit;
  if (o.starting_after->count() > 0) page.starting_after = a.starting_after;
  return page;
}

// Tells how to read on when the page says more follow.
void note_more(const std::string& command, const json::value& page, std::string_view items, std::string_view id) {
  const json::array& list = array_field(page, items);
  const json::value* more = page.is_object() ? page.get_object().if_contains("has_more") : nullptr;
  if (list.empty() || more == nullptr || !more->is_bool() || !more->as_bool()) return;
  note(command, "there are more: --starting-after " + field(list.back(), id));
}

// One page of a list (`account list`, `key list`, `hold list`) as a table: a row per item of
// `items`, the value of `fields[i]` under `columns[i]`; "no <items>" when the page is empty; then how
// to read on when the page says more follow (the last item's `id` is the cursor).
void print_page(const std::string& command, const json::value& page, std::string_view items, std::string_view id,
                const std::vector<Column>& columns, const std::vector<std::string_view>& fields) {
  TG_ASSERT(columns.size() == fields.size());
  const json::array& list = array_field(page, items);
  if (list.empty()) {
    std::printf("no %.*s\n", static_cast<int>(items.size()), items.data());
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (const json::value& item : list) {
    std::vector<std::string>& row = rows.emplace_back();
    for (std::string_view name : fields) row.push_back(field(item, name));
  }
  print_table(columns, rows, true, true);
  note_more(command, page, items, id);
}

// --- commands ---------------------------------------------------------------------------------------
void add_account_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* account = app.add_subcommand("account", "create, show, update, list, credit and debit accounts");
  account->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* create = account->add_subcommand("create", "create an account (admin key); the same settings again change nothing");
  create->add_option("ID", a->account_id, "account id")->required()->check(kId);
  auto* overdraft = create->add_option("--overdraft-limit", a->overdraft_limit,
                                       "credits that `available` may go below zero (default 0)")
                        ->transform(integer_range(0, limits::kOverdraftLimitMax));
  auto* max_holds = create->add_option("--max-active-holds", a->max_active_holds, "at most this many active holds")
                        ->transform(integer_range(1, limits::kMaxActiveHoldsMax));
  add_connection_options(create, a->connection);
  create->callback([a, &exit_code, overdraft, max_holds] {
    client::CreateAccountRequest request{a->account_id, std::nullopt, std::nullopt};
    if (overdraft->count() > 0) request.overdraft_limit = a->overdraft_limit;
    if (max_holds->count() > 0) request.max_active_holds = a->max_active_holds;
    exit_code = run(
        "account create", a->connection, [&](Client& c) { return c.create_account(request); },
        [&](const Response& r) {
          if (r.status() == 201) {
            std::printf("account %s created\n", a->account_id.c_str());
          } else {
            std::printf("account %s already exists with these settings; nothing changed\n", a->account_id.c_str());
          }
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* show = account->add_subcommand("show", "show an account's balances");
  show->add_option("ID", a->account_id, "account id")->required()->check(kId);
  add_connection_options(show, a->connection);
  show->callback([a, &exit_code] {
    exit_code = run(
        "account show", a->connection, [&](Client& c) { return c.get_account(a->account_id); },
        [](const Response& r) { print_fields(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* update = account->add_subcommand(
      "update", "change an account's settings (admin key); the same settings again change nothing");
  update->add_option("ID", a->account_id, "account id")->required()->check(kId);
  auto* new_overdraft = update->add_option("--overdraft-limit", a->overdraft_limit,
                                           "credits that `available` may go below zero")
                            ->transform(integer_range(0, limits::kOverdraftLimitMax));
  auto* new_max_holds =
      update->add_option("--max-active-holds", a->max_active_holds_text, "at most this many active holds, or none")
          ->check([](const std::string& v) -> std::string {
            if (v == "none") return "";
            std::string number = v;
            return integer_range(1, limits::kMaxActiveHoldsMax)(number).empty()
                       ? ""
                       : "must be none or from 1 to " + std::to_string(limits::kMaxActiveHoldsMax);
          });
  auto* new_frozen = update->add_option("--frozen", a->frozen_text, "true: refuse new holds and debits; false: allow")
                         ->check(CLI::IsMember({"true", "false"}));
  add_connection_options(update, a->connection);
  update->callback([a, &exit_code, new_overdraft, new_max_holds, new_frozen] {
    client::UpdateAccountRequest request;
    if (new_overdraft->count() > 0) request.overdraft_limit = a->overdraft_limit;
    if (new_max_holds->count() > 0) {
      request.max_active_holds = a->max_active_holds_text == "none"
                                     ? std::optional<std::int64_t>()
                                     : parse_int(a->max_active_holds_text, 1, limits::kMaxActiveHoldsMax);
      TG_ASSERT(a->max_active_holds_text == "none" || *request.max_active_holds);  // the option's check read it
    }
    if (new_frozen->count() > 0) request.frozen = a->frozen_text == "true";
    if (!request.overdraft_limit && !request.max_active_holds && !request.frozen) {
      throw CLI::ValidationError("account update", "give at least one of --overdraft-limit, --max-active-holds, --frozen");
    }
    exit_code = run(
        "account update", a->connection, [&](Client& c) { return c.update_account(a->account_id, request); },
        [](const Response& r) { print_fields(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* list = account->add_subcommand("list", "list accounts by id (admin key)");
  const PageOptions list_page = add_page_options(list, *a, "account id");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, list_page] {
    const client::PageRequest page = page_request(list_page, *a);
    exit_code = run(
        "account list", a->connection, [&](Client& c) { return c.list_accounts(page); },
        [](const Response& r) {
          print_page("account list", r.json(), "accounts", "account_id",
                     {{"ACCOUNT", false}, {"AVAILABLE", true}, {"RESERVED", true}, {"USED", true},
                      {"PURCHASED", true}, {"ACTIVE_HOLDS", true}},
                     {"account_id", "available", "reserved", "used", "purchased", "active_holds"});
        });
  });

  a = std::make_shared<Args>();
  auto* credit = account->add_subcommand("credit", "add purchased credits (admin key); a reference counts once");
  credit->add_option("ID", a->account_id, "account id")->required()->check(kId);
  credit->add_option("AMOUNT", a->amount, "credits, 1 to 2^53-1")->required()->transform(kAmount);
  credit->add_option("--reference", a->reference, "your unique id of this purchase (repeating it adds nothing)")
      ->required()
      ->check(kId);
  add_connection_options(credit, a->connection);
  credit->callback([a, &exit_code] {
    exit_code = run(
        "account credit", a->connection, [&](Client& c) { return c.credit(a->account_id, a->amount, a->reference); },
        [&](const Response& r) {
          const json::value& event = member(r.json(), "event");
          if (r.status() == 201) {
            std::printf("credited %s to %s (event %s, reference %s)\n", field(event, "amount").c_str(),
                        a->account_id.c_str(), field(event, "event_id").c_str(), a->reference.c_str());
          } else {
            std::printf("reference %s was already credited to %s (event %s); nothing added\n", a->reference.c_str(),
                        a->account_id.c_str(), field(event, "event_id").c_str());
          }
          print_fields(member(r.json(), "account"));
        });
  });

  a = std::make_shared<Args>();
  auto* debit = account->add_subcommand("debit", "remove available credits: refund, correction (admin key)");
  debit->add_option("ID", a->account_id, "account id")->required()->check(kId);
  debit->add_option("AMOUNT", a->amount, "credits, 1 to 2^53-1")->required()->transform(kAmount);
  debit->add_option("--reference", a->reference, "your unique id of this debit (repeating it removes nothing)")
      ->required()
      ->check(kId);
  debit->add_option("--reason", a->reason, "why, for the audit trail")->required();
  add_connection_options(debit, a->connection);
  debit->callback([a, &exit_code] {
    exit_code = run(
        "account debit", a->connection,
        [&](Client& c) { return c.debit(a->account_id, a->amount, a->reference, a->reason); },
        [&](const Response& r) {
          const json::value& event = member(r.json(), "event");
          if (r.status() == 201) {
            std::printf("debited %s from %s (event %s, reference %s)\n", field(event, "amount").c_str(),
                        a->account_id.c_str(), field(event, "event_id").c_str(), a->reference.c_str());
          } else {
            std::printf("reference %s was already debited from %s (event %s); nothing removed\n", a->reference.c_str(),
                        a->account_id.c_str(), field(event, "event_id").c_str());
          }
          print_fields(member(r.json(), "account"));
        });
  });
}

void add_key_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* key = app.add_subcommand("key", "create, list and revoke keys (admin key)");
  key->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* create = key->add_subcommand("create", "create a key for one account; its secret is shown only once");
  create->add_option("ACCOUNT", a->account_id, "account id")->required()->check(kId);
  add_connection_options(create, a->connection);
  create->callback([a, &exit_code] {
    exit_code = run(
        "key create", a->connection, [&](Client& c) { return c.create_key(a->account_id); },
        [](const Response& r) {
          print_fields(r.json());
          note("key create", "the secret is shown only this once: store it now");
        });
  });

  a = std::make_shared<Args>();
  auto* list = key->add_subcommand("list", "list keys, newest first: ids, account, created, last used — never secrets");
  auto* of_account = list->add_option("--account", a->account_id, "only this account's keys")->check(kId);
  const PageOptions list_page = add_page_options(list, *a, "key id");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, of_account, list_page] {
    const client::PageRequest page = page_request(list_page, *a);
    const std::optional<std::string> account = of_account->count() > 0 ? std::optional(a->account_id) : std::nullopt;
    exit_code = run(
        "key list", a->connection, [&](Client& c) { return c.list_keys(account, page); },
        [](const Response& r) {
          print_page("key list", r.json(), "keys", "key_id",
                     {{"KEY_ID", false}, {"KIND", false}, {"ACCOUNT", false}, {"CREATED_AT", false},
                      {"LAST_USED_AT", false}, {"REVOKED_AT", false}},
                     {"key_id", "kind", "account_id", "created_at", "last_used_at", "revoked_at"});
        });
  });

  a = std::make_shared<Args>();
  auto* revoke = key->add_subcommand("revoke", "revoke a key: it stops working at once");
  revoke->add_option("KEY_ID", a->key_id, "the key's id (key_…), not its secret")->required();
  add_connection_options(revoke, a->connection);
  revoke->callback([a, &exit_code] {
    exit_code = run(
        "key revoke", a->connection, [&](Client& c) { return c.revoke_key(a->key_id); },
        [&](const Response& r) {
          std::printf("key %s revoked\n", a->key_id.c_str());
          print_fields(r.json());
        });
  });
}


void add_hold_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* hold = app.add_subcommand("hold", "reserve credits, then commit or release them");
  hold->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* reserve = hold->add_subcommand("reserve", "move AMOUNT from available to reserved, as a hold");
  reserve->add_option("ACCOUNT", a->account_id, "account id")->required()->check(kId);
  reserve->add_option("AMOUNT", a->amount, "credits, 1 to 2^53-1")->required()->transform(kAmount);
  reserve->add_option("--request-id", a->request_id,
                      "your id of this reservation: the same id again answers the same hold (default: a new random id)")
      ->check(kId);
  auto* ttl = reserve->add_option("--ttl-ms", a->ttl_ms, "the hold expires after this many ms (default: the server's)")
                  ->transform(integer_range(limits::kHoldTtlMsMin, limits::kHoldTtlMsMax));
  add_connection_options(reserve, a->connection);
  reserve->callback([a, &exit_code, ttl] {
    client::ReserveRequest request;
    request.account_id = a->account_id;
    request.amount = a->amount;
    // Made here, not in the client, so that a failure can name it for a safe retry.
    request.request_id = a->request_id.empty() ? Client::new_request_id("cli-") : a->request_id;
    if (ttl->count() > 0) request.ttl_ms = a->ttl_ms;
    Response last = Response::success(0, nullptr);
    exit_code = run(
        "hold reserve", a->connection,
        [&](Client& c) {
          last = c.reserve(request);
          return last;
        },
        [&](const Response& r) {
          if (r.status() == 201) {
            std::printf("reserved %s on %s: hold %s, expires %s\n", field(r.json(), "amount").c_str(),
                        a->account_id.c_str(), field(r.json(), "hold_id").c_str(), field(r.json(), "expires_at").c_str());
          } else {
            std::printf("request_id %s already made hold %s; shown as it is now\n", request.request_id.c_str(),
                        field(r.json(), "hold_id").c_str());
          }
          print_fields(r.json());
        });
    if (last.is_transport_error() || (last.is_problem() && last.status() >= 500)) {
      note("hold reserve", "to try again without ever reserving twice, run it again with --request-id " +
                               request.request_id);
    }
  });

  a = std::make_shared<Args>();
  auto* commit = hold->add_subcommand("commit", "move the hold (or --amount of it) to used; the rest returns to available");
  commit->add_option("HOLD", a->hold_id, "hold id")->required();
  auto* amount = commit->add_option("--amount", a->amount, "commit only this much (default: all of it)")->transform(kAmount);
  add_connection_options(commit, a->connection);
  commit->callback([a, &exit_code, amount] {
    std::optional<std::int64_t> part;
    if (amount->count() > 0) part = a->amount;
    exit_code = run(
        "hold commit", a->connection, [&](Client& c) { return c.commit(a->hold_id, part); },
        [&](const Response& r) {
          const json::value& h = r.json();
          const std::int64_t used = number(h, "committed_amount");
          std::string line = "hold " + a->hold_id + " " + field(h, "status") + ": " + std::to_string(used) + " used, " +
                             std::to_string(number(h, "amount") - used) + " returned to available";
          if (!member(h, "late_outcome").is_null()) line += " (late commit: " + field(h, "late_outcome") + ")";
          std::printf("%s\n", line.c_str());
          print_fields(h);
        });
  });

  a = std::make_shared<Args>();
  auto* release = hold->add_subcommand("release", "return the whole hold to available");
  release->add_option("HOLD", a->hold_id, "hold id")->required();
  auto* reason = release->add_option("--reason", a->reason, "why (optional)");
  add_connection_options(release, a->connection);
  release->callback([a, &exit_code, reason] {
    std::optional<std::string> why;
    if (reason->count() > 0) why = a->reason;
    exit_code = run(
        "hold release", a->connection, [&](Client& c) { return c.release(a->hold_id, why); },
        [&](const Response& r) {
          const json::value& h = r.json();
          std::printf("hold %s %s: %s returned to available\n", a->hold_id.c_str(), field(h, "status").c_str(),
                      field(h, "amount").c_str());
          print_fields(h);
        });
  });

  a = std::make_shared<Args>();
  auto* extend = hold->add_subcommand("extend", "push an active hold's expiry to now + --ttl-ms");
  extend->add_option("HOLD", a->hold_id, "hold id")->required();
  extend->add_option("--ttl-ms", a->ttl_ms, "new time to live, from now")
      ->required()
      ->transform(integer_range(limits::kHoldTtlMsMin, limits::kHoldTtlMsMax));
  add_connection_options(extend, a->connection);
  extend->callback([a, &exit_code] {
    exit_code = run(
        "hold extend", a->connection, [&](Client& c) { return c.extend(a->hold_id, a->ttl_ms); },
        [&](const Response& r) {
          std::printf("hold %s now expires at %s\n", a->hold_id.c_str(), field(r.json(), "expires_at").c_str());
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* show = hold->add_subcommand("show", "show a hold");
  show->add_option("HOLD", a->hold_id, "hold id")->required();
  add_connection_options(show, a->connection);
  show->callback([a, &exit_code] {
    exit_code = run(
        "hold show", a->connection, [&](Client& c) { return c.get_hold(a->hold_id); },
        [](const Response& r) { print_fields(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* list = hold->add_subcommand("list", "list holds, newest first");
  auto* account = list->add_option("--account", a->account_id, "only this account's holds")->check(kId);
  auto* status = list->add_option("--status", a->status, "only holds in this status")
                     ->check(CLI::IsMember({"active", "committed", "released", "expired"}));
  auto* request_id = list->add_option("--request-id", a->request_id,
                                      "the hold of this reservation (an answer lost: look here before reserving again)")
                          ->check(kId);
  const PageOptions list_page = add_page_options(list, *a, "hold id");
  add_connection_options(list, a->connection);
  list->callback([a, &exit_code, account, status, request_id, list_page] {
    client::ListHoldsRequest request;
    if (account->count() > 0) request.account_id = a->account_id;
    if (status->count() > 0) request.status = a->status;
    if (request_id->count() > 0) request.request_id = a->request_id;
    const client::PageRequest page = page_request(list_page, *a);
    request.limit = page.limit;
    request.starting_after = page.starting_after;
    exit_code = run(
        "hold list", a->connection, [&](Client& c) { return c.list_holds(request); },
        [](const Response& r) {
          print_page("hold list", r.json(), "holds", "hold_id",
                     {{"HOLD_ID", false}, {"ACCOUNT", false}, {"AMOUNT", true}, {"COMMITTED", true},
                      {"STATUS", false}, {"EXPIRES_AT", false}, {"REQUEST_ID", false}},
                     {"hold_id", "account_id", "amount", "committed_amount", "status", "expires_at", "request_id"});
        });
  });
}


// --- jobs -------------------------------------------------------------------------------------------
// `job wait`: how long each long poll asks the server to hold the read (the API's maximum).
constexpr std::int64_t kJobWaitPollMaxMs = 60'000;

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

// --- coordination: locks, idempotency keys, rate limits ------------------------------------------
// The refusals a script branches on get their own exit codes (cli.h); with --json their problem
// document is printed on stdout too (retry_after_ms, expires_at), as the answer would have been.
int coordination_exit_code(std::string_view code) {
  if (code == "lock_held") return kExitLockHeld;
  if (code == "lock_lost") return kExitLockLost;
  if (code == "lock_cancelled") return kExitLockCancelled;
  if (code == "in_progress") return kExitInProgress;
  if (code == "rate_limited") return kExitRateLimited;
  return -1;
}

// run() for the coordination commands: the refusals above exit with their own code.
template <typename Call, typename Print>
int run_coordination(const std::string& command, const Connection& connection, Call call, Print print) {
  Client client = make_client(connection);
  const Response r = call(client);
  if (r.ok()) {
    if (connection.json) {
      print_json_line(r.json());
    } else {
      print(r);
    }
    return kExitOk;
  }
  const int failed = report_failure(command, connection, r);
  if (!r.is_problem()) return failed;
  const int own = coordination_exit_code(r.problem().code);
  if (own < 0) return failed;
  if (connection.json && r.problem().body.is_object()) print_json_line(r.problem().body);
  return own;
}

const CLI::Validator kFingerprint(
    [](std::string& s) -> std::string {
      if (s.empty() || s.size() > limits::kFingerprintLengthMax) {
        return "must be 1 to " + std::to_string(limits::kFingerprintLengthMax) + " bytes, got " +
               std::to_string(s.size());
      }
      return {};
    },
    "TEXT", "fingerprint");

// --response: a JSON value (not null: null means "no response"), at most the stored size.
const CLI::Validator kResponseJson(
    [](std::string& s) -> std::string {
      boost::system::error_code ec;
      const json::value v = json::parse(s, ec);
      if (ec) return "must be JSON (" + ec.message() + "), got '" + s + "'";
      if (v.is_null()) return "must be a JSON value other than null (the response to replay)";
      const std::size_t size = json::serialize(v).size();
      if (size > limits::kIdempotencyResponseBytesMax) {
        return "must be at most " + std::to_string(limits::kIdempotencyResponseBytesMax) + " bytes of JSON, got " +
               std::to_string(size);
      }
      return {};
    },
    "JSON", "response");

// "lock K held by O: fence F, until T" for an answer that names a holder, else how it is.
void print_lock(const json::value& lock) {
  if (member(lock, "held").is_bool() && member(lock, "held").get_bool()) {
    std::printf("lock %s held by %s: fence %s, until %s\n", field(lock, "key").c_str(), field(lock, "owner").c_str(),
                field(lock, "fence").c_str(), field(lock, "expires_at").c_str());
  } else {
    std::printf("lock %s is free (last fence %s)\n", field(lock, "key").c_str(), field(lock, "fence").c_str());
  }
  print_fields(lock);
}

void add_lock_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* lock = app.add_subcommand("lock", "lease locks with fencing: one holder per key across every instance (admin key)");
  lock->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* acquire = lock->add_subcommand(
      "acquire", "take KEY for --owner for --ttl-ms (the same owner again: same fence, lease renewed); exit 8 if "
                 "another owner holds it, 10 if it was cancelled");
  acquire->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  acquire->add_option("--owner", a->owner, "who takes it (a worker's id)")->required()->check(kId);
  acquire->add_option("--ttl-ms", a->ttl_ms, "the lease, from now (renew before it runs out)")
      ->required()
      ->transform(integer_range(1, limits::kLockTtlMsMax));
  add_connection_options(acquire, a->connection);
  acquire->callback([a, &exit_code] {
    exit_code = run_coordination(
        "lock acquire", a->connection, [&](Client& c) { return c.acquire_lock(a->lock_key, a->owner, a->ttl_ms); },
        [](const Response& r) { print_lock(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* renew = lock->add_subcommand(
      "renew", "extend --owner's lease on KEY to now + --ttl-ms; exit 9 if it is not the holder any more, 10 if the "
               "lock was cancelled (stop the work: the lock is freed)");
  renew->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  renew->add_option("--owner", a->owner, "the holder")->required()->check(kId);
  renew->add_option("--ttl-ms", a->ttl_ms, "the new lease, from now")
      ->required()
      ->transform(integer_range(1, limits::kLockTtlMsMax));
  auto* renew_fence = renew->add_option("--fence", a->fence,
                                        "the fence that acquire answered: without it only the owner name is checked")
                          ->transform(integer_range(1, std::numeric_limits<std::int64_t>::max()));
  add_connection_options(renew, a->connection);
  renew->callback([a, &exit_code, renew_fence] {
    client::LockHolder holder{a->lock_key, a->owner, std::nullopt};
    if (renew_fence->count() > 0) holder.fence = a->fence;
    exit_code = run_coordination(
        "lock renew", a->connection, [&](Client& c) { return c.renew_lock(holder, a->ttl_ms); },
        [](const Response& r) { print_lock(r.json()); });
  });

  a = std::make_shared<Args>();
  auto* release = lock->add_subcommand("release", "let go of KEY; exit 9 if --owner (and --fence) is not the holder");
  release->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  release->add_option("--owner", a->owner, "the holder")->required()->check(kId);
  auto* release_fence = release->add_option("--fence", a->fence,
                                            "the fence that acquire answered: without it only the owner name is checked")
                            ->transform(integer_range(1, std::numeric_limits<std::int64_t>::max()));
  add_connection_options(release, a->connection);
  release->callback([a, &exit_code, release_fence] {
    client::LockHolder holder{a->lock_key, a->owner, std::nullopt};
    if (release_fence->count() > 0) holder.fence = a->fence;
    exit_code = run_coordination(
        "lock release", a->connection, [&](Client& c) { return c.release_lock(holder); },
        [&](const Response& r) {
          std::printf("lock %s released by %s\n", a->lock_key.c_str(), a->owner.c_str());
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* cancel = lock->add_subcommand(
      "cancel", "ask KEY's holder to stop: its next renew answers lock_cancelled and the lock is freed");
  cancel->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  add_connection_options(cancel, a->connection);
  cancel->callback([a, &exit_code] {
    exit_code = run_coordination(
        "lock cancel", a->connection, [&](Client& c) { return c.cancel_lock(a->lock_key); },
        [&](const Response& r) {
          const json::value& l = r.json();
          if (member(l, "cancelled").is_bool() && member(l, "cancelled").get_bool()) {
            std::printf("lock %s: its holder %s is asked to stop; its next renew frees the lock\n", a->lock_key.c_str(),
                        field(l, "owner").c_str());
          } else {
            std::printf("lock %s is not held; nothing to cancel\n", a->lock_key.c_str());
          }
          print_fields(l);
        });
  });

  a = std::make_shared<Args>();
  auto* show = lock->add_subcommand("show", "show KEY's lock: holder, fence, lease");
  show->add_option("KEY", a->lock_key, "the lock's key")->required()->check(kId);
  add_connection_options(show, a->connection);
  show->callback([a, &exit_code] {
    exit_code = run_coordination(
        "lock show", a->connection, [&](Client& c) { return c.get_lock(a->lock_key); },
        [](const Response& r) { print_lock(r.json()); });
  });
}

void add_idempotency_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* idem = app.add_subcommand(
      "idem", "idempotency keys for your own side effects: begin, do it once, finish (admin key)");
  idem->require_subcommand(1);

  a = std::make_shared<Args>();
  auto* begin = idem->add_subcommand(
      "begin", "claim KEY for the request --fingerprint names: exit 0 go ahead; 11 finished before (its response is "
               "printed: do not do it again); 12 in progress elsewhere");
  begin->add_option("KEY", a->lock_key, "the idempotency key")->required()->check(kId);
  begin->add_option("--fingerprint", a->fingerprint, "what the request is (e.g. a hash of its body), 1-256 bytes")
      ->required()
      ->check(kFingerprint);
  begin->add_option("--ttl-ms", a->ttl_ms, "the claim, from now: finish or abandon before it runs out")
      ->required()
      ->transform(integer_range(1, limits::kIdempotencyTtlMsMax));
  add_connection_options(begin, a->connection);
  begin->callback([a, &exit_code] {
    Response last = Response::success(0, nullptr);
    exit_code = run_coordination(
        "idem begin", a->connection,
        [&](Client& c) {
          last = c.begin_idempotency(a->lock_key, a->fingerprint, a->ttl_ms);
          return last;
        },
        [&](const Response& r) {
          if (r.status() == 201) {
            std::printf("idempotency key %s started: go ahead, then finish it before %s\n", a->lock_key.c_str(),
                        field(r.json(), "expires_at").c_str());
          } else {
            std::printf("idempotency key %s finished at %s; its response:\n%s\n", a->lock_key.c_str(),
                        field(r.json(), "finished_at").c_str(), json::serialize(member(r.json(), "response")).c_str());
          }
          print_fields(r.json());
        });
    if (exit_code == kExitOk && last.status() != 201) {
      note("idem begin", "already finished: replay its response, do not do it again (exit " +
                             std::to_string(kExitReplayed) + ")");
      exit_code = kExitReplayed;
    }
  });

  a = std::make_shared<Args>();
  auto* finish = idem->add_subcommand("finish", "store KEY's outcome (--response) to replay to every later begin");
  finish->add_option("KEY", a->lock_key, "the idempotency key")->required()->check(kId);
  finish->add_option("--fingerprint", a->fingerprint, "the fingerprint it was begun with")
      ->required()
      ->check(kFingerprint);
  finish->add_option("--response", a->response, "the JSON value to replay (not null, at most 32 KiB)")
      ->required()
      ->check(kResponseJson);
  add_connection_options(finish, a->connection);
  finish->callback([a, &exit_code] {
    const json::value response = json::parse(a->response);
    exit_code = run_coordination(
        "idem finish", a->connection,
        [&](Client& c) { return c.finish_idempotency(a->lock_key, a->fingerprint, response); },
        [&](const Response& r) {
          std::printf("idempotency key %s finished; its response is replayed to every later begin\n",
                      a->lock_key.c_str());
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* abandon = idem->add_subcommand("abandon", "give KEY back after a failure that did nothing: it can be begun again");
  abandon->add_option("KEY", a->lock_key, "the idempotency key")->required()->check(kId);
  abandon->add_option("--fingerprint", a->fingerprint, "the fingerprint it was begun with")
      ->required()
      ->check(kFingerprint);
  add_connection_options(abandon, a->connection);
  abandon->callback([a, &exit_code] {
    exit_code = run_coordination(
        "idem abandon", a->connection, [&](Client& c) { return c.abandon_idempotency(a->lock_key, a->fingerprint); },
        [&](const Response& r) {
          std::printf("idempotency key %s abandoned: it can be begun again\n", a->lock_key.c_str());
          print_fields(r.json());
        });
  });
}

void add_ratelimit_commands(CLI::App& app, int& exit_code) {
  std::shared_ptr<Args> a;
  auto* ratelimit = app.add_subcommand("ratelimit", "rate limits of the policies in the server's configuration (admin key)");
  ratelimit->require_subcommand(1);

  // The limited key is the second word, not --key: --key is the API key of every command.
  a = std::make_shared<Args>();
  auto* check = ratelimit->add_subcommand(
      "check", "count one attempt of KEY under POLICY; exit 13 if refused (retry_after_ms on stderr)");
  check->add_option("POLICY", a->policy, "a policy named in the server's configuration")->required()->check(kId);
  check->add_option("KEY", a->lock_key, "what is limited: a user, an address…")->required()->check(kId);
  auto* cost = check->add_option("--cost", a->cost, "units this attempt counts (default 1; at most the policy's limit)")
                   ->transform(integer_range(1, limits::kRateLimitMax));
  add_connection_options(check, a->connection);
  check->callback([a, &exit_code, cost] {
    std::optional<std::int64_t> units;
    if (cost->count() > 0) units = a->cost;
    exit_code = run_coordination(
        "ratelimit check", a->connection, [&](Client& c) { return c.check_ratelimit(a->policy, a->lock_key, units); },
        [&](const Response& r) {
          std::printf("allowed: %s remaining, a full budget again in %s ms\n", field(r.json(), "remaining").c_str(),
                      field(r.json(), "reset_after_ms").c_str());
          print_fields(r.json());
        });
  });

  a = std::make_shared<Args>();
  auto* reset = ratelimit->add_subcommand("reset", "forget KEY under POLICY: a full budget again (e.g. after a good login)");
  reset->add_option("POLICY", a->policy, "a policy named in the server's configuration")->required()->check(kId);
  reset->add_option("KEY", a->lock_key, "what is limited")->required()->check(kId);
  add_connection_options(reset, a->connection);
  reset->callback([a, &exit_code] {
    exit_code = run_coordination(
        "ratelimit reset", a->connection, [&](Client& c) { return c.reset_ratelimit(a->policy, a->lock_key); },
        [&](const Response& r) {
          std::printf("rate limit %s: %s has a full budget again\n", a->policy.c_str(), a->lock_key.c_str());
          print_fields(r.json());
        });
  });
}

// --- events -----------------------------------------------------------------------------------------
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }

const std::vector<Column> kEventColumns = {
    {"EVENT", true, 5},     {"TYPE", false, 13},     {"AMOUNT", true, 8}, {"AVAILABLE", true, 9},
    {"RESERVED", true, 8}, {"USED", true, 8},       {"HOLD/REFERENCE", false, 24}, {"AT", false, 24}};

// The change feed's table: every account's events, so each row names its account.
const std::vector<Column> kFeedColumns = {
    {"EVENT", true, 5},     {"ACCOUNT", false, 12},  {"TYPE", false, 13},           {"AMOUNT", true, 8},
    {"AVAILABLE", true, 9}, {"RESERVED", true, 8},   {"USED", true, 8},             {"HOLD/REFERENCE", false, 24},
    {"AT", false, 24}};

std::vector<std::vector<std::string>> event_rows(const json::array& events, bool with_account) {
  std::vector<std::vector<std::string>> rows;
  for (const json::value& e : events) {
    std::string what = field(e, "hold_id");
    if (what == "-") what = field(e, "job_id");
    if (what == "-") what = field(e, "reference");
    std::vector<std::string> row{field(e, "event_id"), field(e, "type"), field(e, "amount"),
                                 field(e, "available_after"), field(e, "reserved_after"), field(e, "used_after"),
                                 what, field(e, "at")};
    if (with_account) row.insert(row.begin() + 1, field(e, "account_id"));
    rows.push_back(std::move(row));
  }
  return rows;
}

// The id of the newest event (the feed's, or `account`'s): the feed answers after=latest; an
// account's trail is paged through to its end, unprinted. The failed answer when one fails.
std::variant<std::int64_t, Response> events_head(Client& client, const std::string& account,
                                                            std::int64_t page_size, std::optional<std::int64_t> limit) {
  if (account.empty()) {
    Response r = client.feed_head();
    if (!r.ok()) return r;
    return number(r.json(), "next_after");
  }
  std::int64_t after = 0;
  for (;;) {
    Response r = client.events(account, after, limit);
    if (!r.ok()) return r;
    after = std::max(after, number(r.json(), "next_after"));
    if (static_cast<std::int64_t>(array_field(r.json(), "events").size()) < page_size) return after;
  }
}

int run_events(const Args& a, std::optional<std::int64_t> limit, bool after_given) {
  const std::string command = "events";
  Client client = make_client(a.connection);
  const std::int64_t page_size = limit.value_or(kPageDefault);
  // No account: the change feed of every account (admin key); following it long-polls (wait_ms),
  // so a new event shows at once instead of at the next poll.
  const bool feed = a.account_id.empty();
  const auto& columns = feed ? kFeedColumns : kEventColumns;
  const auto fetch = [&](std::int64_t after, bool wait) {
    // With --timeout-ms (which bounds each poll) the server holds an empty read for at most half of it.
    const std::int64_t feed_wait = a.connection.timeout_ms > 0 ? std::min(kFeedWaitMs, a.connection.timeout_ms / 2) : kFeedWaitMs;
    if (feed) return client.feed(after, limit, wait ? std::optional<std::int64_t>(feed_wait) : std::nullopt);
    return client.events(a.account_id, after, limit);
  };
  if (!a.follow) {
    const Response r = fetch(a.after, false);
    if (!r.ok()) return report_failure(command, a.connection, r);
    if (a.connection.json) {
      print_json_line(r.json());
      return kExitOk;
    }
    const json::array& events = array_field(r.json(), "events");
    if (events.empty()) {
      std::printf("no events after %lld\n", static_cast<long long>(a.after));
      return kExitOk;
    }
    print_table(columns, event_rows(events, feed), true, true);
    if (static_cast<std::int64_t>(events.size()) >= page_size) {
      note(command, "there may be more: --after " + field(r.json(), "next_after"));
    }
    return kExitOk;
  }

  // --follow: poll with the cursor until interrupted (SIGINT/SIGTERM end it with exit 0).
  g_interrupted = 0;
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
  std::int64_t after = a.after;
  if (!after_given && !a.from_start) {  // from the head: only what comes next
    auto head = events_head(client, a.account_id, page_size, limit);
    if (const auto* failed = std::get_if<Response>(&head)) return report_failure(command, a.connection, *failed);
    after = std::get<std::int64_t>(head);
  }
  bool header_printed = false;
  while (!g_interrupted) {
    const Response r = fetch(after, true);
    if (!r.ok()) {
      if (g_interrupted) break;
      return report_failure(command, a.connection, r);
    }
    const json::array& events = array_field(r.json(), "events");
    if (!events.empty()) {
      if (a.connection.json) {
        print_json_line(r.json());
      } else {
        print_table(columns, event_rows(events, feed), !header_printed, false);
        header_printed = true;
      }
    }
    after = std::max(after, number(r.json(), "next_after"));
    if (static_cast<std::int64_t>(events.size()) >= page_size) continue;  // more are waiting: no pause
    if (feed) continue;  // the server already waited for something new
    for (auto slept = std::chrono::milliseconds(0); slept < kFollowInterval && !g_interrupted;
         slept += std::chrono::milliseconds(50)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return kExitOk;
}

void add_events_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto* events = app.add_subcommand(
      "events", "an account's audit trail, oldest first; without ACCOUNT, every account's (admin key: the change feed)");
  events->add_option("ACCOUNT", a->account_id, "account id (none: every account's events in commit order)")->check(kId);
  auto* after = events->add_option("--after", a->after, "only events after this event id (a cursor: next_after)");
  after->transform(integer_range(0, std::numeric_limits<std::int64_t>::max()));
  auto* limit = events->add_option("--limit", a->limit, "at most this many per page (server default 100)")
                    ->transform(integer_range(1, limits::kEventsPageMax));
  events->add_flag("--follow,-f", a->follow,
                   "keep reading new events until interrupted, from the newest on unless --after or --from-start "
                   "is given (an account's: polled every 500 ms; the feed: long-polled)");
  events->add_flag("--from-start", a->from_start, "with --follow: show every event from the first one, then follow");
  add_connection_options(events, a->connection);
  events->callback([a, &exit_code, limit, after] {
    exit_code = run_events(*a, limit->count() > 0 ? std::optional<std::int64_t>(a->limit) : std::nullopt,
                           after->count() > 0);
  });
}

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

void add_transfer_command(CLI::App& app, int& exit_code) {
  auto* transfer = app.add_subcommand("transfer", "look up credits and debits by their reference");
  transfer->require_subcommand(1);
  auto a = std::make_shared<Args>();
  auto* show = transfer->add_subcommand("show", "the credit or debit recorded under REFERENCE (an answer lost: look here)");
  show->add_option("REFERENCE", a->reference, "the reference it was made with")->required()->check(kId);
  add_connection_options(show, a->connection);
  show->callback([a, &exit_code] {
    exit_code = run(
        "transfer show", a->connection, [&](Client& c) { return c.get_transfer(a->reference); },
        [](const Response& r) { print_fields(r.json()); });
  });
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
  add_key_commands(app, exit_code);
  add_hold_commands(app, exit_code);
  add_job_commands(app, exit_code);
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
      "before (its response is printed), 12 in progress elsewhere; `ratelimit check`: 13 refused.");
}

}  // namespace tollgate::app
