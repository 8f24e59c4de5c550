// tollgate core: validation of commands at the service boundary.
//
// A command that passes validate() has well-formed ids, amounts in range and durations within the
// configured bounds; the stores may rely on it. Every refusal is invalid_request with a detail that
// names the field. Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "core/commands.h"
#include "core/result.h"

namespace tollgate {

struct ValidationLimits {
  std::int64_t hold_ttl_ms_max = 3'600'000;  // the configured maximum hold TTL
};

Status validate(const Command& command, const ValidationLimits& limits);

}  // namespace tollgate
