// The server's configuration (api.md, "Configuration"; src/config/config.h): the file, TOLLGATE_*
// variables and flags, in that order; every error names the key and the file's line; and the real
// binary refuses to start on a bad file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "config/config.h"
#include "config/config_keys.h"
#include "http/http_test_support.h"

namespace tollgate::httptest {
namespace {

// The example of api.md's Configuration section, made valid (a real admin key).
constexpr const char* kFullConfig = R"(listen = "127.0.0.1:8080"
database = "sqlite:tollgate.db"            # or "postgresql://user@host/db?…" (libpq URI)
admin_key = "0123456789abcdef-admin"
hold_ttl_ms = 300000
hold_ttl_max_ms = 3600000
late_commit = "charge"                     # charge | forgive | reject
reaper_interval_ms = 1000

[providers.imagegen]
url = "http://127.0.0.1:9000/generate"
status_url = "http://127.0.0.1:9000/status/{id}"   # optional
timeout_ms = 60000
expected_duration_ms = 20000               # timeout_ms and hold TTL must be ≥ 3 × this, else start-up fails

[ratelimits.login]
limit = 5
period_ms = 900000
store = "shared"                           # shared | local
)";

TEST(Config, TheFullExampleOfTheSpecParses) {
  auto parsed = parse_config(kFullConfig, "tollgate.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  const ServerConfig& c = *parsed;
  EXPECT_EQ(c.listen, "127.0.0.1:8080");
  EXPECT_EQ(c.database, "sqlite:tollgate.db");
  ASSERT_TRUE(c.admin_key.has_value());
  EXPECT_EQ(*c.admin_key, "0123456789abcdef-admin");
  EXPECT_EQ(c.hold_ttl_ms, 300000);
  EXPECT_EQ(c.hold_ttl_max_ms, 3600000);
  EXPECT_EQ(c.late_commit, LateCommitPolicy::charge);
  EXPECT_EQ(c.reaper_interval_ms, 1000);
  ASSERT_EQ(c.providers.count("imagegen"), 1u);
  const ProviderConfig& p = c.providers.at("imagegen");
  EXPECT_EQ(p.url, "http://127.0.0.1:9000/generate");
  ASSERT_TRUE(p.status_url.has_value());
  EXPECT_EQ(*p.status_url, "http://127.0.0.1:9000/status/{id}");
  EXPECT_EQ(p.timeout_ms, 60000);
  EXPECT_EQ(p.expected_duration_ms, 20000);
  ASSERT_EQ(c.ratelimits.count("login"), 1u);
  EXPECT_EQ(c.ratelimits.at("login").limit, 5);
  EXPECT_EQ(c.ratelimits.at("login").period_ms, 900000);
  EXPECT_EQ(c.ratelimits.at("login").store, RateLimitStore::shared);
  EXPECT_TRUE(validate_config(c).ok());
}

TEST(Config, ALocalPolicyMayBoundItsTableOfKeys) {
  auto parsed = parse_config("[ratelimits.cheap]\nlimit = 5\nperiod_ms = 1000\nstore = \"local\"\nkeys_max = 50\n",
                             "tollgate.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  EXPECT_EQ(parsed->ratelimits.at("cheap").keys_max, 50);
  auto unset = parse_config("[ratelimits.cheap]\nlimit = 5\nperiod_ms = 1000\nstore = \"local\"\n", "tollgate.toml");
  ASSERT_TRUE(unset.ok()) << unset.error().detail;
  EXPECT_EQ(unset->ratelimits.at("cheap").keys_max, 0) << "0: the default bound (limits::kLocalRateKeysMaxDefault)";
}

TEST(Config, AnEmptyFileGivesTheDefaults) {
  auto parsed = parse_config("", "empty.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  EXPECT_EQ(parsed->listen, "127.0.0.1:8080");
  EXPECT_EQ(parsed->hold_ttl_ms, 300000);
  EXPECT_EQ(parsed->hold_ttl_max_ms, 3600000);
  EXPECT_EQ(parsed->late_commit, LateCommitPolicy::charge);
  EXPECT_EQ(parsed->reaper_interval_ms, 1000);
  EXPECT_FALSE(parsed->admin_key.has_value());
  EXPECT_EQ(parsed->database_pool_size, 8);
  EXPECT_EQ(parsed->database_timeout_ms, 5000);
  EXPECT_EQ(parsed->jobs_in_flight_max, 10000);
}

TEST(Config, TheJobsInFlightBoundIsRead) {
  auto parsed = parse_config("jobs_in_flight_max = 250\n", "jobs.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  EXPECT_EQ(parsed->jobs_in_flight_max, 250);
}

TEST(Config, TlsAndTheFailedAuthThrottleAreRead) {
  auto defaults = parse_config("", "empty.toml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->auth_failures_limit, 20);
  EXPECT_EQ(defaults->auth_failures_period_ms, 60'000);
  EXPECT_FALSE(defaults->tls_cert);
  auto parsed = parse_config(
      "tls_cert = \"/etc/t/cert.pem\"\ntls_key = \"/etc/t/key.pem\"\nauth_failures_limit = 0\n"
      "auth_failures_period_ms = 1000\n",
      "tls.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  EXPECT_EQ(parsed->tls_cert, "/etc/t/cert.pem");
  EXPECT_EQ(parsed->tls_key, "/etc/t/key.pem");
  EXPECT_EQ(parsed->auth_failures_limit, 0);
  EXPECT_EQ(parsed->auth_failures_period_ms, 1000);
  EXPECT_TRUE(validate_config(*parsed).ok());
  auto half = parse_config("tls_cert = \"/etc/t/cert.pem\"\n", "half.toml");
  ASSERT_TRUE(half.ok());
  const Status s = validate_config(*half);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().detail.find("tls_cert is set but tls_key is not"), std::string::npos) << s.error().detail;
  auto negative = parse_config("auth_failures_limit = -1\n", "neg.toml");
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().detail.find("neg.toml:1"), std::string::npos) << negative.error().detail;
}

TEST(Config, APostgresqlDatabaseWithItsPoolAndTimeoutIsRead) {
  auto parsed = parse_config("database = \"postgresql://tollgate@pg-a:5432,pg-b:5432/tollgate?target_session_attrs=read-write\"\n"
                             "database_pool_size = 16\ndatabase_timeout_ms = 2500\n",
                             "pg.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  EXPECT_EQ(parsed->database, "postgresql://tollgate@pg-a:5432,pg-b:5432/tollgate?target_session_attrs=read-write");
  EXPECT_EQ(parsed->database_pool_size, 16);
  EXPECT_EQ(parsed->database_timeout_ms, 2500);
  EXPECT_TRUE(validate_config(*parsed).ok());
}

TEST(Config, EveryLateCommitPolicyIsRead) {
  for (const auto& [name, policy] : std::map<std::string, LateCommitPolicy>{
           {"charge", LateCommitPolicy::charge}, {"forgive", LateCommitPolicy::forgive}, {"reject", LateCommitPolicy::reject}}) {
    auto parsed = parse_config("late_commit = \"" + name + "\"\n", "t.toml");
    ASSERT_TRUE(parsed.ok()) << name << ": " << parsed.error().detail;
    EXPECT_EQ(parsed->late_commit, policy) << name;
  }
}

// A Standard Webhooks secret (whsec_ + base64 of 24 bytes, the least accepted) and Stripe-like
// signing secrets; their texts must never appear in a message.
constexpr const char* kWebhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr const char* kPaymentsConfig = R"([payments.stripe]
signing_secrets = ["whsec_old-0123456789abcdef",   # several during a rotation
                   "whsec_new-0123456789abcdef"]
tolerance_ms = 120000
refund_shortfall = "forgive"                        # debt | forgive
[payments.stripe.packs]
small = 10
"pro.monthly" = 500
"team:large@2" = 9007199254740991

[payments.webhook]
secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
tolerance_ms = 60000
)";

TEST(Config, ThePaymentsSectionIsRead) {
  auto parsed = parse_config(kPaymentsConfig, "tollgate.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  const PaymentsConfig& p = parsed->payments;
  EXPECT_EQ(p.stripe.signing_secrets,
            (std::vector<std::string>{"whsec_old-0123456789abcdef", "whsec_new-0123456789abcdef"}));
  EXPECT_EQ(p.stripe.tolerance_ms, 120000);
  EXPECT_EQ(p.stripe.refund_shortfall, RefundShortfall::forgive);
  EXPECT_EQ(p.stripe.packs, (std::map<std::string, std::int64_t>{
                                {"small", 10}, {"pro.monthly", 500}, {"team:large@2", 9007199254740991}}));
  EXPECT_EQ(p.webhook.secret, kWebhookSecret);
  EXPECT_EQ(p.webhook.tolerance_ms, 60000);
  EXPECT_TRUE(validate_config(*parsed).ok()) << validate_config(*parsed).error().detail;

  auto debt = parse_config("[payments.stripe]\nrefund_shortfall = \"debt\"\n", "t.toml");
  ASSERT_TRUE(debt.ok()) << debt.error().detail;
  EXPECT_EQ(debt->payments.stripe.refund_shortfall, RefundShortfall::debt);
  // The longest secret of the 24-byte minimum and more.
  auto longer = parse_config("[payments.webhook]\nsecret = \"whsec_" + std::string(43, 'A') + "=\"\n", "t.toml");
  ASSERT_TRUE(longer.ok()) << longer.error().detail;
}

TEST(Config, WithoutAPaymentsSectionNothingIsConfigured) {
  for (const char* text : {"", "[payments]\n", "[payments.stripe]\n[payments.webhook]\n"}) {
    auto parsed = parse_config(text, "t.toml");
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.error().detail;
    const PaymentsConfig& p = parsed->payments;
    EXPECT_TRUE(p.stripe.signing_secrets.empty()) << text;
    EXPECT_EQ(p.stripe.tolerance_ms, 300000) << text;
    EXPECT_EQ(p.stripe.refund_shortfall, RefundShortfall::debt) << text;
    EXPECT_TRUE(p.stripe.packs.empty()) << text;
    EXPECT_FALSE(p.webhook.secret.has_value()) << text;
    EXPECT_EQ(p.webhook.tolerance_ms, 300000) << text;
  }
}

// Made otherwise than by the file (by a caller, or the environment), the payments are checked too.
TEST(Config, ValidateConfigChecksThePayments) {
  ServerConfig c;
  ASSERT_TRUE(validate_config(c).ok());
  auto refused = [](const ServerConfig& config, const std::string& name) {
    const Status s = validate_config(config);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_NE(s.error().detail.find(name), std::string::npos) << s.error().detail;
  };
  ServerConfig bad = c;
  bad.payments.stripe.tolerance_ms = 0;
  refused(bad, "payments.stripe.tolerance_ms");
  bad = c;
  bad.payments.webhook.tolerance_ms = limits::kPaymentSignatureToleranceMsMax + 1;
  refused(bad, "payments.webhook.tolerance_ms");
  bad = c;
  bad.payments.stripe.packs = {{"small", 0}};
  refused(bad, "payments.stripe.packs.small");
  bad = c;
  bad.payments.stripe.packs = {{"a b", 1}};
  refused(bad, "payments.stripe.packs.a b");
  bad = c;
  bad.payments.stripe.signing_secrets = {"whsec_a", "whsec_a"};
  refused(bad, "payments.stripe.signing_secrets: secret 2 is the same as secret 1");
  bad = c;
  bad.payments.webhook.secret = "whsec_short";
  refused(bad, "payments.webhook.secret");
}

struct InvalidConfig {
  std::string name;
  std::string text;
  int line;                        // the line the message must name
  std::vector<std::string> names;  // what the message must mention (the key)
};

void PrintTo(const InvalidConfig& c, std::ostream* out) { *out << c.name; }

// [payments.stripe] with 17 signing secrets, one a line from line 3: the 17th on line 19.
std::string too_many_secrets() {
  std::string text = "[payments.stripe]\nsigning_secrets = [\n";
  for (int i = 1; i <= 17; ++i) text += "\"whsec_" + std::to_string(i) + "\",\n";
  return text + "]\n";
}

std::vector<InvalidConfig> invalid_configs() {
  return {
      {"UnknownTopLevelKey", "listen = \"127.0.0.1:8080\"\nhold_ttl = 5\n", 2,
       {"unknown key hold_ttl (did you mean hold_ttl_ms?)"}},
      {"UnknownTopLevelKeyWithNothingClose", "colour = 5\n", 1, {"unknown key colour"}},
      // An unknown key is reported before another key's bad value and before a required key it
      // leaves missing: it is most likely the misspelling of that key.
      {"MisspelledKeyBeforeAnotherKeysWrongType", "listen = 8080\nreaper_intervall_ms = 100\n", 2,
       {"unknown key reaper_intervall_ms (did you mean reaper_interval_ms?)"}},
      {"MisspelledProviderUrlInsteadOfUrlIsRequired", "[providers.p]\nurll = \"http://x/\"\n", 2,
       {"unknown key providers.p.urll (did you mean url?)"}},
      {"MisspelledRateLimitKey", "[ratelimits.login]\nlimit = 5\nperiod = 1000\n", 3,
       {"unknown key ratelimits.login.period (did you mean period_ms?)"}},
      {"MisspelledTable", "[provider.p]\nurl = \"http://x/\"\n", 1, {"unknown key provider (did you mean providers?)"}},
      {"UnknownProviderKey",
       "[providers.p]\nurl = \"http://x/\"\ntimeout_ms = 60000\nexpected_duration_ms = 1000\nretries = 3\n", 5,
       {"retries"}},
      {"UnknownRateLimitKey", "[ratelimits.login]\nlimit = 5\nperiod_ms = 1000\nburst = 2\n", 4, {"burst"}},
      {"WrongTypeString", "hold_ttl_ms = \"300000\"\n", 1, {"hold_ttl_ms"}},
      {"WrongTypeFloat", "\nreaper_interval_ms = 1.5\n", 2, {"reaper_interval_ms"}},
      {"WrongTypeListen", "listen = 8080\n", 1, {"listen"}},
      {"WrongTypeLateCommit", "late_commit = true\n", 1, {"late_commit"}},
      {"OutOfRangeReaperInterval", "reaper_interval_ms = 5\n", 1, {"reaper_interval_ms"}},
      {"OutOfRangeHoldTtl", "hold_ttl_ms = 0\n", 1, {"hold_ttl_ms"}},
      {"OutOfRangeHoldTtlMax", "hold_ttl_max_ms = 9999999999999\n", 1, {"hold_ttl_max_ms"}},
      {"OutOfRangeRateLimit", "[ratelimits.login]\nlimit = 0\nperiod_ms = 1000\n", 2, {"limit"}},
      {"HoldTtlAboveItsMaximum", "hold_ttl_max_ms = 1000\nhold_ttl_ms = 2000\n", 2, {"hold_ttl_ms"}},
      {"LateCommitOther", "# policy\nlate_commit = \"refund\"\n", 2, {"late_commit"}},
      {"ProviderTimeoutBelowThreeTimesTheExpectedDuration",
       "[providers.imagegen]\nurl = \"http://127.0.0.1:9000/generate\"\ntimeout_ms = 59999\nexpected_duration_ms = 20000\n", 3,
       {"timeout_ms", "imagegen"}},
      {"HoldTtlBelowThreeTimesTheExpectedDuration",
       "hold_ttl_ms = 59999\n[providers.imagegen]\nurl = \"http://127.0.0.1:9000/generate\"\ntimeout_ms = 600000\n"
       "expected_duration_ms = 20000\n",
       5, {"hold_ttl_ms", "expected_duration_ms"}},
      {"ProviderWithoutUrl", "[providers.imagegen]\ntimeout_ms = 60000\n", 1, {"url"}},
      {"RateLimitStoreOther", "[ratelimits.login]\nlimit = 5\nperiod_ms = 1000\nstore = \"redis\"\n", 4, {"store"}},
      {"KeysMaxOfASharedPolicy", "[ratelimits.login]\nlimit = 5\nperiod_ms = 1000\nkeys_max = 10\n", 4,
       {"keys_max", "shared policy"}},
      {"KeysMaxZero", "[ratelimits.cheap]\nlimit = 5\nperiod_ms = 1000\nstore = \"local\"\nkeys_max = 0\n", 5, {"keys_max"}},
      {"ListenWithoutPort", "\n\nlisten = \"127.0.0.1\"\n", 3, {"listen"}},
      {"ListenPortOutOfRange", "listen = \"127.0.0.1:65536\"\n", 1, {"listen"}},
      {"ListenPortNotANumber", "listen = \"127.0.0.1:http\"\n", 1, {"listen"}},
      {"ListenHostNotAnAddress", "listen = \"not an address:8080\"\n", 1, {"listen"}},
      {"DatabaseOfAnUnknownKind", "\ndatabase = \"mysql://db\"\n", 2, {"database"}},
      {"AdminKeyTooShort", "admin_key = \"short\"\n", 1, {"admin_key"}},
      {"MetricsKeyTooShort", "\nmetrics_key = \"short\"\n", 2, {"metrics_key"}},
      {"DatabasePoolSizeZero", "database_pool_size = 0\n", 1, {"database_pool_size"}},
      {"DatabasePoolSizeHuge", "\ndatabase_pool_size = 100000\n", 2, {"database_pool_size"}},
      {"DatabaseTimeoutTooShort", "database_timeout_ms = 10\n", 1, {"database_timeout_ms"}},
      {"DatabaseTimeoutNotANumber", "database_timeout_ms = \"5s\"\n", 1, {"database_timeout_ms"}},
      {"JobsInFlightZero", "\njobs_in_flight_max = 0\n", 2, {"jobs_in_flight_max"}},
      {"JobsInFlightHuge", "jobs_in_flight_max = 1000000\n", 1, {"jobs_in_flight_max"}},
      {"TrustedProxyNotAnAddress", "trusted_proxies = [\"10.0.0.0/8\",\n  \"balancer.local\"]\n", 2,
       {"trusted_proxies", "'balancer.local' is not a CIDR"}},
      {"TrustedProxyPrefixTooLong", "\ntrusted_proxies = [\"10.0.0.0/33\"]\n", 2,
       {"trusted_proxies", "'10.0.0.0/33'", "0 to 32"}},
      {"TrustedProxyIpv6PrefixTooLong", "trusted_proxies = [\"fd00::/129\"]\n", 1, {"trusted_proxies", "0 to 128"}},
      {"TrustedProxyHostBitsSet", "trusted_proxies = [\n\"::1\",\n\"10.1.2.3/8\"]\n", 3,
       {"trusted_proxies", "write 10.0.0.0/8"}},
      {"TrustedProxiesNotAList", "trusted_proxies = \"10.0.0.0/8\"\n", 1, {"trusted_proxies must be a list of strings"}},
      {"TrustedProxiesNotStrings", "trusted_proxies = [10]\n", 1, {"trusted_proxies must be a list of strings"}},
      // [payments]: every key known, every value checked; a message names the key, never a secret.
      {"UnknownPaymentsTable", "[payments.strip]\n", 1, {"unknown key payments.strip (did you mean stripe?)"}},
      {"MisspelledPaymentsTable", "[payment.stripe]\n", 1, {"unknown key payment (did you mean payments?)"}},
      {"PaymentsNotATable", "payments = 5\n", 1, {"payments must be a table"}},
      {"PaymentsStripeNotATable", "[payments]\nstripe = \"whsec_x\"\n", 2, {"payments.stripe must be a table"}},
      {"UnknownStripeKey", "[payments.stripe]\ntolerance_ms = 1000\nsigning_secret = [\"whsec_a\"]\n", 3,
       {"unknown key payments.stripe.signing_secret (did you mean signing_secrets?)"}},
      {"UnknownWebhookKey", "[payments.webhook]\nsecrets = \"whsec_a\"\n", 2,
       {"unknown key payments.webhook.secrets (did you mean secret?)"}},
      {"SigningSecretsNotAList", "[payments.stripe]\nsigning_secrets = \"whsec_a\"\n", 2,
       {"payments.stripe.signing_secrets must be a list of strings"}},
      {"SigningSecretsNotStrings", "[payments.stripe]\nsigning_secrets = [\"whsec_a\", 5]\n", 2,
       {"payments.stripe.signing_secrets must be a list of strings"}},
      {"SigningSecretEmpty", "[payments.stripe]\nsigning_secrets = [\"whsec_a\",\n  \"\"]\n", 3,
       {"payments.stripe.signing_secrets: secret 2 is empty"}},
      {"SigningSecretWithASpace", "[payments.stripe]\nsigning_secrets = [\"whsec_a b\"]\n", 2,
       {"payments.stripe.signing_secrets: secret 1 must be printable ASCII without spaces or commas"}},
      {"SigningSecretWithAComma", "[payments.stripe]\nsigning_secrets = [\"whsec_a,b\"]\n", 2,
       {"secret 1 must be printable ASCII without spaces or commas"}},
      {"SigningSecretWithATab", "[payments.stripe]\nsigning_secrets = [\"whsec_a\\tb\"]\n", 2,
       {"secret 1 must be printable ASCII"}},
      {"SigningSecretNotAscii", "[payments.stripe]\nsigning_secrets = [\"whsec_\xc3\xa9t\xc3\xa9\"]\n", 2,
       {"secret 1 must be printable ASCII"}},
      {"SigningSecretTwice", "[payments.stripe]\nsigning_secrets = [\n\"whsec_a\",\n\"whsec_b\",\n\"whsec_a\"]\n", 5,
       {"payments.stripe.signing_secrets: secret 3 is the same as secret 1"}},
      {"TooManySigningSecrets", too_many_secrets(), 19,
       {"payments.stripe.signing_secrets may list at most 16 secrets"}},
      {"StripeToleranceZero", "[payments.stripe]\ntolerance_ms = 0\n", 2,
       {"payments.stripe.tolerance_ms must be from 1 to 86400000"}},
      {"StripeToleranceTooLong", "[payments.stripe]\n\ntolerance_ms = 86400001\n", 3, {"payments.stripe.tolerance_ms"}},
      {"StripeToleranceNotANumber", "[payments.stripe]\ntolerance_ms = \"5m\"\n", 2,
       {"payments.stripe.tolerance_ms must be an integer"}},
      {"RefundShortfallMisspelled", "[payments.stripe]\nrefund_shortfall = \"dept\"\n", 2,
       {"payments.stripe.refund_shortfall must be debt or forgive (did you mean debt?)"}},
      {"RefundShortfallOther", "[payments.stripe]\nrefund_shortfall = \"refuse\"\n", 2,
       {"payments.stripe.refund_shortfall must be debt or forgive"}},
      {"RefundShortfallNotAString", "[payments.stripe]\nrefund_shortfall = true\n", 2,
       {"payments.stripe.refund_shortfall must be a string"}},
      {"PacksNotATable", "[payments.stripe]\npacks = 10\n", 2, {"payments.stripe.packs must be a table"}},
      {"PackNameWithASpace", "[payments.stripe.packs]\nsmall = 10\n\"big one\" = 100\n", 3,
       {"payments.stripe.packs.big one: a pack name is 1-128 characters of [A-Za-z0-9._:@-]"}},
      {"PackNameDotDot", "[payments.stripe.packs]\n\"..\" = 100\n", 2, {"payments.stripe.packs..."}},
      {"PackNameEmpty", "[payments.stripe.packs]\n\"\" = 100\n", 2, {"a pack name is 1-128 characters"}},
      {"PackNameTooLong", "[payments.stripe.packs]\n" + std::string(129, 'p') + " = 100\n", 2,
       {"a pack name is 1-128 characters"}},
      {"PackOfNoCredits", "[payments.stripe.packs]\nsmall = 0\n", 2,
       {"payments.stripe.packs.small must be from 1 to 9007199254740991, got 0"}},
      {"PackOfNegativeCredits", "[payments.stripe.packs]\nsmall = -5\n", 2,
       {"payments.stripe.packs.small must be from 1"}},
      {"PackOfTooManyCredits", "[payments.stripe.packs]\nsmall = 9007199254740992\n", 2,
       {"payments.stripe.packs.small must be from 1 to 9007199254740991"}},
      {"PackCreditsAsText", "[payments.stripe.packs]\nsmall = \"10\"\n", 2,
       {"payments.stripe.packs.small must be an integer"}},
      {"PackCreditsAsFloat", "[payments.stripe.packs]\nsmall = 10.5\n", 2,
       {"payments.stripe.packs.small must be an integer"}},
      {"PackNameWithAnUnquotedDot", "[payments.stripe.packs]\npro.monthly = 10\n", 2,
       {"payments.stripe.packs.pro must be an integer", "quote a name that holds a '.'"}},
      {"WebhookSecretNotBase64", "[payments.webhook]\nsecret = \"whsec_not-base64!\"\n", 2,
       {"payments.webhook.secret must be whsec_ followed by base64: it does not decode"}},
      {"WebhookSecretEmpty", "[payments.webhook]\n\nsecret = \"\"\n", 3, {"payments.webhook.secret must be whsec_"}},
      {"WebhookSecretOnlyThePrefix", "[payments.webhook]\nsecret = \"whsec_\"\n", 2,
       {"payments.webhook.secret must be whsec_"}},
      {"WebhookSecretOf16Bytes", "[payments.webhook]\nsecret = \"whsec_AAAAAAAAAAAAAAAAAAAAAA==\"\n", 2,
       {"payments.webhook.secret must decode to at least 24 bytes"}},
      {"WebhookSecretOf23Bytes", "[payments.webhook]\nsecret = \"whsec_" + std::string(31, 'A') + "=\"\n", 2,
       {"payments.webhook.secret must decode to at least 24 bytes"}},
      {"WebhookSecretNotAString", "[payments.webhook]\nsecret = 5\n", 2, {"payments.webhook.secret must be a string"}},
      {"WebhookToleranceZero", "[payments.webhook]\ntolerance_ms = 0\n", 2,
       {"payments.webhook.tolerance_ms must be from 1"}},
      // TOML syntax: the line, a hint in plain words, then the parser's own message.
      {"TomlSyntaxError", "listen = \n", 1,
       {"bad.toml:1: listen: the value is missing after '=' (TOML parser: Error while parsing key-value pair: "
        "expected value, saw '\\n')"}},
      {"TomlMissingClosingQuote", "hold_ttl_ms = 5\nlisten = \"127.0.0.1:8080\n", 2,
       {"listen: a string is not closed: is the closing quote (\") missing?"}},
      {"TomlMissingEquals", "\nlisten \"127.0.0.1:8080\"\n", 2,
       {"a key must be followed by '=' (key = value); is the '=' missing, or is there a space in the key?"}},
      {"TomlSpaceInKey", "hold ttl = 5\n", 1, {"is there a space in the key?"}},
      {"TomlUnquotedText", "late_commit = charge\n", 1, {"late_commit: text must be in double quotes (key = \"text\")"}},
      {"TomlUnquotedAddress", "listen = 127.0.0.1:8080\n", 1, {"listen: text must be in double quotes"}},
      {"TomlKeyTwice", "hold_ttl_ms = 300000\nhold_ttl_ms = 5\n", 2,
       {"hold_ttl_ms: this key is already set earlier in the file (each key once)"}},
      {"TomlUnclosedTableHeader", "[providers.imagegen\nurl = \"x\"\n", 1,
       {"a table header is not closed: is the ']' missing?"}},
      {"TomlBackslashInString", "database = \"sqlite:C:\\data\\t.db\"\n", 1,
       {"database: a backslash in a \"string\" starts an escape"}},
      {"TomlTwoValuesOnALine", "listen = \"a\" \"b\"\n", 1, {"listen: only a # comment may follow a value on its line"}},
  };
}

class ConfigInvalid : public ::testing::TestWithParam<InvalidConfig> {};

TEST_P(ConfigInvalid, FailsWithAMessageNamingTheKeyAndTheLine) {
  const InvalidConfig& c = GetParam();
  auto parsed = parse_config(c.text, "bad.toml");
  ASSERT_FALSE(parsed.ok()) << "accepted:\n" << c.text;
  const std::string& message = parsed.error().detail;
  EXPECT_EQ(parsed.error().code, Code::invalid_request);
  EXPECT_EQ(message.rfind("bad.toml:" + std::to_string(c.line) + ": ", 0), 0u)
      << "the message does not start with bad.toml:" << c.line << ": — it is: " << message;
  for (const std::string& name : c.names) {
    EXPECT_NE(message.find(name), std::string::npos) << "the message does not name " << name << ": " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ConfigInvalid, ::testing::ValuesIn(invalid_configs()),
                         [](const ::testing::TestParamInfo<InvalidConfig>& info) { return info.param.name; });

// --- sources in order: file, environment, flags ---------------------------------------------------

// The environment the tests inject (EnvLookup is a plain function pointer).
std::map<std::string, std::string>& fake_env() {
  static std::map<std::string, std::string> env;
  return env;
}
std::optional<std::string> lookup(const char* name) {
  auto it = fake_env().find(name);
  if (it == fake_env().end()) return std::nullopt;
  return it->second;
}

class ConfigSources : public ::testing::Test {
 protected:
  void SetUp() override { fake_env().clear(); }
  void TearDown() override { fake_env().clear(); }

  std::string write(const std::string& text) {
    const std::string path = dir_.file("tollgate.toml");
    std::ofstream(path) << text;
    return path;
  }

  testing::TempDir dir_;
};

TEST_F(ConfigSources, TheFileIsReadAndItsPathNamesItsErrors) {
  ConfigOverrides o;
  o.config_file = write("listen = \"127.0.0.1:9001\"\nhold_ttl_ms = 120000\nlate_commit = \"forgive\"\n");
  auto c = load_config(o, &lookup);
  ASSERT_TRUE(c.ok()) << c.error().detail;
  EXPECT_EQ(c->listen, "127.0.0.1:9001");
  EXPECT_EQ(c->hold_ttl_ms, 120000);
  EXPECT_EQ(c->late_commit, LateCommitPolicy::forgive);

  o.config_file = write("listen = \"127.0.0.1:9001\"\n\nbogus = 1\n");
  auto bad = load_config(o, &lookup);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().detail.rfind(*o.config_file + ":3: ", 0), 0u) << bad.error().detail;
  EXPECT_NE(bad.error().detail.find("bogus"), std::string::npos) << bad.error().detail;
}

TEST_F(ConfigSources, AMetricsKeyComesFromTheFileOrTheEnvironmentAndIsUnsetByDefault) {
  ConfigOverrides o;
  auto none = load_config(o, &lookup);
  ASSERT_TRUE(none.ok()) << none.error().detail;
  EXPECT_FALSE(none->metrics_key.has_value());
  o.config_file = write("metrics_key = \"file-metrics-key-0123\"\n");
  auto file = load_config(o, &lookup);
  ASSERT_TRUE(file.ok()) << file.error().detail;
  EXPECT_EQ(file->metrics_key, "file-metrics-key-0123");
  fake_env() = {{"TOLLGATE_METRICS_KEY", "env-metrics-key-0123"}};
  auto env = load_config(o, &lookup);
  ASSERT_TRUE(env.ok()) << env.error().detail;
  EXPECT_EQ(env->metrics_key, "env-metrics-key-0123");
  fake_env() = {{"TOLLGATE_METRICS_KEY", "short"}};
  auto short_key = load_config(o, &lookup);
  ASSERT_FALSE(short_key.ok());
  EXPECT_NE(short_key.error().detail.find("metrics_key must be at least 16 characters"), std::string::npos)
      << short_key.error().detail;
}

TEST_F(ConfigSources, AMissingFileIsAnErrorNamingIt) {
  ConfigOverrides o;
  o.config_file = dir_.file("nope.toml");
  auto c = load_config(o, &lookup);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().detail, "cannot read the configuration file " + *o.config_file + ": no such file or directory");
}

TEST_F(ConfigSources, AnUnreadableFileSaysWhyInTheSystemsWords) {
  ConfigOverrides o;
  o.config_file = dir_.path().string();  // a folder
  auto folder = load_config(o, &lookup);
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.error().detail, "cannot read the configuration file " + *o.config_file + ": is a directory");

  o.config_file = write("listen = \"127.0.0.1:9001\"\n");
  ASSERT_EQ(::chmod(o.config_file->c_str(), 0), 0);
  if (::geteuid() != 0) {  // root reads it anyway
    auto denied = load_config(o, &lookup);
    ASSERT_FALSE(denied.ok());
    EXPECT_EQ(denied.error().detail, "cannot read the configuration file " + *o.config_file + ": permission denied");
  }
  o.config_file = dir_.file("missing-folder/tollgate.toml");
  auto missing = load_config(o, &lookup);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().detail, "cannot read the configuration file " + *o.config_file + ": no such file or directory");
}

// A syntax error on the admin key's line names the key, never the line's text: it holds a secret.
TEST(ConfigSecret, ASyntaxErrorOnTheAdminKeyLineDoesNotRepeatTheKey) {
  auto parsed = parse_config("admin_key = \"secret-0123456789abcdef\n", "bad.toml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().detail.rfind("bad.toml:1: admin_key: a string is not closed", 0), 0u) << parsed.error().detail;
  EXPECT_EQ(parsed.error().detail.find("secret-0123456789abcdef"), std::string::npos) << parsed.error().detail;
}

// The payments' secrets are never repeated in a message, whatever is wrong with them or around them.
TEST(ConfigSecret, APaymentSecretIsNeverRepeatedInAMessage) {
  const std::string secret = "whsec_TOPSECRET";
  for (const std::string& text : std::vector<std::string>{
           "[payments.stripe]\nsigning_secrets = [\"" + secret + " x\"]\n",
           "[payments.stripe]\nsigning_secrets = [\"" + secret + ",x\"]\n",
           "[payments.stripe]\nsigning_secrets = [\"" + secret + "\", \"" + secret + "\"]\n",
           "[payments.stripe]\nsigning_secrets = \"" + secret + "\"\n",
           "[payments.stripe]\nsigning_secret = [\"" + secret + "\"]\n",
           "[payments.webhook]\nsecret = \"" + secret + "!\"\n",
           "[payments.webhook]\nsecret = \"" + secret + "TOPSECRETTOPSEC\"\n",  // decodes, to 18 bytes
           "[payments.webhook]\nsecret = [\"" + secret + "\"]\n",
           "[payments.webhook]\nsecrets = \"" + secret + "\"\n",
       }) {
    auto parsed = parse_config(text, "bad.toml");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.error().detail.find("TOPSECRET"), std::string::npos) << parsed.error().detail;
    EXPECT_EQ(parsed.error().detail.rfind("bad.toml:2: ", 0), 0u) << parsed.error().detail;
  }
}

// --print-config's text: the payments' secrets masked, the rest printed so that it parses back.
TEST(ConfigSecret, ThePrintedConfigurationMasksThePaymentSecrets) {
  auto parsed = parse_config(kPaymentsConfig, "tollgate.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  const std::string printed = effective_config_toml(*parsed);
  for (const char* secret : {"whsec_old", "whsec_new", kWebhookSecret}) {
    EXPECT_EQ(printed.find(secret), std::string::npos) << secret << " in\n" << printed;
  }
  EXPECT_NE(printed.find("[payments.stripe]\nsigning_secrets = \"***\"\n"), std::string::npos) << printed;
  EXPECT_NE(printed.find("[payments.webhook]\nsecret = \"***\"\n"), std::string::npos) << printed;
  std::string unmasked;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("= \"***\"") == std::string::npos) unmasked += line + "\n";
  }
  auto back = parse_config(unmasked, "printed");
  ASSERT_TRUE(back.ok()) << back.error().detail << "\n" << printed;
  EXPECT_EQ(back->payments.stripe.tolerance_ms, 120000);
  EXPECT_EQ(back->payments.stripe.refund_shortfall, RefundShortfall::forgive);
  EXPECT_EQ(back->payments.stripe.packs, parsed->payments.stripe.packs);
  EXPECT_EQ(back->payments.webhook.tolerance_ms, 60000);
  // Nothing configured: an empty list and an unset secret say so.
  const std::string none = effective_config_toml(ServerConfig{});
  EXPECT_NE(none.find("[payments.stripe]\nsigning_secrets = []\n"), std::string::npos) << none;
  EXPECT_NE(none.find("[payments.webhook]\n# secret is not set\n"), std::string::npos) << none;
}

TEST_F(ConfigSources, EnvironmentOverridesTheFileAndFlagsOverrideBoth) {
  ConfigOverrides o;
  o.config_file = write(
      "listen = \"127.0.0.1:1111\"\ndatabase = \"sqlite:file.db\"\nadmin_key = \"file-admin-key-0123456789\"\n"
      "hold_ttl_ms = 100000\nhold_ttl_max_ms = 200000\nreaper_interval_ms = 500\nlate_commit = \"charge\"\n");
  auto file_only = load_config(o, &lookup);
  ASSERT_TRUE(file_only.ok()) << file_only.error().detail;
  EXPECT_EQ(file_only->listen, "127.0.0.1:1111");
  EXPECT_EQ(*file_only->admin_key, "file-admin-key-0123456789");

  fake_env() = {{"TOLLGATE_LISTEN", "127.0.0.1:2222"},
                {"TOLLGATE_DATABASE", "sqlite:env.db"},
                {"TOLLGATE_ADMIN_KEY", "env-admin-key-0123456789"},
                {"TOLLGATE_HOLD_TTL_MS", "150000"},
                {"TOLLGATE_HOLD_TTL_MAX_MS", "300000"},
                {"TOLLGATE_REAPER_INTERVAL_MS", "250"},
                {"TOLLGATE_LATE_COMMIT", "reject"}};
  auto with_env = load_config(o, &lookup);
  ASSERT_TRUE(with_env.ok()) << with_env.error().detail;
  EXPECT_EQ(with_env->listen, "127.0.0.1:2222");
  EXPECT_EQ(with_env->database, "sqlite:env.db");
  EXPECT_EQ(*with_env->admin_key, "env-admin-key-0123456789");
  EXPECT_EQ(with_env->hold_ttl_ms, 150000);
  EXPECT_EQ(with_env->hold_ttl_max_ms, 300000);
  EXPECT_EQ(with_env->reaper_interval_ms, 250);
  EXPECT_EQ(with_env->late_commit, LateCommitPolicy::reject);

  o.listen = "127.0.0.1:3333";
  o.database = "sqlite:flag.db";
  auto with_flags = load_config(o, &lookup);
  ASSERT_TRUE(with_flags.ok()) << with_flags.error().detail;
  EXPECT_EQ(with_flags->listen, "127.0.0.1:3333");
  EXPECT_EQ(with_flags->database, "sqlite:flag.db");
  EXPECT_EQ(with_flags->hold_ttl_ms, 150000) << "a flag changes only what it names";
}

TEST_F(ConfigSources, FlagsOverrideTheDefaultsWithoutAFile) {
  ConfigOverrides o;
  o.listen = "127.0.0.1:0";
  o.database = "sqlite:x.db";
  auto c = load_config(o, &lookup);
  ASSERT_TRUE(c.ok()) << c.error().detail;
  EXPECT_EQ(c->listen, "127.0.0.1:0");
  EXPECT_EQ(c->database, "sqlite:x.db");
  EXPECT_EQ(c->hold_ttl_ms, 300000);
}

TEST_F(ConfigSources, BadEnvironmentValuesAreErrorsNamingTheVariable) {
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"TOLLGATE_HOLD_TTL_MS", "five"},
           {"TOLLGATE_HOLD_TTL_MS", "0"},
           {"TOLLGATE_REAPER_INTERVAL_MS", "1"},
           {"TOLLGATE_LATE_COMMIT", "sometimes"},
           {"TOLLGATE_LISTEN", "nowhere"},
           {"TOLLGATE_ADMIN_KEY", "short"}}) {
    fake_env() = {{name, value}};
    auto c = load_config(ConfigOverrides{}, &lookup);
    ASSERT_FALSE(c.ok()) << name << "=" << value << " was accepted";
    std::string lower = name.substr(9);
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    EXPECT_TRUE(c.error().detail.find(name) != std::string::npos || c.error().detail.find(lower) != std::string::npos)
        << name << "=" << value << ": " << c.error().detail;
  }
}

TEST_F(ConfigSources, ABadListenFlagIsAnError) {
  ConfigOverrides o;
  o.listen = "127.0.0.1";
  auto c = load_config(o, &lookup);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().detail.find("listen"), std::string::npos) << c.error().detail;
}

TEST(Config, TrustedProxiesAreCidrsOfBothFamilies) {
  auto parsed = parse_config("trusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\", \"fd00::/8\", \"::1\"]\n", "t.toml");
  ASSERT_TRUE(parsed.ok()) << parsed.error().detail;
  EXPECT_EQ(parsed->trusted_proxies, (std::vector<std::string>{"10.0.0.0/8", "192.0.2.7", "fd00::/8", "::1"}));
  auto none = parse_config("", "t.toml");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->trusted_proxies.empty()) << "the default trusts nobody";
}

TEST_F(ConfigSources, TrustedProxiesComeFromTheEnvironmentCommaSeparated) {
  fake_env() = {{"TOLLGATE_TRUSTED_PROXIES", " 10.0.0.0/8 ,fd00::/8,"}};
  auto c = load_config(ConfigOverrides{}, &lookup);
  ASSERT_TRUE(c.ok()) << c.error().detail;
  EXPECT_EQ(c->trusted_proxies, (std::vector<std::string>{"10.0.0.0/8", "fd00::/8"}));
  fake_env() = {{"TOLLGATE_TRUSTED_PROXIES", "10.0.0.0/8,10.0.0.0/40"}};
  auto bad = load_config(ConfigOverrides{}, &lookup);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().detail.find("trusted_proxies: '10.0.0.0/40'"), std::string::npos) << bad.error().detail;
}

// TOLLGATE_STRIPE_SIGNING_SECRETS (comma-separated) and TOLLGATE_PAYMENT_WEBHOOK_SECRET replace the
// file's; a bad one is named by its variable, its text never repeated.
TEST_F(ConfigSources, PaymentSecretsComeFromTheEnvironment) {
  ConfigOverrides o;
  o.config_file = write(std::string(kPaymentsConfig));
  auto file = load_config(o, &lookup);
  ASSERT_TRUE(file.ok()) << file.error().detail;
  EXPECT_EQ(file->payments.stripe.signing_secrets.size(), 2u);
  EXPECT_EQ(file->payments.webhook.secret, kWebhookSecret);

  const std::string env_secret = "whsec_" + std::string(40, 'B');  // 30 bytes
  fake_env() = {{"TOLLGATE_STRIPE_SIGNING_SECRETS", " whsec_env-1 ,whsec_env-2,"},
                {"TOLLGATE_PAYMENT_WEBHOOK_SECRET", env_secret}};
  auto with_env = load_config(o, &lookup);
  ASSERT_TRUE(with_env.ok()) << with_env.error().detail;
  EXPECT_EQ(with_env->payments.stripe.signing_secrets, (std::vector<std::string>{"whsec_env-1", "whsec_env-2"}));
  EXPECT_EQ(with_env->payments.webhook.secret, env_secret);
  EXPECT_EQ(with_env->payments.stripe.tolerance_ms, 120000) << "the file's other keys stay";
  EXPECT_EQ(with_env->payments.stripe.packs.size(), 3u);

  // Without a file too.
  auto no_file = load_config(ConfigOverrides{}, &lookup);
  ASSERT_TRUE(no_file.ok()) << no_file.error().detail;
  EXPECT_EQ(no_file->payments.stripe.signing_secrets, (std::vector<std::string>{"whsec_env-1", "whsec_env-2"}));
  EXPECT_EQ(no_file->payments.webhook.secret, env_secret);

  std::string seventeen;
  for (int i = 1; i <= 17; ++i) seventeen += "whsec_TOPSECRET-" + std::to_string(i) + ",";
  for (const auto& [name, value, why] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"TOLLGATE_STRIPE_SIGNING_SECRETS", "whsec_TOPSECRET,whsec_TOPSECRET", "secret 2 is the same as secret 1"},
           {"TOLLGATE_STRIPE_SIGNING_SECRETS", "whsec_TOPSECRET,whsec_\x01TOPSECRET",
            "secret 2 must be printable ASCII"},
           {"TOLLGATE_STRIPE_SIGNING_SECRETS", seventeen, "may list at most 16 secrets"},
           {"TOLLGATE_PAYMENT_WEBHOOK_SECRET", "whsec_TOPSECRET!", "does not decode"},
           {"TOLLGATE_PAYMENT_WEBHOOK_SECRET", "whsec_TOPSECRETTOPSECRETTOPSEC", "at least 24 bytes"},
           {"TOLLGATE_PAYMENT_WEBHOOK_SECRET", "", "does not decode"}}) {
    fake_env() = {{name, value}};
    auto bad = load_config(o, &lookup);
    ASSERT_FALSE(bad.ok()) << name << "=" << value << " was accepted";
    EXPECT_EQ(bad.error().detail.rfind(name, 0), 0u) << bad.error().detail;
    EXPECT_NE(bad.error().detail.find(why), std::string::npos) << bad.error().detail;
    EXPECT_EQ(bad.error().detail.find("TOPSECRET"), std::string::npos) << bad.error().detail;
  }
}

// Every top-level key has its TOLLGATE_<KEY> variable, read with the key's bounds.
TEST_F(ConfigSources, EveryTopLevelKeyHasItsEnvironmentVariable) {
  for (const auto& key : server_config_keys()) {
    EXPECT_EQ(config_env_name(key.name).rfind("TOLLGATE_", 0), 0u);
    if (const auto* member = std::get_if<std::int64_t ServerConfig::*>(&key.field)) {
      fake_env() = {{config_env_name(key.name), std::to_string(key.max)}};
      if (std::string_view(key.name) == "hold_ttl_ms") fake_env()["TOLLGATE_HOLD_TTL_MAX_MS"] = std::to_string(key.max);
      auto c = load_config(ConfigOverrides{}, &lookup);
      ASSERT_TRUE(c.ok()) << key.name << ": " << c.error().detail;
      EXPECT_EQ((*c).**member, key.max) << key.name;
      fake_env() = {{config_env_name(key.name), std::to_string(key.max + 1)}};
      auto over = load_config(ConfigOverrides{}, &lookup);
      ASSERT_FALSE(over.ok()) << key.name << " took " << key.max + 1;
      EXPECT_NE(over.error().detail.find(key.name), std::string::npos) << over.error().detail;
    }
  }
  fake_env() = {{"TOLLGATE_JOBS_IN_FLIGHT_MAX", "7"}, {"TOLLGATE_TLS_CERT", "/c.pem"}, {"TOLLGATE_TLS_KEY", "/k.pem"}};
  auto c = load_config(ConfigOverrides{}, &lookup);
  ASSERT_TRUE(c.ok()) << c.error().detail;
  EXPECT_EQ(c->jobs_in_flight_max, 7);
  EXPECT_EQ(c->tls_cert, "/c.pem");
}

// docs/reference/configuration.md is what `tollgate config reference` prints from the parser's
// table: a key added, a default or a bound changed without the page is a failure here.
TEST(ConfigReference, TheCommittedPageIsTheGeneratedOne) {
  const std::string page = read_file(std::string(TOLLGATE_SOURCE_DIR) + "/docs/reference/configuration.md");
  EXPECT_EQ(page, config_reference_markdown())
      << "docs/reference/configuration.md is stale: run build/tollgate config reference > docs/reference/configuration.md";
  // It names every key, its variable and its default.
  for (const auto& key : server_config_keys()) {
    EXPECT_NE(page.find("| `" + std::string(key.name) + "` |"), std::string::npos) << key.name;
    EXPECT_NE(page.find("`" + config_env_name(key.name) + "`"), std::string::npos) << key.name;
  }
  for (const auto& key : provider_config_keys()) EXPECT_NE(page.find("| `" + std::string(key.name) + "` |"), std::string::npos);
  for (const auto& key : ratelimit_config_keys()) EXPECT_NE(page.find("| `" + std::string(key.name) + "` |"), std::string::npos);
  for (const auto& key : stripe_payments_config_keys()) {
    EXPECT_NE(page.find("| `" + std::string(key.name) + "` |"), std::string::npos) << key.name;
  }
  for (const auto& key : payment_webhook_config_keys()) {
    EXPECT_NE(page.find("| `" + std::string(key.name) + "` |"), std::string::npos) << key.name;
  }
  for (const char* variable : {"TOLLGATE_STRIPE_SIGNING_SECRETS", "TOLLGATE_PAYMENT_WEBHOOK_SECRET"}) {
    EXPECT_NE(page.find(std::string("`") + variable + "`"), std::string::npos) << variable;
  }
  EXPECT_NE(page.find("| `hold_ttl_ms` | integer | `300000` | 1 – 2592000000 |"), std::string::npos) << page;
  const ProcessResult r = testing::run_tollgate({"config", "reference"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, page);
}

// --print-config: the effective configuration (file, environment, flags) as TOML that parses back
// to the same values, every secret masked.
TEST(ConfigServe, PrintConfigShowsTheEffectiveValuesWithSecretsMasked) {
  testing::TempDir dir;
  const std::string path = dir.file("t.toml");
  std::ofstream(path) << "hold_ttl_ms = 120000\nmetrics_key = \"metrics-secret-0123456789\"\n"
                         "trusted_proxies = [\"10.0.0.0/8\"]\n[providers.imagegen]\nurl = \"http://127.0.0.1:9/g\"\n"
                         "[ratelimits.login]\nlimit = 5\nperiod_ms = 60000\nstore = \"local\"\n";
  const ProcessResult r = testing::run_tollgate(
      {"serve", "--config", path, "--listen", "127.0.0.1:7777", "--print-config"},
      {{"TOLLGATE_ADMIN_KEY", "admin-secret-0123456789abcdef"},
       {"TOLLGATE_DATABASE", "postgresql://tollgate:db-password@127.0.0.1:5432/tollgate"},
       {"TOLLGATE_LATE_COMMIT", "forgive"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("listening"), std::string::npos) << "it served: " << r.err;
  for (const char* secret : {"admin-secret", "metrics-secret", "db-password"}) {
    EXPECT_EQ(r.out.find(secret), std::string::npos) << secret << " in\n" << r.out;
  }
  EXPECT_NE(r.out.find("admin_key = \"***\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("metrics_key = \"***\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("database = \"postgresql://tollgate:***@127.0.0.1:5432/tollgate\""), std::string::npos) << r.out;
  // Without its masked secrets it parses back to the same values.
  std::string unmasked;
  std::istringstream printed(r.out);
  for (std::string line; std::getline(printed, line);) {
    if (line.find("= \"***\"") == std::string::npos) unmasked += line + "\n";
  }
  auto back = parse_config(unmasked, "printed");
  ASSERT_TRUE(back.ok()) << back.error().detail << "\n" << r.out;
  EXPECT_EQ(back->listen, "127.0.0.1:7777");
  EXPECT_EQ(back->hold_ttl_ms, 120000);
  EXPECT_EQ(back->late_commit, LateCommitPolicy::forgive);
  EXPECT_EQ(back->trusted_proxies, (std::vector<std::string>{"10.0.0.0/8"}));
  EXPECT_EQ(back->providers.at("imagegen").url, "http://127.0.0.1:9/g");
  EXPECT_EQ(back->ratelimits.at("login").store, RateLimitStore::local);
}

TEST(ConfigServe, HelpListsEveryFlagWithTheWordsOfItsKey) {
  const ProcessResult r = testing::run_tollgate({"serve", "--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag : {"--config", "--print-config"}) EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  for (const auto& key : server_config_keys()) {
    if (!key.flag) continue;
    EXPECT_NE(r.out.find(key.flag), std::string::npos) << key.flag << "\n" << r.out;
    EXPECT_NE(r.out.find(config_env_name(key.name)), std::string::npos) << key.name << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("docs/reference/configuration.md"), std::string::npos) << r.out;
}

// --- the real binary --------------------------------------------------------------------------------

TEST(ConfigServe, AnInvalidConfigFileStopsStartUpWithTheMessageOnStderr) {
  testing::TempDir dir;
  const std::string path = dir.file("bad.toml");
  std::ofstream(path) << "listen = \"127.0.0.1:0\"\n\nhold_ttl_ms = \"soon\"\n";
  const ProcessResult r = testing::run_tollgate({"serve", "--config", path, "--database", "sqlite:" + dir.file("t.db")});
  EXPECT_FALSE(r.timed_out) << "it started anyway: " << r.err;
  EXPECT_NE(r.exit_code, 0) << "stderr: " << r.err;
  EXPECT_LT(r.exit_code, 128) << "it crashed: " << r.err;
  EXPECT_NE(r.err.find(path + ":3:"), std::string::npos) << "stderr: " << r.err;
  EXPECT_NE(r.err.find("hold_ttl_ms"), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(r.err.find("listening on"), std::string::npos) << "it started anyway: " << r.err;
}

TEST(ConfigServe, AMisspelledKeyAndAnUnreadableFileStopStartUpSayingWhatIsWrong) {
  testing::TempDir dir;
  const std::string path = dir.file("typo.toml");
  std::ofstream(path) << "listen = \"127.0.0.1:0\"\nhold_ttl_max = 5000\n";
  ProcessResult r = testing::run_tollgate({"serve", "--config", path, "--database", "sqlite:" + dir.file("t.db")});
  EXPECT_EQ(r.exit_code, 2) << "stderr: " << r.err;
  EXPECT_EQ(r.err, "tollgate: configuration: " + path + ":2: unknown key hold_ttl_max (did you mean hold_ttl_max_ms?)\n");

  r = testing::run_tollgate({"serve", "--config", dir.file("nope.toml"), "--database", "sqlite:" + dir.file("t.db")});
  EXPECT_EQ(r.exit_code, 2) << "stderr: " << r.err;
  EXPECT_EQ(r.err, "tollgate: configuration: cannot read the configuration file " + dir.file("nope.toml") +
                       ": no such file or directory\n");
}

TEST(ConfigServe, AProviderSlowerThanItsTimeoutStopsStartUp) {
  testing::TempDir dir;
  const std::string path = dir.file("slow.toml");
  std::ofstream(path) << "[providers.imagegen]\nurl = \"http://127.0.0.1:9/\"\ntimeout_ms = 1000\n"
                         "expected_duration_ms = 1000\n";
  const ProcessResult r =
      testing::run_tollgate({"serve", "--config", path, "--listen", "127.0.0.1:0", "--database", "sqlite:" + dir.file("t.db")},
                            {{"TOLLGATE_ADMIN_KEY", "0123456789abcdef0123"}});
  EXPECT_FALSE(r.timed_out) << "it started anyway: " << r.err;
  EXPECT_NE(r.exit_code, 0) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(path + ":3:"), std::string::npos) << "stderr: " << r.err;
  EXPECT_NE(r.err.find("timeout_ms"), std::string::npos) << "stderr: " << r.err;
}

TEST(ConfigServe, AValidConfigFileStartsTheServerWithItsSettings) {
  testing::TempDir dir;
  const std::string path = dir.file("good.toml");
  std::ofstream(path) << "listen = \"127.0.0.1:1\"\nadmin_key = \"file-admin-key-0123456789\"\nhold_ttl_ms = 1000\n"
                         "hold_ttl_max_ms = 2000\n";
  // --listen and --database (given by ServerProcess) win over the file; the admin key comes from
  // the file (no TOLLGATE_ADMIN_KEY).
  ServerOptions options;
  options.admin_key = "";
  options.extra_args = {"--config", path};
  ServerProcess server(options);
  HttpClient admin(server.port(), "file-admin-key-0123456789");
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "cfg"}}).status, 201u);
  ASSERT_EQ(admin.post("/v1/accounts/cfg/credits", json::object{{"amount", 5}, {"reference", "r"}}).status, 201u);
  // hold_ttl_max_ms = 2000 bounds a reservation's ttl_ms.
  EXPECT_EQ(admin.post("/v1/holds", json::object{{"account_id", "cfg"}, {"amount", 1}, {"request_id", "q1"}, {"ttl_ms", 2001}})
                .status,
            400u);
  const HttpResponse hold = admin.post("/v1/holds", json::object{{"account_id", "cfg"}, {"amount", 1}, {"request_id", "q2"}});
  ASSERT_EQ(hold.status, 201u) << hold;
  // hold_ttl_ms = 1000 is the default TTL.
  EXPECT_EQ(jstr(hold.object(), "expires_at") > jstr(hold.object(), "created_at"), true);
  EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

// One process owns a SQLite file: a second `tollgate serve` on it refuses to start, clearly, and the
// first one keeps serving (design.md: for many instances, PostgreSQL).
TEST(ConfigServe, ASecondServerOnTheSameSqliteFileRefusesToStart) {
  ServerProcess first{ServerOptions{}};
  HttpClient admin(first.port(), first.admin_key());
  ASSERT_EQ(admin.post("/v1/accounts", json::object{{"account_id", "owner"}}).status, 201u);
  const ProcessResult second =
      testing::run_tollgate({"serve", "--listen", "127.0.0.1:0", "--database", first.database()},
                            {{"TOLLGATE_ADMIN_KEY", first.admin_key()}}, std::chrono::seconds(20));
  EXPECT_FALSE(second.timed_out) << "it started anyway: " << second.err;
  EXPECT_EQ(second.exit_code, 1) << "stderr: " << second.err;
  EXPECT_NE(second.err.find("in use by another tollgate process"), std::string::npos) << second.err;
  EXPECT_EQ(second.err.find("listening on"), std::string::npos) << "it started anyway: " << second.err;
  EXPECT_EQ(admin.get("/v1/accounts/owner").status, 200u);
  // Once the first is gone, the file is free again.
  EXPECT_EQ(first.stop(SIGTERM), 0) << first.log();
  first.restart();
  EXPECT_EQ(HttpClient(first.port(), first.admin_key()).get("/v1/accounts/owner").status, 200u);
}

}  // namespace
}  // namespace tollgate::httptest
