// A batch decided in memory (see batch.h). The rules are core/rules.h; this file applies them to
// the batch's rows in command order and records what changed.
#include "core/batch.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/checked.h"
#include "core/hold_id.h"
#include "core/limits.h"
#include "core/lots.h"
#include "core/rules.h"

namespace tollgate::batch {
namespace {

template <typename T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// --- the keys of each ledger command kind (an overload per kind: a new kind must add one) ------
}  // namespace

void add_keys(const CreateAccountCommand& c, LedgerKeys& k) {
  k.accounts.push_back(c.account_id);
  k.view_accounts.push_back(c.account_id);
}
void add_keys(const CreditCommand& c, LedgerKeys& k) {
  k.accounts.push_back(c.account_id);
  k.references.push_back(c.reference);
  k.view_accounts.push_back(c.account_id);
  ++k.new_lots_max;
  ++k.zombie_expiring_commands;  // a credit judges debt on what readers see
}
void add_keys(const DebitCommand& c, LedgerKeys& k) {
  k.accounts.push_back(c.account_id);
  k.references.push_back(c.reference);
  k.view_accounts.push_back(c.account_id);
  ++k.zombie_expiring_commands;
}
void add_keys(const ReserveCommand& c, LedgerKeys& k) {
  k.accounts.push_back(c.account_id);
  k.request_ids.push_back(c.request_id);
  ++k.new_holds_max;
  ++k.zombie_expiring_commands;
}
void add_hold_key(std::string_view hold_id, LedgerKeys& k) {
  k.hold_ids.emplace_back(hold_id);
  if (auto seq = hold_id_seq(hold_id)) k.hold_seqs.push_back(*seq);
}
void add_refund_key(std::string_view hold_id, LedgerKeys& k) {
  add_hold_key(hold_id, k);
  k.refunds = true;
}
void add_keys(const CommitCommand& c, LedgerKeys& k) {
  add_hold_key(c.hold_id, k);
  ++k.live_holds_ending_max;
  ++k.zombie_expiring_commands;  // a late charge refused on the stored row
}
void add_keys(const ReleaseCommand& c, LedgerKeys& k) {
  add_hold_key(c.hold_id, k);
  ++k.live_holds_ending_max;
}
void add_keys(const ExtendCommand& c, LedgerKeys& k) { add_hold_key(c.hold_id, k); }
void add_keys(const ExpireOverdueCommand& c, LedgerKeys& k) {
  const auto total = checked_add(k.overdue_max, c.max_holds);
  TG_ASSERT(total.has_value());
  k.overdue_max = *total;
}
void add_keys(const CreateKeyCommand& c, LedgerKeys& k) {
  k.key_ids.push_back(c.key_id);
  if (c.account_id) k.accounts.push_back(*c.account_id);
}
void add_keys(const RevokeKeyCommand& c, LedgerKeys& k) { k.key_ids.push_back(c.key_id); }
void add_keys(const RecordKeyUseCommand& c, LedgerKeys& k) {
  for (const auto& use : c.uses) k.key_ids.push_back(use.key_id);
}
void add_keys(const UpdateAccountCommand& c, LedgerKeys& k) {
  k.accounts.push_back(c.account_id);
  k.view_accounts.push_back(c.account_id);
  ++k.zombie_expiring_commands;  // lowering the overdraft limit, refused on the stored row
}

namespace {

// --- the batch's rows in memory -----------------------------------------------------------------
template <typename Row>
struct Slot {
  std::optional<Row> before;  // as loaded; unset for a row this batch created
  Row now;
};

// Orders holds the way every store expires them: oldest deadline first, then creation order.
bool by_deadline(const Hold& a, const Hold& b) {
  if (a.expires_at_ms != b.expires_at_ms) return a.expires_at_ms < b.expires_at_ms;
  return hold_id_seq(a.hold_id).value_or(0) < hold_id_seq(b.hold_id).value_or(0);
}

// A transfer the batch knows: loaded (its event has its id), or made earlier in this batch (its
// event's id comes from the backend after the write: `new_event_index` names it).
struct KnownTransfer {
  Transfer transfer;
  Event event;
  std::optional<std::size_t> new_event_index;
};

// The notice `type` written after `movement`: the same account, time and balances, amount 0,
// nothing else of the movement's.
Event notice(const Event& movement, EventType type) {
  TG_ASSERT(is_balance_notice(type));
  Event e;
  e.account_id = movement.account_id;
  e.type = type;
  e.amount = 0;
  e.at_ms = movement.at_ms;
  e.available_after = movement.available_after;
  e.reserved_after = movement.reserved_after;
  e.used_after = movement.used_after;
  e.expired_after = movement.expired_after;
  return e;
}

}  // namespace

class LedgerBatch::State {
 public:
  State(LedgerSnapshot s, std::span<const HoldOwner> owners)
      : now_(s.now_ms), owners_(owners), new_seqs_(std::move(s.new_hold_seqs)), new_lot_seqs_(std::move(s.new_lot_seqs)) {
    TG_ASSERT(std::is_sorted(new_seqs_.begin(), new_seqs_.end()));
    TG_ASSERT(std::is_sorted(new_lot_seqs_.begin(), new_lot_seqs_.end()));
    for (Account& a : s.accounts) {
      const std::string id = a.account_id;
      accounts_.try_emplace(id, Slot<Account>{a, std::move(a)});
    }
    for (Lot& lot : s.lots) {
      if (auto it = lots_.find(lot.seq); it != lots_.end()) {
        TG_ASSERT(it->second.now == lot);  // the same row, loaded twice
        continue;
      }
      TG_ASSERT(accounts_.count(lot.account_id) != 0);  // a lot is loaded with its (locked) account
      if (lots::is_overdue(lot, now_) && lot.available > 0) overdue_lot_accounts_.push_back(lot.account_id);
      account_lots_[lot.account_id].push_back(lot.seq);
      const std::int64_t seq = lot.seq;
      lots_.try_emplace(seq, Slot<Lot>{lot, std::move(lot)});
    }
    sort_unique(overdue_lot_accounts_);
    for (Hold& h : s.holds) {
      if (holds_.count(h.hold_id) != 0) {
        TG_ASSERT(holds_.at(h.hold_id).now == h);  // the same row, loaded twice
        continue;
      }
      by_request_[h.request_id] = h.hold_id;
      const std::string id = h.hold_id;
      holds_.try_emplace(id, Slot<Hold>{h, std::move(h)});
    }
    for (auto& [t, e] : s.transfers) {
      TG_ASSERT(t.event_id == e.event_id);
      const std::string ref = t.reference;
      transfers_.try_emplace(ref, KnownTransfer{std::move(t), std::move(e), std::nullopt});
    }
    for (ApiKey& k : s.keys) {
      const std::string id = k.key_id;
      keys_.try_emplace(id, Slot<ApiKey>{k, std::move(k)});
    }
    for (AccountView& v : s.views) {
      TG_ASSERT(std::is_sorted(v.oldest_live.begin(), v.oldest_live.end()));
      const std::string id = v.account_id;
      views_.try_emplace(id, std::move(v));
    }
    // Each locked account's overdue holds, in the order they expire.
    for (auto& [id, slot] : holds_) {
      const Hold& h = slot.now;
      if (rules::is_overdue(h, now_) && accounts_.count(h.account_id) != 0) overdue_.push_back(id);
    }
    std::sort(overdue_.begin(), overdue_.end(),
              [&](const std::string& a, const std::string& b) { return by_deadline(holds_.at(a).now, holds_.at(b).now); });
  }

  std::int64_t now() const { return now_; }
  // The slices' owned-hold prefixes (core/hold_id.h).
  std::span<const HoldOwner> owners() const { return owners_; }
  // Results that carry a new event: (result index, event index).
  std::vector<std::pair<std::size_t, std::size_t>>& result_events() { return result_events_; }

  // An account the batch touches: its overdue lots expire first (settle), once per batch, so that
  // nothing spends from them and every view shows them expired.
  Account* account(std::string_view id) {
    auto it = accounts_.find(std::string(id));
    if (it == accounts_.end()) return nullptr;
    settle(it->second.now);
    return &it->second.now;
  }
  // The account row without settling it (a hold's end inside a settle or a reaper's pass).
  Account* row(std::string_view id) {
    auto it = accounts_.find(std::string(id));
    return it == accounts_.end() ? nullptr : &it->second.now;
  }
  // Expires the account's overdue lots' available credits (lot_expired events), once per batch;
  // answers how many lots. Below, with the moves.
  std::int64_t settle(Account& a);
  std::int64_t settle(std::string_view id) {
    auto it = accounts_.find(std::string(id));
    return it == accounts_.end() ? 0 : settle(it->second.now);
  }

  // The account's lots the batch knows (loaded, or made by it), in no particular order.
  std::vector<Lot*> lots_of(std::string_view account_id) {
    std::vector<Lot*> out;
    auto it = account_lots_.find(std::string(account_id));
    if (it == account_lots_.end()) return out;
    out.reserve(it->second.size());
    for (const std::int64_t seq : it->second) out.push_back(&lots_.at(seq).now);
    return out;
  }
  Lot* lot_by_reference(std::string_view account_id, std::string_view reference) {
    for (Lot* lot : lots_of(account_id)) {
      if (lot->reference == reference) return lot;
    }
    return nullptr;
  }
  // Accounts with overdue lots still holding available credits, as loaded (the reaper's).
  const std::vector<std::string>& overdue_lot_accounts() const { return overdue_lot_accounts_; }
  // A new lot of `amount` for a credit; its seq comes from the snapshot's (keys_of() counted every credit).
  Lot& insert_lot(const Account& a, const CreditCommand& c, std::int64_t amount) {
    TG_ASSERT(next_lot_seq_ < new_lot_seqs_.size());
    Lot lot;
    lot.seq = new_lot_seqs_[next_lot_seq_++];
    lot.account_id = a.account_id;
    lot.reference = c.reference;
    lot.terms = c.lot;
    lot.amount = amount;
    lot.available = amount;
    lot.created_at_ms = now_;
    account_lots_[a.account_id].push_back(lot.seq);
    const std::int64_t seq = lot.seq;
    return lots_.try_emplace(seq, Slot<Lot>{std::nullopt, std::move(lot)}).first->second.now;
  }
  Hold* hold(std::string_view id) {
    auto it = holds_.find(std::string(id));
    return it == holds_.end() ? nullptr : &it->second.now;
  }
  Hold* hold_by_request(std::string_view request_id) {
    auto it = by_request_.find(std::string(request_id));
    return it == by_request_.end() ? nullptr : hold(it->second);
  }
  const KnownTransfer* transfer(std::string_view reference) {
    auto it = transfers_.find(std::string(reference));
    return it == transfers_.end() ? nullptr : &it->second;
  }
  ApiKey* key(std::string_view id) {
    auto it = keys_.find(std::string(id));
    return it == keys_.end() ? nullptr : &it->second.now;
  }
  // The account as a reader sees it now: overdue holds already count as available.
  Account view(std::string_view id) {
    const Account* row = account(id);
    TG_ASSERT(row != nullptr);
    auto v = views_.find(std::string(id));
    TG_ASSERT(v != views_.end());  // keys_of() asked for it; a new account has an empty one
    Account a = rules::account_view(*row, v->second.overdue_count, v->second.overdue_sum);
    if (!v->second.oldest_live.empty()) {
      a.oldest_active_hold_age_ms = std::max<std::int64_t>(0, now_ - v->second.oldest_live.front().first);
    }
    return a;
  }

  Account& insert_account(Account a) {
    const std::string id = a.account_id;
    TG_ASSERT(accounts_.count(id) == 0);
    views_.try_emplace(id, AccountView{id, 0, 0, {}});
    return accounts_.try_emplace(id, Slot<Account>{std::nullopt, std::move(a)}).first->second.now;
  }

  Hold& insert_hold(const ReserveCommand& c) {
    TG_ASSERT(next_seq_ < new_seqs_.size());  // keys_of() counted every reserve
    const std::int64_t seq = new_seqs_[next_seq_++];
    Hold h;
    h.hold_id = make_hold_id(seq, c.hold_id_random);
    h.account_id = c.account_id;
    h.request_id = c.request_id;
    h.amount = c.amount;
    h.status = HoldStatus::active;
    h.created_at_ms = now_;
    h.expires_at_ms = now_ + *c.ttl_ms;
    h.metadata_json = c.metadata_json.empty() ? "{}" : c.metadata_json;
    TG_ASSERT(holds_.count(h.hold_id) == 0 && by_request_.count(h.request_id) == 0);
    if (auto v = views_.find(h.account_id); v != views_.end()) {
      auto& live = v->second.oldest_live;
      const auto entry = std::make_pair(now_, seq);
      live.insert(std::lower_bound(live.begin(), live.end(), entry), entry);
    }
    by_request_[h.request_id] = h.hold_id;
    const std::string id = h.hold_id;
    return holds_.try_emplace(id, Slot<Hold>{std::nullopt, std::move(h)}).first->second.now;
  }

  void insert_transfer(Transfer t, std::size_t event_index, const Event& event) {
    const std::string ref = t.reference;
    TG_ASSERT(transfers_.count(ref) == 0);
    transfers_.try_emplace(ref, KnownTransfer{t, event, event_index});
    new_transfers_.push_back(LedgerEffects::NewTransfer{std::move(t), event_index});
  }

  ApiKey& insert_key(ApiKey k) {
    const std::string id = k.key_id;
    TG_ASSERT(keys_.count(id) == 0);
    return keys_.try_emplace(id, Slot<ApiKey>{std::nullopt, std::move(k)}).first->second.now;
  }

  // Appends an event (its id comes from the backend), then the balance notices its movement of
  // `available` writes (rules::balance_notices; docs/api.md "Balance notices"): a movement is one
  // event, compared with the account's `available` after its previous event (or as loaded). Every
  // change of a balance is followed by its event, so no movement goes unseen. Returns the index of
  // the event itself.
  std::size_t append(Event e) {
    TG_ASSERT(!is_balance_notice(e.type));  // only this function writes notices
    auto slot = accounts_.find(e.account_id);
    TG_ASSERT(slot != accounts_.end());  // an event's account is loaded and locked
    const Account& account = slot->second.now;
    TG_ASSERT(e.available_after == account.balances.available);  // events carry the balances after them
    auto [last, first] = available_after_last_event_.try_emplace(e.account_id, 0);
    if (first && slot->second.before) last->second = slot->second.before->balances.available;
    const std::int64_t available_before = std::exchange(last->second, e.available_after);
    e.event_id = 0;
    events_.push_back(std::move(e));
    const std::size_t index = events_.size() - 1;
    const auto notices = rules::balance_notices(available_before, account.balances.available, account.low_balance_threshold);
    for (const EventType type : notices.list()) events_.push_back(notice(events_[index], type));
    lift_repaid_freeze(slot->second.now);
    return index;
  }
  // An account frozen for a refund shortfall is open again as soon as available is back to 0 or
  // above — whatever brought it there (a credit, a release, an expiry, a refund): an
  // account_updated event with the reason kUnfrozenRepaid follows the event that did.
  void lift_repaid_freeze(Account& a) {
    if (!a.frozen || a.frozen_reason != kFrozenForRefundShortfall || a.balances.available < 0) return;
    a.frozen = false;
    a.frozen_reason.reset();
    Event e;
    e.account_id = a.account_id;
    e.type = EventType::account_updated;
    e.settings = a.settings();
    e.reason = std::string(kUnfrozenRepaid);
    e.at_ms = now();
    e.available_after = a.balances.available;
    e.reserved_after = a.balances.reserved;
    e.used_after = a.balances.used;
    e.expired_after = a.balances.expired;
    append(std::move(e));  // no balance moved: no notice, and no second lift
  }
  // The event at `index` as appended (to answer with it before its id is known).
  const Event& event(std::size_t index) const { return events_.at(index); }

  // A hold of the batch left the live set (committed or released while live, or expired).
  void hold_left_active(const Hold& h, bool was_overdue) {
    auto v = views_.find(h.account_id);
    if (v == views_.end()) return;
    if (was_overdue) {
      v->second.overdue_count -= 1;
      v->second.overdue_sum -= h.amount;
      TG_ASSERT(v->second.overdue_count >= 0 && v->second.overdue_sum >= 0);
      return;
    }
    auto& live = v->second.oldest_live;
    const auto seq = hold_id_seq(h.hold_id);
    TG_ASSERT(seq.has_value());
    live.erase(std::remove(live.begin(), live.end(), std::make_pair(h.created_at_ms, *seq)), live.end());
  }

  // The locked accounts' overdue holds still active, oldest deadline first, of one account or all.
  std::vector<Hold*> overdue(std::optional<std::string_view> account_id, std::int64_t limit) {
    std::vector<Hold*> out;
    for (const std::string& id : overdue_) {
      if (static_cast<std::int64_t>(out.size()) >= limit) break;
      Hold& h = holds_.at(id).now;
      if (!rules::is_overdue(h, now_)) continue;  // ended earlier in this batch
      if (account_id && h.account_id != *account_id) continue;
      out.push_back(&h);
    }
    return out;
  }

  LedgerEffects effects() && {
    LedgerEffects e;
    for (auto& [id, slot] : accounts_) {
      if (!slot.before) {
        e.new_accounts.push_back(std::move(slot.now));
      } else if (!(*slot.before == slot.now)) {
        e.changed_accounts.push_back(Change<Account>{std::move(*slot.before), std::move(slot.now)});
      }
    }
    for (auto& [id, slot] : holds_) {
      if (!slot.before) {
        e.new_holds.push_back(std::move(slot.now));
      } else if (!(*slot.before == slot.now)) {
        e.changed_holds.push_back(Change<Hold>{std::move(*slot.before), std::move(slot.now)});
      }
    }
    for (auto& [id, slot] : keys_) {
      if (!slot.before) {
        e.new_keys.push_back(std::move(slot.now));
      } else if (!(*slot.before == slot.now)) {
        e.changed_keys.push_back(Change<ApiKey>{std::move(*slot.before), std::move(slot.now)});
      }
    }
    e.events = std::move(events_);
    e.transfers = std::move(new_transfers_);
    // Unique keys in one order on every instance (two instances inserting the same keys then wait
    // on each other in one order: no deadlock), and deterministic output.
    std::sort(e.new_accounts.begin(), e.new_accounts.end(),
              [](const Account& a, const Account& b) { return a.account_id < b.account_id; });
    std::sort(e.changed_accounts.begin(), e.changed_accounts.end(),
              [](const auto& a, const auto& b) { return a.after.account_id < b.after.account_id; });
    std::sort(e.new_holds.begin(), e.new_holds.end(),
              [](const Hold& a, const Hold& b) { return a.request_id < b.request_id; });
    std::sort(e.changed_holds.begin(), e.changed_holds.end(),
              [](const auto& a, const auto& b) { return a.after.hold_id < b.after.hold_id; });
    std::sort(e.transfers.begin(), e.transfers.end(),
              [](const auto& a, const auto& b) { return a.transfer.reference < b.transfer.reference; });
    std::sort(e.new_keys.begin(), e.new_keys.end(),
              [](const ApiKey& a, const ApiKey& b) { return a.key_id < b.key_id; });
    std::sort(e.changed_keys.begin(), e.changed_keys.end(),
              [](const auto& a, const auto& b) { return a.after.key_id < b.after.key_id; });
    for (auto& [seq, slot] : lots_) {
      if (!slot.before) {
        e.new_lots.push_back(std::move(slot.now));
      } else if (!(*slot.before == slot.now)) {
        e.changed_lots.push_back(Change<Lot>{std::move(*slot.before), std::move(slot.now)});
      }
    }
    std::sort(e.new_lots.begin(), e.new_lots.end(), [](const Lot& a, const Lot& b) { return a.seq < b.seq; });
    std::sort(e.changed_lots.begin(), e.changed_lots.end(),
              [](const auto& a, const auto& b) { return a.after.seq < b.after.seq; });
    return e;
  }

 private:
  const std::int64_t now_;
  const std::span<const HoldOwner> owners_;  // static data of the registry
  std::vector<std::int64_t> new_seqs_;
  std::size_t next_seq_ = 0;
  std::vector<std::int64_t> new_lot_seqs_;
  std::size_t next_lot_seq_ = 0;
  std::unordered_map<std::int64_t, Slot<Lot>> lots_;
  std::unordered_map<std::string, std::vector<std::int64_t>> account_lots_;  // seqs, per account
  std::vector<std::string> overdue_lot_accounts_;
  std::unordered_set<std::string> settled_;  // accounts whose overdue lots this batch expired
  std::unordered_map<std::string, Slot<Account>> accounts_;
  std::unordered_map<std::string, Slot<Hold>> holds_;
  std::unordered_map<std::string, std::string> by_request_;
  std::unordered_map<std::string, KnownTransfer> transfers_;
  std::unordered_map<std::string, Slot<ApiKey>> keys_;
  std::unordered_map<std::string, AccountView> views_;
  std::vector<std::string> overdue_;  // hold ids, by deadline
  std::vector<Event> events_;
  // Per account: `available` after its last event of this batch (balance notices compare with it).
  std::unordered_map<std::string, std::int64_t> available_after_last_event_;
  std::vector<LedgerEffects::NewTransfer> new_transfers_;
  std::vector<std::pair<std::size_t, std::size_t>> result_events_;
};

namespace {
using State = LedgerBatch::State;

// --- deciding each command kind (an overload per kind) -----------------------------------------
struct Context {
  State& state;
  std::size_t index;  // of the command being decided; kNoResult: a slice's operation
};
// A slice's operation is not a batch result of its own (only a transfer's result is told its event id).
constexpr std::size_t kNoResult = static_cast<std::size_t>(-1);

Error account_not_found(std::string_view account_id) {
  return Error::make(Code::not_found, "account " + std::string(account_id) + " does not exist");
}

Error hold_not_found(std::string_view hold_id) {
  return Error::make(Code::not_found, "hold " + std::string(hold_id) + " does not exist");
}

Event make_event(std::string_view account_id, EventType type, std::int64_t amount, const Balances& after,
                 std::int64_t now_ms) {
  Event e;
  e.account_id = std::string(account_id);
  e.type = type;
  e.amount = amount;
  e.at_ms = now_ms;
  e.available_after = after.available;
  e.reserved_after = after.reserved;
  e.used_after = after.used;
  e.expired_after = after.expired;
  return e;
}

Event hold_event(const State& s, const Hold& hold, EventType type, std::int64_t amount, const Balances& after) {
  Event e = make_event(hold.account_id, type, amount, after, s.now());
  e.hold_id = hold.hold_id;
  // An owned hold: every event names its owning row (core/hold_id.h).
  if (auto owned = owner_of_hold(s.owners(), hold.request_id)) e.job_id = std::move(owned->id);
  return e;
}

// Below −overdraft_limit only in debt, and an account in debt is frozen (take_back freezes it).
void set_balances(Account& account, const Balances& after) {
  TG_ASSERT(after.available + after.reserved + after.used + after.expired == after.purchased);
  TG_ASSERT((after.available >= -account.overdraft_limit || account.frozen) && after.reserved >= 0 && after.used >= 0 &&
            after.expired >= 0);
  account.balances = after;
}

// Credits that went back to an overdue lot are expired, not available (core/lots.h).
Balances to_expired(Balances b, std::int64_t n) {
  TG_ASSERT(n >= 0);
  b.available -= n;
  b.expired += n;  // ≤ purchased: no overflow
  return b;
}

// What a spend of `amount` on `a` takes from its lots (the rest from its base), recorded as draws.
std::vector<LotDraw> draw_lots(State& s, const Account& a, std::int64_t amount, lots::DrawUse use) {
  return lots::draw(s.lots_of(a.account_id), amount, use, s.now());
}

// An account_updated event: the settings after, and why when tollgate itself changed them.
void append_settings_event(State& s, const Account& a, std::optional<std::string_view> reason) {
  Event e = make_event(a.account_id, EventType::account_updated, 0, a.balances, s.now());
  e.settings = a.settings();
  if (reason) e.reason = std::string(*reason);
  s.append(std::move(e));
}
// Ends an active hold: `committed` of its amount to used, the rest back to the lots it came from.
void end_hold(State& s, Hold& h, HoldStatus status, std::int64_t committed, std::int64_t closed_at_ms, bool overdue) {
  TG_ASSERT(h.status == HoldStatus::active && status != HoldStatus::active);
  Account* a = s.row(h.account_id);  // not settled here: a settle ends holds through this
  TG_ASSERT(a != nullptr);  // the account of a hold the batch changes is loaded (and locked)
  TG_ASSERT(a->active_holds >= 1);
  const lots::GivenBack given = lots::end_hold(s.lots_of(h.account_id), h.lots, h.amount, committed, s.now());
  set_balances(*a, to_expired(rules::commit(a->balances, h.amount, committed), given.to_expired));
  a->active_holds -= 1;
  h.status = status;
  h.committed_amount = committed;
  h.closed_at_ms = closed_at_ms;
  s.hold_left_active(h, overdue);
}

// Expires one active hold whose deadline passed: its amount back to available, `expired` event.
void expire(State& s, Hold& h) {
  TG_ASSERT(rules::is_overdue(h, s.now()));
  end_hold(s, h, HoldStatus::expired, 0, h.expires_at_ms, /*overdue=*/true);
  s.append(hold_event(s, h, EventType::expired, h.amount, s.row(h.account_id)->balances));
}

// No caller waits on a zombie: expires the account's overdue holds (at most the reaper's pass),
// so that a refusal on the stored row is tried once more against what readers see.
bool expire_overdue_of(State& s, std::string_view account_id) {
  const auto overdue = s.overdue(account_id, limits::kReaperBatchMaxDefault);
  for (Hold* h : overdue) expire(s, *h);
  return !overdue.empty();
}

// A hold about to change: expired first when it is overdue, so that the rules see stored states.
Hold* hold_for_change(State& s, std::string_view hold_id) {
  Hold* h = s.hold(hold_id);
  if (h) s.account(h->account_id);  // settled before anything of it changes: its overdue lots expire first
  if (h && rules::is_overdue(*h, s.now())) expire(s, *h);
  return h;
}

}  // namespace

// An account the batch touches first has its overdue lots' available credits expired.
std::int64_t LedgerBatch::State::settle(Account& a) {
  if (!settled_.insert(a.account_id).second) return 0;
  std::vector<Lot*> overdue;
  for (Lot* lot : lots_of(a.account_id)) {
    if (lots::is_overdue(*lot, now_) && lot->available > 0) overdue.push_back(lot);
  }
  std::sort(overdue.begin(), overdue.end(), [](const Lot* x, const Lot* y) {
    return std::pair(*x->terms.expires_at_ms, x->seq) < std::pair(*y->terms.expires_at_ms, y->seq);
  });
  for (Lot* lot : overdue) {
    const std::int64_t n = lots::expire(*lot);
    set_balances(a, to_expired(a.balances, n));
    Event e = make_event(a.account_id, EventType::lot_expired, n, a.balances, now_);
    e.lot_seq = lot->seq;
    append(std::move(e));
  }
  return static_cast<std::int64_t>(overdue.size());
}

namespace {

Result<AccountOutcome> decide_one(Context& x, const CreateAccountCommand& c) {
  State& s = x.state;
  if (const Account* existing = s.account(c.account_id)) {
    if (existing->overdraft_limit != c.overdraft_limit || existing->max_active_holds != c.max_active_holds) {
      return Error::make(Code::conflict, "account " + c.account_id + " exists with other settings");
    }
    return AccountOutcome{s.view(c.account_id), false};
  }
  Account row;
  row.account_id = c.account_id;
  row.overdraft_limit = c.overdraft_limit;
  row.max_active_holds = c.max_active_holds;
  row.created_at_ms = s.now();
  s.insert_account(std::move(row));
  return AccountOutcome{s.view(c.account_id), true};
}

// The lot a credit makes: what is left once it paid the base's debt (nullopt: it only paid debt).
// Refusal: conflict when the account already has limits::kLiveLotsPerAccountMax live lots.
Result<std::optional<std::int64_t>> new_lot(State& s, const Account& a, const CreditCommand& c) {
  const std::vector<Lot*> lots = s.lots_of(a.account_id);
  const lots::CreditSplit split = lots::credit_split(c.amount, lots::base_available(a.balances, lots));
  if (split.to_lot == 0) return std::optional<std::int64_t>();
  const auto live = std::count_if(lots.begin(), lots.end(), [&](const Lot* lot) {
    return lots::status(*lot, s.now()) == lots::LotStatus::active;
  });
  if (live >= limits::kLiveLotsPerAccountMax) {
    return Error::make(Code::conflict, "account " + a.account_id + " has " + std::to_string(live) +
                                           " lots with credits left, the most it may have: spend or debit some first");
  }
  return std::optional<std::int64_t>(s.insert_lot(a, c, split.to_lot).seq);
}

template <typename TransferCommand>
Result<TransferOutcome> transfer(Context& x, const TransferCommand& c, EventType kind, std::string_view reason) {
  State& s = x.state;
  if (const KnownTransfer* existing = s.transfer(c.reference)) {
    const Transfer& t = existing->transfer;
    if (t.account_id != c.account_id || t.kind != kind || t.amount != c.amount || t.reason != reason) {
      return Error::make(Code::idempotency_mismatch,
                         "reference " + c.reference + " was already used for a " +
                             std::string(t.kind == EventType::credited ? "credit" : "debit") + " of " +
                             std::to_string(t.amount) + " on account " + t.account_id);
    }
    // A replay of a transfer made earlier in this batch answers its event once it has its id.
    if (existing->new_event_index && x.index != kNoResult) {
      x.state.result_events().emplace_back(x.index, *existing->new_event_index);
    }
    return TransferOutcome{existing->event, s.view(c.account_id), false};
  }
  Account* a = s.account(c.account_id);
  if (!a) return account_not_found(c.account_id);
  // Money is judged on what readers see: a debit draws from the lots as they read, and an overdue
  // overdraft hold is no debt for a credit to pay. The account's zombies expire first.
  expire_overdue_of(s, c.account_id);
  if (kind == EventType::debited) {
    if (auto open = rules::check_not_frozen(*a); !open) return open.error();
  }
  if constexpr (std::is_same_v<TransferCommand, CreditCommand>) {
    if (c.lot.expires_at_ms && *c.lot.expires_at_ms <= s.now()) {
      return invalid("expires_at must be in the future (it is " + std::to_string(s.now() - *c.lot.expires_at_ms) +
                     " ms past)");
    }
  }
  const auto move = [&] { return kind == EventType::credited ? rules::credit(a->balances, c.amount)
                                                             : rules::debit(a->balances, c.amount); };
  Result<Balances> after = move();
  if (!after) return after.error();
  std::optional<std::int64_t> lot_seq;
  if constexpr (std::is_same_v<TransferCommand, CreditCommand>) {
    auto lot = new_lot(s, *a, c);  // before the balances change: what pays the base's debt
    if (!lot) return lot.error();
    lot_seq = *lot;
  } else {
    draw_lots(s, *a, c.amount, lots::DrawUse::remove);
  }
  set_balances(*a, *after);
  Event e = make_event(c.account_id, kind, c.amount, *after, s.now());
  e.reference = c.reference;
  e.lot_seq = lot_seq;
  if (!reason.empty()) e.reason = std::string(reason);
  const std::size_t event_index = s.append(e);
  s.insert_transfer(Transfer{c.reference, c.account_id, kind, c.amount, std::string(reason), 0}, event_index, e);
  if (x.index != kNoResult) x.state.result_events().emplace_back(x.index, event_index);
  return TransferOutcome{std::move(e), s.view(c.account_id), true};
}

Result<TransferOutcome> decide_one(Context& x, const CreditCommand& c) { return transfer(x, c, EventType::credited, ""); }
Result<TransferOutcome> decide_one(Context& x, const DebitCommand& c) { return transfer(x, c, EventType::debited, c.reason); }

Result<HoldOutcome> decide_one(Context& x, const ReserveCommand& c) {
  State& s = x.state;
  if (const Hold* existing = s.hold_by_request(c.request_id)) {
    if (existing->account_id != c.account_id || existing->amount != c.amount) {
      return Error::make(Code::idempotency_mismatch, "request_id " + c.request_id + " already made a hold of " +
                                                         std::to_string(existing->amount) + " on account " +
                                                         existing->account_id);
    }
    return HoldOutcome{rules::hold_view(*existing, s.now()), false};
  }
  TG_ASSERT(c.ttl_ms.has_value());
  Account* a = s.account(c.account_id);
  if (!a) return account_not_found(c.account_id);
  expire_overdue_of(s, c.account_id);  // a hold draws from the lots as readers see them
  if (auto open = rules::check_not_frozen(*a); !open) return open.error();
  Result<Balances> after = rules::reserve(*a, c.amount);
  if (!after) return after.error();
  set_balances(*a, *after);
  a->active_holds += 1;
  TG_ASSERT(!a->max_active_holds || a->active_holds <= *a->max_active_holds);
  Hold& h = s.insert_hold(c);
  h.lots = draw_lots(s, *a, c.amount, lots::DrawUse::reserve);
  s.append(hold_event(s, h, EventType::reserved, c.amount, *after));
  return HoldOutcome{h, true};
}

// The holds API may not end or extend an owned hold (core/hold_id.h): its owner ends it, together
// with the owning row. Checked before anything changes.
Status check_not_owned(State& s, std::string_view hold_id, std::string_view verb) {
  const Hold* h = s.hold(hold_id);
  if (!h) return ok_status();
  if (auto owned = owner_of_hold(s.owners(), h->request_id)) {
    return Error::make(Code::conflict, "hold " + std::string(hold_id) + " belongs to " + std::string(owned->owner->noun) +
                                           " " + owned->id + ": it cannot be " + std::string(verb) + " on its own (" +
                                           std::string(owned->owner->how_to_end) + ")");
  }
  return ok_status();
}

Result<HoldOutcome> commit_hold(Context& x, const CommitCommand& c) {
  State& s = x.state;
  Hold* h = hold_for_change(s, c.hold_id);
  if (!h) return hold_not_found(c.hold_id);
  auto plan = rules::plan_commit(*h, c.amount, c.late_commit, s.now());
  if (!plan) return plan.error();
  Account* a = s.account(h->account_id);
  TG_ASSERT(a != nullptr);
  switch (plan->action) {
    case rules::CommitAction::replay:
      return HoldOutcome{*h, false};
    case rules::CommitAction::commit:
      end_hold(s, *h, HoldStatus::committed, plan->amount, s.now(), /*overdue=*/false);
      s.append(hold_event(s, *h, EventType::committed, plan->amount, a->balances));
      return HoldOutcome{*h, true};
    case rules::CommitAction::late_charge: {
      expire_overdue_of(s, h->account_id);  // the charge draws from the lots as readers see them
      Result<Balances> after = rules::late_charge(*a, plan->amount);
      if (after) {
        set_balances(*a, *after);
        h->late_outcome = LateOutcome::charged;
        h->committed_amount = plan->amount;
        // Its reservation went back when it expired: the charge draws afresh, and a refund returns there.
        h->lots = draw_lots(s, *a, plan->amount, lots::DrawUse::charge);
        s.append(hold_event(s, *h, EventType::late_charged, plan->amount, *after));
        return HoldOutcome{*h, true};
      }
    }
      [[fallthrough]];  // not available (or a balance would overflow): the result is forgiven
    case rules::CommitAction::late_forgive:
      TG_ASSERT(h->status == HoldStatus::expired && h->late_outcome == LateOutcome::none);
      h->late_outcome = LateOutcome::forgiven;
      h->committed_amount = 0;
      s.append(hold_event(s, *h, EventType::late_forgiven, plan->amount, a->balances));
      return HoldOutcome{*h, true};
  }
  TG_ASSERT(false && "unreachable commit action");
}

Result<HoldOutcome> decide_one(Context& x, const CommitCommand& c) {
  if (auto ok = check_not_owned(x.state, c.hold_id, "committed"); !ok) return ok.error();
  return commit_hold(x, c);
}

Result<HoldOutcome> release_hold(Context& x, const ReleaseCommand& c) {
  State& s = x.state;
  Hold* h = hold_for_change(s, c.hold_id);
  if (!h) return hold_not_found(c.hold_id);
  auto action = rules::plan_release(*h, s.now());
  if (!action) return action.error();
  if (*action == rules::ReleaseAction::replay) return HoldOutcome{*h, false};
  end_hold(s, *h, HoldStatus::released, 0, s.now(), /*overdue=*/false);
  h->release_reason = c.reason;
  Event e = hold_event(s, *h, EventType::released, h->amount, s.account(h->account_id)->balances);
  e.reason = c.reason;
  s.append(std::move(e));
  return HoldOutcome{*h, true};
}

Result<HoldOutcome> decide_one(Context& x, const ReleaseCommand& c) {
  if (auto ok = check_not_owned(x.state, c.hold_id, "released"); !ok) return ok.error();
  return release_hold(x, c);
}

Result<HoldOutcome> decide_one(Context& x, const ExtendCommand& c) {
  if (auto ok = check_not_owned(x.state, c.hold_id, "extended"); !ok) return ok.error();
  State& s = x.state;
  Hold* h = hold_for_change(s, c.hold_id);
  if (!h) return hold_not_found(c.hold_id);
  if (auto ok = rules::plan_extend(*h, s.now()); !ok) return ok.error();
  const auto expires = checked_add(s.now(), c.ttl_ms);
  TG_ASSERT(expires.has_value());  // ttl_ms is validated against the configured maximum
  h->expires_at_ms = *expires;
  Event e = hold_event(s, *h, EventType::extended, 0, s.account(h->account_id)->balances);
  e.expires_at_ms = h->expires_at_ms;
  s.append(std::move(e));
  return HoldOutcome{*h, true};
}

Result<AccountOutcome> decide_one(Context& x, const UpdateAccountCommand& c) {
  State& s = x.state;
  Account* a = s.account(c.account_id);
  if (!a) return account_not_found(c.account_id);
  // How far it is overdrawn is its base's: its lots may expire, the base never does.
  const auto check = [&] {
    Account base = *a;
    base.balances.available = std::min(a->balances.available, lots::base_available(a->balances, s.lots_of(c.account_id)));
    return rules::update_settings(base, c);
  };
  Result<AccountSettings> after = check();
  if (!after && expire_overdue_of(s, c.account_id)) after = check();
  if (!after) return after.error();
  // An admin's frozen (true or false) takes the freeze over from tollgate: its reason goes, so a
  // repaying credit no longer lifts it.
  const bool takes_over = c.frozen.has_value() && a->frozen_reason.has_value();
  if (*after == a->settings() && !takes_over) return AccountOutcome{s.view(c.account_id), false};
  a->overdraft_limit = after->overdraft_limit;
  a->max_active_holds = after->max_active_holds;
  a->frozen = after->frozen;
  if (c.frozen) a->frozen_reason.reset();  // an admin's freeze (or unfreeze) says no reason of tollgate's
  a->low_balance_threshold = after->low_balance_threshold;
  append_settings_event(s, *a, std::nullopt);
  return AccountOutcome{s.view(c.account_id), true};
}

Result<ExpireOutcome> decide_one(Context& x, const ExpireOverdueCommand& c) {
  TG_ASSERT(c.max_holds >= 1);
  const auto overdue = x.state.overdue(std::nullopt, c.max_holds);
  for (Hold* h : overdue) expire(x.state, *h);  // one by one, oldest first: the pass's bound holds
  std::int64_t lots_expired = 0;
  for (const std::string& id : x.state.overdue_lot_accounts()) {
    if (lots_expired >= c.max_holds) break;
    lots_expired += x.state.settle(id);
  }
  return ExpireOutcome{static_cast<std::int64_t>(overdue.size()), lots_expired};
}

Result<KeyOutcome> decide_one(Context& x, const CreateKeyCommand& c) {
  State& s = x.state;
  const ScopeSet scopes = c.scopes.value_or(default_scopes(c.account_id.has_value()));
  if (const ApiKey* existing = s.key(c.key_id)) {
    if (existing->account_id != c.account_id || existing->secret_sha256 != c.secret_sha256 ||
        existing->scopes != scopes || existing->expires_at_ms != c.expires_at_ms || existing->name != c.name) {
      return Error::make(Code::conflict, "key " + c.key_id + " exists");
    }
    return KeyOutcome{*existing, false};
  }
  if (c.account_id && !s.account(*c.account_id)) return account_not_found(*c.account_id);
  if (c.expires_at_ms && *c.expires_at_ms <= s.now()) {
    return invalid("expires_at must be in the future (it is " + std::to_string(s.now() - *c.expires_at_ms) +
                   " ms past)");
  }
  ApiKey key{c.key_id, c.account_id, c.secret_sha256, s.now(), std::nullopt};
  key.scopes = scopes;
  key.expires_at_ms = c.expires_at_ms;
  key.name = c.name;
  return KeyOutcome{s.insert_key(std::move(key)), true};
}

Result<KeyOutcome> decide_one(Context& x, const RevokeKeyCommand& c) {
  State& s = x.state;
  ApiKey* key = s.key(c.key_id);
  if (!key) return Error::make(Code::not_found, "key " + c.key_id + " does not exist");
  auto action = rules::plan_revoke_key(*key, c.replaced_by_configured_admin_key);
  if (!action) return action.error();
  if (*action == rules::RevokeAction::replay) return KeyOutcome{*key, false};
  key->revoked_at_ms = s.now();
  return KeyOutcome{*key, true};
}

Result<KeyUseOutcome> decide_one(Context& x, const RecordKeyUseCommand& c) {
  State& s = x.state;
  KeyUseOutcome out;
  for (const auto& use : c.uses) {
    ApiKey* key = s.key(use.key_id);
    if (!key || (key->last_used_at_ms && *key->last_used_at_ms >= use.used_at_ms)) continue;
    key->last_used_at_ms = use.used_at_ms;
    ++out.recorded;
  }
  return out;
}

}  // namespace

std::int64_t LedgerKeys::overdue_per_account_max() const {
  return limits::kReaperBatchMaxDefault * (1 + zombie_expiring_commands);
}

std::int64_t LedgerKeys::reaper_load_max(std::int64_t overdue_loaded) const {
  if (overdue_max == 0) return 0;
  return overdue_max + static_cast<std::int64_t>(hold_ids.size()) + overdue_loaded;
}

std::int64_t LedgerKeys::reaper_load_bound() const {
  if (overdue_max == 0) return 0;
  return reaper_load_max(static_cast<std::int64_t>(accounts.size() + hold_ids.size()) * overdue_per_account_max());
}

void finish(LedgerKeys& k) {
  sort_unique(k.accounts);
  sort_unique(k.hold_ids);
  sort_unique(k.hold_seqs);
  sort_unique(k.request_ids);
  sort_unique(k.references);
  sort_unique(k.key_ids);
  sort_unique(k.view_accounts);
}

// --- LedgerBatch: the ledger's part of a batch ---------------------------------------------------
LedgerBatch::LedgerBatch(LedgerSnapshot snapshot, std::span<const HoldOwner> owners)
    : state_(std::make_unique<State>(std::move(snapshot), owners)) {}
LedgerBatch::~LedgerBatch() = default;
LedgerBatch::LedgerBatch(LedgerBatch&&) noexcept = default;
LedgerBatch& LedgerBatch::operator=(LedgerBatch&&) noexcept = default;

std::int64_t LedgerBatch::now_ms() const { return state_->now(); }

#define TG_LEDGER_DECIDE(Kind, Out)                                             \
  Result<Out> LedgerBatch::decide(const Kind& c, std::size_t index) {         \
    Context x{*state_, index};                                                  \
    return decide_one(x, c);                                                    \
  }
TG_LEDGER_DECIDE(CreateAccountCommand, AccountOutcome)
TG_LEDGER_DECIDE(CreditCommand, TransferOutcome)
TG_LEDGER_DECIDE(DebitCommand, TransferOutcome)
TG_LEDGER_DECIDE(ReserveCommand, HoldOutcome)
TG_LEDGER_DECIDE(CommitCommand, HoldOutcome)
TG_LEDGER_DECIDE(ReleaseCommand, HoldOutcome)
TG_LEDGER_DECIDE(ExtendCommand, HoldOutcome)
TG_LEDGER_DECIDE(ExpireOverdueCommand, ExpireOutcome)
TG_LEDGER_DECIDE(CreateKeyCommand, KeyOutcome)
TG_LEDGER_DECIDE(RevokeKeyCommand, KeyOutcome)
TG_LEDGER_DECIDE(RecordKeyUseCommand, KeyUseOutcome)
TG_LEDGER_DECIDE(UpdateAccountCommand, AccountOutcome)
#undef TG_LEDGER_DECIDE

const Hold* LedgerBatch::hold_by_request(std::string_view request_id) { return state_->hold_by_request(request_id); }
bool LedgerBatch::account_exists(std::string_view account_id) { return state_->account(account_id) != nullptr; }

const Hold* LedgerBatch::hold_for_change(std::string_view hold_id) { return batch::hold_for_change(*state_, hold_id); }

// A slice's command is not a batch result of its own: no index (only a transfer's result needs it).
Result<HoldOutcome> LedgerBatch::reserve(const ReserveCommand& c) {
  Context x{*state_, kNoResult};
  return decide_one(x, c);
}

Result<HoldOutcome> LedgerBatch::commit_hold(const CommitCommand& c) {
  Context x{*state_, kNoResult};
  return batch::commit_hold(x, c);
}

Result<HoldOutcome> LedgerBatch::release_hold(const ReleaseCommand& c) {
  Context x{*state_, kNoResult};
  return batch::release_hold(x, c);
}

Result<LedgerBatch::Refunded> LedgerBatch::refund_hold(const Refund& r) {
  State& s = *state_;
  Hold* h = batch::hold_for_change(s, r.hold_id);
  if (!h) return hold_not_found(r.hold_id);
  const auto owned = owner_of_hold(s.owners(), h->request_id);
  if (r.owner_request_id) {
    if (h->request_id != *r.owner_request_id) return hold_not_found(r.hold_id);
  } else if (owned) {
    return Error::make(Code::conflict, "hold " + r.hold_id + " belongs to " + std::string(owned->owner->noun) + " " +
                                           owned->id + ": refund it through its " + std::string(owned->owner->noun));
  }
  const auto amount = rules::plan_refund(*h, r.amount, s.now());
  if (!amount) return amount.error();
  Account* a = s.account(h->account_id);
  TG_ASSERT(a != nullptr);  // the account of a hold the batch changes is loaded (and locked)
  const lots::GivenBack given =
      lots::refund(s.lots_of(h->account_id), h->lots, h->committed_amount, h->refunded_amount, *amount, s.now());
  set_balances(*a, to_expired(rules::refund(a->balances, *amount), given.to_expired));
  h->refunded_amount += *amount;  // ≤ committed_amount (plan_refund)
  Event e = hold_event(s, *h, EventType::refunded, *amount, a->balances);
  e.reason = r.reason;
  e.reference = r.reference;
  s.append(std::move(e));
  return Refunded{*h, *amount};
}

Result<TransferOutcome> LedgerBatch::credit(const CreditCommand& c) {
  Context x{*state_, kNoResult};
  return decide_one(x, c);
}

Result<LedgerBatch::TakenBack> LedgerBatch::take_back(const TakeBack& t) {
  State& s = *state_;
  if (const KnownTransfer* existing = s.transfer(t.reference)) {
    const Transfer& tr = existing->transfer;
    if (tr.account_id != t.account_id || tr.kind != EventType::debited || tr.reason != t.reason || tr.amount > t.amount) {
      return Error::make(Code::idempotency_mismatch, "reference " + t.reference + " was already used on account " +
                                                         tr.account_id);
    }
    return TakenBack{s.view(t.account_id), tr.amount, false};
  }
  Account* a = s.account(t.account_id);
  if (!a) return account_not_found(t.account_id);
  expire_overdue_of(s, t.account_id);  // what readers see: available, and the lots it takes from
  const std::int64_t there = std::max<std::int64_t>(a->balances.available, 0);
  auto taken = rules::take_back(a->balances, t.amount, t.into_debt);
  if (!taken) return taken.error();
  if (taken->taken == 0) return TakenBack{s.view(t.account_id), 0, false};
  const bool short_of_it = taken->taken > there;
  const bool freezes = short_of_it && !a->frozen;
  if (freezes) {  // frozen first: an account below −overdraft_limit is a frozen one (set_balances)
    a->frozen = true;
    a->frozen_reason = std::string(kFrozenForRefundShortfall);
  }
  const Lot* own = t.first_from_credit ? s.lot_by_reference(t.account_id, *t.first_from_credit) : nullptr;
  lots::draw_first_from(s.lots_of(t.account_id), own ? own->seq : 0, taken->taken, lots::DrawUse::remove, s.now());
  set_balances(*a, taken->after);
  Event e = make_event(t.account_id, EventType::debited, taken->taken, taken->after, s.now());
  e.reference = t.reference;
  e.reason = t.reason;
  const std::size_t event_index = s.append(e);
  s.insert_transfer(Transfer{t.reference, t.account_id, EventType::debited, taken->taken, t.reason, 0}, event_index, e);
  if (freezes) append_settings_event(s, *a, kFrozenForRefundShortfall);
  return TakenBack{s.view(t.account_id), taken->taken, freezes};
}

std::optional<Account> LedgerBatch::account_view(std::string_view account_id) {
  if (!state_->account(account_id)) return std::nullopt;
  return state_->view(account_id);
}

Result<AccountOutcome> LedgerBatch::freeze(std::string_view account_id, std::string_view reason) {
  State& s = *state_;
  Account* a = s.account(account_id);
  if (!a) return account_not_found(account_id);
  if (a->frozen && a->frozen_reason == reason) return AccountOutcome{s.view(account_id), false};
  a->frozen = true;
  a->frozen_reason = std::string(reason);
  append_settings_event(s, *a, reason);
  return AccountOutcome{s.view(account_id), true};
}

LedgerEffects LedgerBatch::effects(std::vector<std::pair<std::size_t, std::size_t>>& result_events) && {
  result_events = std::move(state_->result_events());
  return std::move(*state_).effects();
}

}  // namespace tollgate::batch
