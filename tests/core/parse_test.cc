// Tests of parse_int/parse_uint (core/parse.h), the one reader of numbers that come from outside:
// every boundary of the 32-, 53- and 64-bit ranges, 19 and 20 digits, signs, spaces, leading zeros.
// None of them may throw; the old std::stoll threw std::out_of_range for 19-digit values ≥ 2^63.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "core/parse.h"

namespace tollgate {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::uint64_t kUMax = std::numeric_limits<std::uint64_t>::max();

std::optional<std::int64_t> any(std::string_view s) { return parse_int(s, kMin, kMax, Sign::digits_only); }
std::optional<std::int64_t> signed_any(std::string_view s) { return parse_int(s, kMin, kMax, Sign::minus_allowed); }

TEST(ParseInt, ReadsTheBoundariesOfTheInt64Range) {
  EXPECT_EQ(any("0"), 0);
  EXPECT_EQ(any("2147483647"), 2147483647);                        // 2^31 - 1
  EXPECT_EQ(any("2147483648"), std::int64_t{1} << 31);             // 2^31
  EXPECT_EQ(any("9007199254740992"), std::int64_t{1} << 53);       // 2^53
  EXPECT_EQ(any("9007199254740993"), (std::int64_t{1} << 53) + 1);
  EXPECT_EQ(any("9223372036854775806"), kMax - 1);                 // 2^63 - 2
  EXPECT_EQ(any("9223372036854775807"), kMax);                     // 2^63 - 1, 19 digits
  EXPECT_EQ(any("1000000000000000000"), 1'000'000'000'000'000'000);  // 19 digits, in range
}

TEST(ParseInt, RefusesWhatLiesBeyondInt64WithoutThrowing) {
  EXPECT_EQ(any("9223372036854775808"), std::nullopt);   // 2^63: the value that crashed std::stoll
  EXPECT_EQ(any("9223372036854775809"), std::nullopt);   // 2^63 + 1
  EXPECT_EQ(any("9999999999999999999"), std::nullopt);   // the largest 19-digit number
  EXPECT_EQ(any("18446744073709551615"), std::nullopt);  // 2^64 - 1
  EXPECT_EQ(any("18446744073709551616"), std::nullopt);  // 2^64
  EXPECT_EQ(any("10000000000000000000"), std::nullopt);  // 20 digits
  EXPECT_EQ(any(std::string(400, '9')), std::nullopt);
  EXPECT_EQ(signed_any("-9223372036854775808"), kMin);   // -2^63
  EXPECT_EQ(signed_any("-9223372036854775809"), std::nullopt);
}

TEST(ParseInt, RefusesSignsUnlessTheCallerAllowsAMinus) {
  EXPECT_EQ(any("-1"), std::nullopt);
  EXPECT_EQ(any("-0"), std::nullopt);
  EXPECT_EQ(any("+1"), std::nullopt);
  EXPECT_EQ(signed_any("-1"), -1);
  EXPECT_EQ(signed_any("+1"), std::nullopt);
  EXPECT_EQ(signed_any("-"), std::nullopt);
  EXPECT_EQ(signed_any("--1"), std::nullopt);
  EXPECT_EQ(signed_any("-+1"), std::nullopt);
}

TEST(ParseInt, RefusesSpacesEmptyTextAndEveryOtherSpelling) {
  for (const char* bad : {"", " ", " 1", "1 ", "\t1", "1\n", "1 2", "1e3", "1.0", "1.", ".5", "0x10", "1_000", "1,000",
                          "one", "1a", "a1", "\xef\xbc\x91" /* fullwidth 1 */}) {
    EXPECT_EQ(any(bad), std::nullopt) << '"' << bad << '"';
    EXPECT_EQ(signed_any(bad), std::nullopt) << '"' << bad << '"';
  }
  EXPECT_EQ(any(std::string_view("1\0", 2)), std::nullopt);  // a NUL after the digits is not the end
}

TEST(ParseInt, ReadsLeadingZerosAsDecimal) {
  EXPECT_EQ(any("007"), 7);
  EXPECT_EQ(any("010"), 10);  // never octal
  EXPECT_EQ(any("00"), 0);
  EXPECT_EQ(any("0009223372036854775807"), kMax);  // 22 characters, still 2^63 - 1
  EXPECT_EQ(any("0009223372036854775808"), std::nullopt);
  EXPECT_EQ(signed_any("-007"), -7);
}

TEST(ParseInt, AppliesTheCallersRange) {
  EXPECT_EQ(parse_int("1", 1, 1000), 1);
  EXPECT_EQ(parse_int("1000", 1, 1000), 1000);
  EXPECT_EQ(parse_int("0", 1, 1000), std::nullopt);
  EXPECT_EQ(parse_int("1001", 1, 1000), std::nullopt);
  EXPECT_EQ(parse_int("65535", 0, 65535), 65535);
  EXPECT_EQ(parse_int("65536", 0, 65535), std::nullopt);
  EXPECT_EQ(parse_int("-5", -10, -1, Sign::minus_allowed), -5);
  EXPECT_EQ(parse_int("-11", -10, -1, Sign::minus_allowed), std::nullopt);
}

TEST(ParseUint, ReadsTheWholeUint64RangeAndNothingMore) {
  EXPECT_EQ(parse_uint("0"), 0u);
  EXPECT_EQ(parse_uint("9223372036854775808"), std::uint64_t{1} << 63);  // 2^63
  EXPECT_EQ(parse_uint("18446744073709551615"), kUMax);                  // 2^64 - 1, 20 digits
  EXPECT_EQ(parse_uint("18446744073709551616"), std::nullopt);           // 2^64
  EXPECT_EQ(parse_uint("99999999999999999999"), std::nullopt);           // the largest 20-digit number
  EXPECT_EQ(parse_uint("-1"), std::nullopt);
  EXPECT_EQ(parse_uint("+1"), std::nullopt);
  EXPECT_EQ(parse_uint(" 1"), std::nullopt);
  EXPECT_EQ(parse_uint("1 "), std::nullopt);
  EXPECT_EQ(parse_uint(""), std::nullopt);
  EXPECT_EQ(parse_uint("1e3"), std::nullopt);
  EXPECT_EQ(parse_uint("007"), 7u);
  EXPECT_EQ(parse_uint("100", 99), std::nullopt);
}

}  // namespace
}  // namespace tollgate
