// tollgate cli: what every client command shares — arguments, output, failures, paging (common.h).

#include <cstdlib>
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

#include "core/clock.h"
#include "core/limits.h"
#include "core/checked.h"
#include "core/parse.h"
#include "core/result.h"
#include "core/suggest.h"
#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {

// Cheap local checks; the server stays the authority.
extern const CLI::Validator kId(
    [](std::string& s) -> std::string {
      return id_is_valid(s) ? std::string()  // the server's own rule (core/checked.h)
                            : "must be 1-128 characters of [A-Za-z0-9._:@-], not \".\" or \"..\", got \"" + s + "\"";
    },
    "ID", "id");

extern const CLI::Validator kAmount(
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

namespace {

// --expires-in: at most this many seconds (100 years; the server may allow less).
constexpr std::int64_t kExpiresInSecondsMax = 100LL * 366 * 24 * 3600;

// "30d", "12h", "90m", "45s" → seconds; a usage error for anything else.
std::int64_t duration_seconds(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return CLI::ValidationError("--expires-in", why + ", got \"" + text + "\" (e.g. 30d, 12h, 90m, 45s)");
  };
  if (text.size() < 2) throw bad("must be a number and a unit (s, m, h or d)");
  const char unit = text.back();
  std::int64_t per = 0;
  switch (unit) {
    case 's': per = 1; break;
    case 'm': per = 60; break;
    case 'h': per = 3600; break;
    case 'd': per = 86400; break;
    default: throw bad(std::string("unknown unit '") + unit + "': the units are s, m, h and d");
  }
  const std::string_view digits(text.data(), text.size() - 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw bad("must be a whole number above 0 and a unit");
  }
  const std::optional<std::int64_t> n = parse_int(digits, 0, kExpiresInSecondsMax);
  if (!n || *n == 0 || *n > kExpiresInSecondsMax / per) {
    throw bad("must be above 0 and at most 100 years");
  }
  return *n * per;
}

}  // namespace

void add_expiry_options(CLI::App* command, ExpiryOptions& e, const std::string& what) {
  e.in_option = command->add_option("--expires-in", e.in,
                                    what + " after this long: 30d, 12h, 90m, 45s (counted from this machine's clock)");
  e.at_option =
      command->add_option("--expires-at", e.at, what + " at this RFC 3339 time (e.g. 2027-01-31T12:00:00Z)");
}

std::optional<std::string> expiry_of(const ExpiryOptions& e) {
  if (e.in_option->count() > 0 && e.at_option->count() > 0) {
    throw CLI::ValidationError("--expires-in", "give --expires-in or --expires-at, not both");
  }
  if (e.in_option->count() > 0) {
    const std::int64_t seconds = duration_seconds(e.in);
    const auto now = std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
    return format_rfc3339_ms(now.time_since_epoch().count() + seconds * 1000);
  }
  if (e.at_option->count() > 0) {
    if (!parse_rfc3339_ms(e.at)) {
      throw CLI::ValidationError("--expires-at",
                                 "must be an RFC 3339 time such as 2027-01-31T12:00:00Z, got \"" + e.at + "\"");
    }
    return e.at;
  }
  return std::nullopt;
}

// `with_timeout` false: the command has its own --timeout-ms (job wait).
void add_connection_options(CLI::App* command, Connection& c, bool with_timeout) {
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

namespace {

// A field's value for people: a hold's draw (`lots: [{lot_id, amount}]`) as "lot_1:3 lot_2:2"
// ("none" when it took nothing from a lot), anything else as text().
std::string field_text(std::string_view key, const json::value& value) {
  if (key != "lots" || !value.is_array()) return text(value);
  std::string out;
  for (const json::value& part : value.get_array()) {
    out += (out.empty() ? "" : " ") + field(part, "lot_id") + ":" + field(part, "amount");
  }
  return out.empty() ? "none" : out;
}

}  // namespace

// "key:  value" lines, values aligned, in the server's field order.
void print_fields(const json::value& v) {
  if (!v.is_object()) return print_json_line(v);
  std::size_t width = 0;
  for (const auto& [k, value] : v.get_object()) width = std::max(width, k.size() + 1);
  for (const auto& [k, value] : v.get_object()) {
    const std::string key = std::string(k) + ":";
    std::printf("%-*s  %s\n", static_cast<int>(width), key.c_str(), field_text(k, value).c_str());
  }
}

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

void note(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "tollgate: %s: %s\n", command.c_str(), message.c_str());
}

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

}  // namespace tollgate::app::cli
