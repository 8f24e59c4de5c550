#include "core/validate.h"

#include <string>

#include "core/checked.h"
#include "core/hold_id.h"
#include "core/limits.h"

namespace tollgate {

Status check_ttl(std::int64_t ttl_ms, const ValidationLimits& v) {
  if (ttl_ms < limits::kHoldTtlMsMin || ttl_ms > v.hold_ttl_ms_max) {
    return invalid("ttl_ms must be from " + std::to_string(limits::kHoldTtlMsMin) + " to " +
                   std::to_string(v.hold_ttl_ms_max) + ", got " + std::to_string(ttl_ms));
  }
  return ok_status();
}

Status check_text(const std::string& text, std::size_t max, std::string_view field) {
  if (text.size() > max) return invalid(std::string(field) + " is longer than " + std::to_string(max) + " bytes");
  return ok_status();
}

namespace {

#define TG_TRY(expr)                 \
  do {                               \
    if (auto s_ = (expr); !s_) return s_; \
  } while (0)

Status check_overdraft_limit(std::int64_t overdraft_limit) {
  if (overdraft_limit < 0 || overdraft_limit > limits::kOverdraftLimitMax) {
    return invalid("overdraft_limit must be from 0 to 9007199254740991, got " + std::to_string(overdraft_limit));
  }
  return ok_status();
}

Status check_max_active_holds(const std::optional<std::int64_t>& max_active_holds) {
  if (max_active_holds && (*max_active_holds < 1 || *max_active_holds > limits::kMaxActiveHoldsMax)) {
    return invalid("max_active_holds must be from 1 to " + std::to_string(limits::kMaxActiveHoldsMax) + ", got " +
                   std::to_string(*max_active_holds));
  }
  return ok_status();
}

Status check_low_balance_threshold(const std::optional<std::int64_t>& threshold) {
  if (threshold && (*threshold < 1 || *threshold > limits::kLowBalanceThresholdMax)) {
    return invalid("low_balance_threshold must be from 1 to " + std::to_string(limits::kLowBalanceThresholdMax) +
                   " or null, got " + std::to_string(*threshold));
  }
  return ok_status();
}

Status check(const CreateAccountCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.account_id, "account_id"));
  TG_TRY(check_overdraft_limit(c.overdraft_limit));
  return check_max_active_holds(c.max_active_holds);
}

Status check(const UpdateAccountCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.account_id, "account_id"));
  if (c.overdraft_limit) TG_TRY(check_overdraft_limit(*c.overdraft_limit));
  if (c.max_active_holds) TG_TRY(check_max_active_holds(*c.max_active_holds));
  if (c.low_balance_threshold) TG_TRY(check_low_balance_threshold(*c.low_balance_threshold));
  return ok_status();
}

Status check(const CreditCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.account_id, "account_id"));
  TG_TRY(check_amount(c.amount));
  if (c.lot.priority < 0 || c.lot.priority > limits::kLotPriorityMax) {
    return invalid("priority must be between 0 and " + std::to_string(limits::kLotPriorityMax));
  }
  return check_id(c.reference, "reference");
}

Status check(const DebitCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.account_id, "account_id"));
  TG_TRY(check_amount(c.amount));
  TG_TRY(check_id(c.reference, "reference"));
  return check_text(c.reason, limits::kReasonLengthMax, "reason");
}

Status check(const ReserveCommand& c, const ValidationLimits& v) {
  TG_TRY(check_id(c.account_id, "account_id"));
  TG_TRY(check_amount(c.amount));
  TG_TRY(check_id(c.request_id, "request_id"));
  if (auto owned = owner_of_hold(v.hold_owners, c.request_id)) {
    return invalid("request_id must not begin with \"" + std::string(owned->owner->request_id_prefix) +
                   "\": that prefix names the holds of " + std::string(owned->owner->noun_plural));
  }
  if (c.ttl_ms) TG_TRY(check_ttl(*c.ttl_ms, v));
  return check_text(c.metadata_json, limits::kMetadataBytesMax, "metadata");
}

Status check(const CommitCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.hold_id, "hold_id"));
  if (c.amount) TG_TRY(check_amount(*c.amount));
  return ok_status();
}

Status check(const ReleaseCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.hold_id, "hold_id"));
  if (c.reason) TG_TRY(check_text(*c.reason, limits::kReasonLengthMax, "reason"));
  return ok_status();
}

Status check(const ExtendCommand& c, const ValidationLimits& v) {
  TG_TRY(check_id(c.hold_id, "hold_id"));
  return check_ttl(c.ttl_ms, v);
}

Status check(const ExpireOverdueCommand& c, const ValidationLimits&) {
  if (c.max_holds < 1) return invalid("max_holds must be at least 1");
  return ok_status();
}

Status check(const CreateKeyCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.key_id, "key_id"));
  if (c.account_id) TG_TRY(check_id(*c.account_id, "account_id"));
  if (c.secret_sha256.size() != 64) return invalid("secret_sha256 must be 64 hex digits");
  if (c.scopes) TG_TRY(check_key_scopes(*c.scopes, c.account_id.has_value()));
  if (c.expires_at_ms && *c.expires_at_ms <= 0) return invalid("expires_at must be in the future");
  if (c.name) {
    if (c.name->empty()) return invalid("name must not be empty (leave it out for none)");
    TG_TRY(check_text(*c.name, limits::kKeyNameBytesMax, "name"));
  }
  return ok_status();
}

Status check(const RevokeKeyCommand& c, const ValidationLimits&) { return check_id(c.key_id, "key_id"); }

Status check(const RecordKeyUseCommand& c, const ValidationLimits&) {
  if (c.uses.empty() || c.uses.size() > limits::kKeyUsesPerCommandMax) {
    return invalid("uses must name from 1 to " + std::to_string(limits::kKeyUsesPerCommandMax) + " keys");
  }
  for (const auto& use : c.uses) {
    TG_TRY(check_id(use.key_id, "key_id"));
    if (use.used_at_ms < 0) return invalid("used_at_ms must not be negative");
  }
  return ok_status();
}

}  // namespace

#define TG_VALIDATE(Kind) \
  Status validate_command(const Kind& c, const ValidationLimits& limits) { return check(c, limits); }
TG_VALIDATE(CreateAccountCommand)
TG_VALIDATE(CreditCommand)
TG_VALIDATE(DebitCommand)
TG_VALIDATE(ReserveCommand)
TG_VALIDATE(CommitCommand)
TG_VALIDATE(ReleaseCommand)
TG_VALIDATE(ExtendCommand)
TG_VALIDATE(ExpireOverdueCommand)
TG_VALIDATE(CreateKeyCommand)
TG_VALIDATE(RevokeKeyCommand)
TG_VALIDATE(RecordKeyUseCommand)
TG_VALIDATE(UpdateAccountCommand)
#undef TG_VALIDATE

}  // namespace tollgate
