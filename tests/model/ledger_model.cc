// The model (see ledger_model.h): each rule written out plainly, one command at a time.
#include "model/ledger_model.h"

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "core/limits.h"

namespace tollgate::testing {
namespace {

constexpr std::int64_t kMax = limits::kBalanceMax;  // the largest amount and balance (2^53 − 1)
// Overdue holds a refused command expires, at most: the reaper's default batch.
constexpr std::int64_t kZombiesPerRefusal = limits::kReaperBatchMaxDefault;

Error err(Code code) { return Error::make(code, "model"); }

Error insufficient(const Account& a, std::int64_t amount) {
  return Error::insufficient(a.balances.available, amount, a.balances.reserved);
}

std::optional<std::string> job_of(const std::string& request_id) {
  if (request_id.rfind("job:", 0) == 0) return request_id.substr(4);
  return std::nullopt;
}

std::string status_name(jobs::JobStatus s) {
  switch (s) {
    case jobs::JobStatus::pending: return "pending";
    case jobs::JobStatus::running: return "running";
    case jobs::JobStatus::completed: return "completed";
    case jobs::JobStatus::failed: return "failed";
    case jobs::JobStatus::cancelled: return "cancelled";
  }
  return "?";
}

bool ended(jobs::JobStatus s) {
  return s == jobs::JobStatus::completed || s == jobs::JobStatus::failed || s == jobs::JobStatus::cancelled;
}

}  // namespace

// --- reads -----------------------------------------------------------------------------------------

std::optional<Account> LedgerModel::account(const std::string& account_id, std::int64_t now_ms) const {
  auto it = accounts_.find(account_id);
  if (it == accounts_.end()) return std::nullopt;
  Account a = it->second;
  std::optional<std::int64_t> oldest_created;
  for (const auto& [id, s] : holds_) {
    const Hold& h = s.hold;
    if (h.account_id != account_id || h.status != HoldStatus::active) continue;
    if (now_ms >= h.expires_at_ms) {  // a reader sees it expired: its amount is available again
      a.balances.available += h.amount;
      a.balances.reserved -= h.amount;
      a.active_holds -= 1;
    } else if (!oldest_created || h.created_at_ms < *oldest_created) {
      oldest_created = h.created_at_ms;
    }
  }
  if (oldest_created) a.oldest_active_hold_age_ms = std::max<std::int64_t>(0, now_ms - *oldest_created);
  return a;
}

std::vector<std::string> LedgerModel::account_ids() const {
  std::vector<std::string> out;
  for (const auto& [id, a] : accounts_) out.push_back(id);
  return out;
}

std::vector<Hold> LedgerModel::holds(std::int64_t now_ms) const {
  std::vector<const StoredHold*> all;
  for (const auto& [id, s] : holds_) all.push_back(&s);
  std::sort(all.begin(), all.end(), [](const StoredHold* a, const StoredHold* b) { return a->seq < b->seq; });
  std::vector<Hold> out;
  for (const StoredHold* s : all) {
    Hold h = s->hold;
    if (h.status == HoldStatus::active && now_ms >= h.expires_at_ms) {
      h.status = HoldStatus::expired;
      h.closed_at_ms = h.expires_at_ms;
    }
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<Event> LedgerModel::events_of(const std::string& account_id) const {
  std::vector<Event> out;
  for (const Event& e : events_) {
    if (e.account_id == account_id) out.push_back(e);
  }
  return out;
}

std::optional<jobs::Job> LedgerModel::job(const std::string& id) const {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

std::vector<jobs::JobEntry> LedgerModel::history(const std::string& id) const {
  std::vector<jobs::JobEntry> out;
  for (const auto& e : history_) {
    if (e.client_request_id == id) out.push_back(e);
  }
  return out;
}

std::vector<std::string> LedgerModel::job_ids() const {
  std::vector<std::string> out;
  for (const auto& [id, j] : jobs_) out.push_back(id);
  return out;
}

std::optional<coord::Lock> LedgerModel::lock(const std::string& key) const {
  auto it = locks_.find(key);
  if (it == locks_.end()) return std::nullopt;
  return it->second;
}

std::optional<coord::IdempotencyKey> LedgerModel::idempotency_key(const std::string& key) const {
  auto it = idem_.find(key);
  if (it == idem_.end()) return std::nullopt;
  return it->second;
}

std::optional<ApiKey> LedgerModel::key(const std::string& key_id) const {
  auto it = keys_.find(key_id);
  if (it == keys_.end()) return std::nullopt;
  return it->second;
}

// --- the one entry ---------------------------------------------------------------------------------

CommandResult LedgerModel::apply(const Command& command, std::int64_t now_ms) {
  now_ = now_ms;
  return std::visit(
      [&](const auto& c) -> CommandResult {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, CreateAccountCommand>) {
          return create_account(c);
        } else if constexpr (std::is_same_v<T, CreditCommand>) {
          return transfer(c.account_id, c.amount, c.reference, "", EventType::credited);
        } else if constexpr (std::is_same_v<T, DebitCommand>) {
          return transfer(c.account_id, c.amount, c.reference, c.reason, EventType::debited);
        } else if constexpr (std::is_same_v<T, ReserveCommand>) {
          auto r = reserve(c);
          if (!r) return r.error();
          return r.value();
        } else if constexpr (std::is_same_v<T, CommitCommand> || std::is_same_v<T, ReleaseCommand> ||
                             std::is_same_v<T, ExtendCommand>) {
          // The holds API leaves a job's hold alone: the job ends it.
          if (auto it = holds_.find(c.hold_id); it != holds_.end() && job_of(it->second.hold.request_id)) {
            return err(Code::conflict);
          }
          if constexpr (std::is_same_v<T, CommitCommand>) {
            auto r = commit(c.hold_id, c.amount, c.late_commit);
            if (!r) return r.error();
            return r.value();
          } else if constexpr (std::is_same_v<T, ReleaseCommand>) {
            auto r = release(c.hold_id, c.reason);
            if (!r) return r.error();
            return r.value();
          } else {
            return extend(c);
          }
        } else if constexpr (std::is_same_v<T, UpdateAccountCommand>) {
          return update(c);
        } else if constexpr (std::is_same_v<T, ExpireOverdueCommand>) {
          return expire_overdue(c);
        } else if constexpr (std::is_same_v<T, CreateKeyCommand>) {
          return create_key(c);
        } else if constexpr (std::is_same_v<T, RevokeKeyCommand>) {
          return revoke_key(c);
        } else if constexpr (std::is_same_v<T, RecordKeyUseCommand>) {
          return record_key_use(c);
        } else if constexpr (std::is_same_v<T, jobs::SubmitJobCommand>) {
          return submit(c);
        } else if constexpr (std::is_same_v<T, jobs::ClaimJobCommand>) {
          return claim(c);
        } else if constexpr (std::is_same_v<T, jobs::EndJobCommand>) {
          return end(c);
        } else if constexpr (std::is_same_v<T, coord::LockCommand>) {
          return lock_op(c);
        } else if constexpr (std::is_same_v<T, coord::IdempotencyCommand>) {
          return idempotency(c);
        } else if constexpr (std::is_same_v<T, coord::RateLimitCommand>) {
          return rate(c);
        } else if constexpr (std::is_same_v<T, coord::PruneCoordCommand>) {
          return prune(c);
        } else if constexpr (std::is_same_v<T, webhooks::CreateEndpointCommand>) {
          return create_endpoint(c);
        } else if constexpr (std::is_same_v<T, webhooks::UpdateEndpointCommand>) {
          return update_endpoint(c);
        } else if constexpr (std::is_same_v<T, webhooks::DeleteEndpointCommand>) {
          return delete_endpoint(c);
        } else if constexpr (std::is_same_v<T, webhooks::RotateEndpointSecretCommand>) {
          return rotate_endpoint(c);
        } else if constexpr (std::is_same_v<T, webhooks::ReplayEndpointCommand>) {
          return replay_endpoint(c);
        } else if constexpr (std::is_same_v<T, webhooks::RecordDeliveriesCommand>) {
          return record_deliveries(c);
        } else if constexpr (std::is_same_v<T, refunds::RefundCommand>) {
          return refund(c);
        } else if constexpr (std::is_same_v<T, payments::CreditPaymentCommand>) {
          return credit_payment(c);
        } else if constexpr (std::is_same_v<T, payments::TakeBackPaymentCommand>) {
          return take_back_payment(c);
        } else if constexpr (std::is_same_v<T, payments::DisputePaymentCommand>) {
          return dispute_payment(c);
        } else if constexpr (std::is_same_v<T, prices::SetPriceCommand>) {
          return set_price(c);
        } else if constexpr (std::is_same_v<T, prices::ReserveByFeatureCommand>) {
          return reserve_by_feature(c);
        } else {
          static_assert(!sizeof(T*), "a command kind the model does not know: add its rules here");
        }
      },
      command);
}

// --- helpers ---------------------------------------------------------------------------------------

namespace {

// Balance notices, restated from docs/api.md ("Balance notices"): only an account with a threshold
// N gets them; after a movement that takes `available` from `was` to `now`: balance_low when it
// went from at least N to under N, then balance_depleted when it went from above 0 to 0 or below;
// balance_recovered when it went from under N to at least N. Nothing else, nothing twice.
std::vector<EventType> notices_for(std::int64_t was, std::int64_t now, std::optional<std::int64_t> threshold) {
  std::vector<EventType> out;
  if (!threshold.has_value()) return out;
  const bool was_under = was < *threshold;
  const bool is_under = now < *threshold;
  if (!was_under && is_under) out.push_back(EventType::balance_low);
  if (was > 0 && now <= 0) out.push_back(EventType::balance_depleted);
  if (was_under && !is_under) out.push_back(EventType::balance_recovered);
  return out;
}

}  // namespace

std::size_t LedgerModel::add_event(Event e) {
  e.event_id = next_event_id_++;
  e.at_ms = now_;
  // The movement is this event against the account's previous one (0: an account starts empty).
  std::int64_t was = 0;
  for (auto it = events_.rbegin(); it != events_.rend(); ++it) {
    if (it->account_id == e.account_id) {
      was = it->available_after;
      break;
    }
  }
  const auto threshold = accounts_.at(e.account_id).low_balance_threshold;
  const std::vector<EventType> notices = notices_for(was, e.available_after, threshold);
  events_.push_back(e);
  const std::size_t index = events_.size() - 1;
  for (const EventType type : notices) {
    Event n;
    n.event_id = next_event_id_++;
    n.at_ms = now_;
    n.account_id = e.account_id;
    n.type = type;
    n.available_after = e.available_after;
    n.reserved_after = e.reserved_after;
    n.used_after = e.used_after;
    events_.push_back(n);
  }
  // Whatever brings an account frozen for a refund shortfall back to 0 or above unfreezes it.
  Account& a = accounts_.at(e.account_id);
  if (e.type != EventType::account_updated && a.frozen && a.frozen_reason == kFrozenForRefundShortfall &&
      a.balances.available >= 0) {
    a.frozen = false;
    a.frozen_reason.reset();
    settings_event(a, std::string(kUnfrozenRepaid));
  }
  return index;
}

Event LedgerModel::hold_event(const Hold& h, EventType type, std::int64_t amount) const {
  const Balances& b = accounts_.at(h.account_id).balances;
  Event e;
  e.account_id = h.account_id;
  e.type = type;
  e.amount = amount;
  e.hold_id = h.hold_id;
  e.job_id = job_of(h.request_id);
  e.available_after = b.available;
  e.reserved_after = b.reserved;
  e.used_after = b.used;
  return e;
}

// An active hold ends: `committed` of it is used, the rest is available again.
void LedgerModel::end_active(Hold& h, HoldStatus status, std::int64_t committed) {
  if (h.status != HoldStatus::active || committed < 0 || committed > h.amount) throw std::logic_error("model: end_active");
  Account& a = accounts_.at(h.account_id);
  a.balances.reserved -= h.amount;
  a.balances.used += committed;
  a.balances.available += h.amount - committed;
  a.active_holds -= 1;
  h.status = status;
  h.committed_amount = committed;
}

void LedgerModel::expire(StoredHold& s) {
  Hold& h = s.hold;
  end_active(h, HoldStatus::expired, 0);
  h.closed_at_ms = h.expires_at_ms;
  add_event(hold_event(h, EventType::expired, h.amount));
}

bool LedgerModel::expire_overdue_of(const std::string& account_id) {
  std::vector<StoredHold*> due;
  for (auto& [id, s] : holds_) {
    if (s.hold.account_id == account_id && overdue(s.hold)) due.push_back(&s);
  }
  std::sort(due.begin(), due.end(), [](const StoredHold* a, const StoredHold* b) {
    return a->hold.expires_at_ms != b->hold.expires_at_ms ? a->hold.expires_at_ms < b->hold.expires_at_ms : a->seq < b->seq;
  });
  if (due.size() > static_cast<std::size_t>(kZombiesPerRefusal)) due.resize(kZombiesPerRefusal);
  for (StoredHold* s : due) expire(*s);
  return !due.empty();
}

LedgerModel::StoredHold* LedgerModel::hold_for_change(const std::string& hold_id) {
  auto it = holds_.find(hold_id);
  if (it == holds_.end()) return nullptr;
  if (overdue(it->second.hold)) expire(it->second);
  return &it->second;
}

void LedgerModel::note(const jobs::Job& j, const std::string& kind, std::optional<int> attempt) {
  history_.push_back(jobs::JobEntry{j.client_request_id, now_, kind, attempt, ""});
}

// --- the ledger ------------------------------------------------------------------------------------

CommandResult LedgerModel::create_account(const CreateAccountCommand& c) {
  if (auto it = accounts_.find(c.account_id); it != accounts_.end()) {
    const Account& a = it->second;
    if (a.overdraft_limit != c.overdraft_limit || a.max_active_holds != c.max_active_holds) return err(Code::conflict);
    return AccountOutcome{view(c.account_id), false};
  }
  Account a;
  a.account_id = c.account_id;
  a.overdraft_limit = c.overdraft_limit;
  a.max_active_holds = c.max_active_holds;
  a.created_at_ms = now_;
  accounts_[c.account_id] = a;
  return AccountOutcome{view(c.account_id), true};
}

CommandResult LedgerModel::transfer(const std::string& account_id, std::int64_t amount, const std::string& reference,
                                    const std::string& reason, EventType kind) {
  if (auto it = transfers_.find(reference); it != transfers_.end()) {
    const Transfer& t = it->second.first;
    if (t.account_id != account_id || t.kind != kind || t.amount != amount || t.reason != reason) {
      return err(Code::idempotency_mismatch);
    }
    return TransferOutcome{it->second.second, view(account_id), false};
  }
  auto it = accounts_.find(account_id);
  if (it == accounts_.end()) return err(Code::not_found);
  Account& a = it->second;
  expire_overdue_of(account_id);  // money is judged on what readers see: the zombies give back first
  if (kind == EventType::credited) {
    // Neither available nor purchased may pass 2^53 − 1.
    if (a.balances.available + amount > kMax || a.balances.purchased + amount > kMax) return err(Code::overflow);
    a.balances.available += amount;
    a.balances.purchased += amount;
  } else {
    if (a.frozen) return err(Code::account_frozen);
    // A debit never dips into the overdraft.
    if (a.balances.available < amount) return insufficient(a, amount);
    a.balances.available -= amount;
    a.balances.purchased -= amount;
  }
  Event e;
  e.account_id = account_id;
  e.type = kind;
  e.amount = amount;
  e.reference = reference;
  if (!reason.empty()) e.reason = reason;
  e.available_after = a.balances.available;
  e.reserved_after = a.balances.reserved;
  e.used_after = a.balances.used;
  const Event written = events_.at(add_event(e));
  transfers_[reference] = {Transfer{reference, account_id, kind, amount, reason, written.event_id}, written};
  return TransferOutcome{written, view(account_id), true};
}

Result<HoldOutcome> LedgerModel::reserve(const ReserveCommand& c) {
  if (auto r = hold_by_request_.find(c.request_id); r != hold_by_request_.end()) {
    Hold h = holds_.at(r->second).hold;
    if (h.account_id != c.account_id || h.amount != c.amount) return err(Code::idempotency_mismatch);
    if (overdue(h)) {  // answered as a reader sees it
      h.status = HoldStatus::expired;
      h.closed_at_ms = h.expires_at_ms;
    }
    return HoldOutcome{h, false};
  }
  auto it = accounts_.find(c.account_id);
  if (it == accounts_.end()) return err(Code::not_found);
  Account& a = it->second;
  expire_overdue_of(c.account_id);  // a hold draws from the lots as readers see them
  if (a.frozen) return err(Code::account_frozen);
  // The order of the refusals: too many holds, not enough credits (down to −overdraft), overflow.
  auto refusal = [&]() -> std::optional<Error> {
    if (a.max_active_holds && a.active_holds >= *a.max_active_holds) return err(Code::too_many_holds);
    if (a.balances.available - c.amount < -a.overdraft_limit) return insufficient(a, c.amount);
    if (a.balances.reserved + c.amount > kMax) return err(Code::overflow);
    return std::nullopt;
  };
  if (auto refused = refusal()) return *refused;
  a.balances.available -= c.amount;
  a.balances.reserved += c.amount;
  a.active_holds += 1;
  StoredHold s;
  s.seq = next_seq_++;
  Hold& h = s.hold;
  h.hold_id = "hold_" + std::to_string(s.seq) + (c.hold_id_random.empty() ? "" : "_" + c.hold_id_random);
  h.account_id = c.account_id;
  h.request_id = c.request_id;
  h.amount = c.amount;
  h.created_at_ms = now_;
  h.expires_at_ms = now_ + c.ttl_ms.value();
  h.metadata_json = c.metadata_json.empty() ? "{}" : c.metadata_json;
  hold_by_request_[h.request_id] = h.hold_id;
  const std::string id = h.hold_id;
  holds_[id] = s;
  add_event(hold_event(holds_.at(id).hold, EventType::reserved, c.amount));
  return HoldOutcome{holds_.at(id).hold, true};
}

Result<HoldOutcome> LedgerModel::commit(const std::string& hold_id, std::optional<std::int64_t> amount,
                                        LateCommitPolicy policy) {
  StoredHold* s = hold_for_change(hold_id);
  if (!s) return err(Code::not_found);
  Hold& h = s->hold;
  if (amount && (*amount < 1 || *amount > kMax || *amount > h.amount)) return err(Code::invalid_request);
  const std::int64_t wanted = amount.value_or(h.amount);
  Account& a = accounts_.at(h.account_id);
  switch (h.status) {
    case HoldStatus::active:
      end_active(h, HoldStatus::committed, wanted);
      h.closed_at_ms = now_;
      add_event(hold_event(h, EventType::committed, wanted));
      return HoldOutcome{h, true};
    case HoldStatus::committed:
      if (wanted == h.committed_amount) return HoldOutcome{h, false};
      return err(Code::hold_committed);
    case HoldStatus::released:
      return err(Code::hold_released);
    case HoldStatus::expired:
      break;
  }
  // Expired: a late commit.
  if (h.late_outcome == LateOutcome::charged) {
    if (wanted == h.committed_amount) return HoldOutcome{h, false};
    return err(Code::hold_committed);
  }
  if (h.late_outcome == LateOutcome::forgiven) return HoldOutcome{h, false};  // final, whatever is asked
  if (policy == LateCommitPolicy::reject) return err(Code::hold_expired);
  if (policy == LateCommitPolicy::charge) {
    auto chargeable = [&] {
      return a.balances.available - wanted >= -a.overdraft_limit && a.balances.used + wanted <= kMax;
    };
    expire_overdue_of(h.account_id);  // the charge draws from the lots as readers see them
    if (chargeable()) {
      a.balances.available -= wanted;
      a.balances.used += wanted;
      h.late_outcome = LateOutcome::charged;
      h.committed_amount = wanted;
      add_event(hold_event(h, EventType::late_charged, wanted));
      return HoldOutcome{h, true};
    }
  }
  // Forgiven (by policy, or because the late charge did not fit): nothing moves.
  h.late_outcome = LateOutcome::forgiven;
  h.committed_amount = 0;
  add_event(hold_event(h, EventType::late_forgiven, wanted));
  return HoldOutcome{h, true};
}

Result<HoldOutcome> LedgerModel::release(const std::string& hold_id, const std::optional<std::string>& reason) {
  StoredHold* s = hold_for_change(hold_id);
  if (!s) return err(Code::not_found);
  Hold& h = s->hold;
  switch (h.status) {
    case HoldStatus::active: {
      end_active(h, HoldStatus::released, 0);
      h.closed_at_ms = now_;
      h.release_reason = reason;
      Event e = hold_event(h, EventType::released, h.amount);
      e.reason = reason;
      add_event(e);
      return HoldOutcome{h, true};
    }
    case HoldStatus::released:
      return HoldOutcome{h, false};
    case HoldStatus::committed:
      return err(Code::hold_committed);
    case HoldStatus::expired:
      if (h.late_outcome == LateOutcome::charged) return err(Code::hold_committed);
      return HoldOutcome{h, false};  // its credits are available again already
  }
  throw std::logic_error("model: hold status");
}

CommandResult LedgerModel::extend(const ExtendCommand& c) {
  StoredHold* s = hold_for_change(c.hold_id);
  if (!s) return err(Code::not_found);
  Hold& h = s->hold;
  if (h.status == HoldStatus::committed) return err(Code::hold_committed);
  if (h.status == HoldStatus::released) return err(Code::hold_released);
  if (h.status == HoldStatus::expired) return err(Code::hold_expired);
  h.expires_at_ms = now_ + c.ttl_ms;
  Event e = hold_event(h, EventType::extended, 0);
  e.expires_at_ms = h.expires_at_ms;
  add_event(e);
  return HoldOutcome{h, true};
}

CommandResult LedgerModel::update(const UpdateAccountCommand& c) {
  auto it = accounts_.find(c.account_id);
  if (it == accounts_.end()) return err(Code::not_found);
  Account& a = it->second;
  AccountSettings after = a.settings();
  if (c.overdraft_limit) after.overdraft_limit = *c.overdraft_limit;
  if (c.max_active_holds) after.max_active_holds = *c.max_active_holds;
  if (c.frozen) after.frozen = *c.frozen;
  if (c.low_balance_threshold) after.low_balance_threshold = *c.low_balance_threshold;
  // The overdraft may not be lowered below what is already overdrawn (after zombies gave back), nor
  // an account in debt (past its overdraft, frozen) unfrozen.
  const auto refused = [&] {
    return a.balances.available < -after.overdraft_limit &&
           (after.overdraft_limit < a.overdraft_limit || !after.frozen);
  };
  if (refused()) expire_overdue_of(c.account_id);
  if (refused()) return err(Code::conflict);
  // An admin's frozen takes a freeze of tollgate's over (its reason goes) even if nothing else changes.
  if (after == a.settings() && !(c.frozen && a.frozen_reason)) return AccountOutcome{view(c.account_id), false};
  a.overdraft_limit = after.overdraft_limit;
  a.max_active_holds = after.max_active_holds;
  a.frozen = after.frozen;
  if (c.frozen) a.frozen_reason.reset();  // an admin's freeze or unfreeze: no reason of tollgate's
  a.low_balance_threshold = after.low_balance_threshold;
  settings_event(a, std::nullopt);
  return AccountOutcome{view(c.account_id), true};
}

CommandResult LedgerModel::expire_overdue(const ExpireOverdueCommand& c) {
  std::vector<StoredHold*> due;
  for (auto& [id, s] : holds_) {
    if (overdue(s.hold)) due.push_back(&s);
  }
  std::sort(due.begin(), due.end(), [](const StoredHold* a, const StoredHold* b) {
    return a->hold.expires_at_ms != b->hold.expires_at_ms ? a->hold.expires_at_ms < b->hold.expires_at_ms : a->seq < b->seq;
  });
  if (due.size() > static_cast<std::size_t>(c.max_holds)) due.resize(static_cast<std::size_t>(c.max_holds));
  for (StoredHold* s : due) expire(*s);
  return ExpireOutcome{static_cast<std::int64_t>(due.size())};
}

CommandResult LedgerModel::create_key(const CreateKeyCommand& c) {
  if (auto it = keys_.find(c.key_id); it != keys_.end()) {
    if (it->second.account_id != c.account_id || it->second.secret_sha256 != c.secret_sha256) return err(Code::conflict);
    return KeyOutcome{it->second, false};
  }
  if (c.account_id && accounts_.count(*c.account_id) == 0) return err(Code::not_found);
  ApiKey k{c.key_id, c.account_id, c.secret_sha256, now_, std::nullopt, std::nullopt};
  keys_[c.key_id] = k;
  return KeyOutcome{k, true};
}

CommandResult LedgerModel::revoke_key(const RevokeKeyCommand& c) {
  auto it = keys_.find(c.key_id);
  if (it == keys_.end()) return err(Code::not_found);
  ApiKey& k = it->second;
  if (k.revoked_at_ms) return KeyOutcome{k, false};
  // Only the generated admin key is the way in that the API may not revoke (rules::plan_revoke_key).
  if (!k.account_id && k.key_id == kGeneratedAdminKeyId && !c.replaced_by_configured_admin_key) return err(Code::conflict);
  k.revoked_at_ms = now_;
  return KeyOutcome{k, true};
}

CommandResult LedgerModel::record_key_use(const RecordKeyUseCommand& c) {
  KeyUseOutcome out;
  for (const auto& use : c.uses) {
    auto it = keys_.find(use.key_id);
    if (it == keys_.end()) continue;
    auto& last = it->second.last_used_at_ms;
    if (last && *last >= use.used_at_ms) continue;  // only forward
    last = use.used_at_ms;
    ++out.recorded;
  }
  return out;
}

// --- jobs ------------------------------------------------------------------------------------------

CommandResult LedgerModel::submit(const jobs::SubmitJobCommand& c) {
  if (auto it = jobs_.find(c.client_request_id); it != jobs_.end()) {
    const jobs::Job& j = it->second;
    if (j.account_id != c.account_id || j.cost != c.cost || j.provider != c.provider || j.input_json != c.input_json) {
      return err(Code::idempotency_mismatch);
    }
    return jobs::JobOutcome{j, false};
  }
  ReserveCommand r;
  r.account_id = c.account_id;
  r.amount = c.cost;
  r.request_id = "job:" + c.client_request_id;
  r.ttl_ms = c.ttl_ms;
  r.metadata_json = "{\"job_id\":\"" + c.client_request_id + "\"}";
  r.hold_id_random = c.hold_id_random;
  auto reserved = reserve(r);
  if (!reserved) return reserved.error();
  jobs::Job j;
  j.client_request_id = c.client_request_id;
  j.account_id = c.account_id;
  j.cost = c.cost;
  j.provider = c.provider;
  j.input_json = c.input_json;
  j.hold_id = reserved.value().hold.hold_id;
  j.created_at_ms = now_;
  j.updated_at_ms = now_;
  j.lease_owner = c.owner;
  j.lease_expires_at_ms = now_ + c.lease_ms;
  jobs_[j.client_request_id] = j;
  note(j, "submitted", std::nullopt);
  return jobs::JobOutcome{j, true};
}

CommandResult LedgerModel::claim(const jobs::ClaimJobCommand& c) {
  auto it = jobs_.find(c.client_request_id);
  if (it == jobs_.end()) return err(Code::not_found);
  jobs::Job& j = it->second;
  if (j.hold_id != c.hold_id) return err(Code::conflict);
  if (ended(j.status)) return err(Code::conflict);
  if (j.lease_owner && *j.lease_owner != c.owner && j.lease_expires_at_ms && *j.lease_expires_at_ms > now_) {
    return err(Code::conflict);  // leased by another owner
  }
  const Hold& h = hold_for_change(j.hold_id)->hold;
  const auto attempt = [&] { return j.attempts > 0 ? std::optional<int>(j.attempts) : std::nullopt; };
  if (j.status == jobs::JobStatus::pending && h.status != HoldStatus::active) {
    // Never sent: it fails with its expired hold, nothing charged.
    j.status = jobs::JobStatus::failed;
    j.error = "the hold expired before the job was sent to its provider";
    j.lease_owner.reset();
    j.lease_expires_at_ms.reset();
    j.updated_at_ms = now_;
    note(j, "failed", std::nullopt);
    return jobs::JobOutcome{j, true};
  }
  if (j.status == jobs::JobStatus::pending) {
    j.status = jobs::JobStatus::running;
    note(j, "running", std::nullopt);
  } else if (j.lease_owner != c.owner) {
    note(j, "claimed", attempt());
  }
  if (!c.note.empty()) note(j, "answer", attempt());
  j.lease_owner = c.owner;
  j.lease_expires_at_ms = now_ + c.lease_ms;
  if (c.begin_attempt) {
    ++j.attempts;
    note(j, "attempt", j.attempts);
  }
  j.updated_at_ms = now_;
  return jobs::JobOutcome{j, true};
}

CommandResult LedgerModel::end(const jobs::EndJobCommand& c) {
  auto it = jobs_.find(c.client_request_id);
  if (it == jobs_.end()) return err(Code::not_found);
  jobs::Job& j = it->second;
  if (j.hold_id != c.hold_id) return err(Code::conflict);
  const auto attempt = [&] { return j.attempts > 0 ? std::optional<int>(j.attempts) : std::nullopt; };
  if (ended(j.status)) {
    // A job ends once; only a result after a cancel is still recorded (charging nothing).
    if (j.status == jobs::JobStatus::cancelled && c.end == jobs::JobStatus::completed && !j.result_json) {
      j.result_json = c.result_json;
      j.updated_at_ms = now_;
      note(j, "late_result", attempt());
      return jobs::JobOutcome{j, true};
    }
    return jobs::JobOutcome{j, false};
  }
  StoredHold* s = hold_for_change(j.hold_id);
  std::optional<Hold> ended_hold;
  if (c.end == jobs::JobStatus::completed) {
    j.result_json = c.result_json;
    auto committed = commit(j.hold_id, std::nullopt, c.late_commit);
    if (committed) {
      ended_hold = committed.value().hold;
      j.status = jobs::JobStatus::completed;
      j.charged = ended_hold->committed_amount > 0;
      note(j, "completed", attempt());
    } else {
      j.status = jobs::JobStatus::failed;  // expired, and the policy rejects a late result
      j.error = "the result arrived after the hold expired and was not charged: hold " + j.hold_id +
                " expired before it was committed";
      note(j, "failed", attempt());
    }
  } else {
    const std::string why = c.end == jobs::JobStatus::cancelled ? "cancelled" : c.error.value_or("failed");
    if (s->hold.status == HoldStatus::active) {
      auto released = release(j.hold_id, why);
      ended_hold = released.value().hold;
    }
    j.status = c.end;
    j.error = c.end == jobs::JobStatus::failed ? std::optional<std::string>(why) : c.error;
    note(j, status_name(c.end), attempt());
  }
  j.lease_owner.reset();
  j.lease_expires_at_ms.reset();
  j.updated_at_ms = now_;
  return jobs::JobOutcome{j, true, ended_hold};
}

// --- coordination ----------------------------------------------------------------------------------

CommandResult LedgerModel::lock_op(const coord::LockCommand& c) {
  using coord::LockDecision;
  auto it = locks_.find(c.key);
  const bool exists = it != locks_.end();
  coord::Lock cur = exists ? it->second : coord::Lock{c.key};
  const bool held = exists && cur.owner && cur.expires_at_ms && *cur.expires_at_ms > now_;
  const bool names_holder = cur.owner == c.owner && (!c.fence || *c.fence == cur.fence);
  auto done = [&](coord::Lock l, LockDecision d, bool changed) -> CommandResult {
    if (changed) locks_[c.key] = l;
    return coord::LockOutcome{l, d, changed, now_};
  };
  auto freed = [&](coord::Lock l) {
    l.owner.reset();
    l.expires_at_ms.reset();
    l.cancelled = false;
    l.updated_at_ms = now_;
    return l;
  };
  switch (c.op) {
    case coord::LockOp::acquire:
      if (held && cur.owner != c.owner) {
        Error e = err(Code::lock_held);
        e.expires_at_ms = cur.expires_at_ms;
        return e;
      }
      if (held) {
        if (cur.cancelled) return done(freed(cur), LockDecision::stopped, true);
        cur.expires_at_ms = now_ + c.ttl_ms;
        cur.updated_at_ms = now_;
        return done(cur, LockDecision::reacquired, true);
      } else {
        const bool took_over = exists && cur.owner.has_value();
        cur.owner = c.owner;
        cur.fence += 1;
        cur.expires_at_ms = now_ + c.ttl_ms;
        cur.cancelled = false;
        cur.updated_at_ms = now_;
        return done(cur, took_over ? LockDecision::taken_over : LockDecision::acquired, true);
      }
    case coord::LockOp::renew:
      if (!exists) return err(Code::not_found);
      if (!held || !names_holder) return err(Code::lock_lost);
      if (cur.cancelled) return done(freed(cur), LockDecision::stopped, true);
      cur.expires_at_ms = now_ + c.ttl_ms;
      cur.updated_at_ms = now_;
      return done(cur, LockDecision::renewed, true);
    case coord::LockOp::release:
      if (!exists) return err(Code::not_found);
      if (!cur.owner || !names_holder) return err(Code::lock_lost);  // a run-out lease may still release
      return done(freed(cur), LockDecision::released, true);
    case coord::LockOp::cancel:
      if (!exists) return err(Code::not_found);
      if (!held || cur.cancelled) return done(cur, LockDecision::nothing_to_cancel, false);
      cur.cancelled = true;
      cur.updated_at_ms = now_;
      return done(cur, LockDecision::cancelled, true);
  }
  throw std::logic_error("model: lock op");
}

CommandResult LedgerModel::idempotency(const coord::IdempotencyCommand& c) {
  using coord::IdemDecision;
  using coord::IdemState;
  auto it = idem_.find(c.key);
  const bool exists = it != idem_.end();
  if (exists && it->second.fingerprint != c.fingerprint) return err(Code::idempotency_mismatch);
  if (exists && c.op != coord::IdemOp::begin && c.attempt && *c.attempt != it->second.attempt) {
    return err(Code::conflict);  // names a claim that is no longer current
  }
  auto done = [&](const coord::IdempotencyKey& k, IdemDecision d, bool changed, bool taken_over) -> CommandResult {
    if (changed) idem_[c.key] = k;
    return coord::IdempotencyOutcome{k, d, changed, taken_over};
  };
  switch (c.op) {
    case coord::IdemOp::begin: {
      if (!exists) {
        coord::IdempotencyKey k{c.key, c.fingerprint, IdemState::started, std::nullopt, now_, now_ + c.ttl_ms,
                                std::nullopt, 1};
        return done(k, IdemDecision::started, true, false);
      }
      coord::IdempotencyKey k = it->second;
      if (k.state == IdemState::finished) return done(k, IdemDecision::replayed, false, false);
      if (k.state == IdemState::started && k.expires_at_ms > now_) {
        Error e = err(Code::in_progress);
        e.expires_at_ms = k.expires_at_ms;
        return e;
      }
      const bool taken_over = k.state == IdemState::started;  // a claim that ran out unfinished
      k.attempt += 1;
      k.state = IdemState::started;
      if (!taken_over) k.created_at_ms = now_;
      k.expires_at_ms = now_ + c.ttl_ms;
      return done(k, IdemDecision::started, true, taken_over);
    }
    case coord::IdemOp::finish: {
      if (!exists) return err(Code::not_found);
      coord::IdempotencyKey k = it->second;
      if (k.state == IdemState::finished) return done(k, IdemDecision::finished, false, false);
      if (k.state == IdemState::abandoned) return err(Code::conflict);
      k.state = IdemState::finished;
      k.response_json = c.response_json;
      k.finished_at_ms = now_;
      k.expires_at_ms = now_;
      return done(k, IdemDecision::finished, true, false);
    }
    case coord::IdemOp::abandon: {
      if (!exists) return err(Code::not_found);
      coord::IdempotencyKey k = it->second;
      if (k.state == IdemState::finished) return err(Code::conflict);
      if (k.state == IdemState::abandoned) return done(k, IdemDecision::abandoned, false, false);
      k.state = IdemState::abandoned;
      k.expires_at_ms = now_;
      return done(k, IdemDecision::abandoned, true, false);
    }
  }
  throw std::logic_error("model: idempotency op");
}

CommandResult LedgerModel::rate(const coord::RateLimitCommand& c) {
  const auto key = std::make_pair(c.policy, c.key);
  if (c.op == coord::RateOp::reset) {
    rates_.erase(key);
    coord::GcraDecision full;
    full.allowed = true;
    return coord::RateLimitOutcome{full};
  }
  // GCRA in nanoseconds: each unit moves the key's time by period/limit (rounded up); a check is
  // admitted while the moved time stays within one burst (limit units) of now.
  const std::int64_t unit = (c.gcra.period_ms * 1'000'000 + c.gcra.limit - 1) / c.gcra.limit;
  const std::int64_t burst = c.gcra.limit * unit;
  const std::int64_t now = now_ * 1'000'000;
  auto it = rates_.find(key);
  const std::int64_t tat = it == rates_.end() ? now : std::max(it->second, now);
  const std::int64_t moved = tat + c.cost * unit;
  const auto up_ms = [](std::int64_t ns) { return (ns + 999'999) / 1'000'000; };
  coord::GcraDecision d;
  if (moved - now > burst) {
    d.retry_after_ms = std::max<std::int64_t>(1, up_ms(moved - burst - now));
    d.remaining = (burst - (tat - now)) / unit;
    d.reset_after_ms = up_ms(tat - now);
    return coord::RateLimitOutcome{d};
  }
  d.allowed = true;
  d.new_tat_ns = moved;
  d.remaining = (burst - (moved - now)) / unit;
  d.reset_after_ms = up_ms(moved - now);
  rates_[key] = moved;
  return coord::RateLimitOutcome{d};
}

CommandResult LedgerModel::prune(const coord::PruneCoordCommand& c) {
  coord::PruneOutcome out;
  // Keys whose claim or life ended before now − retention, oldest first.
  std::vector<std::pair<std::int64_t, std::string>> old;
  for (const auto& [key, k] : idem_) {
    if (k.expires_at_ms < now_ - c.retention_ms) old.emplace_back(k.expires_at_ms, key);
  }
  std::sort(old.begin(), old.end());
  for (const auto& [at, key] : old) {
    if (out.pruned_keys >= c.max_rows) break;
    idem_.erase(key);
    ++out.pruned_keys;
  }
  // Idle rate rows (a time not after now: a full budget, the same as no row).
  std::vector<std::pair<std::int64_t, std::pair<std::string, std::string>>> idle;
  for (const auto& [key, tat] : rates_) {
    if (tat <= now_ * 1'000'000) idle.emplace_back(tat, key);
  }
  std::sort(idle.begin(), idle.end());
  for (const auto& [tat, key] : idle) {
    if (out.pruned_rates >= c.max_rows) break;
    rates_.erase(key);
    ++out.pruned_rates;
  }
  return out;
}

// --- webhook endpoints -------------------------------------------------------------------------------
// The rules of webhooks/webhook_batch.h stated again: an account filter names an existing account;
// at most limits::kWebhookEndpointsMax endpoints; a taken id is a conflict; a rotation keeps the
// secret it replaces for limits::kWebhookPreviousSecretMs; every change stamps updated_at.

std::optional<webhooks::Endpoint> LedgerModel::endpoint(const std::string& endpoint_id) const {
  auto it = endpoints_.find(endpoint_id);
  if (it == endpoints_.end()) return std::nullopt;
  return it->second;
}

CommandResult LedgerModel::create_endpoint(const webhooks::CreateEndpointCommand& c) {
  if (c.account_id && !accounts_.count(*c.account_id)) return err(Code::not_found);
  if (static_cast<std::int64_t>(endpoints_.size()) >= limits::kWebhookEndpointsMax) return err(Code::invalid_request);
  if (endpoints_.count(c.endpoint_id)) return err(Code::conflict);
  webhooks::Endpoint e;
  e.endpoint_id = c.endpoint_id;
  e.url = c.url;
  e.event_types = c.event_types;
  e.account_id = c.account_id;
  e.description = c.description;
  e.secret = c.secret;
  e.created_at_ms = now_;
  e.updated_at_ms = now_;
  e.delivery_cursor = feed_head_at_batch_;
  endpoints_[e.endpoint_id] = e;
  return EndpointOutcome{e, false};
}

CommandResult LedgerModel::update_endpoint(const webhooks::UpdateEndpointCommand& c) {
  auto it = endpoints_.find(c.endpoint_id);
  if (it == endpoints_.end()) return err(Code::not_found);
  webhooks::Endpoint& e = it->second;
  if (c.url) e.url = *c.url;
  if (c.event_types) e.event_types = *c.event_types;
  if (c.description) e.description = *c.description;
  if (c.status) {
    if (*c.status == webhooks::EndpointStatus::enabled && e.status == webhooks::EndpointStatus::disabled) {
      e.failing_since_ms.reset();
    }
    e.status = *c.status;
  }
  e.updated_at_ms = now_;
  return EndpointOutcome{e, false};
}

CommandResult LedgerModel::delete_endpoint(const webhooks::DeleteEndpointCommand& c) {
  auto it = endpoints_.find(c.endpoint_id);
  if (it == endpoints_.end()) return err(Code::not_found);
  EndpointOutcome out{it->second, true};
  std::erase_if(deliveries_, [&](const auto& d) { return d.first.first == c.endpoint_id; });
  endpoints_.erase(it);
  return out;
}

CommandResult LedgerModel::rotate_endpoint(const webhooks::RotateEndpointSecretCommand& c) {
  auto it = endpoints_.find(c.endpoint_id);
  if (it == endpoints_.end()) return err(Code::not_found);
  webhooks::Endpoint& e = it->second;
  e.previous_secret = e.secret;
  e.previous_secret_until_ms = now_ + limits::kWebhookPreviousSecretMs;
  e.secret = c.secret;
  e.updated_at_ms = now_;
  return EndpointOutcome{e, false};
}

std::optional<webhooks::Delivery> LedgerModel::delivery(const std::string& endpoint_id, std::int64_t event_id) const {
  auto it = deliveries_.find({endpoint_id, event_id});
  if (it == deliveries_.end()) return std::nullopt;
  return it->second;
}

// A replay moves the cursor back, never forward.
CommandResult LedgerModel::replay_endpoint(const webhooks::ReplayEndpointCommand& c) {
  auto it = endpoints_.find(c.endpoint_id);
  if (it == endpoints_.end()) return err(Code::not_found);
  if (c.after < it->second.delivery_cursor) it->second.delivery_cursor = c.after;
  return EndpointOutcome{it->second, false};
}

// A record: refused for an older fence or a cursor elsewhere; each attempt — a fresh send starts at
// attempt 1, a retry counts on from the pending delivery it names (else it is skipped); a failure is
// retried after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (scaled by the jitter), then fails; the
// endpoint fails from its first failed attempt until one is delivered, and 5 days of that disable it.
CommandResult LedgerModel::record_deliveries(const webhooks::RecordDeliveriesCommand& c) {
  static constexpr std::int64_t kDelaysMs[] = {5'000, 300'000, 1'800'000, 7'200'000, 18'000'000, 36'000'000, 36'000'000};
  auto it = endpoints_.find(c.endpoint_id);
  if (it == endpoints_.end()) return err(Code::not_found);
  webhooks::Endpoint& e = it->second;
  if (c.fence < e.delivery_fence) return err(Code::lock_lost);
  if (c.cursor_from && *c.cursor_from != e.delivery_cursor) return err(Code::conflict);
  DeliveriesOutcome out;
  for (const webhooks::DeliveryAttempt& a : c.attempts) {
    const std::pair<std::string, std::int64_t> key{c.endpoint_id, a.event_id};
    auto found = deliveries_.find(key);
    if (a.retry_of_attempts && (found == deliveries_.end() || found->second.status != webhooks::DeliveryStatus::pending ||
                                found->second.attempts != *a.retry_of_attempts)) {
      continue;
    }
    if (found == deliveries_.end()) {
      webhooks::Delivery fresh;
      fresh.endpoint_id = c.endpoint_id;
      fresh.event_id = a.event_id;
      fresh.created_at_ms = a.at_ms;
      found = deliveries_.emplace(key, fresh).first;
    }
    webhooks::Delivery& d = found->second;
    d.event_type = a.event_type;
    d.account_id = a.account_id;
    d.event_at_ms = a.event_at_ms;
    d.attempts = a.retry_of_attempts ? d.attempts + 1 : 1;
    d.last_attempt_at_ms = a.at_ms;
    d.last_status_code = a.status_code;
    d.last_error = a.delivered ? "" : a.error;
    d.next_attempt_at_ms.reset();
    if (a.delivered) {
      d.status = webhooks::DeliveryStatus::delivered;
      e.failing_since_ms.reset();
    } else {
      if (d.attempts <= 7) {
        d.status = webhooks::DeliveryStatus::pending;
        d.next_attempt_at_ms = a.at_ms + kDelaysMs[d.attempts - 1] * (1000 + a.jitter_permille) / 1000;
      } else {
        d.status = webhooks::DeliveryStatus::failed;
        ++out.failed;
      }
      if (!e.failing_since_ms) e.failing_since_ms = a.at_ms;
    }
    ++out.recorded;
  }
  e.delivery_fence = c.fence;
  if (c.cursor_from) e.delivery_cursor = c.cursor_to;
  if (e.status == webhooks::EndpointStatus::enabled && e.failing_since_ms && now_ - *e.failing_since_ms >= 5 * 86'400'000) {
    e.status = webhooks::EndpointStatus::disabled;
    e.updated_at_ms = now_;
    out.disabled = true;
  }
  out.endpoint = e;
  return out;
}

// --- refunds (docs/api.md "Refunds of a charge") ---------------------------------------------------

// A charged hold (committed, or expired and late-charged) gives back what is asked — everything it
// charged and has not given back when no amount is named — from used to available, purchased
// unchanged. A request_id refunds once: the same one again answers the hold as it is now; naming
// another hold or another amount is a mismatch. The holds API does not refund a job's hold; the job's
// refund names it (its hold's request_id).
CommandResult LedgerModel::refund(const refunds::RefundCommand& c) {
  if (auto it = refunds_.find(c.request_id); it != refunds_.end()) {
    const refunds::Refund& earlier = it->second;
    if (earlier.hold_id != c.hold_id || earlier.requested_amount != c.amount) return err(Code::idempotency_mismatch);
    return RefundOutcome{hold_for_change(c.hold_id)->hold, earlier, false};
  }
  StoredHold* s = hold_for_change(c.hold_id);
  if (s == nullptr) return err(Code::not_found);
  Hold& h = s->hold;
  if (c.owner_request_id) {
    if (h.request_id != *c.owner_request_id) return err(Code::not_found);
  } else if (job_of(h.request_id)) {
    return err(Code::conflict);
  }
  const bool charged = h.status == HoldStatus::committed ||
                       (h.status == HoldStatus::expired && h.late_outcome == LateOutcome::charged);
  if (!charged) return err(Code::conflict);
  const std::int64_t left = h.committed_amount - h.refunded_amount;
  const std::int64_t amount = c.amount.value_or(left);
  if (amount == 0 || amount > left) return err(Code::refund_exceeds_charge);
  Balances& b = accounts_.at(h.account_id).balances;
  b.used -= amount;
  b.available += amount;
  h.refunded_amount += amount;
  Event e = hold_event(h, EventType::refunded, amount);
  e.reason = c.reason;
  e.reference = c.request_id;
  add_event(e);
  refunds::Refund r{c.request_id, c.hold_id, h.account_id, amount, c.amount, c.reason, now_};
  refunds_[c.request_id] = r;
  return RefundOutcome{h, r, true};
}

void LedgerModel::settings_event(const Account& a, std::optional<std::string> reason) {
  Event e;
  e.account_id = a.account_id;
  e.type = EventType::account_updated;
  e.settings = a.settings();
  e.reason = std::move(reason);
  e.available_after = a.balances.available;
  e.reserved_after = a.balances.reserved;
  e.used_after = a.balances.used;
  add_event(e);
}

// --- payments (docs/api.md "Payments") -------------------------------------------------------------
// A payment credits its account once, under its id as the transfer's reference; the same payment
// again moves nothing, with another account, credits or provider it is a mismatch. A refund or a
// dispute names the payment and its account and applies once per reference. A refund owes the
// payment's credits × refunded / total rounded up, less what earlier refunds owed (or, counted in
// credits, at most what is not owed yet); it takes all of it into debt (the account frozen when it
// took more than was available, unless already frozen) or only what is available. A dispute freezes.

std::optional<payments::Payment> LedgerModel::payment(const std::string& payment_id) const {
  auto it = payments_.find(payment_id);
  if (it == payments_.end()) return std::nullopt;
  return it->second;
}

CommandResult LedgerModel::credit_payment(const payments::CreditPaymentCommand& c) {
  if (auto it = payments_.find(c.payment_id); it != payments_.end()) {
    const payments::Payment& p = it->second;
    if (p.account_id != c.account_id || p.provider != c.provider) return err(Code::idempotency_mismatch);
    return PaymentOutcome{p, view(p.account_id), 0, 0, false, false};
  }
  CommandResult credited = transfer(c.account_id, c.credits, c.payment_id, "", EventType::credited);
  if (!credited) return credited;
  const bool created = std::get<TransferOutcome>(credited.value()).created;
  payments::Payment p{c.payment_id, c.provider, c.provider_payment, c.account_id, c.credits, 0, 0, now_, now_};
  payments_[c.payment_id] = p;
  return PaymentOutcome{p, view(c.account_id), created ? c.credits : 0, 0, created, false};
}

CommandResult LedgerModel::take_back_payment(const payments::TakeBackPaymentCommand& c) {
  auto pit = payments_.find(c.payment_id);
  if (pit == payments_.end() || pit->second.account_id != c.account_id) return err(Code::not_found);
  payments::Payment& p = pit->second;
  if (auto e = payment_events_.find(c.reference); e != payment_events_.end()) {
    if (e->second.payment_id != c.payment_id || e->second.kind != payments::EventKind::refund) {
      return err(Code::idempotency_mismatch);
    }
    return PaymentOutcome{p, view(p.account_id), 0, e->second.owed, false, false};
  }
  std::int64_t owed = 0;
  if (c.share) {
    // ceil(credits × refunded / total), in exact arithmetic on long division.
    const std::int64_t q = p.credits / c.share->total;
    const std::int64_t r = p.credits % c.share->total;
    __extension__ using Wide = __int128;
    const Wide rest = static_cast<Wide>(r) * c.share->refunded;
    const std::int64_t target = q * c.share->refunded + static_cast<std::int64_t>((rest + c.share->total - 1) / c.share->total);
    owed = std::max<std::int64_t>(0, target - p.refunded_credits);
  } else {
    owed = std::min(*c.credits, p.credits - p.refunded_credits);
  }
  std::int64_t taken = 0;
  bool froze = false;
  if (owed > 0) {
    const std::string reason = std::string("refunded at ") + std::string(payments::provider_name(p.provider));
    if (auto t = transfers_.find(c.reference); t != transfers_.end()) {
      const Transfer& tr = t->second.first;
      if (tr.account_id != c.account_id || tr.kind != EventType::debited || tr.reason != reason || tr.amount > owed) {
        return err(Code::idempotency_mismatch);
      }
      return PaymentOutcome{p, view(p.account_id), 0, 0, false, false};  // not reached by the generator
    }
    Account& a = accounts_.at(c.account_id);
    expire_overdue_of(c.account_id);
    const std::int64_t there = std::max<std::int64_t>(0, a.balances.available);
    taken = c.into_debt ? owed : std::min(owed, there);
    if (a.balances.available - taken < -kMax) return err(Code::overflow);
    if (taken > 0) {
      froze = taken > there && !a.frozen;
      if (froze) {
        a.frozen = true;
        a.frozen_reason = std::string(kFrozenForRefundShortfall);
      }
      a.balances.available -= taken;
      a.balances.purchased -= taken;
      Event e;
      e.account_id = c.account_id;
      e.type = EventType::debited;
      e.amount = taken;
      e.reference = c.reference;
      e.reason = reason;
      e.available_after = a.balances.available;
      e.reserved_after = a.balances.reserved;
      e.used_after = a.balances.used;
      const Event written = events_.at(add_event(e));
      transfers_[c.reference] = {Transfer{c.reference, c.account_id, EventType::debited, taken, reason, written.event_id},
                                 written};
      if (froze) settings_event(a, std::string(kFrozenForRefundShortfall));
    }
  }
  p.refunded_credits += owed;
  p.taken_back += taken;
  p.updated_at_ms = now_;
  payment_events_[c.reference] = payments::PaymentEvent{c.reference, c.payment_id, payments::EventKind::refund, owed, taken, now_};
  return PaymentOutcome{p, view(c.account_id), taken, owed, true, froze};
}

CommandResult LedgerModel::dispute_payment(const payments::DisputePaymentCommand& c) {
  auto pit = payments_.find(c.payment_id);
  if (pit == payments_.end() || pit->second.account_id != c.account_id) return err(Code::not_found);
  const payments::Payment& p = pit->second;
  if (auto e = payment_events_.find(c.reference); e != payment_events_.end()) {
    if (e->second.payment_id != c.payment_id || e->second.kind != payments::EventKind::dispute) {
      return err(Code::idempotency_mismatch);
    }
    return PaymentOutcome{p, view(p.account_id), 0, 0, false, false};
  }
  Account& a = accounts_.at(c.account_id);
  const bool froze = !(a.frozen && a.frozen_reason == kFrozenForDispute);
  if (froze) {
    a.frozen = true;
    a.frozen_reason = std::string(kFrozenForDispute);
    settings_event(a, std::string(kFrozenForDispute));
  }
  payment_events_[c.reference] = payments::PaymentEvent{c.reference, c.payment_id, payments::EventKind::dispute, 0, 0, now_};
  return PaymentOutcome{p, view(c.account_id), 0, 0, true, froze};
}

// --- prices (docs/api.md "Prices") ----------------------------------------------------------------
// A feature's price changes by versions 1, 2, …; setting the same price again changes nothing. A hold
// by feature costs quantity × the current price (past 2^53 − 1: invalid), is an ordinary reservation
// of that amount, and keeps what it was priced at. Its request_id again answers the hold as it is,
// whatever the price is now; with another account, feature or quantity — or a request_id that made a
// hold by amount — a mismatch. An unknown account is not found, then an unknown feature invalid.
CommandResult LedgerModel::set_price(const prices::SetPriceCommand& c) {
  auto it = prices_.find(c.feature);
  if (it != prices_.end() && it->second.credits_per_unit == c.credits_per_unit) {
    return prices::PriceOutcome{it->second, false};
  }
  const std::int64_t version = it == prices_.end() ? 1 : it->second.version + 1;
  prices::Price p{c.feature, c.credits_per_unit, version, now_};
  prices_[c.feature] = p;
  price_versions_.push_back(p);
  return prices::PriceOutcome{p, true};
}

CommandResult LedgerModel::reserve_by_feature(const prices::ReserveByFeatureCommand& c) {
  const std::string& id = c.reserve.request_id;
  if (hold_by_request_.count(id)) {
    auto priced = priced_holds_.find(id);
    if (priced == priced_holds_.end()) return err(Code::idempotency_mismatch);
    const prices::PricedHold& p = priced->second;
    if (p.account_id != c.reserve.account_id || p.feature != c.feature || p.quantity != c.quantity) {
      return err(Code::idempotency_mismatch);
    }
    ReserveCommand again = c.reserve;
    again.amount = p.quantity * p.unit_price;
    auto held = reserve(again);
    if (!held) return held.error();
    return prices::PricedHoldOutcome{held->hold, p, false};
  }
  if (!accounts_.count(c.reserve.account_id)) return err(Code::not_found);
  auto price = prices_.find(c.feature);
  if (price == prices_.end()) return err(Code::invalid_request);
  const std::int64_t unit = price->second.credits_per_unit;
  if (c.quantity > kMax / unit) return err(Code::invalid_request);
  ReserveCommand priced = c.reserve;
  priced.amount = c.quantity * unit;
  auto held = reserve(priced);
  if (!held) return held.error();
  prices::PricedHold p{id, held->hold.hold_id, c.reserve.account_id, c.feature, c.quantity, unit, price->second.version};
  priced_holds_[id] = p;
  return prices::PricedHoldOutcome{held->hold, p, true};
}

std::optional<prices::Price> LedgerModel::price(const std::string& feature) const {
  auto it = prices_.find(feature);
  if (it == prices_.end()) return std::nullopt;
  return it->second;
}

std::optional<prices::PricedHold> LedgerModel::priced_hold(const std::string& request_id) const {
  auto it = priced_holds_.find(request_id);
  if (it == priced_holds_.end()) return std::nullopt;
  return it->second;
}

}  // namespace tollgate::testing
