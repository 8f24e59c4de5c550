// tollgate config: the server's configuration (api.md, "Configuration").
//
// Sources, later ones winning: built-in defaults, the TOML file (`--config FILE`), TOLLGATE_*
// environment variables, then the command-line flags (`--listen`, `--database`, `--admin-key-file`).
// The keys, their bounds, variables and flags are the rows of one table (config/config_keys.h). Every key of the
// file is known: an unknown key, a wrong type or an out-of-range value is an error whose message
// names the key and the file's line ("tollgate.toml:7: hold_ttl_ms must be …"), and start-up stops.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/limits.h"
#include "core/model.h"
#include "core/result.h"

namespace tollgate {

struct ProviderConfig {
  std::string url;
  std::optional<std::string> status_url;  // with "{id}" where the job's client_request_id goes
  std::int64_t timeout_ms = limits::kProviderTimeoutMsDefault;
  std::int64_t expected_duration_ms = limits::kProviderExpectedDurationMsDefault;  // timeout_ms and hold_ttl_ms must be ≥ 3 × this
  std::int64_t max_attempts = limits::kProviderAttemptsDefault;
};

enum class RateLimitStore : std::uint8_t { shared, local };

struct RateLimitConfig {
  std::int64_t limit = 0;
  std::int64_t period_ms = 0;
  RateLimitStore store = RateLimitStore::shared;
  // local only: the most keys the instance's table keeps (idle ones are evicted first); 0: the
  // default, limits::kLocalRateKeysMaxDefault.
  std::int64_t keys_max = 0;
};

// What a Stripe refund takes when the credits are no longer there (api.md "Payments").
enum class RefundShortfall : std::uint8_t {
  debt,     // all of it: available may go below -overdraft_limit, and the account is frozen until repaid
  forgive,  // only what is available
};

// [payments.stripe]: POST /v1/payments/stripe (payments/stripe.h).
struct StripePaymentsConfig {
  // The endpoint's signing secrets ("whsec_…"); a signature by any one is accepted (several during a
  // rotation). Empty: the route refuses every request (invalid_signature: nothing is configured).
  std::vector<std::string> signing_secrets;
  std::int64_t tolerance_ms = limits::kPaymentSignatureToleranceMsDefault;  // older signatures are refused
  RefundShortfall refund_shortfall = RefundShortfall::debt;
  std::map<std::string, std::int64_t> packs;  // [payments.stripe.packs] name = credits
};

// [payments.webhook]: POST /v1/payments/webhook, signed as Standard Webhooks (payments/payment_webhook.h).
struct PaymentWebhookConfig {
  std::optional<std::string> secret;  // "whsec_<base64>"; unset: the route refuses every request
  std::int64_t tolerance_ms = limits::kPaymentSignatureToleranceMsDefault;
};

struct PaymentsConfig {
  StripePaymentsConfig stripe;
  PaymentWebhookConfig webhook;
};

struct ServerConfig {
  std::string listen = "127.0.0.1:8080";
  std::string database = "sqlite:tollgate.db";
  // PostgreSQL: connections each instance keeps for reads (the writer is one more), and the
  // time-out of connecting, of any one statement and of any lock wait (a stuck database → 503).
  std::int64_t database_pool_size = limits::kDatabasePoolSizeDefault;
  std::int64_t database_timeout_ms = limits::kDatabaseTimeoutMsDefault;
  std::optional<std::string> admin_key;  // unset: generated at first start and printed once
  // Set (and admin_key unset): the generated admin key is written to this file (mode 0600, created
  // once, never replaced; service/admin_key_file.h) instead of being printed.
  std::optional<std::string> admin_key_file;
  // Set: GET /metrics needs `Authorization: Bearer <metrics_key>` (or the admin key); unset: public.
  std::optional<std::string> metrics_key;
  std::int64_t hold_ttl_ms = limits::kHoldTtlMsDefault;
  std::int64_t hold_ttl_max_ms = limits::kHoldTtlMsMaxDefault;
  LateCommitPolicy late_commit = LateCommitPolicy::charge;
  std::int64_t reaper_interval_ms = limits::kReaperIntervalMsDefault;
  // Provider calls this instance drives at once (jobs/runner.h); accepted jobs beyond wait, pending.
  std::int64_t jobs_in_flight_max = static_cast<std::int64_t>(limits::kJobsInFlightMaxDefault);
  std::map<std::string, ProviderConfig> providers;
  std::map<std::string, RateLimitConfig> ratelimits;
  // Finished idempotency keys are pruned this long after they finished.
  std::int64_t idempotency_retention_ms = limits::kIdempotencyRetentionMsDefault;
  // Failed authentications per client address before 429 too_many_failed_auth (http/api.h);
  // auth_failures_limit 0 turns the throttle off.
  std::int64_t auth_failures_limit = limits::kAuthFailuresLimitDefault;
  std::int64_t auth_failures_period_ms = limits::kAuthFailuresPeriodMsDefault;
  // Both set: the listener speaks TLS only (PEM files: the certificate chain and its private key);
  // neither: plain HTTP. One without the other is an error.
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  // Peers (CIDRs, IPv4 and IPv6) whose X-Forwarded-For / Forwarded header names the client
  // (config/proxies.h); empty: the peer is the client.
  std::vector<std::string> trusted_proxies;
  PaymentsConfig payments;
};

struct ConfigOverrides {
  std::optional<std::string> config_file;  // --config
  std::optional<std::string> listen;       // --listen
  std::optional<std::string> database;     // --database
  std::optional<std::string> admin_key_file;  // --admin-key-file
};

// Looks up an environment variable; injected so tests need not touch the process environment.
using EnvLookup = std::optional<std::string> (*)(const char* name);
std::optional<std::string> process_env(const char* name);

// Loads and validates the configuration. invalid_request names the key (and line, for the file).
Result<ServerConfig> load_config(const ConfigOverrides& overrides, EnvLookup env = &process_env);
// Parses TOML text (for tests); `source_name` is used in messages.
Result<ServerConfig> parse_config(std::string_view toml_text, std::string_view source_name);
// Checks values against each other (TTLs, providers' durations); used by both of the above.
Status validate_config(const ServerConfig& config);

// "sqlite:PATH" → PATH; nullopt when the database is not a SQLite one.
std::optional<std::string> sqlite_path(const std::string& database);
// Whether `database` is a libpq URI (postgresql:// or postgres://).
bool is_postgres_uri(const std::string& database);
// host and port of a "HOST:PORT" listen address.
struct ListenAddress {
  std::string host;
  std::uint16_t port = 0;
};
Result<ListenAddress> parse_listen(const std::string& listen);

}  // namespace tollgate
