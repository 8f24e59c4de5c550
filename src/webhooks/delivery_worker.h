// tollgate webhooks: the deliverer — sends every event of the change feed to every enabled endpoint
// that wants it, signed (signature.h), at least once, across crashes, restarts and instances
// (api.md, Webhooks).
//
// One instance delivers at a time: the one that holds the lease lock limits::kWebhookDeliveryLockKey
// (coord/coord.h), renewed every lock_renew_ms. Its fence goes into every record, and an endpoint
// refuses a record whose fence is older than the last one it took (RecordDeliveriesCommand), so a
// deliverer that lost the lock (paused, cut off) can no longer move anything. A deliverer that died
// (kill -9) stops renewing: its lease runs out within lock_ttl_ms and another instance's worker,
// which asks for the lock every lock_renew_ms, takes over. stop() (a graceful shutdown) releases the
// lock at once.
//
// Each endpoint runs rounds, one at a time: read the feed after the endpoint's cursor (at most
// limits::kWebhookFeedEventsPerRoundMax events), keep the events it wants, add its due retries (at
// most limits::kWebhookRetriesPerRoundMax), send them (at most in_flight_per_endpoint_max at once,
// and in_flight_max over every endpoint), wait for every answer (each within timeout_ms), then
// record the attempts and the cursor's move in one batch. Progress is durable only once that record
// is: a deliverer that dies before sends the round again — the same webhook-id, so a receiver
// deduplicates. Endpoints run their rounds independently: a slow or dead receiver holds up only its
// own endpoint. Every queue is bounded by the limits above.
//
// Caught up, the worker waits for the feed (Ledger::when_events_after: a commit on any instance
// wakes it), the next scan of due retries (due_scan_ms) or the next look at the endpoints
// (refresh_ms). Times (attempts, the webhook-timestamp) come from the injected clock; retries are
// due by the store's clock.
//
// Thread safety: start(), stop(), stats() and endpoint_stats() from any thread. The worker's thread
// takes the lock, reads and starts rounds; answers arrive on the HTTP client's threads and records'
// results on the ledger's; the shared state is under one mutex.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/limits.h"
#include "core/model.h"
#include "core/thread_annotations.h"
#include "jobs/provider_client.h"
#include "ledger/ledger.h"
#include "webhooks/webhook.h"

namespace tollgate::webhooks {

struct DeliveryWorkerOptions {
  std::string owner;  // the lock's owner: unique per process (the instance id)
  // The request body of an event's delivery (api.md: {"type", "timestamp", "data"}); required.
  std::function<std::string(const Event&)> body;
  std::size_t in_flight_max = limits::kWebhookInFlightMax;
  std::size_t in_flight_per_endpoint_max = limits::kWebhookInFlightPerEndpointMax;
  std::int64_t timeout_ms = limits::kWebhookDeliveryTimeoutMs;
  std::int64_t lock_ttl_ms = limits::kWebhookDeliveryLockTtlMs;
  std::int64_t lock_renew_ms = limits::kWebhookDeliveryLockRenewMs;
  std::int64_t refresh_ms = limits::kWebhookEndpointsRefreshMs;
  std::int64_t due_scan_ms = limits::kWebhookEndpointsRefreshMs;
  std::int64_t idle_wait_ms = limits::kWebhookIdleWaitMs;
  std::uint64_t seed = 0;  // of the retries' jitter; 0 seeds from the operating system
};

// Counted since start (metrics).
struct DeliveryStats {
  bool delivering = false;           // this instance holds the delivery lock now
  std::uint64_t lock_acquired = 0;   // times this instance became the deliverer
  std::uint64_t rounds = 0;          // rounds recorded
  std::uint64_t records_refused = 0;  // rounds whose record was refused (another deliverer, a replay)
  std::uint64_t delivered = 0, retrying = 0, failed = 0;  // attempts recorded, by outcome
};

// One endpoint's figures on this instance (metrics: by endpoint_id).
struct EndpointDeliveryStats {
  std::string endpoint_id;
  std::uint64_t delivered = 0, retrying = 0, failed = 0;
  // The age of the oldest event the endpoint should have and has not received (0 when caught up).
  std::int64_t oldest_undelivered_ms = 0;
};

class DeliveryWorker {
 public:
  // `ledger`, `clock` outlive the worker. The worker owns its HTTP client (its own connections and
  // thread, apart from the jobs').
  DeliveryWorker(Ledger& ledger, const Clock& clock, DeliveryWorkerOptions options,
                 jobs::ProviderClientOptions http = {});
  ~DeliveryWorker();  // stop()
  DeliveryWorker(const DeliveryWorker&) = delete;
  DeliveryWorker& operator=(const DeliveryWorker&) = delete;

  void start();
  // Stops starting rounds, aborts the requests in flight (their rounds are not recorded: the next
  // deliverer sends them again), waits for the records already submitted, releases the lock.
  // Idempotent; call it before the ledger stops.
  void stop();

  DeliveryStats stats() const;
  // Empty unless this instance delivers. Reads each endpoint's oldest pending delivery (an indexed
  // read per endpoint): for a metrics scrape, not a hot path.
  std::vector<EndpointDeliveryStats> endpoint_stats() const;

 private:
  struct Item;
  struct Round;
  struct EndpointState;

  void run();
  void take_or_renew_lock() EXCLUDES(mu_);
  void lose_lock() REQUIRES(mu_);
  void refresh_endpoints() EXCLUDES(mu_);
  void scan_due() EXCLUDES(mu_);
  void start_rounds() EXCLUDES(mu_);
  void send_more(const std::shared_ptr<Round>& round) REQUIRES(mu_);
  void send(const std::shared_ptr<Round>& round, std::size_t index) REQUIRES(mu_);
  void answered(const std::shared_ptr<Round>& round, std::size_t index, const jobs::Exchange& exchange)
      EXCLUDES(mu_);
  // Called without mu_: the ledger may answer at once, on this thread (recorded() takes mu_).
  void record(const std::shared_ptr<Round>& round) EXCLUDES(mu_);
  void recorded(const std::shared_ptr<Round>& round, const CommandResult& result) EXCLUDES(mu_);
  // Caught-up endpoints wait for the feed: the cursor to wait after (the waiter marked armed), if any.
  std::optional<std::int64_t> feed_waiter_to_arm() REQUIRES(mu_);
  void wait_for_feed(std::int64_t after) EXCLUDES(mu_);
  void release_lock() EXCLUDES(mu_);

  Ledger& ledger_;
  const Clock& clock_;
  const DeliveryWorkerOptions options_;
  std::unique_ptr<jobs::ProviderClient> http_;

  using Steady = std::chrono::steady_clock;

  mutable Mutex mu_;
  CondVar wake_;
  bool started_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool poked_ GUARDED_BY(mu_) = false;
  bool feed_waiter_armed_ GUARDED_BY(mu_) = false;
  std::int64_t fence_ GUARDED_BY(mu_) = 0;  // 0: not the deliverer
  // When the worker's thread next renews (or asks for) the lock, re-reads the endpoints, scans for
  // due retries: intervals of the machine's steady clock (the injected clock may stand still in tests).
  Steady::time_point next_lock_ GUARDED_BY(mu_){};
  Steady::time_point next_refresh_ GUARDED_BY(mu_){};
  Steady::time_point next_due_scan_ GUARDED_BY(mu_){};
  std::size_t in_flight_ GUARDED_BY(mu_) = 0;   // requests over every endpoint
  std::size_t records_pending_ GUARDED_BY(mu_) = 0;  // records submitted, not yet answered
  std::uint64_t records_epoch_ GUARDED_BY(mu_) = 0;  // counts the records that set an endpoint
  std::map<std::string, std::unique_ptr<EndpointState>> endpoints_ GUARDED_BY(mu_);
  std::mt19937_64 rng_ GUARDED_BY(mu_);
  DeliveryStats stats_ GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tollgate::webhooks
