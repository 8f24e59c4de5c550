// tollgate core: the one way to read a number from text that came from outside.
//
// Every integer that arrives as text — a query string, a path segment, a header, a configuration
// value or environment variable, a command-line argument, a provider's answer or URL, a database's
// answer, a /proc file — is read here, never with std::stoi/stoll/stod (they throw, and an
// exception on a request path is a crash) nor with atoi/strtol (they accept "12abc" and overflow
// silently).
//
// The rule: the whole text is one decimal integer, nothing before or after it. Never a space, never
// "+", never "0x", never an exponent or a fraction; "-" only where the caller allows a sign. Leading
// zeros are decimal ("007" is 7, never octal). A value outside [min, max] — including one beyond the
// 64-bit range, however many digits it has — is refused like any other bad text. The caller turns
// the refusal into its own error, naming what it read (a 400 naming the query parameter, a
// configuration error naming the key).
//
// Thread safety: pure functions; safe from any thread. They never throw and never allocate.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace tollgate {

enum class Sign : std::uint8_t {
  digits_only,    // [0-9]+ : what a query parameter, a port or a count looks like
  minus_allowed,  // -?[0-9]+ : a configuration value that validation checks later, a database answer
};

// The integer `text` spells, if it is one and lies in [min, max]; std::nullopt otherwise.
std::optional<std::int64_t> parse_int(std::string_view text, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                                      std::int64_t max = std::numeric_limits<std::int64_t>::max(),
                                      Sign sign = Sign::digits_only) noexcept;

// The same for unsigned 64-bit values (digits only): /proc counters, sizes.
std::optional<std::uint64_t> parse_uint(std::string_view text,
                                        std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) noexcept;

}  // namespace tollgate
