// tollgate cli: `account …` and `transfer show` — the client side of routes_accounts.cc.

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/parse.h"
#include "core/limits.h"
#include "core/result.h"
#include "core/suggest.h"
#include "tollgate/client.h"

#include "app/cli/common.h"

namespace tollgate::app::cli {
namespace {

// An option's check: "none", or an integer from min to max.
std::function<std::string(const std::string&)> none_or_integer(std::int64_t min, std::int64_t max) {
  return [min, max](const std::string& v) -> std::string {
    if (v == "none") return "";
    std::string number = v;
    return integer_range(min, max)(number).empty()
               ? ""
               : "must be none or from " + std::to_string(min) + " to " + std::to_string(max);
  };
}

// The value of an option checked by none_or_integer(min, max): nullopt for "none".
std::optional<std::int64_t> none_or_int(const std::string& text, std::int64_t min, std::int64_t max) {
  if (text == "none") return std::nullopt;
  const auto n = parse_int(text, min, max);
  TG_ASSERT(n.has_value());  // the option's check read it
  return n;
}


// What `account credit` parses into, beside Args: the lot's fields (api.md, Credit lots).
struct CreditArgs {
  ExpiryOptions expiry;
  std::int64_t priority = 0;
  std::string category;
  CLI::Option* priority_option = nullptr;
  CLI::Option* category_option = nullptr;
};

// The request of `account credit` from its flags, or a usage error naming the flag (nothing sent).
client::CreditRequest credit_request(const Args& a, const CreditArgs& k) {
  client::CreditRequest r{a.amount, a.reference, expiry_of(k.expiry), std::nullopt, std::nullopt};
  if (k.priority_option->count() > 0) r.priority = k.priority;
  if (k.category_option->count() > 0) r.category = k.category;
  return r;
}

// "credited 10 to alice (event 7, reference buy-1)" and the lot it made (none: the credit only paid
// the account's debt — available is still 0 or below —, or a server older than lots); or the replay.
void print_credit(const Args& a, const Response& r) {
  const json::value& event = member(r.json(), "event");
  if (r.status() == 201) {
    std::printf("credited %s to %s (event %s, reference %s)\n", field(event, "amount").c_str(), a.account_id.c_str(),
                field(event, "event_id").c_str(), a.reference.c_str());
    const std::string lot = field(event, "lot_id");
    if (lot != "-") {
      std::printf("new lot %s\n", lot.c_str());
    } else if (number(event, "available_after") <= 0) {
      std::printf("no new lot: the credit only paid the account's debt\n");
    }
  } else {
    std::printf("reference %s was already credited to %s (event %s); nothing added\n", a.reference.c_str(),
                a.account_id.c_str(), field(event, "event_id").c_str());
  }
  print_fields(member(r.json(), "account"));
}

void add_account_credit(CLI::App* account, int& exit_code) {
  auto a = std::make_shared<Args>();
  auto k = std::make_shared<CreditArgs>();
  auto* credit = account->add_subcommand(
      "credit", "add purchased credits as a new lot (admin key); a reference counts once");
  credit->add_option("ID", a->account_id, "account id")->required()->check(kId);
  credit->add_option("AMOUNT", a->amount, "credits, 1 to 2^53-1")->required()->transform(kAmount);
  credit->add_option("--reference", a->reference, "your unique id of this purchase (repeating it adds nothing)")
      ->required()
      ->check(kId);
  add_expiry_options(credit, k->expiry, "the lot's unspent credits expire");
  k->priority_option = credit->add_option("--priority", k->priority, "the lot's priority: lower is spent first "
                                                                     "(server default 50)")
                           ->transform(integer_range(0, limits::kLotPriorityMax));  // lower is spent first
  k->category_option = credit->add_option("--category", k->category, "paid (server default) or promotional")
                           ->check(CLI::IsMember({"paid", "promotional"}));
  add_connection_options(credit, a->connection);
  credit->callback([a, k, &exit_code] {
    const client::CreditRequest request = credit_request(*a, *k);
    exit_code = run(
        "account credit", a->connection, [&](Client& c) { return c.credit(a->account_id, request); },
        [&](const Response& r) { print_credit(*a, r); });
  });
}

}  // namespace

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
          ->check(none_or_integer(1, limits::kMaxActiveHoldsMax));
  auto* new_threshold = update
                            ->add_option("--low-balance-threshold", a->low_balance_threshold_text,
                                         "write balance notices when `available` crosses this many credits, or none")
                            ->check(none_or_integer(1, limits::kLowBalanceThresholdMax));
  auto* new_frozen = update->add_option("--frozen", a->frozen_text, "true: refuse new holds and debits; false: allow")
                         ->check(CLI::IsMember({"true", "false"}));
  add_connection_options(update, a->connection);
  update->callback([a, &exit_code, new_overdraft, new_max_holds, new_frozen, new_threshold] {
    client::UpdateAccountRequest request;
    if (new_overdraft->count() > 0) request.overdraft_limit = a->overdraft_limit;
    if (new_max_holds->count() > 0) {
      request.max_active_holds = none_or_int(a->max_active_holds_text, 1, limits::kMaxActiveHoldsMax);
    }
    if (new_frozen->count() > 0) request.frozen = a->frozen_text == "true";
    if (new_threshold->count() > 0) {
      request.low_balance_threshold = none_or_int(a->low_balance_threshold_text, 1, limits::kLowBalanceThresholdMax);
    }
    if (!request.overdraft_limit && !request.max_active_holds && !request.frozen && !request.low_balance_threshold) {
      throw CLI::ValidationError("account update", "give at least one of --overdraft-limit, --max-active-holds, "
                                                   "--frozen, --low-balance-threshold");
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

  add_account_credit(account, exit_code);

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


}  // namespace tollgate::app::cli
