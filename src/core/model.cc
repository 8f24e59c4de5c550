#include "core/model.h"

#include <array>
#include <ostream>
#include <string>
#include <utility>

namespace tollgate {
namespace {

template <typename E, std::size_t N>
std::optional<E> parse_by_name(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view name) {
  for (const auto& [value, text] : table) {
    if (text == name) return value;
  }
  return std::nullopt;
}

template <typename E, std::size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [v, text] : table) {
    if (v == value) return text;
  }
  return "";
}

constexpr std::array<std::pair<HoldStatus, std::string_view>, 4> kHoldStatuses{{
    {HoldStatus::active, "active"},
    {HoldStatus::committed, "committed"},
    {HoldStatus::released, "released"},
    {HoldStatus::expired, "expired"},
}};

constexpr std::array<std::pair<LateOutcome, std::string_view>, 2> kLateOutcomes{{
    {LateOutcome::charged, "charged"},
    {LateOutcome::forgiven, "forgiven"},
}};

constexpr std::array<std::pair<LateCommitPolicy, std::string_view>, 3> kLatePolicies{{
    {LateCommitPolicy::charge, "charge"},
    {LateCommitPolicy::forgive, "forgive"},
    {LateCommitPolicy::reject, "reject"},
}};

constexpr std::array<std::pair<LotCategory, std::string_view>, 2> kLotCategories{{
    {LotCategory::paid, "paid"},
    {LotCategory::promotional, "promotional"},
}};

constexpr std::array<std::pair<EventType, std::string_view>, 15> kEventTypes{{
    {EventType::credited, "credited"},
    {EventType::debited, "debited"},
    {EventType::reserved, "reserved"},
    {EventType::committed, "committed"},
    {EventType::released, "released"},
    {EventType::expired, "expired"},
    {EventType::late_charged, "late_charged"},
    {EventType::late_forgiven, "late_forgiven"},
    {EventType::account_updated, "account_updated"},
    {EventType::extended, "extended"},
    {EventType::balance_low, "balance_low"},
    {EventType::balance_depleted, "balance_depleted"},
    {EventType::balance_recovered, "balance_recovered"},
    {EventType::refunded, "refunded"},
    {EventType::lot_expired, "lot_expired"},
}};

}  // namespace

std::string_view hold_status_name(HoldStatus status) { return name_of(kHoldStatuses, status); }
std::optional<HoldStatus> parse_hold_status(std::string_view name) { return parse_by_name(kHoldStatuses, name); }
std::string_view late_outcome_name(LateOutcome outcome) { return name_of(kLateOutcomes, outcome); }
std::optional<LateOutcome> parse_late_outcome(std::string_view name) {
  if (name.empty()) return LateOutcome::none;
  return parse_by_name(kLateOutcomes, name);
}
std::string_view late_commit_policy_name(LateCommitPolicy policy) { return name_of(kLatePolicies, policy); }
std::optional<LateCommitPolicy> parse_late_commit_policy(std::string_view name) {
  return parse_by_name(kLatePolicies, name);
}
std::string_view event_type_name(EventType type) { return name_of(kEventTypes, type); }
std::optional<EventType> parse_event_type(std::string_view name) { return parse_by_name(kEventTypes, name); }
std::string_view lot_category_name(LotCategory category) { return name_of(kLotCategories, category); }
std::optional<LotCategory> parse_lot_category(std::string_view name) { return parse_by_name(kLotCategories, name); }

std::string lot_id(std::int64_t seq) { return "lot_" + std::to_string(seq); }
std::optional<std::int64_t> parse_lot_id(std::string_view id) {
  constexpr std::string_view kPrefix = "lot_";
  if (id.size() <= kPrefix.size() || id.size() > kPrefix.size() + 18 || id.substr(0, kPrefix.size()) != kPrefix) {
    return std::nullopt;
  }
  std::int64_t seq = 0;
  for (const char c : id.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return std::nullopt;
    seq = seq * 10 + (c - '0');  // at most 18 digits: no overflow
  }
  if (seq < 1 || id[kPrefix.size()] == '0') return std::nullopt;  // one spelling per lot
  return seq;
}

std::ostream& operator<<(std::ostream& out, const Balances& b) {
  return out << "{available=" << b.available << " reserved=" << b.reserved << " used=" << b.used
             << " expired=" << b.expired << " purchased=" << b.purchased << "}";
}

std::ostream& operator<<(std::ostream& out, const Account& a) {
  out << "{" << a.account_id << " " << a.balances << " overdraft_limit=" << a.overdraft_limit << " max_active_holds=";
  if (a.max_active_holds) {
    out << *a.max_active_holds;
  } else {
    out << "none";
  }
  if (a.frozen) out << " frozen";
  if (a.frozen_reason) out << " (" << *a.frozen_reason << ")";
  if (a.low_balance_threshold) out << " low_balance_threshold=" << *a.low_balance_threshold;
  return out << " active_holds=" << a.active_holds << "}";
}

std::ostream& operator<<(std::ostream& out, const Hold& h) {
  out << "{" << h.hold_id << " " << hold_status_name(h.status);
  if (h.late_outcome != LateOutcome::none) out << "/late_" << late_outcome_name(h.late_outcome);
  return out << " account=" << h.account_id << " request=" << h.request_id << " amount=" << h.amount
             << " committed=" << h.committed_amount << " refunded=" << h.refunded_amount << " expires_at_ms=" << h.expires_at_ms << "}";
}

std::ostream& operator<<(std::ostream& out, const Event& e) {
  out << "{#" << e.event_id << " " << e.account_id << " " << event_type_name(e.type) << " " << e.amount;
  if (e.hold_id) out << " hold=" << *e.hold_id;
  if (e.reference) out << " reference=" << *e.reference;
  if (e.reason) out << " reason=" << *e.reason;
  if (e.settings) {
    out << " settings={overdraft_limit=" << e.settings->overdraft_limit << " max_active_holds=";
    if (e.settings->max_active_holds) {
      out << *e.settings->max_active_holds;
    } else {
      out << "none";
    }
    if (e.settings->low_balance_threshold) out << " low_balance_threshold=" << *e.settings->low_balance_threshold;
    out << (e.settings->frozen ? " frozen}" : " not_frozen}");
  }
  if (e.expires_at_ms) out << " expires_at_ms=" << *e.expires_at_ms;
  return out << " after={available=" << e.available_after << " reserved=" << e.reserved_after
             << " used=" << e.used_after << " expired=" << e.expired_after << "}}";
}

}  // namespace tollgate
