// append_json_string: what every log line and many answers are built with.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include <string>

#include "core/log.h"

namespace tollgate {
namespace {

std::string escaped(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

TEST(AppendJsonString, EscapesAsBoostJsonDoes) {
  EXPECT_EQ(escaped("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  EXPECT_EQ(escaped(""), "\"\"");
}

TEST(AppendJsonString, KeepsWellFormedUtf8) {
  const std::string text = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xb3";  // café € 💳
  EXPECT_EQ(escaped(text), "\"" + text + "\"");
}

// Found while writing fuzz_json_codec (its oracle checks it): a path with a stray byte made a log line that was not JSON.
TEST(AppendJsonString, ReplacesBytesThatAreNotUtf8SoTheResultStaysJson) {
  const std::string replacement = "\xef\xbf\xbd";
  EXPECT_EQ(escaped("a\xff" "b"), "\"a" + replacement + "b\"");
  EXPECT_EQ(escaped("\xc3"), "\"" + replacement + "\"");                          // cut short
  EXPECT_EQ(escaped("\xc0\xaf"), "\"" + replacement + replacement + "\"");        // overlong '/'
  EXPECT_EQ(escaped("\xed\xa0\x80"), "\"" + replacement + replacement + replacement + "\"");  // a surrogate
  EXPECT_EQ(escaped("\xf4\x90\x80\x80").size(), 2 + 4 * replacement.size());       // past U+10FFFF
  for (const std::string bad : {"\xff", "\xc3(", "\xe2\x82", "\xf0\x9f\x92", "x\x80y"}) {
    boost::system::error_code ec;
    const auto v = boost::json::parse(escaped(bad), ec);
    EXPECT_FALSE(ec) << escaped(bad);
    EXPECT_TRUE(v.is_string());
  }
}

}  // namespace
}  // namespace tollgate
