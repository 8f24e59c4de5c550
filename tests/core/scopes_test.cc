// What a key's scopes allow (core/scopes.h), the stored form of a scope set, and the RFC 3339 times
// a key's expires_at is given in (core/clock.h parse_rfc3339_ms).
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/scopes.h"

namespace tollgate {
namespace {

TEST(Scopes, AdminGrantsEverythingAdminReadEveryReadAndAnAccountScopeOnlyItself) {
  for (Scope needed : kAllScopes) {
    EXPECT_TRUE(scope_grants(ScopeSet{Scope::admin}, needed)) << scope_name(needed);
    EXPECT_EQ(scope_grants(ScopeSet{Scope::admin_read}, needed), needed == Scope::read || needed == Scope::admin_read)
        << scope_name(needed);
    for (Scope held : {Scope::holds_write, Scope::jobs_write, Scope::read}) {
      EXPECT_EQ(scope_grants(ScopeSet{held}, needed), held == needed) << scope_name(held) << " " << scope_name(needed);
    }
  }
  EXPECT_FALSE(scope_grants(kAccountKeyScopes, Scope::admin_read));
  EXPECT_FALSE(scope_grants(ScopeSet{}, Scope::read));
}

TEST(Scopes, TheStoredFormListsNamesInCanonicalOrderAndReadsBack) {
  const ScopeSet set{Scope::read, Scope::holds_write};
  EXPECT_EQ(scopes_text(set), "holds:write read");
  EXPECT_EQ(parse_scopes_text("holds:write read"), set);
  EXPECT_EQ(scopes_text(kAccountKeyScopes), "holds:write jobs:write read");
  EXPECT_EQ(parse_scopes_text("admin:read"), ScopeSet{Scope::admin_read});
  EXPECT_FALSE(parse_scopes_text("").has_value());
  EXPECT_FALSE(parse_scopes_text("read write").has_value());
  for (Scope s : kAllScopes) EXPECT_EQ(parse_scope(scope_name(s)), s);
  EXPECT_EQ(scope_names(ScopeSet{Scope::read, Scope::holds_write}), (std::vector<std::string_view>{"holds:write", "read"}));
  // A stored key's column: NULL is the default of its kind (keys made before scopes existed).
  EXPECT_EQ(stored_scopes(std::nullopt, /*account_key=*/true), kAccountKeyScopes);
  EXPECT_EQ(stored_scopes(std::nullopt, /*account_key=*/false), kAdminKeyScopes);
  EXPECT_EQ(stored_scopes(std::string("read"), true), ScopeSet{Scope::read});
  EXPECT_FALSE(stored_scopes(std::string("read sudo"), true).has_value());
  EXPECT_FALSE(parse_scope("Read").has_value());
}

TEST(Scopes, EachKindOfKeyTakesOnlyItsOwnScopes) {
  EXPECT_TRUE(check_key_scopes(ScopeSet{Scope::read}, /*account_key=*/true));
  EXPECT_TRUE(check_key_scopes(kAccountKeyScopes, true));
  EXPECT_FALSE(check_key_scopes(ScopeSet{}, true));
  EXPECT_FALSE(check_key_scopes(ScopeSet{Scope::read, Scope::admin}, true));
  EXPECT_FALSE(check_key_scopes(ScopeSet{Scope::admin_read}, true));
  EXPECT_TRUE(check_key_scopes(ScopeSet{Scope::admin}, /*account_key=*/false));
  EXPECT_TRUE(check_key_scopes(ScopeSet{Scope::admin_read}, false));
  EXPECT_FALSE(check_key_scopes(ScopeSet{Scope::admin, Scope::admin_read}, false));
  EXPECT_FALSE(check_key_scopes(ScopeSet{Scope::read}, false));
}

TEST(Rfc3339, TimesWithAnOffsetParseToMillisecondsSinceTheEpoch) {
  EXPECT_EQ(parse_rfc3339_ms("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(parse_rfc3339_ms("2026-12-07T12:00:00.123Z"), 1796644800123);
  EXPECT_EQ(parse_rfc3339_ms("2026-12-07T13:00:00.123+01:00"), 1796644800123);
  EXPECT_EQ(parse_rfc3339_ms("2026-12-07t11:30:00.1234567-00:30"), 1796644800123);
  EXPECT_EQ(parse_rfc3339_ms("2028-02-29T00:00:00z"), 1835395200000);
  // What format_rfc3339_ms writes reads back.
  EXPECT_EQ(parse_rfc3339_ms(format_rfc3339_ms(1796644800123)), 1796644800123);
}

TEST(Rfc3339, AnythingElseIsRefused) {
  for (const std::string bad : {"", "2026-12-07", "2026-12-07T12:00:00", "2026-12-07 12:00:00Z", "2026-13-01T00:00:00Z",
                                "2026-02-30T00:00:00Z", "2026-12-07T24:00:00Z", "2026-12-07T12:60:00Z",
                                "2026-12-07T12:00:60Z", "2026-12-07T12:00:00.Z", "2026-12-07T12:00:00+1:00",
                                "2026-12-07T12:00:00Zjunk", "1969-12-31T23:59:59Z", "+2026-12-07T12:00:00Z",
                                "2026-12-07T12:00:00.1234567890Z"}) {
    EXPECT_FALSE(parse_rfc3339_ms(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace tollgate
