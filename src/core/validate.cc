#include "core/validate.h"

#include <string>

#include "core/checked.h"
#include "core/limits.h"

namespace tollgate {
namespace {

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

Status check(const CreateAccountCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.account_id, "account_id"));
  TG_TRY(check_overdraft_limit(c.overdraft_limit));
  return check_max_active_holds(c.max_active_holds);
}

Status check(const UpdateAccountCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.account_id, "account_id"));
  if (c.overdraft_limit) TG_TRY(check_overdraft_limit(*c.overdraft_limit));
  if (c.max_active_holds) TG_TRY(check_max_active_holds(*c.max_active_holds));
  return ok_status();
}

Status check(const CreditCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.account_id, "account_id"));
  TG_TRY(check_amount(c.amount));
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
  if (jobs::job_of_hold(c.request_id)) {
    return invalid("request_id must not begin with \"" + std::string(jobs::kJobHoldPrefix) +
                   "\": that prefix names the holds of jobs");
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

Status check_lease(std::int64_t lease_ms) {
  if (lease_ms < 1 || lease_ms > limits::kHoldTtlMsMax) {
    return invalid("lease_ms must be from 1 to " + std::to_string(limits::kHoldTtlMsMax) + ", got " +
                   std::to_string(lease_ms));
  }
  return ok_status();
}

Status check(const SubmitJobCommand& c, const ValidationLimits& v) {
  TG_TRY(check_id(c.client_request_id, "client_request_id"));
  TG_TRY(check_id(c.account_id, "account_id"));
  TG_TRY(check_amount(c.cost, "cost"));
  TG_TRY(check_id(c.provider, "provider"));
  TG_TRY(check_text(c.input_json, limits::kJobInputBytesMax, "input"));
  if (c.ttl_ms) TG_TRY(check_ttl(*c.ttl_ms, v));
  TG_TRY(check_id(c.owner, "owner"));
  return check_lease(c.lease_ms);
}

Status check(const ClaimJobCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.client_request_id, "client_request_id"));
  TG_TRY(check_id(c.hold_id, "hold_id"));
  TG_TRY(check_id(c.owner, "owner"));
  TG_TRY(check_lease(c.lease_ms));
  return check_text(c.note, limits::kReasonLengthMax, "note");
}

Status check(const EndJobCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.client_request_id, "client_request_id"));
  TG_TRY(check_id(c.hold_id, "hold_id"));
  if (!jobs::is_ended(c.end)) return invalid("a job ends as completed, failed or cancelled");
  if (c.end == jobs::JobStatus::completed && !c.result_json) return invalid("a completed job needs its result");
  if (c.result_json) TG_TRY(check_text(*c.result_json, limits::kJobResultBytesMax, "result"));
  if (c.error) TG_TRY(check_text(*c.error, limits::kReasonLengthMax, "error"));
  return check_text(c.note, limits::kReasonLengthMax, "note");
}

Status check_coord_ttl(std::int64_t ttl_ms, std::int64_t max, std::string_view field) {
  if (ttl_ms < 1 || ttl_ms > max) {
    return invalid(std::string(field) + " must be from 1 to " + std::to_string(max) + ", got " + std::to_string(ttl_ms));
  }
  return ok_status();
}

Status check(const LockCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.key, "key"));
  if (c.op == coord::LockOp::cancel) return ok_status();
  TG_TRY(check_id(c.owner, "owner"));
  if (c.fence && *c.fence < 1) return invalid("fence must be at least 1, got " + std::to_string(*c.fence));
  if (c.op == coord::LockOp::release) return ok_status();
  return check_coord_ttl(c.ttl_ms, limits::kLockTtlMsMax, "ttl_ms");
}

Status check(const IdempotencyCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.key, "key"));
  if (c.fingerprint.empty()) return invalid("fingerprint must not be empty");
  TG_TRY(check_text(c.fingerprint, limits::kFingerprintLengthMax, "fingerprint"));
  if (c.attempt && *c.attempt < 1) return invalid("attempt must be at least 1, got " + std::to_string(*c.attempt));
  if (c.op == coord::IdemOp::begin) return check_coord_ttl(c.ttl_ms, limits::kIdempotencyTtlMsMax, "ttl_ms");
  if (c.op == coord::IdemOp::finish) {
    if (c.response_json.empty()) return invalid("response must be a JSON value");
    return check_text(c.response_json, limits::kIdempotencyResponseBytesMax, "response");
  }
  return ok_status();
}

Status check(const RateLimitCommand& c, const ValidationLimits&) {
  TG_TRY(check_id(c.policy, "policy"));
  TG_TRY(check_id(c.key, "key"));
  if (c.op == coord::RateOp::reset) return ok_status();
  if (c.gcra.limit < 1 || c.gcra.limit > limits::kRateLimitMax || c.gcra.period_ms < 1 ||
      c.gcra.period_ms > limits::kRateLimitPeriodMsMax || c.gcra.limit > c.gcra.period_ms * 1000) {
    return invalid("policy " + c.policy + " has no valid limit and period");
  }
  if (c.cost < 1 || c.cost > c.gcra.limit) {
    return invalid("cost must be from 1 to the policy's limit (" + std::to_string(c.gcra.limit) + "), got " +
                   std::to_string(c.cost));
  }
  return ok_status();
}

Status check(const PruneCoordCommand& c, const ValidationLimits&) {
  if (c.retention_ms < 1 || c.retention_ms > limits::kIdempotencyRetentionMsMax) {
    return invalid("retention_ms out of range: " + std::to_string(c.retention_ms));
  }
  if (c.max_rows < 1 || c.max_rows > limits::kIdempotencyPruneBatchMax) {
    return invalid("max_rows out of range: " + std::to_string(c.max_rows));
  }
  return ok_status();
}

}  // namespace

Status validate(const Command& command, const ValidationLimits& limits) {
  return std::visit([&](const auto& c) { return check(c, limits); }, command);
}

}  // namespace tollgate
