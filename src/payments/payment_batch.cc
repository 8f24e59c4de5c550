#include "payments/payment_batch.h"

#include <algorithm>
#include <utility>

#include "core/checked.h"
#include "core/limits.h"

namespace tollgate::payments {
namespace {

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The reason a payment's refund gives its debit (and its event).
std::string take_back_reason(const Payment& p) { return "refunded at " + std::string(provider_name(p.provider)); }

Error no_such_payment(std::string_view payment_id, std::string_view account_id) {
  return Error::make(Code::not_found, "payment " + std::string(payment_id) + " of account " + std::string(account_id) +
                                          " does not exist");
}

}  // namespace

std::string_view provider_name(Provider p) { return p == Provider::stripe ? "stripe" : "webhook"; }
std::optional<Provider> parse_provider(std::string_view name) {
  if (name == "stripe") return Provider::stripe;
  if (name == "webhook") return Provider::webhook;
  return std::nullopt;
}
std::string_view event_kind_name(EventKind k) { return k == EventKind::refund ? "refund" : "dispute"; }
std::optional<EventKind> parse_event_kind(std::string_view name) {
  if (name == "refund") return EventKind::refund;
  if (name == "dispute") return EventKind::dispute;
  return std::nullopt;
}

std::int64_t owed_by_share(std::int64_t credits, std::int64_t already_owed, RefundShare share) {
  TG_ASSERT(credits >= 1 && share.total >= 1 && share.refunded >= 0 && share.refunded <= share.total);
  TG_ASSERT(already_owed >= 0 && already_owed <= credits);
  // ceil(credits × refunded / total) in 128 bits: both factors are below 2^63.
  __extension__ using Wide = __int128;  // GCC's and Clang's (no warning under -Wpedantic)
  const Wide product = static_cast<Wide>(credits) * share.refunded;
  const auto target = static_cast<std::int64_t>((product + share.total - 1) / share.total);  // ≤ credits
  return std::max<std::int64_t>(0, target - already_owed);
}

// --- keys and validation --------------------------------------------------------------------------

void PaymentSlice::finish(PaymentKeys& k) {
  sort_unique(k.payment_ids);
  sort_unique(k.references);
}

void PaymentSlice::add_keys(const CreditPaymentCommand& c, PaymentKeys& k, batch::LedgerKeys& ledger) {
  k.payment_ids.push_back(c.payment_id);
  batch::add_keys(CreditCommand{c.account_id, c.credits, c.payment_id, c.lot}, ledger);
}

void PaymentSlice::add_keys(const TakeBackPaymentCommand& c, PaymentKeys& k, batch::LedgerKeys& ledger) {
  k.payment_ids.push_back(c.payment_id);
  k.references.push_back(c.reference);
  batch::add_keys(DebitCommand{c.account_id, 1, c.reference, ""}, ledger);  // its account, its transfer, its overdue holds
}

void PaymentSlice::add_keys(const DisputePaymentCommand& c, PaymentKeys& k, batch::LedgerKeys& ledger) {
  k.payment_ids.push_back(c.payment_id);
  k.references.push_back(c.reference);
  batch::add_keys(UpdateAccountCommand{c.account_id, {}, {}, {}, {}}, ledger);
}

Status PaymentSlice::validate(const CreditPaymentCommand& c, const ValidationLimits& limits) {
  if (auto s = check_id(c.payment_id, "payment_id"); !s) return s;
  if (auto s = check_id(c.account_id, "account_id"); !s) return s;
  if (c.provider_payment) {
    if (auto s = check_id(*c.provider_payment, "payment_intent"); !s) return s;
  }
  if (auto s = validate_command(CreditCommand{c.account_id, c.credits, c.payment_id, c.lot}, limits); !s) return s;
  return check_amount(c.credits, "credits");
}

Status PaymentSlice::validate(const TakeBackPaymentCommand& c, const ValidationLimits& /*limits*/) {
  if (auto s = check_id(c.payment_id, "payment_id"); !s) return s;
  if (auto s = check_id(c.account_id, "account_id"); !s) return s;
  if (auto s = check_id(c.reference, "reference"); !s) return s;
  if (c.share.has_value() == c.credits.has_value()) return invalid("a payment's refund names a share or credits, one of them");
  if (c.credits) return check_amount(*c.credits, "credits");
  if (c.share->total < 1) return invalid("amount must be at least 1");
  if (c.share->refunded < 0 || c.share->refunded > c.share->total) {
    return invalid("amount_refunded must be between 0 and amount (" + std::to_string(c.share->total) + ")");
  }
  return ok_status();
}

Status PaymentSlice::validate(const DisputePaymentCommand& c, const ValidationLimits& /*limits*/) {
  if (auto s = check_id(c.payment_id, "payment_id"); !s) return s;
  if (auto s = check_id(c.account_id, "account_id"); !s) return s;
  return check_id(c.reference, "reference");
}

// --- deciding -------------------------------------------------------------------------------------

PaymentState::PaymentState(PaymentSnapshot snapshot, std::int64_t now_ms) : now_ms_(now_ms) {
  for (Payment& p : snapshot.payments) {
    const std::string id = p.payment_id;
    payments_.try_emplace(id, PaymentSlot{p, std::move(p)});
  }
  for (PaymentEvent& e : snapshot.events) {
    const std::string ref = e.reference;
    events_.try_emplace(ref, true, std::move(e));
  }
}

Result<PaymentState::PaymentSlot*> PaymentState::payment_of(std::string_view payment_id, std::string_view account_id) {
  auto it = payments_.find(payment_id);
  if (it == payments_.end() || it->second.now.account_id != account_id) return no_such_payment(payment_id, account_id);
  return &it->second;
}

Result<const PaymentEvent*> PaymentState::earlier_event(std::string_view reference, std::string_view payment_id,
                                                        EventKind kind) {
  auto it = events_.find(reference);
  if (it == events_.end()) return static_cast<const PaymentEvent*>(nullptr);
  const PaymentEvent& e = it->second.second;
  if (e.payment_id != payment_id || e.kind != kind) {
    return Error::make(Code::idempotency_mismatch, "reference " + std::string(reference) + " was already used for a " +
                                                       std::string(event_kind_name(e.kind)) + " of payment " + e.payment_id);
  }
  return &e;
}

PaymentOutcome PaymentState::replay(const Payment& p, batch::LedgerBatch& ledger) {
  auto account = ledger.account_view(p.account_id);
  TG_ASSERT(account.has_value());  // a payment's account exists (payments reference it) and is loaded
  return PaymentOutcome{p, std::move(*account), 0, 0, false, false};
}

Result<PaymentOutcome> PaymentState::credit(const CreditPaymentCommand& c, batch::LedgerBatch& ledger) {
  if (auto it = payments_.find(c.payment_id); it != payments_.end()) {
    const Payment& earlier = it->second.now;
    if (earlier.account_id != c.account_id || earlier.provider != c.provider) {
      return Error::make(Code::idempotency_mismatch, "payment " + c.payment_id + " already credited " +
                                                         std::to_string(earlier.credits) + " to account " +
                                                         earlier.account_id);
    }
    // Other credits for the same payment (a pack changed in the configuration before the provider
    // redelivered): the payment was credited once, as it was then — a replay, not a refusal the
    // provider would retry for days.
    return replay(earlier, ledger);
  }
  auto credited = ledger.credit(CreditCommand{c.account_id, c.credits, c.payment_id, c.lot});
  if (!credited) return credited.error();
  Payment p{c.payment_id, c.provider, c.provider_payment, c.account_id, c.credits, 0, 0, now_ms_, now_ms_};
  payments_.try_emplace(c.payment_id, PaymentSlot{std::nullopt, p});
  // A transfer made before under this reference (a hand-made credit of the same amount) is the
  // payment's credit: the row is written, nothing moves again.
  const std::int64_t moved = credited->created ? c.credits : 0;
  return PaymentOutcome{std::move(p), std::move(credited->account), moved, 0, credited->created, false};
}

Result<PaymentOutcome> PaymentState::take_back(const TakeBackPaymentCommand& c, batch::LedgerBatch& ledger) {
  auto slot = payment_of(c.payment_id, c.account_id);
  if (!slot) return slot.error();
  Payment& p = (*slot)->now;
  auto earlier = earlier_event(c.reference, c.payment_id, EventKind::refund);
  if (!earlier) return earlier.error();
  if (*earlier) {
    PaymentOutcome out = replay(p, ledger);
    out.owed = (*earlier)->owed;
    return out;
  }
  const std::int64_t owed = c.share ? owed_by_share(p.credits, p.refunded_credits, *c.share)
                                    : std::min(*c.credits, p.credits - p.refunded_credits);
  std::int64_t taken = 0;
  bool froze = false;
  Account account;
  if (owed > 0) {
    auto t = ledger.take_back({c.account_id, owed, c.reference, take_back_reason(p), c.into_debt, p.payment_id});
    if (!t) return t.error();
    taken = t->taken;
    froze = t->froze;
    account = std::move(t->account);
  } else {
    auto view = ledger.account_view(c.account_id);
    TG_ASSERT(view.has_value());
    account = std::move(*view);
  }
  p.refunded_credits += owed;  // ≤ credits: owed is bounded by what is not yet owed
  p.taken_back += taken;       // taken ≤ owed
  p.updated_at_ms = now_ms_;
  events_.try_emplace(c.reference, false, PaymentEvent{c.reference, c.payment_id, EventKind::refund, owed, taken, now_ms_});
  return PaymentOutcome{p, std::move(account), taken, owed, true, froze};
}

Result<PaymentOutcome> PaymentState::dispute(const DisputePaymentCommand& c, batch::LedgerBatch& ledger) {
  auto slot = payment_of(c.payment_id, c.account_id);
  if (!slot) return slot.error();
  const Payment& p = (*slot)->now;
  auto earlier = earlier_event(c.reference, c.payment_id, EventKind::dispute);
  if (!earlier) return earlier.error();
  if (*earlier) return replay(p, ledger);
  auto frozen = ledger.freeze(c.account_id, kFrozenForDispute);
  if (!frozen) return frozen.error();
  events_.try_emplace(c.reference, false, PaymentEvent{c.reference, c.payment_id, EventKind::dispute, 0, 0, now_ms_});
  return PaymentOutcome{p, std::move(frozen->account), 0, 0, true, frozen->created};
}

PaymentEffects PaymentState::effects() && {
  PaymentEffects e;
  for (auto& [id, slot] : payments_) {  // map order: by payment_id
    if (!slot.loaded) {
      e.new_payments.push_back(std::move(slot.now));
    } else if (*slot.loaded != slot.now) {
      e.changed_payments.push_back(batch::Change<Payment>{std::move(*slot.loaded), std::move(slot.now)});
    }
  }
  for (auto& [ref, row] : events_) {
    if (!row.first) e.new_events.push_back(std::move(row.second));
  }
  return e;
}

}  // namespace tollgate::payments
