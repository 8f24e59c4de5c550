#include "core/invariants.h"

#include <string_view>
#include <unordered_map>

#include "core/checked.h"

namespace tollgate::invariants {
namespace {

std::string describe(const Balances& b) {
  return "available=" + std::to_string(b.available) + " reserved=" + std::to_string(b.reserved) +
         " used=" + std::to_string(b.used) + " expired=" + std::to_string(b.expired) +
         " purchased=" + std::to_string(b.purchased);
}

// One hold's life as the log tells it.
struct HoldLife {
  std::int64_t amount = 0;
  bool ended = false;         // committed, released or expired seen
  bool expired = false;       // the end was an expiry
  bool late_settled = false;  // late_charged / late_forgiven seen
  std::int64_t charged = 0;   // committed, or late-charged
  std::int64_t refunded = 0;  // given back by refunded events since
};

}  // namespace

std::vector<std::string> check_balances(const Account& account) {
  std::vector<std::string> out;
  const Balances& b = account.balances;
  const auto sum = checked_add(b.available, b.reserved);
  const auto spent = sum ? checked_add(*sum, b.used) : std::nullopt;
  const auto total = spent ? checked_add(*spent, b.expired) : std::nullopt;
  if (!total || *total != b.purchased) {
    out.push_back(account.account_id + ": available + reserved + used + expired != purchased (" + describe(b) + ")");
  }
  if (b.available < -account.overdraft_limit && !account.frozen) {  // debt (a refund shortfall) freezes
    out.push_back(account.account_id + ": available " + std::to_string(b.available) + " is below -overdraft_limit " +
                  std::to_string(-account.overdraft_limit) + " and the account is not frozen");
  }
  if (b.reserved < 0) out.push_back(account.account_id + ": reserved is negative (" + describe(b) + ")");
  if (b.used < 0) out.push_back(account.account_id + ": used is negative (" + describe(b) + ")");
  if (b.expired < 0) out.push_back(account.account_id + ": expired is negative (" + describe(b) + ")");
  if (account.active_holds < 0) out.push_back(account.account_id + ": active_holds is negative");
  return out;
}

std::vector<std::string> check_active_holds(const Account& account, std::int64_t active_sum,
                                            std::int64_t active_count) {
  std::vector<std::string> out;
  if (account.balances.reserved != active_sum) {
    out.push_back(account.account_id + ": reserved " + std::to_string(account.balances.reserved) +
                  " != sum of active holds " + std::to_string(active_sum));
  }
  if (account.active_holds != active_count) {
    out.push_back(account.account_id + ": active_holds " + std::to_string(account.active_holds) +
                  " != number of active holds " + std::to_string(active_count));
  }
  return out;
}

Fold fold_events(std::span<const Event> events) {
  Fold fold;
  Balances& b = fold.balances;
  std::unordered_map<std::string, HoldLife> holds;
  auto problem = [&](const Event& e, std::string_view what) {
    fold.violations.push_back(e.account_id + ": event " + std::to_string(e.event_id) + " (" +
                              std::string(event_type_name(e.type)) + "): " + std::string(what));
  };
  auto add = [&](const Event& e, std::int64_t& field, std::int64_t delta) {
    const auto next = checked_add(field, delta);
    if (!next) {
      problem(e, "balance overflow");
      return;
    }
    field = *next;
  };

  for (const Event& e : events) {
    if (e.event_id <= fold.last_event_id) problem(e, "event_id does not increase");
    fold.last_event_id = e.event_id;
    if (e.amount < 0) problem(e, "negative amount");
    HoldLife* life = nullptr;
    if (e.type == EventType::account_updated) {
      if (e.hold_id) problem(e, "an account_updated event names a hold");
      if (e.amount != 0) problem(e, "an account_updated event moves an amount");
      if (!e.settings) {
        problem(e, "an account_updated event without settings");
      } else {
        if (b.available < -e.settings->overdraft_limit && !e.settings->frozen) {
          problem(e, "overdraft_limit " + std::to_string(e.settings->overdraft_limit) +
                         " set below what was already overdrawn (available " + std::to_string(b.available) + ")");
        }
        fold.settings = e.settings;
      }
    } else if (e.settings) {
      problem(e, "only account_updated events carry settings");
    }
    if (is_balance_notice(e.type)) {
      if (e.hold_id) problem(e, "a balance notice names a hold");
      if (e.amount != 0) problem(e, "a balance notice moves an amount");
    }
    // Credits given back to a lot that has expired go to expired, not available (core/lots.h): the
    // event's expired_after says how many, at most all of them.
    const auto give_back = [&](std::int64_t n) {
      const std::int64_t to_expired = e.expired_after - b.expired;
      if (to_expired < 0 || to_expired > n) {
        problem(e, "gives back " + std::to_string(n) + " credits but moves " + std::to_string(to_expired) + " to expired");
        return;
      }
      add(e, b.expired, to_expired);
      add(e, b.available, n - to_expired);
    };
    if (e.type != EventType::credited && e.type != EventType::debited && e.type != EventType::account_updated &&
        e.type != EventType::lot_expired && !is_balance_notice(e.type)) {
      if (!e.hold_id) {
        problem(e, "hold event without hold_id");
        continue;
      }
      if (e.type == EventType::reserved) {
        auto [it, inserted] = holds.try_emplace(*e.hold_id);
        if (!inserted) problem(e, "hold " + *e.hold_id + " reserved twice");
        life = &it->second;
      } else {
        auto it = holds.find(*e.hold_id);
        if (it == holds.end()) {
          problem(e, "hold " + *e.hold_id + " has no reserved event before it");
          continue;
        }
        life = &it->second;
      }
    }

    switch (e.type) {
      case EventType::credited:
        add(e, b.available, e.amount);
        add(e, b.purchased, e.amount);
        break;
      case EventType::debited:
        add(e, b.available, -e.amount);
        add(e, b.purchased, -e.amount);
        break;
      case EventType::reserved:
        life->amount = e.amount;
        add(e, b.available, -e.amount);
        add(e, b.reserved, e.amount);
        fold.active_holds += 1;
        break;
      case EventType::committed:
      case EventType::released:
      case EventType::expired: {
        if (life->ended) {
          problem(e, "hold " + *e.hold_id + " ended twice");
          break;
        }
        const std::int64_t used = e.type == EventType::committed ? e.amount : 0;
        if (e.type == EventType::committed && e.amount > life->amount) problem(e, "commits more than was held");
        if (e.type != EventType::committed && e.amount != life->amount) problem(e, "amount differs from the hold");
        add(e, b.reserved, -life->amount);
        add(e, b.used, used);
        life->charged = used;
        give_back(life->amount - used);
        life->ended = true;
        life->expired = e.type == EventType::expired;
        fold.active_holds -= 1;
        break;
      }
      case EventType::late_charged:
      case EventType::late_forgiven:
        if (!life->expired || life->late_settled) {
          problem(e, "late settlement of hold " + *e.hold_id + " that is not a once-expired hold");
          break;
        }
        if (e.amount > life->amount) problem(e, "late settlement of more than was held");
        if (e.type == EventType::late_charged) {
          add(e, b.available, -e.amount);
          add(e, b.used, e.amount);
          life->charged = e.amount;
        }
        life->late_settled = true;
        break;
      case EventType::refunded:
        // Only what a hold charged comes back, at most once in all.
        if (e.amount < 1 || e.amount > life->charged - life->refunded) {
          problem(e, "hold " + *e.hold_id + " refunds " + std::to_string(e.amount) + " of a charge of " +
                         std::to_string(life->charged) + " with " + std::to_string(life->refunded) +
                         " refunded before");
          break;
        }
        life->refunded += e.amount;
        add(e, b.used, -e.amount);
        give_back(e.amount);
        break;
      case EventType::lot_expired:
        // A lot's unspent credits reached its expires_at.
        if (!e.lot_seq || e.amount < 1 || e.hold_id) problem(e, "a lot_expired event names no lot, or moves nothing");
        add(e, b.available, -e.amount);
        add(e, b.expired, e.amount);
        break;
      case EventType::account_updated:
      case EventType::balance_low:
      case EventType::balance_depleted:
      case EventType::balance_recovered:
        break;  // no balance moves (checked above, and by the *_after comparison below)
      case EventType::extended:
        // Only a hold still held is extended, and nothing moves.
        if (life->ended) problem(e, "hold " + *e.hold_id + " extended after it ended");
        if (e.amount != 0) problem(e, "an extended event moves an amount");
        break;
    }
    if (e.available_after != b.available || e.reserved_after != b.reserved || e.used_after != b.used ||
        e.expired_after != b.expired) {
      problem(e, "recorded balances after it differ from the fold (" + describe(b) + ")");
    }
  }
  return fold;
}

std::vector<std::string> check_fold(const Account& account, const Fold& fold) {
  std::vector<std::string> out = fold.violations;
  if (fold.balances != account.balances) {
    out.push_back(account.account_id + ": row (" + describe(account.balances) + ") != fold of events (" +
                  describe(fold.balances) + ")");
  }
  if (fold.settings && *fold.settings != account.settings()) {
    out.push_back(account.account_id + ": row's settings differ from its last account_updated event's");
  }
  if (fold.active_holds != account.active_holds) {
    out.push_back(account.account_id + ": row has " + std::to_string(account.active_holds) +
                  " active holds, the events " + std::to_string(fold.active_holds));
  }
  return out;
}

std::vector<std::string> check_account(const Account& row, std::span<const Event> events, std::int64_t active_sum,
                                       std::int64_t active_count) {
  std::vector<std::string> found = check_balances(row);
  for (auto& v : check_active_holds(row, active_sum, active_count)) found.push_back(std::move(v));
  for (auto& v : check_fold(row, fold_events(events))) found.push_back(std::move(v));
  return found;
}

}  // namespace tollgate::invariants
