#include "app/serve.h"

#include <cstdio>
#include <string>

#include "core/clock.h"
#include "core/log.h"
#include "core/version.h"
#include "http/api.h"
#include "http/auth.h"
#include "http/metrics.h"
#include "http/server.h"
#include "ledger/ledger.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"

namespace tollgate::app {

extern const char* const kOpenApiJson;  // generated from docs/openapi.json

namespace {

void log_line(const char* level, const std::string& msg) { tollgate::log(level, msg); }

std::string render_metrics(Ledger& ledger, http::Metrics& metrics, const Clock& clock) {
  using http::metric_header;
  using http::metric_line;
  std::string out;
  out.reserve(16 * 1024);
  if (auto stats = ledger.store().stats()) {
    metric_header(out, "tollgate_active_holds", "gauge", "Holds reserved and not yet ended or overdue.");
    metric_line(out, "tollgate_active_holds", "", static_cast<double>(stats->active_holds));
    metric_header(out, "tollgate_oldest_active_hold_age_seconds", "gauge", "Age of the oldest active hold.");
    metric_line(out, "tollgate_oldest_active_hold_age_seconds", "",
                stats->oldest_active_hold_age_ms ? static_cast<double>(*stats->oldest_active_hold_age_ms) / 1000.0 : 0.0);
    metric_header(out, "tollgate_accounts", "gauge", "Accounts in the ledger.");
    metric_line(out, "tollgate_accounts", "", static_cast<double>(stats->accounts));
  }
  metric_header(out, "tollgate_holds_ended_total", "counter", "Holds ended through this instance, by outcome.");
  metric_line(out, "tollgate_holds_ended_total", "outcome=\"committed\"", static_cast<double>(metrics.holds_committed.load()));
  metric_line(out, "tollgate_holds_ended_total", "outcome=\"released\"", static_cast<double>(metrics.holds_released.load()));
  metric_line(out, "tollgate_holds_ended_total", "outcome=\"expired\"", static_cast<double>(ledger.holds_expired_by_reaper()));
  metric_line(out, "tollgate_holds_ended_total", "outcome=\"late_charged\"",
              static_cast<double>(metrics.holds_late_charged.load()));
  metric_line(out, "tollgate_holds_ended_total", "outcome=\"late_forgiven\"",
              static_cast<double>(metrics.holds_late_forgiven.load()));
  metric_header(out, "tollgate_reservation_conflicts_total", "counter", "Answers of insufficient_credits.");
  metric_line(out, "tollgate_reservation_conflicts_total", "", static_cast<double>(metrics.reservation_conflicts.load()));
  metric_header(out, "tollgate_invariant_violations_total", "counter",
                "Invariant violations found: by the server's sampled audit, or by GET /v1/audit.");
  metric_line(out, "tollgate_invariant_violations_total", "source=\"sampled\"",
              static_cast<double>(ledger.sampled_violations()));
  metric_line(out, "tollgate_invariant_violations_total", "source=\"audit\"",
              static_cast<double>(metrics.invariant_violations.load()));
  metric_header(out, "tollgate_audit_sampled_accounts_total", "counter", "Accounts audited by the server's sampler.");
  metric_line(out, "tollgate_audit_sampled_accounts_total", "", static_cast<double>(ledger.sampled_accounts()));
  metric_header(out, "tollgate_reaper_last_run_age_seconds", "gauge", "Seconds since the reaper last ran (-1: never).");
  const auto last = ledger.reaper_last_run_ms();
  metric_line(out, "tollgate_reaper_last_run_age_seconds", "",
              last ? static_cast<double>(clock.now_ms() - *last) / 1000.0 : -1.0);
  const auto gc = ledger.committer().stats();
  metric_header(out, "tollgate_group_commit_batches_total", "counter", "Write transactions committed or tried.");
  metric_line(out, "tollgate_group_commit_batches_total", "", static_cast<double>(gc.batches));
  metric_header(out, "tollgate_group_commit_operations_total", "counter", "Operations written through group commit.");
  metric_line(out, "tollgate_group_commit_operations_total", "", static_cast<double>(gc.commands));
  metric_header(out, "tollgate_group_commit_overloaded_total", "counter", "Operations refused: write queue full.");
  metric_line(out, "tollgate_group_commit_overloaded_total", "", static_cast<double>(gc.overloaded));
  metric_header(out, "tollgate_group_commit_failed_batches_total", "counter", "Write transactions that failed.");
  metric_line(out, "tollgate_group_commit_failed_batches_total", "", static_cast<double>(gc.failed_batches));
  metric_header(out, "tollgate_write_queue_depth", "gauge", "Operations waiting for the writer.");
  metric_line(out, "tollgate_write_queue_depth", "", static_cast<double>(ledger.committer().queue_depth()));
  metric_header(out, "tollgate_http_connections_rejected_total", "counter", "Connections closed: over the limit.");
  metric_line(out, "tollgate_http_connections_rejected_total", "", static_cast<double>(metrics.connections_rejected.load()));
  metrics.render_requests(out);
  return out;
}

// The database for logs: a URI's password replaced by "***".
std::string redacted(const std::string& database) {
  const auto scheme = database.find("://");
  if (scheme == std::string::npos) return database;
  const auto at = database.find('@', scheme + 3);
  const auto colon = database.find(':', scheme + 3);
  if (at == std::string::npos || colon == std::string::npos || colon > at) return database;
  return database.substr(0, colon + 1) + "***" + database.substr(at);
}

// Opens the store `config.database` names: a SQLite file, or a PostgreSQL database shared by
// every instance (whose clock is then the database's).
Result<std::unique_ptr<Store>> open_store(const ServerConfig& config, const Clock& clock) {
  if (auto path = sqlite_path(config.database)) {
    SqliteOptions options;
    options.path = *path;
    auto store = SqliteStore::open(options, clock);
    if (!store) return Error::make(store.error().code, "open " + *path + ": " + store.error().detail);
    return std::unique_ptr<Store>(std::move(store).value());
  }
  TG_ASSERT(is_postgres_uri(config.database));  // validate_config() allows nothing else
  PgOptions options;
  options.uri = config.database;
  options.readers_max = static_cast<int>(config.database_pool_size);
  options.connect_timeout_ms = static_cast<int>(config.database_timeout_ms);
  options.statement_timeout_ms = static_cast<int>(config.database_timeout_ms);
  auto store = PgStore::open(options);
  if (!store) return Error::make(store.error().code, "open the PostgreSQL database: " + store.error().detail);
  return std::unique_ptr<Store>(std::move(store).value());
}

}  // namespace

int serve(const ServerConfig& config, const std::function<void(std::uint16_t)>& on_listening) {
  auto listen = parse_listen(config.listen);
  if (!listen) {
    log_line("error", listen.error().detail);
    return 2;
  }
  SystemClock clock;
  auto store = open_store(config, clock);
  if (!store) {
    log_line("error", store.error().detail);
    return 1;
  }

  LedgerOptions ledger_options;
  ledger_options.hold_ttl_ms_default = config.hold_ttl_ms;
  ledger_options.hold_ttl_ms_max = config.hold_ttl_max_ms;
  ledger_options.late_commit = config.late_commit;
  ledger_options.reaper_interval_ms = config.reaper_interval_ms;
  ledger_options.audit_sample_interval_ms = 10'000;  // one account in turn, every 10 s
  if (auto s = validate(ledger_options); !s) {
    log_line("error", s.error().detail);
    return 2;
  }
  Ledger ledger(**store, clock, ledger_options);

  // The admin key: configured, or generated at the first start and printed once.
  if (!config.admin_key) {
    auto has = (*store)->has_admin_key();
    if (!has) {
      log_line("error", has.error().detail);
      return 1;
    }
    if (!*has) {
      const std::string secret = http::new_secret();
      auto created = ledger.run(CreateKeyCommand{"admin", std::nullopt, http::sha256_hex(secret)});
      if (!created) {
        log_line("error", "storing the admin key: " + created.error().detail);
        return 1;
      }
      std::printf("tollgate: generated admin key (shown once, stored hashed): %s\n", secret.c_str());
      std::fflush(stdout);
    }
  }
  http::Authenticator auth(**store, clock, config.admin_key, &ledger.key_uses());
  http::Metrics metrics(http::Api::route_templates());
  http::ApiOptions api_options;
  api_options.openapi_json = kOpenApiJson;
  api_options.reaper_interval_ms = config.reaper_interval_ms;
  api_options.render_metrics = [&] { return render_metrics(ledger, metrics, clock); };
  http::Api api(ledger, auth, metrics, clock, std::move(api_options));
  http::HttpServer server(api, metrics, http::ServerLimits{});
  auto port = server.listen(listen->host, listen->port);
  if (!port) {
    log_line("error", port.error().detail);
    return 1;
  }
  log_line("info", "tollgate " + std::string(kVersion) + " listening on " + listen->host + ":" + std::to_string(*port) +
                       ", database " + redacted(config.database));
  if (on_listening) on_listening(*port);
  server.run();
  ledger.stop();  // writes what is queued, commits
  log_line("info", "tollgate stopped");
  return 0;
}

}  // namespace tollgate::app
