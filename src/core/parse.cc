#include "core/parse.h"

#include <charconv>
#include <system_error>

namespace tollgate {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// True when `digits` is non-empty and every character is 0-9.
bool all_digits(std::string_view digits) {
  if (digits.empty()) return false;
  for (char c : digits) {
    if (!is_digit(c)) return false;
  }
  return true;
}

}  // namespace

std::optional<std::int64_t> parse_int(std::string_view text, std::int64_t min, std::int64_t max, Sign sign) noexcept {
  const bool negative = !text.empty() && text.front() == '-';
  if (negative && sign != Sign::minus_allowed) return std::nullopt;
  // from_chars itself accepts a leading '-' and nothing else before the digits; checking the digits
  // here makes the rule explicit (no "+", no space) whatever the library does.
  if (!all_digits(text.substr(negative ? 1 : 0))) return std::nullopt;
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
  if (ec != std::errc() || ptr != end) return std::nullopt;  // out of range (ec) or not all read
  if (value < min || value > max) return std::nullopt;
  return value;
}

std::optional<std::uint64_t> parse_uint(std::string_view text, std::uint64_t max) noexcept {
  if (!all_digits(text)) return std::nullopt;
  std::uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
  if (ec != std::errc() || ptr != end || value > max) return std::nullopt;
  return value;
}

}  // namespace tollgate
