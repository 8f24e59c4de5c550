// Routes of accounts: create, read, list, credits, debits, transfers by reference, the account's events.
#include "core/checked.h"
#include "core/limits.h"
#include "http/routes.h"

namespace tollgate::http {

void create_account(Context& ctx, Call& call) {
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto account_id = f.id("account_id");
  TG_REPLY_IF_ERROR(account_id);
  auto overdraft = f.integer("overdraft_limit", 0, limits::kOverdraftLimitMax);
  TG_REPLY_IF_ERROR(overdraft);
  auto max_holds = f.integer("max_active_holds", 1, limits::kMaxActiveHoldsMax);
  TG_REPLY_IF_ERROR(max_holds);
  TG_REPLY_IF_ERROR(f.finish());
  submit(ctx, call, CreateAccountCommand{*account_id, overdraft->value_or(0), *max_holds}, [](const CommandResult& r) {
    const auto& o = outcome<AccountOutcome>(r);
    return value_response(o.created ? 201 : 200, o.account);
  });
}

// Every account by account_id ascending, paged (admin).
void list_accounts(Context& ctx, Call& call) {
  TG_REPLY_IF_ERROR(known_query(call, {"limit", "starting_after"}));
  auto page = page_request(call);
  TG_REPLY_IF_ERROR(page);
  auto accounts = ctx.ledger.list_accounts(*page);
  TG_REPLY_IF_ERROR(accounts);
  call.reply(page_response("accounts", *accounts));
}

// The credit or debit recorded under a reference; an account key sees only its own account's (any
// other answers 404, byte for byte as a reference that does not exist).
void get_transfer(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "reference"); !s) return call.reply(problem(s.error()));
  auto transfer = ctx.ledger.get_transfer(call.params[0]);
  if (transfer && !call.principal.may_see(transfer->transfer.account_id)) {
    transfer = transfer_not_found(call.params[0]);
  }
  TG_REPLY_IF_ERROR(transfer);
  call.reply(value_response(200, *transfer));
}

void update_account(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "account_id"); !s) return call.reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto overdraft = f.integer("overdraft_limit", 0, limits::kOverdraftLimitMax);
  TG_REPLY_IF_ERROR(overdraft);
  auto max_holds = f.nullable_integer("max_active_holds", 1, limits::kMaxActiveHoldsMax);
  TG_REPLY_IF_ERROR(max_holds);
  auto frozen = f.boolean("frozen");
  TG_REPLY_IF_ERROR(frozen);
  // Balance notices (docs/api.md): an amount of credits, or null for none.
  auto threshold = f.nullable_integer("low_balance_threshold", 1, limits::kLowBalanceThresholdMax);
  TG_REPLY_IF_ERROR(threshold);
  TG_REPLY_IF_ERROR(f.finish());
  // 200 either way: a change, or a replay that changed nothing (no event).
  submit(ctx, call, UpdateAccountCommand{call.params[0], *overdraft, *max_holds, *frozen, *threshold},
         [](const CommandResult& r) { return value_response(200, outcome<AccountOutcome>(r).account); });
}

void get_account(Context& ctx, Call& call) {
  if (auto e = check_account_visible(call.principal, call.params[0])) return call.reply(problem(*e));
  auto account = ctx.ledger.get_account(call.params[0]);
  TG_REPLY_IF_ERROR(account);
  call.reply(value_response(200, *account));
}

namespace {

template <bool kCredit>
void transfer(Context& ctx, Call& call) {
  if (auto s = check_id(call.params[0], "account_id"); !s) return call.reply(problem(s.error()));
  auto body = body_object(call);
  TG_REPLY_IF_ERROR(body);
  FieldReader f(*body);
  auto amount = f.amount("amount");
  TG_REPLY_IF_ERROR(amount);
  auto reference = id_or_idempotency_key(f, call, "reference");
  TG_REPLY_IF_ERROR(reference);
  Command command = CreditCommand{call.params[0], *amount, *reference};
  if (kCredit) {
    auto terms = lot_terms(f);
    TG_REPLY_IF_ERROR(terms);
    std::get<CreditCommand>(command).lot = *terms;
  } else {
    auto reason = f.required_string("reason", limits::kReasonLengthMax);
    TG_REPLY_IF_ERROR(reason);
    command = DebitCommand{call.params[0], *amount, *reference, *reason};
  }
  TG_REPLY_IF_ERROR(f.finish());
  submit(ctx, call, std::move(command), [](const CommandResult& r) {
    const auto& o = outcome<TransferOutcome>(r);
    return written_response(o.created ? 201 : 200, [&](std::string& out) {
      out += "{\"event\":";
      append_json(out, o.event);
      out += ",\"account\":";
      append_json(out, o.account);
      out += '}';
    });
  });
}

}  // namespace

void credit(Context& ctx, Call& call) { transfer<true>(ctx, call); }
void debit(Context& ctx, Call& call) { transfer<false>(ctx, call); }

void account_events(Context& ctx, Call& call) {
  if (auto e = check_account_visible(call.principal, call.params[0])) return call.reply(problem(*e));
  TG_REPLY_IF_ERROR(known_query(call, {"after", "limit"}));
  auto after = query_int(call, "after", 0, 0, std::numeric_limits<std::int64_t>::max());
  TG_REPLY_IF_ERROR(after);
  auto limit = query_int(call, "limit", limits::kPageDefault, 1, limits::kEventsPageMax);
  TG_REPLY_IF_ERROR(limit);
  auto page = ctx.ledger.read_events(call.params[0], *after, *limit);
  TG_REPLY_IF_ERROR(page);
  call.reply(written_response(200, [&](std::string& out) {
    out += "{\"events\":[";
    for (std::size_t i = 0; i < page->events.size(); ++i) {
      if (i > 0) out += ',';
      append_json(out, page->events[i]);
    }
    out += "],\"next_after\":";
    append_json_int(out, page->next_after);
    out += '}';
  }));
}

}  // namespace tollgate::http
