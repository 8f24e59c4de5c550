// Tests of "did you mean …?" (core/suggest.h): the edit distance, what counts as close, and the
// one suggestion made among the names a caller accepts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/limits.h"
#include "core/suggest.h"

namespace tollgate {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwapsAsOneEditEach) {
  EXPECT_EQ(edit_distance("amount", "amount"), 0u);
  EXPECT_EQ(edit_distance("amout", "amount"), 1u);    // a letter left out
  EXPECT_EQ(edit_distance("ammount", "amount"), 1u);  // a letter doubled
  EXPECT_EQ(edit_distance("amuont", "amount"), 1u);   // two neighbours swapped
  EXPECT_EQ(edit_distance("amoint", "amount"), 1u);   // a letter replaced
  EXPECT_EQ(edit_distance("Amount", "amount"), 0u);   // ASCII case does not count
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("colour", "amount"), edit_distance("amount", "colour"));
}

TEST(EditDistance, NamesLongerThanTheLimitAreAsFarAsTheirLength) {
  const std::string long_name(limits::kSuggestNameBytesMax + 1, 'a');
  EXPECT_EQ(edit_distance(long_name, long_name), long_name.size());
  EXPECT_EQ(edit_distance(std::string(limits::kSuggestNameBytesMax, 'a'), std::string(limits::kSuggestNameBytesMax, 'a')),
            0u);
}

TEST(DidYouMean, SuggestsTheClosestAcceptedName) {
  const std::vector<std::string> fields{"account_id", "amount", "request_id", "ttl_ms", "metadata"};
  EXPECT_EQ(did_you_mean("amout", fields), " (did you mean amount?)");
  EXPECT_EQ(did_you_mean("acount_id", fields), " (did you mean account_id?)");
  EXPECT_EQ(did_you_mean("requestid", fields), " (did you mean request_id?)");
  EXPECT_EQ(did_you_mean("tll_ms", fields), " (did you mean ttl_ms?)");
  EXPECT_EQ(did_you_mean("ttl", fields), " (did you mean ttl_ms?)");  // a prefix of at least 3
  EXPECT_EQ(did_you_mean("meta", fields), " (did you mean metadata?)");
}

TEST(DidYouMean, SuggestsNothingFarOrForAnAcceptedName) {
  const std::vector<std::string> fields{"account_id", "amount", "request_id", "ttl_ms", "metadata"};
  EXPECT_EQ(did_you_mean("colour", fields), "");
  EXPECT_EQ(did_you_mean("x", fields), "");
  EXPECT_EQ(did_you_mean("am", fields), "");  // too short to be a prefix worth suggesting
  EXPECT_EQ(did_you_mean("amount", fields), "");
  EXPECT_EQ(did_you_mean("amout", std::vector<std::string>{}), "");
  EXPECT_EQ(did_you_mean("", fields), "");
}

TEST(DidYouMean, TakesTheFirstOfEquallyCloseNamesAndWorksOnAnyListOfNames) {
  EXPECT_EQ(closest("limt", std::vector<std::string>{"limit", "lima"}), "limit");
  EXPECT_EQ(closest("hold_ttl", std::vector<const char*>{"hold_ttl_ms", "hold_ttl_max_ms"}), "hold_ttl_ms");
  EXPECT_EQ(closest("acount", std::initializer_list<const char*>{"audit", "account", "events"}), "account");
  EXPECT_EQ(closest("crate", std::vector<std::string>{"create", "credit", "debit", "show"}), "create");
}

}  // namespace
}  // namespace tollgate
