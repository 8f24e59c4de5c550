// tollgate config: the one table of configuration keys.
//
// Every key of the file — its name, type, default, bounds, environment variable, command-line flag
// and one-line description — is a row here, and everything else comes from these rows: the parser
// reads the keys the rows name (config.cc), TOLLGATE_<KEY> overrides a top-level key (a nested
// table's row may name a variable of its own, `env`), `serve --help` describes the flags with the
// rows' words, `serve --print-config` prints the effective values, and `tollgate config reference`
// writes docs/reference/configuration.md (a test fails when the committed page is not what the rows
// give).
//
// Thread safety: the tables are immutable after their first use (function-local statics).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.h"

namespace tollgate {

// Where a row's value lives in its table's struct, and so its type.
template <typename C>
using ConfigField =
    std::variant<std::string C::*, std::optional<std::string> C::*, std::int64_t C::*, std::vector<std::string> C::*,
                 LateCommitPolicy C::*, RateLimitStore C::*, RefundShortfall C::*>;

template <typename C>
struct ConfigKey {
  const char* name;
  ConfigField<C> field;
  std::int64_t min = 0;  // integers: the bounds, inclusive
  std::int64_t max = 0;
  const char* description = "";
  bool required = false;
  bool secret = false;                  // printed as "***" by --print-config
  const char* flag = nullptr;           // `serve` flag, e.g. "--listen"
  const char* default_text = nullptr;   // the default in words, where the struct's value is a sentinel
  // A nested table's row: the environment variable that replaces its value (a top-level key's is
  // always TOLLGATE_<NAME>, config_env_name); nullptr: none.
  const char* env = nullptr;
};

// The top-level keys (each also TOLLGATE_<NAME>), a [providers.NAME] table's, a [ratelimits.NAME]
// table's.
const std::vector<ConfigKey<ServerConfig>>& server_config_keys();
const std::vector<ConfigKey<ProviderConfig>>& provider_config_keys();
const std::vector<ConfigKey<RateLimitConfig>>& ratelimit_config_keys();
// [payments.stripe]'s keys (its [payments.stripe.packs] sub-table is name = credits, not rows) and
// [payments.webhook]'s.
const std::vector<ConfigKey<StripePaymentsConfig>>& stripe_payments_config_keys();
const std::vector<ConfigKey<PaymentWebhookConfig>>& payment_webhook_config_keys();
// The row of a top-level key (the key must exist: a bug otherwise).
const ConfigKey<ServerConfig>& server_config_key(std::string_view name);

// "hold_ttl_ms" → "TOLLGATE_HOLD_TTL_MS".
std::string config_env_name(std::string_view key);
// The words of a choice key's values: "charge, forgive or reject".
std::string_view late_commit_choices();
std::string_view ratelimit_store_choices();
std::optional<RateLimitStore> parse_ratelimit_store(std::string_view name);
std::string_view refund_shortfall_choices();  // "debt or forgive"
std::string_view refund_shortfall_name(RefundShortfall shortfall);
std::optional<RefundShortfall> parse_refund_shortfall(std::string_view name);

// A database URI with its password masked (postgresql://user:***@host/db), for logs and output.
std::string masked_database(const std::string& database);
// The Markdown page docs/reference/configuration.md.
std::string config_reference_markdown();
// The effective configuration as TOML, secrets (admin_key, metrics_key, a database URI's password,
// payments.stripe.signing_secrets, payments.webhook.secret) masked as "***".
std::string effective_config_toml(const ServerConfig& config);

}  // namespace tollgate
