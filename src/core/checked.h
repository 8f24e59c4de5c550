// tollgate core: money is integers, and integer arithmetic on money is checked.
//
// checked_add / checked_sub / checked_mul return std::nullopt instead of wrapping. Callers turn that into
// Code::overflow. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/limits.h"
#include "core/result.h"

namespace tollgate {

inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<std::int64_t> checked_sub(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// An amount of credits moved by one operation: 1 ≤ amount ≤ 2^53 − 1.
inline bool amount_is_valid(std::int64_t amount) {
  return amount >= limits::kAmountMin && amount <= limits::kAmountMax;
}

// Validates an amount given by a caller; `field` names it in the error ("amount", "cost").
inline Status check_amount(std::int64_t amount, std::string_view field = "amount") {
  if (!amount_is_valid(amount)) {
    return invalid(std::string(field) + " must be an integer from 1 to 9007199254740991, got " +
                   std::to_string(amount));
  }
  return ok_status();
}

// Client-chosen identifiers (account_id, request_id, reference, …): 1–128 of [A-Za-z0-9._:@-],
// but never "." or "..": an id is also a URL path segment, and clients and proxies normalise those
// away ("/v1/holds/./extend" becomes "/v1/holds/extend"), so such an id could never be named again.
inline bool id_is_dot_segment(std::string_view id) { return id == "." || id == ".."; }

inline bool id_is_valid(std::string_view id) {
  if (id.empty() || id.size() > limits::kIdLengthMax || id_is_dot_segment(id)) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == ':' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

inline Status check_id(std::string_view id, std::string_view field) {
  if (id_is_dot_segment(id)) {
    return invalid(std::string(field) + " must not be \".\" or \"..\": a URL path cannot carry them");
  }
  if (!id_is_valid(id)) {
    return invalid(std::string(field) + " must be 1-128 characters of [A-Za-z0-9._:@-]");
  }
  return ok_status();
}

}  // namespace tollgate
