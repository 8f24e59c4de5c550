#include "refunds/refund_batch.h"

#include <algorithm>
#include <utility>

#include "core/checked.h"
#include "core/limits.h"

namespace tollgate::refunds {

void RefundSlice::finish(RefundKeys& k) {
  std::sort(k.request_ids.begin(), k.request_ids.end());
  k.request_ids.erase(std::unique(k.request_ids.begin(), k.request_ids.end()), k.request_ids.end());
}

void RefundSlice::add_keys(const RefundCommand& c, RefundKeys& k, batch::LedgerKeys& ledger) {
  k.request_ids.push_back(c.request_id);
  batch::add_refund_key(c.hold_id, ledger);  // its account is locked: one hold's refunds in turn
}

Status RefundSlice::validate(const RefundCommand& c, const ValidationLimits& /*limits*/) {
  if (auto s = check_id(c.hold_id, "hold_id"); !s) return s;
  if (auto s = check_id(c.request_id, "request_id"); !s) return s;
  if (c.amount) {
    if (auto s = check_amount(*c.amount); !s) return s;
  }
  if (c.reason.empty()) return invalid("reason is required: say why the credits are given back");
  return check_text(c.reason, limits::kReasonLengthMax, "reason");
}

RefundState::RefundState(RefundSnapshot snapshot, std::int64_t now_ms) : now_ms_(now_ms) {
  for (Refund& r : snapshot.refunds) {
    const std::string id = r.request_id;
    refunds_.try_emplace(id, Slot{true, std::move(r)});
  }
}

Result<RefundOutcome> RefundState::refund(const RefundCommand& c, batch::LedgerBatch& ledger) {
  if (auto it = refunds_.find(c.request_id); it != refunds_.end()) {
    const Refund& earlier = it->second.now;
    if (earlier.hold_id != c.hold_id || earlier.requested_amount != c.amount) {
      const std::string asked = earlier.requested_amount ? std::to_string(*earlier.requested_amount) : "everything left";
      return Error::make(Code::idempotency_mismatch, "request_id " + c.request_id + " already refunded " +
                                                         std::to_string(earlier.amount) + " (asked: " + asked +
                                                         ") of hold " + earlier.hold_id);
    }
    const Hold* hold = ledger.hold_for_change(c.hold_id);
    TG_ASSERT(hold != nullptr);  // a refunded hold exists (holds are never deleted)
    return RefundOutcome{*hold, earlier, false};
  }
  auto refunded = ledger.refund_hold(
      batch::LedgerBatch::Refund{c.hold_id, c.owner_request_id, c.amount, c.reason, c.request_id});
  if (!refunded) return refunded.error();
  Refund r{c.request_id, c.hold_id, refunded->hold.account_id, refunded->amount, c.amount, c.reason, now_ms_};
  refunds_.try_emplace(c.request_id, Slot{false, r});
  return RefundOutcome{std::move(refunded->hold), std::move(r), true};
}

RefundEffects RefundState::effects() && {
  RefundEffects e;
  for (auto& [id, slot] : refunds_) {
    if (!slot.loaded) e.new_refunds.push_back(std::move(slot.now));  // map order: by request_id
  }
  return e;
}

}  // namespace tollgate::refunds
