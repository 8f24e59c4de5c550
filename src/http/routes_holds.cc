// Routes of holds: reserve, read, list, commit, release, extend.
#include "core/checked.h"
#include "core/limits.h"
#include "http/routes.h"

namespace tollgate::http {

void reserve(Context& ctx, Call& call) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto account_id = f.id("account_id");
  TG_REPLY_IF_ERROR(account_id);
  auto amount = f.amount("amount");
  TG_REPLY_IF_ERROR(amount);
  auto request_id = f.id("request_id");
  TG_REPLY_IF_ERROR(request_id);
  auto ttl = f.integer("ttl_ms", limits::kHoldTtlMsMin, ctx.ledger.options().hold_ttl_ms_max);
  TG_REPLY_IF_ERROR(ttl);
  auto metadata = f.object("metadata", limits::kMetadataBytesMax);
  TG_REPLY_IF_ERROR(metadata);
  TG_REPLY_IF_ERROR(f.finish());
  if (auto e = check_account_visible(call.principal, *account_id)) return call.reply(problem(*e));
  submit(ctx, call, ReserveCommand{*account_id, *amount, *request_id, *ttl, metadata->value_or("{}"), ""},
         [](const CommandResult& r) {
           const auto& o = outcome<HoldOutcome>(r);
           return value_response(o.created ? 201 : 200, o.hold);
         });
}

namespace {

// Reads a hold for an account key's check: 404 unless the caller may see its account.
Result<Hold> visible_hold(Ledger& ledger, const Call& call) {
  auto hold = ledger.get_hold(call.params[0]);
  if (!hold) return hold.error();
  if (!call.principal.may_see(hold->account_id)) return not_found("hold " + call.params[0]);
  return hold;
}

void count_hold_outcome(Metrics& m, const Hold& hold) {
  switch (hold.status) {
    case HoldStatus::committed: m.holds_committed.fetch_add(1, std::memory_order_relaxed); break;
    case HoldStatus::released: m.holds_released.fetch_add(1, std::memory_order_relaxed); break;
    default: break;
  }
  if (hold.late_outcome == LateOutcome::charged) m.holds_late_charged.fetch_add(1);
  if (hold.late_outcome == LateOutcome::forgiven) m.holds_late_forgiven.fetch_add(1);
}

enum class HoldAction { commit, release, extend };

template <HoldAction kAction>
void change_hold(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "hold_id"); !s) return call.reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  Command command;
  if constexpr (kAction == HoldAction::commit) {
    auto amount = f.optional_amount("amount");
    TG_REPLY_IF_ERROR(amount);
    command = CommitCommand{call.params[0], *amount};
  } else if constexpr (kAction == HoldAction::release) {
    auto reason = f.string("reason", limits::kReasonLengthMax);
    TG_REPLY_IF_ERROR(reason);
    command = ReleaseCommand{call.params[0], *reason};
  } else {
    auto ttl = f.required_integer("ttl_ms", limits::kHoldTtlMsMin, ctx.ledger.options().hold_ttl_ms_max);
    TG_REPLY_IF_ERROR(ttl);
    command = ExtendCommand{call.params[0], *ttl};
  }
  TG_REPLY_IF_ERROR(f.finish());
  if (!call.principal.admin) {
    auto hold = visible_hold(ctx.ledger, call);
    TG_REPLY_IF_ERROR(hold);
  }
  submit(ctx, call, std::move(command), [&metrics = ctx.metrics](const CommandResult& r) {
    const auto& o = outcome<HoldOutcome>(r);
    if (o.created && kAction != HoldAction::extend) count_hold_outcome(metrics, o.hold);
    return value_response(200, o.hold);
  });
}

}  // namespace

void get_hold(Context& ctx, Call& call) {
  auto hold = visible_hold(ctx.ledger, call);
  TG_REPLY_IF_ERROR(hold);
  call.reply(value_response(200, *hold));
}

void list_holds(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"account_id", "status", "limit"}));
  HoldFilter filter;
  if (auto it = call.query.find("account_id"); it != call.query.end()) {
    if (auto s = check_id(it->second, "account_id"); !s) return call.reply(problem(s.error()));
    filter.account_id = it->second;
  }
  if (auto it = call.query.find("status"); it != call.query.end()) {
    filter.status = parse_hold_status(it->second);
    if (!filter.status) return call.reply(problem(invalid("status must be active, committed, released or expired")));
  }
  auto limit = query_int(call, "limit", 100, 1, limits::kHoldsPageMax);
  TG_REPLY_IF_ERROR(limit);
  filter.limit = *limit;
  if (!call.principal.admin) {
    if (filter.account_id && *filter.account_id != *call.principal.account_id) {
      return call.reply(problem(not_found("account " + *filter.account_id)));
    }
    filter.account_id = call.principal.account_id;
  }
  auto holds = ctx.ledger.list_holds(filter);
  TG_REPLY_IF_ERROR(holds);
  call.reply(written_response(200, [&](std::string& out) {
    out += "{\"holds\":[";
    for (std::size_t i = 0; i < holds->size(); ++i) {
      if (i > 0) out += ',';
      append_json(out, (*holds)[i]);
    }
    out += "]}";
  }));
}

void commit_hold(Context& ctx, Call& call) { change_hold<HoldAction::commit>(ctx, call); }
void release_hold(Context& ctx, Call& call) { change_hold<HoldAction::release>(ctx, call); }
void extend_hold(Context& ctx, Call& call) { change_hold<HoldAction::extend>(ctx, call); }

}  // namespace tollgate::http
