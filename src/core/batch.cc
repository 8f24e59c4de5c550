// A batch decided in memory (see batch.h). The rules are core/rules.h; this file applies them to
// the batch's rows in command order and records what changed.
#include "core/batch.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/checked.h"
#include "core/hold_id.h"
#include "core/limits.h"
#include "core/rules.h"

namespace tollgate::batch {
namespace {

template <typename T>
void sort_unique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// --- the keys of each command kind (an overload per kind: a new kind must add one) -------------
void add_keys(const CreateAccountCommand& c, Keys& k) {
  k.accounts.push_back(c.account_id);
  k.view_accounts.push_back(c.account_id);
}
void add_keys(const CreditCommand& c, Keys& k) {
  k.accounts.push_back(c.account_id);
  k.references.push_back(c.reference);
  k.view_accounts.push_back(c.account_id);
}
void add_keys(const DebitCommand& c, Keys& k) {
  k.accounts.push_back(c.account_id);
  k.references.push_back(c.reference);
  k.view_accounts.push_back(c.account_id);
  ++k.zombie_expiring_commands;
}
void add_keys(const ReserveCommand& c, Keys& k) {
  k.accounts.push_back(c.account_id);
  k.request_ids.push_back(c.request_id);
  ++k.new_holds_max;
  ++k.zombie_expiring_commands;
}
void add_hold(std::string_view hold_id, Keys& k) {
  k.hold_ids.emplace_back(hold_id);
  if (auto seq = hold_id_seq(hold_id)) k.hold_seqs.push_back(*seq);
}
void add_keys(const CommitCommand& c, Keys& k) {
  add_hold(c.hold_id, k);
  ++k.live_holds_ending_max;
  ++k.zombie_expiring_commands;  // a late charge refused on the stored row
}
void add_keys(const ReleaseCommand& c, Keys& k) {
  add_hold(c.hold_id, k);
  ++k.live_holds_ending_max;
}
void add_keys(const ExtendCommand& c, Keys& k) { add_hold(c.hold_id, k); }
void add_keys(const ExpireOverdueCommand& c, Keys& k) {
  const auto total = checked_add(k.overdue_max, c.max_holds);
  TG_ASSERT(total.has_value());
  k.overdue_max = *total;
}
void add_keys(const CreateKeyCommand& c, Keys& k) {
  k.key_ids.push_back(c.key_id);
  if (c.account_id) k.accounts.push_back(*c.account_id);
}
void add_keys(const RevokeKeyCommand& c, Keys& k) { k.key_ids.push_back(c.key_id); }
void add_keys(const RecordKeyUseCommand& c, Keys& k) {
  for (const auto& use : c.uses) k.key_ids.push_back(use.key_id);
}
void add_keys(const SubmitJobCommand& c, Keys& k) {
  k.job_ids.push_back(c.client_request_id);
  k.accounts.push_back(c.account_id);
  k.request_ids.push_back(jobs::hold_request_id(c.client_request_id));
  ++k.new_holds_max;
  ++k.zombie_expiring_commands;
}
void add_keys(const ClaimJobCommand& c, Keys& k) {
  k.job_ids.push_back(c.client_request_id);
  add_hold(c.hold_id, k);
}
void add_keys(const EndJobCommand& c, Keys& k) {
  k.job_ids.push_back(c.client_request_id);
  add_hold(c.hold_id, k);
  ++k.live_holds_ending_max;
  ++k.zombie_expiring_commands;  // a late charge refused on the stored row
}
void add_keys(const LockCommand& c, Keys& k) { coord::add_keys(c, k.coord); }
void add_keys(const IdempotencyCommand& c, Keys& k) { coord::add_keys(c, k.coord); }
void add_keys(const RateLimitCommand& c, Keys& k) { coord::add_keys(c, k.coord); }
void add_keys(const PruneCoordCommand& c, Keys& k) { coord::add_keys(c, k.coord); }
void add_keys(const UpdateAccountCommand& c, Keys& k) {
  k.accounts.push_back(c.account_id);
  k.view_accounts.push_back(c.account_id);
  ++k.zombie_expiring_commands;  // lowering the overdraft limit, refused on the stored row
}

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

class State {
 public:
  explicit State(Snapshot s)
      : now_(s.now_ms), new_seqs_(std::move(s.new_hold_seqs)), coord_(std::move(s.coord), s.now_ms) {
    TG_ASSERT(std::is_sorted(new_seqs_.begin(), new_seqs_.end()));
    for (Account& a : s.accounts) {
      const std::string id = a.account_id;
      accounts_.try_emplace(id, Slot<Account>{a, std::move(a)});
    }
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
    for (jobs::Job& j : s.jobs) {
      const std::string id = j.client_request_id;
      jobs_.try_emplace(id, Slot<jobs::Job>{j, std::move(j)});
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
  coord::CoordState& coord() { return coord_; }

  Account* account(std::string_view id) {
    auto it = accounts_.find(std::string(id));
    return it == accounts_.end() ? nullptr : &it->second.now;
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
  jobs::Job* job(std::string_view id) {
    auto it = jobs_.find(std::string(id));
    return it == jobs_.end() ? nullptr : &it->second.now;
  }
  jobs::Job& insert_job(jobs::Job j) {
    const std::string id = j.client_request_id;
    TG_ASSERT(jobs_.count(id) == 0);
    return jobs_.try_emplace(id, Slot<jobs::Job>{std::nullopt, std::move(j)}).first->second.now;
  }
  // Appends a line to a job's history.
  void note(const jobs::Job& j, std::string kind, std::optional<int> attempt, std::string detail) {
    entries_.push_back(jobs::JobEntry{j.client_request_id, now_, std::move(kind), attempt, std::move(detail)});
  }

  // The account as a reader sees it now: overdue holds already count as available.
  Account view(std::string_view id) {
    const Account* row = account(id);
    TG_ASSERT(row != nullptr);
    auto v = views_.find(std::string(id));
    TG_ASSERT(v != views_.end());  // keys_of() asked for it; a new account has an empty one
    Account a = *row;
    a.balances.available += v->second.overdue_sum;
    a.balances.reserved -= v->second.overdue_sum;
    a.active_holds -= v->second.overdue_count;
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
    new_transfers_.push_back(Effects::NewTransfer{std::move(t), event_index});
  }

  ApiKey& insert_key(ApiKey k) {
    const std::string id = k.key_id;
    TG_ASSERT(keys_.count(id) == 0);
    return keys_.try_emplace(id, Slot<ApiKey>{std::nullopt, std::move(k)}).first->second.now;
  }

  // Appends an event (its id comes from the backend); returns its index.
  std::size_t append(Event e) {
    e.event_id = 0;
    events_.push_back(std::move(e));
    return events_.size() - 1;
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

  Effects effects() && {
    Effects e;
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
    for (auto& [id, slot] : jobs_) {
      if (!slot.before) {
        e.new_jobs.push_back(std::move(slot.now));
      } else if (!(*slot.before == slot.now)) {
        e.changed_jobs.push_back(Change<jobs::Job>{std::move(*slot.before), std::move(slot.now)});
      }
    }
    e.job_entries = std::move(entries_);
    e.coord = std::move(coord_).effects();  // in key order already
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
    std::sort(e.new_jobs.begin(), e.new_jobs.end(),
              [](const auto& a, const auto& b) { return a.client_request_id < b.client_request_id; });
    std::sort(e.changed_jobs.begin(), e.changed_jobs.end(),
              [](const auto& a, const auto& b) { return a.after.client_request_id < b.after.client_request_id; });
    return e;
  }

 private:
  const std::int64_t now_;
  std::vector<std::int64_t> new_seqs_;
  coord::CoordState coord_;  // lock, idempotency-key and rate-limit rows
  std::size_t next_seq_ = 0;
  std::unordered_map<std::string, Slot<Account>> accounts_;
  std::unordered_map<std::string, Slot<Hold>> holds_;
  std::unordered_map<std::string, std::string> by_request_;
  std::unordered_map<std::string, KnownTransfer> transfers_;
  std::unordered_map<std::string, Slot<ApiKey>> keys_;
  std::unordered_map<std::string, Slot<jobs::Job>> jobs_;
  std::vector<jobs::JobEntry> entries_;
  std::unordered_map<std::string, AccountView> views_;
  std::vector<std::string> overdue_;  // hold ids, by deadline
  std::vector<Event> events_;
  std::vector<Effects::NewTransfer> new_transfers_;
};

// --- deciding each command kind (an overload per kind) -----------------------------------------
struct Context {
  State& state;
  Decision& decision;
  std::size_t index;  // of the command being decided
};

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
  return e;
}

Event hold_event(const Hold& hold, EventType type, std::int64_t amount, const Balances& after, std::int64_t now_ms) {
  Event e = make_event(hold.account_id, type, amount, after, now_ms);
  e.hold_id = hold.hold_id;
  e.job_id = jobs::job_of_hold(hold.request_id);  // a job's hold: every event names the job
  return e;
}

void set_balances(Account& account, const Balances& after) {
  TG_ASSERT(after.available + after.reserved + after.used == after.purchased);
  TG_ASSERT(after.available >= -account.overdraft_limit && after.reserved >= 0 && after.used >= 0);
  account.balances = after;
}

// Ends an active hold: `committed` of its amount to used, the rest back to available.
void end_hold(State& s, Hold& h, HoldStatus status, std::int64_t committed, std::int64_t closed_at_ms, bool overdue) {
  TG_ASSERT(h.status == HoldStatus::active && status != HoldStatus::active);
  Account* a = s.account(h.account_id);
  TG_ASSERT(a != nullptr);  // the account of a hold the batch changes is loaded (and locked)
  TG_ASSERT(a->active_holds >= 1);
  set_balances(*a, rules::commit(a->balances, h.amount, committed));
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
  s.append(hold_event(h, EventType::expired, h.amount, s.account(h.account_id)->balances, s.now()));
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
  if (h && rules::is_overdue(*h, s.now())) expire(s, *h);
  return h;
}

CommandResult decide_one(Context& x, const CreateAccountCommand& c) {
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

template <typename TransferCommand>
CommandResult transfer(Context& x, const TransferCommand& c, EventType kind, std::string_view reason) {
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
    if (existing->new_event_index) x.decision.result_events.emplace_back(x.index, *existing->new_event_index);
    return TransferOutcome{existing->event, s.view(c.account_id), false};
  }
  Account* a = s.account(c.account_id);
  if (!a) return account_not_found(c.account_id);
  if (kind == EventType::debited) {
    if (auto open = rules::check_not_frozen(*a); !open) return open.error();
  }
  const auto move = [&] { return kind == EventType::credited ? rules::credit(a->balances, c.amount)
                                                             : rules::debit(a->balances, c.amount); };
  Result<Balances> after = move();
  if (!after && kind == EventType::debited && expire_overdue_of(s, c.account_id)) after = move();
  if (!after) return after.error();
  set_balances(*a, *after);
  Event e = make_event(c.account_id, kind, c.amount, *after, s.now());
  e.reference = c.reference;
  if (!reason.empty()) e.reason = std::string(reason);
  const std::size_t event_index = s.append(e);
  s.insert_transfer(Transfer{c.reference, c.account_id, kind, c.amount, std::string(reason), 0}, event_index, e);
  x.decision.result_events.emplace_back(x.index, event_index);
  return TransferOutcome{std::move(e), s.view(c.account_id), true};
}

CommandResult decide_one(Context& x, const CreditCommand& c) { return transfer(x, c, EventType::credited, ""); }
CommandResult decide_one(Context& x, const DebitCommand& c) { return transfer(x, c, EventType::debited, c.reason); }

CommandResult decide_one(Context& x, const ReserveCommand& c) {
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
  if (auto open = rules::check_not_frozen(*a); !open) return open.error();
  Result<Balances> after = rules::reserve(*a, c.amount);
  if (!after && expire_overdue_of(s, c.account_id)) after = rules::reserve(*a, c.amount);
  if (!after) return after.error();
  set_balances(*a, *after);
  a->active_holds += 1;
  TG_ASSERT(!a->max_active_holds || a->active_holds <= *a->max_active_holds);
  Hold& h = s.insert_hold(c);
  s.append(hold_event(h, EventType::reserved, c.amount, *after, s.now()));
  return HoldOutcome{h, true};
}

// The holds API may not end or extend a job's hold: the job ends it (api.md: a job and its hold end
// together). Checked before anything changes.
Status check_not_a_jobs_hold(State& s, std::string_view hold_id, std::string_view verb) {
  const Hold* h = s.hold(hold_id);
  if (!h) return ok_status();
  if (auto job = jobs::job_of_hold(h->request_id)) {
    return Error::make(Code::conflict, "hold " + std::string(hold_id) + " belongs to job " + *job + ": it cannot be " +
                                           std::string(verb) + " on its own (cancel the job to release it)");
  }
  return ok_status();
}

CommandResult commit_hold(Context& x, const CommitCommand& c) {
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
      s.append(hold_event(*h, EventType::committed, plan->amount, a->balances, s.now()));
      return HoldOutcome{*h, true};
    case rules::CommitAction::late_charge: {
      Result<Balances> after = rules::late_charge(*a, plan->amount);
      if (!after && expire_overdue_of(s, h->account_id)) after = rules::late_charge(*a, plan->amount);
      if (after) {
        set_balances(*a, *after);
        h->late_outcome = LateOutcome::charged;
        h->committed_amount = plan->amount;
        s.append(hold_event(*h, EventType::late_charged, plan->amount, *after, s.now()));
        return HoldOutcome{*h, true};
      }
    }
      [[fallthrough]];  // not available (or a balance would overflow): the result is forgiven
    case rules::CommitAction::late_forgive:
      TG_ASSERT(h->status == HoldStatus::expired && h->late_outcome == LateOutcome::none);
      h->late_outcome = LateOutcome::forgiven;
      h->committed_amount = 0;
      s.append(hold_event(*h, EventType::late_forgiven, plan->amount, a->balances, s.now()));
      return HoldOutcome{*h, true};
  }
  TG_ASSERT(false && "unreachable commit action");
}

CommandResult decide_one(Context& x, const CommitCommand& c) {
  if (auto ok = check_not_a_jobs_hold(x.state, c.hold_id, "committed"); !ok) return ok.error();
  return commit_hold(x, c);
}

CommandResult release_hold(Context& x, const ReleaseCommand& c) {
  State& s = x.state;
  Hold* h = hold_for_change(s, c.hold_id);
  if (!h) return hold_not_found(c.hold_id);
  auto action = rules::plan_release(*h, s.now());
  if (!action) return action.error();
  if (*action == rules::ReleaseAction::replay) return HoldOutcome{*h, false};
  end_hold(s, *h, HoldStatus::released, 0, s.now(), /*overdue=*/false);
  h->release_reason = c.reason;
  Event e = hold_event(*h, EventType::released, h->amount, s.account(h->account_id)->balances, s.now());
  e.reason = c.reason;
  s.append(std::move(e));
  return HoldOutcome{*h, true};
}

CommandResult decide_one(Context& x, const ReleaseCommand& c) {
  if (auto ok = check_not_a_jobs_hold(x.state, c.hold_id, "released"); !ok) return ok.error();
  return release_hold(x, c);
}

CommandResult decide_one(Context& x, const ExtendCommand& c) {
  if (auto ok = check_not_a_jobs_hold(x.state, c.hold_id, "extended"); !ok) return ok.error();
  State& s = x.state;
  Hold* h = hold_for_change(s, c.hold_id);
  if (!h) return hold_not_found(c.hold_id);
  if (auto ok = rules::plan_extend(*h, s.now()); !ok) return ok.error();
  const auto expires = checked_add(s.now(), c.ttl_ms);
  TG_ASSERT(expires.has_value());  // ttl_ms is validated against the configured maximum
  h->expires_at_ms = *expires;
  Event e = hold_event(*h, EventType::extended, 0, s.account(h->account_id)->balances, s.now());
  e.expires_at_ms = h->expires_at_ms;
  s.append(std::move(e));
  return HoldOutcome{*h, true};
}

CommandResult decide_one(Context& x, const UpdateAccountCommand& c) {
  State& s = x.state;
  Account* a = s.account(c.account_id);
  if (!a) return account_not_found(c.account_id);
  Result<AccountSettings> after = rules::update_settings(*a, c);
  if (!after && expire_overdue_of(s, c.account_id)) after = rules::update_settings(*a, c);
  if (!after) return after.error();
  if (*after == a->settings()) return AccountOutcome{s.view(c.account_id), false};
  a->overdraft_limit = after->overdraft_limit;
  a->max_active_holds = after->max_active_holds;
  a->frozen = after->frozen;
  Event e = make_event(c.account_id, EventType::account_updated, 0, a->balances, s.now());
  e.settings = *after;
  s.append(std::move(e));
  return AccountOutcome{s.view(c.account_id), true};
}

CommandResult decide_one(Context& x, const ExpireOverdueCommand& c) {
  TG_ASSERT(c.max_holds >= 1);
  const auto overdue = x.state.overdue(std::nullopt, c.max_holds);
  for (Hold* h : overdue) expire(x.state, *h);
  return ExpireOutcome{static_cast<std::int64_t>(overdue.size())};
}

CommandResult decide_one(Context& x, const CreateKeyCommand& c) {
  State& s = x.state;
  if (const ApiKey* existing = s.key(c.key_id)) {
    if (existing->account_id != c.account_id || existing->secret_sha256 != c.secret_sha256) {
      return Error::make(Code::conflict, "key " + c.key_id + " exists");
    }
    return KeyOutcome{*existing, false};
  }
  if (c.account_id && !s.account(*c.account_id)) return account_not_found(*c.account_id);
  return KeyOutcome{s.insert_key(ApiKey{c.key_id, c.account_id, c.secret_sha256, s.now(), std::nullopt}), true};
}

CommandResult decide_one(Context& x, const RevokeKeyCommand& c) {
  State& s = x.state;
  ApiKey* key = s.key(c.key_id);
  if (!key) return Error::make(Code::not_found, "key " + c.key_id + " does not exist");
  auto action = rules::plan_revoke_key(*key, c.replaced_by_configured_admin_key);
  if (!action) return action.error();
  if (*action == rules::RevokeAction::replay) return KeyOutcome{*key, false};
  key->revoked_at_ms = s.now();
  return KeyOutcome{*key, true};
}

CommandResult decide_one(Context& x, const RecordKeyUseCommand& c) {
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

// --- jobs: the job row and its hold change together ----------------------------------------------
Error job_not_found(std::string_view id) {
  return Error::make(Code::not_found, "job " + std::string(id) + " does not exist");
}

// The job named by a claim or an end, checked against the hold the caller read with it.
Result<jobs::Job*> job_for_change(State& s, const std::string& id, const std::string& hold_id) {
  jobs::Job* j = s.job(id);
  if (!j) return job_not_found(id);
  if (j->hold_id != hold_id) {
    return Error::make(Code::conflict, "job " + id + "'s hold is " + j->hold_id + ", not " + hold_id);
  }
  return j;
}

std::optional<int> attempt_of(const jobs::Job& j) {
  return j.attempts > 0 ? std::optional<int>(j.attempts) : std::nullopt;
}

std::int64_t lease_until(std::int64_t now_ms, std::int64_t lease_ms) {
  const auto until = checked_add(now_ms, lease_ms);
  TG_ASSERT(until.has_value());  // lease_ms is validated
  return *until;
}

CommandResult decide_one(Context& x, const SubmitJobCommand& c) {
  State& s = x.state;
  if (const jobs::Job* existing = s.job(c.client_request_id)) {
    if (existing->account_id != c.account_id || existing->cost != c.cost || existing->provider != c.provider ||
        existing->input_json != c.input_json) {
      return Error::make(Code::idempotency_mismatch,
                         "client_request_id " + c.client_request_id + " already made a job of cost " +
                             std::to_string(existing->cost) + " for provider " + existing->provider + " on account " +
                             existing->account_id + " (with its own input)");
    }
    return JobOutcome{*existing, false};
  }
  ReserveCommand reserve;
  reserve.account_id = c.account_id;
  reserve.amount = c.cost;
  reserve.request_id = jobs::hold_request_id(c.client_request_id);
  reserve.ttl_ms = c.ttl_ms;
  reserve.metadata_json = "{\"job_id\":\"" + c.client_request_id + "\"}";  // ids need no escaping
  reserve.hold_id_random = c.hold_id_random;
  if (s.hold_by_request(reserve.request_id)) {
    // Jobs and their holds are only ever made together, and the holds API may not use the prefix.
    return Error::make(Code::internal, "hold " + reserve.request_id + " exists without its job");
  }
  CommandResult reserved = decide_one(x, reserve);
  if (!reserved) return reserved.error();
  const Hold& hold = std::get<HoldOutcome>(reserved.value()).hold;
  jobs::Job j;
  j.client_request_id = c.client_request_id;
  j.account_id = c.account_id;
  j.cost = c.cost;
  j.provider = c.provider;
  j.input_json = c.input_json;
  j.status = jobs::JobStatus::pending;
  j.hold_id = hold.hold_id;
  j.created_at_ms = s.now();
  j.updated_at_ms = s.now();
  j.lease_owner = c.owner;
  j.lease_expires_at_ms = lease_until(s.now(), c.lease_ms);
  jobs::Job& stored = s.insert_job(std::move(j));
  s.note(stored, "submitted", std::nullopt,
         "reserved " + std::to_string(c.cost) + " credits of account " + c.account_id + " as hold " + hold.hold_id +
             "; accepted by " + c.owner);
  return JobOutcome{stored, true};
}

CommandResult decide_one(Context& x, const ClaimJobCommand& c) {
  State& s = x.state;
  auto found = job_for_change(s, c.client_request_id, c.hold_id);
  if (!found) return found.error();
  jobs::Job& j = **found;
  if (jobs::is_ended(j.status)) {
    return Error::make(Code::conflict, "job " + j.client_request_id + " has already ended (" +
                                           std::string(jobs::job_status_name(j.status)) + ")");
  }
  if (j.lease_owner && *j.lease_owner != c.owner && j.lease_expires_at_ms && *j.lease_expires_at_ms > s.now()) {
    return Error::make(Code::conflict, "job " + j.client_request_id + " is leased by " + *j.lease_owner +
                                           " for another " + std::to_string(*j.lease_expires_at_ms - s.now()) + " ms");
  }
  Hold* hold = hold_for_change(s, j.hold_id);  // an overdue hold expires first
  TG_ASSERT(hold != nullptr);                  // a job's hold is made with it and never deleted
  if (j.status == jobs::JobStatus::pending && hold->status != HoldStatus::active) {
    // Never sent, so there is nothing to ask the provider: the job fails with its expired hold.
    j.status = jobs::JobStatus::failed;
    j.error = "the hold expired before the job was sent to its provider";
    j.lease_owner.reset();
    j.lease_expires_at_ms.reset();
    j.updated_at_ms = s.now();
    s.note(j, "failed", std::nullopt, "by " + c.owner + ": " + *j.error + "; nothing was charged");
    return JobOutcome{j, true};
  }
  if (j.status == jobs::JobStatus::pending) {
    j.status = jobs::JobStatus::running;
    s.note(j, "running", std::nullopt, "started by " + c.owner);
  } else if (j.lease_owner != c.owner) {
    s.note(j, "claimed", attempt_of(j),
           "claimed by " + c.owner + (j.lease_owner ? " after the lease of " + *j.lease_owner + " expired" : ""));
  }
  if (!c.note.empty()) s.note(j, "answer", attempt_of(j), c.note);
  j.lease_owner = c.owner;
  j.lease_expires_at_ms = lease_until(s.now(), c.lease_ms);
  if (c.begin_attempt) {
    ++j.attempts;
    s.note(j, "attempt", j.attempts, "request sent to provider " + j.provider + " by " + c.owner);
  }
  j.updated_at_ms = s.now();
  return JobOutcome{j, true};
}

CommandResult decide_one(Context& x, const EndJobCommand& c) {
  State& s = x.state;
  TG_ASSERT(jobs::is_ended(c.end));
  auto found = job_for_change(s, c.client_request_id, c.hold_id);
  if (!found) return found.error();
  jobs::Job& j = **found;
  const std::string by = std::string(jobs::ended_by_name(c.by));
  const std::string seen = c.note.empty() ? "" : " (" + c.note + ")";
  if (jobs::is_ended(j.status)) {
    if (j.status == jobs::JobStatus::cancelled && c.end == jobs::JobStatus::completed && !j.result_json) {
      j.result_json = c.result_json;
      j.updated_at_ms = s.now();
      s.note(j, "late_result", attempt_of(j),
             "the provider's result arrived after the job was cancelled: recorded, nothing charged" + seen);
      return JobOutcome{j, true};
    }
    return JobOutcome{j, false};  // a job ends once
  }
  Hold* hold = hold_for_change(s, j.hold_id);
  TG_ASSERT(hold != nullptr);
  std::optional<Hold> ended_hold;
  if (c.end == jobs::JobStatus::completed) {
    j.result_json = c.result_json;
    CommandResult committed = commit_hold(x, CommitCommand{j.hold_id, std::nullopt, c.late_commit});
    if (committed) {
      const Hold& h = std::get<HoldOutcome>(committed.value()).hold;
      ended_hold = h;
      j.status = jobs::JobStatus::completed;
      j.charged = h.committed_amount > 0;
      std::string how = "charged " + std::to_string(h.committed_amount);
      if (h.late_outcome == LateOutcome::charged) how = "late: charged " + std::to_string(h.committed_amount) + " after the hold expired";
      if (h.late_outcome == LateOutcome::forgiven) how = "late: forgiven, the hold had expired";
      s.note(j, "completed", attempt_of(j), "by " + by + ": " + how + seen);
    } else {
      // The hold expired and the late-commit policy rejects a late result: kept, not charged.
      j.status = jobs::JobStatus::failed;
      j.error = "the result arrived after the hold expired and was not charged: " + committed.error().detail;
      s.note(j, "failed", attempt_of(j), "by " + by + ": " + *j.error + seen);
    }
  } else {
    const std::string why = c.end == jobs::JobStatus::cancelled ? "cancelled" : c.error.value_or("failed");
    if (hold->status == HoldStatus::active) {
      CommandResult released = release_hold(x, ReleaseCommand{j.hold_id, why});
      TG_ASSERT(released.ok());
      ended_hold = std::get<HoldOutcome>(released.value()).hold;
    }
    j.status = c.end;
    j.error = c.end == jobs::JobStatus::failed ? std::optional<std::string>(why) : c.error;
    s.note(j, std::string(jobs::job_status_name(c.end)), attempt_of(j),
           "by " + by + ": " + why + "; nothing charged" + seen);
  }
  j.lease_owner.reset();
  j.lease_expires_at_ms.reset();
  j.updated_at_ms = s.now();
  return JobOutcome{j, true, std::move(ended_hold)};
}

CommandResult decide_one(Context& x, const LockCommand& c) {
  auto r = x.state.coord().lock(c);
  if (!r) return r.error();
  return std::move(r).value();
}
CommandResult decide_one(Context& x, const IdempotencyCommand& c) {
  auto r = x.state.coord().idempotency(c);
  if (!r) return r.error();
  return std::move(r).value();
}
CommandResult decide_one(Context& x, const RateLimitCommand& c) {
  auto r = x.state.coord().rate(c);
  if (!r) return r.error();
  return std::move(r).value();
}
CommandResult decide_one(Context& x, const PruneCoordCommand& c) {
  auto r = x.state.coord().prune(c);
  if (!r) return r.error();
  return std::move(r).value();
}

}  // namespace

std::int64_t Keys::overdue_per_account_max() const {
  return limits::kReaperBatchMaxDefault * (1 + zombie_expiring_commands);
}

std::int64_t Keys::reaper_load_max(std::int64_t overdue_loaded) const {
  if (overdue_max == 0) return 0;
  return overdue_max + static_cast<std::int64_t>(hold_ids.size()) + overdue_loaded;
}

std::int64_t Keys::reaper_load_bound() const {
  if (overdue_max == 0) return 0;
  return reaper_load_max(static_cast<std::int64_t>(accounts.size() + hold_ids.size()) * overdue_per_account_max());
}

Keys keys_of(std::span<const Command> commands) {
  Keys k;
  for (const Command& command : commands) std::visit([&](const auto& c) { add_keys(c, k); }, command);
  sort_unique(k.accounts);
  sort_unique(k.hold_ids);
  sort_unique(k.hold_seqs);
  sort_unique(k.request_ids);
  sort_unique(k.references);
  sort_unique(k.key_ids);
  sort_unique(k.job_ids);
  sort_unique(k.view_accounts);
  coord::finish_keys(k.coord);
  return k;
}

Decision decide(std::span<const Command> commands, Snapshot snapshot) {
  Decision d;
  d.results.reserve(commands.size());
  State state(std::move(snapshot));
  for (std::size_t i = 0; i < commands.size(); ++i) {
    Context x{state, d, i};
    d.results.push_back(std::visit([&](const auto& c) { return decide_one(x, c); }, commands[i]));
  }
  d.effects = std::move(state).effects();
  return d;
}

void fill_event_ids(Decision& d, std::span<const std::int64_t> event_ids) {
  TG_ASSERT(event_ids.size() == d.effects.events.size());
  for (std::size_t i = 1; i < event_ids.size(); ++i) TG_ASSERT(event_ids[i - 1] < event_ids[i]);
  for (std::size_t i = 0; i < event_ids.size(); ++i) d.effects.events[i].event_id = event_ids[i];
  for (auto& t : d.effects.transfers) t.transfer.event_id = event_ids[t.event_index];
  for (const auto& [result, event] : d.result_events) {
    auto* outcome = std::get_if<TransferOutcome>(&d.results.at(result).value());
    TG_ASSERT(outcome != nullptr);
    outcome->event.event_id = event_ids[event];
  }
}

}  // namespace tollgate::batch
