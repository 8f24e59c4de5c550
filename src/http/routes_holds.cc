// Routes of holds: reserve, read, list, commit, release, extend.
#include "core/checked.h"
#include "core/hold_id.h"
#include "core/limits.h"
#include "http/routes.h"

namespace tollgate::http {

// A reservation by amount, or by feature and quantity at the feature's current price (the price
// slice computes the amount in the batch).
void reserve(Context& ctx, Call& call) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto what = read_what_to_reserve(f);
  TG_REPLY_IF_ERROR(what);
  auto request_id = id_or_idempotency_key(f, call, "request_id");
  TG_REPLY_IF_ERROR(request_id);
  auto ttl = f.integer("ttl_ms", limits::kHoldTtlMsMin, ctx.ledger.options().hold_ttl_ms_max);
  TG_REPLY_IF_ERROR(ttl);
  auto metadata = f.object("metadata", limits::kMetadataBytesMax);
  TG_REPLY_IF_ERROR(metadata);
  TG_REPLY_IF_ERROR(f.finish());
  TG_REPLY_IF_ERROR(priced_or_amount(*what));
  if (auto e = check_account_visible(call.principal, what->account_id)) return call.reply(problem(*e));
  ReserveCommand command{what->account_id, what->amount.value_or(0), *request_id, *ttl, metadata->value_or("{}"), ""};
  if (what->feature) {
    return submit(ctx, call, ReserveByFeatureCommand{std::move(command), *what->feature, what->quantity.value_or(1)},
                  [](const CommandResult& r) {
                    const auto& o = outcome<PricedHoldOutcome>(r);
                    return value_response(o.created ? 201 : 200, PricedHoldView{o.hold, o.priced});
                  });
  }
  submit(ctx, call, std::move(command), [](const CommandResult& r) {
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

// What the hold was priced at, when it was reserved by feature (nullopt: by amount).
Result<std::optional<prices::PricedHold>> priced_of(Ledger& ledger, const Hold& hold) {
  const auto seq = hold_id_seq(hold.hold_id);
  TG_ASSERT(seq.has_value());  // a stored hold's id is one the ledger made
  const std::int64_t seqs[] = {*seq};
  auto priced = ledger.price_reads().priced_holds(seqs);
  if (!priced) return priced.error();
  auto it = priced->find(*seq);
  if (it == priced->end()) return std::optional<prices::PricedHold>();
  return std::optional<prices::PricedHold>(std::move(it->second));
}

// A commit by quantity (on a reader thread): the hold's frozen unit price × quantity.
void commit_by_quantity(Context& ctx, Call& call, std::int64_t quantity) {
  auto hold = visible_hold(ctx.ledger, call);
  TG_REPLY_IF_ERROR(hold);
  auto priced = priced_of(ctx.ledger, *hold);
  TG_REPLY_IF_ERROR(priced);
  if (!*priced) {
    return call.reply(problem(invalid("hold " + hold->hold_id +
                                      " was reserved by amount, not by feature: commit it by amount")));
  }
  auto amount = prices::priced_amount(quantity, (*priced)->unit_price);
  TG_REPLY_IF_ERROR(amount);
  submit(ctx, call, CommitCommand{hold->hold_id, *amount}, [priced = **priced](const CommandResult& r) {
    return value_response(200, PricedHoldView{outcome<HoldOutcome>(r).hold, priced});
  });
}

enum class HoldAction { commit, release, extend };

// Parses the change and submits it; with kCheckVisible (an account key: on a reader thread) only
// after reading the hold and checking that the key may see its account.
template <HoldAction kAction, bool kCheckVisible>
void change_hold_now(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "hold_id"); !s) return call.reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  Command command;
  if constexpr (kAction == HoldAction::commit) {
    auto amount = f.optional_amount("amount");
    TG_REPLY_IF_ERROR(amount);
    auto quantity = f.optional_amount("quantity");
    TG_REPLY_IF_ERROR(quantity);
    if (*quantity) {
      TG_REPLY_IF_ERROR(f.finish());
      if (*amount) return call.reply(problem(invalid("give either amount or quantity, not both")));
      // The hold's unit price is a read: an admin's commit by quantity moves to a reader thread.
      if constexpr (!kCheckVisible) return on_reader(ctx, call, &change_hold_now<HoldAction::commit, true>);
      else return commit_by_quantity(ctx, call, **quantity);
    }
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
  if constexpr (kCheckVisible) {
    auto hold = visible_hold(ctx.ledger, call);
    TG_REPLY_IF_ERROR(hold);
  }
  submit(ctx, call, std::move(command),
         [](const CommandResult& r) { return value_response(200, outcome<HoldOutcome>(r).hold); });
}

// An admin's change goes straight to the ledger; an account key's needs a read first (reader executor).
template <HoldAction kAction>
void change_hold(Context& ctx, Call& call) {
  if (call.principal.admin) return change_hold_now<kAction, false>(ctx, call);
  on_reader(ctx, call, &change_hold_now<kAction, true>);
}

}  // namespace

void get_hold(Context& ctx, Call& call) {
  auto hold = visible_hold(ctx.ledger, call);
  TG_REPLY_IF_ERROR(hold);
  auto priced = priced_of(ctx.ledger, *hold);
  TG_REPLY_IF_ERROR(priced);
  call.reply(value_response(200, PricedHoldView{std::move(*hold), std::move(*priced)}));
}

// Newest first, paged; an account key lists only its own account's holds (another account: 404).
void list_holds(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"account_id", "status", "request_id", "limit", "starting_after"}));
  HoldQuery query;
  auto account_id = listed_account(call);
  TG_REPLY_IF_ERROR(account_id);
  query.account_id = std::move(*account_id);
  if (auto it = call.query.find("status"); it != call.query.end()) {
    query.status = parse_hold_status(it->second);
    if (!query.status) return call.reply(problem(invalid("status must be active, committed, released or expired")));
  }
  if (auto it = call.query.find("request_id"); it != call.query.end()) {
    if (auto s = check_id(it->second, "request_id"); !s) return call.reply(problem(s.error()));
    query.request_id = it->second;
  }
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto holds = ctx.ledger.list_holds(query, *page);
  TG_REPLY_IF_ERROR(holds);
  std::vector<std::int64_t> seqs;
  for (const Hold& h : holds->items) {
    if (auto seq = hold_id_seq(h.hold_id)) seqs.push_back(*seq);
  }
  auto priced = ctx.ledger.price_reads().priced_holds(seqs);  // a page's priced holds, in one read
  TG_REPLY_IF_ERROR(priced);
  Page<PricedHoldView> answer{{}, holds->has_more};
  answer.items.reserve(holds->items.size());
  for (Hold& h : holds->items) {
    const auto seq = hold_id_seq(h.hold_id);
    auto it = seq ? priced->find(*seq) : priced->end();
    answer.items.push_back(PricedHoldView{std::move(h), it == priced->end() ? std::nullopt : std::optional(it->second)});
  }
  call.reply(page_response("holds", answer));
}

void commit_hold(Context& ctx, Call& call) { change_hold<HoldAction::commit>(ctx, call); }
void release_hold(Context& ctx, Call& call) { change_hold<HoldAction::release>(ctx, call); }
void extend_hold(Context& ctx, Call& call) { change_hold<HoldAction::extend>(ctx, call); }

}  // namespace tollgate::http
