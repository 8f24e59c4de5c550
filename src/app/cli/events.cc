// tollgate cli: `events` (one account, or the change feed) — the client side of routes_events.cc.

#include <variant>
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

volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_interrupt(int) { g_interrupted = 1; }

// The balances after each event, what it concerns, and the credit lot it made or expired (LOT: "-"
// when none).
const std::vector<Column> kEventColumns = {
    {"EVENT", true, 5},    {"TYPE", false, 13}, {"AMOUNT", true, 8},           {"AVAILABLE", true, 9},
    {"RESERVED", true, 8}, {"USED", true, 8},   {"EXPIRED", true, 7},          {"HOLD/REFERENCE", false, 24},
    {"LOT", false, 8},     {"AT", false, 24}};

// The change feed's table: every account's events, so each row names its account.
const std::vector<Column> kFeedColumns = {
    {"EVENT", true, 5},       {"ACCOUNT", false, 12}, {"TYPE", false, 13}, {"AMOUNT", true, 8},
    {"AVAILABLE", true, 9},   {"RESERVED", true, 8},  {"USED", true, 8},   {"EXPIRED", true, 7},
    {"HOLD/REFERENCE", false, 24}, {"LOT", false, 8}, {"AT", false, 24}};

std::vector<std::vector<std::string>> event_rows(const json::array& events, bool with_account) {
  std::vector<std::vector<std::string>> rows;
  for (const json::value& e : events) {
    std::string what = field(e, "hold_id");
    if (what == "-") what = field(e, "job_id");
    if (what == "-") what = field(e, "reference");
    std::vector<std::string> row{field(e, "event_id"),       field(e, "type"),          field(e, "amount"),
                                 field(e, "available_after"), field(e, "reserved_after"), field(e, "used_after"),
                                 field(e, "expired_after"),   what,                      field(e, "lot_id"),
                                 field(e, "at")};
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

}  // namespace

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


}  // namespace tollgate::app::cli
