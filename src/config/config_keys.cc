#include "config/config_keys.h"

#include <cctype>
#include <type_traits>

#include "core/limits.h"
#include "core/log.h"
#include "core/result.h"

namespace tollgate {

const std::vector<ConfigKey<ServerConfig>>& server_config_keys() {
  using C = ServerConfig;
  namespace l = limits;
  static const std::vector<ConfigKey<C>> keys = {
      {"listen", &C::listen, 0, 0, "HOST:PORT the server listens on (an IP address or localhost; port 0: any free port)",
       false, false, "--listen"},
      {"database", &C::database, 0, 0, "sqlite:PATH (one instance) or a postgresql:// libpq URI (many instances)", false,
       false, "--database"},
      {"database_pool_size", &C::database_pool_size, 1, l::kDatabasePoolSizeMax,
       "PostgreSQL: connections each instance keeps for reads (the writer has one more)"},
      {"database_timeout_ms", &C::database_timeout_ms, l::kDatabaseTimeoutMsMin, l::kDatabaseTimeoutMsMax,
       "PostgreSQL: the time-out of connecting, of one statement and of a lock wait (then 503)"},
      {"admin_key", &C::admin_key, 0, 0,
       "the admin key (at least 16 characters); unset: one is generated at the first start and printed once", false,
       true},
      {"admin_key_file", &C::admin_key_file, 0, 0,
       "with admin_key unset: write the generated admin key to this file (mode 0600) instead of printing it", false,
       false, "--admin-key-file"},
      {"metrics_key", &C::metrics_key, 0, 0,
       "GET /metrics needs this key (or the admin key) as a Bearer token; unset: /metrics is open", false, true},
      {"hold_ttl_ms", &C::hold_ttl_ms, l::kHoldTtlMsMin, l::kHoldTtlMsMax,
       "a hold's time to live when the reserve names none (at most hold_ttl_max_ms)"},
      {"hold_ttl_max_ms", &C::hold_ttl_max_ms, l::kHoldTtlMsMin, l::kHoldTtlMsMax,
       "the longest time to live a reserve may ask for"},
      {"late_commit", &C::late_commit, 0, 0,
       "a commit that arrives after its hold expired: charge it if the credits are there, forgive it, or reject it"},
      {"reaper_interval_ms", &C::reaper_interval_ms, l::kReaperIntervalMsMin, l::kReaperIntervalMsMax,
       "how often expired holds are returned to available"},
      {"jobs_in_flight_max", &C::jobs_in_flight_max, 1, static_cast<std::int64_t>(l::kJobsInFlightMax),
       "provider calls this instance drives at once; accepted jobs beyond wait, pending"},
      {"idempotency_retention_ms", &C::idempotency_retention_ms, 1, l::kIdempotencyRetentionMsMax,
       "finished idempotency keys are kept this long, then pruned"},
      {"auth_failures_limit", &C::auth_failures_limit, 0, l::kRateLimitMax,
       "failed authentications per client address per period before 429 too_many_failed_auth (0: no throttle)"},
      {"auth_failures_period_ms", &C::auth_failures_period_ms, 1, l::kRateLimitPeriodMsMax,
       "the period of auth_failures_limit (a budget that refills steadily)"},
      {"trusted_proxies", &C::trusted_proxies, 0, 0,
       "CIDRs of load balancers whose X-Forwarded-For (or Forwarded) header names the client; in the environment, "
       "comma-separated"},
      {"tls_cert", &C::tls_cert, 0, 0, "PEM certificate chain: with tls_key, the listener speaks TLS only"},
      {"tls_key", &C::tls_key, 0, 0, "PEM private key of tls_cert"},
  };
  return keys;
}

const std::vector<ConfigKey<ProviderConfig>>& provider_config_keys() {
  using C = ProviderConfig;
  static const std::vector<ConfigKey<C>> keys = {
      {"url", &C::url, 0, 0, "where a job's request is POSTed", true},
      {"status_url", &C::status_url, 0, 0,
       "where a job's status is asked after a lost answer, with {id} for its client_request_id (unset: none)"},
      {"timeout_ms", &C::timeout_ms, 1, limits::kProviderTimeoutMsMax,
       "one provider call's time-out; at least 3 × expected_duration_ms"},
      {"expected_duration_ms", &C::expected_duration_ms, 1, limits::kProviderTimeoutMsMax,
       "how long a call usually takes; hold_ttl_ms must be at least 3 × this"},
      {"max_attempts", &C::max_attempts, 1, limits::kProviderAttemptsMax, "sends of one job, the first included"},
  };
  return keys;
}

const std::vector<ConfigKey<RateLimitConfig>>& ratelimit_config_keys() {
  using C = RateLimitConfig;
  static const std::string keys_max_default = std::to_string(limits::kLocalRateKeysMaxDefault);
  static const std::vector<ConfigKey<C>> keys = {
      {"limit", &C::limit, 1, limits::kRateLimitMax, "attempts per period, per key (at most 1 per µs of period_ms)", true},
      {"period_ms", &C::period_ms, 1, limits::kRateLimitPeriodMsMax, "the period of limit", true},
      {"store", &C::store, 0, 0, "shared: counted in the database, for every instance; local: in this instance's memory"},
      {"keys_max", &C::keys_max, 1, static_cast<std::int64_t>(limits::kLocalRateKeysMax),
       "local only: the most keys the instance remembers (idle ones are forgotten first)", false, false, nullptr,
       keys_max_default.c_str()},
  };
  return keys;
}

const std::vector<ConfigKey<StripePaymentsConfig>>& stripe_payments_config_keys() {
  using C = StripePaymentsConfig;
  static const std::string secrets_text =
      "the endpoint's signing secrets (whsec_…), at most " + std::to_string(limits::kPaymentSigningSecretsMax) +
      ", several during a rotation: a signature by any one is accepted; empty: every request is refused. In the "
      "environment, comma-separated";
  static const std::vector<ConfigKey<C>> keys = {
      {"signing_secrets", &C::signing_secrets, 0, 0, secrets_text.c_str(), false, true, nullptr, nullptr,
       "TOLLGATE_STRIPE_SIGNING_SECRETS"},
      {"tolerance_ms", &C::tolerance_ms, 1, limits::kPaymentSignatureToleranceMsMax,
       "a signature whose time-stamp is further than this from the server's clock is refused"},
      {"refund_shortfall", &C::refund_shortfall, 0, 0,
       "a refund of credits no longer available: debt takes them all (the account may go below its overdraft "
       "limit and is frozen until repaid); forgive takes only what is available"},
  };
  return keys;
}

const std::vector<ConfigKey<PaymentWebhookConfig>>& payment_webhook_config_keys() {
  using C = PaymentWebhookConfig;
  static const std::vector<ConfigKey<C>> keys = {
      {"secret", &C::secret, 0, 0,
       "the Standard Webhooks secret: whsec_ and the base64 of at least 24 bytes; unset: every request is refused",
       false, true, nullptr, nullptr, "TOLLGATE_PAYMENT_WEBHOOK_SECRET"},
      {"tolerance_ms", &C::tolerance_ms, 1, limits::kPaymentSignatureToleranceMsMax,
       "a signature whose time-stamp is further than this from the server's clock is refused"},
  };
  return keys;
}

const ConfigKey<ServerConfig>& server_config_key(std::string_view name) {
  for (const auto& k : server_config_keys()) {
    if (name == k.name) return k;
  }
  TG_ASSERT(false && "no such configuration key");
  return server_config_keys().front();
}

std::string config_env_name(std::string_view key) {
  std::string out = "TOLLGATE_";
  for (char c : key) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string_view late_commit_choices() { return "charge, forgive or reject"; }
std::string_view ratelimit_store_choices() { return "shared or local"; }

std::optional<RateLimitStore> parse_ratelimit_store(std::string_view name) {
  if (name == "shared") return RateLimitStore::shared;
  if (name == "local") return RateLimitStore::local;
  return std::nullopt;
}

std::string_view refund_shortfall_choices() { return "debt or forgive"; }

std::string_view refund_shortfall_name(RefundShortfall shortfall) {
  return shortfall == RefundShortfall::debt ? "debt" : "forgive";
}

std::optional<RefundShortfall> parse_refund_shortfall(std::string_view name) {
  if (name == "debt") return RefundShortfall::debt;
  if (name == "forgive") return RefundShortfall::forgive;
  return std::nullopt;
}

// A database URI with its password masked: postgresql://user:***@host/db.
std::string masked_database(const std::string& database) {
  const auto scheme = database.find("://");
  if (scheme == std::string::npos) return database;
  const auto at = database.find('@', scheme + 3);
  const auto colon = database.find(':', scheme + 3);
  if (at == std::string::npos || colon == std::string::npos || colon > at) return database;
  return database.substr(0, colon + 1) + "***" + database.substr(at);
}

namespace {

std::string quoted(std::string_view text) {
  std::string out;
  append_json_string(out, text);  // a JSON string is a TOML basic string
  return out;
}

// A row's value in `config` as TOML; nullopt when unset.
template <typename C>
std::optional<std::string> toml_value(const ConfigKey<C>& key, const C& config) {
  return std::visit(
      [&](auto member) -> std::optional<std::string> {
        const auto& v = config.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return quoted(v);
        } else if constexpr (std::is_same_v<T, std::optional<std::string>>) {
          if (!v) return std::nullopt;
          return quoted(*v);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          if (key.default_text && v == 0) return std::nullopt;  // 0: the default in words
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string out = "[";
          for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + quoted(v[i]);
          return out + "]";
        } else if constexpr (std::is_same_v<T, LateCommitPolicy>) {
          return quoted(late_commit_policy_name(v));
        } else if constexpr (std::is_same_v<T, RateLimitStore>) {
          return quoted(v == RateLimitStore::shared ? "shared" : "local");
        } else {
          static_assert(std::is_same_v<T, RefundShortfall>);
          return quoted(refund_shortfall_name(v));
        }
      },
      key.field);
}

template <typename C>
std::string type_name(const ConfigKey<C>& key) {
  switch (key.field.index()) {
    case 0:
    case 1: return "string";
    case 2: return "integer";
    case 3: return "list of strings";
    case 4: return "`charge` \\| `forgive` \\| `reject`";
    case 5: return "`shared` \\| `local`";
    default: return "`debt` \\| `forgive`";
  }
}

template <typename C>
std::string default_text(const ConfigKey<C>& key) {
  if (key.required) return "required";
  if (key.default_text) return std::string("`") + key.default_text + "`";
  const auto v = toml_value(key, C{});
  if (!v) return "unset";
  return "`" + *v + "`";
}

template <typename C>
std::string bounds_text(const ConfigKey<C>& key) {
  if (key.field.index() != 2) return "";
  return std::to_string(key.min) + " – " + std::to_string(key.max);
}

// The columns of a table of rows: the top level's (each key has a variable, some a flag), a nested
// table's with variables for some rows (payments), or a nested table's without any.
enum class Columns : std::uint8_t { top_level, with_env, plain };

template <typename C>
void markdown_rows(std::string& out, const std::vector<ConfigKey<C>>& keys, Columns columns) {
  switch (columns) {
    case Columns::top_level:
      out += "| Key | Type | Default | Bounds | Environment | Flag | Description |\n|---|---|---|---|---|---|---|\n";
      break;
    case Columns::with_env:
      out += "| Key | Type | Default | Bounds | Environment | Description |\n|---|---|---|---|---|---|\n";
      break;
    case Columns::plain: out += "| Key | Type | Default | Bounds | Description |\n|---|---|---|---|---|\n"; break;
  }
  for (const auto& k : keys) {
    out += "| `" + std::string(k.name) + "` | " + type_name(k) + " | " + default_text(k) + " | " + bounds_text(k) + " | ";
    if (columns == Columns::top_level) {
      out += "`" + config_env_name(k.name) + "` | " + (k.flag ? "`" + std::string(k.flag) + "`" : std::string()) + " | ";
    } else if (columns == Columns::with_env) {
      out += (k.env ? "`" + std::string(k.env) + "`" : std::string()) + " | ";
    }
    out += std::string(k.description) + (k.secret ? " (a secret: `--print-config` masks it)" : "") + " |\n";
  }
}

template <typename C>
void toml_rows(std::string& out, const std::vector<ConfigKey<C>>& keys, const C& config) {
  for (const auto& k : keys) {
    auto v = toml_value(k, config);
    if (!v) {
      out += "# " + std::string(k.name) + " is not set\n";
      continue;
    }
    if (k.secret && *v != "[]") v = "\"***\"";  // an empty list of secrets shows that none is set
    if constexpr (std::is_same_v<C, ServerConfig>) {
      if (std::string_view(k.name) == "database") v = quoted(masked_database(config.database));
    }
    out += std::string(k.name) + " = " + *v + "\n";
  }
}

}  // namespace

std::string config_reference_markdown() {
  std::string out =
      "<!-- Generated by `tollgate config reference` from the table the parser uses (src/config/config_keys.cc).\n"
      "     Do not edit: a test fails when this page differs from what the command prints. -->\n"
      "# Configuration reference\n\n"
      "`tollgate serve` reads, later sources winning: the built-in defaults, the TOML file given with\n"
      "`--config FILE`, the `TOLLGATE_*` environment variables, then the command-line flags. An unknown\n"
      "key, a wrong type or a value out of its bounds stops start-up with a message naming the key and\n"
      "the file's line. `tollgate serve --print-config` prints the effective configuration (secrets masked)\n"
      "and exits.\n\n"
      "## Top-level keys\n\n";
  markdown_rows(out, server_config_keys(), Columns::top_level);
  out +=
      "\n## `[providers.NAME]`\n\n"
      "A paid provider that jobs call (`POST /v1/jobs` names it). One table per provider; no environment\n"
      "variables.\n\n";
  markdown_rows(out, provider_config_keys(), Columns::plain);
  out +=
      "\n## `[ratelimits.NAME]`\n\n"
      "A rate-limit policy served at `/v1/ratelimits/NAME` (a name of 1–128 characters of\n"
      "`[A-Za-z0-9._:@-]`). One table per policy; no environment variables.\n\n";
  markdown_rows(out, ratelimit_config_keys(), Columns::plain);
  out +=
      "\n## `[payments.stripe]`\n\n"
      "`POST /v1/payments/stripe`: Stripe's events, authenticated by their `Stripe-Signature` header. The\n"
      "variable replaces the file's list; a secret never appears in a message or in `--print-config`.\n"
      "Each secret is printable ASCII without spaces or commas, and no two are the same.\n\n";
  markdown_rows(out, stripe_payments_config_keys(), Columns::with_env);
  out +=
      "\n## `[payments.stripe.packs]`\n\n"
      "`NAME = CREDITS`: a payment whose `metadata.tollgate_pack` is `NAME` credits `CREDITS` (1 – " +
      std::to_string(limits::kAmountMax) +
      ").\nA name is 1–128 characters of `[A-Za-z0-9._:@-]` (quote it in the file if it holds `.`, `:` or\n"
      "`@`). None by default; no environment variables.\n"
      "\n## `[payments.webhook]`\n\n"
      "`POST /v1/payments/webhook`: a payment provider's events signed as Standard Webhooks.\n\n";
  markdown_rows(out, payment_webhook_config_keys(), Columns::with_env);
  return out;
}

std::string effective_config_toml(const ServerConfig& config) {
  std::string out = "# the effective configuration: defaults, file, environment and flags (secrets masked)\n";
  toml_rows(out, server_config_keys(), config);
  for (const auto& [name, p] : config.providers) {
    out += "\n[providers." + name + "]\n";
    toml_rows(out, provider_config_keys(), p);
  }
  for (const auto& [name, r] : config.ratelimits) {
    out += "\n[ratelimits." + name + "]\n";
    toml_rows(out, ratelimit_config_keys(), r);
  }
  out += "\n[payments.stripe]\n";
  toml_rows(out, stripe_payments_config_keys(), config.payments.stripe);
  if (!config.payments.stripe.packs.empty()) {
    out += "\n[payments.stripe.packs]\n";
    for (const auto& [name, credits] : config.payments.stripe.packs)
      out += quoted(name) + " = " + std::to_string(credits) + "\n";
  }
  out += "\n[payments.webhook]\n";
  toml_rows(out, payment_webhook_config_keys(), config.payments.webhook);
  return out;
}

}  // namespace tollgate
