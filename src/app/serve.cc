#include "app/serve.h"

#include "app/process_metrics.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "config/config_keys.h"
#include "config/proxies.h"
#include "core/clock.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/version.h"
#include "http/api.h"
#include "http/auth.h"
#include "http/json_codec.h"
#include "http/metrics.h"
#include "http/read_executor.h"
#include "http/server.h"
#include "coord/rate_limits.h"
#include "jobs/job_service.h"
#include "jobs/provider_client.h"
#include "jobs/runner.h"
#include "webhooks/delivery_worker.h"
#include "ledger/ledger.h"
#include "service/admin_key_file.h"
#include "service/sd_notify.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_store.h"

namespace tollgate::app {

extern const char* const kOpenApiJson;  // generated from docs/openapi.json

namespace {

void log_line(const char* level, const std::string& msg) { tollgate::log(level, msg); }

void render_job_metrics(http::Exposition& out, const jobs::JobRunner& runner) {
  static constexpr metrics::Family kOutcomes{"tollgate_provider_outcomes_total", metrics::Type::counter,
                                             "What provider requests saw, by provider."};
  static constexpr metrics::Family kDuration{
      "tollgate_provider_request_duration_seconds", metrics::Type::histogram,
      "Provider requests (sends, not status questions) from start to answer or failure, by provider."};
  out.fields(jobs::kJobRunnerFields, runner.stats());
  const auto providers = runner.provider_stats();
  out.family(kOutcomes);
  for (const auto& p : providers) {
    const std::string of = "provider=\"" + p.provider + "\",outcome=";
    out.sample(kOutcomes, of + "\"2xx\"", static_cast<double>(p.answers_2xx));
    out.sample(kOutcomes, of + "\"4xx\"", static_cast<double>(p.answers_4xx));
    out.sample(kOutcomes, of + "\"5xx\"", static_cast<double>(p.answers_5xx));
    out.sample(kOutcomes, of + "\"timeout\"", static_cast<double>(p.timeouts));
    out.sample(kOutcomes, of + "\"connection_lost\"", static_cast<double>(p.connection_lost));
    out.sample(kOutcomes, of + "\"not_connected\"", static_cast<double>(p.not_connected));
  }
  out.family(kDuration);
  for (const auto& p : providers) {
    out.histogram(kDuration, "provider=\"" + p.provider + "\"", jobs::ProviderStats::kBucketsS, p.buckets, p.requests,
                  p.seconds_sum);
  }
}

// Jobs not ended, by status, as the store has them (every instance's): the partial index of
// unended jobs makes this cheap. Ended jobs are counted where they end (tollgate_jobs_ended_total).
void render_jobs_by_status(http::Exposition& out, Ledger& ledger) {
  static constexpr metrics::Family kJobs{"tollgate_jobs", metrics::Type::gauge, "Jobs not ended, by status (all instances)."};
  auto counts = ledger.count_unended_jobs();
  if (!counts) return;  // the database is away: /readyz says so; the scrape goes on without it
  out.sample(kJobs, "status=\"pending\"", static_cast<double>(counts->pending));
  out.sample(kJobs, "status=\"running\"", static_cast<double>(counts->running));
}

// This process's lease owner name: host, pid and a random part (a restarted process is another owner).
std::string instance_id() {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "host");
  std::random_device rd;
  char out[320];
  std::snprintf(out, sizeof out, "%.64s-%d-%08x", host, static_cast<int>(getpid()), rd());
  std::string id(out);
  for (char& c : id) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
    if (!ok) c = '-';
  }
  return id.substr(0, limits::kIdLengthMax);
}

// Locks, idempotency keys and rate limits: this instance's decisions, by outcome.
void render_webhook_metrics(http::Exposition& out, const webhooks::DeliveryWorker& worker) {
  static constexpr metrics::Family kDelivering{
      "tollgate_webhook_delivering", metrics::Type::gauge,
      "1 on the instance that holds the webhook delivery lock (the one that delivers), 0 on the others."};
  static constexpr metrics::Family kDeliveries{
      "tollgate_webhook_deliveries_total", metrics::Type::counter,
      "Webhook delivery attempts recorded by this instance, by endpoint and outcome (delivered: answered 2xx; "
      "retrying: failed, another attempt is scheduled; failed: the last attempt failed)."};
  static constexpr metrics::Family kOldest{
      "tollgate_webhook_oldest_undelivered_seconds", metrics::Type::gauge,
      "Age of the oldest event an endpoint should receive and has not yet received (0: caught up); on the "
      "delivering instance."};
  const auto stats = worker.stats();
  out.sample(kDelivering, "", stats.delivering ? 1.0 : 0.0);
  const auto endpoints = worker.endpoint_stats();
  out.family(kDeliveries);
  for (const auto& e : endpoints) {
    const std::string of = "endpoint_id=\"" + e.endpoint_id + "\",outcome=";
    out.sample(kDeliveries, of + "\"delivered\"", static_cast<double>(e.delivered));
    out.sample(kDeliveries, of + "\"retrying\"", static_cast<double>(e.retrying));
    out.sample(kDeliveries, of + "\"failed\"", static_cast<double>(e.failed));
  }
  out.family(kOldest);
  for (const auto& e : endpoints) {
    out.sample(kOldest, "endpoint_id=\"" + e.endpoint_id + "\"", static_cast<double>(e.oldest_undelivered_ms) / 1000.0);
  }
}

void render_coord_metrics(http::Exposition& out, const coord::RatePolicies& policies,
                          const http::CoordCounters& counters) {
  static constexpr metrics::Family kLocks{
      "tollgate_lock_decisions_total", metrics::Type::counter,
      "Lock calls answered by this instance, by outcome (held: refused, another owner holds it)."};
  static constexpr metrics::Family kIdempotency{"tollgate_idempotency_decisions_total", metrics::Type::counter,
                                                "Idempotency-key calls answered by this instance, by outcome."};
  static constexpr metrics::Family kRateLimits{
      "tollgate_ratelimit_decisions_total", metrics::Type::counter,
      "Rate-limit checks answered by this instance, by policy, store and decision."};
  static constexpr metrics::Family kLocalKeys{"tollgate_ratelimit_local_keys", metrics::Type::gauge,
                                              "Keys in the memory of this instance's local policies."};
  static constexpr metrics::Family kLocalEvictions{"tollgate_ratelimit_local_evictions_total", metrics::Type::counter,
                                                   "Busy keys a full local table forgot (its bound keeps memory flat)."};
  for (std::size_t i = 0; i < counters.kLockOutcomes.size(); ++i) {
    out.sample(kLocks, "outcome=\"" + std::string(counters.kLockOutcomes[i]) + "\"",
               static_cast<double>(counters.lock[i].load(std::memory_order_relaxed)));
  }
  for (std::size_t i = 0; i < counters.kIdemOutcomes.size(); ++i) {
    out.sample(kIdempotency, "outcome=\"" + std::string(counters.kIdemOutcomes[i]) + "\"",
               static_cast<double>(counters.idempotency[i].load(std::memory_order_relaxed)));
  }
  out.family(kRateLimits);
  for (const auto& [name, p] : policies.all()) {
    const std::string labels = "policy=\"" + name + "\",store=\"" + (p->shared ? "shared" : "local") + "\",decision=";
    out.sample(kRateLimits, labels + "\"allowed\"", static_cast<double>(p->allowed.load(std::memory_order_relaxed)));
    out.sample(kRateLimits, labels + "\"limited\"", static_cast<double>(p->limited.load(std::memory_order_relaxed)));
  }
  out.family(kLocalKeys);
  for (const auto& [name, p] : policies.all()) {
    if (p->local) out.sample(kLocalKeys, "policy=\"" + name + "\"", static_cast<double>(p->local->size()));
  }
  out.family(kLocalEvictions);
  for (const auto& [name, p] : policies.all()) {
    if (p->local) out.sample(kLocalEvictions, "policy=\"" + name + "\"", static_cast<double>(p->local->evictions()));
  }
}

// The figures of one snapshot of the store, when it answers.
void render_store_metrics(http::Exposition& out, Ledger& ledger) {
  static constexpr metrics::Family kActiveHolds{"tollgate_active_holds", metrics::Type::gauge,
                                                "Holds reserved and not yet ended or overdue."};
  static constexpr metrics::Family kOldestHold{"tollgate_oldest_active_hold_age_seconds", metrics::Type::gauge,
                                               "Age of the oldest active hold."};
  static constexpr metrics::Family kAccounts{"tollgate_accounts", metrics::Type::gauge, "Accounts in the ledger."};
  auto stats = ledger.stats();
  if (!stats) return;
  out.sample(kActiveHolds, "", static_cast<double>(stats->active_holds));
  out.sample(kOldestHold, "",
             stats->oldest_active_hold_age_ms ? static_cast<double>(*stats->oldest_active_hold_age_ms) / 1000.0 : 0.0);
  out.sample(kAccounts, "", static_cast<double>(stats->accounts));
}

void render_metrics(http::Exposition& out, Ledger& ledger, const http::Metrics& metrics,
                    const http::ReadExecutor& readers, const Clock& clock) {
  static constexpr metrics::Family kReaperAge{"tollgate_reaper_last_run_age_seconds", metrics::Type::gauge,
                                              "Seconds since the reaper last ran (-1: never)."};
  static constexpr metrics::Family kReaperInterval{"tollgate_reaper_interval_seconds", metrics::Type::gauge,
                                                   "How often the reaper is meant to run (reaper_interval_ms)."};
  static constexpr metrics::Family kWriteQueue{"tollgate_write_queue_depth", metrics::Type::gauge,
                                               "Operations waiting for the writer."};
  static constexpr metrics::Family kReadQueue{"tollgate_read_queue_depth", metrics::Type::gauge,
                                              "Reads waiting for a reader thread."};
  static constexpr metrics::Family kReadOverloaded{"tollgate_read_overloaded_total", metrics::Type::counter,
                                                   "Reads refused: the read queue was full (503)."};
  render_store_metrics(out, ledger);
  // Counted by the ledger as it answers each decided command (whoever submitted it), and by the
  // ledger's reaper, sampler and prune pass.
  out.fields(kOutcomeFields, ledger.outcomes());
  out.fields(kLedgerFields, ledger.counters());
  const auto last = ledger.reaper_last_run_ms();
  out.sample(kReaperAge, "", last ? static_cast<double>(clock.now_ms() - *last) / 1000.0 : -1.0);
  out.sample(kReaperInterval, "", static_cast<double>(ledger.options().reaper_interval_ms) / 1000.0);
  out.fields(kGroupCommitFields, ledger.write_stats());
  out.sample(kWriteQueue, "", static_cast<double>(ledger.write_queue_depth()));
  out.fields(http::kEdgeFields, metrics.edge.snapshot());
  out.sample(kReadQueue, "", static_cast<double>(readers.queue_depth()));
  out.sample(kReadOverloaded, "", static_cast<double>(readers.refused()));
  metrics.render_requests(out);
  render_process_metrics(out);
  render_build_info(out);
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
  options.lease_wait_ms = config.database_timeout_ms;
  auto store = PgStore::open(options);
  if (!store) return Error::make(store.error().code, "open the PostgreSQL database: " + store.error().detail);
  return std::unique_ptr<Store>(std::move(store).value());
}

// The admin key (api.md): a configured one retires the generated key, through the ordinary write
// path — idempotent, so instances starting together on one PostgreSQL database agree (the key's row
// is locked by whichever batch comes first; the other then finds it revoked). With none
// configured, a key is generated at the first start and printed once — or, with admin_key_file,
// written to that file (service/admin_key_file.h) before it is stored, and not printed; once a
// configured key has retired it, start-up needs a configured key (a new one is never generated
// behind the operator's back). invalid_request: a configuration to fix; anything else: the database.
Status settle_admin_key(Ledger& ledger, const ServerConfig& config) {
  if (config.admin_key) {
    auto retired = ledger.run(RevokeKeyCommand{std::string(kGeneratedAdminKeyId), /*replaced_by_configured_admin_key=*/true});
    if (!retired && retired.code() != Code::not_found) {  // not_found: none was ever generated
      return Error::make(retired.code(), "retiring the generated admin key: " + retired.error().detail);
    }
    if (retired && std::get<KeyOutcome>(retired.value()).created) {
      log_line("info", "the generated admin key is retired: an admin key is configured");
    }
    return ok_status();
  }
  auto has = ledger.has_admin_key();
  if (!has) return has.error();
  if (*has) return ok_status();
  std::string secret;
  bool wrote_file = false;  // this start created admin_key_file (else it found one there)
  if (config.admin_key_file) {
    // A file left by a start that stopped before storing its key: that key is stored now, so that
    // whoever read the file holds the admin key.
    auto existing = service::read_admin_key_file(*config.admin_key_file);
    if (existing) {
      secret = *existing;
    } else if (existing.code() != Code::not_found) {
      return existing.error();
    } else {
      secret = http::new_secret();
      if (auto s = service::write_admin_key_file(*config.admin_key_file, secret); !s) return s;
      wrote_file = true;
    }
  } else {
    secret = http::new_secret();
  }
  auto created = ledger.run(CreateKeyCommand{std::string(kGeneratedAdminKeyId), std::nullopt, http::sha256_hex(secret)});
  if (created) {
    if (config.admin_key_file) {
      log_line("info", std::string(wrote_file ? "generated the admin key into " : "stored the admin key found in ") +
                           *config.admin_key_file + " (mode 0600; it is not printed)");
    } else {
      std::printf("tollgate: generated admin key (shown once, stored hashed): %s\n", secret.c_str());
      std::fflush(stdout);
    }
    return ok_status();
  }
  if (created.code() != Code::conflict) return Error::make(created.code(), "storing the admin key: " + created.error().detail);
  // The key id exists: another instance generated it at the same moment (and printed it or wrote
  // its file), or a configured key retired it. A file this start wrote holds a key that was never
  // stored: it goes.
  if (wrote_file) {
    if (auto s = service::remove_admin_key_file(*config.admin_key_file); !s) log_line("warn", s.error().detail);
  }
  auto again = ledger.has_admin_key();
  if (!again) return again.error();
  if (*again) return ok_status();
  return invalid(
      "the generated admin key was retired when an admin key was configured; configure one here too "
      "(admin_key or TOLLGATE_ADMIN_KEY)");
}

// The reader threads: as many as the store keeps reader connections, so that a read that starts
// finds one free.
int reader_threads(const ServerConfig& config) {
  if (sqlite_path(config.database)) return SqliteOptions{}.readers_max;
  return static_cast<int>(config.database_pool_size);
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
  ledger_options.audit_sample_interval_ms = limits::kAuditSampleIntervalMsDefault;  // one account in turn
  ledger_options.idempotency_retention_ms = config.idempotency_retention_ms;
  if (auto s = validate(ledger_options); !s) {
    log_line("error", s.error().detail);
    return 2;
  }
  Ledger ledger(**store, clock, ledger_options);

  // The job workers: the provider client is destroyed first (after the ledger stopped), so that
  // the answers it still delivers find the runner alive.
  auto provider_client = std::make_unique<jobs::ProviderClient>(jobs::ProviderClientOptions{});
  jobs::JobRunnerOptions runner_options;
  runner_options.instance_id = instance_id();
  runner_options.providers = config.providers;
  runner_options.in_flight_max = static_cast<std::size_t>(config.jobs_in_flight_max);
  jobs::JobRunner runner(ledger, *provider_client, runner_options);
  // The webhook deliverer: delivers while this instance holds the delivery lock (webhooks/delivery_worker.h).
  webhooks::DeliveryWorkerOptions delivery_options;
  delivery_options.owner = runner_options.instance_id;
  delivery_options.body = http::webhook_body;
  webhooks::DeliveryWorker deliverer(ledger, clock, delivery_options);

  http::Authenticator auth(ledger.key_directory(), clock, config.admin_key, &ledger.key_uses());
  http::Metrics metrics(http::Api::route_templates());
  http::ApiOptions api_options;
  api_options.openapi_json = kOpenApiJson;
  api_options.metrics_key = config.metrics_key;
  api_options.auth_failures_limit = config.auth_failures_limit;
  api_options.auth_failures_period_ms = config.auth_failures_period_ms;
  api_options.payments = config.payments;
  std::vector<Cidr> proxies;
  for (const std::string& text : config.trusted_proxies) {
    auto cidr = parse_cidr(text);
    TG_ASSERT(cidr.ok());  // validate_config() checked every one
    proxies.push_back(*cidr);
  }
  api_options.trusted_proxies = TrustedProxies(std::move(proxies));
  // Reads run here, off the I/O threads; it outlives the server (answers go through its strands).
  http::ReadExecutor readers(reader_threads(config), limits::kReadQueueMax);
  jobs::JobService job_service(ledger, &runner);
  api_options.jobs = &job_service;
  std::vector<coord::RatePolicySpec> policy_specs;
  for (const auto& [name, rl] : config.ratelimits) {
    policy_specs.push_back({name, coord::GcraPolicy{rl.limit, rl.period_ms}, rl.store == RateLimitStore::shared,
                            static_cast<std::size_t>(rl.keys_max)});
  }
  const coord::RatePolicies policies(policy_specs);
  http::CoordCounters coord_counters;
  coord::RateLimits rate_limits(ledger, clock, &policies);
  api_options.ratelimits = &rate_limits;
  api_options.coord_counters = &coord_counters;
  api_options.render_metrics = [&] {
    // The default hold TTL, so that a dashboard (the console) can tell an oldest active hold past it.
    static constexpr metrics::Family kHoldTtl{"tollgate_hold_ttl_seconds", metrics::Type::gauge,
                                              "The configured default hold TTL (hold_ttl_ms)."};
    http::Exposition out;
    render_metrics(out, ledger, metrics, readers, clock);
    render_job_metrics(out, runner);
    render_jobs_by_status(out, ledger);
    out.sample(kHoldTtl, "", static_cast<double>(config.hold_ttl_ms) / 1000.0);
    render_coord_metrics(out, policies, coord_counters);
    render_webhook_metrics(out, deliverer);
    return out.text();
  };
  http::Api api(ledger, readers, auth, metrics, clock, std::move(api_options));
  http::HttpServer server(api, metrics, http::ServerLimits{});
  if (config.tls_cert) {
    if (auto s = server.use_tls(*config.tls_cert, *config.tls_key); !s) {
      log_line("error", s.error().detail);
      return 2;
    }
  }
  // Bind before the admin key is generated: a start that fails on a busy port must not print (and
  // so lose) a key that the next start would not print again. Nothing is answered before run().
  auto port = server.listen(listen->host, listen->port);
  if (!port) {
    log_line("error", port.error().detail);
    return 1;
  }
  if (auto s = settle_admin_key(ledger, config); !s) {
    log_line("error", s.error().detail);
    return s.error().code == Code::invalid_request ? 2 : 1;
  }
  log_line("info", "tollgate " + std::string(kVersion) + " listening on " + listen->host + ":" + std::to_string(*port) +
                       ", database " + masked_database(config.database) + (server.tls() ? ", TLS" : ""));
  if (on_listening) on_listening(*port);
  // systemd (Type=notify): the port is bound and the key settled; connections queued from here on
  // are answered as soon as run() starts, right after.
  const auto notify_socket = process_env("NOTIFY_SOCKET");
  if (auto s = service::notify(notify_socket, "READY=1"); !s) log_line("warn", s.error().detail);
  deliverer.start();
  server.run();
  if (auto s = service::notify(notify_socket, "STOPPING=1"); !s) log_line("warn", s.error().detail);
  readers.stop();
  deliverer.stop();  // the delivery lock is released: another instance delivers at once
  runner.stop();  // jobs in flight are handed back (their lease ends now): the next instance takes them over
  ledger.stop();  // writes what is queued, commits
  provider_client.reset();
  log_line("info", "tollgate stopped");
  return 0;
}

}  // namespace tollgate::app
