// The change feed: GET /v1/events?after=&limit=&wait_ms= (admin) — every account's events in
// commit order; with wait_ms, the answer comes as soon as something newer is durable (or when the
// wait is over). A waiting request holds no thread: it is parked with the ledger's event waiters;
// once woken it reads again on the reader executor (http/read_executor.h). `after=latest` starts at
// the head (Store::last_event_id): what a live view follows from.
#include <chrono>
#include <limits>
#include <memory>

#include "core/limits.h"
#include "http/routes.h"

namespace tollgate::http {
namespace {

Response feed_response(const EventPage& page) {
  return written_response(200, [&](std::string& out) {
    out += "{\"events\":[";
    for (std::size_t i = 0; i < page.events.size(); ++i) {
      if (i > 0) out += ',';
      append_json(out, page.events[i]);
    }
    out += "],\"next_after\":";
    append_json_int(out, page.next_after);
    out += '}';
  });
}

}  // namespace

void events_feed(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"after", "limit", "wait_ms"}));
  // after=latest: from the feed's head — nothing that is already there, only what comes next
  // (next_after says where the head was, to go on from).
  const auto given = call.query.find("after");
  const bool latest = given != call.query.end() && given->second == "latest";
  auto after = latest ? ctx.ledger.last_event_id() : query_int(call, "after", 0, 0, std::numeric_limits<std::int64_t>::max());
  if (!after && !latest) {
    return call.reply(problem(invalid(after.error().detail + ", or latest")));
  }
  TG_REPLY_IF_ERROR(after);
  auto limit = query_int(call, "limit", limits::kPageDefault, 1, limits::kEventsPageMax);
  TG_REPLY_IF_ERROR(limit);
  auto wait_ms = query_int(call, "wait_ms", 0, 0, limits::kEventsWaitMsMax);
  TG_REPLY_IF_ERROR(wait_ms);
  auto page = ctx.ledger.read_feed(*after, *limit);
  TG_REPLY_IF_ERROR(page);
  if (!page->events.empty() || *wait_ms == 0) return call.reply(feed_response(*page));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(*wait_ms);
  // Woken (something newer is durable, or the wait is over): read again on the reader executor,
  // like any read — never on the waiters' thread or an I/O thread.
  ctx.ledger.when_events_after(
      *after, deadline,
      [&ledger = ctx.ledger, &readers = ctx.readers, reply = std::move(call.reply), after = *after,
       limit = *limit](Status woke) mutable {
        if (!woke) return reply(problem(woke.error()));
        auto shared_reply = std::make_shared<Reply>(std::move(reply));
        const bool queued = readers.try_post([&ledger, shared_reply, after, limit] {
          auto again = ledger.read_feed(after, limit);
          if (!again) return (*shared_reply)(problem(again.error()));
          (*shared_reply)(feed_response(*again));
        });
        if (!queued) (*shared_reply)(overloaded_reads());
      });
}

}  // namespace tollgate::http
