// tollgate core: validation of the ledger's commands at the service boundary, and the checks every
// slice's validation shares. src/slices.h's validate(const Command&) calls these for the ledger's
// kinds and each slice's own `validate` for its kinds.
//
// A command that passes validation has well-formed ids, amounts in range and durations within the
// configured bounds; the stores may rely on it. Every refusal is invalid_request with a detail that
// names the field. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/commands.h"
#include "core/hold_id.h"
#include "core/limits.h"
#include "core/result.h"

namespace tollgate {

struct ValidationLimits {
  std::int64_t hold_ttl_ms_max = limits::kHoldTtlMsMaxDefault;  // the configured maximum hold TTL
  // The slices' owned-hold prefixes (core/hold_id.h), which a reserve's request_id may not begin
  // with: filled in by the registry's validate (core/batch.h) from the slices it registers.
  std::span<const HoldOwner> hold_owners;
};

Status validate_command(const CreateAccountCommand& c, const ValidationLimits& limits);
Status validate_command(const CreditCommand& c, const ValidationLimits& limits);
Status validate_command(const DebitCommand& c, const ValidationLimits& limits);
Status validate_command(const ReserveCommand& c, const ValidationLimits& limits);
Status validate_command(const CommitCommand& c, const ValidationLimits& limits);
Status validate_command(const ReleaseCommand& c, const ValidationLimits& limits);
Status validate_command(const ExtendCommand& c, const ValidationLimits& limits);
Status validate_command(const ExpireOverdueCommand& c, const ValidationLimits& limits);
Status validate_command(const CreateKeyCommand& c, const ValidationLimits& limits);
Status validate_command(const RevokeKeyCommand& c, const ValidationLimits& limits);
Status validate_command(const RecordKeyUseCommand& c, const ValidationLimits& limits);
Status validate_command(const UpdateAccountCommand& c, const ValidationLimits& limits);

// Shared checks: a hold's TTL within [limits::kHoldTtlMsMin, limits.hold_ttl_ms_max]; a text field
// at most `max` bytes. Refusals name `field`.
Status check_ttl(std::int64_t ttl_ms, const ValidationLimits& limits);
Status check_text(const std::string& text, std::size_t max, std::string_view field);

}  // namespace tollgate
